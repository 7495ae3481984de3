"""A merged query resumed after every page yields exactly the sorted matching items (DynamoDB Local).

For random shard counts, item placements (ties on equal sort keys across shards included),
directions, range conditions, filters, ``limit`` and ``page_size``, reading a key page by page
(each page a new query given the previous page's cursor after a JSON round trip, or its
``next_page_token``) returns every
matching item once, in ``(sort key, shard)`` order, with logical keys. One table serves every
example; each example writes under a fresh logical key.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.expressions.condition import Condition

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels
from tests.raw import put_raw


class Event(ShardedModel):
    class Meta:
        table_name = "fanout_event"

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    kind = UnicodeAttribute()
    shards = Sharding(RandomShards(8))


@pytest.fixture
def event_table(dynamodb_models: BindModels) -> Iterator[RandomShards]:
    """The bound ``Event`` table and its strategy, whose count a test may change (restored after)."""
    dynamodb_models(Event)
    strategy = Event.shards.strategy
    assert isinstance(strategy, RandomShards)
    saved = strategy.count, strategy.max_shards
    yield strategy
    strategy.count, strategy.max_shards = saved


def set_count(strategy: RandomShards, count: int) -> None:
    strategy.count = strategy.max_shards = count


placements = st.integers(1, 8).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(1, n), st.integers(0, 30), st.sampled_from(["keep", "drop"])),
                 max_size=40, unique_by=lambda t: (t[0], t[1])),
    )
)
conditions = st.one_of(
    st.none(),
    st.builds(lambda x: ("ge", x), st.integers(0, 30)),
    st.builds(lambda x: ("lt", x), st.integers(0, 30)),
    st.builds(lambda a, b: ("between", min(a, b), max(a, b)), st.integers(0, 30), st.integers(0, 30)),
)


def range_condition(spec: tuple[Any, ...] | None) -> Condition | None:
    if spec is None:
        return None
    if spec[0] == "ge":
        return Event.at >= spec[1]
    if spec[0] == "lt":
        return Event.at < spec[1]
    return Event.at.between(spec[1], spec[2])


def matches(spec: tuple[Any, ...] | None, at: int) -> bool:
    if spec is None:
        return True
    if spec[0] == "ge":
        return bool(at >= spec[1])
    if spec[0] == "lt":
        return bool(at < spec[1])
    return bool(spec[1] <= at <= spec[2])


# Read backward, the first item returned sits on the condition's lower bound: its shard is read
# to the end, and DynamoDB refuses a request that starts there (found by CI).
@example(placement=(2, [(1, 0, "keep"), (2, 0, "keep")]), forward=False, condition=("ge", 0), filtered=False,
         limit=None, page_size=None, stop_after=1, use_token=False)
@example(placement=(2, [(1, 30, "keep"), (2, 30, "keep")]), forward=True, condition=("between", 0, 30),
         filtered=False, limit=None, page_size=None, stop_after=1, use_token=True)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    placement=placements,
    forward=st.booleans(),
    condition=conditions,
    filtered=st.booleans(),
    limit=st.one_of(st.none(), st.integers(1, 12)),
    page_size=st.one_of(st.none(), st.integers(1, 6)),
    stop_after=st.integers(1, 9),
    use_token=st.booleans(),
)
def test_resuming_after_every_page_yields_sorted_matches(
    event_table: RandomShards,
    placement: tuple[int, list[tuple[int, int, str]]],
    forward: bool,
    condition: tuple[Any, ...] | None,
    filtered: bool,
    limit: int | None,
    page_size: int | None,
    stop_after: int,
    use_token: bool,
) -> None:
    count, rows = placement
    set_count(event_table, count)
    stream = f"s-{uuid.uuid4().hex[:8]}"
    put_raw(Event, [
        {"stream": {"S": f"{stream}_{shard}"}, "at": {"N": str(at)}, "kind": {"S": kind}}
        for shard, at, kind in rows
    ])
    expected = sorted(
        ((at, shard) for shard, at, kind in rows
         if matches(condition, at) and (not filtered or kind == "keep")),
        reverse=not forward,
    )

    got: list[tuple[int, int]] = []
    cursor: dict[str, Any] | str | None = None
    for _page in range(len(rows) + 3):
        results = Event.query(
            stream,
            range_key_condition=range_condition(condition),
            filter_condition=(Event.kind == "keep") if filtered else None,
            scan_index_forward=forward,
            limit=limit,
            page_size=page_size,
            last_evaluated_key=cursor,
        )
        # Without a limit, the caller stops reading after a few items: the cursor must still
        # resume right after the last item returned.
        for taken, item in enumerate(results, start=1):
            assert item.stream == stream
            got.append((int(item.at), item.shards))
            if limit is None and taken == stop_after:
                break
        cursor = results.next_page_token if use_token else results.last_evaluated_key
        results.close()
        if cursor is None:
            break
        if not use_token:
            cursor = json.loads(json.dumps(cursor))
    else:
        pytest.fail(f"the query did not finish within {len(rows) + 3} pages")
    assert expected == got
