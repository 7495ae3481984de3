"""Adopting a populated hot index in place (issue 23, point 6), on DynamoDB Local.

A plain PynamoDB model (with its plain GSI ``by_day``) and raw boto3 fill a table; then a
``ShardedModel`` declares ``Sharding(..., legacy_unsharded=True)`` on that index. Proves: every
read of the bare items (``get``, ``batch_get``, ``scan``, ``refresh``) gives what the plain
model reads; queries of the index (both directions, limits, resumed from every page's cursor
and page token) return what the plain index returns, also once the model has written sharded
entries beside the bare ones; a bare value ending in the separator and a number above every
shard is a bare value; every write stores the sharded form; ``migrate reindex`` rewrites every
bare entry once (also while four threads write through both models, every acknowledged write
read back once), yields to an application write, and a finished job does nothing; a model that
shards its table too (the issue's reproduction) reads, reshards and reindexes such a table.
"""

from __future__ import annotations

import collections
import json
import threading
from functools import partial
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, ShardKeyError
from pynamodb_sharding.migration import JobOptions, plan, reindex, reshard
from pynamodb_sharding.migration._engine import RateLimiter, _Sender
from pynamodb_sharding.migration._jobs import ReindexJob, Rewrite
from pynamodb_sharding.testing.plugin import BindModels
from tests.day_index import day_index
from tests.paging import pages
from tests.raw import index_items, put_raw, raw_client, raw_items

DAY = "20160226"


class EventAttributes:
    """The table's attributes, declared once for every model of it (PynamoDB collects a model's
    inherited attributes, from a mixin too)."""

    event_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute(null=True)
    at = NumberAttribute(null=True)
    payload = UnicodeAttribute(null=True)


class PlainEvent(EventAttributes, Model):
    """The application before adoption: a plain model with a plain index."""

    class Meta:
        table_name = "adopt_index_events"
        max_pool_connections = 16

    by_day = day_index()


class Event(EventAttributes, ShardedModel):
    """The same table, its index adopted in place; the table's keys are not sharded."""

    Meta = PlainEvent.Meta
    by_day = day_index(Sharding(RandomShards(8), legacy_unsharded=True))


def populate(legacy: int = 150) -> None:
    """The table as the plain application left it: days written by the plain model and by raw
    boto3, one day whose value ends in the separator and a number above every shard."""
    with PlainEvent.batch_write() as batch:
        for n in range(legacy):
            batch.save(PlainEvent(f"e{n:04d}", day=DAY if n % 10 else "2016_12", at=1000 + n, payload=f"p{n}"))
    put_raw(PlainEvent, [{"event_id": {"S": f"raw{n}"}, "day": {"S": DAY}, "at": {"N": str(5000 + n)},
                          "payload": {"S": "written by boto3"}} for n in range(10)])
    PlainEvent("no-day", payload="not in the index").save()


@pytest.fixture
def adopted(dynamodb_models: BindModels) -> None:
    dynamodb_models(PlainEvent, Event)  # one table (a shared Meta), created with the plain index
    populate()


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    """Job options with a checkpoint table of the test's own."""
    return JobOptions(total_segments=3, page_size=40, checkpoint_table=checkpoint_table)


def fields(item: Any) -> tuple[Any, ...]:
    return (item.event_id, item.day, item.at, item.payload)


def index_values(model: type[Model]) -> list[str]:
    """Every value the table's ``by_day`` index holds (a raw scan of the index)."""
    return [entry["day"]["S"] for entry in index_items(model)]


def sharded_form(value: str) -> bool:
    logical, _, shard = value.rpartition("_")
    return logical in (DAY, "2016_12") and shard.isdecimal() and 1 <= int(shard) <= 8


class NotAdopted(EventAttributes, ShardedModel):
    """The index declared sharded without legacy_unsharded over bare values."""

    Meta = PlainEvent.Meta
    by_day = day_index(Sharding(RandomShards(8)))


def test_bare_values_without_the_flag_name_the_fix(dynamodb_models: BindModels) -> None:
    dynamodb_models(PlainEvent, NotAdopted)
    populate(5)
    with pytest.raises(ShardKeyError) as refused:
        NotAdopted.get("e0001")
    message = str(refused.value)
    assert "NotAdopted.day: the sharded index 'by_day' reads '20160226'" in message
    assert "legacy_unsharded=True" in message
    assert "migrate reindex MODULE:NotAdopted by_day" in message


class TestReadsOfTheBareEntries:
    """Before anything is rewritten, the adopted model reads what the plain model reads."""

    def test_point_reads_batch_get_scan_and_refresh(self, adopted: None) -> None:
        keys = [f"e{n:04d}" for n in range(150)] + [f"raw{n}" for n in range(10)] + ["no-day"]
        for key in ("e0001", "e0010", "raw3", "no-day"):
            assert fields(Event.get(key)) == fields(PlainEvent.get(key))
        assert sorted(map(fields, Event.batch_get(keys))) == sorted(map(fields, PlainEvent.batch_get(keys)))
        assert sorted(map(fields, Event.scan())) == sorted(map(fields, PlainEvent.scan()))
        item = Event("e0021")
        item.refresh()
        assert fields(item) == ("e0021", "20160226", 1021, "p21")
        assert Event.get("e0030").day == "2016_12"  # 12 is above the 8 shards: a bare value

    @pytest.mark.parametrize("forward", [True, False])
    @pytest.mark.parametrize("limit", [1, 7, 50, None])
    def test_index_queries_equal_the_plain_index(self, adopted: None, forward: bool, limit: int | None) -> None:
        for day in (DAY, "2016_12"):
            expected = list(map(fields, PlainEvent.by_day.query(day, scan_index_forward=forward)))
            for token in (False, True):
                got = pages(partial(Event.by_day.query, day, scan_index_forward=forward),
                            token=token, limit=limit)
                assert list(map(fields, got)) == expected
        assert len(expected) == 15  # "2016_12"
        assert Event.by_day.count(DAY) == PlainEvent.by_day.count(DAY) == 145
        assert Event.by_day.count(DAY, Event.at >= 5000) == 10
        assert Event.by_day.count(DAY, filter_condition=Event.payload == "p7") == 1


class TestWritesAfterAdoption:
    """Every write through the model stores the sharded form; reads cover both forms, merged."""

    def test_every_write_path_stores_the_sharded_form(self, adopted: None) -> None:
        item = Event.get("e0001")
        item.payload = "saved"
        item.save()
        Event("new-1", day=DAY, at=9001).save()
        with Event.batch_write() as batch:
            batch.save(Event.get("e0002"))
            batch.save(Event("new-2", day=DAY, at=9002))
        with TransactWrite(connection=Event._get_connection().connection) as transaction:
            transaction.save(Event.get("e0003"))
        Event.get("e0004").update(actions=[Event.payload.set("updated")])  # leaves the value as it is
        raw = {entry["event_id"]["S"]: entry.get("day", {}).get("S") for entry in raw_items(Event)}
        for key in ("e0001", "new-1", "e0002", "new-2", "e0003"):
            assert sharded_form(raw[key]), (key, raw[key])
        assert raw["e0004"] == DAY
        assert raw["e0005"] == DAY
        assert Event.get("e0001").day == DAY

    @pytest.mark.parametrize("forward", [True, False])
    def test_queries_merge_bare_and_sharded_entries_and_resume(self, adopted: None, forward: bool) -> None:
        for n in range(0, 150, 3):  # a third of the legacy items saved again: now sharded
            item = Event.get(f"e{n:04d}")
            item.save()
        for n in range(40):
            Event(f"new{n}", day=DAY, at=1000 + 150 + n, payload="new").save()
        stamps = sorted([1000 + n for n in range(150) if n % 10] + [5000 + n for n in range(10)]
                        + [1150 + n for n in range(40)], reverse=not forward)
        assert sum(sharded_form(value) for value in index_values(Event)) == 50 + 40
        for limit in (1, 6, 40, None):
            for token in (False, True):
                got = pages(partial(Event.by_day.query, DAY, scan_index_forward=forward),
                            token=token, limit=limit)
                assert [item.at for item in got] == stamps
                assert {item.day for item in got} == {DAY}
        assert Event.by_day.count(DAY) == len(stamps) == 185


class TestEntriesOfOneItemOnce:
    """An item is in the bare stream or in a shard; a query returns it once, and returns two
    items that share the index's sort value both."""

    def test_an_entry_rewritten_while_a_query_runs_is_returned_once(self, adopted: None) -> None:
        from botocore.httpsession import URLLib3Session

        client = Event._get_connection().connection.client
        http = URLLib3Session()
        rewritten: list[str] = []

        def rewrite_after_the_bare_read(request: Any, **_: Any) -> Any:
            body = json.loads(request.body)
            if body.get("IndexName") != "by_day" or body["ExpressionAttributeValues"][":0"] != {"S": DAY}:
                return None
            response = http.send(request)  # the bare stream is read: now the job rewrites an item
            if not rewritten:
                raw_client(Event).update_item(
                    TableName=Event.Meta.table_name, Key={"event_id": {"S": "e0001"}},
                    UpdateExpression="SET #d = :s", ExpressionAttributeNames={"#d": "day"},
                    ExpressionAttributeValues={":s": {"S": f"{DAY}_3"}})
                rewritten.append("e0001")
            return response

        client.meta.events.register_first("before-send.dynamodb.Query", rewrite_after_the_bare_read,
                                          unique_id="rewrite-after-bare-read")
        try:
            got = [item.event_id for item in Event.by_day.query(DAY)]
        finally:
            client.meta.events.unregister("before-send.dynamodb.Query", unique_id="rewrite-after-bare-read")
        assert rewritten == ["e0001"]
        assert got.count("e0001") == 1
        assert len(got) == len(set(got)) == 145

    def test_bare_and_sharded_entries_with_one_sort_value(self, adopted: None) -> None:
        for n in range(5):
            Event(f"twin{n}", day="20160303", at=7, payload="sharded").save()
            PlainEvent(f"twin{n}b", day="20160303", at=7, payload="bare").save()
        for forward in (True, False):
            got = [item.event_id for item in Event.by_day.query("20160303", scan_index_forward=forward)]
            assert sorted(got) == sorted([f"twin{n}" for n in range(5)] + [f"twin{n}b" for n in range(5)])
        assert Event.by_day.count("20160303") == 10


class TestReindex:
    """``migrate reindex`` rewrites every bare entry once, in place, and nothing else."""

    def test_every_bare_entry_rewritten_once(self, adopted: None, options: JobOptions) -> None:
        Event("new", day=DAY, at=9000).save()  # already sharded: left as it is
        before = {entry["event_id"]["S"]: entry for entry in raw_items(Event)}
        the_plan = plan(ReindexJob(Event, "by_day"), options)
        assert the_plan.estimated_rewrites == 160
        assert "160 index entries rewritten in place" in "\n".join(the_plan.lines())
        assert {entry["event_id"]["S"]: entry for entry in raw_items(Event)} == before  # the dry run wrote nothing

        report = reindex(Event, "by_day", options)
        assert (report.tally.read, report.tally.written, report.tally.skipped, report.complete) == (162, 160, 2, True)
        assert report.tally.units > 0
        after = {entry["event_id"]["S"]: entry for entry in raw_items(Event)}
        assert after.keys() == before.keys()
        for key, entry in after.items():
            old = before[key]
            if "day" not in old:
                assert entry == old  # not in the index: untouched
                continue
            assert sharded_form(entry["day"]["S"]), entry
            was = old["day"]["S"]
            assert entry["day"]["S"].rpartition("_")[0] == (was.rpartition("_")[0] if sharded_form(was) else was)
            assert {**entry, "day": None} == {**old, "day": None}  # nothing else changed
        assert after["new"]["day"] == before["new"]["day"]
        assert all(sharded_form(value) for value in index_values(Event))
        assert [item.at for item in Event.by_day.query(DAY)] == sorted(
            [1000 + n for n in range(150) if n % 10] + [5000 + n for n in range(10)] + [9000])
        assert [item.event_id for item in Event.by_day.query("2016_12")] == [f"e{n:04d}" for n in range(0, 150, 10)]
        again = reindex(Event, "by_day", options)  # the finished job, run again: a new pass, nothing to do
        assert (again.tally.read, again.tally.written) == (162, 0)

    def test_lost_replies_throttles_and_server_errors(self, adopted: None, options: JobOptions) -> None:
        """Faults on the rewrites (more in a row than botocore's own retries): every bare entry
        is rewritten once, and a rewrite whose reply was lost counts as written."""
        from tests.faults import Faults

        updates = Faults(Event, "UpdateItem")
        updates.plan = ["lost"] * 5 + ["throttle"] * 2 + ["server-error"] * 5 + ["closed", "lost"]
        report = reindex(Event, "by_day", options)
        assert updates.plan == []
        assert (report.tally.written, report.tally.skipped, report.complete) == (160, 1, True)
        values = index_values(Event)
        assert len(values) == 160
        assert all(sharded_form(value) for value in values)

    def test_an_application_write_meanwhile_wins(self, adopted: None) -> None:
        job = ReindexJob(Event, "by_day")
        held = next(entry for entry in raw_items(Event) if entry["event_id"]["S"] == "e0001")
        rewrite = job.plan(held)
        assert isinstance(rewrite, Rewrite)
        item = Event.get("e0001")  # the application changes the item after the job read it
        item.day = "20160301"
        item.save()
        assert _Sender(job, RateLimiter(None)).rewrite(rewrite).skipped == 1
        assert Event.get("e0001").day == "20160301"
        assert [i.event_id for i in Event.by_day.query("20160301")] == ["e0001"]
        plain_written = next(entry for entry in raw_items(Event) if entry["event_id"]["S"] == "e0002")
        rewrite = job.plan(plain_written)
        assert isinstance(rewrite, Rewrite)
        PlainEvent("e0002", day="20160302", at=1002, payload="plain").save()
        assert _Sender(job, RateLimiter(None)).rewrite(rewrite).skipped == 1
        assert PlainEvent.get("e0002").day == "20160302"

    def test_reindex_while_both_models_write(self, adopted: None, options: JobOptions) -> None:
        """Four threads write through the adopted and the plain model during the job: every
        acknowledged write is read back once, with its last value; a second run afterwards
        leaves every entry sharded."""
        stop = threading.Event()
        acknowledged: dict[str, tuple[str | None, str]] = {}  # event_id -> (day, payload) last acknowledged
        lock = threading.Lock()
        errors: list[BaseException] = []

        def writer(name: str, plain: bool) -> None:
            model: Any = PlainEvent if plain else Event
            n = 0
            try:
                while not stop.is_set():
                    n += 1
                    key = f"{name}-{n}"
                    model(key, day=DAY, at=20_000 + n, payload=f"{name}/{n}").save()
                    with lock:
                        acknowledged[key] = (DAY, f"{name}/{n}")
                    legacy = f"e{(n * 7 + len(name)) % 150:04d}"
                    with lock:  # one writer of a legacy item at a time: the last acknowledged is known
                        if plain:
                            model(legacy).update(actions=[model.payload.set(f"{name}/{n}")])
                        else:
                            item = model.get(legacy)
                            item.payload = f"{name}/{n}"
                            item.save()
                        stored_day = DAY if int(legacy[1:]) % 10 else "2016_12"
                        acknowledged[legacy] = (stored_day, f"{name}/{n}")
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=writer, args=(f"w{n}", n % 2 == 1)) for n in range(4)]
        for thread in threads:
            thread.start()
        try:
            # Paced (50 write units a second, 20 items a page) so the job runs for seconds.
            report = reindex(Event, "by_day", JobOptions(total_segments=3, page_size=20, rate=50,
                                                         checkpoint_table=options.checkpoint_table))
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert errors == []
        assert report.complete
        assert report.tally.written + report.tally.skipped > 150
        assert len(acknowledged) > 40  # writes of new and legacy items, while the job ran
        stored = collections.Counter(entry["event_id"]["S"] for entry in raw_items(Event))
        for key, (day, payload) in acknowledged.items():
            assert stored[key] == 1
            assert (Event.get(key).day, Event.get(key).payload) == (day, payload)
        by_day = [item.event_id for item in Event.by_day.query(DAY)]
        assert len(by_day) == len(set(by_day))
        assert {key for key, (day, _) in acknowledged.items() if day == DAY} <= set(by_day)
        # Plain writes after their segment was read are still bare: a second run rewrites them.
        second = reindex(Event, "by_day", JobOptions(total_segments=2, checkpoint_table=options.checkpoint_table))
        assert second.complete
        assert all(sharded_form(value) for value in index_values(Event))



class LegacyTableEvent(EventAttributes, ShardedModel):
    """The issue's reproduction: the table's keys adopted in place too."""

    Meta = PlainEvent.Meta
    by_day = day_index(Sharding(RandomShards(8), legacy_unsharded=True))  # the same index, adopted as Event's
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


def test_table_and_index_adopted_together(dynamodb_models: BindModels, options: JobOptions) -> None:
    """Reads, batch_get, scan and reshard of a table whose keys and index values are both bare
    (each raised ShardKeyError before), then reindex: every item once, in a shard, its index
    entry sharded."""
    dynamodb_models(PlainEvent, LegacyTableEvent)
    populate(60)
    keys = [f"e{n:04d}" for n in range(60)]
    assert fields(LegacyTableEvent.get("e0003")) == fields(PlainEvent.get("e0003"))
    assert sorted(map(fields, LegacyTableEvent.batch_get(keys))) == sorted(map(fields, PlainEvent.batch_get(keys)))
    assert sorted(map(fields, LegacyTableEvent.scan())) == sorted(map(fields, PlainEvent.scan()))
    assert [i.at for i in LegacyTableEvent.by_day.query(DAY)] == [i.at for i in PlainEvent.by_day.query(DAY)]
    moved = reshard(LegacyTableEvent, options)
    assert moved.tally.moved == 71
    indexed = reindex(LegacyTableEvent, "by_day", options)
    assert indexed.tally.written == 70
    stored = raw_items(LegacyTableEvent)
    assert len(stored) == 71
    assert collections.Counter(entry["event_id"]["S"].rpartition("_")[0] for entry in stored) == collections.Counter(
        [*keys, *(f"raw{n}" for n in range(10)), "no-day"])
    assert all(sharded_form(entry["day"]["S"]) for entry in stored if "day" in entry)
    assert [i.at for i in LegacyTableEvent.by_day.query(DAY)] == [1000 + n for n in range(60) if n % 10] + [
        5000 + n for n in range(10)]
