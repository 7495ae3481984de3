"""``Sharding(..., unique_keys=True)``: PynamoDB's upsert on random and dynamic shards (DynamoDB Local).

On ``RandomShards`` and ``DynamicShards`` each save of a new instance picks a shard, so without
the flag an unconditional ``save()`` of a key stored elsewhere adds a copy (and ``get`` then
raises ``ShardLocationError``). With it, every save of an instance not loaded from the table is
one transaction that also checks the key's other shards, and replaces the item where it is
stored: one copy, the last values, as a plain PynamoDB ``Model`` keeps. Each test runs the same
saves on a plain model (the reference) and reads the sharded table back with boto3. The shard
each write picks is scripted, so "stored in another shard than the one picked" is what happens.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
    ShardLocationError,
    ShardMetadata,
    ShardMoveError,
)
from pynamodb_sharding.testing import record_requests
from tests.faults import Faults
from tests.raw import raw_client, raw_items

KEY = "event-7"


class Picks:
    """A random source whose draws are scripted: each ``randint`` returns the next planned value
    (``a`` once the plan is used up)."""

    def __init__(self) -> None:
        self.plan: list[int] = []
        self.lock = threading.Lock()

    def randint(self, a: int, b: int) -> int:
        with self.lock:
            value = self.plan.pop(0) if self.plan else a
        assert a <= value <= b
        return value

    def uniform(self, a: float, b: float) -> float:
        return a

    def __call__(self, *values: int) -> None:
        with self.lock:
            self.plan = list(values)


PICKS = Picks()


class UpsertShards(ShardMetadata):
    class Meta:
        table_name = "upsert_shards"


class PlainEvent(Model):
    class Meta:
        table_name = "upsert_plain"

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()


class RandomEvent(ShardedModel):
    """Without the flag: what the application hit (a copy per create)."""

    class Meta:
        table_name = "upsert_random_copies"

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()
    shards = Sharding(RandomShards(8, random=PICKS))


class UniqueEvent(ShardedModel):
    class Meta:
        table_name = "upsert_random"

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()
    shards = Sharding(RandomShards(8, random=PICKS), unique_keys=True)


class UniqueDynamicEvent(ShardedModel):
    class Meta:
        table_name = "upsert_dynamic"

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()
    shards = Sharding(DynamicShards(UpsertShards, initial=8, max_shards=8, cooldown=0, random=PICKS),
                      unique_keys=True)


def stored(model: type[Model]) -> list[tuple[str, int, str]]:
    """(physical key, at, payload) of every item of the table, read with boto3."""
    return sorted((raw["source"]["S"], int(raw["at"]["N"]), raw["payload"]["S"]) for raw in raw_items(model))


@pytest.fixture(autouse=True)
def _no_picks_left() -> Iterable[None]:
    PICKS()
    yield
    PICKS()


@pytest.mark.parametrize("sharded", [UniqueEvent, UniqueDynamicEvent], ids=["random", "dynamic"])
def test_unconditional_saves_of_one_key_leave_one_item_with_the_last_values(
    dynamodb_models: Callable[..., Any], sharded: type[ShardedModel],
) -> None:
    dynamodb_models(PlainEvent, RandomEvent, sharded)
    for model in (PlainEvent, RandomEvent, sharded):
        PICKS(2, 5, 1, 7, 3)  # each create picks another shard
        for n in range(5):
            model(KEY, 1, payload=f"v{n}").save()
    assert [(KEY, 1, "v4")] == stored(PlainEvent)
    # The reference for what the flag changes: five creates, five copies, and get refuses.
    assert [f"{KEY}_{shard}" for shard in (1, 2, 3, 5, 7)] == [physical for physical, _, _ in stored(RandomEvent)]
    with pytest.raises(ShardLocationError) as ambiguous:
        RandomEvent.get(KEY, 1)
    assert ambiguous.value.docs_url.endswith("errors.html#location")  # whose section names unique_keys
    assert "Sharding(..., unique_keys=True)" in str(ambiguous.value)
    # With it: one item, where the first save put it, holding the last save's values.
    assert [(f"{KEY}_2", 1, "v4")] == stored(sharded)
    assert "v4" == sharded.get(KEY, 1).payload
    assert [("v4", 2)] == [(event.payload, event.shards) for event in sharded.query(KEY)]


def test_a_save_held_at_its_transaction_while_another_creates_the_key_elsewhere_replaces_that_copy(
    dynamodb_models: Callable[..., Any],
) -> None:
    """Save A picks shard 2 and is held just before its transaction is sent; save B of the same
    key picks shard 5 and completes; A goes on. A's check of shard 5 fails, it finds B's copy
    and replaces it there: one item, A's values, as two puts on a plain table leave the later."""
    dynamodb_models(PlainEvent, UniqueEvent)
    for model in (PlainEvent, UniqueEvent):
        model(KEY, 0, payload="other").save()  # another key of the partition, untouched
    PlainEvent(KEY, 1, payload="b").save()
    PlainEvent(KEY, 1, payload="a").save()

    PICKS(2, 5)
    held, go_on = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def save_a() -> None:
        try:
            UniqueEvent(KEY, 1, payload="a").save()
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    writer = threading.Thread(target=save_a)

    def hold(model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems" and threading.current_thread() is writer and not held.is_set():
            held.set()
            assert go_on.wait(30)

    events = UniqueEvent._get_connection().connection.client.meta.events
    events.register("before-call.dynamodb", hold)
    try:
        writer.start()
        assert held.wait(30)
        UniqueEvent(KEY, 1, payload="b").save()  # picks shard 5
        assert [(f"{KEY}_1", 0, "other"), (f"{KEY}_5", 1, "b")] == stored(UniqueEvent)
    finally:
        go_on.set()
        writer.join(30)
        events.unregister("before-call.dynamodb", hold)
    assert [] == errors
    assert [(KEY, 0, "other"), (KEY, 1, "a")] == stored(PlainEvent)
    assert [(f"{KEY}_1", 0, "other"), (f"{KEY}_5", 1, "a")] == stored(UniqueEvent)
    assert "a" == UniqueEvent.get(KEY, 1).payload


def test_a_lost_reply_and_a_retry_by_a_new_instance_leave_one_item(dynamodb_models: Callable[..., Any]) -> None:
    """The first save's transaction is applied but every reply to it is lost (botocore's
    attempts too), so the application retries with a new instance (a web request sent again),
    which picks another shard: it finds the first copy and replaces it."""
    dynamodb_models(PlainEvent, UniqueEvent)
    faults = {PlainEvent: Faults(PlainEvent, "PutItem"), UniqueEvent: Faults(UniqueEvent, "TransactWriteItems")}
    for model in (PlainEvent, UniqueEvent):
        PICKS(3, 6)
        faults[model].plan = ["lost"] * 4  # the first attempt and botocore's three retries
        with pytest.raises(Exception, match="Read timeout"):
            model(KEY, 1, payload="first").save()
        model(KEY, 1, payload="retried").save()
    assert ["lost"] * 4 + ["ok"] == faults[PlainEvent].log
    # The retry's transaction is cancelled by its check of shard 3, then replaces the copy there.
    assert ["lost"] * 4 + ["ok", "ok"] == faults[UniqueEvent].log
    assert [(KEY, 1, "retried")] == stored(PlainEvent)
    assert [(f"{KEY}_3", 1, "retried")] == stored(UniqueEvent)


def test_a_lost_reply_resent_by_botocore_leaves_one_item(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(UniqueEvent)
    faults = Faults(UniqueEvent, "TransactWriteItems")
    faults.plan = ["lost"]  # applied, reply lost; botocore sends the same transaction again
    PICKS(4)
    UniqueEvent(KEY, 1, payload="once").save()
    assert ["lost", "ok"] == faults.log
    assert [(f"{KEY}_4", 1, "once")] == stored(UniqueEvent)


def test_async_saves_replace_too(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(UniqueEvent)

    async def main() -> None:
        from pynamodb_sharding.aio import close_connections

        for n in range(5):
            await UniqueEvent(KEY, 1, payload=f"async-{n}").asave()
        await close_connections()

    PICKS(6, 1, 8, 2, 4)
    asyncio.run(main())
    assert [(f"{KEY}_6", 1, "async-4")] == stored(UniqueEvent)


def test_batch_puts_go_one_by_one_and_replace(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(UniqueEvent)
    PICKS(1, 2, 3)
    UniqueEvent(KEY, 1, payload="first").save()  # shard 1
    with record_requests(UniqueEvent) as sent, UniqueEvent.batch_write() as batch:
        batch.save(UniqueEvent(KEY, 1, payload="batched"))  # picks 2: replaces the copy in 1
        batch.save(UniqueEvent(KEY, 2, payload="new"))  # picks 3
    assert {"TransactWriteItems": 3, "BatchGetItem": 1} == dict(sent.requests)
    assert [(f"{KEY}_1", 1, "batched"), (f"{KEY}_3", 2, "new")] == stored(UniqueEvent)


def test_a_transactional_put_of_a_new_instance_is_refused_and_of_a_loaded_one_is_guarded(
    dynamodb_models: Callable[..., Any],
) -> None:
    dynamodb_models(UniqueEvent)
    PICKS(2)
    UniqueEvent(KEY, 1, payload="stored").save()
    connection = UniqueEvent._get_connection().connection
    with (record_requests(UniqueEvent) as sent, pytest.raises(ShardMoveError) as refused,
          TransactWrite(connection=connection) as transaction):
        transaction.save(UniqueEvent(KEY, 1, payload="new"))
    message = str(refused.value)
    assert "UniqueEvent" in message
    assert "unique_keys=True" in message
    assert "save()" in message
    assert {} == dict(sent.requests)
    loaded = UniqueEvent.get(KEY, 1, consistent_read=True)
    loaded.payload = "in a transaction"
    with TransactWrite(connection=connection) as transaction:
        transaction.save(loaded)
    [body] = [entry["Put"] for entry in raw_transaction(loaded)]
    assert "attribute_exists" in body["ConditionExpression"]
    assert [(f"{KEY}_2", 1, "in a transaction")] == stored(UniqueEvent)


def raw_transaction(loaded: ShardedModel) -> list[dict[str, Any]]:
    """The ``TransactItems`` a ``TransactWrite.save`` of ``loaded`` sends (built, not sent)."""
    transaction = TransactWrite(connection=type(loaded)._get_connection().connection)
    transaction.save(loaded)
    return [{"Put": put} for put in transaction._put_items]


def test_what_a_save_sends(dynamodb_models: Callable[..., Any]) -> None:
    """A new key: one transaction (the put and a check of each other shard). A key stored in
    another shard: that transaction is cancelled, one BatchGetItem finds the copy, and a second
    transaction replaces it. A loaded item: one conditional PutItem, as without the flag."""
    dynamodb_models(UniqueEvent)
    PICKS(3, 5)
    with record_requests(UniqueEvent) as sent:
        UniqueEvent(KEY, 1, payload="first").save()
    assert {"TransactWriteItems": 1} == dict(sent.requests)
    [body] = sent.bodies("TransactWriteItems")
    assert (1, 7) == (sum("Put" in a for a in body["TransactItems"]),
                      sum("ConditionCheck" in a for a in body["TransactItems"]))
    with record_requests(UniqueEvent) as sent:
        UniqueEvent(KEY, 1, payload="second").save()
    assert {"TransactWriteItems": 2, "BatchGetItem": 1} == dict(sent.requests)
    loaded = UniqueEvent.get(KEY, 1, consistent_read=True)
    with record_requests(UniqueEvent) as sent:
        loaded.payload = "third"
        loaded.save()
    assert {"PutItem": 1} == dict(sent.requests)
    assert [(f"{KEY}_3", 1, "third")] == stored(UniqueEvent)


def test_units_a_save_consumes(dynamodb_models: Callable[..., Any]) -> None:
    """The write units DynamoDB Local reports for a save of a new key and for a replace (the
    figures docs/sharding.rst quotes), against a plain PynamoDB put's."""
    dynamodb_models(PlainEvent, UniqueEvent)
    consumed: dict[str, dict[str, float]] = {}

    def measure(label: str, save: Callable[[], Any], model: type[Model]) -> None:
        events = model._get_connection().connection.client.meta.events
        total: dict[str, float] = {}

        def ask(params: dict[str, Any], **_: Any) -> None:
            params["ReturnConsumedCapacity"] = "TOTAL"

        def add(parsed: dict[str, Any], model: Any, **_: Any) -> None:
            entries = parsed.get("ConsumedCapacity") or []
            units = sum(entry.get("CapacityUnits", 0.0) for entry in ([entries] if isinstance(entries, dict)
                                                                       else entries))
            total[model.name] = total.get(model.name, 0.0) + units

        events.register("provide-client-params.dynamodb", ask)
        events.register("after-call.dynamodb", add)
        try:
            save()
        finally:
            events.unregister("provide-client-params.dynamodb", ask)
            events.unregister("after-call.dynamodb", add)
        consumed[label] = total

    PICKS(3, 5)
    measure("plain put", lambda: PlainEvent(KEY, 1, payload="x").save(), PlainEvent)
    measure("new key", lambda: UniqueEvent(KEY, 1, payload="x").save(), UniqueEvent)
    measure("replace", lambda: UniqueEvent(KEY, 1, payload="y").save(), UniqueEvent)
    assert {"plain put": {"PutItem": 1.0}, "new key": {"TransactWriteItems": 2.0},
            "replace": {"TransactWriteItems": 2.0, "BatchGetItem": 1.0}} == consumed


def test_declarations_that_cannot_work_are_refused() -> None:
    with pytest.raises(ShardingDefinitionError, match=r"unique_keys=.*expected True or False"):
        Sharding(RandomShards(4), unique_keys="yes")  # type: ignore[arg-type]
    with pytest.raises(ShardingDefinitionError) as wide:
        class WideEvent(ShardedModel):
            class Meta:
                table_name = "upsert_wide"

            source = UnicodeAttribute(hash_key=True)
            shards = Sharding(RandomShards(150), unique_keys=True)
    assert "WideEvent.source" in str(wide.value)
    assert "100" in str(wide.value)

    with pytest.raises(ShardingDefinitionError) as on_index:
        class ByDay(GlobalSecondaryIndex["DayEvent"]):
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)
            shards = Sharding(HashedShards(4), unique_keys=True)

        class DayEvent(ShardedModel):
            class Meta:
                table_name = "upsert_day"

            source = UnicodeAttribute(hash_key=True)
            day = UnicodeAttribute()
            by_day = ByDay()
    assert "by_day" in str(on_index.value)
    assert "on the model" in str(on_index.value)

    class HashedEvent(ShardedModel):  # keys unique already: accepted, and changes nothing
        class Meta:
            table_name = "upsert_hashed"

        source = UnicodeAttribute(hash_key=True)
        shards = Sharding(HashedShards(300), unique_keys=True)

    assert HashedEvent.shards.unique_keys


def test_raw_client_sees_one_item_per_key_after_concurrent_upserts(dynamodb_models: Callable[..., Any]) -> None:
    """Eight threads save the same key at once, each picking a shard of its own: one item is
    left, holding one of their values, and every writer succeeded (a put never fails on a plain
    table either)."""
    dynamodb_models(UniqueEvent)
    writers = 8
    PICKS(*range(1, writers + 1))
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def save(n: int) -> None:
        item = UniqueEvent(KEY, 1, payload=f"w{n}")
        start.wait()
        try:
            item.save()
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [] == errors
    items = raw_client(UniqueEvent).scan(TableName=UniqueEvent.Meta.table_name, ConsistentRead=True)["Items"]
    assert 1 == len(items)
    assert items[0]["payload"]["S"] in {f"w{n}" for n in range(writers)}
