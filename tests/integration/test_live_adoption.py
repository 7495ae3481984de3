"""Adopting a live table in place (``legacy_unsharded=True``): reads that never return a stale
or foreign item, writes that never lose one, messages the application already matches on.

A plain PynamoDB model filled the table (with a plain global secondary index on ``status``);
the plain model over the same table is the reference, raw boto3 scans the judge of what is
stored. Each class proves one point of issue 23:

1. a legacy key that ends in the separator and a number above every shard the layout can have
   (``sensor_2016`` under ``RandomShards(8)``) is that legacy key, not shard 2016 of ``sensor``;
2. ``migrate reshard`` moves it into its own shards, never into another key;
3. a filtered query or count never returns the stale bare copy of an item whose sharded copy
   fails the filter;
4. a query of a plain index returns such an item once, as it is now;
5. ``batch_write`` deletes of items read from the bare key delete them, also after a migration
   moved them;
17. a failed condition on an item still on its bare key raises PynamoDB's own ``PutError`` text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, shard_manager
from pynamodb_sharding.legacy import check_legacy_keys, find_ambiguous_keys, move_legacy_item
from pynamodb_sharding.migration import JobOptions, reshard
from tests.raw import put_raw, raw_items


class PlainByStatus(GlobalSecondaryIndex["PlainSensor"]):
    class Meta:
        index_name = "by_status"
        projection = AllProjection()

    status = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class PlainSensor(Model):
    class Meta:
        table_name = "live_sensors"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    status = UnicodeAttribute()
    value = NumberAttribute(null=True)
    by_status = PlainByStatus()


class ByStatus(GlobalSecondaryIndex["Sensor"]):
    class Meta:
        index_name = "by_status"
        projection = AllProjection()

    status = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class Sensor(ShardedModel):
    Meta = PlainSensor.Meta  # the same table

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    status = UnicodeAttribute()
    value = NumberAttribute(null=True)
    by_status = ByStatus()
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


KEYS = ("sensor", "sensor_2016", "sensor_9")


def rows(items: Any) -> list[tuple[str, int, str, Any]]:
    return [(item.sensor, int(item.at), item.status, item.value) for item in items]


def logical(stored_key: str) -> str:
    """The logical key of a stored hash key: the legacy keys are bare, sharded ones end in ``_<1..8>``."""
    return stored_key if stored_key in KEYS else stored_key.rsplit("_", 1)[0]


def stored() -> list[tuple[str, int, str, Any]]:
    """``(stored hash key, at, status, value)`` of every item in the table, sorted."""
    return sorted((raw["sensor"]["S"], int(raw["at"]["N"]), raw["status"]["S"],
                   int(raw["value"]["N"]) if "value" in raw else None) for raw in raw_items(PlainSensor))


@pytest.fixture
def table(dynamodb_models: Callable[..., Any]) -> None:
    """Three keys written by the plain model: one ends in ``_2016``, one in ``_9``."""
    dynamodb_models(PlainSensor, Sensor)
    with PlainSensor.batch_write() as batch:
        for key in KEYS:
            for at in range(6):
                batch.save(PlainSensor(key, at, status="open" if at % 2 else "closed", value=at))


@pytest.mark.usefixtures("table")
class TestSuffixAboveEveryShard:
    """``sensor_2016`` and ``sensor_9`` are legacy keys of their own under RandomShards(8)."""

    def test_the_keys_are_not_ambiguous(self) -> None:
        assert [] == find_ambiguous_keys(Sensor)
        check_legacy_keys(Sensor)  # passes, and the reads below agree with it
        assert ("sensor_2016", None) == shard_manager(Sensor).decode_stored("sensor_2016")
        assert ("sensor_9", None) == shard_manager(Sensor).decode_stored("sensor_9")
        assert ("sensor", 8) == shard_manager(Sensor).decode_stored("sensor_8")

    @pytest.mark.parametrize("key", KEYS)
    def test_reads_return_each_key_as_itself(self, key: str) -> None:
        assert rows(PlainSensor.query(key)) == rows(Sensor.query(key))
        assert rows(PlainSensor.query(key, scan_index_forward=False)) == rows(
            Sensor.query(key, scan_index_forward=False))
        assert 6 == Sensor.count(key)
        assert rows([PlainSensor.get(key, 3)]) == rows([Sensor.get(key, 3)])
        assert sorted(rows(PlainSensor.batch_get([(key, 1), (key, 2)]))) == sorted(
            rows(Sensor.batch_get([(key, 1), (key, 2)])))

    def test_scan_returns_every_key_as_itself(self) -> None:
        assert sorted(rows(PlainSensor.scan())) == sorted(rows(Sensor.scan()))

    def test_reshard_moves_each_key_into_its_own_shards(self) -> None:
        before = sorted(rows(PlainSensor.scan()))
        report = reshard(Sensor, JobOptions(total_segments=2))
        assert 18 == report.tally.moved
        per_key: dict[str, int] = {}
        for key, *_ in stored():
            name, shard = key.rsplit("_", 1)  # every stored key has a shard suffix now
            assert 1 <= int(shard) <= 8
            per_key[name] = per_key.get(name, 0) + 1
        assert dict.fromkeys(KEYS, 6) == per_key  # sensor_2016's items never joined sensor's
        assert before == sorted(rows(Sensor.scan()))
        for key in KEYS:
            assert [(key, at) for at in range(6)] == [(item.sensor, int(item.at)) for item in Sensor.query(key)]


def _shadow(key: str, at: int, **changes: Any) -> None:
    """Read ``(key, at)`` from its bare key, change it, and batch-save it: its new copy goes to
    the shard a migration would move it to, and the bare copy stays until the migration."""
    item = Sensor.get(key, at)
    assert item.shards is None
    for name, value in changes.items():
        setattr(item, name, value)
    with Sensor.batch_write() as batch:
        batch.save(item)


@pytest.mark.usefixtures("table")
class TestStaleBareCopy:
    """A bare copy shadowed by a newer sharded copy is never returned, whatever the filter."""

    def test_the_table_holds_both_copies(self) -> None:
        _shadow("sensor", 4, value=40)
        copies = [row for row in stored() if logical(row[0]) == "sensor" and row[1] == 4]
        assert [4, 40] == sorted(row[3] for row in copies)

    def test_filtered_query_and_count(self) -> None:
        _shadow("sensor", 4, value=40)
        expected = [("sensor", at, "open" if at % 2 else "closed", at) for at in range(6) if at != 4]
        assert expected == rows(Sensor.query("sensor", filter_condition=Sensor.value < 10))
        assert expected[::-1] == rows(Sensor.query("sensor", filter_condition=Sensor.value < 10,
                                                   scan_index_forward=False))
        assert 5 == Sensor.count("sensor", filter_condition=Sensor.value < 10)
        assert [("sensor", 4, "closed", 40)] == rows(Sensor.query("sensor", filter_condition=Sensor.value >= 10))
        assert 1 == Sensor.count("sensor", filter_condition=Sensor.value >= 10)
        pages: list[tuple[str, int, str, Any]] = []
        cursor = None
        for _ in range(10):
            page = Sensor.query("sensor", filter_condition=Sensor.value < 10, limit=2, last_evaluated_key=cursor)
            pages.extend(rows(page))
            cursor = page.last_evaluated_key
            if cursor is None:
                break
        assert expected == pages

    def test_plain_index_query_returns_the_item_once_as_it_is_now(self) -> None:
        _shadow("sensor", 4, status="open")  # was closed
        _shadow("sensor", 1, value=100)  # still open
        opened = rows(Sensor.by_status.query("open"))
        assert 1 == len([row for row in opened if row[:2] == ("sensor", 1)])
        assert ("sensor", 1, "open", 100) in opened
        assert ("sensor", 4, "open", 4) in opened
        assert ("sensor", 4) not in [row[:2] for row in rows(Sensor.by_status.query("closed"))]
        assert len(opened) == Sensor.by_status.count("open")
        assert len(opened) == len({row[:2] for row in opened})

    def test_scan_returns_the_item_once(self) -> None:
        _shadow("sensor_9", 2, value=-2)
        scanned = rows(Sensor.scan())
        assert 18 == len(scanned)
        assert ("sensor_9", 2, "closed", -2) in scanned


@pytest.mark.usefixtures("table")
class TestBatchDeletes:
    """A batch delete of an item read from its bare key deletes it wherever it is now."""

    def test_before_the_move(self) -> None:
        items = [Sensor.get("sensor", at) for at in (0, 1)]
        with Sensor.batch_write() as batch:
            for item in items:
                batch.delete(item)
        assert [] == [row for row in stored() if logical(row[0]) == "sensor" and row[1] in (0, 1)]

    def test_after_the_move(self) -> None:
        items = [Sensor.get("sensor", at) for at in (0, 1, 2)]
        plain = PlainSensor.get("sensor", 3)
        for at in (0, 1, 2):
            move_legacy_item(Sensor, ("sensor", at))
        with Sensor.batch_write() as batch:
            for item in items:
                batch.delete(item)
        with PlainSensor.batch_write() as batch:  # the reference: PynamoDB deletes it
            batch.delete(plain)
        left = {row[1] for row in stored() if logical(row[0]) == "sensor"}
        assert {4, 5} == left
        assert [4, 5] == [int(item.at) for item in Sensor.query("sensor")]


@pytest.mark.usefixtures("table")
class TestConditionMessages:
    """PynamoDB's message, whether the item is on its bare key or in a shard."""

    def test_save_condition_on_a_bare_item(self) -> None:
        plain = PlainSensor("sensor", 1, status="x")
        with pytest.raises(PutError) as reference:
            plain.save(PlainSensor.sensor.does_not_exist())
        item = Sensor.get("sensor", 1)
        item.value = 11
        with pytest.raises(PutError) as caught:
            item.save(Sensor.sensor.does_not_exist())
        assert "ConditionalCheckFailedException" == caught.value.cause_response_code
        # PynamoDB's text to the letter, but for the request id
        assert re.sub(r"request \(.*?\)", "", str(reference.value)) == re.sub(r"request \(.*?\)", "", str(caught.value))
        assert "on request (" in str(caught.value)
        assert ("sensor", 1) in [row[:2] for row in stored()]  # nothing moved
        new = Sensor("sensor_new", 1, status="x")
        new.save()
        with pytest.raises(PutError) as sharded:
            new.save(Sensor.sensor.does_not_exist())
        assert "ConditionalCheckFailedException" in str(sharded.value)


def test_put_raw_keys_end_in_numbers(dynamodb_models: Callable[..., Any]) -> None:
    """Values written by another tool decode the same way as the plain model's."""
    dynamodb_models(PlainSensor, Sensor)
    put_raw(PlainSensor, [{"sensor": {"S": "tank_12"}, "at": {"N": "1"}, "status": {"S": "open"}}])
    assert [("tank_12", 1)] == [(item.sensor, int(item.at)) for item in Sensor.scan()]
    assert 1 == Sensor.count("tank_12")
    assert 0 == Sensor.count("tank")
