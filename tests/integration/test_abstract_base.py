"""A base class shared by several sharded models declares the keys once (DynamoDB Local).

A ``ShardedModel`` subclass without ``Meta.table_name`` is an abstract base: it needs no
``Sharding``; each concrete subclass names its table and its own strategy, and works as if it
had declared everything itself. A concrete model without ``Sharding`` is still refused.
"""

from __future__ import annotations

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding, ShardingDefinitionError
from pynamodb_sharding.testing.plugin import BindModels
from tests.raw import raw_items


class EventBase(ShardedModel):
    """The shared part: keys and attributes, no table, no strategy."""

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    kind = UnicodeAttribute(default="click")


class Click(EventBase):
    class Meta:
        table_name = "abstract_click"

    shards = Sharding(RandomShards(4))


class Purchase(EventBase):
    class Meta:
        table_name = "abstract_purchase"

    shards = Sharding(HashedShards(2))


def test_each_concrete_model_shards_its_own_table(dynamodb_models: BindModels) -> None:
    dynamodb_models(Click, Purchase)
    for at in range(20):
        Click("/home", at).save()
        Purchase("/home", at, kind="buy").save()
    assert [event.at for event in Click.query("/home")] == list(range(20))
    assert [event.kind for event in Purchase.query("/home")] == ["buy"] * 20
    assert {item["stream"]["S"] for item in raw_items(Click)} <= {f"/home_{n}" for n in range(1, 5)}
    assert {item["stream"]["S"] for item in raw_items(Purchase)} == {"/home_1", "/home_2"}
    assert Click.shards.strategy != Purchase.shards.strategy


def test_a_concrete_subclass_without_sharding_is_refused() -> None:
    with pytest.raises(ShardingDefinitionError, match=r"View: a ShardedModel needs a Sharding descriptor"):
        class View(EventBase):
            class Meta:
                table_name = "abstract_view"
