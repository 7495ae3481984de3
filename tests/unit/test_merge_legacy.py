"""The merge of a ``legacy_unsharded`` key: the bare-key stream yields to sharded copies.

Proves, for any items spread over a legacy stream (label -1) and shards, any page size, either
direction, and any cut into pages resumed from ``state()``: every sort value comes out once per
sharded copy, the legacy copy only when no shard holds that item, and never twice across a
resumption.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._cursor import CursorState
from pynamodb_sharding._merge import ShardMerge
from tests.unit.test_merge import KEY_NAMES, Paginator, resumed, sk_of

LEGACY = -1

values = st.sets(st.integers(0, 30), max_size=15)


def expected(shards: dict[int, set[int]], forward: bool) -> list[tuple[int, int]]:
    in_shards = {v for shard, vs in shards.items() if shard != LEGACY for v in vs}
    pairs = [(shard, v) for shard, vs in shards.items() for v in vs if shard != LEGACY or v not in in_shards]
    # Ties: shards in order, the legacy copy (never tied with a sharded one here) anywhere.
    return sorted(pairs, key=lambda pair: (pair[1], pair[0]), reverse=not forward)


def run(shards: dict[int, set[int]], page_size: int | None, forward: bool, limit: int | None,
        state: CursorState | None = None) -> tuple[list[tuple[int, int]], ShardMerge]:
    paginator = Paginator({shard: sorted(vs) for shard, vs in shards.items()}, page_size=page_size, forward=forward)
    starts, given = resumed(paginator, state, shards) if state is not None else (dict.fromkeys(shards), {})
    merged = ShardMerge(paginator, starts, sort_key=sk_of, key_names=KEY_NAMES, sort_name="sk", tie_names=KEY_NAMES,
                        forward=forward, limit=limit, max_workers=2, shadowed=(LEGACY,), **given)
    return [(shard, int(item["sk"]["N"])) for shard, item in merged], merged


@settings(max_examples=150, deadline=None)
@given(legacy=values, sharded=st.lists(values, min_size=1, max_size=3), page_size=st.sampled_from([None, 1, 2, 5]),
       forward=st.booleans())
def test_each_item_once_sharded_copy_wins(legacy: set[int], sharded: list[set[int]], page_size: int | None,
                                          forward: bool) -> None:
    shards = {LEGACY: legacy, **{number: vs for number, vs in enumerate(sharded, start=1)}}
    got, _ = run(shards, page_size, forward, None)
    assert expected(shards, forward) == got


@settings(max_examples=100, deadline=None)
@given(legacy=values, sharded=st.lists(values, min_size=1, max_size=3), page_size=st.sampled_from([None, 1, 3]),
       forward=st.booleans(), cut=st.integers(1, 6))
def test_resumed_pages_neither_repeat_nor_skip(legacy: set[int], sharded: list[set[int]], page_size: int | None,
                                               forward: bool, cut: int) -> None:
    shards = {LEGACY: legacy, **{number: vs for number, vs in enumerate(sharded, start=1)}}
    seen: list[tuple[int, int]] = []
    state: CursorState | None = None
    for _ in range(100):
        page, merged = run(shards, page_size, forward, cut, state)
        seen.extend(page)
        state, remaining = merged.state(state)
        if not remaining or not page:
            break
    assert expected(shards, forward) == seen


def test_legacy_copy_comes_after_the_sharded_one_and_is_dropped() -> None:
    got, merged = run({LEGACY: {1, 2, 3}, 1: {2}, 2: {3, 4}}, 1, True, None)
    assert [(LEGACY, 1), (1, 2), (2, 3), (2, 4)] == got
    assert 2 == merged.shadowed_dropped
