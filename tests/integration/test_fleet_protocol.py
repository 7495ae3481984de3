"""The fleet protocol lives in the metadata table, and every process follows it (issue 40).

Processes are model classes over one table, each with a ``DynamicShards`` of its own and one
shared hand-driven clock (nothing sleeps), on DynamoDB Local.

Proves:
- ``create_table`` stores the declared protocol (the default: cached reads) in the metadata
  table it creates, and a process declared otherwise follows it: a writer declared
  ``fresh_reads=True`` (0.2: growths written to at once) delays its growth as the stored cached
  reads require, so a reader that caches its count reads every acknowledged item (raw table
  checked); on a table storing none (0.2's) the same two processes miss items (the control,
  0.2's behaviour, kept for a table that stores none);
- a table holding items written by 0.2 (counts, histories, 0.2's rate windows) keeps working
  without a protocol (each process by its own declaration) and adopts one explicitly: during
  the change, reads are fresh and growths delayed (the safer of both); once it is in force
  everywhere, merged queries send no metadata request; the processes that had not read the
  protocol again follow the old settings meanwhile, which the change's safer settings cover;
- a change is stored conditionally, refused while another is under way, and a record that
  cannot be read raises an error naming the item and the fix before anything is written.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import (
    DynamicShards,
    FleetProtocol,
    FleetProtocolError,
    ShardedModel,
    Sharding,
    ShardMetadata,
    fleet_protocol,
    store_fleet_protocol,
)
from pynamodb_sharding._protocol import PROTOCOL_KEY, PROTOCOL_TTL
from pynamodb_sharding.testing import record_requests
from tests.clock import Clock
from tests.raw import drop_fleet_protocol, raw_client, raw_items

KEY = "/shared/viral.mp4"
Bind = Callable[..., Any]


CLOCK = Clock()


class ProtocolShards(ShardMetadata):
    class Meta:
        table_name = "protocol_shards"


def strategy(seed: int, **options: Any) -> DynamicShards:
    return DynamicShards(ProtocolShards, max_shards=8, clock=CLOCK, timer=CLOCK, sleep=CLOCK.sleep,
                         random=random.Random(seed), **options)


class ProtocolLog(ShardedModel):
    class Meta:
        table_name = "protocol_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(strategy(0))


def process(seed: int, **options: Any) -> type[ProtocolLog]:
    """One more process: the same tables, a DynamicShards of its own."""
    shards = Sharding(strategy(seed, **options))
    return type(f"Process{seed}", (ProtocolLog,), {"__module__": __name__, "shards": shards})


def shards_written(start: int) -> Counter[str]:
    return Counter(raw["file_path"]["S"] for raw in raw_items(ProtocolLog) if int(raw["accessed_at"]["N"]) >= start)


def metadata_reads(sent: Any) -> int:
    return sum(1 for body in sent.bodies("GetItem") if body["TableName"] == ProtocolShards.Meta.table_name
               and body["Key"]["partition_key"]["S"] != PROTOCOL_KEY[0])


def grow_and_write(writer: type[ProtocolLog], reader: type[ProtocolLog], start: float) -> list[int]:
    """The reader caches the key's count; the writer grows it and writes 20 items at once; what
    the reader's query returns."""
    CLOCK.at(start)
    writer(KEY, 0).save()
    assert [item.accessed_at for item in reader.query(KEY)] == [0]  # the reader caches 1 shard
    writer.shards.grow(KEY)
    for n in range(1, 21):
        writer(KEY, n).save()
    return [int(item.accessed_at) for item in reader.query(KEY)]


def test_a_process_declared_otherwise_follows_the_stored_protocol(dynamodb_models: Bind) -> None:
    writer, reader = process(1, fresh_reads=True), process(2, fresh_reads=False)
    CLOCK.at(0)
    dynamodb_models(ProtocolLog)  # create_table stores ProtocolLog's declaration: the defaults
    stored = fleet_protocol(writer)
    assert stored is not None
    assert stored.current == FleetProtocol(cached_reads=True, cache_ttl=10.0, clock_skew=1.0, replication_lag=2.0)
    assert (stored.previous, stored.changed_at, stored.effective_at) == (None, CLOCK.start, CLOCK.start)
    assert writer.shards.strategy.activation_delay == 11.0  # declared fresh reads, follows the table
    assert grow_and_write(writer, reader, 1.0) == list(range(21))
    assert shards_written(1) == {f"{KEY}_1": 20}  # the growth is not in effect yet: no item on shard 2
    CLOCK.at(1 + 10 + 1.5)  # the reader's cache expired; the growth is in effect
    for n in range(21, 41):
        writer(KEY, n).save()
    assert set(shards_written(21)) == {f"{KEY}_1", f"{KEY}_2"}
    assert [int(item.accessed_at) for item in reader.query(KEY)] == list(range(41))


def test_without_a_stored_protocol_each_process_follows_its_declaration(dynamodb_models: Bind,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The control: a table that stores no protocol is read as 0.2 read it, each process by its
    own declaration; the writer uses its growth at once, and the cached reader misses items."""
    writer, reader = process(3, fresh_reads=True), process(4, fresh_reads=False)
    dynamodb_models(ProtocolLog)
    with caplog.at_level(logging.WARNING, logger="pynamodb_sharding"):
        drop_fleet_protocol(ProtocolShards, writer, reader)  # as 0.2 left the table
    with caplog.at_level(logging.WARNING, logger="pynamodb_sharding"):
        read = grow_and_write(writer, reader, 100.0)
    assert len(read) < 21
    assert len(shards_written(0)) == 2
    assert "stores no fleet protocol" in caplog.text  # the reader declared cached reads: it is warned


def put_legacy_item(key: str, *, count: int, history: list[str], extra: dict[str, Any]) -> None:
    """A metadata item as 0.2 wrote it."""
    raw_client(ProtocolShards).put_item(TableName=ProtocolShards.Meta.table_name, Item={
        "partition_key": {"S": key}, "model": {"S": ProtocolLog.Meta.table_name},
        "number_of_shards": {"N": str(count)}, "last_updated": {"N": history[-1].split(":")[0]},
        "shard_history": {"SS": history}, **extra,
    })


def test_a_table_of_0_2_keeps_working_and_adopts_a_protocol(dynamodb_models: Bind) -> None:
    app = process(5)  # the defaults: no protocol stored, so fresh reads, growths used at once (0.2)
    late = process(6)  # another process, which reads the record when it first needs it
    dynamodb_models(ProtocolLog)  # after the processes are declared, as an application's are
    drop_fleet_protocol(ProtocolShards, app, late)  # as 0.2 left the table
    CLOCK.at(1000)
    now = CLOCK()
    put_legacy_item(KEY, count=2, history=[f"{now - 500:.0f}:1", f"{now - 400:.0f}:4", f"{now - 300:.0f}:2"], extra={
        # 0.2's rate windows: the window before this one holds 3,000 units.
        "rate_window": {"N": str(now - now % 5 - 5)}, "rate_units": {"N": "3000"}, "rate_previous_units": {"N": "0"},
    })
    for shard in (1, 4):  # items 0.2 wrote on shards of the history
        raw_client(ProtocolLog).put_item(TableName=ProtocolLog.Meta.table_name, Item={
            "file_path": {"S": f"{KEY}_{shard}"}, "accessed_at": {"N": str(shard)}})
    assert app.shards.strategy.protocol_in_force().stored is False
    assert app.shards.read_shards(KEY) == (1, 2, 3, 4)  # the history is read
    assert sorted(int(item.accessed_at) for item in app.query(KEY)) == [1, 4]
    app(KEY, 10).save()
    assert app.shards.strategy.activation_delay == 0.0

    records = store_fleet_protocol(app)  # the default protocol: cached reads
    assert records[0].current == FleetProtocol()
    assert records[0].previous == FleetProtocol(cached_reads=False)  # what this process followed: 0.2's defaults
    changing = app.shards.strategy.protocol_in_force()
    assert (changing.cached_reads, changing.delay) == (False, 11.0)  # the safer of both while it changes
    with record_requests(app) as sent:
        assert len(list(app.query(KEY))) == 3
    assert metadata_reads(sent) >= 1  # reads are still fresh: the key's item is read for the query

    assert late.shards.strategy.protocol_in_force() == changing
    CLOCK.sleep(records[0].effective_at - CLOCK() + 1)
    assert records[0].effective_at - records[0].changed_at == PROTOCOL_TTL + 10 + 1
    in_force = late.shards.strategy.protocol_in_force()
    assert (in_force.cached_reads, in_force.delay) == (True, 11.0)
    assert len(list(late.query(KEY))) == 3
    with record_requests(late) as sent:
        for _ in range(5):
            assert len(list(late.query(KEY))) == 3
    assert metadata_reads(sent) == 0  # cached: no metadata request per query


def test_a_change_under_way_is_refused_and_a_broken_record_is_named(dynamodb_models: Bind) -> None:
    app, grown = process(7, fresh_reads=True), process(8)
    dynamodb_models(ProtocolLog)  # after the processes are declared
    CLOCK.at(5000)
    first = store_fleet_protocol(app)[0]
    assert first.previous is None  # the settings stored already (the defaults): nothing changes
    changing = store_fleet_protocol(app, cached_reads=False)[0]
    assert changing.previous == FleetProtocol()
    with pytest.raises(FleetProtocolError, match="under way until epoch"):
        store_fleet_protocol(app, cache_ttl=5.0)
    assert fleet_protocol(app) == changing  # the refused change wrote nothing

    raw_client(ProtocolShards).put_item(TableName=ProtocolShards.Meta.table_name, Item={
        "partition_key": {"S": PROTOCOL_KEY[0]}, "model": {"S": PROTOCOL_KEY[1]},
        "fleet_protocol": {"S": json.dumps({"current": {"cached_reads": "yes"}})}, "last_updated": {"N": "1"}})
    with pytest.raises(FleetProtocolError, match=r"partition_key='#protocol'.*store_fleet_protocol"):
        fleet_protocol(app)
    grown(KEY, 0).save()  # one shard: no growth to wait for, the protocol is not needed
    grown.shards.grow(KEY)
    before = len(raw_items(ProtocolLog))
    with pytest.raises(FleetProtocolError, match=r"partition_key='#protocol'"):
        grown(KEY, 1).save()  # the growth's delay needs the protocol: raised before anything is sent
    assert len(raw_items(ProtocolLog)) == before
