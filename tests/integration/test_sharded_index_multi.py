"""Sharded global secondary indexes, what only the multi-attribute layout does (DynamoDB Local).

``Sharding(..., layout="multi_attribute")`` on a ``GlobalSecondaryIndex`` keeps the index's
attribute as it is (``day = "20160226"``) and stores the index shard in a number attribute of
its own (``day_shard``); the index's partition key is the pair (DynamoDB's multi-attribute
keys). The table is created with that key, a query of the index is one query per
``(day, day_shard)`` with one cursor that names each shard's number, every comparison of the
real value works as on a plain model, and a ``DynamicShards`` index grows under the simulator's
index throttles. What every layout does is in ``test_sharded_index.py``; where the layout may be
declared is in ``tests/unit/test_definition.py``.
"""

from __future__ import annotations

import json

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import (
    CursorError,
    DynamicShards,
    ShardedModel,
    Sharding,
    ShardMetadata,
)
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from pynamodb_sharding.testing.simulator import simulate_partition_limits
from tests.clock import Clock
from tests.index_layouts import MultiLog, PlainLog, write_logs
from tests.raw import index_items, raw_client


@pytest.fixture
def logs(dynamodb_models: BindModels) -> None:
    dynamodb_models(MultiLog, PlainLog)
    write_logs(MultiLog)


def test_create_table_declares_the_two_attribute_partition_key(dynamodb_models: BindModels) -> None:
    dynamodb_models(MultiLog)
    table = raw_client(MultiLog).describe_table(TableName=MultiLog.Meta.table_name)["Table"]
    (index,) = table["GlobalSecondaryIndexes"]
    assert [(key["AttributeName"], key["KeyType"]) for key in index["KeySchema"]] == [
        ("day", "HASH"), ("day_shard", "HASH"), ("accessed_at", "RANGE"),
    ]
    types = {entry["AttributeName"]: entry["AttributeType"] for entry in table["AttributeDefinitions"]}
    assert types["day_shard"] == "N"


class TestMergedIndexQuery:
    """One query per (day, day_shard), one cursor naming each shard's number."""

    def test_cursor_naming_another_shard_number_is_refused(self, logs: None) -> None:
        """A cursor of an earlier release (one position per shard) whose start key holds another
        shard's number than the shard it names."""
        page = MultiLog.by_day.query("20160226", limit=9)
        list(page)
        cursor = json.loads(json.dumps(page.last_evaluated_key))
        entry = next(entry for entry in index_items(MultiLog) if entry["day"]["S"] == "20160226")
        shard = int(entry["day_shard"]["N"])
        start_key = {name: entry[name] for name in ("day", "day_shard", "accessed_at", "file_path")}
        start_key["day_shard"] = {"N": str(shard % 8 + 1)}
        del cursor["after"]
        cursor.update(version=1, positions=[{"shard": shard, "start_key": start_key}])
        from pynamodb_sharding._cursor import _checksum

        cursor["checksum"] = _checksum({k: v for k, v in cursor.items() if k != "checksum"})
        with record_requests(MultiLog) as sent, pytest.raises(CursorError, match="day_shard"):
            list(MultiLog.by_day.query("20160226", last_evaluated_key=cursor))
        assert sent.requests == {}

    def test_queries_one_partition_per_index_shard(self, logs: None) -> None:
        with record_requests(MultiLog) as sent:
            list(MultiLog.by_day.query("20160227", MultiLog.accessed_at > 0))
        partitions = []
        for body in sent.bodies("Query"):
            values = body["ExpressionAttributeValues"]
            names = body["ExpressionAttributeNames"]
            assert set(names.values()) == {"day", "day_shard", "accessed_at"}
            partitions.append(sorted((next(iter(v)), next(iter(v.values()))) for v in values.values()))
        assert sorted(partitions) == sorted([[("N", "0"), ("N", str(shard)), ("S", "20160227")]
                                             for shard in range(1, 9)])


class TestConditions:
    """Order comparisons, refused on a suffixed index, work on the real value."""

    def test_conditions_and_filters_on_the_real_value(self, dynamodb_models: BindModels) -> None:
        """Nothing to rewrite: the stored value is the logical one, so every comparison works,
        exactly as on the plain model."""
        dynamodb_models(MultiLog, PlainLog)
        results = {}
        for model in (MultiLog, PlainLog):
            model("/c", 1, user_id="u1", day="20160226").save()
            model("/c", 2, user_id="u1", day="20160301").save()
            item = model.get("/c", 1)
            item.note = "ok"
            item.save(condition=model.day < "20160300")
            results[model] = (
                sorted(i.accessed_at for i in model.scan(model.day > "20160227")),
                sorted(i.accessed_at for i in model.scan(model.day.between("2016", "20160227"))),
                model.get("/c", 1).note,
            )
        assert results[MultiLog] == results[PlainLog] == ([2], [1], "ok")


CLOCK = Clock(0.0)


class MultiEventShards(ShardMetadata):
    class Meta:
        table_name = "gsi_multi_event_shards"


class EventsByDay(GlobalSecondaryIndex["MultiEvent"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(MultiEventShards, max_shards=8, cooldown=0, backoff=(0, 0), fresh_reads=True,
                                    clock=CLOCK, sleep=CLOCK.advance), layout="multi_attribute")


class MultiEvent(ShardedModel):
    class Meta:
        table_name = "gsi_multi_event"
        max_retry_attempts = 0

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = EventsByDay()
    # Growths written to at once: the fleet protocol of fresh reads, which the table's
    # declaration stores in the metadata table the index shares.
    shards = Sharding(DynamicShards(MultiEventShards, max_shards=8, fresh_reads=True))


def test_dynamic_index_grows_on_its_own_throttles(dynamodb_models: BindModels) -> None:
    """The simulator charges each (day, day_shard) partition; the index count of the day grows,
    the table's counts stay at 1, and every item is in the index once."""
    dynamodb_models(MultiEvent)
    with simulate_partition_limits(MultiEvent, write_units=None, index_write_units=5, clock=CLOCK) as simulator:
        # 10 writes a second on partitions that take 5: the day's one partition throttles, and
        # the grown count (8 partitions at most, 40 a second) leaves room enough that a write's
        # random shard is never throttled max_attempts times in a row.
        for n in range(60):
            MultiEvent(f"sensor-{n % 9}", n, day="20160226").save()
            CLOCK.advance(0.1)
    assert MultiEvent.by_day.shards.shard_count("20160226") > 1
    assert simulator.throttles_by_reason["IndexWriteKeyRangeThroughputExceeded"] > 0
    assert {MultiEvent.shards.shard_count(f"sensor-{n}") for n in range(9)} == {1}
    assert MultiEvent.by_day.count("20160226") == 60
    assert sorted(i.at for i in MultiEvent.by_day.query("20160226")) == list(range(60))
    partitions = {(e["day"]["S"], e["day_shard"]["N"]) for e in index_items(MultiEvent)}
    assert len(partitions) > 1
    assert len(index_items(MultiEvent)) == 60
