"""A merged query reads the shard count and shard 1's first page at the same time (DynamoDB Local).

Proves: with fresh reads (``fresh_reads=True``, and the fleet protocol of fresh reads its table
stores) the metadata ``GetItem`` of a merged query is in flight while shard 1's ``Query`` is
(checked by holding the ``GetItem`` until the ``Query`` is sent: the control without overlap
would wait in vain); a cold key's query costs one
``GetItem`` and one ``Query``, a grown key's one ``Query`` per shard, never one more; the
shards read are the ones the metadata read returned, so items another process wrote to shards
it added a moment ago are returned (raw check that they are in other shards); the results equal
a plain ``Model``'s over the same items in both directions, with limits and resumed cursors;
a process following a stored protocol of cached reads, and a query with a cursor, send nothing
early.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata, store_fleet_protocol
from pynamodb_sharding.testing import record_requests
from tests.paging import page_by_page
from tests.raw import raw_items

KEY = "/shared/firetvGen2.txt"


class EarlyShards(ShardMetadata):
    class Meta:
        table_name = "early_shards"


class EarlyLog(ShardedModel):
    class Meta:
        table_name = "early_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    # Reads fresh; the metadata table it creates stores the fleet protocol of fresh reads, so
    # growths are written to at once.
    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=3600, fresh_reads=True))


class OtherProcessLog(EarlyLog):
    """Another process: the same tables, its own cache."""

    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=3600, fresh_reads=True))


class CachedLog(EarlyLog):
    """Follows the table's protocol: where it stores cached reads, no request to find the
    shards, nothing sent early."""

    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=3600))


class PlainLog(Model):
    class Meta:
        table_name = "early_plain_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


def _metadata_waits_for_the_query(model: type[Model]) -> tuple[list[bool], Callable[[], None]]:
    """Hold every metadata ``GetItem`` until a ``Query`` of ``model`` was sent (5 s at most);
    returns, per ``GetItem``, whether the ``Query`` was in flight, and an unhook."""
    query_sent = threading.Event()
    overlapped: list[bool] = []

    def on_query(**_: Any) -> None:
        query_sent.set()

    def on_get(**_: Any) -> None:
        overlapped.append(query_sent.wait(5.0))

    data = model._get_connection().connection.client.meta.events
    meta = EarlyShards._get_connection().connection.client.meta.events
    data.register("before-send.dynamodb.Query", on_query)
    meta.register("before-send.dynamodb.GetItem", on_get)

    def unhook() -> None:
        data.unregister("before-send.dynamodb.Query", on_query)
        meta.unregister("before-send.dynamodb.GetItem", on_get)

    return overlapped, unhook


def test_the_count_is_read_while_shard_1_is_queried(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(EarlyLog)
    EarlyLog(KEY, 1).save()
    EarlyLog.shards.strategy.protocol_in_force()  # read once per process per 300 s
    overlapped, unhook = _metadata_waits_for_the_query(EarlyLog)
    try:
        with record_requests(EarlyLog) as sent:
            items = [item.accessed_at for item in EarlyLog.query(KEY)]
    finally:
        unhook()
    assert items == [1]
    assert overlapped == [True]
    assert sent.requests == {"GetItem": 1, "Query": 1}  # a cold key: one round trip


def test_with_cached_reads_nothing_is_sent_early(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(EarlyLog)
    store_fleet_protocol(EarlyLog, cached_reads=True, immediately=True)  # before any process runs
    EarlyLog(KEY, 1).save()
    EarlyLog.shards.grow(KEY)
    assert [item.accessed_at for item in CachedLog.query(KEY)] == [1]
    with record_requests(CachedLog) as sent:
        assert [item.accessed_at for item in CachedLog.query(KEY)] == [1]
    assert sent.requests == {"Query": 2}


def test_a_growth_made_elsewhere_a_moment_ago_is_read(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(EarlyLog)
    EarlyLog(KEY, 0).save()
    assert [item.accessed_at for item in EarlyLog.query(KEY)] == [0]  # this process saw 1 shard
    OtherProcessLog.shards.grow(KEY)
    OtherProcessLog.shards.grow(KEY)  # 4 shards, grown by the other process
    for at in range(1, 60):
        OtherProcessLog(KEY, at).save()
    physical = {item["file_path"]["S"] for item in raw_items(EarlyLog)}
    assert len(physical) > 2  # the other process's items are in shards this one never read

    with record_requests(EarlyLog) as sent:
        items = [item.accessed_at for item in EarlyLog.query(KEY)]
    assert items == list(range(60))
    assert sent.requests == {"GetItem": 1, "Query": 4}  # shard 1's early page is used, not sent twice


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("limit", [None, 1, 7, 25])
def test_the_results_are_a_plain_models(dynamodb_models: Callable[..., Any], forward: bool, limit: int | None) -> None:
    dynamodb_models(EarlyLog, PlainLog)
    EarlyLog(KEY, 0).save()
    EarlyLog.shards.grow(KEY)
    EarlyLog.shards.grow(KEY)
    for at in range(1, 40):
        EarlyLog(KEY, at).save()
        PlainLog(KEY, at).save()
    PlainLog(KEY, 0).save()

    def pages(model: type[Model]) -> list[list[int]]:
        read = page_by_page(model.query, hash_key=KEY, scan_index_forward=forward, limit=limit)
        return [[int(item.accessed_at) for item in items] for items, _ in read]

    merged, plain = pages(EarlyLog), pages(PlainLog)
    assert [at for page in merged for at in page] == [at for page in plain for at in page]
    assert [at for page in merged for at in page] == sorted(range(40), reverse=not forward)
    if limit is not None:
        assert all(len(page) <= limit for page in merged)


def test_early_pages_of_shards_no_longer_read_are_dropped(dynamodb_models: Callable[..., Any]) -> None:
    """This process last saw 4 shards and queries them early; the count read says 2 (the key
    was compacted elsewhere): what shards 3 and 4 hold is not returned, as a plain read of
    shards 1 and 2 would not return it."""
    dynamodb_models(EarlyLog)
    for at in range(20):
        EarlyLog(KEY, at).save()
    EarlyLog.shards.grow(KEY)
    EarlyLog.shards.grow(KEY)
    assert len(list(EarlyLog.query(KEY))) == 20  # cached: 4 shards
    item = EarlyShards.get(KEY, EarlyLog.Meta.table_name)
    stamp = item.last_updated + 1
    item.number_of_shards = 2
    item.shard_history = {"0:1", f"{stamp}:2"}
    item.last_updated = stamp
    item.save()  # what compact leaves: reads cover shards 1 and 2 only
    stray = EarlyLog.shards.physical_key(KEY, 3)
    client = EarlyLog._get_connection().connection.client
    client.put_item(TableName=EarlyLog.Meta.table_name,
                    Item={"file_path": {"S": stray}, "accessed_at": {"N": "99"}})
    with record_requests(EarlyLog) as sent:
        items = [int(item.accessed_at) for item in EarlyLog.query(KEY)]
    assert sent.requests == {"GetItem": 1, "Query": 4}  # 4 sent early, 2 of them used
    assert 99 not in items
    assert EarlyLog.shards.read_shards(KEY) == (1, 2)
    assert items == sorted(items)
