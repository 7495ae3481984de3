"""Without a page_size, a merged query caps each shard's page so that memory stays bounded.

Proves what :func:`~pynamodb_sharding._query_plan.default_page_size` promises, with known figures
and behaviour rather than its formula: a page is the caller's ``limit`` unless that is larger
than the cap; up to 160 shards the pages held (one current and one prefetched per shard) stay
within ``DEFAULT_BUFFERED_ITEMS`` and the cap is not smaller than it has to be; above 160
shards the floor of 100 items a page wins, so the pages held exceed the budget.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding._query_plan import DEFAULT_BUFFERED_ITEMS, default_page_size

FLOOR = 100  # items a shard's page is never capped below
UNDER_BUDGET = st.integers(1, 160)  # shard counts whose held pages fit the budget
OVER_BUDGET = st.integers(161, 10_000)  # shard counts where the floor wins


def held(shard_count: int, page_size: int) -> int:
    """Items held by a merged query: one current and one prefetched page per shard."""
    return 2 * shard_count * page_size


class TestKnownFigures:
    """Fixed values, so that a change to the cap shows here."""

    def test_budget(self) -> None:
        assert 32_000 == DEFAULT_BUFFERED_ITEMS

    def test_without_limit(self) -> None:
        expected = {1: 16_000, 2: 8_000, 3: 5_333, 16: 1_000, 100: 160, 160: 100, 161: 100, 1_000: 100}
        assert expected == {shards: default_page_size(shards, None) for shards in expected}

    def test_with_limit(self) -> None:
        assert 10 == default_page_size(16, 10)
        assert 1_000 == default_page_size(16, 5_000)
        assert 1 == default_page_size(10_000, 1)
        assert 100 == default_page_size(1_000, 1_000)

    def test_pages_held_at_the_edges(self) -> None:
        assert 32_000 == held(16, default_page_size(16, None))
        assert 32_000 == held(160, default_page_size(160, None))
        assert 32_200 == held(161, default_page_size(161, None))
        assert 200_000 == held(1_000, default_page_size(1_000, None))


class TestUpTo160Shards:
    """The pages held stay within the budget, and the cap is as large as the budget allows."""

    @given(shards=UNDER_BUDGET, limit=st.none() | st.integers(1, 10**7))
    def test_pages_held_stay_within_the_budget(self, shards: int, limit: int | None) -> None:
        assert held(shards, default_page_size(shards, limit)) <= DEFAULT_BUFFERED_ITEMS

    @given(shards=UNDER_BUDGET)
    def test_one_more_item_a_page_would_pass_the_budget(self, shards: int) -> None:
        assert held(shards, default_page_size(shards, None) + 1) > DEFAULT_BUFFERED_ITEMS


class TestAbove160Shards:
    """The floor of 100 items a page wins: the pages held grow past the budget."""

    @given(shards=OVER_BUDGET)
    def test_each_page_is_the_floor(self, shards: int) -> None:
        assert FLOOR == default_page_size(shards, None)

    @given(shards=OVER_BUDGET)
    def test_pages_held_pass_the_budget(self, shards: int) -> None:
        assert held(shards, default_page_size(shards, None)) > DEFAULT_BUFFERED_ITEMS


class TestLimit:
    """A ``limit`` is the page size unless the cap is smaller; more shards never mean bigger pages."""

    @given(shards=st.integers(1, 10_000), limit=st.integers(1, 10**7))
    def test_never_more_than_the_limit_nor_the_cap(self, shards: int, limit: int) -> None:
        size = default_page_size(shards, limit)
        assert 1 <= size <= limit
        assert size == min(limit, default_page_size(shards, None))

    @given(shards=st.integers(1, 9_999))
    def test_more_shards_never_mean_bigger_pages(self, shards: int) -> None:
        assert default_page_size(shards + 1, None) <= default_page_size(shards, None)
