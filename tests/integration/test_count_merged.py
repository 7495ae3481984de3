"""``count(hash_key, ...)`` of a sharded model sums every shard's count (DynamoDB Local).

Same arguments as PynamoDB's ``count``; ``limit`` caps the total; without a hash key the
table's item count (PynamoDB's ``describe_table``) is kept.
"""

from __future__ import annotations

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels


class Click(ShardedModel):
    class Meta:
        table_name = "fanout_click"

    button = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute()
    shards = Sharding(RandomShards(6))


@pytest.fixture
def clicks(dynamodb_models: BindModels) -> None:
    dynamodb_models(Click)
    with Click.batch_write() as batch:
        for at in range(150):
            batch.save(Click("buy", at, user=f"u{at % 4}"))
        for at in range(7):
            batch.save(Click("sell", at, user="u0"))


def test_count_sums_every_shard(clicks: None) -> None:
    shards = {c.shards for c in Click.query("buy")}
    assert len(shards) == 6  # 150 random writes reached every shard
    assert Click.count("buy") == 150
    assert Click.count("sell") == 7
    assert Click.count("nobody") == 0


def test_count_with_conditions(clicks: None) -> None:
    assert Click.count("buy", Click.at >= 100) == 50
    assert Click.count("buy", filter_condition=Click.user == "u1") == len([a for a in range(150) if a % 4 == 1])
    assert Click.count("buy", Click.at.between(10, 19), filter_condition=Click.user == "u0",
                       consistent_read=True) == 2  # 12 and 16


def test_limit_caps_the_total(clicks: None) -> None:
    assert Click.count("buy", limit=20) == 20
    assert Click.count("sell", limit=20) == 7
    assert Click.count("buy", limit=0) == 0


def test_rate_limited_count(clicks: None) -> None:
    assert Click.count("buy", rate_limit=1000) == 150
