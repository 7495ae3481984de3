"""What ``DynamicShards`` costs per write and per query with the defaults, counted at the
botocore level (DynamoDB Local).

The defaults: the metadata table ``create_table`` makes stores the default fleet protocol
(cached reads), so merged reads use the count a process cached. Proves: 1,000 writes to 1,000
new keys from 8 threads send 1,000 ``PutItem`` requests and nothing else, as a plain ``Model``
writing the same items does, and leave no metadata item (raw scan of the metadata table: only
its fleet protocol); a warm key's writes cost one metadata read per ``cache_ttl``, a grown key's
writes none beyond the item's own once the growth is in effect (``cache_ttl + clock_skew``
after it, on an injected clock); a process's first merged query of a key reads its count once
(one ``GetItem``, and one ``Query`` per shard), and its next queries send no metadata request
(a cold key: one ``Query``; a key grown to 4 shards: 4 ``Query``), where a process declared
``fresh_reads=True`` sends one ``GetItem`` per query.
``benchmarks/bench_cold_keys.py`` measures the same at 10,000 keys, with latency.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.testing import record_requests
from tests.clock import Clock
from tests.raw import count_items, raw_client

CLOCK = Clock()


class CostShards(ShardMetadata):
    class Meta:
        table_name = "cost_shards"


class DeviceLog(ShardedModel):
    class Meta:
        table_name = "cost_device_log"

    device_id = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(CostShards, max_shards=8, cache_ttl=3600, clock=CLOCK))


class FreshDeviceLog(DeviceLog):
    """Another process, declared ``fresh_reads=True``: its merged reads read the count each time."""

    shards = Sharding(DynamicShards(CostShards, max_shards=8, cache_ttl=3600, clock=CLOCK, fresh_reads=True))


class PlainDeviceLog(Model):
    class Meta:
        table_name = "cost_plain_device_log"

    device_id = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


def write_all(model: type[Model], items: list[tuple[str, int]], threads: int = 8) -> None:
    """Save ``model(key, at)`` for every item from ``threads`` threads; a failed write fails the test."""
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(lambda item: model(*item).save(), items):
            pass


def raw_count(model: type[Model]) -> int:
    """The items of the model's table, counted by a raw scan."""
    pages = raw_client(model).get_paginator("scan").paginate(TableName=model.Meta.table_name, Select="COUNT")
    return sum(page["Count"] for page in pages)


def test_cold_keys_cost_one_request_per_write_and_no_metadata_item(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(DeviceLog, PlainDeviceLog)
    items = [(f"device-{n:05d}", 1) for n in range(1000)]
    with record_requests(DeviceLog) as sharded:
        write_all(DeviceLog, items)
    with record_requests(PlainDeviceLog) as plain:
        write_all(PlainDeviceLog, items)
    assert plain.requests == {"PutItem": 1000}
    assert sharded.requests == plain.requests
    assert count_items(CostShards) == []  # the table holds its fleet protocol, no count
    assert raw_count(DeviceLog) == 1000


def test_warm_and_grown_keys(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(DeviceLog)
    DeviceLog("warm", 0).save()
    with record_requests(DeviceLog) as warm:
        write_all(DeviceLog, [("warm", n) for n in range(1, 201)])
    assert warm.requests == {"PutItem": 200, "GetItem": 1}  # its count, read once per cache_ttl

    DeviceLog("grown", 0).save()
    DeviceLog.shards.grow("grown")
    DeviceLog.shards.grow("grown")  # 4 shards, cached by the process that grew them
    CLOCK.now += 3600 + 1 + 1  # in effect: cache_ttl + clock_skew after the growths (and their lock values)
    with record_requests(DeviceLog) as grown:
        write_all(DeviceLog, [("grown", n) for n in range(1, 201)])
    assert grown.requests == {"PutItem": 200}
    assert len({item.shards for item in DeviceLog.query("grown")}) == 4

    for expected in ({"GetItem": 1, "Query": 1}, {"Query": 1}):  # its absence is read once, then cached
        with record_requests(DeviceLog) as cold_query:
            assert [item.at for item in DeviceLog.query("never-written")] == []
        assert cold_query.requests == expected
    with record_requests(DeviceLog) as grown_query:
        for _ in range(10):
            assert len(list(DeviceLog.query("grown"))) == 201
    assert grown_query.requests == {"Query": 4 * 10}  # no metadata request per query

    assert len(list(FreshDeviceLog.query("grown"))) == 201  # its first read: the protocol, then the count
    with record_requests(FreshDeviceLog) as fresh_query:
        assert len(list(FreshDeviceLog.query("grown"))) == 201
    assert fresh_query.requests == {"GetItem": 1, "Query": 4}
