"""``DynamicShards(...)`` refuses bad configuration when the model is declared (no server needed).

Proves every argument is checked with a ShardingDefinitionError naming the argument and the
accepted values, that the documented defaults hold, and that the metadata model is the
strategy's companion (so ``create_table`` and the test plugin create its table).
"""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards, add_one, double
from pynamodb_sharding._exceptions import ShardingDefinitionError
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel


class DefinitionShards(ShardMetadata):
    class Meta:
        table_name = "definition_shards"


class NotMetadata(Model):
    class Meta:
        table_name = "not_metadata"

    key = UnicodeAttribute(hash_key=True)


def test_documented_defaults() -> None:
    strategy = DynamicShards(DefinitionShards)
    assert (strategy.initial, strategy.max_shards, strategy.cooldown, strategy.backoff) == (1, 10, 30.0, (1.0, 10.0))
    assert (strategy.store.ttl, strategy.growth, strategy.max_attempts) == (10.0, double, 10)
    assert DynamicShards(DefinitionShards, growth="add_one").growth is add_one


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"max_shards": 0}, "max_shards must be an int in 1..10000"),
        ({"max_shards": 10_001}, "max_shards must be an int in 1..10000"),
        ({"initial": 0}, "initial must be an int in 1..10"),
        ({"initial": 4, "max_shards": 3}, "initial must be an int in 1..3"),
        ({"initial": True}, "initial must be an int"),
        ({"max_attempts": 0}, "max_attempts must be an int"),
        ({"cooldown": -1}, "cooldown must be a non-negative (finite) number"),
        ({"cooldown": float("nan")}, "cooldown must be a non-negative (finite) number"),
        ({"cache_ttl": "10"}, "cache_ttl must be a non-negative (finite) number"),
        ({"cache_ttl": float("inf")}, "cache_ttl must be a non-negative (finite) number"),
        ({"clock_skew": True}, "clock_skew must be a non-negative (finite) number"),
        ({"replication_lag": -0.5}, "replication_lag must be a non-negative (finite) number"),
        ({"backoff": (2.0, 1.0)}, "backoff must be (low, high)"),
        ({"backoff": 1.0}, "backoff must be (low, high)"),
        ({"growth": "triple"}, "growth must be one of ['add_one', 'double', 'quadruple'] or a callable"),
        ({"growth": 2}, "growth must be one of ['add_one', 'double', 'quadruple'] or a callable"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(ShardingDefinitionError) as info:
        DynamicShards(DefinitionShards, **options)
    assert problem in str(info.value)
    assert str(info.value).startswith("DynamicShards: ")


def test_metadata_model_must_be_a_shard_metadata_subclass() -> None:
    with pytest.raises(ShardingDefinitionError, match="must be a ShardMetadata subclass"):
        DynamicShards(NotMetadata)  # type: ignore[arg-type]


class NoTableName(ShardMetadata):
    class Meta:
        region = "us-east-1"


class NoMeta(ShardMetadata):
    pass


@pytest.mark.parametrize("metadata_model", [NoTableName, NoMeta], ids=lambda m: m.__name__)
def test_metadata_model_without_table_name_is_refused(metadata_model: type[ShardMetadata]) -> None:
    """Not later, at create_table, with PynamoDB's AttributeError."""
    with pytest.raises(ShardingDefinitionError) as info:
        DynamicShards(metadata_model)
    name = metadata_model.__name__
    assert str(info.value).startswith(f"DynamicShards({name}): {name} has no Meta.table_name; give it one")


def test_the_metadata_model_is_a_companion() -> None:
    class Declared(ShardedModel):
        class Meta:
            table_name = "declared"

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        shards = Sharding(DynamicShards(DefinitionShards))

    assert Declared.companion_models() == (DefinitionShards,)
    assert "definition_shards" in Declared.shards.describe()
