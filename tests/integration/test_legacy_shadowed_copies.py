"""A ``legacy_unsharded`` item whose sharded copy shadows its bare copy, written through an
instance read from the bare key before that copy was put: every write reaches the item as reads
return it, as a plain PynamoDB write reaches an item another instance saved meanwhile.

The sharded copy is put by another writer's batch (or transactional) put of the item, which
leaves the bare copy behind it. Each scenario runs the same steps on a plain ``Model`` over a
table of its own (the reference) and on the sharded model, and compares what reads return; raw
scans show that the sharded copy is the one written. Found by an adversarial trial: an update
that reached only the stale bare copy (lost, or version-checked against it), a conditional save
refused by the bare copy, and, where the copy is in another shard than a move puts it in (a
dynamic key whose count grew since, a ``user_id`` shard), a second sharded copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import PutError, TransactWriteError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardMetadata,
    ShardMoveError,
)
from tests.faults import OnRequest
from tests.raw import raw_items


class PlainVersioned(Model):
    class Meta:
        table_name = "shadowed_versioned"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    version = VersionAttribute()


class ReferenceVersioned(Model):
    class Meta:
        table_name = "shadowed_versioned_reference"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    version = VersionAttribute()


class Versioned(ShardedModel):
    Meta = PlainVersioned.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    version = VersionAttribute()
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


class PlainReading(Model):
    class Meta:
        table_name = "shadowed_readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    value = NumberAttribute(null=True)


class ReferenceReading(Model):
    class Meta:
        table_name = "shadowed_readings_reference"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    value = NumberAttribute(null=True)


class RandomReading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    value = NumberAttribute(null=True)
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


class ReadingCounts(ShardMetadata):
    class Meta:
        table_name = "shadowed_reading_counts"


class DynamicReading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    value = NumberAttribute(null=True)
    shards = Sharding(DynamicShards(ReadingCounts, max_shards=8, fresh_reads=True), legacy_unsharded=True)


class UserReading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    value = NumberAttribute(null=True)
    shards = Sharding(HashedShards(8, attributes=("user_id",)), legacy_unsharded=True)


def outcome(write: Callable[[], Any]) -> str:
    try:
        write()
    except (PutError, UpdateError) as error:
        return type(error).__name__
    return "ok"


def batch_put(item: Any) -> None:
    with type(item).batch_write() as batch:
        batch.save(item)


def stored(plain: type[Model], at: int) -> list[tuple[str, Any]]:
    """``(stored hash key, value)`` of the table's items at ``at``, sorted."""
    return sorted((raw["sensor"]["S"], raw["value"]["N"]) for raw in raw_items(plain) if raw["at"]["N"] == str(at))


class TestVersionChecks:
    """A ``VersionAttribute`` is checked against the item as reads return it."""

    @pytest.fixture(autouse=True)
    def tables(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(PlainVersioned, ReferenceVersioned, Versioned)
        for at in range(4):
            PlainVersioned("s1", at, value=0).save()
            ReferenceVersioned("s1", at, value=0).save()

    @staticmethod
    def update_after(model: type[Any], at: int, other_updates: bool) -> tuple[str, Any, Any, Any]:
        mine = model.get("s1", at)  # version 1 (sharded: read from the bare key)
        other = model.get("s1", at)
        other.value = 100
        batch_put(other)  # a batch put neither checks nor advances the version
        if other_updates:
            other.update(actions=[model.value.add(1)])  # version 2
        result = outcome(lambda: mine.update(actions=[model.value.set(-7)]))
        now = model.get("s1", at, consistent_read=True)
        return result, now.value, now.version, mine.version

    @pytest.mark.parametrize("other_updates", [True, False])
    def test_update(self, other_updates: bool) -> None:
        expected = self.update_after(ReferenceVersioned, 0, other_updates)
        assert expected[0] == ("UpdateError" if other_updates else "ok")
        assert expected == self.update_after(Versioned, 0, other_updates)

    def test_save(self) -> None:
        def save_after(model: type[Any]) -> tuple[str, list[Any]]:
            mine = model.get("s1", 1)
            other = model.get("s1", 1)
            other.value = 100
            batch_put(other)
            mine.value = -7
            return outcome(mine.save), [(item.value, item.version) for item in model.query("s1", model.at == 1)]

        expected = save_after(ReferenceVersioned)
        assert ("ok", [(-7, 2)]) == expected
        assert expected == save_after(Versioned)
        assert ("s1_", "-7") == next((key[:3], value) for key, value in stored(PlainVersioned, 1) if key != "s1")


class TestConditionsAndLayouts:
    """Conditions are checked on the sharded copy; a copy outside the shard a move puts the item
    in is still the one written, never a second copy beside it."""

    @pytest.fixture(autouse=True)
    def tables(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(PlainReading, ReferenceReading, RandomReading, DynamicReading, UserReading)
        with PlainReading.batch_write() as plain, ReferenceReading.batch_write() as reference:
            for at in range(8):
                plain.save(PlainReading("s1", at, user_id="u1", value=at))
                reference.save(ReferenceReading("s1", at, user_id="u1", value=at))

    @pytest.mark.parametrize("new_instance", [False, True])
    def test_a_save_whose_condition_holds_on_the_sharded_copy(self, new_instance: bool) -> None:
        def save_after(model: type[Any]) -> tuple[str, list[Any]]:
            mine = model("s1", 2, user_id="u1") if new_instance else model.get("s1", 2)
            other = model.get("s1", 2)
            other.value = 100
            batch_put(other)
            mine.value = -7
            return (outcome(lambda: mine.save(condition=model.value == 100)),
                    [item.value for item in model.query("s1", model.at == 2)])

        expected = save_after(ReferenceReading)
        assert ("ok", [-7]) == expected
        assert expected == save_after(RandomReading)

    def test_a_dynamic_key_grown_after_the_copy_was_put(self) -> None:
        def scenario(model: type[Any], grow: Callable[[], None]) -> list[tuple[int, Any]]:
            stale = {at: model.get("s1", at) for at in range(4)}  # read from the bare key
            for at in (0, 1, 2, 3, 6):  # another writer, while the key has one shard
                other = model.get("s1", at)
                other.value = 100 + at
                batch_put(other)
            grow()
            stale[0].update(actions=[model.value.set(-1)])
            stale[1].delete()
            stale[2].value = -3
            stale[2].save()
            stale[3].value = -4
            batch_put(stale[3])
            model("s1", 6, user_id="u1", value=-6).save()  # a new instance over the key
            return [(int(item.at), item.value) for item in model.query("s1", consistent_read=True)]

        def grow() -> None:
            while DynamicReading.shards.shard_count("s1") < 8:  # type: ignore[attr-defined]
                DynamicReading.shards.grow("s1")  # type: ignore[attr-defined]

        expected = scenario(ReferenceReading, lambda: None)
        assert [(0, -1), (2, -3), (3, -4), (4, 4), (5, 5), (6, -6), (7, 7)] == expected
        assert expected == scenario(DynamicReading, grow)
        for at, value in ((0, "-1"), (2, "-3"), (3, "-4"), (6, "-6")):
            sharded = [(key, stored_value) for key, stored_value in stored(PlainReading, at) if key != "s1"]
            assert [("s1_1", value)] == sharded, at  # the copy the other writer put, written
        assert [] == stored(PlainReading, 1)
        assert -6 == DynamicReading.get("s1", 6).value

    @pytest.mark.parametrize("write", ["update", "delete", "save"])
    def test_a_copy_put_with_another_user_id(self, write: str) -> None:
        def scenario(model: type[Any]) -> list[tuple[Any, Any]]:
            stale = model.get("s1", 5)  # user_id u1, from the bare key
            batch_put(model("s1", 5, user_id="u2", value=100))  # another writer replaces the item
            if write == "update":
                stale.update(actions=[model.value.set(-7)])
            elif write == "delete":
                stale.delete()
            else:
                stale.value = -7
                stale.save()
            return [(item.user_id, item.value) for item in model.query("s1", model.at == 5, consistent_read=True)]

        expected = scenario(ReferenceReading)
        assert {"update": [("u2", -7)], "delete": [], "save": [("u1", -7)]}[write] == expected
        assert expected == scenario(UserReading)
        sharded = [key for key, _ in stored(PlainReading, 5) if key != "s1"]
        assert len(sharded) == (0 if write == "delete" else 1)


class TestTransactionalPutsOverABareCopy:
    """A ``TransactWrite.save`` that would put a sharded copy beside an item stored only under
    its bare key is refused before anything is sent when the transaction cannot keep PynamoDB's
    meaning: its condition would be checked against the empty shard ("only if absent" passed
    and replaced the item), or a migration overtaking it before its commit could move the item
    elsewhere (a dynamic key's count grows: the commit then added a second copy). A second
    adversarial trial found both."""

    @pytest.fixture(autouse=True)
    def tables(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(PlainReading, ReferenceReading, RandomReading, DynamicReading, UserReading)
        for model in (PlainReading, ReferenceReading):
            model("s1", 1, user_id="u1", value=1).save()

    @pytest.mark.parametrize("new_instance", [True, False])
    def test_a_condition_is_refused(self, new_instance: bool) -> None:
        def put(model: type[Any]) -> None:
            item = model("s1", 1, value=-1) if new_instance else model.get("s1", 1)
            item.value = -1
            with TransactWrite(connection=model._get_connection().connection) as transaction:
                transaction.save(item, condition=model.sensor.does_not_exist())  # only if absent

        with pytest.raises(TransactWriteError):
            put(ReferenceReading)
        with pytest.raises(ShardMoveError, match=r"condition or a version check.*Call save\(\)"):
            put(RandomReading)
        assert [("s1", "1")] == stored(PlainReading, 1)
        assert [1] == [item.value for item in RandomReading.query("s1")]

    @pytest.mark.parametrize("model", [DynamicReading, UserReading])
    def test_a_layout_that_may_change_is_refused_and_a_fixed_one_shadows(self, model: type[Any]) -> None:
        connection = model._get_connection().connection
        with pytest.raises(ShardMoveError, match="may change before it commits"), \
                TransactWrite(connection=connection) as transaction:
            transaction.save(model.get("s1", 1))
        assert [("s1", "1")] == stored(PlainReading, 1)
        item = RandomReading.get("s1", 1)
        item.value = 5
        with TransactWrite(connection=RandomReading._get_connection().connection) as transaction:
            transaction.save(item)
        assert [5] == [found.value for found in RandomReading.query("s1")]
        assert [("s1", "1"), (f"s1_{item.shards}", "5")] == stored(PlainReading, 1)


class TestBatchWritesSentOnTheirOwn:
    """Batch writes the library sends on their own (deletes of a legacy model, items a job may be
    moving) check no version, as PynamoDB's batch writes do not: a delete by key of a versioned
    item, or of an instance read before another writer's update, deletes it, and the rest of the
    batch is sent. (They were sent with the version check: the batch raised and dropped the
    other writes.)"""

    def test_deletes_of_versioned_items(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(PlainVersioned, ReferenceVersioned, Versioned)
        for model in (PlainVersioned, ReferenceVersioned):
            for at in range(3):
                model("s1", at, value=at).save()
        Versioned("s1", 10, value=10).save()
        ReferenceVersioned("s1", 10, value=10).save()

        def scenario(model: type[Any]) -> list[tuple[int, Any]]:
            loaded = model.get("s1", 1)
            model.get("s1", 1).update(actions=[model.value.set(11)])  # another writer
            with model.batch_write() as batch:
                batch.delete(model("s1", 0))  # by key
                batch.delete(loaded)
                batch.delete(model("s1", 10))
                batch.save(model("s1", 20, value=20))
            return [(int(item.at), item.value) for item in model.query("s1", consistent_read=True)]

        expected = scenario(ReferenceVersioned)
        assert [(2, 2), (20, 20)] == expected
        assert expected == scenario(Versioned)
        assert [] == stored(PlainVersioned, 0) == stored(PlainVersioned, 1) == stored(PlainVersioned, 10)


class WideReading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    value = NumberAttribute(null=True)
    shards = Sharding(RandomShards(100), legacy_unsharded=True)


class ThrottledOnce:
    """Answers the next TransactWriteItems with a cancellation whose write DynamoDB throttled
    (as DynamoDB reports a throttled item of a transaction), without sending it."""

    def __init__(self, model: type[Any], checks: int) -> None:
        self.pending, self.checks = True, checks
        model._get_connection().connection.client.meta.events.register_first("before-send.dynamodb", self)

    def __call__(self, request: Any, **_: Any) -> Any:
        if not self.pending or not request.headers["X-Amz-Target"].decode().endswith("TransactWriteItems"):
            return None
        self.pending = False
        reasons = [{"Code": "None"}] * self.checks + [{"Code": "ThrottlingError", "Message": "Throughput exceeds"}]
        body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                           "Message": "Transaction cancelled", "CancellationReasons": reasons}).encode()
        return AWSResponse(request.url, 400, {"Content-Type": "application/x-amz-json-1.0"}, _Body(body))


class _Body:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body

    def read(self, *_: Any) -> bytes:
        return self.body


class TestWritesToABareKey:
    """Writes addressed to a bare key check the key's shards in the same transaction (found by a
    fourth adversarial trial: a key with more shards than a transaction holds, a throttled
    transaction, two counters taken at once given the same value, a delete right after the
    update emptying the instance)."""

    @pytest.fixture(autouse=True)
    def tables(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(PlainReading, ReferenceReading, RandomReading, WideReading)
        for model in (PlainReading, ReferenceReading):
            for at in range(3):
                model("s1", at, value=0).save()

    def test_a_key_with_more_shards_than_a_transaction_holds(self) -> None:
        def scenario(model: type[Any]) -> tuple[Any, list[Any]]:
            mine, other = model.get("s1", 1), model.get("s1", 1)
            other.value = 5
            batch_put(other)
            mine.update(actions=[model.value.add(1)])
            model.get("s1", 2).delete()
            with model.batch_write() as batch:
                batch.delete(model.get("s1", 0))
            return mine.value, [(int(item.at), item.value) for item in model.query("s1", consistent_read=True)]

        expected = scenario(ReferenceReading)
        assert (6, [(1, 6)]) == expected
        assert expected == scenario(WideReading)

    def test_a_throttled_transaction_is_sent_again(self) -> None:
        item = RandomReading.get("s1", 1)
        ThrottledOnce(RandomReading, checks=8)
        item.update(actions=[RandomReading.value.add(1)])
        assert 1 == item.value
        ThrottledOnce(RandomReading, checks=8)
        RandomReading.get("s1", 2).delete()
        assert [(0, 0), (1, 1)] == [(int(found.at), found.value) for found in RandomReading.query("s1")]

    def test_counters_taken_at_once_are_distinct(self) -> None:
        def take_two(model: type[Any], moving_request: str) -> tuple[Any, Any]:
            first, second = model.get("s1", 1), model.get("s1", 1)
            # The second client's update lands while the first one's is under way.
            with OnRequest(model, f"after-call.dynamodb.{moving_request}",
                           lambda: second.update(actions=[model.value.add(1)])) as hook:
                first.update(actions=[model.value.add(1)])
            assert hook.fired
            return first.value, second.value

        assert (1, 2) == take_two(ReferenceReading, "UpdateItem")
        assert {1, 2} == set(take_two(RandomReading, "TransactWriteItems"))  # the values UpdateItem returned
        assert [(1, 2)] == [(int(item.at), item.value) for item in RandomReading.query("s1", RandomReading.at == 1)]

    def test_a_delete_right_after_an_update(self) -> None:
        def scenario(model: type[Any]) -> tuple[Any, ...]:
            item, other = model.get("s1", 1), model.get("s1", 1)
            with OnRequest(model, "after-call.dynamodb.UpdateItem", other.delete) as hook:
                item.update(actions=[model.value.set(5)])
            assert hook.fired
            return item.sensor, item.at, item.value, [int(found.at) for found in model.query("s1")]

        expected = scenario(ReferenceReading)
        assert ("s1", 1, 5, [0, 2]) == expected
        assert expected == scenario(RandomReading)
