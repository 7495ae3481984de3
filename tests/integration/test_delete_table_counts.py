"""``delete_table`` and the shard counts a ``DynamicShards`` model keeps in its metadata table
(DynamoDB Local).

The counts live in a table of their own, so they outlive the model's table: a table created
again under the same name starts from them (a key grown to 4 shards reads and writes 4 shards
at once). ``delete_table()`` now says so (``ShardCountsKeptWarning``, naming the metadata table
and the namespace), ``delete_table(shard_metadata=True)`` deletes them (the table's and its
sharded indexes', never another model's), and ``shard_metadata=False`` keeps them silently.
Raw scans of the metadata table check what is left.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import DynamicShards, RandomShards, ShardCountsKeptWarning, ShardedModel, Sharding, ShardMetadata
from tests.raw import raw_items

KEY = "hot-device"


class CountsShards(ShardMetadata):
    class Meta:
        table_name = "delete_counts_shards"


class ByDay(GlobalSecondaryIndex["Reading"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(CountsShards, max_shards=8))


class Reading(ShardedModel):
    class Meta:
        table_name = "delete_counts_reading"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute(null=True)
    by_day = ByDay()
    shards = Sharding(DynamicShards(CountsShards, max_shards=8))


class Neighbour(ShardedModel):
    """Another model whose counts share the metadata table."""

    class Meta:
        table_name = "delete_counts_neighbour"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(CountsShards, max_shards=8))


def namespaces() -> list[tuple[str, str, int]]:
    """(namespace, key, count) of every metadata item, read with boto3."""
    return sorted((raw["model"]["S"], raw["partition_key"]["S"], int(raw["number_of_shards"]["N"]))
                  for raw in raw_items(CountsShards) if "number_of_shards" in raw)


def grow(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Reading, Neighbour, CountsShards)
    Reading(KEY, 1, day="20240115").save()
    Reading.shards.grow(KEY)
    Reading.shards.grow(KEY)
    Reading.by_day.shards.grow("20240115")
    Neighbour(KEY, 1).save()
    Neighbour.shards.grow(KEY)
    table = Reading.Meta.table_name
    assert [(f"{Neighbour.Meta.table_name}", KEY, 2), (table, KEY, 4), (f"{table}#by_day", "20240115", 2)] == \
        sorted(namespaces(), key=lambda entry: (entry[0] != Neighbour.Meta.table_name, entry))


def test_a_recreated_table_starts_from_the_kept_counts_and_delete_table_says_so(
    dynamodb_models: Callable[..., Any],
) -> None:
    grow(dynamodb_models)
    with pytest.warns(ShardCountsKeptWarning) as warned:
        Reading.delete_table(wait=True)
    [message] = [str(entry.message) for entry in warned]
    assert f"'{CountsShards.Meta.table_name}'" in message
    assert f"'{Reading.Meta.table_name}', '{Reading.Meta.table_name}#by_day'" in message
    assert "delete_table(shard_metadata=True)" in message
    Reading.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    assert 4 == Reading.shards.shard_count(KEY)  # what the issue saw: the old count
    assert 3 == len(namespaces())


def test_shard_metadata_true_deletes_the_models_counts_and_no_others(dynamodb_models: Callable[..., Any]) -> None:
    grow(dynamodb_models)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShardCountsKeptWarning)
        Reading.delete_table(wait=True, shard_metadata=True)
    assert [(Neighbour.Meta.table_name, KEY, 2)] == namespaces()
    Reading.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    assert 1 == Reading.shards.shard_count(KEY)  # this process's cached count went too
    assert 1 == Reading.by_day.shards.shard_count("20240115")
    assert 2 == Neighbour.shards.shard_count(KEY)
    Reading(KEY, 2).save()
    assert [f"{KEY}_1"] == [raw["device"]["S"] for raw in raw_items(Reading)]


def test_shard_metadata_false_keeps_them_silently(dynamodb_models: Callable[..., Any]) -> None:
    grow(dynamodb_models)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShardCountsKeptWarning)
        Reading.delete_table(wait=True, shard_metadata=False)
    assert 3 == len(namespaces())


class Fixed(ShardedModel):
    class Meta:
        table_name = "delete_counts_fixed"

    device = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(4))


def test_a_model_without_counts_deletes_its_table_without_a_word(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Fixed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Fixed.delete_table(wait=True)
    assert not Fixed.exists()
