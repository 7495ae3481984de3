"""Sharded global secondary indexes, every layout (DynamoDB Local).

``Sharding(...)`` on a ``GlobalSecondaryIndex`` spreads one index key over index shards, stored
either in the value (``suffixed``: ``day = "20160226_3"``) or in an attribute of its own
(``multi_attribute``: ``day = "20160226"``, ``day_shard = 3``). Whatever the layout, the raw
index holds one partition per index shard, every read path gives the logical day back, a query
of the index merges its shards like a query of a sharded table, and writes keep an item's index
entry where its shard says. Each test here runs once per layout (``tests/index_layouts.py``);
what only one layout does is in ``test_sharded_index_suffixed.py`` and
``test_sharded_index_multi.py``. A plain PynamoDB model with the same unsharded index is the
reference.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.exceptions import PutError
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import ConsistentIndexReadError, DerivedAttributeUpdateError
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.faults import Faults
from tests.index_layouts import LAYOUTS, USER_SHARDS, Layout, PlainLog, keys, write_both, write_logs
from tests.paging import pages
from tests.raw import index_items, raw_items

DAY = "20160226"


@pytest.fixture(params=LAYOUTS, ids=str)
def layout(request: pytest.FixtureRequest) -> Layout:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def logs(dynamodb_models: BindModels, layout: Layout) -> Any:
    """The layout's log and ``PlainLog``, each holding 120 items of one day and one of the next."""
    dynamodb_models(layout.log, PlainLog)
    write_logs(layout.log)
    return layout.log


@pytest.fixture
def log(dynamodb_models: BindModels, layout: Layout) -> Any:
    """The layout's log, empty."""
    dynamodb_models(layout.log)
    return layout.log


def day_partitions(layout: Layout, day: str = DAY) -> set[tuple[str, ...]]:
    """Every index partition a day may be stored in (8 index shards)."""
    return {layout.stored(day, shard) for shard in range(1, 9)}


class TestSpreadOverIndexShards:
    """4,000 items of one day land evenly on the index's 8 partitions."""

    def test_every_index_partition_holds_350_to_650_items(self, dynamodb_models: BindModels, layout: Layout) -> None:
        dynamodb_models(layout.log, PlainLog)
        write_both(layout.log, 4000, users=4000)
        per_partition = Counter(layout.partition(entry) for entry in index_items(layout.log))
        assert sorted(per_partition) == sorted(day_partitions(layout))
        assert all(350 <= count <= 650 for count in per_partition.values()), per_partition
        assert sum(per_partition.values()) == 4000
        assert layout.log.by_day.count(DAY) == 4000 == PlainLog.by_day.count(DAY)
        assert layout.log.by_day.shards.read_shards(DAY) == tuple(range(1, 9))


class TestMergedIndexQuery:
    """A merged query of the sharded index returns what PynamoDB returns for the unsharded one."""

    @pytest.mark.parametrize("forward", [True, False])
    @pytest.mark.parametrize("limit", [1, 7, 50])
    def test_equals_plain_index_with_resume_after_every_page(self, logs: Any, forward: bool, limit: int) -> None:
        got = pages(lambda **kw: logs.by_day.query(DAY, scan_index_forward=forward, **kw), limit=limit)
        expected = pages(lambda **kw: PlainLog.by_day.query(DAY, scan_index_forward=forward, **kw), limit=limit)
        assert keys(got) == keys(expected)
        assert [item.accessed_at for item in got] == sorted(range(120), reverse=not forward)

    def test_page_tokens_resume(self, logs: Any) -> None:
        got = pages(lambda **kw: logs.by_day.query(DAY, **kw), token=True, limit=17)
        assert [item.accessed_at for item in got] == list(range(120))

    def test_range_condition_filter_projection_page_size(self, logs: Any) -> None:
        def run(model: Any) -> list[Any]:
            return list(model.by_day.query(
                DAY, model.accessed_at.between(10, 60), filter_condition=model.note == "odd",
                page_size=4, attributes_to_get=["accessed_at", "note"],
            ))
        got, expected = run(logs), run(PlainLog)
        assert [(i.accessed_at, i.note) for i in got] == [(i.accessed_at, i.note) for i in expected]
        assert [i.accessed_at for i in got] == list(range(11, 60, 2))
        assert all(i.user_id is None for i in got)  # projected away, as in PynamoDB

    def test_limit_and_count(self, logs: Any) -> None:
        assert [i.accessed_at for i in logs.by_day.query(DAY, limit=5)] == [0, 1, 2, 3, 4]
        assert logs.by_day.count(DAY) == PlainLog.by_day.count(DAY) == 120
        assert logs.by_day.count(DAY, logs.accessed_at < 30) == 30
        assert logs.by_day.count(DAY, filter_condition=logs.note == "odd") == 60
        assert logs.by_day.count(DAY, limit=10) == 10
        assert logs.by_day.count("20160227") == 1

    def test_consistent_read_refused_before_sending(self, logs: Any) -> None:
        with record_requests(logs) as sent, pytest.raises(ConsistentIndexReadError, match="by_day"):
            list(logs.by_day.query(DAY, consistent_read=True))
        with pytest.raises(ConsistentIndexReadError, match="by_day"):
            logs.by_day.count(DAY, consistent_read=True)
        assert sent.requests == {}


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
        self, log: Any, stamps: list[int], users: int, limit: int, forward: bool,
    ) -> None:
        day = f"d{next(self.days)}"
        with log.batch_write() as batch:
            for n, stamp in enumerate(stamps):
                batch.save(log(f"/p/{n}", stamp, user_id=f"u{n % users}", day=day))
        got = pages(lambda **kw: log.by_day.query(day, scan_index_forward=forward, **kw), limit=limit)
        assert [item.accessed_at for item in got] == sorted(stamps, reverse=not forward)
        assert {item.day for item in got} <= {day}
        assert log.by_day.count(day) == len(stamps)


class TestLogicalValueOnEveryReadPath:
    """The raw table stores the layout's index partition; every read gives the logical day back."""

    def test_reads(self, layout: Layout, log: Any) -> None:
        log("/a", 1, user_id="u1", day=DAY).save()
        (raw,) = raw_items(log)
        assert layout.partition(raw) == layout.stored(DAY, USER_SHARDS["u1"])
        assert log.get("/a", 1).day == DAY
        assert [i.day for i in log.query("/a")] == [DAY]
        assert [i.day for i in log.scan()] == [DAY]
        assert [i.day for i in log.batch_get([("/a", 1)])] == [DAY]
        assert [i.day for i in log.by_day.query(DAY)] == [DAY]
        assert [i.day for i in log.scan(index_name="by_day")] == [DAY]
        item = log.get("/a", 1)
        item.refresh()
        assert item.day == DAY

    def test_item_without_the_attribute_is_not_in_the_index(self, layout: Layout, log: Any) -> None:
        log("/a", 1, user_id="u1").save()
        assert index_items(log) == []
        assert set(layout.log_partition).isdisjoint(raw_items(log)[0])
        item = log.get("/a", 1)
        assert item.day is None
        item.day = DAY
        item.save()
        assert [i.file_path for i in log.by_day.query(DAY)] == ["/a"]
        item.day = None
        item.save()  # out of the index again: every attribute of its index key goes
        assert index_items(log) == []
        assert set(layout.log_partition).isdisjoint(raw_items(log)[0])


class TestWrites:
    """Every write path stores the index partition; a changed user_id moves the entry."""

    def test_batch_write_transaction_and_update_store_physical_values(self, layout: Layout, log: Any) -> None:
        with log.batch_write() as batch:
            batch.save(log("/b", 1, user_id="u1", day=DAY))
        with TransactWrite(connection=log._get_connection().connection) as transaction:
            transaction.save(log("/t", 2, user_id="u2", day=DAY))
        item = log.get("/b", 1)
        item.update(actions=[log.note.set("x")])
        assert (item.day, item.note) == (DAY, "x")
        stored = sorted(layout.partition(entry) for entry in index_items(log))
        assert stored == sorted([layout.stored(DAY, USER_SHARDS["u1"]), layout.stored(DAY, USER_SHARDS["u2"])])
        assert sorted(i.file_path for i in log.by_day.query(DAY)) == ["/b", "/t"]

    def test_changing_user_id_moves_the_index_entry(self, layout: Layout, log: Any) -> None:
        for n in range(16):  # enough users that some pairs land on different index shards
            log(f"/m/{n}", n, user_id=f"u{n}", day=DAY).save()
        moved = 0
        for n in range(16):
            item = log.get(f"/m/{n}", n)
            before = {layout.partition(e) for e in index_items(log) if e["accessed_at"]["N"] == str(n)}
            item.user_id = f"u{n + 1}"
            item.save()
            after = [layout.partition(e) for e in index_items(log) if e["accessed_at"]["N"] == str(n)]
            assert len(after) == 1  # one entry, never two
            # The entry sits where a new item of the new user goes.
            twin = log(f"/m/{n}", n, user_id=f"u{n + 1}", day=DAY)
            assert after[0] == layout.stored(DAY, log.by_day.shards.write_shard(twin))
            moved += after[0] not in before
        assert moved > 0
        got = list(log.by_day.query(DAY))
        assert [(i.accessed_at, i.user_id) for i in got] == [(n, f"u{n + 1}") for n in range(16)]

    def test_random_index_shard_is_kept_across_saves(self, dynamodb_models: BindModels, layout: Layout) -> None:
        model = layout.random_log
        dynamodb_models(model)
        for n in range(20):
            model(f"/r/{n}", n, day=DAY).save()

        def stored() -> dict[str, tuple[str, ...]]:
            entries = index_items(model, layout.random_index)
            return {e["file_path"]["S"]: layout.random_partition_of(e) for e in entries}

        before = stored()
        for item in model.by_day.query(DAY):
            item.note = "touched"
            item.save()
        for item in model.scan():
            item.note = "again"
            item.save()
        assert stored() == before
        assert set(before.values()) <= day_partitions(layout)
        assert len(set(before.values())) > 1  # the 20 items did spread
        assert model.by_day.count(DAY) == 20
        item = model.get("/r/0", 0)
        item.day = "20160227"
        item.save()
        assert [i.file_path for i in model.by_day.query("20160227")] == ["/r/0"]
        assert model.by_day.count(DAY) == 19


class TestUpdatesAndConditions:
    """Updates that would leave the index partition inconsistent are refused before sending;
    conditions and filters on the index attribute compare logical values."""

    @pytest.mark.parametrize("action", [
        lambda log: log.day.set("20160301"),
        lambda log: log.day.remove(),
        lambda log: log.user_id.set("u9"),
    ], ids=["set-day", "remove-day", "set-user_id"])
    def test_update_refused_before_sending(self, log: Any, action: Any) -> None:
        item = log("/u", 1, user_id="u1", day=DAY)
        item.save()
        with record_requests(log) as sent, pytest.raises(DerivedAttributeUpdateError, match="save"):
            item.update(actions=[action(log)])
        assert sent.requests == {}
        assert [i.user_id for i in log.by_day.query(DAY)] == ["u1"]

    def test_conditions_and_filters_compare_logical_values(self, log: Any) -> None:
        item = log("/c", 1, user_id="u1", day=DAY)
        item.save()
        item.note = "ok"
        item.save(condition=log.day == DAY)
        item.update(actions=[log.note.set("ok2")], condition=log.day.is_in(DAY, "x"))
        with pytest.raises(Exception, match="ConditionalCheckFailed"):
            item.update(actions=[log.note.set("no")], condition=log.day != DAY)
        assert [i.note for i in log.scan(log.day == DAY)] == ["ok2"]
        assert list(log.scan(log.day == "2016022")) == []
        assert [i.file_path for i in log.scan(log.day.startswith("2016"))] == ["/c"]
        assert [i.file_path for i in log.query("/c", filter_condition=log.day == DAY)] == ["/c"]


class TestLostReply:
    """A save whose reply was lost (applied, then failed) and is saved again keeps its random
    index shard: the retry overwrites the stored entry where it is, never moves it."""

    @pytest.mark.parametrize("fault", ["lost", "closed"])
    def test_retried_save_keeps_the_index_shard(self, dynamodb_models: BindModels, layout: Layout, fault: str) -> None:
        model = layout.random_log
        dynamodb_models(model)
        puts = Faults(model, "PutItem")

        def stored(n: int) -> list[tuple[str, ...]]:
            entries = index_items(model, layout.random_index)
            return [layout.random_partition_of(e) for e in entries if e["accessed_at"]["N"] == str(n)]

        for n in range(10):
            item = model(f"/l/{n}", n, day=DAY)
            puts.plan = [fault]
            with pytest.raises(PutError):
                item.save()
            applied = stored(n)
            assert len(applied) == 1  # the lost attempt was applied
            item.save()
            assert stored(n) == applied
        assert model.by_day.count(DAY) == 10
        assert len(raw_items(model)) == 10
