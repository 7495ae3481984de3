"""In-place adoption: a ``legacy_unsharded`` model over a table a plain PynamoDB model filled.

Proves, with the plain model over the same table as the reference and raw boto3 scans as the
judge of what is stored:

- every read (query either way, with limit, cursor, conditions; count; get; batch_get;
  refresh; scan; TransactGet) returns what the plain model returns, each item once, and never
  raises on a bare legacy key (the traps: ``count == 0`` silently, ``scan()`` raising
  ``ShardKeyError``);
- new writes go to shards; updates and deletes of an item read from its bare key address the
  bare key, or its moved copy when a migration moved it meanwhile; ``save()`` moves it;
- an item stored both bare and in a shard is returned once, the sharded copy;
- ``move_legacy_item`` moves atomically, and a re-run, a lost reply or a changed item never
  makes a second copy;
- keys that read as another key's shard (``sensor_2016_3`` with ``_``) are refused with a
  message naming another separator, and with that separator they are read correctly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, PutError, TransactWriteError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import (
    AmbiguousLegacyKeyError,
    HashedShards,
    LegacyMoveError,
    RandomShards,
    ShardedModel,
    Sharding,
    shard_manager,
)
from pynamodb_sharding._exceptions import ShardKeyError
from pynamodb_sharding.legacy import MoveOutcome, check_legacy_keys, find_ambiguous_keys, move_legacy_item
from tests.paging import pages
from tests.raw import put_raw, raw_items

SENSORS = ("s1", "s2", "s3")
SHARD_S15 = 1  # md5_shard(b"s15", 8)
SHARD_S25 = 2  # md5_shard(b"s25", 8)
SHARD_S24 = 6  # md5_shard(b"s24", 8)


class LostTransactions:
    """Applies the next ``count`` TransactWriteItems requests, then loses their replies."""

    def __init__(self, model: type[Any], count: int) -> None:
        self.remaining = count
        self.lost = 0
        self._http = URLLib3Session()
        model._get_connection().connection.client.meta.events.register_first("before-send.dynamodb", self)

    def __call__(self, request: Any, **_: Any) -> None:
        if not request.headers["X-Amz-Target"].decode().endswith("TransactWriteItems") or not self.remaining:
            return
        self.remaining -= 1
        self._http.send(request)  # applied by the server; the reply never arrives
        self.lost += 1
        raise ReadTimeoutError(endpoint_url=request.url)
PER_SENSOR = 30


class PlainReading(Model):
    class Meta:
        table_name = "readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)


class Reading(ShardedModel):
    Meta = PlainReading.Meta  # the same table

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


class HashedReading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(HashedShards(8), separator="#", legacy_unsharded=True)


class NotLegacy(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(RandomShards(8))


def rows(items: Any) -> list[tuple[str, int, Any]]:
    return [(item.sensor, int(item.at), item.value) for item in items]


def stored_keys() -> list[tuple[str, int]]:
    """``(stored hash key, at)`` of every item in the table, sorted."""
    return sorted((raw["sensor"]["S"], int(raw["at"]["N"])) for raw in raw_items(PlainReading))


@pytest.fixture
def legacy(dynamodb_models: Callable[..., Any]) -> None:
    """The table as an unsharded application left it: items under bare keys only."""
    dynamodb_models(PlainReading, Reading, HashedReading, NotLegacy)
    with PlainReading.batch_write() as batch:
        for sensor in SENSORS:
            for at in range(PER_SENSOR):
                batch.save(PlainReading(sensor, at, value=at * 10))


@pytest.mark.usefixtures("legacy")
class TestReadsCoverLegacyKeys:
    """The legacy_unsharded model reads what the plain model reads, each item once."""

    @pytest.mark.parametrize("model", [Reading, HashedReading])
    def test_query(self, model: type[Any]) -> None:
        for sensor in SENSORS:
            assert rows(PlainReading.query(sensor)) == rows(model.query(sensor))
            assert rows(PlainReading.query(sensor, scan_index_forward=False)) == rows(
                model.query(sensor, scan_index_forward=False))
            assert rows(PlainReading.query(sensor, PlainReading.at.between(5, 9), limit=3)) == rows(
                model.query(sensor, model.at.between(5, 9), limit=3))
            assert rows(PlainReading.query(sensor, filter_condition=PlainReading.value > 200)) == rows(
                model.query(sensor, filter_condition=model.value > 200))

    def test_cursor_resumes_over_legacy_and_shards(self) -> None:
        for at in range(PER_SENSOR, PER_SENSOR + 10):
            Reading("s1", at, value=at * 10).save()  # to shards
        seen = rows(pages(Reading.query, hash_key="s1", limit=7, max_pages=15))  # 40 items take 6 pages
        assert [("s1", at, at * 10) for at in range(PER_SENSOR + 10)] == seen

    def test_count_is_not_zero(self) -> None:
        assert 0 == NotLegacy.count("s1")  # the trap: a sharded model without the flag
        assert PlainReading.count("s1") == Reading.count("s1") == PER_SENSOR
        assert 10 == Reading.count("s1", limit=10)
        assert PlainReading.count("s1", PlainReading.at < 12) == Reading.count("s1", Reading.at < 12)

    @pytest.mark.parametrize("model", [Reading, HashedReading])
    def test_point_reads(self, model: type[Any]) -> None:
        assert rows([PlainReading.get("s2", 7)]) == rows([model.get("s2", 7, consistent_read=True)])
        with pytest.raises(model.DoesNotExist):
            model.get("s2", 999)
        keys = [("s1", 3), ("s3", 29), ("s2", 999)]
        assert sorted(rows(PlainReading.batch_get(keys))) == sorted(rows(model.batch_get(keys)))
        item = model("s3", 4)
        item.refresh(consistent_read=True)
        assert 40 == item.value
        with TransactGet(connection=model._get_connection().connection) as get:
            future = get.get(model, "s3", 5)
        assert 50 == future.get().value

    def test_scan_decodes_legacy_keys(self) -> None:
        with pytest.raises(ShardKeyError, match="not a physical key"):
            list(NotLegacy.scan())  # the trap: a sharded model without the flag
        Reading("s1", 100, value=1).save()
        scanned = sorted(rows(Reading.scan()))
        expected = sorted([(s, at, at * 10) for s in SENSORS for at in range(PER_SENSOR)] + [("s1", 100, 1)])
        assert expected == scanned
        shards = {item.shards for item in Reading.scan() if item.at != 100}
        assert {None} == shards  # a legacy item lives in no shard
        assert ("s1", None) == shard_manager(Reading).decode_stored("s1")
        assert ("s1", 3) == shard_manager(Reading).decode_stored("s1_3")
        assert shard_manager(Reading).legacy_unsharded


@pytest.mark.usefixtures("legacy")
class TestWrites:
    """New items go to shards; items read from a bare key are updated there, or moved."""

    def test_new_items_go_to_shards(self) -> None:
        Reading("s9", 1, value=1).save()
        HashedReading("s9", 2, value=2).save()
        stored = sorted(key for key, at in stored_keys() if key.startswith("s9"))
        assert 2 == len(stored)
        assert stored[0].startswith("s9#")
        assert stored[1].startswith("s9_")  # never the bare key "s9"

    def test_an_update_moves_the_item_and_a_delete_addresses_the_bare_key(self) -> None:
        item = Reading.get("s1", 1)
        item.update(actions=[Reading.value.set(111)])
        assert (111, item.shards) == (Reading.get("s1", 1).value, Reading.get("s1", 1).shards)
        assert item.shards is not None  # moved into its shard first, then updated there
        assert [f"s1_{item.shards}"] == [key for key, at in stored_keys() if at == 1 and key.startswith("s1")]
        Reading.get("s1", 2).delete()
        assert ("s1", 2) not in stored_keys()
        assert len(SENSORS) * PER_SENSOR - 1 == len(stored_keys())  # nothing recreated elsewhere

    def test_save_moves_the_item_into_a_shard(self) -> None:
        item = Reading.get("s1", 1)
        item.value = 5
        item.save()
        copies = [key for key, at in stored_keys() if at == 1 and key.startswith("s1")]
        assert 1 == len(copies)
        assert copies[0].startswith("s1_")
        assert 5 == Reading.get("s1", 1).value
        assert item.shards is not None

    def test_new_instance_with_a_legacy_key_replaces_it(self) -> None:
        Reading("s1", 3, value=-3).save()
        copies = [key for key, at in stored_keys() if at == 3 and key.startswith("s1")]
        assert 1 == len(copies)
        assert copies[0] != "s1"
        assert -3 == Reading.get("s1", 3).value

    def test_batch_write_of_a_legacy_item_goes_where_a_move_puts_it(self) -> None:
        item = Reading.get("s1", 5)
        item.value = -5
        with Reading.batch_write() as batch:
            batch.save(item)
        assert {("s1", 5), (f"s1_{SHARD_S15}", 5)} <= set(stored_keys())  # the bare copy is shadowed
        assert [-5] == [r.value for r in Reading.query("s1", Reading.at == 5)]
        assert -5 == Reading.get("s1", 5).value
        assert MoveOutcome.SHADOWED == move_legacy_item(Reading, ("s1", 5))
        assert [(f"s1_{SHARD_S15}", 5)] == [(k, at) for k, at in stored_keys() if at == 5 and k.startswith("s1")]

    def test_transaction_on_a_moved_item_fails_instead_of_recreating_it(self) -> None:
        item = Reading.get("s3", 11)
        with pytest.raises(TransactWriteError), TransactWrite(connection=Reading._get_connection().connection) as tx:
            tx.update(item, actions=[Reading.value.set(-11)])
            assert MoveOutcome.MOVED == move_legacy_item(Reading, ("s3", 11))  # before the commit
        assert [110] == [r.value for r in Reading.query("s3", Reading.at == 11)]
        assert ("s3", 11) not in stored_keys()

    def test_transaction_built_after_a_move_updates_the_moved_item(self) -> None:
        item = Reading.get("s3", 12)
        assert MoveOutcome.MOVED == move_legacy_item(Reading, ("s3", 12))
        with TransactWrite(connection=Reading._get_connection().connection) as tx:
            tx.update(item, actions=[Reading.value.set(-12)])
        assert [-12] == [r.value for r in Reading.query("s3", Reading.at == 12)]
        assert [key for key, at in stored_keys() if at == 12 and key.startswith("s3")] == [f"s3_{item.shards}"]

    def test_batch_write_of_a_new_instance_over_a_legacy_key(self) -> None:
        with HashedReading.batch_write() as batch:
            batch.save(HashedReading("s2", 5, value=-5))
        assert {("s2", 5), (f"s2#{SHARD_S25}", 5)} <= set(stored_keys())  # never the bare key rewritten
        assert [-5] == [r.value for r in HashedReading.query("s2", HashedReading.at == 5)]

    def test_writes_after_a_move_reach_the_moved_copy(self) -> None:
        stale = [Reading.get("s2", at) for at in (1, 2, 3)]
        for at in (1, 2, 3):
            assert MoveOutcome.MOVED == move_legacy_item(Reading, ("s2", at))
        fresh = Reading.get("s2", 4)
        move_legacy_item(Reading, ("s2", 4))
        fresh.refresh()
        assert (40, fresh.shards) == (fresh.value, SHARD_S24)  # found in its shard, not DoesNotExist
        stale[0].update(actions=[Reading.value.set(-1)])
        stale[1].delete()
        stale[2].value = -3
        stale[2].save()
        keys = [(key, at) for key, at in stored_keys() if key.startswith("s2") and at in (1, 2, 3)]
        assert [1, 3] == sorted(at for _, at in keys)
        assert all(key != "s2" for key, _ in keys)  # no bare key recreated
        assert [-1, -3] == [Reading.get("s2", at).value for at in (1, 3)]


@pytest.mark.usefixtures("legacy")
class TestBothCopies:
    """An item stored bare and in a shard is returned once: the sharded copy wins."""

    def test_sharded_copy_wins(self) -> None:
        put_raw(PlainReading, [{"sensor": {"S": "s1_4"}, "at": {"N": "4"}, "value": {"N": "-4"}}])
        assert [-4] == [item.value for item in Reading.query("s1", Reading.at == 4)]
        assert [-4] == [item.value for item in Reading.query("s1", Reading.at == 4, scan_index_forward=False)]
        assert PER_SENSOR == Reading.count("s1")
        assert PER_SENSOR == len(list(Reading.query("s1")))
        assert -4 == Reading.get("s1", 4).value
        assert [-4] == [item.value for item in Reading.batch_get([("s1", 4)])]

    def test_cursor_after_a_shadowed_copy(self) -> None:
        put_raw(PlainReading, [{"sensor": {"S": f"s1_{1 + at % 8}"}, "at": {"N": str(at)}, "value": {"N": "-1"}}
                               for at in range(0, PER_SENSOR, 3)])
        seen: list[int] = []
        cursor = None
        for _ in range(50):
            page = Reading.query("s1", limit=3, last_evaluated_key=cursor)
            seen.extend(int(item.at) for item in page)
            cursor = page.last_evaluated_key
            if cursor is None:
                break
        assert list(range(PER_SENSOR)) == seen


def shadow(at: int) -> Reading:
    """Item ``("s1", at)`` batch-written with value -1 after it was read from its bare key: its
    sharded copy shadows the bare one, which a reader never sees while the sharded copy exists."""
    item = Reading.get("s1", at)
    item.value = -1
    with Reading.batch_write() as batch:
        batch.save(item)
    copies = [key for key, stored_at in stored_keys() if stored_at == at and key.startswith("s1")]
    assert ["s1", f"s1_{item.shards}"] == copies
    return Reading.get("s1", at)  # read from its shard


async def _adelete(item: Reading) -> None:
    await item.adelete()


def delete_by(how: str, item: Reading) -> None:
    """Delete ``item`` by ``delete()``, ``adelete()``, a batch or a ``TransactWrite``."""
    if how == "delete":
        item.delete()
    elif how == "adelete":
        asyncio.run(_adelete(item))
    elif how == "batch_write":
        with Reading.batch_write() as batch:
            batch.delete(item)
    else:
        with TransactWrite(connection=Reading._get_connection().connection) as tx:
            tx.delete(item)


@pytest.mark.usefixtures("legacy")
class TestDeleteOfAShadowingCopy:
    """Deleting an item whose sharded copy shadows a bare copy deletes both: the older bare copy
    never comes back as the item (it did before: ``get`` answered the value the item had
    before its last save, a query listed it)."""

    @pytest.mark.parametrize("how", ["delete", "adelete", "batch_write", "TransactWrite"])
    def test_no_copy_is_left(self, how: str) -> None:
        PlainReading.get("s2", 5).delete()  # the reference: a plain delete leaves nothing
        with pytest.raises(PlainReading.DoesNotExist):
            PlainReading.get("s2", 5)
        item = shadow(5)
        assert -1 == item.value
        delete_by(how, item)
        assert [] == [key for key, at in stored_keys() if at == 5 and key.startswith("s1")]
        with pytest.raises(Reading.DoesNotExist):
            Reading.get("s1", 5)
        assert [] == rows(Reading.query("s1", Reading.at == 5))
        assert PER_SENSOR - 1 == Reading.count("s1")

    def test_a_failed_condition_deletes_nothing_a_reader_sees(self) -> None:
        item = shadow(6)
        with pytest.raises(DeleteError):
            item.delete(Reading.value == 12345)
        assert [("s1", 6, -1)] == rows(Reading.query("s1", Reading.at == 6))
        assert -1 == Reading.get("s1", 6).value
        assert [f"s1_{item.shards}"] == [key for key, at in stored_keys() if at == 6 and key.startswith("s1")]

    def test_a_legacy_item_without_a_sharded_copy_is_deleted_at_its_bare_key(self) -> None:
        sent: list[list[str]] = []  # the actions of each write request: "Delete s1", ...

        def record(params: dict[str, Any], **_: Any) -> None:
            items = params.get("TransactItems")
            if items is None:  # a DeleteItem
                sent.append([f"Delete {params['Key']['sensor']['S']}"])
            else:
                sent.append([f"{name} {action['Key']['sensor']['S']}" for item in items
                             for name, action in item.items()])

        events = Reading._get_connection().connection.client.meta.events
        for operation in ("DeleteItem", "TransactWriteItems"):
            events.register(f"provide-client-params.dynamodb.{operation}", record)
        Reading.get("s1", 7).delete()
        # One transaction: the delete of the bare key, and a check that no shard holds a copy
        # (which the delete would otherwise leave, see TestWritesOfAnInstanceReadBefore...).
        assert 1 == len(sent)
        assert ["Delete s1"] == [action for action in sent[0] if action.startswith("Delete")]
        assert {f"ConditionCheck s1_{shard}" for shard in range(1, 9)} == {
            action for action in sent[0] if action.startswith("ConditionCheck")}
        assert [] == [key for key, at in stored_keys() if at == 7 and key.startswith("s1")]


async def _aupdate(item: Reading) -> None:
    await item.aupdate(actions=[Reading.value.add(1)])


@pytest.mark.usefixtures("legacy")
class TestWritesOfAnInstanceReadBeforeTheItemWasPutInItsShard:
    """An instance read from its bare key, then another writer's batch or transactional put of
    the item (which writes the sharded copy reads return and leaves the bare one behind): the
    instance's write reaches the item as reads return it, as a plain PynamoDB write reaches the
    item another instance saved meanwhile. Before, it changed the stale bare copy: an update was
    lost and a delete deleted nothing, without an error."""

    @staticmethod
    def plain_reference() -> tuple[PlainReading, PlainReading]:
        first, second = PlainReading.get("s2", 8), PlainReading.get("s2", 8)
        second.value = -1
        second.save()
        return first, second

    @pytest.mark.parametrize("how", ["update", "aupdate", "TransactWrite"])
    def test_an_update_is_not_lost(self, how: str) -> None:
        first, _ = self.plain_reference()
        first.update(actions=[PlainReading.value.add(1)])
        assert 0 == PlainReading.get("s2", 8).value
        stale = Reading.get("s1", 8)
        assert stale.shards is None
        shadow(8)  # value -1 in its shard
        if how == "update":
            stale.update(actions=[Reading.value.add(1)])
            assert 0 == stale.value  # the attributes DynamoDB returned: the sharded copy's
        elif how == "aupdate":
            asyncio.run(_aupdate(stale))
        else:
            with TransactWrite(connection=Reading._get_connection().connection) as tx:
                tx.update(stale, actions=[Reading.value.add(1)])
        assert 0 == Reading.get("s1", 8).value
        assert [("s1", 8, 0)] == rows(Reading.query("s1", Reading.at == 8))

    @pytest.mark.parametrize("how", ["delete", "adelete", "batch_write", "TransactWrite"])
    def test_a_delete_deletes_the_item(self, how: str) -> None:
        first, _ = self.plain_reference()
        first.delete()
        with pytest.raises(PlainReading.DoesNotExist):
            PlainReading.get("s2", 8)
        stale = Reading.get("s1", 8)
        shadow(8)
        delete_by(how, stale)
        with pytest.raises(Reading.DoesNotExist):
            Reading.get("s1", 8)
        assert [] == rows(Reading.query("s1", Reading.at == 8))
        assert [] == [key for key, at in stored_keys() if at == 8 and key.startswith("s1")]

    def test_a_save_reaches_the_item_and_checks_its_condition_there(self) -> None:
        first, _ = self.plain_reference()
        with pytest.raises(PutError):
            first.save(PlainReading.value == 80)  # the item's value is -1 now
        first.value = 7
        first.save(PlainReading.value == -1)
        assert 7 == PlainReading.get("s2", 8).value
        stale = Reading.get("s1", 8)
        shadow(8)
        with pytest.raises(PutError):
            stale.save(Reading.value == 80)  # true of the stale bare copy only
        assert -1 == Reading.get("s1", 8).value
        stale.value = 7
        stale.save(Reading.value == -1)
        assert 7 == Reading.get("s1", 8).value
        assert [("s1", 8, 7)] == rows(Reading.query("s1", Reading.at == 8))
        sharded = [raw for raw in raw_items(PlainReading) if raw["at"]["N"] == "8" and raw["sensor"]["S"] != "s1"]
        assert [{"N": "7"}] == [raw["value"] for raw in sharded if raw["sensor"]["S"].startswith("s1_")]


@pytest.mark.usefixtures("legacy")
class TestMoveLegacyItem:
    """One atomic move per item; re-runs, lost replies and changes never double an item."""

    def test_moves_and_reruns(self) -> None:
        raw = [item for item in raw_items(PlainReading) if item["sensor"]["S"] == "s1"]
        for item in raw:
            assert MoveOutcome.MOVED == move_legacy_item(Reading, item)
        for item in raw:
            # Within 10 minutes DynamoDB answers the repeated request (same token) as it did.
            assert move_legacy_item(Reading, item) in (MoveOutcome.MOVED, MoveOutcome.ALREADY_MOVED)
            assert MoveOutcome.ALREADY_MOVED == move_legacy_item(Reading, (item["sensor"]["S"], int(item["at"]["N"])))
        s1 = [key for key, _ in stored_keys() if key.split("_")[0] == "s1"]
        assert PER_SENSOR == len(s1)
        assert "s1" not in s1
        assert rows(PlainReading.query("s2")) == rows(Reading.query("s2"))
        assert [("s1", at, at * 10) for at in range(PER_SENSOR)] == rows(Reading.query("s1"))

    def test_target_shard_is_derived_from_the_key(self) -> None:
        move_legacy_item(Reading, ("s1", 5))
        move_legacy_item(HashedReading, ("s2", 5))
        # RandomShards: md5("s15") % 8 + 1 = SHARD_S15; HashedShards: its own md5 shard.
        assert {(f"s1_{SHARD_S15}", 5), (f"s2#{SHARD_S25}", 5)} <= set(stored_keys())

    def test_lost_reply_does_not_duplicate(self) -> None:
        lost = LostTransactions(Reading, 2)
        assert move_legacy_item(Reading, ("s3", 7)) in (MoveOutcome.MOVED, MoveOutcome.ALREADY_MOVED)
        assert 2 == lost.lost
        copies = [key for key, at in stored_keys() if at == 7 and key.split("_")[0] == "s3"]
        assert 1 == len(copies)
        assert copies[0] != "s3"

    def test_changed_item_moves_its_current_version(self) -> None:
        stale = next(item for item in raw_items(PlainReading) if item["sensor"]["S"] == "s3" and item["at"]["N"] == "8")
        PlainReading("s3", 8, value=-8).save()
        assert MoveOutcome.MOVED == move_legacy_item(Reading, stale)
        assert -8 == Reading.get("s3", 8).value
        assert 1 == len([key for key, at in stored_keys() if at == 8 and key.split("_")[0] == "s3"])

    def test_existing_sharded_copy_wins(self) -> None:
        put_raw(PlainReading, [{"sensor": {"S": "s3_6"}, "at": {"N": "9"}, "value": {"N": "-9"}}])
        assert MoveOutcome.SHADOWED == move_legacy_item(Reading, ("s3", 9))
        assert [("s3_6", 9)] == [(key, at) for key, at in stored_keys() if at == 9 and key.startswith("s3")]

    def test_refused_inputs(self) -> None:
        with pytest.raises(LegacyMoveError, match="not declared legacy_unsharded"):
            move_legacy_item(NotLegacy, ("s1", 1))
        with pytest.raises(LegacyMoveError, match="not a bare legacy key"):
            move_legacy_item(Reading, {"sensor": {"S": "s1_3"}, "at": {"N": "1"}})
        assert MoveOutcome.GONE == move_legacy_item(Reading, ("s1", 999))


class Sensor(ShardedModel):
    class Meta:
        table_name = "sensors"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class SensorHash(ShardedModel):
    Meta = Sensor.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4), separator="#", legacy_unsharded=True)


class TestAmbiguousKeys:
    """``sensor_2016_3`` is refused under ``_`` (it reads as shard 3 of ``sensor_2016``)."""

    @pytest.fixture
    def table(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(Sensor, SensorHash)
        put_raw(Sensor, [{"sensor": {"S": key}, "at": {"N": str(at)}}
                         for key in ("sensor_2016", "sensor_2016_3", "sensor_2017") for at in range(3)])

    @pytest.mark.usefixtures("table")
    def test_refused_with_the_fix(self) -> None:
        assert ["sensor_2016_3"] == find_ambiguous_keys(Sensor)
        with pytest.raises(AmbiguousLegacyKeyError, match=r"separator='#'.*Nothing was read") as caught:
            check_legacy_keys(Sensor)
        assert "Sensor.sensor" in str(caught.value)
        assert "'sensor_2016_3'" in str(caught.value)

    @pytest.mark.usefixtures("table")
    def test_another_separator_reads_correctly(self) -> None:
        check_legacy_keys(SensorHash)  # passes
        assert [] == find_ambiguous_keys(SensorHash)
        assert [0, 1, 2] == [int(item.at) for item in SensorHash.query("sensor_2016")]
        assert 3 == SensorHash.count("sensor_2016_3")
        assert ["sensor_2016"] * 3 == [item.sensor for item in SensorHash.query("sensor_2016")]

    def test_values_given(self) -> None:
        assert ["a_1"] == find_ambiguous_keys(Sensor, values=["a", "a_1", "b_0", "b_x"])
        check_legacy_keys(Sensor, values=["a", "b_x"])
        with pytest.raises(AmbiguousLegacyKeyError):
            check_legacy_keys(Sensor, values=["a_2"])


def test_values_are_decimal_free(legacy: None) -> None:
    """Numbers read through the legacy model are what PynamoDB returns (int), not Decimal."""
    assert not isinstance(Reading.get("s1", 1).value, Decimal)
