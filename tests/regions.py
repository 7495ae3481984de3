"""Two regions on one machine: the second DynamoDB Local server and the models of each region.

The plugin's ``dynamodb_local`` server stands for us-east-1 (the home region of the metadata
models), :func:`second_server` for eu-west-1; a
:class:`~pynamodb_sharding.testing.replication.Replicator` between them plays global tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import boto3
import pytest
from boto3.dynamodb.types import TypeDeserializer
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding
from pynamodb_sharding._metadata import ShardMetadata, parse_history_entry
from pynamodb_sharding.testing import DynamoDBLocal
from pynamodb_sharding.testing.local import ServerProcess, find_installation, install, require_java
from pynamodb_sharding.testing.replication import Replicator

HOME, OTHER = "us-east-1", "eu-west-1"
_deserialize = TypeDeserializer()
KEY_ID, SECRET = "globaltables", "globaltables"  # one account in both regions
#: Nothing listens there: a home region that cannot be reached, without leaving the machine.
CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture(scope="session")
def second_server() -> Iterator[DynamoDBLocal]:
    """A second DynamoDB Local (the other region), one per test session."""
    with ServerProcess.start(find_installation() or install(), java=require_java()) as process:
        yield process.server


def client(endpoint: str, region: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint, region_name=region,
                        aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)


@attrs.frozen
class Region:
    """The models of one region, bound to that region's server."""

    name: str
    endpoint: str
    log: Any
    shards: Any

    def client(self) -> Any:
        return client(self.endpoint, self.name)

    def tables(self) -> list[str]:
        return [self.log.Meta.table_name, self.shards.Meta.table_name]


def make_region(name: str, endpoint: str, tables: str, *, log_meta: dict[str, Any] | None = None,
                dynamic: dict[str, Any] | None = None, **home: Any) -> Region:
    """A DynamicShards log and its metadata model in region ``name`` (``home``: the metadata
    model's global-table settings; ``log_meta``: extra ``Meta`` of the log)."""
    connection = {"host": endpoint, "region": name, "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET}
    shards = type(f"Shards_{name}", (ShardMetadata,), {
        "Meta": type("Meta", (), {"table_name": f"{tables}_shards", **connection, **home}),
        "__module__": __name__,
    })
    # Replication here is the test's own (a Replicator it settles or pauses): a growth is used
    # as soon as the writer's replica shows it, with no wait for a replication bound (that
    # wait, replication_lag, is tested by test_global_replication_lag.py and the fleet tests),
    # nor for readers' caches: reads are fresh (the fleet protocol the home region's metadata
    # table stores when it is created, which reaches the other regions when replication runs).
    settings = {"initial": 1, "max_shards": 32, "cache_ttl": 0, "replication_lag": 0.0, "clock_skew": 0.0,
                "fresh_reads": True, **(dynamic or {})}
    log = type(f"Log_{name}", (ShardedModel,), {
        "Meta": type("Meta", (), {"table_name": f"{tables}_log", "max_pool_connections": 32,
                                  **connection, **(log_meta or {})}),
        "__module__": __name__,
        "key": UnicodeAttribute(hash_key=True),
        "at": NumberAttribute(range_key=True),
        "note": UnicodeAttribute(null=True),
        "place": UnicodeAttribute(null=True),  # an item's home region, for Meta.item_home
        "shards": Sharding(DynamicShards(shards, **settings)),
    })
    return Region(name, endpoint, log, shards)


def table_prefix() -> str:
    return f"gt_{uuid.uuid4().hex[:8]}"


def create_tables(*regions: Region) -> None:
    for region in regions:
        region.log.create_table(billing_mode="PAY_PER_REQUEST", wait=True)


def drop_tables(*regions: Region) -> None:
    for region in regions:
        raw = region.client()
        for table in region.tables():
            raw.delete_table(TableName=table)


def replicator(first: Region, second: Region, *, lag: float = 0.2) -> Replicator:
    return Replicator({first.name: first.client(), second.name: second.client()}, first.tables(), lag=lag)


def metadata_item(region: Region, key: str) -> dict[str, Any] | None:
    """The raw metadata item of ``key`` in ``region`` (a consistent read)."""
    found = region.client().get_item(
        TableName=region.shards.Meta.table_name, ConsistentRead=True,
        Key={"partition_key": {"S": key}, "model": {"S": region.log.Meta.table_name}},
    )
    item: dict[str, Any] | None = found.get("Item")
    return item


def metadata_values(region: Region, key: str) -> dict[str, Any] | None:
    """The metadata item of ``key`` in ``region`` as DynamoDB compares it: numbers by value
    (``{"N": "1796404070"}`` and ``{"N": "1796404070.0"}`` are the same), sets unordered."""
    item = metadata_item(region, key)
    return None if item is None else {name: _deserialize.deserialize(value) for name, value in item.items()}


def history(region: Region, key: str) -> set[int]:
    """The counts in the raw metadata item of ``key`` in ``region``."""
    item = metadata_item(region, key) or {}
    return {parse_history_entry(entry).count for entry in item.get("shard_history", {}).get("SS", [])}


def stored_count(region: Region, key: str) -> int | None:
    item = metadata_item(region, key)
    return None if item is None else int(item["number_of_shards"]["N"])


def raw_log(region: Region) -> list[tuple[str, float]]:
    """``(physical key, at)`` of every item of the log table in ``region`` (a consistent scan)."""
    pages = region.client().get_paginator("scan").paginate(TableName=region.log.Meta.table_name, ConsistentRead=True)
    return sorted((item["key"]["S"], float(item["at"]["N"])) for page in pages for item in page["Items"])


def write_items(region: Region, key: str, start: float, count: int) -> list[float]:
    times = [start + n for n in range(count)]
    for at in times:
        region.log(key=key, at=at).save()
    return times


def fresh_query(region: Region, key: str) -> list[float]:
    """The items of ``key`` a new process of ``region`` reads (nothing cached)."""
    region.log.shards.strategy.store.clear()
    return sorted(float(item.at) for item in region.log.query(key))
