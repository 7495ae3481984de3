"""Sharded global secondary indexes, suffixed layout (DynamoDB Local).

``Sharding(...)`` on a ``GlobalSecondaryIndex`` stores the index's hash attribute as
``<day>_<shard>``: the raw index holds one partition value per index shard, every read path
gives the logical day back, and a query of the index merges its shards like a query of a
sharded table. A plain PynamoDB model with the same unsharded index is the reference.
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
    DerivedAttributeUpdateError,
    HashedShards,
    RandomShards,
    ShardConditionError,
    ShardedModel,
    Sharding,
)
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.raw import raw_client, raw_items


class ByDay(GlobalSecondaryIndex["AuditLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8, attributes=("user_id",)))


class AuditLog(ShardedModel):
    class Meta:
        table_name = "gsi_audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = ByDay()
    shards = Sharding(RandomShards(4))


class ByDayRandom(GlobalSecondaryIndex["RandomLog"]):
    class Meta:
        index_name = "by_day_random"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8))


class RandomLog(ShardedModel):
    class Meta:
        table_name = "gsi_random_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    note = UnicodeAttribute(null=True)
    by_day_random = ByDayRandom()
    shards = Sharding(HashedShards(2))


class PlainByDay(GlobalSecondaryIndex["PlainLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class PlainLog(Model):
    """PynamoDB's own behaviour: the reference for every index read."""

    class Meta:
        table_name = "gsi_plain_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = PlainByDay()


def index_items(model: type[Model], index_name: str) -> list[dict[str, Any]]:
    """Every entry of a global index, read with a raw boto3 Scan of the index."""
    items: list[dict[str, Any]] = []
    paginator = raw_client(model).get_paginator("scan")
    for page in paginator.paginate(TableName=model.Meta.table_name, IndexName=index_name):
        items.extend(page["Items"])
    return items


def write_both(count: int, day: str = "20160226", users: int = 50) -> None:
    with AuditLog.batch_write() as sharded, PlainLog.batch_write() as plain:
        for n in range(count):
            values = {"user_id": f"u{n % users}", "day": day, "note": "odd" if n % 2 else "even"}
            sharded.save(AuditLog(f"/f/{n}", n, **values))
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


class TestSpreadOverIndexShards:
    """4,000 items of one day land evenly on the index's 8 physical partition values."""

    def test_every_index_partition_value_holds_350_to_650_items(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog, PlainLog)
        write_both(4000, users=4000)
        entries = index_items(AuditLog, "by_day")
        per_value = Counter(entry["day"]["S"] for entry in entries)
        assert sorted(per_value) == [f"20160226_{shard}" for shard in range(1, 9)]
        assert all(350 <= count <= 650 for count in per_value.values()), per_value
        assert sum(per_value.values()) == 4000
        assert AuditLog.by_day.count("20160226") == 4000 == PlainLog.by_day.count("20160226")
        assert AuditLog.by_day.shards.read_shards("20160226") == tuple(range(1, 9))


@pytest.fixture
def logs(dynamodb_models: BindModels) -> None:
    dynamodb_models(AuditLog, PlainLog)
    write_both(120)
    with AuditLog.batch_write() as sharded, PlainLog.batch_write() as plain:
        sharded.save(AuditLog("/other", 5, user_id="u1", day="20160227"))
        plain.save(PlainLog("/other", 5, user_id="u1", day="20160227"))


class TestMergedIndexQuery:
    """A merged query of the sharded index returns what PynamoDB returns for the unsharded one."""

    @pytest.mark.parametrize("forward", [True, False])
    @pytest.mark.parametrize("limit", [1, 7, 50])
    def test_equals_plain_index_with_resume_after_every_page(self, logs: None, forward: bool, limit: int) -> None:
        got = pages(lambda **kw: AuditLog.by_day.query("20160226", scan_index_forward=forward, **kw), limit=limit)
        expected = pages(lambda **kw: PlainLog.by_day.query("20160226", scan_index_forward=forward, **kw),
                         limit=limit)
        assert keys(got) == keys(expected)
        assert [item.accessed_at for item in got] == sorted(range(120), reverse=not forward)

    def test_range_condition_filter_projection_page_size(self, logs: None) -> None:
        def run(model: Any) -> list[Any]:
            return list(model.by_day.query(
                "20160226", model.accessed_at.between(10, 60), filter_condition=model.note == "odd",
                page_size=4, attributes_to_get=["accessed_at", "note"],
            ))
        got, expected = run(AuditLog), run(PlainLog)
        assert [(i.accessed_at, i.note) for i in got] == [(i.accessed_at, i.note) for i in expected]
        assert [i.accessed_at for i in got] == list(range(11, 60, 2))
        assert all(i.user_id is None for i in got)  # projected away, as in PynamoDB

    def test_limit_and_count(self, logs: None) -> None:
        assert [i.accessed_at for i in AuditLog.by_day.query("20160226", limit=5)] == [0, 1, 2, 3, 4]
        assert AuditLog.by_day.count("20160226") == PlainLog.by_day.count("20160226") == 120
        assert AuditLog.by_day.count("20160226", AuditLog.accessed_at < 30) == 30
        assert AuditLog.by_day.count("20160226", filter_condition=AuditLog.note == "odd") == 60
        assert AuditLog.by_day.count("20160226", limit=10) == 10
        assert AuditLog.by_day.count("20160227") == 1

    def test_consistent_read_refused_before_sending(self, logs: None) -> None:
        with record_requests(AuditLog) as sent, pytest.raises(ConsistentIndexReadError, match="by_day"):
            list(AuditLog.by_day.query("20160226", consistent_read=True))
        with pytest.raises(ConsistentIndexReadError, match="by_day"):
            AuditLog.by_day.count("20160226", consistent_read=True)
        assert sent.requests == {}

    def test_queries_one_physical_value_per_index_shard(self, logs: None) -> None:
        with record_requests(AuditLog) as sent:
            list(AuditLog.by_day.query("20160227"))
        values = sorted(body["ExpressionAttributeValues"][":0"]["S"] for body in sent.bodies("Query"))
        assert values == [f"20160227_{shard}" for shard in range(1, 9)]


class TestMergedIndexQueryProperty:
    """Any items of one day, any page size, either direction: the merged index query resumed
    after every page is the sorted list of the day's items."""

    days = itertools.count()

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
        with AuditLog.batch_write() as batch:
            for n, stamp in enumerate(stamps):
                batch.save(AuditLog(f"/p/{n}", stamp, user_id=f"u{n % users}", day=day))
        got = pages(lambda **kw: AuditLog.by_day.query(day, scan_index_forward=forward, **kw), limit=limit)
        assert [item.accessed_at for item in got] == sorted(stamps, reverse=not forward)
        assert {item.day for item in got} <= {day}
        assert AuditLog.by_day.count(day) == len(stamps)


@pytest.fixture
def bound(dynamodb_models: BindModels) -> None:
    dynamodb_models(AuditLog)


class TestLogicalValueOnEveryReadPath:
    """The raw table stores the physical index value; every read gives the logical one back."""

    def test_reads(self, bound: None) -> None:
        AuditLog("/a", 1, user_id="u1", day="20160226").save()
        raw = [item for item in raw_items(AuditLog) if item["accessed_at"]["N"] == "1"]
        assert len(raw) == 1
        logical, _, shard = raw[0]["day"]["S"].rpartition("_")
        assert logical == "20160226"
        assert 1 <= int(shard) <= 8
        assert AuditLog.get("/a", 1).day == "20160226"
        assert [i.day for i in AuditLog.query("/a")] == ["20160226"]
        assert [i.day for i in AuditLog.scan()] == ["20160226"]
        assert [i.day for i in AuditLog.batch_get([("/a", 1)])] == ["20160226"]
        assert [i.day for i in AuditLog.by_day.query("20160226")] == ["20160226"]
        assert [i.day for i in AuditLog.scan(index_name="by_day")] == ["20160226"]
        item = AuditLog.get("/a", 1)
        item.refresh()
        assert item.day == "20160226"

    def test_item_without_the_attribute_is_not_in_the_index(self, bound: None) -> None:
        AuditLog("/a", 1, user_id="u1").save()
        assert index_items(AuditLog, "by_day") == []
        assert AuditLog.get("/a", 1).day is None


class TestWrites:
    """Every write path stores the physical index value; a changed user_id moves the entry."""

    def test_batch_write_transaction_and_update_store_physical_values(self, bound: None) -> None:
        with AuditLog.batch_write() as batch:
            batch.save(AuditLog("/b", 1, user_id="u1", day="20160226"))
        with TransactWrite(connection=AuditLog._get_connection().connection) as transaction:
            transaction.save(AuditLog("/t", 2, user_id="u2", day="20160226"))
        item = AuditLog.get("/b", 1)
        item.update(actions=[AuditLog.note.set("x")])
        assert item.day == "20160226"
        values = sorted(entry["day"]["S"].rpartition("_")[0] for entry in index_items(AuditLog, "by_day"))
        assert values == ["20160226", "20160226"]
        assert sorted(i.file_path for i in AuditLog.by_day.query("20160226")) == ["/b", "/t"]

    def test_changing_user_id_moves_the_index_entry(self, bound: None) -> None:
        for n in range(16):  # enough users that some pairs land on different index shards
            AuditLog(f"/m/{n}", n, user_id=f"u{n}", day="20160226").save()
        moved = 0
        for n in range(16):
            item = AuditLog.get(f"/m/{n}", n)
            before = {e["day"]["S"] for e in index_items(AuditLog, "by_day") if e["accessed_at"]["N"] == str(n)}
            item.user_id = f"u{n + 1}"
            item.save()
            after = [e for e in index_items(AuditLog, "by_day") if e["accessed_at"]["N"] == str(n)]
            assert len(after) == 1  # one entry, never two
            # The entry sits where a new item of the new user goes.
            twin = AuditLog(f"/m/{n}", n, user_id=f"u{n + 1}", day="20160226")
            assert after[0]["day"]["S"] == f"20160226_{AuditLog.by_day.shards.write_shard(twin)}"
            moved += after[0]["day"]["S"] not in before
        assert moved > 0
        got = list(AuditLog.by_day.query("20160226"))
        assert [(i.accessed_at, i.user_id) for i in got] == [(n, f"u{n + 1}") for n in range(16)]

    def test_random_index_shard_is_kept_across_saves(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(RandomLog)
        for n in range(20):
            RandomLog(f"/r/{n}", n, day="20160226").save()
        before = {e["file_path"]["S"]: e["day"]["S"] for e in index_items(RandomLog, "by_day_random")}
        for item in RandomLog.by_day_random.query("20160226"):
            item.note = "touched"
            item.save()
        for item in RandomLog.scan():
            item.note = "again"
            item.save()
        after = {e["file_path"]["S"]: e["day"]["S"] for e in index_items(RandomLog, "by_day_random")}
        assert after == before
        assert len(set(before.values())) > 1  # the 20 items did spread
        assert RandomLog.by_day_random.count("20160226") == 20
        item = RandomLog.get("/r/0", 0)
        item.day = "20160227"
        item.save()
        assert [i.file_path for i in RandomLog.by_day_random.query("20160227")] == ["/r/0"]
        assert RandomLog.by_day_random.count("20160226") == 19


class TestUpdatesAndConditions:
    """Updates that would leave the index value inconsistent are refused before sending;
    conditions and filters on the index attribute are rewritten exactly or refused."""

    @pytest.mark.parametrize("action", [
        lambda: AuditLog.day.set("20160301"),
        lambda: AuditLog.day.remove(),
        lambda: AuditLog.note.set(AuditLog.day),
        lambda: AuditLog.user_id.set("u9"),
    ])
    def test_update_refused_before_sending(self, bound: None, action: Any) -> None:
        item = AuditLog("/u", 1, user_id="u1", day="20160226")
        item.save()
        with record_requests(AuditLog) as sent, pytest.raises(DerivedAttributeUpdateError, match="save"):
            item.update(actions=[action()])
        assert sent.requests == {}
        assert [i.user_id for i in AuditLog.by_day.query("20160226")] == ["u1"]

    def test_conditions_and_filters_compare_logical_values(self, bound: None) -> None:
        item = AuditLog("/c", 1, user_id="u1", day="20160226")
        item.save()
        item.note = "ok"
        item.save(condition=AuditLog.day == "20160226")
        item.update(actions=[AuditLog.note.set("ok2")], condition=AuditLog.day.is_in("20160226", "x"))
        with pytest.raises(Exception, match="ConditionalCheckFailed"):
            item.update(actions=[AuditLog.note.set("no")], condition=AuditLog.day != "20160226")
        assert [i.note for i in AuditLog.scan(AuditLog.day == "20160226")] == ["ok2"]
        assert list(AuditLog.scan(AuditLog.day == "2016022")) == []
        assert [i.file_path for i in AuditLog.scan(AuditLog.day.startswith("2016"))] == ["/c"]
        assert [i.file_path for i in AuditLog.query("/c", filter_condition=AuditLog.day == "20160226")] == ["/c"]

    def test_inexact_comparison_refused_before_sending(self, bound: None) -> None:
        with record_requests(AuditLog) as sent, pytest.raises(ShardConditionError, match=r"AuditLog\.day"):
            list(AuditLog.scan(AuditLog.day > "2016"))
        with pytest.raises(ShardConditionError, match=r"AuditLog\.day"):
            AuditLog("/x", 1, user_id="u", day="d").save(condition=AuditLog.day < "e")
        assert sent.requests == {}

    def test_refusals_name_the_index_and_its_query(self, bound: None) -> None:
        """Not "the sharded hash key" and ``AuditLog.query``: the index and ``AuditLog.by_day.query``."""
        with record_requests(AuditLog) as sent:
            with pytest.raises(ShardConditionError, match=r"uses < on the sharded hash key of index 'by_day', which "
                               r"DynamoDB stores as '<value>_<shard>' in the index"):
                AuditLog("/x", 1, user_id="u", day="d").save(condition=AuditLog.day < "e")
            days = [f"201602{n:02}" for n in range(13)]  # 8 index shards each: 104 values
            with pytest.raises(ShardConditionError, match=r"IN of 104 physical keys, .* or query each value with "
                               r"AuditLog\.by_day\.query\."):
                list(AuditLog.query("/x", filter_condition=AuditLog.day.is_in(*days)))
        assert sent.requests == {}
        assert raw_items(AuditLog) == []


class FlakyByDay(GlobalSecondaryIndex["FlakyLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8))


class FlakyLog(ShardedModel):
    class Meta:
        table_name = "gsi_flaky_log"
        max_retry_attempts = 0

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = FlakyByDay()
    shards = Sharding(HashedShards(2))


class TestLostReply:
    """A save whose reply was lost (applied, then failed) and is saved again keeps its random
    index shard: the retry overwrites the stored entry where it is, never moves it."""

    @pytest.mark.parametrize("fault", ["lost", "closed"])
    def test_retried_save_keeps_the_index_value(self, dynamodb_models: BindModels, fault: str) -> None:
        from tests.faults import Faults

        dynamodb_models(FlakyLog)
        puts = Faults(FlakyLog, "PutItem")
        for n in range(10):
            item = FlakyLog(f"/l/{n}", n, day="20160226")
            puts.plan = [fault]
            with pytest.raises(PutError):
                item.save()
            applied = [e["day"]["S"] for e in index_items(FlakyLog, "by_day") if e["accessed_at"]["N"] == str(n)]
            assert len(applied) == 1  # the lost attempt was applied
            item.save()
            stored = [e["day"]["S"] for e in index_items(FlakyLog, "by_day") if e["accessed_at"]["N"] == str(n)]
            assert stored == applied
        assert FlakyLog.by_day.count("20160226") == 10
        assert len(raw_items(FlakyLog)) == 10


class ZeroByDay(GlobalSecondaryIndex["ZeroLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4), first_shard=0)


class ZeroLog(ShardedModel):
    class Meta:
        table_name = "gsi_zero_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = ZeroByDay()
    shards = Sharding(HashedShards(2))


def test_first_shard_zero_on_an_index(dynamodb_models: BindModels) -> None:
    """An index declared with first_shard=0 stores day_0 .. day_3 and reads them all back."""
    dynamodb_models(ZeroLog)
    with ZeroLog.batch_write() as batch:
        for n in range(40):
            batch.save(ZeroLog(f"/z/{n}", n, day="20160226"))
    values = {entry["day"]["S"] for entry in index_items(ZeroLog, "by_day")}
    assert values == {f"20160226_{shard}" for shard in range(4)}
    assert ZeroLog.by_day.shards.read_shards("20160226") == (0, 1, 2, 3)
    assert [i.accessed_at for i in ZeroLog.by_day.query("20160226")] == list(range(40))
    assert {i.day for i in ZeroLog.scan()} == {"20160226"}
