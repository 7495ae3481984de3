"""``first_share``: how many items a merged query with a limit asks each shard for first.

Known values for small and large items, and the invariant: beyond 1.5 x each shard's share,
a shard is only asked for items that fit in the read units it is billed for anyway.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding.fanout import READ_UNIT_BYTES, first_share


def asked(limit: int, shards: int, size: float | None) -> int:
    slack, extra = first_share(limit, shards, size)
    return -(-int(slack * limit) // shards) + extra


def test_known_values() -> None:
    assert first_share(100, 10, None) == (1.5, 0)  # 10 per shard: 1.5 x the share, 15
    assert asked(100, 10, 5000.0) == 15
    assert asked(20, 10, None) == 8  # 2 per shard, size unknown: 3 x 2 + 2
    assert asked(20, 10, 200.0) == 8  # 20 items of 200 B fit in one 4 KB unit: 8 is free
    assert asked(20, 10, 2000.0) == 4  # 3 x 2 KB costs 2 units, which hold 4
    assert asked(20, 10, 5000.0) == 3  # 3 x 5 KB costs 4 units, which hold 3
    assert asked(20, 16, 200.0) == 6
    assert asked(20, 16, 3000.0) == 2


@given(limit=st.integers(1, 500), shards=st.integers(1, 64),
       size=st.one_of(st.none(), st.floats(1, 400_000)))
def test_more_than_the_lean_share_only_where_it_is_free(limit: int, shards: int, size: float | None) -> None:
    lean = max(1, -(-int(1.5 * limit) // shards))
    first = asked(limit, shards, size)
    assert first >= lean
    if limit >= 5 * shards:
        assert first == lean
    else:
        assert first <= -(-3 * limit // shards) + 2
        if size is not None and first > lean:
            assert math.ceil(first * size / READ_UNIT_BYTES) == math.ceil(lean * size / READ_UNIT_BYTES)
