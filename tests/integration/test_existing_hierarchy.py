"""Sharding one model of an application's existing hierarchy (DynamoDB Local).

The application's base class (its ``Meta``, attributes, a ``save()`` override) stays; the hot
model adds ``ShardedModel`` beside it, the base first. PynamoDB caches a connection on the class
that first asks for one and reuses it down the hierarchy for the same table: the sharded model
must not reuse its plain base's (its client carries the key guard, which would then refuse the
plain siblings' bare keys), and the base's methods must run. A sharded class under a plain
discriminator root is refused when defined: the root's reads would return its items with their
physical keys.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, ShardedModel, Sharding, ShardingDefinitionError
from tests.raw import raw_items


class AppModel(Model):
    class Meta:
        table_name = "hierarchy_service"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    updated_at = UTCDateTimeAttribute(null=True)

    def save(self, *args: Any, **kwargs: Any) -> Any:
        self.updated_at = datetime.now(UTC)
        return super().save(*args, **kwargs)


class Secret(AppModel):
    value = UnicodeAttribute()


class AccessEvent(AppModel, ShardedModel):
    user = UnicodeAttribute()
    shards = Sharding(HashedShards(4))


def test_the_sharded_model_and_its_plain_siblings_share_the_base_and_not_its_connection(
    dynamodb_models: Callable[..., Any],
) -> None:
    dynamodb_models(AppModel, Secret, AccessEvent)
    for model in (Secret, AccessEvent):  # as in an application: only the base caches one (the binding
        if "_connection" in vars(model) and vars(model)["_connection"] is None:  # gave each its own slot)
            delattr(model, "_connection")
    AppModel.describe_table()  # the base caches its connection first, as an application's startup may
    Secret("SECRET#db", "v1", value="hunter2").save()
    for n in range(8):
        AccessEvent("SECRET#db", f"access-{n:02d}", user="ann").save()
    assert "hunter2" == Secret.get("SECRET#db", "v1").value  # before: refused by the sharded model's key guard
    event = AccessEvent.get("SECRET#db", "access-03")
    assert event.updated_at is not None  # the base's save() ran, then the sharded model's
    assert [f"access-{n:02d}" for n in range(8)] == [e.sk for e in AccessEvent.query("SECRET#db")]
    keys = sorted(raw["pk"]["S"] for raw in raw_items(AppModel))
    assert 1 == keys.count("SECRET#db")
    assert 8 == sum(key.rpartition("_")[0] == "SECRET#db" for key in keys)


def test_a_sharded_class_under_a_plain_discriminator_root_is_refused() -> None:
    class Entity(Model):
        class Meta:
            table_name = "hierarchy_entities"

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()

    with pytest.raises(ShardingDefinitionError) as refused:
        class Order(Entity, ShardedModel, discriminator="order"):
            shards = Sharding(HashedShards(4))
    message = str(refused.value)
    assert "Order" in message
    assert "'kind'" in message
    assert "derive Entity from ShardedModel" in message
