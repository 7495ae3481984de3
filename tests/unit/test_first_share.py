"""How many items a merged query with a ``limit`` first asks each shard for.

``page_reads="one_round_trip"`` (the default): the smallest count that a shard holds of a
page's first ``limit - 1`` randomly spread items with a chance of at most 5 % / shards, checked
here against an exact binomial tail in fractions; ``"fewest_items"``: 1.5 x the shard's share.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding._query_plan import ONE_ROUND_TRIP_MISS, first_share, one_round_trip_share


def asked(limit: int, shards: int, page_reads: str = "one_round_trip") -> int:
    slack, extra = first_share(limit, shards, page_reads)
    return -(-int(slack * limit) // shards) + extra


def exact_tail(n: int, shards: int, k: int) -> Fraction:
    """P(a shard holds at least k of n items), each item in one of ``shards`` shards at random."""
    p = Fraction(1, shards)
    return sum((comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1)), Fraction(0))


def test_known_values() -> None:
    assert [one_round_trip_share(20, n) for n in (4, 10, 16)] == [10, 7, 6]
    assert [one_round_trip_share(100, n) for n in (4, 10, 16)] == [36, 19, 15]
    assert one_round_trip_share(3, 4) == 3  # never more than the limit
    assert one_round_trip_share(1, 8) == 1
    assert one_round_trip_share(40, 1) == 40  # one shard: the limit, as a plain query
    assert asked(20, 10) == 7
    assert asked(20, 10, "fewest_items") == 3  # 1.5 x 2
    assert asked(100, 16, "fewest_items") == 10


@given(limit=st.integers(2, 60), shards=st.integers(2, 16))
def test_the_share_is_the_smallest_that_rarely_leaves_a_shard_short(limit: int, shards: int) -> None:
    k = one_round_trip_share(limit, shards)
    bound = Fraction(ONE_ROUND_TRIP_MISS).limit_denominator(1000) / shards
    assert 1 <= k <= limit
    if k < limit:
        assert exact_tail(limit - 1, shards, k) <= bound * Fraction(1001, 1000)
    if k > 1:
        assert exact_tail(limit - 1, shards, k - 1) > bound * Fraction(999, 1000)


@given(limit=st.integers(1, 2000), shards=st.integers(1, 64))
def test_at_least_an_even_share_and_more_items_for_more_limit(limit: int, shards: int) -> None:
    k = one_round_trip_share(limit, shards)
    assert k >= min(limit, -(-limit // shards))
    assert one_round_trip_share(limit + 1, shards) >= k


def test_large_limits_are_computed_at_once() -> None:
    # (15/16) ** 999,999 underflows: the normal approximation answers, near the mean plus 2.7
    # standard deviations, far below the limit (such a share then streams pages instead).
    share = one_round_trip_share(1_000_000, 16)
    assert 62_500 < share < 62_500 + 4 * 242
