"""(From an adversarial trial.) RandomShards scaled down 8 -> 4 (``reshard`` moves the item a page
ended on down), then back up to 8 before the next page: the tie's place is a current shard
again, read through the cursor's value without it, so its moved copy is skipped once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding.migration import JobOptions, reshard
from tests.raw import put_raw


class FeedMeta:
    table_name = "pbreak_regrow_random"
    max_pool_connections = 16


def _feed(layout: RandomShards) -> Any:
    class Feed(ShardedModel):
        Meta = FeedMeta

        feed = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards = Sharding(layout)

    return Feed


Feed8: Any = _feed(RandomShards(8))
Feed4: Any = _feed(RandomShards(4, previous_counts=(8,)))
Feed8Again: Any = _feed(RandomShards(8))


@pytest.mark.parametrize("forward", [False, True])
def test_random_scaled_down_resharded_then_scaled_up_again(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    dynamodb_models(Feed8, Feed4, Feed8Again)
    physical = shard_manager(Feed8).physical_key
    put_raw(Feed8, [{"feed": {"S": physical("feed", at % 8 + 1)}, "at": {"N": str(at)},
                     "body": {"S": f"item {at}"}} for at in range(40)])
    unpaged = [int(i.at) for i in Feed8.query("feed", scan_index_forward=forward)]
    cut = unpaged.index(13) + 1
    first = Feed8.query("feed", scan_index_forward=forward, limit=cut)
    page = [int(i.at) for i in first]
    assert page[-1] == 13
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
    report = reshard(Feed4, options, key_prefix="feed")  # moves shards 5-8 down, 13 among them
    assert report.tally.moved == 20, report.tally
    assert sorted(int(i.at) for i in Feed8Again.query("feed")) == list(range(40))
    resumed = [int(i.at) for i in Feed8Again.query("feed", scan_index_forward=forward,
                                                   last_evaluated_key=first.last_evaluated_key)]
    assert page + resumed == unpaged, resumed[:3]
