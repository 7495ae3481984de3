"""Without a page_size, a merged query caps each shard's page so memory stays bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding.fanout import DEFAULT_BUFFERED_ITEMS, default_page_size


@given(shards=st.integers(1, 10_000), limit=st.none() | st.integers(1, 10**7))
def test_held_pages_stay_under_the_budget(shards: int, limit: int | None) -> None:
    size = default_page_size(shards, limit)
    assert size >= 1
    if limit is not None:
        assert size <= limit
    # one current and one prefetched page per shard, never below 100 items a page
    assert size <= max(100, DEFAULT_BUFFERED_ITEMS // (2 * shards))


def test_figures() -> None:
    assert 1000 == default_page_size(16, None)
    assert 10 == default_page_size(16, 10)
    assert 100 == default_page_size(1000, None)
    assert 16_000 == default_page_size(1, None)
