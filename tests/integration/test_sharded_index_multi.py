"""Sharded global secondary indexes, multi-attribute layout (DynamoDB Local).

``Sharding(..., layout="multi_attribute")`` on a ``GlobalSecondaryIndex`` keeps the index's
attribute as it is (``day = "20160226"``) and stores the index shard in a number attribute of
its own (``day_shard``); the index's partition key is the pair (DynamoDB's multi-attribute
keys). Raw readers see the real day, every read path gives it back, a query of the index is
one query per ``(day, day_shard)`` merged in order with one cursor, and a ``DynamicShards``
index grows under the simulator's index throttles. A plain PynamoDB model with the same
unsharded index is the reference.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import (
    ConsistentIndexReadError,
    CursorError,
    DerivedAttributeUpdateError,
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
    ShardMetadata,
)
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from pynamodb_sharding.testing.simulator import simulate_partition_limits
from tests.raw import raw_client, raw_items


class ByDay(GlobalSecondaryIndex["MultiLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8, attributes=("user_id",)), layout="multi_attribute")


class MultiLog(ShardedModel):
    class Meta:
        table_name = "gsi_multi_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = ByDay()
    shards = Sharding(RandomShards(4))


class PlainByDay(GlobalSecondaryIndex["PlainLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class PlainLog(Model):
    """PynamoDB's own behaviour: the reference for every index read."""

    class Meta:
        table_name = "gsi_multi_plain_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = PlainByDay()


class ByDayRandom(GlobalSecondaryIndex["RandomMultiLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8), layout="multi_attribute", shard_attribute="day_part")


class RandomMultiLog(ShardedModel):
    class Meta:
        table_name = "gsi_multi_random_log"
        max_retry_attempts = 0

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    note = UnicodeAttribute(null=True)
    by_day = ByDayRandom()
    shards = Sharding(HashedShards(2))


def index_items(model: type[Model], index_name: str = "by_day") -> list[dict[str, Any]]:
    """Every entry of a global index, read with a raw boto3 Scan of the index."""
    items: list[dict[str, Any]] = []
    paginator = raw_client(model).get_paginator("scan")
    for page in paginator.paginate(TableName=model.Meta.table_name, IndexName=index_name):
        items.extend(page["Items"])
    return items


def write_both(count: int, day: str = "20160226", users: int = 50) -> None:
    with MultiLog.batch_write() as sharded, PlainLog.batch_write() as plain:
        for n in range(count):
            values = {"user_id": f"u{n % users}", "day": day, "note": "odd" if n % 2 else "even"}
            sharded.save(MultiLog(f"/f/{n}", n, **values))
            plain.save(PlainLog(f"/f/{n}", n, **values))


def pages(query: Any, **kwargs: Any) -> list[Any]:
    """Read a query to the end, one call per page, resuming from each (JSON round-tripped) cursor."""
    items: list[Any] = []
    cursor = None
    while True:
        page = query(last_evaluated_key=cursor, **kwargs)
        items.extend(page)
        cursor = page.last_evaluated_key
        if cursor is None:
            return items
        cursor = json.loads(json.dumps(cursor))


def keys(items: list[Any]) -> list[tuple[str, int, str | None, str | None]]:
    return [(item.file_path, item.accessed_at, item.day, item.user_id) for item in items]


def test_create_table_declares_the_two_attribute_partition_key(dynamodb_models: BindModels) -> None:
    dynamodb_models(MultiLog)
    table = raw_client(MultiLog).describe_table(TableName=MultiLog.Meta.table_name)["Table"]
    (index,) = table["GlobalSecondaryIndexes"]
    assert [(key["AttributeName"], key["KeyType"]) for key in index["KeySchema"]] == [
        ("day", "HASH"), ("day_shard", "HASH"), ("accessed_at", "RANGE"),
    ]
    types = {entry["AttributeName"]: entry["AttributeType"] for entry in table["AttributeDefinitions"]}
    assert types["day_shard"] == "N"


class TestSpreadOverIndexShards:
    """4,000 items of one day land evenly on the index's 8 (day, day_shard) partitions."""

    def test_every_index_partition_holds_350_to_650_items(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(MultiLog, PlainLog)
        write_both(4000, users=4000)
        entries = index_items(MultiLog)
        per_partition = Counter((entry["day"]["S"], entry["day_shard"]["N"]) for entry in entries)
        assert sorted(per_partition) == [("20160226", str(shard)) for shard in range(1, 9)]
        assert all(350 <= count <= 650 for count in per_partition.values()), per_partition
        assert sum(per_partition.values()) == 4000
        assert MultiLog.by_day.count("20160226") == 4000 == PlainLog.by_day.count("20160226")


@pytest.fixture
def logs(dynamodb_models: BindModels) -> None:
    dynamodb_models(MultiLog, PlainLog)
    write_both(120)
    MultiLog("/other", 5, user_id="u1", day="20160227").save()
    PlainLog("/other", 5, user_id="u1", day="20160227").save()


class TestMergedIndexQuery:
    """A merged query of the sharded index returns what PynamoDB returns for the unsharded one."""

    @pytest.mark.parametrize("forward", [True, False])
    @pytest.mark.parametrize("limit", [1, 7, 50])
    def test_equals_plain_index_with_resume_after_every_page(self, logs: None, forward: bool, limit: int) -> None:
        got = pages(lambda **kw: MultiLog.by_day.query("20160226", scan_index_forward=forward, **kw), limit=limit)
        expected = pages(lambda **kw: PlainLog.by_day.query("20160226", scan_index_forward=forward, **kw),
                         limit=limit)
        assert keys(got) == keys(expected)
        assert [item.accessed_at for item in got] == sorted(range(120), reverse=not forward)

    def test_page_tokens_resume(self, logs: None) -> None:
        items: list[int] = []
        token = None
        while True:
            page = MultiLog.by_day.query("20160226", limit=17, last_evaluated_key=token)
            items.extend(item.accessed_at for item in page)
            token = page.next_page_token
            if token is None:
                break
        assert items == list(range(120))

    def test_cursor_naming_another_shard_number_is_refused(self, logs: None) -> None:
        page = MultiLog.by_day.query("20160226", limit=9)
        list(page)
        cursor = json.loads(json.dumps(page.last_evaluated_key))
        position = cursor["positions"][0]
        position["start_key"]["day_shard"] = {"N": str(int(position["shard"]) % 8 + 1)}
        from pynamodb_sharding._cursor import _checksum

        cursor["checksum"] = _checksum({k: v for k, v in cursor.items() if k != "checksum"})
        with record_requests(MultiLog) as sent, pytest.raises(CursorError, match="day_shard"):
            list(MultiLog.by_day.query("20160226", last_evaluated_key=cursor))
        assert sent.requests == {}

    def test_range_condition_filter_projection_page_size(self, logs: None) -> None:
        def run(model: Any) -> list[Any]:
            return list(model.by_day.query(
                "20160226", model.accessed_at.between(10, 60), filter_condition=model.note == "odd",
                page_size=4, attributes_to_get=["accessed_at", "note"],
            ))
        got, expected = run(MultiLog), run(PlainLog)
        assert [(i.accessed_at, i.note) for i in got] == [(i.accessed_at, i.note) for i in expected]
        assert [i.accessed_at for i in got] == list(range(11, 60, 2))
        assert all(i.user_id is None for i in got)  # projected away, as in PynamoDB

    def test_limit_and_count(self, logs: None) -> None:
        assert [i.accessed_at for i in MultiLog.by_day.query("20160226", limit=5)] == [0, 1, 2, 3, 4]
        assert MultiLog.by_day.count("20160226") == PlainLog.by_day.count("20160226") == 120
        assert MultiLog.by_day.count("20160226", MultiLog.accessed_at < 30) == 30
        assert MultiLog.by_day.count("20160226", filter_condition=MultiLog.note == "odd") == 60
        assert MultiLog.by_day.count("20160226", limit=10) == 10
        assert MultiLog.by_day.count("20160227") == 1

    def test_consistent_read_refused_before_sending(self, logs: None) -> None:
        with record_requests(MultiLog) as sent, pytest.raises(ConsistentIndexReadError, match="by_day"):
            list(MultiLog.by_day.query("20160226", consistent_read=True))
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


class TestMergedIndexQueryProperty:
    """Any items of one day, any page size, either direction: the merged index query resumed
    after every page is the sorted list of the day's items."""

    days = itertools.count()

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        stamps=st.lists(st.integers(0, 10_000), unique=True, max_size=30),
        users=st.integers(1, 6),
        limit=st.integers(1, 8),
        forward=st.booleans(),
    )
    def test_resumed_pages_are_the_sorted_items(
        self, bound: None, stamps: list[int], users: int, limit: int, forward: bool,
    ) -> None:
        day = f"d{next(self.days)}"
        with MultiLog.batch_write() as batch:
            for n, stamp in enumerate(stamps):
                batch.save(MultiLog(f"/p/{n}", stamp, user_id=f"u{n % users}", day=day))
        got = pages(lambda **kw: MultiLog.by_day.query(day, scan_index_forward=forward, **kw), limit=limit)
        assert [item.accessed_at for item in got] == sorted(stamps, reverse=not forward)
        assert {item.day for item in got} <= {day}
        assert MultiLog.by_day.count(day) == len(stamps)


@pytest.fixture
def bound(dynamodb_models: BindModels) -> None:
    dynamodb_models(MultiLog)


class TestStoredValues:
    """Raw readers see the real day and the shard number; every read path gives the day back."""

    def test_reads_and_raw_values(self, bound: None) -> None:
        MultiLog("/a", 1, user_id="u1", day="20160226").save()
        (raw,) = raw_items(MultiLog)
        assert raw["day"] == {"S": "20160226"}
        twin = MultiLog("/a", 1, user_id="u1", day="20160226")
        assert raw["day_shard"] == {"N": str(MultiLog.by_day.shards.write_shard(twin))}
        assert MultiLog.get("/a", 1).day == "20160226"
        assert [i.day for i in MultiLog.query("/a")] == ["20160226"]
        assert [i.day for i in MultiLog.scan()] == ["20160226"]
        assert [i.day for i in MultiLog.by_day.query("20160226")] == ["20160226"]
        assert [i.day for i in MultiLog.scan(index_name="by_day")] == ["20160226"]

    def test_item_without_the_attribute_is_not_in_the_index(self, bound: None) -> None:
        MultiLog("/a", 1, user_id="u1").save()
        assert index_items(MultiLog) == []
        assert "day_shard" not in raw_items(MultiLog)[0]
        item = MultiLog.get("/a", 1)
        item.day = "20160226"
        item.save()
        assert [i.file_path for i in MultiLog.by_day.query("20160226")] == ["/a"]
        item.day = None
        item.save()  # out of the index again: the shard attribute goes too
        assert index_items(MultiLog) == []
        assert "day_shard" not in raw_items(MultiLog)[0]

    def test_batch_write_transaction_and_update(self, bound: None) -> None:
        with MultiLog.batch_write() as batch:
            batch.save(MultiLog("/b", 1, user_id="u1", day="20160226"))
        with TransactWrite(connection=MultiLog._get_connection().connection) as transaction:
            transaction.save(MultiLog("/t", 2, user_id="u2", day="20160226"))
        item = MultiLog.get("/b", 1)
        item.update(actions=[MultiLog.note.set("x")])
        assert (item.day, item.note) == ("20160226", "x")
        entries = index_items(MultiLog)
        assert sorted(entry["day"]["S"] for entry in entries) == ["20160226", "20160226"]
        assert all(1 <= int(entry["day_shard"]["N"]) <= 8 for entry in entries)
        assert sorted(i.file_path for i in MultiLog.by_day.query("20160226")) == ["/b", "/t"]

    def test_changing_user_id_moves_the_index_entry(self, bound: None) -> None:
        for n in range(16):
            MultiLog(f"/m/{n}", n, user_id=f"u{n}", day="20160226").save()
        moved = 0
        for n in range(16):
            item = MultiLog.get(f"/m/{n}", n)
            (before,) = [e["day_shard"]["N"] for e in index_items(MultiLog) if e["accessed_at"]["N"] == str(n)]
            item.user_id = f"u{n + 1}"
            item.save()
            after = [e for e in index_items(MultiLog) if e["accessed_at"]["N"] == str(n)]
            assert len(after) == 1  # one entry, never two
            twin = MultiLog(f"/m/{n}", n, user_id=f"u{n + 1}", day="20160226")
            assert after[0]["day_shard"]["N"] == str(MultiLog.by_day.shards.write_shard(twin))
            moved += after[0]["day_shard"]["N"] != before
        assert moved > 0
        got = list(MultiLog.by_day.query("20160226"))
        assert [(i.accessed_at, i.user_id) for i in got] == [(n, f"u{n + 1}") for n in range(16)]

    def test_random_index_shard_is_kept_across_saves(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(RandomMultiLog)
        for n in range(20):
            RandomMultiLog(f"/r/{n}", n, day="20160226").save()
        before = {e["file_path"]["S"]: e["day_part"]["N"] for e in index_items(RandomMultiLog)}
        for item in RandomMultiLog.by_day.query("20160226"):
            item.note = "touched"
            item.save()
        for item in RandomMultiLog.scan():
            item.note = "again"
            item.save()
        after = {e["file_path"]["S"]: e["day_part"]["N"] for e in index_items(RandomMultiLog)}
        assert after == before
        assert len(set(before.values())) > 1  # the 20 items did spread
        item = RandomMultiLog.get("/r/0", 0)
        item.day = "20160227"
        item.save()
        assert [i.file_path for i in RandomMultiLog.by_day.query("20160227")] == ["/r/0"]
        assert RandomMultiLog.by_day.count("20160226") == 19


class TestUpdatesAndConditions:
    @pytest.mark.parametrize("action", [
        lambda: MultiLog.day.set("20160301"),
        lambda: MultiLog.day.remove(),
        lambda: MultiLog.user_id.set("u9"),
    ])
    def test_update_refused_before_sending(self, bound: None, action: Any) -> None:
        item = MultiLog("/u", 1, user_id="u1", day="20160226")
        item.save()
        with record_requests(MultiLog) as sent, pytest.raises(DerivedAttributeUpdateError, match=r"day_shard|save"):
            item.update(actions=[action()])
        assert sent.requests == {}

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


class TestLostReply:
    @pytest.mark.parametrize("fault", ["lost", "closed"])
    def test_retried_save_keeps_the_index_shard(self, dynamodb_models: BindModels, fault: str) -> None:
        from tests.faults import Faults

        dynamodb_models(RandomMultiLog)
        puts = Faults(RandomMultiLog, "PutItem")
        for n in range(10):
            item = RandomMultiLog(f"/l/{n}", n, day="20160226")
            puts.plan = [fault]
            with pytest.raises(PutError):
                item.save()
            applied = [e["day_part"]["N"] for e in index_items(RandomMultiLog) if e["accessed_at"]["N"] == str(n)]
            assert len(applied) == 1
            item.save()
            stored = [e["day_part"]["N"] for e in index_items(RandomMultiLog) if e["accessed_at"]["N"] == str(n)]
            assert stored == applied
        assert RandomMultiLog.by_day.count("20160226") == 10
        assert len(raw_items(RandomMultiLog)) == 10


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


CLOCK = Clock()


class MultiEventShards(ShardMetadata):
    class Meta:
        table_name = "gsi_multi_event_shards"


class EventsByDay(GlobalSecondaryIndex["MultiEvent"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(MultiEventShards, max_shards=8, cooldown=0, backoff=(0, 0),
                                    clock=CLOCK, sleep=CLOCK.advance), layout="multi_attribute")


class MultiEvent(ShardedModel):
    class Meta:
        table_name = "gsi_multi_event"
        max_retry_attempts = 0

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = EventsByDay()
    shards = Sharding(DynamicShards(MultiEventShards, max_shards=8))


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


class TestDefinition:
    def test_shard_attribute_needs_the_multi_attribute_layout(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="layout='multi_attribute'"):
            Sharding(HashedShards(4), shard_attribute="day_shard")
        with pytest.raises(ShardingDefinitionError, match="'suffixed' or 'multi_attribute'"):
            Sharding(HashedShards(4), layout="multi")  # type: ignore[arg-type]

    def test_layout_on_a_table_is_refused(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="for the Sharding of a GlobalSecondaryIndex"):
            class Table(ShardedModel):
                class Meta:
                    table_name = "t"

                pk = UnicodeAttribute(hash_key=True)
                shards = Sharding(HashedShards(4), layout="multi_attribute")

    def test_shard_attribute_taken_by_the_model_is_refused(self) -> None:
        class Clash(GlobalSecondaryIndex["Taken"]):
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)
            shards = Sharding(HashedShards(4), layout="multi_attribute", shard_attribute="note")

        with pytest.raises(ShardingDefinitionError, match="'note', which Taken already uses"):
            class Taken(ShardedModel):
                class Meta:
                    table_name = "taken"

                pk = UnicodeAttribute(hash_key=True)
                day = UnicodeAttribute()
                note = UnicodeAttribute()
                by_day = Clash()
                shards = Sharding(HashedShards(2))
