"""The migration of a ``legacy_unsharded`` table while the application writes: every write an
application made is read back once, as a plain PynamoDB model over a table of its own (where
the migration has nothing to do) reads it, and the migration's reports say what is true.

Found by an adversarial trial (the third on legacy writes); each race is made repeatable with a
botocore event hook that runs the other party at the exact request boundary, never by sleeping:

- an update that *adds* an attribute, landing between the migration's read of the item and its
  moving transaction, was lost (the move checked only the attributes it had read);
- an update sent to a bare key, then the migration moving the item, was applied twice (the
  library looked for a shadowing copy after the update, and found the moved one);
- a ``DynamicShards`` key growing during a move, and a batch put of the item under the grown
  count, left two sharded copies (the move checked the shards of the old count);
- an item written again with the same values after it was moved, within DynamoDB's 10 minutes
  for a request token, was reported moved by the next pass and left under its bare key;
- ``verify`` and ``compare`` counted a shadowed bare copy as a second item;
- (a fourth trial) an update of an attribute only a discriminator subclass declares was lost
  the same way as the first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, HashedShards, RandomShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.migration import JobOptions, compare, reshard, snapshot, verify
from tests.faults import OnRequest
from tests.raw import raw_client, raw_items


class PlainReading(Model):
    class Meta:
        table_name = "races_readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)


class ReferenceReading(Model):
    class Meta:
        table_name = "races_readings_reference"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)


class Reading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class RaceCounts(ShardMetadata):
    class Meta:
        table_name = "races_counts"


class DynamicReading(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(DynamicShards(RaceCounts, max_shards=8, cache_ttl=0), legacy_unsharded=True)


class TwoShards(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(HashedShards(2))


class EightShards(ShardedModel):
    Meta = PlainReading.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute(null=True)
    shards = Sharding(HashedShards(8, previous_counts=(2,)))


def stored() -> list[tuple[str, int, Any]]:
    """``(stored hash key, at, value)`` of every item of the table, sorted."""
    return sorted((raw["sensor"]["S"], int(raw["at"]["N"]), raw.get("value", {}).get("N"))
                  for raw in raw_items(PlainReading))


def values(model: type[Any]) -> list[tuple[int, Any]]:
    return [(int(item.at), item.value) for item in model.query("s1", consistent_read=True)]


@pytest.fixture
def tables(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainReading, ReferenceReading, Reading, DynamicReading, TwoShards, EightShards)


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    return JobOptions(total_segments=1, checkpoint_table=checkpoint_table)


@pytest.fixture
def s1_at_1(tables: None) -> None:
    for model in (PlainReading, ReferenceReading):
        model("s1", 1).save()  # no value yet


@pytest.mark.usefixtures("s1_at_1")
class TestUpdatesDuringAMove:
    def test_an_update_adding_an_attribute_before_the_move_commits_is_kept(self, options: JobOptions) -> None:
        reference = ReferenceReading.get("s1", 1)
        reference.update(actions=[ReferenceReading.value.set(42)])
        assert [(1, 42)] == values(ReferenceReading)
        item = Reading.get("s1", 1)  # from the bare key
        with OnRequest(Reading, "before-call.dynamodb.TransactWriteItems",
                       lambda: item.update(actions=[Reading.value.set(42)])) as hook:
            report = reshard(Reading, options)
        assert hook.fired
        assert 42 == item.value
        assert [(1, 42)] == values(Reading)
        assert 1 == report.tally.moved + report.tally.skipped  # the update moves it first, now
        assert [key for key, _, _ in stored()] != ["s1"]  # moved, with the update
        assert ["42"] == [value for _, _, value in stored()]

    def test_an_update_sent_to_the_bare_key_is_applied_once(self, options: JobOptions) -> None:
        PlainReading.get("s1", 1).update(actions=[PlainReading.value.set(10)])
        ReferenceReading.get("s1", 1).update(actions=[ReferenceReading.value.set(10)])
        reference = ReferenceReading.get("s1", 1)
        reference.update(actions=[ReferenceReading.value.add(1)])
        assert (11, [(1, 11)]) == (reference.value, values(ReferenceReading))
        item = Reading.get("s1", 1)
        reports = []
        # The migration moves the item right before the update's own move of it (the update
        # moves a bare item into its shard, then updates it there) is sent.
        with OnRequest(Reading, "before-call.dynamodb.TransactWriteItems",
                       lambda: reports.append(reshard(Reading, options))) as hook:
            item.update(actions=[Reading.value.add(1)])
        assert hook.fired
        assert 1 == reports[0].tally.moved
        assert (11, [(1, 11)]) == (item.value, values(Reading))
        assert [("s1", "11")] == [(key[:2], value) for key, _, value in stored()]
        assert item.shards is not None  # where the migration put it

    def test_an_update_adding_an_attribute_during_a_reshard_between_shards_is_kept(
            self, options: JobOptions) -> None:
        for at in range(2, 10):
            TwoShards("s1", at).save()
        held = {at: EightShards.get("s1", at) for at in range(2, 10)}
        updated = iter(range(2, 10))
        fired: list[int] = []
        lock = threading.Lock()

        def update_next(**_: Any) -> None:
            with lock:  # the job's workers send their moves side by side
                at = next(updated, None)
            if at is not None:
                held[at].update(actions=[EightShards.value.set(42)])
                fired.append(at)

        events = EightShards._get_connection().connection.client.meta.events
        events.register("before-call.dynamodb.TransactWriteItems", update_next)
        try:
            reshard(EightShards, options)
        finally:
            events.unregister("before-call.dynamodb.TransactWriteItems", update_next)
        # One update before each move the job sent: five of the items change shard (2, 3, 6, 7
        # and 9; the others keep shard 1), and how many moves are sent again depends on how the
        # workers interleave. Each update made during the reshard is kept, the other items are
        # as they were.
        assert len(fired) >= 5
        expected = [(at, 42 if at in fired else None) for at in range(2, 10)]
        assert expected == [(at, value) for at, value in values(EightShards) if at >= 2]


@pytest.mark.usefixtures("tables")
def test_a_dynamic_key_growing_during_a_move_keeps_one_copy(options: JobOptions) -> None:
    for model in (PlainReading, ReferenceReading):
        model("s1", 1, value=1).save()

    def scenario(model: type[Any], migrate: bool) -> list[tuple[int, Any]]:
        other = model.get("s1", 1)  # another instance, from the bare key

        def meanwhile() -> None:  # the move's transaction is about to be sent
            if model is DynamicReading:
                while DynamicReading.shards.shard_count("s1") < 8:  # type: ignore[attr-defined]
                    DynamicReading.shards.grow("s1")  # type: ignore[attr-defined]
            other.value = 2
            with model.batch_write() as batch:
                batch.save(other)

        if migrate:
            with OnRequest(DynamicReading, "before-call.dynamodb.TransactWriteItems", meanwhile) as hook:
                reshard(DynamicReading, options)
            assert hook.fired
        else:
            meanwhile()
        return values(model)

    expected = scenario(ReferenceReading, False)
    assert [(1, 2)] == expected
    assert expected == scenario(DynamicReading, True)
    assert 1 == DynamicReading.count("s1", consistent_read=True)
    assert [("2",)] == [(value,) for key, _, value in stored() if key != "s1"]
    assert 2 == DynamicReading.get("s1", 1, consistent_read=True).value


@pytest.mark.usefixtures("tables")
def test_an_item_written_again_with_the_same_values_is_moved_again(options: JobOptions) -> None:
    PlainReading("s1", 1, value=10).save()
    assert 1 == reshard(Reading, options).tally.moved
    Reading.get("s1", 1).delete()
    PlainReading("s1", 1, value=10).save()  # an old instance writes it again, within minutes
    second = reshard(Reading, options)
    assert 1 == second.tally.moved
    assert [] == [key for key, _, _ in stored() if key == "s1"]  # not left under its bare key
    assert [(1, 10)] == values(Reading)


@pytest.mark.usefixtures("tables")
def test_verify_and_compare_count_a_shadowed_bare_copy_once(options: JobOptions) -> None:
    for model in (PlainReading, ReferenceReading):
        for at in range(3):
            model("s1", at, value=at).save()
    for model in (ReferenceReading, Reading):  # the same step on both: a batch put of item 1
        item = model.get("s1", 1)
        item.value = 100
        with model.batch_write() as batch:
            batch.save(item)
    assert 4 == len(stored())  # the bare copy of item 1 is still there, shadowed
    assert values(ReferenceReading) == values(Reading) == [(0, 0), (1, 100), (2, 2)]
    assert verify(ReferenceReading, Reading, total_segments=2).ok
    before = snapshot(Reading, total_segments=2)
    assert 3 == before.items
    reshard(Reading, options)
    assert compare(before, snapshot(Reading, total_segments=2)).ok
    assert 3 == len(stored())


class Entity(ShardedModel):
    class Meta:
        table_name = "races_entities"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class Customer(Entity, discriminator="customer"):
    name = UnicodeAttribute()
    email = UnicodeAttribute(null=True)


def test_an_update_of_a_subclass_attribute_during_a_move_is_kept(
        dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
    dynamodb_models(Entity)
    raw_client(Entity).put_item(TableName=Entity.Meta.table_name, Item={  # written by the old application
        "pk": {"S": "ACME"}, "sk": {"S": "profile"}, "kind": {"S": "customer"}, "name": {"S": "Acme"}})
    item = Customer.get("ACME", "profile")  # from the bare key
    with OnRequest(Entity, "before-call.dynamodb.TransactWriteItems",
                   lambda: item.update(actions=[Customer.email.set("a@acme.example")])) as hook:
        reshard(Entity, options)
    assert hook.fired
    assert "a@acme.example" == Entity.get("ACME", "profile", consistent_read=True).email
    assert [("a@acme.example", True)] == [(raw.get("email", {}).get("S"), raw["pk"]["S"] != "ACME")
                                          for raw in raw_items(Entity)]
