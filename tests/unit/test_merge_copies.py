"""The merge of an index query while a job moves table items: each item once, across page tokens.

An index query may meet two entries of one table item (its old and its new copy) at one index
sort value, in one stream or in two. Proves, for any entries spread over streams, with copies
in any stream, entries a filter drops (which may end a page) and any page size: the merge
returns every item once; and resumed from ``state()`` after any cut into pages, once again
(the cursor also names the items returned at the value a page ends at that no stream's start
key stands for).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._cursor import MAX_TIES, CursorState, MergePosition, RawKey, Tie
from pynamodb_sharding._merge import STARTS_AT_POSITION, Page, ShardMerge, Start, StartAt, sort_value

KEY_NAMES = ("pk", "sk", "tk")


def entry(stream: int, value: int, table_key: str) -> dict[str, Any]:
    return {"pk": {"S": f"day_{stream}"}, "sk": {"N": str(value)}, "tk": {"S": table_key}}


def copies(item: dict[str, Any]) -> tuple[Any, bool]:
    """``i3#bare`` and ``i3#1`` are two copies of item 3; the bare one may be a copy."""
    logical, _, where = item["tk"]["S"].partition("#")
    return logical, where == "bare"


def resumes_after(start: RawKey) -> bool:
    return not start["tk"]["S"].endswith("#bare")


class Index:
    """Each stream's entries in index order, served in pages of ``page_size``, as a Query; a
    stream started at a position reads from its sort value, included (``at``)."""

    def __init__(self, entries: list[dict[str, Any]], hidden: set[str], page_size: int | None) -> None:
        self.streams: dict[int, list[dict[str, Any]]] = {}
        for item in sorted(entries, key=lambda item: (Decimal(item["sk"]["N"]), item["tk"]["S"])):
            self.streams.setdefault(int(item["pk"]["S"][4:]), []).append(item)
        self.hidden = hidden
        self.page_size = page_size
        self.at: Decimal | None = None

    def __call__(self, stream: int, start: Start) -> Page:
        items = self.streams.get(stream, [])
        if isinstance(start, StartAt):
            assert self.at is not None
            begin = next((n for n, item in enumerate(items) if Decimal(item["sk"]["N"]) >= self.at), len(items))
        else:
            begin = 0 if start is None else next(n for n, item in enumerate(items) if item == start) + 1
        end = len(items) if self.page_size is None else min(len(items), begin + self.page_size)
        evaluated = items[begin:end]
        returned = [item for item in evaluated if item["tk"]["S"] not in self.hidden]
        last = dict(evaluated[-1]) if self.page_size is not None and len(evaluated) == self.page_size else None
        return Page(returned, last, len(returned), len(evaluated))


def resume(index: Index, state: CursorState | None) -> tuple[dict[int, Start], dict[str, Any]]:
    """The starts and the merge's arguments of a query resuming from ``state`` (as merged_query)."""
    if state is None or state.after is None:
        index.at = None
        return {stream: (state.positions.get(stream) if state else None) for stream in index.streams}, {}
    value = state.after.value
    assert value is not None
    index.at = Decimal(value["N"])
    return ({stream: state.positions.get(stream, STARTS_AT_POSITION) for stream in index.streams},
            {"after": state.after})


def merge(index: Index, limit: int | None, state: CursorState | None, fetch: Any = None) -> ShardMerge:
    starts, resumed = resume(index, state)
    return ShardMerge(fetch or index, starts, sort_key=lambda item: sort_value(item["sk"]), key_names=KEY_NAMES,
                      limit=limit, copies=copies, resumes_after=resumes_after, sort_name="sk", tie_names=("tk",),
                      **resumed)


@st.composite
def layouts(draw: st.DrawFn, ties: bool = True) -> tuple[list[dict[str, Any]], set[str]]:
    entries: list[dict[str, Any]] = []
    hidden: set[str] = set()
    for number in range(draw(st.integers(1, 12))):
        value = draw(st.integers(0, 4)) if ties else number  # few values: many ties
        kind = draw(st.sampled_from(["bare", "sharded", "both", "filtered"]))
        first, second = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        if kind in ("bare", "both"):
            entries.append(entry(first, value, f"i{number}#bare"))
        if kind in ("sharded", "both", "filtered"):
            entries.append(entry(second, value, f"i{number}#{draw(st.integers(1, 4))}"))
        if kind == "filtered":
            hidden.add(entries[-1]["tk"]["S"])
    return entries, hidden


@settings(max_examples=300, deadline=None)
@given(layout=layouts(), page_size=st.sampled_from([None, 1, 2, 3]))
def test_each_item_once(layout: tuple[list[dict[str, Any]], set[str]], page_size: int | None) -> None:
    entries, hidden = layout
    index = Index(entries, hidden, page_size)
    unpaged = [copies(item)[0] for _, item in merge(index, None, None)]
    assert sorted(unpaged) == sorted({copies(item)[0] for item in entries if item["tk"]["S"] not in hidden})


@settings(max_examples=300, deadline=None)
@given(layout=layouts(), page_size=st.sampled_from([None, 1, 2, 3]), limit=st.integers(1, 4))
def test_each_item_once_across_any_page_break(layout: tuple[list[dict[str, Any]], set[str]],
                                              page_size: int | None, limit: int) -> None:
    entries, hidden = layout
    index = Index(entries, hidden, page_size)
    expected = sorted({copies(item)[0] for item in entries if item["tk"]["S"] not in hidden})

    paged: list[str] = []
    state: CursorState | None = None
    for _ in range(50):
        merged = merge(index, limit, state)
        paged += [copies(item)[0] for _, item in merged]
        state, remaining = merged.state(state)
        if not remaining:
            break
    assert sorted(paged) == expected


def test_a_bare_entry_returned_before_the_break_skips_its_copy_behind_another_streams_start() -> None:
    """The stream that ends the page stops at a filtered entry beyond the item; the item's
    shard copy waits in a third stream behind another entry (found by review)."""
    entries = [entry(3, 1, "a#1"), entry(3, 9, "gone#1"), entry(1, 5, "b#bare"),
               entry(2, 2, "c#1"), entry(2, 5, "e#1"), entry(2, 5, "b#2"), entry(3, 10, "later#1")]
    index = Index(entries, {"gone#1"}, page_size=2)
    first = merge(index, 3, None)
    assert [copies(item)[0] for _, item in first] == ["a", "c", "b"]
    state, _ = first.state()
    assert state.after == MergePosition({"N": "5"}, (Tie({"tk": {"S": "b#bare"}}, copy=True),))
    assert [copies(item)[0] for _, item in merge(index, None, state)] == ["e", "later"]


class FailsOnce:
    """An index whose first request fails (a throttled request the caller sees)."""

    def __init__(self, index: Index) -> None:
        self.index, self.failed = index, False

    def __call__(self, stream: int, start: Start) -> Page:
        if not self.failed:
            self.failed = True
            raise RuntimeError("throttled")
        return self.index(stream, start)


def tied_break() -> tuple[Index, CursorState]:
    """A page that ends at value 5 after x and y tie there; x's bare copy waits behind in stream 2."""
    index = Index([entry(1, 5, "x#1"), entry(1, 5, "y#1"), entry(2, 3, "z#1"), entry(2, 5, "x#bare")],
                  set(), page_size=1)
    first = merge(index, 3, None)
    assert [copies(item)[0] for _, item in first] == ["z", "x", "y"]
    state, _ = first.state()
    assert state.after is not None
    assert [(tie.key["tk"]["S"], tie.copy) for tie in state.after.ties] == [("x#1", False), ("y#1", False)]
    return index, state


def test_a_cursor_taken_after_a_failed_request_still_names_the_items_returned_at_the_break() -> None:
    index, state = tied_break()
    failing = merge(index, 2, state, fetch=FailsOnce(index))
    with pytest.raises(RuntimeError, match="throttled"):
        next(failing)
    again, _ = failing.state(state)
    assert again == state
    assert [copies(item)[0] for _, item in merge(index, None, again)] == []


def test_an_item_written_behind_the_break_is_not_read_and_the_next_cursor_keeps_the_ties() -> None:
    """An item written before the break's sort value between two pages is behind the position,
    as it is behind a plain query's cursor; one written at that value is read."""
    index, state = tied_break()
    index.streams[2].insert(1, entry(2, 4, "w#1"))  # behind the break
    index.streams[2].append(entry(2, 5, "v#1"))  # at the break's value: ahead of x and y
    second = merge(index, 1, state)
    assert [copies(item)[0] for _, item in second] == ["v"]
    state, _ = second.state()
    assert state.after is not None
    assert [tie.key["tk"]["S"] for tie in state.after.ties] == ["x#1", "y#1", "v#1"]
    assert [copies(item)[0] for _, item in merge(index, None, state)] == []


def test_a_cursor_names_at_most_its_limit_of_ties_where_every_entry_ties() -> None:
    """An index without a range key: every entry has one sort value. Beyond MAX_TIES items at
    it, the cursor names the latest and where each stream stopped."""
    index = Index([entry(1 + number % 3, 0, f"i{number:03}#1") for number in range(300)], set(), page_size=7)
    state: CursorState | None = None
    seen: list[str] = []
    sizes: list[int] = []
    for _ in range(40):
        merged = merge(index, 20, state)
        seen += [copies(item)[0] for _, item in merged]
        state, remaining = merged.state(state)
        assert state.after is not None
        sizes.append(len(state.after.ties))
        if not remaining:
            break
    assert sorted(seen) == sorted(f"i{number:03}" for number in range(300))
    assert max(sizes) == MAX_TIES


def batched(index: Index, limit: int | None, state: CursorState | None) -> ShardMerge:
    """An index query whose items never move (a model that shards only an index): merged a batch
    at a time, items of one sort value told apart by their table keys."""
    starts, resumed = resume(index, state)
    return ShardMerge(index, starts, sort_key=lambda item: sort_value(item["sk"]), key_names=KEY_NAMES,
                      limit=limit, sort_name="sk", tie_names=("tk",), ties_are_copies=False, **resumed)


@st.composite
def tied_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Entries of distinct items over three streams, few sort values: many ties."""
    count = draw(st.integers(1, 60))
    return [entry(draw(st.integers(1, 3)), draw(st.integers(0, 3)), f"i{number}#1") for number in range(count)]


@settings(max_examples=300, deadline=None)
@given(entries=tied_entries(), page_size=st.sampled_from([None, 1, 2, 3, 7]), limit=st.integers(1, 9))
def test_an_index_query_merged_in_batches_returns_each_item_once_across_page_breaks(
    entries: list[dict[str, Any]], page_size: int | None, limit: int,
) -> None:
    index = Index(entries, set(), page_size)
    expected = sorted((int(item["sk"]["N"]), item["tk"]["S"]) for item in entries)
    unpaged = [(int(item["sk"]["N"]), item["tk"]["S"]) for _, item in batched(index, None, None)]
    assert expected == sorted(unpaged)
    assert [value for value, _ in unpaged] == sorted(value for value, _ in unpaged)
    paged: list[tuple[int, str]] = []
    state: CursorState | None = None
    for _ in range(200):
        merged = batched(index, limit, state)
        paged += [(int(item["sk"]["N"]), item["tk"]["S"]) for _, item in merged]
        state, remaining = merged.state(state)
        if not remaining:
            break
    assert expected == sorted(paged)
    assert len(paged) == len(set(paged))
    assert [value for value, _ in paged] == sorted(value for value, _ in paged)
