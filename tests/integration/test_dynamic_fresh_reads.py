"""Readers cover shards another process added a moment ago, even with a warm cache.

On a metadata table that stores no fleet protocol (0.2's), where each process follows its own
declaration and the writer (0.2's default, fresh reads) uses a growth at once. Proves: a reader
declared ``fresh_reads=True`` whose cache still holds the old count reads the metadata item
before fanning out and returns the items written to the new shards; one declared
``fresh_reads=False`` (stale cache) misses them, the control that shows the first assertion can
fail, and what a stored protocol rules out (``test_fleet_protocol.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from tests.raw import drop_fleet_protocol

KEY = "/hot"


class FreshShards(ShardMetadata):
    class Meta:
        table_name = "fresh_shards"


WRITER = DynamicShards(FreshShards, max_shards=8, cache_ttl=3600)


class WriterLog(ShardedModel):
    """The writing process."""

    class Meta:
        table_name = "fresh_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(WRITER)


@pytest.mark.parametrize("fresh_reads", [True, False])
def test_reader_with_warm_cache_sees_growth_elsewhere(
    dynamodb_models: Callable[..., Any], fresh_reads: bool
) -> None:
    class ReaderLog(WriterLog):
        """Another process: the same table and metadata, its own cache."""

        shards = Sharding(DynamicShards(FreshShards, max_shards=8, cache_ttl=3600, fresh_reads=fresh_reads))

    dynamodb_models(WriterLog)
    drop_fleet_protocol(FreshShards, WriterLog, ReaderLog)
    WriterLog(KEY, 0).save()
    WriterLog.shards.grow(KEY)  # 2 shards
    assert [item.accessed_at for item in ReaderLog.query(KEY)] == [0]  # warms the reader's cache: 2 shards

    WriterLog.shards.grow(KEY)  # 4 shards now
    for n in range(1, 40):
        WriterLog(KEY, n).save()
    assert {item.shards for item in WriterLog.query(KEY)} == {1, 2, 3, 4}

    seen = sorted(item.accessed_at for item in ReaderLog.query(KEY))
    if fresh_reads:
        assert seen == list(range(40))
        assert ReaderLog.count(KEY) == 40
    else:
        assert len(seen) < 40
