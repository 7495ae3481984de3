"""A save of a new instance with a condition means on random and dynamic shards what it means on
a plain table (DynamoDB Local).

On ``RandomShards`` and ``DynamicShards`` the item stored under a key may be in any shard of the
key. A new instance's save that carries a condition, or a ``VersionAttribute`` (whose check on a
new instance is "no item yet"), is one ``TransactWriteItems``: the put with its condition, and a
check that no other shard holds the key. Each test runs the same saves on a plain PynamoDB
model (the reference) and reads the sharded table back with boto3: the same saves succeed or
fail with ``ConditionalCheckFailedException``, and the table never holds two copies of a key.
The shard each write picks is scripted, so "stored in another shard than the one picked" is
what happens, not what may happen.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import PutError, UpdateError
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, RandomShards, ShardConditionError, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.testing import record_requests
from tests.faults import Faults
from tests.raw import raw_items

BUCKET = "photos"


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
        return a  # the shortest pause between a strategy's retries

    def __call__(self, *values: int) -> None:
        with self.lock:
            self.plan = list(values)


PICKS = Picks()


class UniqueShards(ShardMetadata):
    class Meta:
        table_name = "unique_shards"


class PlainUpload(Model):
    class Meta:
        table_name = "unique_plain"

    bucket = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    size = NumberAttribute()
    version = VersionAttribute()


class RandomUpload(ShardedModel):
    class Meta:
        table_name = "unique_random"

    bucket = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    size = NumberAttribute()
    version = VersionAttribute()
    shards = Sharding(RandomShards(8, random=PICKS))


class DynamicUpload(ShardedModel):
    class Meta:
        table_name = "unique_dynamic"

    bucket = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    size = NumberAttribute()
    version = VersionAttribute()
    # Growths written to at once (the fleet protocol of fresh reads, stored with the table).
    shards = Sharding(DynamicShards(UniqueShards, initial=2, max_shards=8, cooldown=0, random=PICKS,
                                    fresh_reads=True))


class PlainNote(Model):
    """Without a version: only the conditions the application writes."""

    class Meta:
        table_name = "unique_note_plain"

    bucket = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    size = NumberAttribute()


class RandomNote(ShardedModel):
    class Meta:
        table_name = "unique_note_random"

    bucket = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    size = NumberAttribute()
    shards = Sharding(RandomShards(8, random=PICKS))


class WideNote(ShardedModel):
    class Meta:
        table_name = "unique_note_wide"

    bucket = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(range_key=True)
    size = NumberAttribute()
    shards = Sharding(RandomShards(150, random=PICKS))


def stored(model: type[Model]) -> list[tuple[str, str, int]]:
    """(physical key, name, size) of every item of the table, read with boto3."""
    return sorted((raw["bucket"]["S"], raw["name"]["S"], int(raw["size"]["N"])) for raw in raw_items(model))


def outcome(save: Callable[[], Any]) -> str:
    try:
        save()
    except PutError as error:
        return str(error.cause_response_code)
    return "saved"


@pytest.fixture(autouse=True)
def _no_picks_left() -> Iterable[None]:
    PICKS()
    yield
    PICKS()


@pytest.mark.parametrize("sharded", [RandomUpload, DynamicUpload], ids=["random", "dynamic"])
def test_a_second_create_of_a_key_fails_as_on_a_plain_table(
    dynamodb_models: Callable[..., Any], sharded: type[ShardedModel],
) -> None:
    dynamodb_models(PlainUpload, sharded)
    results = []
    for model in (PlainUpload, sharded):
        PICKS(2, 1)  # the first create picks shard 2, the second shard 1
        results.append([outcome(lambda: model(BUCKET, "cat.jpg", size=10).save()),  # noqa: B023
                        outcome(lambda: model(BUCKET, "cat.jpg", size=20).save())])  # noqa: B023
    assert [["saved", "ConditionalCheckFailedException"]] * 2 == results
    assert [(f"{BUCKET}_2", "cat.jpg", 10)] == stored(sharded)
    assert [(BUCKET, "cat.jpg", 10)] == stored(PlainUpload)
    assert [(10, 1)] == [(item.size, item.version) for item in sharded.query(BUCKET)]


def test_does_not_exist_sees_the_copy_in_another_shard(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainNote, RandomNote)
    results = []
    for model in (PlainNote, RandomNote):
        PICKS(3, 6)
        absent = model.name.does_not_exist()
        results.append([outcome(lambda: model(BUCKET, "a", size=1).save(condition=absent)),  # noqa: B023
                        outcome(lambda: model(BUCKET, "a", size=2).save(condition=absent))])  # noqa: B023
    assert [["saved", "ConditionalCheckFailedException"]] * 2 == results
    assert [(f"{BUCKET}_3", "a", 1)] == stored(RandomNote)


def test_a_condition_is_checked_on_the_stored_copy_and_replaces_it_there(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainNote, RandomNote)
    results = []
    for model in (PlainNote, RandomNote):
        PICKS(4, 7, 7)
        model(BUCKET, "a", size=1).save()  # no condition: one PutItem, to shard 4
        results.append([
            outcome(lambda: model(BUCKET, "a", size=2).save(condition=model.size == 99)),  # noqa: B023
            outcome(lambda: model(BUCKET, "a", size=3).save(condition=model.size == 1)),  # noqa: B023
        ])
    assert [["ConditionalCheckFailedException", "saved"]] * 2 == results
    # Replaced where it was stored, never copied to the shard the write picked.
    assert [(f"{BUCKET}_4", "a", 3)] == stored(RandomNote)
    assert [(BUCKET, "a", 3)] == stored(PlainNote)


def test_a_condition_on_a_missing_item_fails_as_on_a_plain_table(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainNote, RandomNote)
    results = [outcome(lambda: model(BUCKET, "b", size=1).save(condition=model.size == 1))  # noqa: B023
               for model in (PlainNote, RandomNote)]
    assert ["ConditionalCheckFailedException"] * 2 == results
    assert [] == stored(RandomNote)


def test_concurrent_creates_of_one_key_leave_one_item(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainUpload, RandomUpload)
    writers = 6
    for model in (PlainUpload, RandomUpload):
        PICKS(*range(1, writers + 1))  # each writer picks a shard of its own
        start = threading.Barrier(writers)

        def create(size: int, model: type[Model] = model, start: threading.Barrier = start) -> str:
            item = model(BUCKET, "race.jpg", size=size)
            start.wait()
            return outcome(item.save)

        with ThreadPoolExecutor(writers) as pool:
            results = Counter(pool.map(create, range(writers)))
        assert {"saved": 1, "ConditionalCheckFailedException": writers - 1} == results, model.__name__
    [(physical, name, size)] = stored(RandomUpload)
    assert physical.startswith(f"{BUCKET}_")
    assert [(name, size, 1)] == [(item.name, item.size, item.version) for item in RandomUpload.query(BUCKET)]


def test_a_key_that_grew_is_checked_in_every_shard_it_may_be_in(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(DynamicUpload, UniqueShards)
    PICKS(2)
    DynamicUpload(BUCKET, "cat.jpg", size=10).save()  # count 2: shard 2
    DynamicUpload.shards.grow(BUCKET)
    assert 4 == DynamicUpload.shards.shard_count(BUCKET)
    PICKS(4)
    assert "ConditionalCheckFailedException" == outcome(DynamicUpload(BUCKET, "cat.jpg", size=20).save)
    assert [(f"{BUCKET}_2", "cat.jpg", 10)] == stored(DynamicUpload)


def test_a_throttled_create_is_retried_on_another_shard(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(DynamicUpload, UniqueShards)
    faults = Faults(DynamicUpload, "TransactWriteItems")
    faults.plan = ["throttle"] * 4  # every attempt botocore makes of the first transaction
    PICKS(1, 2)
    DynamicUpload(BUCKET, "hot.jpg", size=1).save()
    assert ["throttle"] * 4 + ["ok"] == faults.log  # botocore's four attempts, then the strategy's retry
    assert [(f"{BUCKET}_2", "hot.jpg", 1)] == stored(DynamicUpload)
    assert 4 == DynamicUpload.shards.shard_count(BUCKET)  # grown by the throttles, as a PutItem's


def test_what_a_create_sends(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(RandomUpload)
    with record_requests(RandomUpload) as sent:
        RandomUpload(BUCKET, "a.jpg", size=1).save()
    assert {"TransactWriteItems": 1} == dict(sent.requests)
    [body] = sent.bodies("TransactWriteItems")
    actions = body["TransactItems"]
    assert 8 == len(actions)
    assert 7 == sum("ConditionCheck" in action for action in actions)
    with record_requests(RandomUpload) as sent:
        RandomUpload(BUCKET, "b.jpg", size=1).save(add_version_condition=False)  # append only
        loaded = RandomUpload.get(BUCKET, "a.jpg", consistent_read=True)
    assert {"PutItem": 1, "BatchGetItem": 1} == dict(sent.requests)
    with record_requests(RandomUpload) as sent:
        loaded.size = 2
        loaded.save()  # read back: it knows its shard
    assert {"PutItem": 1} == dict(sent.requests)
    assert [("a.jpg", 2, 2), ("b.jpg", 1, 1)] == [(i.name, i.size, i.version) for i in RandomUpload.query(BUCKET)]


def test_a_key_in_more_shards_than_a_transaction_checks_is_refused_before_sending(
    dynamodb_models: Callable[..., Any],
) -> None:
    dynamodb_models(WideNote)
    with record_requests(WideNote) as sent, pytest.raises(ShardConditionError) as refused:
        WideNote(BUCKET, "a", size=1).save(condition=WideNote.name.does_not_exist())
    message = str(refused.value)
    assert "WideNote" in message
    assert "150 shards" in message
    assert "add_version_condition=False" in message
    assert {} == dict(sent.requests)
    assert [] == stored(WideNote)
    WideNote(BUCKET, "a", size=1).save()  # without a condition: one PutItem, as before
    assert 1 == len(stored(WideNote))


def test_async_saves_check_every_shard_too(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(RandomUpload)

    async def main() -> list[str]:
        from pynamodb_sharding.aio import close_connections

        results = []
        for size in (1, 2):
            try:
                await RandomUpload(BUCKET, "async.jpg", size=size).asave()
                results.append("saved")
            except PutError as error:
                results.append(str(error.cause_response_code))
        await close_connections()
        return results

    PICKS(5, 3)
    assert ["saved", "ConditionalCheckFailedException"] == asyncio.run(main())
    assert [(f"{BUCKET}_5", "async.jpg", 1)] == stored(RandomUpload)


def test_a_retry_after_a_create_that_may_not_have_been_applied_checks_the_other_shards_again(
    dynamodb_models: Callable[..., Any],
) -> None:
    """Every attempt of the create fails with a 500 (applied or not, unknown), another writer
    creates the key in another shard, then the application retries ``save()`` on the same
    instance: the retry fails as on a plain table, and one copy stays."""
    dynamodb_models(PlainNote, RandomNote)
    results = []
    for model in (PlainNote, RandomNote):
        faults = Faults(model, "TransactWriteItems" if model is RandomNote else "PutItem")
        PICKS(2, 5)
        absent = model.name.does_not_exist()
        first = model(BUCKET, "k", size=1)
        faults.plan = ["server-error"] * 4  # botocore's four attempts; none applied
        failed = outcome(lambda: first.save(condition=absent))  # noqa: B023
        other = outcome(lambda: model(BUCKET, "k", size=2).save(condition=absent))  # noqa: B023
        results.append([failed, other, outcome(lambda: first.save(condition=absent))])  # noqa: B023
    assert [["InternalServerError", "saved", "ConditionalCheckFailedException"]] * 2 == results
    assert [(f"{BUCKET}_5", "k", 2)] == stored(RandomNote)


def test_a_create_that_follows_the_stored_copy_checks_the_other_shards_again(
    dynamodb_models: Callable[..., Any],
) -> None:
    """The create finds the key stored in shard 3 and looks for it again; held there, another
    client deletes the item and creates the key anew in shard 6. Only one create succeeds, as on
    a plain table whatever the order."""
    dynamodb_models(RandomNote)
    PICKS(3, 5, 6)
    RandomNote(BUCKET, "k", size=1).save()
    looked, go_on = threading.Event(), threading.Event()
    outcomes: list[str] = []
    creator = threading.Thread(target=lambda: outcomes.append(outcome(
        lambda: RandomNote(BUCKET, "k", size=2).save(condition=RandomNote.name.does_not_exist()))))

    def hold(model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem" and threading.current_thread() is creator:
            looked.set()
            assert go_on.wait(30)

    events = RandomNote._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb", hold)
    try:
        creator.start()
        assert looked.wait(30)
        RandomNote.get(BUCKET, "k", consistent_read=True).delete()
        again = RandomNote(BUCKET, "k", size=3)
        outcomes.append(outcome(lambda: again.save(condition=RandomNote.name.does_not_exist())))
    finally:
        go_on.set()
        creator.join(30)
        events.unregister("after-call.dynamodb", hold)
    assert ["ConditionalCheckFailedException", "saved"] == sorted(outcomes)
    assert [(f"{BUCKET}_6", "k", 3)] == stored(RandomNote)


def test_a_resend_after_a_lost_reply_and_throttles_finds_its_own_write(dynamodb_models: Callable[..., Any]) -> None:
    """The first attempt is applied but its reply lost, botocore's resends are throttled, and
    the strategy sends the save again (the count grew): its put finds the item the first
    attempt wrote, which is this save's, and the save succeeds with one copy."""
    dynamodb_models(DynamicUpload, UniqueShards)
    faults = Faults(DynamicUpload, "TransactWriteItems")
    faults.plan = ["lost", "throttle", "throttle", "throttle"]
    PICKS(1)
    item = DynamicUpload(BUCKET, "hot.jpg", size=1)
    item.save()
    assert ["lost", "throttle", "throttle", "throttle", "ok"] == faults.log
    assert 1 == item.version
    assert [(f"{BUCKET}_1", "hot.jpg", 1)] == stored(DynamicUpload)


def test_a_refused_create_raises_what_the_put_item_raises(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainUpload, RandomUpload)
    errors = []
    for model in (PlainUpload, RandomUpload):
        for name in ("n" * 1025, ""):  # a range key too long; an empty one
            with pytest.raises(PutError) as refused:
                model(BUCKET, name, size=1).save()
            errors.append((refused.value.cause_response_code, refused.value.cause_response_message,
                           str(refused.value).count(model.Meta.table_name), "PutItem operation" in str(refused.value)))
    assert errors[:2] == errors[2:]
    assert {("ValidationException", 1, True)} == {(code, tables, put) for code, _, tables, put in errors}
    assert [] == stored(RandomUpload)


def _update_held_while_created(model: type[Model], event: str) -> dict[str, str]:
    """An ``update()`` of ``model(BUCKET, "k")`` built by hand, held at its first request with
    ``event`` (a sharded model: once its lookup found nothing) while another client creates the
    key; the outcome of each."""
    looked, go_on = threading.Event(), threading.Event()
    outcomes: dict[str, str] = {}
    built = model(BUCKET, "k")
    updater = threading.Thread(target=lambda: outcomes.setdefault("update", outcome_of_update(
        lambda: built.update(actions=[type(built).size.set(7)]))))

    def hold(model: Any, **_: Any) -> None:
        if model.name in ("BatchGetItem", "UpdateItem") and threading.current_thread() is updater:
            looked.set()
            assert go_on.wait(30)

    events = model._get_connection().connection.client.meta.events
    events.register(event, hold)
    try:
        updater.start()
        assert looked.wait(30)
        created = model(BUCKET, "k", size=1)
        outcomes["create"] = outcome(lambda: created.save(condition=model.name.does_not_exist()))
    finally:
        go_on.set()
        updater.join(30)
        events.unregister(event, hold)
    return outcomes


@pytest.mark.parametrize("versioned", [False, True], ids=["plain-update", "version-checked"])
def test_an_update_that_found_nothing_acts_on_a_copy_created_meanwhile(
    dynamodb_models: Callable[..., Any], versioned: bool,
) -> None:
    """``update()`` of an instance built by hand looks for the key, finds it nowhere (so it would
    create it in a shard it picks), and is held there while another client creates the key in
    another shard. As on a plain table, the update then acts on that item (or fails its version
    check), and the table keeps one copy."""
    plain, sharded = (PlainUpload, RandomUpload) if versioned else (PlainNote, RandomNote)
    dynamodb_models(plain, sharded)
    PICKS(6, 2)  # the create (sent while the update is held) picks shard 6, the update then shard 2
    results = [_update_held_while_created(plain, "before-call.dynamodb"),
               _update_held_while_created(sharded, "after-call.dynamodb")]
    expected_update = "ConditionalCheckFailedException" if versioned else "updated"
    assert [{"create": "saved", "update": expected_update}] * 2 == results
    assert [(f"{BUCKET}_6", "k", 1 if versioned else 7)] == stored(sharded)


def outcome_of_update(update: Callable[[], Any]) -> str:
    try:
        update()
    except UpdateError as error:
        return str(error.cause_response_code)
    return "updated"


def test_an_update_of_a_stored_item_sends_what_it_sent_before(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(RandomNote)
    PICKS(4)
    RandomNote(BUCKET, "k", size=1).save()
    with record_requests(RandomNote) as sent:
        RandomNote(BUCKET, "k").update(actions=[RandomNote.size.set(2)])
    assert {"BatchGetItem": 1, "UpdateItem": 1} == dict(sent.requests)
    with record_requests(RandomNote) as sent:
        created = RandomNote(BUCKET, "new")
        created.update(actions=[RandomNote.size.set(3)])  # found nowhere: created, alone
    assert {"BatchGetItem": 1, "TransactWriteItems": 1, "GetItem": 1} == dict(sent.requests)
    assert 3 == created.size
    assert [("k", 2), ("new", 3)] == [(n.name, n.size) for n in RandomNote.query(BUCKET)]


def _recreate_elsewhere(model: type[Model], size: int) -> None:
    """Another client deletes the stored item and saves the key anew (in the next picked shard)."""
    model.get(BUCKET, "k", consistent_read=True).delete()
    model(BUCKET, "k", size=size).save(condition=model.name.does_not_exist())


@pytest.mark.parametrize("write", ["update", "save", "delete"])
def test_a_loaded_item_saved_anew_elsewhere_is_written_where_it_is_now(
    dynamodb_models: Callable[..., Any], write: str,
) -> None:
    """An item loaded from shard 3, then deleted and saved anew in shard 6 by another client:
    the loaded instance's update and save change the item in shard 6 and its delete removes it,
    as on a plain table, where the item is the key's whatever happened to it meanwhile."""
    dynamodb_models(PlainNote, RandomNote)
    for model in (PlainNote, RandomNote):
        PICKS(3, 6)
        model(BUCKET, "k", size=1).save()
        loaded = model.get(BUCKET, "k", consistent_read=True)
        _recreate_elsewhere(model, 2)
        if write == "update":
            loaded.update(actions=[model.size.set(7)])
            assert 7 == loaded.size
        elif write == "save":
            loaded.size = 7
            loaded.save()
        else:
            loaded.delete()
    kept = write != "delete"
    assert ([(f"{BUCKET}_6", "k", 7)] if kept else []) == stored(RandomNote)
    assert ([(BUCKET, "k", 7)] if kept else []) == stored(PlainNote)


@pytest.mark.parametrize("write", ["update", "delete"])
def test_a_hand_built_write_held_after_its_lookup_follows_the_item(
    dynamodb_models: Callable[..., Any], write: str,
) -> None:
    """``update()``/``delete()`` of an instance built by hand found the key in shard 3 and is
    held there while another client deletes it and saves it anew in shard 6: the write acts on
    the item in shard 6, and no copy is left beside it."""
    dynamodb_models(RandomNote)
    PICKS(3, 6)
    RandomNote(BUCKET, "k", size=1).save()
    looked, go_on = threading.Event(), threading.Event()
    done: list[str] = []
    built = RandomNote(BUCKET, "k")

    def act() -> None:
        if write == "update":
            built.update(actions=[RandomNote.size.set(7)])
        else:
            built.delete()
        done.append(write)

    writer = threading.Thread(target=act)

    def hold(model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem" and threading.current_thread() is writer and not looked.is_set():
            looked.set()
            assert go_on.wait(30)

    events = RandomNote._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb", hold)
    try:
        writer.start()
        assert looked.wait(30)
        _recreate_elsewhere(RandomNote, 2)
    finally:
        go_on.set()
        writer.join(30)
        events.unregister("after-call.dynamodb", hold)
    assert [write] == done
    assert ([(f"{BUCKET}_6", "k", 7)] if write == "update" else []) == stored(RandomNote)
