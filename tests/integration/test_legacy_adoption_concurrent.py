"""In-place adoption while the application runs: nothing lost, nothing doubled.

A plain PynamoDB model fills the table; then, at the same time, a loop moves every legacy item
into shards with ``move_legacy_item``, a writer saves new items through the
``legacy_unsharded`` model, and readers run merged queries, counts and point reads. Proves that
no read during the move returns an item twice or misses one that exists throughout, and, with a
raw boto3 scan at the end, that every item is stored exactly once, in a shard.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, shard_manager
from pynamodb_sharding.legacy import MoveOutcome, move_legacy_item
from tests.raw import raw_items

SENSORS = ("hot", "warm")
LEGACY_ITEMS = 120


class PlainEvent(Model):
    class Meta:
        table_name = "adopt_events"
        max_pool_connections = 16

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute(null=True)


class Event(ShardedModel):
    Meta = PlainEvent.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


def test_move_with_concurrent_writes_and_reads(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainEvent, Event)
    with PlainEvent.batch_write() as batch:
        for sensor in SENSORS:
            for at in range(LEGACY_ITEMS):
                batch.save(PlainEvent(sensor, at, value="legacy"))
    manager = shard_manager(Event)
    legacy = [raw for raw in raw_items(PlainEvent) if manager.decode_stored(raw["sensor"]["S"])[1] is None]
    assert len(SENSORS) * LEGACY_ITEMS == len(legacy)

    done = threading.Event()
    errors: list[BaseException] = []
    started: dict[str, set[int]] = {sensor: set() for sensor in SENSORS}  # writes sent, maybe applied
    written: dict[str, set[int]] = {sensor: set() for sensor in SENSORS}  # writes acknowledged
    lock = threading.Lock()
    outcomes: Counter[MoveOutcome] = Counter()
    reads = Counter[str]()

    def guarded(body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                done.set()
        return run

    def mover() -> None:
        order = list(legacy)
        random.Random(3).shuffle(order)
        for raw in order:
            outcomes[move_legacy_item(Event, raw)] += 1
        done.set()

    def writer() -> None:
        at = 10_000
        while not done.is_set():
            sensor = SENSORS[at % 2]
            with lock:
                started[sensor].add(at)
            Event(sensor, at, value="new").save()
            with lock:
                written[sensor].add(at)
            at += 1

    def reader() -> None:
        draw = random.Random(threading.get_ident())
        while not done.is_set():
            sensor = draw.choice(SENSORS)
            with lock:
                acknowledged = set(written[sensor])
            ats = [int(item.at) for item in Event.query(sensor, consistent_read=True, page_size=25)]
            with lock:
                possible = set(started[sensor])
            duplicates = [at for at, n in Counter(ats).items() if n > 1]
            assert not duplicates, f"returned twice: {duplicates}"
            missing = (set(range(LEGACY_ITEMS)) | acknowledged) - set(ats)
            assert not missing, f"missed: {sorted(missing)}"
            assert set(ats) <= set(range(LEGACY_ITEMS)) | possible
            assert ats == sorted(ats)
            count = Event.count(sensor, consistent_read=True)
            with lock:
                possible = set(started[sensor])
            assert LEGACY_ITEMS + len(acknowledged) <= count <= LEGACY_ITEMS + len(possible)
            at = draw.randrange(LEGACY_ITEMS)
            assert at == int(Event.get(sensor, at, consistent_read=True).at)
            reads["rounds"] += 1

    threads = [threading.Thread(target=guarded(body)) for body in (mover, writer, reader, reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    if errors:
        raise errors[0]
    assert reads["rounds"] >= 3, "the readers did not overlap the move"
    assert {MoveOutcome.MOVED: len(legacy)} == dict(outcomes)

    stored = Counter((raw["sensor"]["S"], int(raw["at"]["N"])) for raw in raw_items(PlainEvent))
    assert all(n == 1 for n in stored.values()), "an item is stored twice"
    logical = Counter((manager.decode_stored(key)[0], at) for key, at in stored)
    assert all(n == 1 for n in logical.values()), "an item is stored in two shards"
    assert all(manager.decode_stored(key)[1] is not None for key, _ in stored), "a legacy item is left"
    expected = {(sensor, at) for sensor in SENSORS for at in range(LEGACY_ITEMS)}
    expected |= {(sensor, at) for sensor in SENSORS for at in written[sensor]}
    assert expected == set(logical)
