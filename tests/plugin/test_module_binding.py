"""Tables bound for a whole module (``dynamodb_models_module``), emptied between tests by
``truncate()``: no ``ScopeMismatch``, and a truncated table (and the shard counts cached for
it) reads as new."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._protocol import PROTOCOL_KEY
from pynamodb_sharding.testing.binding import ModelBinding
from tests.raw import raw_items


class ModuleShards(ShardMetadata):
    class Meta:
        table_name = "module_binding_shards"


class Reading(ShardedModel):
    class Meta:
        table_name = "module_binding_reading"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class Growing(ShardedModel):
    class Meta:
        table_name = "module_binding_growing"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(ModuleShards, max_shards=8))


@pytest.fixture(scope="module")
def tables(dynamodb_models_module: ModelBinding) -> ModelBinding:
    dynamodb_models_module(Reading, Growing)
    return dynamodb_models_module


@pytest.fixture
def empty(tables: ModelBinding) -> Iterator[ModelBinding]:
    yield tables
    tables.truncate()


def test_truncate_empties_every_bound_table(empty: ModelBinding) -> None:
    names = dict(empty.table_names)
    for at in range(60):
        Reading("/s", at).save()
    Growing("/g", 1).save()
    Growing.shards.grow("/g")
    assert Growing.shards.shard_count("/g") == 2
    assert empty.truncate() == 60 + 1 + 1  # the readings, the growing item, its metadata item
    assert raw_items(Reading) == raw_items(Growing) == []
    # The metadata table keeps the fleet protocol create_table stored in it: it stays as created.
    assert [(raw["partition_key"]["S"], raw["model"]["S"]) for raw in raw_items(ModuleShards)] == [PROTOCOL_KEY]
    assert Growing.shards.shard_count("/g") == 1  # the cached count went with its item
    assert empty.table_names == names  # the same tables, kept


def test_the_module_tables_are_reused(empty: ModelBinding) -> None:
    assert Reading.Meta.table_name in empty.table_names.values()
    Reading("/s", 1).save()
    assert [reading.at for reading in Reading.query("/s")] == [1]
