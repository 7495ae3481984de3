"""The streaming k-way merge, without a server: order, limit, look-ahead, resumption, errors, threads.

Pages come from an in-memory paginator that cuts each shard's sorted items into pages the way
DynamoDB does (``Limit`` items per page, a ``LastEvaluatedKey`` whenever a page is full, filtered
items counted but not returned), so the merge is checked against ``sorted`` of the same items.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding import _fanout as fanout
from pynamodb_sharding import _shard_requests as shard_requests
from pynamodb_sharding._cursor import CursorState, MergePosition, RawItem, RawKey, Tie
from pynamodb_sharding._merge import STARTS_AT_POSITION, Page, ShardMerge, Start, StartAt, sort_value
from pynamodb_sharding._pool import fanout_threads
from tests.forked import fork_running

KEY_NAMES = ("pk", "sk")


class Paginator:
    """Serves each shard's items in pages of ``page_size``, like DynamoDB's Query."""

    def __init__(
        self,
        shards: dict[int, list[int]],
        *,
        page_size: int | None,
        forward: bool = True,
        hidden: Iterable[tuple[int, int]] = (),
    ) -> None:
        self.page_size = page_size
        self.hidden = set(hidden)  # (shard, sort key) pairs a filter drops
        self.items = {
            shard: sorted(
                ({"pk": {"S": f"k_{shard}"}, "sk": {"N": str(v)}, "v": {"S": f"{shard}:{v}"}} for v in set(values)),
                key=lambda item: Decimal(item["sk"]["N"]),
                reverse=not forward,
            )
            for shard, values in shards.items()
        }
        self.calls: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.forward = forward
        self.at: Decimal | None = None  # the sort value a stream started at a position reads from

    def __call__(self, shard: int, start: Start) -> Page:
        with self.lock:
            self.calls[shard] += 1
        items = self.items[shard]
        begin = 0
        if isinstance(start, StartAt):
            assert self.at is not None
            at = self.at
            begin = next((i for i, item in enumerate(items)
                          if (Decimal(item["sk"]["N"]) >= at if self.forward else Decimal(item["sk"]["N"]) <= at)),
                         len(items))
        elif start is not None:
            begin = next(i for i, item in enumerate(items) if item["sk"] == start["sk"]) + 1
        end = len(items) if self.page_size is None else min(len(items), begin + self.page_size)
        evaluated = items[begin:end]
        returned = [item for item in evaluated if (shard, int(item["sk"]["N"])) not in self.hidden]
        last = None
        if self.page_size is not None and len(evaluated) == self.page_size:
            last = {name: evaluated[-1][name] for name in KEY_NAMES}
        return Page(returned, last, len(returned), len(evaluated))

    def expected(self, forward: bool) -> list[tuple[int, int]]:
        pairs = [
            (shard, int(item["sk"]["N"]))
            for shard, items in self.items.items()
            for item in items
            if (shard, int(item["sk"]["N"])) not in self.hidden
        ]
        return sorted(pairs, key=lambda pair: (pair[1], pair[0]), reverse=not forward)


def sk_of(item: RawItem) -> Decimal | str | bytes:
    return sort_value(item["sk"])


def merge(paginator: Any, starts: dict[int, Start], **kwargs: Any) -> ShardMerge:
    return ShardMerge(paginator, starts, sort_key=sk_of, key_names=KEY_NAMES, max_workers=4, sort_name="sk",
                      tie_names=KEY_NAMES, **kwargs)


def resumed(paginator: Paginator, state: CursorState, shards: Iterable[int]) -> tuple[dict[int, Start], dict[str, Any]]:
    """Where a query resuming from ``state`` starts each shard, and the merge's ``after``, as
    ``merged_query`` does it: every stream at the position's sort value."""
    after = state.after
    if after is None:
        return {shard: state.positions.get(shard) for shard in shards}, {}
    assert after.value is not None
    paginator.at = Decimal(after.value["N"])
    return {shard: state.positions.get(shard, STARTS_AT_POSITION) for shard in shards}, {"after": after}


def drain(merged: ShardMerge) -> list[tuple[int, int]]:
    return [(shard, int(item["sk"]["N"])) for shard, item in merged]


shard_items = st.dictionaries(
    st.integers(min_value=1, max_value=6),
    st.lists(st.integers(min_value=-5, max_value=40), max_size=25),
    min_size=1,
    max_size=6,
)


class TestMergeOrder:
    """The merge yields exactly ``sorted`` of every shard's items, in either direction."""

    @settings(max_examples=60, deadline=None)
    @given(shard_items, st.one_of(st.none(), st.integers(1, 7)), st.booleans())
    def test_merge_equals_sorted(self, shards: dict[int, list[int]], page_size: int | None, forward: bool) -> None:
        paginator = Paginator(shards, page_size=page_size, forward=forward)
        merged = merge(paginator, dict.fromkeys(shards), forward=forward)
        assert paginator.expected(forward) == drain(merged)

    def test_ties_are_broken_by_shard_in_both_directions(self) -> None:
        shards = {1: [5, 7], 2: [5, 6], 3: [5]}
        ascending = drain(merge(Paginator(shards, page_size=1), dict.fromkeys(shards)))
        descending = drain(merge(Paginator(shards, page_size=1, forward=False), dict.fromkeys(shards), forward=False))
        assert ascending == [(1, 5), (2, 5), (3, 5), (2, 6), (1, 7)]
        assert list(reversed(ascending)) == descending

    def test_filtered_pages_are_skipped(self) -> None:
        shards = {1: list(range(10)), 2: list(range(10))}
        hidden = {(1, v) for v in range(8)}
        paginator = Paginator(shards, page_size=2, hidden=hidden)
        assert paginator.expected(True) == drain(merge(paginator, dict.fromkeys(shards)))


class TestLimit:
    """``limit`` stops the merge, and no shard is read more than one page ahead."""

    @settings(max_examples=40, deadline=None)
    @given(shard_items, st.integers(1, 7), st.integers(0, 30))
    def test_limit_takes_a_prefix(self, shards: dict[int, list[int]], page_size: int, limit: int) -> None:
        paginator = Paginator(shards, page_size=page_size)
        merged = merge(paginator, dict.fromkeys(shards), limit=limit)
        assert paginator.expected(True)[:limit] == drain(merged)

    def test_no_page_beyond_one_look_ahead(self) -> None:
        shards = {shard: list(range(100)) for shard in (1, 2, 3)}
        paginator = Paginator(shards, page_size=5)
        merged = merge(paginator, dict.fromkeys(shards), limit=6)
        assert len(drain(merged)) == 6
        # Shard 1 gave items 0..1 from its first page; no shard needs more than its first
        # two pages for 6 items, and prefetch asks for at most one page beyond that.
        assert all(calls <= 2 for calls in paginator.calls.values()), paginator.calls

    def test_a_page_covering_the_limit_is_not_followed(self) -> None:
        shards = {1: list(range(100)), 2: list(range(100))}
        paginator = Paginator(shards, page_size=10)
        assert len(drain(merge(paginator, dict.fromkeys(shards), limit=10))) == 10
        assert dict(paginator.calls) == {1: 1, 2: 1}

    def test_limit_zero_sends_nothing(self) -> None:
        paginator = Paginator({1: [1, 2]}, page_size=1)
        assert drain(merge(paginator, {1: None}, limit=0)) == []
        assert sum(paginator.calls.values()) == 0


class TestHeldItems:
    """``next_held`` (the async result's hand-over of an item a batch holds) takes exactly the
    item ``next_as`` would, or nothing, and never one whose taking may need a page."""

    @settings(max_examples=60, deadline=None)
    @given(shard_items, st.one_of(st.none(), st.integers(1, 7)), st.one_of(st.none(), st.integers(0, 30)),
           st.lists(st.booleans(), min_size=1))
    def test_taking_held_items_first_changes_nothing(
        self, shards: dict[int, list[int]], page_size: int | None, limit: int | None, pattern: list[bool],
    ) -> None:
        reference = merge(Paginator(shards, page_size=page_size), dict.fromkeys(shards), limit=limit)
        expected = drain(reference)
        paginator = Paginator(shards, page_size=page_size)
        merged = merge(paginator, dict.fromkeys(shards), limit=limit)
        got: list[tuple[int, int]] = []
        held_taken = 0
        for turn in itertools.count():
            if pattern[turn % len(pattern)]:
                calls = sum(paginator.calls.values())
                held = merged.next_held(lambda shard, item: (shard, int(item["sk"]["N"])), None)
                if held is not None:
                    assert sum(paginator.calls.values()) == calls  # nothing sent for it
                    got.append(held)
                    held_taken += 1
                    continue
            try:
                got.append(merged.next_as(lambda shard, item: (shard, int(item["sk"]["N"]))))
            except StopIteration:
                break
        assert expected == got
        assert reference.state() == merged.state()
        assert merged.returned == len(expected)
        if all(pattern) and page_size is None and len(expected) > 2:
            assert held_taken > 0  # a batch of every shard's whole items: all but its last held

    def test_the_last_item_of_a_batch_is_not_held(self) -> None:
        merged = merge(Paginator({1: [1, 3], 2: [2]}, page_size=None), {1: None, 2: None})
        take = lambda: merged.next_held(lambda shard, item: int(item["sk"]["N"]), None)  # noqa: E731
        assert merged.next_as(lambda shard, item: int(item["sk"]["N"])) == 1  # sorts the batch
        assert take() == 2
        assert take() is None  # 3 is the batch's last: its taking may ask for pages
        assert merged.next_as(lambda shard, item: int(item["sk"]["N"])) == 3


class TestStreaming:
    """At most the current page and one prefetched page per shard are held."""

    def test_requests_stay_one_page_ahead_of_consumption(self) -> None:
        shards = {1: list(range(0, 300, 3)), 2: list(range(1, 300, 3)), 3: list(range(2, 300, 3))}
        paginator = Paginator(shards, page_size=4)
        merged = merge(paginator, dict.fromkeys(shards))
        seen: Counter[int] = Counter()
        for shard, _item in merged:
            seen[shard] += 1
            time.sleep(0)  # let prefetches run
            for s in shards:
                pages_consumed = seen[s] // 4 + 1
                assert paginator.calls[s] <= pages_consumed + 1


class TestResumption:
    """Resuming from ``state()`` after any number of items loses and repeats nothing."""

    @settings(max_examples=60, deadline=None)
    @given(
        shard_items,
        st.one_of(st.none(), st.integers(1, 5)),
        st.booleans(),
        st.lists(st.integers(1, 6), min_size=1, max_size=10),
    )
    def test_resume_after_every_cut(
        self, shards: dict[int, list[int]], page_size: int | None, forward: bool, cuts: list[int]
    ) -> None:
        paginator = Paginator(shards, page_size=page_size, forward=forward)
        starts: dict[int, Start] = dict.fromkeys(shards)
        given: dict[str, Any] = {}
        got: list[tuple[int, int]] = []
        for cut in [*cuts, 10_000]:
            merged = merge(paginator, starts, forward=forward, limit=cut, **given)
            got.extend(drain(merged))
            state, remaining = merged.state()
            starts, given = resumed(paginator, state, shards)
            if not remaining:
                break
        assert paginator.expected(forward) == got

    def test_state_before_start_is_the_given_start(self) -> None:
        start = {"pk": {"S": "k_1"}, "sk": {"N": "3"}}
        given = CursorState(positions={1: start})
        merged = merge(Paginator({1: [1, 2, 3, 4]}, page_size=2), {1: start, 2: None})
        state, remaining = merged.state(given)
        assert remaining
        assert given == state

    def test_everything_returned_leaves_a_position_after_the_last_item(self) -> None:
        """Read to the end, a cursor resumes after the last item returned, in every shard: items
        written later ahead of it are read, as a plain query's cursor reads them."""
        merged = merge(Paginator({1: [1, 2], 2: [3]}, page_size=None), {1: None, 2: None})
        assert len(drain(merged)) == 3
        state, remaining = merged.state()
        assert not remaining
        tie = Tie({"pk": {"S": "k_2"}, "sk": {"N": "3"}}, copy=False)
        assert CursorState(after=MergePosition({"N": "3"}, (tie,))) == state


class TestFailuresAndThreads:
    """A shard's error reaches the consumer; closing releases the pool's threads."""

    def test_error_of_one_shard_propagates_on_every_call(self) -> None:
        class Boom(Exception):
            pass

        good = Paginator({1: list(range(10))}, page_size=2)
        calls: Counter[int] = Counter()

        def fetch(shard: int, start: RawKey | None) -> Page:
            calls[shard] += 1
            if shard == 2:
                raise Boom("shard 2 failed")
            return good(shard, start)

        merged = ShardMerge(fetch, {1: None, 2: None}, sort_key=sk_of, key_names=KEY_NAMES, max_workers=2)
        for attempt in range(1, 4):
            with pytest.raises(Boom, match="shard 2 failed"):
                next(merged)
            assert calls[2] == attempt  # the failed request is sent again by each call
        assert not merged.closed
        state, remaining = merged.state()
        assert remaining
        assert 2 not in state.positions  # shard 2 resumes from its start
        merged.close()
        assert list(merged) == []

    def test_closing_a_partly_read_merge_cancels_its_queued_requests(self) -> None:
        """8 shards, 2 requests at a time: closing while 2 prefetches wait leaves 6 unsent."""
        gate = threading.Event()
        slow = Paginator({s: list(range(50)) for s in range(1, 9)}, page_size=2)
        calls = []

        def fetch(shard: int, start: RawKey | None) -> Page:
            calls.append(shard)
            if start is not None:
                gate.wait(5)
            return slow(shard, start)

        merged = ShardMerge(fetch, dict.fromkeys(range(1, 9)), sort_key=sk_of, key_names=KEY_NAMES, max_workers=2)
        next(merged)  # every shard's first page (8 requests), then 8 prefetches: at most 2 sent
        merged.close()
        gate.set()
        time.sleep(0.3)
        assert 8 <= len(calls) <= 8 + 2  # the queued prefetches were never sent
        fanout = [thread for thread in threading.enumerate() if thread.name.startswith("pynamodb-sharding-fanout")]
        assert 0 < len(fanout) <= fanout_threads()

    def test_garbage_collection_cancels_queued_requests(self) -> None:
        gate = threading.Event()
        paginator = Paginator({s: list(range(50)) for s in range(1, 5)}, page_size=2)
        calls = []

        def fetch(shard: int, start: RawKey | None) -> Page:
            calls.append(shard)
            if start is not None:
                gate.wait(5)
            return paginator(shard, start)

        merged = ShardMerge(fetch, dict.fromkeys(range(1, 5)), sort_key=sk_of, key_names=KEY_NAMES, max_workers=1)
        next(merged)  # 4 first pages, then 4 prefetches: at most 1 sent
        del merged
        gate.set()
        time.sleep(0.3)
        assert 4 <= len(calls) <= 4 + 1  # the queued prefetches were never sent


class Boom(Exception):
    """An injected failure of one page request."""


class Flaky:
    """Raises ``Boom`` on the listed calls (1-based, in the order the threads make them)."""

    def __init__(self, paginator: Paginator, failing: Iterable[int]) -> None:
        self.paginator = paginator
        self.failing = set(failing)
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, shard: int, start: Start) -> Page:
        with self.lock:
            self.calls += 1
            call = self.calls
        if call in self.failing:
            raise Boom(f"call {call}")
        return self.paginator(shard, start)


def drain_through_errors(merged: ShardMerge, max_errors: int) -> tuple[list[tuple[int, int]], int]:
    got: list[tuple[int, int]] = []
    errors = 0
    while True:
        try:
            shard, item = next(merged)
        except StopIteration:
            return got, errors
        except Boom:
            errors += 1
            assert errors <= max_errors, "a failure was raised more often than it happened"
            continue
        got.append((shard, int(item["sk"]["N"])))


class TestErrorsMidway:
    """After a failed page, the next call re-sends it and the merge goes on: nothing lost or repeated."""

    @settings(max_examples=80, deadline=None)
    @given(
        shard_items,
        st.integers(1, 5),
        st.booleans(),
        st.sets(st.integers(1, 25), max_size=6),
        st.one_of(st.none(), st.integers(0, 40)),
    )
    def test_errors_lose_and_repeat_nothing(
        self, shards: dict[int, list[int]], page_size: int, forward: bool, failing: set[int], limit: int | None
    ) -> None:
        paginator = Paginator(shards, page_size=page_size, forward=forward)
        flaky = Flaky(paginator, failing)
        merged = ShardMerge(flaky, dict.fromkeys(shards), sort_key=sk_of, key_names=KEY_NAMES,
                            forward=forward, limit=limit, max_workers=3)
        got, errors = drain_through_errors(merged, max_errors=len(failing))
        assert paginator.expected(forward)[:limit] == got
        assert errors <= len(failing)

    @settings(max_examples=60, deadline=None)
    @given(shard_items, st.integers(1, 5), st.booleans(), st.integers(1, 20))
    def test_state_after_an_error_resumes_exactly(
        self, shards: dict[int, list[int]], page_size: int, forward: bool, failing: int
    ) -> None:
        paginator = Paginator(shards, page_size=page_size, forward=forward)
        merged = merge(Flaky(paginator, {failing}), dict.fromkeys(shards), forward=forward)
        got: list[tuple[int, int]] = []
        try:
            got.extend((shard, int(item["sk"]["N"])) for shard, item in merged)
        except Boom:
            state, _remaining = merged.state()
            merged.close()
            starts, given = resumed(paginator, state, shards)
            got.extend(drain(merge(paginator, starts, forward=forward, **given)))
        assert paginator.expected(forward) == got

    def test_a_failed_conversion_leaves_the_item_next(self) -> None:
        merged = merge(Paginator({1: [1, 3], 2: [2]}, page_size=1), {1: None, 2: None})
        seen: list[int] = []

        def convert(shard: int, item: RawItem) -> int:
            value = int(item["sk"]["N"])
            if value == 2 and 2 not in seen:
                seen.append(value)
                raise Boom("cannot convert 2")
            return value

        assert merged.next_as(convert) == 1
        with pytest.raises(Boom):
            merged.next_as(convert)
        assert [merged.next_as(convert), merged.next_as(convert)] == [2, 3]
        with pytest.raises(StopIteration):
            merged.next_as(convert)

    def test_an_interrupted_wait_keeps_the_request(self) -> None:
        """A wait cut short (Ctrl-C) waits for the same request next time: no page is sent twice."""
        paginator = Paginator({1: [1, 2, 3]}, page_size=2)  # two pages: [1, 2] and [3]
        gate = threading.Event()

        def fetch(shard: int, start: RawKey | None) -> Page:
            if start is not None:
                gate.wait(5)
            return paginator(shard, start)

        merged = ShardMerge(fetch, {1: None}, sort_key=sk_of, key_names=KEY_NAMES)
        assert [int(next(merged)[1]["sk"]["N"]) for _ in range(2)] == [1, 2]
        (pending,) = [stream.pending for stream in merged._streams if stream.pending is not None]

        def interrupted(timeout: float | None = None) -> Page:
            raise KeyboardInterrupt

        pending.result = interrupted  # type: ignore[method-assign]  # Ctrl-C during the wait
        with pytest.raises(KeyboardInterrupt):
            next(merged)
        del pending.result
        gate.set()
        assert [int(item["sk"]["N"]) for _shard, item in merged] == [3]
        assert paginator.calls[1] == 2


class TestFork:
    """A merge started before ``os.fork()`` goes on in the child, whose pool is its own."""

    def test_pages_in_flight_at_the_fork_are_sent_again_by_the_child(self) -> None:
        parent = os.getpid()
        release = threading.Event()
        paginator = Paginator({s: list(range(s, 60, 3)) for s in (1, 2, 3)}, page_size=2)

        def fetch(shard: int, start: RawKey | None) -> Page:
            if start is not None and os.getpid() == parent:
                release.wait(10)  # the parent's next pages are in flight at the fork
            return paginator(shard, start)

        merged = ShardMerge(fetch, {1: None, 2: None, 3: None}, sort_key=sk_of, key_names=KEY_NAMES, max_workers=3)
        first = [int(next(merged)[1]["sk"]["N"]) for _ in range(2)]
        child = fork_running(lambda: [int(item["sk"]["N"]) for _shard, item in merged], timeout=20)
        release.set()
        in_parent = [int(item["sk"]["N"]) for _shard, item in merged]
        assert first == [1, 2]
        assert in_parent == list(range(3, 60))
        assert child.result() == list(range(3, 60))

    def test_closing_in_the_child_does_not_wait_for_the_parents_pool(self) -> None:
        parent = os.getpid()
        release = threading.Event()
        paginator = Paginator({1: list(range(10)), 2: list(range(10))}, page_size=2)

        def fetch(shard: int, start: RawKey | None) -> Page:
            if start is not None and os.getpid() == parent:
                release.wait(10)
            return paginator(shard, start)

        merged = ShardMerge(fetch, {1: None, 2: None}, sort_key=sk_of, key_names=KEY_NAMES, max_workers=2)
        next(merged)

        def close_and_collect() -> bool:
            merged.close()
            return merged.closed

        child = fork_running(close_and_collect, timeout=20)
        release.set()
        assert child.result() is True
        merged.close()

    def test_module_locks_are_fresh_in_a_child(self) -> None:
        """A lock a parent's thread held at the fork is not held forever in the child."""
        limiter = shard_requests._SharedRateLimiter(10.0)
        with fanout._warned_lock, limiter._lock:
            child = fork_running(
                lambda: fanout._warned_lock.acquire(timeout=2) and limiter._lock.acquire(timeout=2),
                timeout=20,
            )
        assert child.result() is True


def _still_alive(threads: set[threading.Thread], timeout: float = 5.0) -> list[threading.Thread]:
    """The threads of ``threads`` still running after waiting up to ``timeout`` seconds.

    Only the threads the test saw start are watched: other tests' threads (xdist, servers)
    come and go on their own.
    """
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


class TestSortValue:
    """Raw key values compare the way DynamoDB sorts them."""

    def test_strings_compare_as_utf8_bytes(self) -> None:
        bmp_high, astral = "\uffff", "\U0001f600"
        assert bmp_high.encode("utf-16-be") > astral.encode("utf-16-be")  # UTF-16 order (Java's)...
        assert sort_value({"S": bmp_high}) < sort_value({"S": astral})  # ...is not DynamoDB's

    def test_numbers_compare_numerically(self) -> None:
        values = ["10", "9", "-1", "0.5", "1E2", "-1e-3"]
        ordered = sorted(values, key=lambda v: sort_value({"N": v}))
        assert ordered == ["-1", "-1e-3", "0.5", "9", "10", "1E2"]

    def test_binary_compares_as_bytes(self) -> None:
        assert sort_value({"B": b"\x00\xff"}) < sort_value({"B": b"\x01"})
        assert sort_value({"B": "AP8="}) == b"\x00\xff"  # base64 text, as in a JSON cursor

    @settings(max_examples=100, deadline=None)
    @given(st.text(), st.text())
    def test_string_order_is_utf8_order(self, a: str, b: str) -> None:
        assert (a.encode() < b.encode()) == (sort_value({"S": a}) < sort_value({"S": b}))


class SharePaginator(Paginator):
    """The paginator, also serving requests of a given ``Limit`` (share mode), and counting
    the items each request read."""

    def __init__(self, shards: dict[int, list[int]], **kwargs: Any) -> None:
        super().__init__(shards, page_size=None, **kwargs)
        self.read = 0
        self.limits: list[int] = []

    def share(self, shard: int, start: Start, limit: int) -> Page:
        with self.lock:
            self.limits.append(limit)
        self.page_size = limit
        try:
            page = Paginator.__call__(self, shard, start)
        finally:
            self.page_size = None
        with self.lock:
            self.read += page.scanned_count
        return page


class TestShareMode:
    """With ``fetch_share``, each shard is asked for its share of the limit, refilled only when
    the merge needs its next item: the output and the cursor are those of the plain merge."""

    @settings(max_examples=80, deadline=None)
    @given(shard_items, st.integers(1, 40), st.booleans(), st.lists(st.integers(1, 12), min_size=1, max_size=6))
    def test_same_items_and_exact_resumption(
        self, shards: dict[int, list[int]], limit: int, forward: bool, cuts: list[int],
    ) -> None:
        paginator = SharePaginator(shards, forward=forward)
        starts: dict[int, Start] = dict.fromkeys(shards)
        given: dict[str, Any] = {}
        got: list[tuple[int, int]] = []
        for cut in itertools.cycle([min(cut, limit) for cut in cuts]):  # pages of a limit each
            merged = merge(paginator, starts, forward=forward, limit=cut, fetch_share=paginator.share, **given)
            got.extend(drain(merged))
            state, remaining = merged.state()
            starts, given = resumed(paginator, state, shards)
            if not remaining:
                break
            assert len(got) <= 200, "the pages do not advance"
        assert got == paginator.expected(forward)

    def test_first_requests_ask_for_the_share(self) -> None:
        shards = {shard: list(range(shard, 400, 10)) for shard in range(1, 11)}  # interleaved evenly
        paginator = SharePaginator(shards)
        merged = ShardMerge(paginator, dict.fromkeys(shards), sort_key=sk_of, key_names=KEY_NAMES,
                            max_workers=10, limit=20, fetch_share=paginator.share)
        assert [sk for _, sk in drain(merged)] == sorted(v for vs in shards.values() for v in vs)[:20]
        assert paginator.limits[:10] == [3] * 10  # 1.5 x 20 / 10 shards
        assert paginator.read <= 1.5 * 20 + 10  # the plain merge would read 10 x 20 = 200

    def test_a_skewed_shard_is_refilled_alone(self) -> None:
        shards = {1: list(range(100)), 2: [1000], 3: [1001]}  # every wanted item is in shard 1
        paginator = SharePaginator(shards)
        merged = ShardMerge(paginator, dict.fromkeys(shards), sort_key=sk_of, key_names=KEY_NAMES,
                            max_workers=3, limit=30, fetch_share=paginator.share)
        assert [sk for _, sk in drain(merged)] == list(range(30))
        assert paginator.calls[2] == paginator.calls[3] == 1
        assert paginator.read <= 2 * 30 + 3
