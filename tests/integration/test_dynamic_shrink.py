"""Lowering a key's shard count never hides data.

Proves: after ``shrink(key, to=1)`` new writes go to shard 1 only, while ``read_shards`` (also
from a process with a fresh cache) still covers the largest count in the history and a query
returns every item written before and after; the history records the shrink; shrinking to an
invalid count raises a ShardingError naming the fix and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._exceptions import ShardingError
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel

KEY = "/shared/firetvGen2.txt"


class ShrinkShards(ShardMetadata):
    class Meta:
        table_name = "shrink_shards"


class ShrinkLog(ShardedModel):
    class Meta:
        table_name = "shrink_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    # Growths written to at once (the fleet protocol of fresh reads, stored when the table is
    # created), so that the items written before the shrink spread over the four shards.
    shards = Sharding(DynamicShards(ShrinkShards, max_shards=8, fresh_reads=True))


def test_shrink_keeps_every_old_item_readable(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(ShrinkLog)
    ShrinkLog(KEY, 0).save()
    assert ShrinkLog.shards.grow(KEY) == 2
    assert ShrinkLog.shards.grow(KEY) == 4
    for n in range(1, 60):
        ShrinkLog(KEY, n).save()
    old_shards = {item.shards for item in ShrinkLog.query(KEY)}
    assert old_shards == {1, 2, 3, 4}

    assert ShrinkLog.shards.shrink(KEY, to=1) == 1
    for n in range(60, 80):
        ShrinkLog(KEY, n).save()

    assert ShrinkLog.shards.shard_count(KEY) == 1
    assert ShrinkLog.shards.read_shards(KEY) == (1, 2, 3, 4)
    fresh = DynamicShards(ShrinkShards, max_shards=8)  # another process, cold cache
    assert fresh.read_shards(ShrinkLog.shards.key(KEY)) == (1, 2, 3, 4)
    assert fresh.shard_count(ShrinkLog.shards.key(KEY)) == 1

    items = list(ShrinkLog.query(KEY))
    assert sorted(item.accessed_at for item in items) == list(range(80))
    assert {item.shards for item in items if item.accessed_at >= 60} == {1}
    assert ShrinkLog.count(KEY) == 80
    assert [entry.count for entry in ShrinkLog.shards.history(KEY)] == [1, 2, 4, 1]


@pytest.mark.parametrize("to", [0, -1, 5, True, "2"])
def test_invalid_shrink_raises_and_changes_nothing(dynamodb_models: Callable[..., Any], to: Any) -> None:
    dynamodb_models(ShrinkLog)
    ShrinkLog(KEY, 0).save()
    ShrinkLog.shards.grow(KEY)
    ShrinkLog.shards.grow(KEY)
    with pytest.raises(ShardingError, match=r"cannot shrink key .* give an int in 1\.\.4"):
        ShrinkLog.shards.shrink(KEY, to=to)
    assert [entry.count for entry in ShrinkLog.shards.history(KEY)] == [1, 2, 4]


def test_shrink_to_the_current_count_records_nothing(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(ShrinkLog)
    ShrinkLog(KEY, 0).save()
    assert ShrinkLog.shards.shrink(KEY, to=1) == 1
    assert [entry.count for entry in ShrinkLog.shards.history(KEY)] == [1]
