"""The async methods added for whole applications answer as their sync twins, on DynamoDB Local.

``ascan``, ``aupdate``, ``arefresh``, ``abatch_get``, ``abatch_write`` and the async transactions
(``AsyncTransactWrite``, ``AsyncTransactGet``) each run the sync method's code on the event loop.
Each property below runs random calls of one method both ways and compares what the caller
sees: the items and their order, the cursor after every item, the return values, the errors
(class and DynamoDB's error code), and what is stored (the raw table, decoded). Writes are
compared on two key spaces of one table (``s…`` written by the sync calls, ``a…`` by the async
ones), reads on the same items.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from botocore.httpsession import URLLib3Session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.connection import Connection
from pynamodb.exceptions import PynamoDBException
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import (
    DerivedAttributeUpdateError,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    TimePartitioned,
)
from pynamodb_sharding._pool import pause
from pynamodb_sharding.aio import AsyncBatchWrite, AsyncTransactGet, AsyncTransactWrite
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop, loop_thread_sleeps
from tests.day_index import day_index
from tests.raw import put_raw, raw_items

NOW = 1_456_444_800  # 2016-02-26


class Account(ShardedModel):
    """A hash-key-only model, as a web app's users: one item per e-mail address."""

    class Meta:
        table_name = "async_ops_accounts"

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute(null=True)
    logins = NumberAttribute(default=0)
    version = VersionAttribute()
    shards = Sharding(HashedShards(4))


class Event(ShardedModel):
    """Random shards: an item built by hand is found by a lookup before it is written."""

    class Meta:
        table_name = "async_ops_events"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    hits = NumberAttribute(null=True)
    day = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


class IndexedEvent(ShardedModel):
    class Meta:
        table_name = "async_ops_indexed"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    day = UnicodeAttribute()
    shards = Sharding(RandomShards(2))
    by_day = day_index(Sharding(RandomShards(3)))


class LegacyEvent(ShardedModel):
    class Meta:
        table_name = "async_ops_legacy"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class PeriodEvent(ShardedModel):
    class Meta:
        table_name = TimePartitioned("async_ops_period.{period}", attribute="at", period="month",
                                     clock=lambda: NOW, missing="create")

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(3))


SLOW = settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What a caller sees of a call: its value, or its error's class and DynamoDB error code."""
    try:
        return ("ok", call())
    except PynamoDBException as error:
        return ("error", type(error).__name__, error.cause_response_code)


def run_async(loop: Loop, make: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], Any]:
    return lambda: loop.run(make())


def stored(model: type[ShardedModel], prefix: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The items of ``model``'s table whose logical key starts with ``prefix``, by logical key
    without the prefix (the raw table, decoded: what is really stored)."""
    manager = model.shards
    hash_name = manager.hash_attribute.attr_name
    range_attribute = manager.range_attribute
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for raw in raw_items(model):
        logical, _ = manager.decode(raw[hash_name]["S"])
        if not logical.startswith(prefix):
            continue
        key = (logical[len(prefix):], raw[range_attribute.attr_name]["N"] if range_attribute else None)
        assert key not in found, f"{logical} is stored twice"
        found[key] = {name: value for name, value in raw.items() if name != hash_name}
    return found


# --------------------------------------------------------------------------------------------
# ascan
# --------------------------------------------------------------------------------------------


def sync_scan_each(result: Any) -> tuple[list[tuple[Any, ...]], list[Any]]:
    items, cursors = [], []
    for item in result:
        items.append((item.path, item.at, item.user, item.shards))
        cursors.append(result.last_evaluated_key)
    cursors.append(result.last_evaluated_key)
    return items, cursors


async def async_scan_each(result: Any) -> tuple[list[tuple[Any, ...]], list[Any]]:
    items, cursors = [], []
    async for item in result:
        items.append((item.path, item.at, item.user, item.shards))
        cursors.append(result.last_evaluated_key)
    cursors.append(result.last_evaluated_key)
    return items, cursors


@SLOW
@given(
    stamps=st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["/a", "/b", "/c"]), st.integers(0, 40),
                              st.sampled_from("xyz")), max_size=30),
    limit=st.one_of(st.none(), st.integers(1, 9)),
    page_size=st.one_of(st.none(), st.integers(1, 6)),
    segments=st.sampled_from([(None, None), (0, 2), (1, 2), (2, 3)]),
    filtered=st.booleans(),
    async_first=st.booleans(),
)
def test_ascan_pages_and_cursors_are_scans(
    dynamodb_models_module: Any, loop: Loop, stamps: list[tuple[int, str, int, str]], limit: int | None,
    page_size: int | None, segments: tuple[int | None, int | None], filtered: bool, async_first: bool,
) -> None:
    """Random items over 4 shards, scanned page by page (a limit, a page size, a segment, a
    filter), resumed after every page from the other kind's cursor: the items, their decoded
    keys and shards, and the cursor after every item are those of an all-sync scan."""
    dynamodb_models_module.bind(Event)
    dynamodb_models_module.truncate()
    put_raw(Event, [{"path": {"S": f"{path}_{shard}"}, "at": {"N": str(at)}, "user": {"S": user}}
                    for shard, path, at, user in {(s, p, a): (s, p, a, u) for s, p, a, u in stamps}.values()])
    segment, total = segments
    options: dict[str, Any] = {"limit": limit, "page_size": page_size, "segment": segment,
                               "total_segments": total, "consistent_read": True}
    if filtered:
        options["filter_condition"] = Event.user != "z"
    expected = []
    cursor: Any = None
    while True:
        page = sync_scan_each(Event.scan(last_evaluated_key=cursor, **options))
        expected.append(page)
        cursor = page[1][-1]
        if cursor is None or limit is None:
            break
    pages = []
    cursor = None
    for number in range(len(expected)):
        if (number % 2 == 0) == async_first:
            page = loop.run(async_scan_each(Event.ascan(last_evaluated_key=cursor, **options)))
        else:
            page = sync_scan_each(Event.scan(last_evaluated_key=cursor, **options))
        pages.append(page)
        cursor = page[1][-1]
        cursor = None if cursor is None else json.loads(json.dumps(cursor))
    assert expected == pages


def test_ascan_of_an_index_a_period_model_and_a_projection(dynamodb_models: BindModels, loop: Loop) -> None:
    """A sharded index's ``ascan``, a time-partitioned model's (its periods' tables one after the
    other) and a projection answer as the sync scans."""
    dynamodb_models(IndexedEvent, PeriodEvent)
    PeriodEvent.create_table(wait=True)
    for n in range(12):
        IndexedEvent("/i", NOW + n, user="ab"[n % 2], day="20160226").save()
        PeriodEvent("/p", NOW + n * 86_400 * 2, user="ab"[n % 2]).save()

    def keys(items: list[Any]) -> list[tuple[Any, ...]]:
        return [(item.path, item.at, item.user, item.shards) for item in items]

    assert keys(list(IndexedEvent.by_day.scan(consistent_read=False))) == keys(
        loop.run(collect_list(IndexedEvent.by_day.ascan(consistent_read=False))))
    assert keys(list(IndexedEvent.scan(attributes_to_get=["user"]))) == keys(
        loop.run(collect_list(IndexedEvent.ascan(attributes_to_get=["user"]))))
    sync_period = PeriodEvent.scan(limit=5)
    expected = keys(list(sync_period))
    async_period = PeriodEvent.ascan(limit=5)
    assert expected == keys(loop.run(collect_list(async_period)))
    assert sync_period.last_evaluated_key == async_period.last_evaluated_key is not None
    rest = PeriodEvent.ascan(last_evaluated_key=async_period.last_evaluated_key)
    assert keys(list(PeriodEvent.scan(last_evaluated_key=sync_period.last_evaluated_key))) == keys(
        loop.run(collect_list(rest)))
    assert len(expected) + rest.total_count == 12


def test_a_legacy_scan_stopped_inside_its_last_page_has_a_cursor(dynamodb_models: BindModels, loop: Loop) -> None:
    """A ``legacy_unsharded`` model's scan whose limit stops it inside its last page has the
    cursor of the last item returned, sync and async (the sync one raised ``AttributeError``),
    and resuming it reads the rest, bare items and shards' alike."""
    dynamodb_models(LegacyEvent)
    put_raw(LegacyEvent, [{"path": {"S": "/l" if n % 2 else f"/l_{n % 4 + 1}"}, "at": {"N": str(n)}}
                          for n in range(6)])
    sync = LegacyEvent.scan(limit=4, page_size=10)
    first = [(item.path, item.at, item.shards) for item in sync]
    result = LegacyEvent.ascan(limit=4, page_size=10)
    assert first == [(item.path, item.at, item.shards) for item in loop.run(collect_list(result))]
    assert len(first) == 4
    assert sync.last_evaluated_key == result.last_evaluated_key is not None
    rest = loop.run(collect_list(LegacyEvent.ascan(last_evaluated_key=result.last_evaluated_key)))
    assert sorted([at for _, at, _ in first] + [item.at for item in rest]) == list(range(6))


async def collect_list(result: Any) -> list[Any]:
    return [item async for item in result]


def test_ascan_rate_limit_waits_by_awaiting(dynamodb_models: BindModels, loop: Loop,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan's ``rate_limit`` paces its pages (as the sync scan's does) without sleeping on the
    loop's thread: no ``time.sleep`` there, and a task ticking every 10 ms ticks meanwhile."""
    dynamodb_models(Event)
    put_raw(Event, [{"path": {"S": f"/r_{n % 4 + 1}"}, "at": {"N": str(n)}, "user": {"S": "x" * 3000}}
                    for n in range(8)])

    async def scan_while_ticking() -> tuple[int, float, int]:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        began = time.monotonic()
        # Each page of 2 items of ~3 KB costs 1 read unit (eventually consistent): at 4 units a
        # second, the 4 pages take about 0.75 s of waits.
        items = await Event.ascan(page_size=2, rate_limit=4)
        elapsed = time.monotonic() - began
        done.set()
        await ticker
        return len(items), elapsed, ticks

    sleeps = loop_thread_sleeps(monkeypatch)
    count, elapsed, ticks = loop.run(scan_while_ticking())
    assert count == 8
    assert elapsed > 0.5  # paced
    assert sleeps == []  # the waits awaited (PynamoDB's limiter sleeps with time.sleep) ...
    assert ticks > 0  # ... and the loop ran meanwhile


# --------------------------------------------------------------------------------------------
# aupdate, arefresh (and the asave, adelete, aget they follow)
# --------------------------------------------------------------------------------------------


def condition(model: type[ShardedModel], kind: str) -> Any:
    if kind == "none":
        return None
    if kind == "low":
        return (model.logins < 2) if model is Account else (model.hits < 2)
    if kind == "named":
        return model.name.exists() if model is Account else model.user.exists()
    return model.name == "b" if model is Account else model.user == "b"  # "is_b"


def actions(model: type[ShardedModel], kind: str) -> list[Any]:
    if model is Account:
        return {"add": [Account.logins.add(1)], "set": [Account.name.set("b")],
                "remove": [Account.name.remove()], "both": [Account.logins.add(2), Account.name.set("c")]}[kind]
    return {"add": [Event.hits.add(1)], "set": [Event.user.set("b")],
            "remove": [Event.user.remove()], "both": [Event.hits.add(2), Event.user.set("c")]}[kind]


class Twin:
    """One side's instances: the items of its key space, by slot."""

    def __init__(self, model: type[ShardedModel], prefix: str) -> None:
        self.model = model
        self.prefix = prefix
        self.items: dict[int, Any] = {}

    def key(self, slot: int) -> tuple[Any, ...]:
        if self.model is Account:
            return (f"{self.prefix}{slot}@example.com",)
        return (f"{self.prefix}/{slot}", NOW + slot)

    def item(self, slot: int) -> Any:
        found = self.items.get(slot)
        if found is None:  # built by hand: its shard is not known
            found = self.items[slot] = self.model(*self.key(slot))
        return found

    def seen(self, value: Any) -> Any:
        """A value as the caller compares it: the key space's prefix taken out (the two twins'
        keys hash to different shards: a physical key's suffix is taken out too), and the HTTP
        response's metadata (request id, date) left out."""
        text = json.dumps(value, sort_keys=True, default=str)
        text = re.sub(f'"{re.escape(self.prefix)}([^"]*)_[0-9]+"', r'"\1"', text)
        return _without_metadata(json.loads(text.replace(f'"{self.prefix}', '"')))


def _without_metadata(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_metadata(entry) for key, entry in value.items() if key != "ResponseMetadata"}
    if isinstance(value, list):
        return [_without_metadata(entry) for entry in value]
    return value


def apply(twin: Twin, operation: tuple[Any, ...], loop: Loop | None) -> tuple[Any, ...]:
    """Run one operation on ``twin``, sync (``loop`` None) or async; what the caller sees."""
    model = twin.model
    kind, slot = operation[0], operation[1]
    if kind == "new":
        twin.items[slot] = model(*twin.key(slot), **({"name": "a"} if model is Account else {"user": "a"}))
        return ("ok", None)
    if kind == "get":
        def got(item: Any) -> Any:
            twin.items[slot] = item
            return item.attribute_values

        if loop is None:
            return outcome(lambda: got(model.get(*twin.key(slot), consistent_read=True)))
        return outcome(lambda: got(loop.run(model.aget(*twin.key(slot), consistent_read=True))))
    item = twin.item(slot)
    if kind == "update":
        given_actions, given_condition = actions(model, operation[2]), condition(model, operation[3])
        if loop is None:
            result = outcome(lambda: item.update(given_actions, given_condition))
        else:
            result = outcome(run_async(loop, lambda: item.aupdate(given_actions, given_condition)))
        return (*result, item.attribute_values)
    if kind == "refresh":
        consistent = operation[2]
        if loop is None:
            result = outcome(lambda: item.refresh(consistent_read=consistent))
        else:
            result = outcome(run_async(loop, lambda: item.arefresh(consistent_read=consistent)))
        return (*result, item.attribute_values)
    given_condition = condition(model, operation[2])
    if kind == "save":
        if loop is None:
            result = outcome(lambda: item.save(given_condition))
        else:
            result = outcome(run_async(loop, lambda: item.asave(given_condition)))
    else:
        assert kind == "delete"
        if loop is None:
            result = outcome(lambda: item.delete(given_condition))
        else:
            result = outcome(run_async(loop, lambda: item.adelete(given_condition)))
    return (*result, item.attribute_values)


CONDITIONS = st.sampled_from(["none", "low", "named", "is_b"])
SLOTS = st.integers(0, 2)


def program(*, updates: bool, refreshes: bool) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    steps = [st.tuples(st.just("new"), SLOTS), st.tuples(st.just("get"), SLOTS),
             st.tuples(st.just("save"), SLOTS, CONDITIONS), st.tuples(st.just("delete"), SLOTS, CONDITIONS)]
    if updates:
        steps += [st.tuples(st.just("update"), SLOTS, st.sampled_from(["add", "set", "remove", "both"]),
                            CONDITIONS)] * 3
    if refreshes:
        steps += [st.tuples(st.just("refresh"), SLOTS, st.booleans())] * 3
    return st.lists(st.one_of(*steps), min_size=1, max_size=8)


def run_program(model: type[ShardedModel], steps: list[tuple[Any, ...]], loop: Loop, run: str) -> None:
    sync, asynchronous = Twin(model, f"s{run}"), Twin(model, f"a{run}")
    for step in steps:
        expected = sync.seen(apply(sync, step, None))
        actual = asynchronous.seen(apply(asynchronous, step, loop))
        assert expected == actual, step
    assert stored(model, sync.prefix) == stored(model, asynchronous.prefix)


RUNS = iter(range(1_000_000))


@SLOW
@given(model=st.sampled_from([Account, Event]), steps=program(updates=True, refreshes=False))
def test_aupdate_is_update(dynamodb_models_module: Any, loop: Loop, model: type[ShardedModel],
                           steps: list[tuple[Any, ...]]) -> None:
    """Random programs of gets, saves, deletes and updates (random actions and conditions, on
    items read back, built by hand, absent, deleted meanwhile), run with the sync calls on one key
    space and with ``aget``/``asave``/``adelete``/``aupdate`` on another: every call returns or
    raises the same (the update's new values, a failed condition's ``UpdateError``), the instances
    hold the same values, and the tables hold the same items."""
    dynamodb_models_module.bind(Account, Event)
    run_program(model, steps, loop, str(next(RUNS)))


@SLOW
@given(model=st.sampled_from([Account, Event]), steps=program(updates=False, refreshes=True))
def test_arefresh_is_refresh(dynamodb_models_module: Any, loop: Loop, model: type[ShardedModel],
                             steps: list[tuple[Any, ...]]) -> None:
    """The same with ``refresh``/``arefresh`` (of items read back, built by hand, absent): the same
    values read into the instance, the same ``DoesNotExist``."""
    dynamodb_models_module.bind(Account, Event)
    run_program(model, steps, loop, str(next(RUNS)))


def test_aupdate_refuses_what_update_refuses(dynamodb_models: BindModels, loop: Loop) -> None:
    """An update of an attribute the shard is derived from is refused before sending, async too."""

    class ByUser(ShardedModel):
        class Meta:
            table_name = "async_ops_by_user"

        path = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        user = UnicodeAttribute()
        shards = Sharding(HashedShards(4, attributes=("user",)))

    dynamodb_models(ByUser)
    item = ByUser("/u", 1, user="ann")
    item.save()
    with pytest.raises(DerivedAttributeUpdateError) as sync_error:
        item.update([ByUser.user.set("bob")])
    with pytest.raises(DerivedAttributeUpdateError) as async_error:
        loop.run(item.aupdate([ByUser.user.set("bob")]))
    assert type(sync_error.value) is type(async_error.value)
    assert str(sync_error.value) == str(async_error.value)
    assert "ByUser" in str(async_error.value)


# --------------------------------------------------------------------------------------------
# abatch_get, abatch_write
# --------------------------------------------------------------------------------------------


@SLOW
@given(
    stored_slots=st.sets(st.integers(0, 30), max_size=20),
    asked=st.lists(st.integers(0, 35), max_size=40),
    projected=st.booleans(),
    model=st.sampled_from([Account, Event]),
)
def test_abatch_get_yields_what_batch_get_yields(
    dynamodb_models_module: Any, loop: Loop, stored_slots: set[int], asked: list[int], projected: bool,
    model: type[ShardedModel],
) -> None:
    """Random keys (stored, absent, repeated, more than one request's 100) read with
    ``batch_get`` and ``abatch_get``: the same items in the same order, with the same shards."""
    dynamodb_models_module.bind(Account, Event)
    dynamodb_models_module.truncate()
    twin = Twin(model, "k")
    for slot in stored_slots:
        twin.item(slot).save()
    keys = [twin.key(slot) if model is Event else twin.key(slot)[0] for slot in asked]
    projection = ["logins"] if projected and model is Account else (["hits"] if projected else None)

    def seen(items: list[Any]) -> list[Any]:
        return [(item.attribute_values, item.shards) for item in items]

    expected = seen(list(model.batch_get(keys, attributes_to_get=projection)))
    assert expected == seen(loop.run(collect_list(model.abatch_get(keys, attributes_to_get=projection))))
    assert expected == seen(loop.run(_awaited(model.abatch_get(iter(keys), attributes_to_get=projection))))
    assert len(expected) == len(stored_slots & set(asked))


async def _awaited(result: Any) -> Any:
    return await result


@SLOW
@given(
    model=st.sampled_from([Account, Event]),
    writes=st.lists(st.tuples(st.sampled_from(["save", "delete"]), st.integers(0, 40), st.sampled_from("abc")),
                    min_size=1, max_size=60),
    loaded=st.booleans(),
)
def test_abatch_write_writes_what_batch_write_writes(
    dynamodb_models_module: Any, loop: Loop, model: type[ShardedModel], writes: list[tuple[str, int, str]],
    loaded: bool,
) -> None:
    """Random puts and deletes (more than one request's 25, of new items and of items read back)
    through ``batch_write`` on one key space and ``abatch_write`` on another: the batches succeed
    or fail the same (a key twice in one request), their pending writes are the same after each
    call, and the tables hold the same items afterwards."""
    dynamodb_models_module.bind(Account, Event)
    run = str(next(RUNS))
    sync, asynchronous = Twin(model, f"s{run}"), Twin(model, f"a{run}")
    if loaded:  # items read back: each remembers its shard
        for twin in (sync, asynchronous):
            for slot in range(0, 40, 3):
                twin.item(slot).save()
            for slot in range(0, 40, 3):
                twin.items[slot] = model.get(*twin.key(slot))

    def item(twin: Twin, slot: int, value: str) -> Any:
        found = twin.item(slot)
        setattr(found, "name" if model is Account else "user", value)
        return found

    pending_sync: list[int] = []

    def write_sync() -> None:
        with model.batch_write() as batch:
            for kind, slot, value in writes:
                getattr(batch, kind)(item(sync, slot, value))
                pending_sync.append(len(batch.pending_operations))

    pending_async: list[int] = []

    async def write_async() -> None:
        async with model.abatch_write() as batch:
            assert isinstance(batch, AsyncBatchWrite)
            for kind, slot, value in writes:
                await getattr(batch, kind)(item(asynchronous, slot, value))
                pending_async.append(len(batch.pending_operations))

    # A key written twice in one request is DynamoDB's ValidationException, both ways.
    assert outcome(write_sync) == outcome(lambda: loop.run(write_async()))
    assert pending_sync == pending_async
    assert stored(model, sync.prefix) == stored(model, asynchronous.prefix)


# --------------------------------------------------------------------------------------------
# transactions
# --------------------------------------------------------------------------------------------


def connection_of(model: type[ShardedModel]) -> Connection:
    meta = model.Meta
    return Connection(region=meta.region, host=meta.host, aws_access_key_id=meta.aws_access_key_id,
                      aws_secret_access_key=meta.aws_secret_access_key)


TRANSACTION_STEP = st.one_of(
    st.tuples(st.just("save"), SLOTS, CONDITIONS),
    st.tuples(st.just("update"), SLOTS, st.sampled_from(["add", "set", "both"]), CONDITIONS),
    st.tuples(st.just("delete"), SLOTS, CONDITIONS),
    st.tuples(st.just("check"), SLOTS, st.sampled_from(["low", "named", "is_b"])),
)


@SLOW
@given(
    model=st.sampled_from([Account, Event]),
    before=st.lists(st.tuples(st.sampled_from(["save", "update"]), SLOTS), max_size=4),
    transactions=st.lists(st.lists(TRANSACTION_STEP, min_size=1, max_size=3, unique_by=lambda step: step[1]),
                          min_size=1, max_size=3),
    read_back=st.lists(SLOTS, min_size=1, max_size=3, unique=True),
)
def test_async_transactions_are_transactions(
    dynamodb_models_module: Any, loop: Loop, model: type[ShardedModel], before: list[tuple[str, int]],
    transactions: list[list[tuple[Any, ...]]], read_back: list[int],
) -> None:
    """Random ``TransactWrite`` blocks (saves, updates, deletes and condition checks, some whose
    conditions fail and cancel the transaction) run with the sync class on one key space and with
    ``AsyncTransactWrite`` on another: each commit succeeds or raises the same
    ``TransactWriteError``, the tables hold the same items; then ``TransactGet`` and
    ``AsyncTransactGet`` of the same keys read the same items."""
    dynamodb_models_module.bind(Account, Event)
    run = str(next(RUNS))
    sync, asynchronous = Twin(model, f"s{run}"), Twin(model, f"a{run}")
    connection = connection_of(model)
    for kind, slot in before:
        for twin in (sync, asynchronous):
            if kind == "save":
                twin.item(slot).save()
            else:
                twin.item(slot).update(actions(model, "add"))

    def sync_block(steps: list[tuple[Any, ...]]) -> None:
        with TransactWrite(connection=connection) as transaction:
            for step in steps:
                kind, slot = step[0], step[1]
                if kind == "save":
                    transaction.save(sync.item(slot), condition(model, step[2]))
                elif kind == "update":
                    transaction.update(sync.item(slot), actions(model, step[2]), condition(model, step[3]))
                elif kind == "delete":
                    transaction.delete(sync.item(slot), condition(model, step[2]))
                else:
                    transaction.condition_check(model, *sync.key(slot), condition=condition(model, step[2]))

    async def async_block(steps: list[tuple[Any, ...]]) -> None:
        async with AsyncTransactWrite(connection=connection) as transaction:
            for step in steps:
                kind, slot = step[0], step[1]
                if kind == "save":
                    await transaction.save(asynchronous.item(slot), condition(model, step[2]))
                elif kind == "update":
                    await transaction.update(asynchronous.item(slot), actions(model, step[2]),
                                             condition(model, step[3]))
                elif kind == "delete":
                    await transaction.delete(asynchronous.item(slot), condition(model, step[2]))
                else:
                    await transaction.condition_check(model, *asynchronous.key(slot),
                                                      condition=condition(model, step[2]))

    for steps in transactions:
        expected = outcome(lambda: sync_block(steps))  # noqa: B023 - called at once
        assert expected == outcome(lambda: loop.run(async_block(steps))), steps  # noqa: B023
    assert stored(model, sync.prefix) == stored(model, asynchronous.prefix)

    def sync_get() -> list[Any]:
        with TransactGet(connection=connection) as transaction:
            futures = [transaction.get(model, *sync.key(slot)) for slot in read_back]
        return [future.get().attribute_values for future in futures]

    async def async_get() -> list[Any]:
        async with AsyncTransactGet(connection=connection) as transaction:
            futures = [await transaction.get(model, *asynchronous.key(slot)) for slot in read_back]
        return [future.get().attribute_values for future in futures]

    assert sync.seen(outcome(sync_get)) == asynchronous.seen(outcome(lambda: loop.run(async_get())))


def test_an_async_transaction_runs_on_the_loop_thread(dynamodb_models: BindModels, loop: Loop,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The transaction's requests (the lookups of hand-built items and the commit) are sent from
    the loop's thread over its connections (none through botocore's blocking HTTP session), and a
    block that raised commits nothing."""
    dynamodb_models(Event)
    connection = connection_of(Event)
    Event("/t", 1, user="a").save()
    blocking_sends: list[Any] = []
    own_send = URLLib3Session.send
    monkeypatch.setattr(URLLib3Session, "send",
                        lambda self, request: (blocking_sends.append(request), own_send(self, request))[1])
    senders: set[threading.Thread] = set()
    connection.client.meta.events.register("before-send.dynamodb", lambda **_: senders.add(threading.current_thread()))
    Event._get_connection().connection.client.meta.events.register(
        "before-send.dynamodb", lambda **_: senders.add(threading.current_thread()))

    async def transact() -> None:
        async with AsyncTransactWrite(connection=connection) as transaction:
            await transaction.update(Event("/t", 1), [Event.hits.add(5)])  # located by a lookup
            await transaction.save(Event("/t", 2, user="b"))
        with pytest.raises(ZeroDivisionError):
            async with AsyncTransactWrite(connection=connection) as transaction:
                await transaction.save(Event("/t", 3, user="c"))
                raise ZeroDivisionError

    loop.run(transact())
    assert [] == blocking_sends
    assert {threading.main_thread()} == senders
    assert [(1, 5), (2, None)] == [(item.at, item.hits) for item in Event.query("/t")]


def test_table_calls_answer_as_the_sync_ones(dynamodb_models: BindModels, loop: Loop) -> None:
    """``aexists``, ``adescribe_table``, ``acreate_table`` (the model's table and its companions)
    and ``adelete_table`` do what the sync calls do; the create and the delete run in a worker
    thread, so the loop goes on meanwhile."""
    dynamodb_models(Account)
    assert loop.run(Account.aexists()) is Account.exists() is True
    expected = Account.describe_table()
    described = loop.run(Account.adescribe_table())
    assert (described["TableName"], described["KeySchema"]) == (expected["TableName"], expected["KeySchema"])

    async def recreate() -> tuple[bool, bool, int]:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.001)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        await Account.adelete_table(wait=True)
        gone = not await Account.aexists()
        await Account.acreate_table(billing_mode="PAY_PER_REQUEST", wait=True)
        done.set()
        await ticker
        return gone, await Account.aexists(), ticks

    gone, back, ticks = loop.run(recreate())
    assert (gone, back) == (True, True)
    assert ticks > 0  # the loop ran while the tables were deleted and created
    assert Account.exists()
    Account("ann@example.com", name="Ann").save()
    assert Account.get("ann@example.com").name == "Ann"


def test_an_abatch_get_cut_short_does_not_end_as_if_complete(dynamodb_models: BindModels, loop: Loop) -> None:
    """A batch read cancelled by a timeout (its generator is gone) raises when iterated again,
    naming the fix, instead of ending as if no item were stored; a closed result ends."""
    dynamodb_models(Account)
    for n in range(3):
        Account(f"user{n}@example.com", name="x").save()

    def slow(**_: Any) -> None:
        pause(5.0)

    async def cut_short() -> str:
        result = Account.abatch_get([f"user{n}@example.com" for n in range(3)])
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(result.__anext__(), 0.3)
        with pytest.raises(RuntimeError) as raised:
            await result.__anext__()
        return str(raised.value)

    events = Account._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.BatchGetItem", slow, unique_id="test-slow-batch-get")
    try:
        message = loop.run(cut_short())
    finally:
        events.unregister("before-send.dynamodb.BatchGetItem", unique_id="test-slow-batch-get")
    assert "Account.abatch_get" in message
    assert "call Account.abatch_get(...) again" in message

    async def closed() -> list[Any]:
        result = Account.ascan(page_size=1)
        first = await result.__anext__()
        await result.aclose()
        return [first, *[item async for item in result]]

    assert len(loop.run(closed())) == 1
    assert len(loop.run(Account.abatch_get([f"user{n}@example.com" for n in range(3)]))) == 3
