"""The whole life of a hot table, done the way a team would, while the application runs.

A plain PynamoDB model (and a raw tool) filled a table whose global secondary index ``by_day``
has two values, so every write lands on two index partitions. The team adopts the table in
place and shards the index (``legacy_unsharded`` on both), backfills the index
(``migrate reindex``), moves the bare items into shards (``migrate reshard``, once), deploys
the model without the flags, grows the hot devices, shrinks them again, moves what lies above
the new count (``migrate reshard``, twice) and trims the history (``migrate compact``).
Throughout, six writer threads keep creating, changing (read, then write the loaded item —
also after a job moved it) and deleting items through whichever model is deployed, and two
reader threads keep querying the table and the index.

What must hold at the end: every acknowledged write is read back once, with its last value,
through ``get``, ``query`` and the index; every deleted item is gone; the raw table holds each
item once, under a shard suffix, with a sharded index value; no reader ever saw an item twice.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, HashedShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.migration import JobOptions, compact, reindex, reshard
from tests.day_index import day_index
from tests.raw import put_raw, raw_items

DAYS = ("20160226", "20160227")
WRITERS = 6
READERS = 2
DELETED = object()


class Clock:
    """Epoch seconds and the shard-count caches' timer of every process, moved by the test."""

    def __init__(self) -> None:
        self.now = 2_000_000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


CLOCK = Clock()


class PlainEvent(Model):
    """What wrote the table before pynamodb-sharding."""

    class Meta:
        table_name = "trial_events"
        max_pool_connections = 32

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index()


class TrialShards(ShardMetadata):
    class Meta:
        table_name = "trial_event_shards"


def _dynamic() -> DynamicShards:
    return DynamicShards(TrialShards, max_shards=8, cache_ttl=30, cooldown=0, clock=CLOCK, timer=CLOCK)


class Adopting(ShardedModel):
    """The first deploy: the table and its index adopted in place."""

    Meta = PlainEvent.Meta

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index(Sharding(HashedShards(4, attributes=("device",)), legacy_unsharded=True))
    shards = Sharding(_dynamic(), legacy_unsharded=True)


class Sharded(ShardedModel):
    """The second deploy, once nothing is stored bare any more."""

    Meta = PlainEvent.Meta

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index(Sharding(HashedShards(4, attributes=("device",))))
    shards = Sharding(_dynamic())


class Application:
    """Writers and readers running through whichever model is deployed."""

    def __init__(self, options: JobOptions) -> None:
        self.options = options
        self.deployed: type[ShardedModel] = Adopting
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.ops = [0] * WRITERS
        self.acknowledged: list[dict[tuple[str, int], Any]] = [{} for _ in range(WRITERS)]
        self.duplicates: list[str] = []
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def halt(self) -> None:
        """Stop the writers and readers and wait for them: none is still in a request, nor about
        to record a write, when the test reads the table."""
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)
        assert [] == [thread.name for thread in self.threads if thread.is_alive()]

    def seed(self, writer: int, items: dict[tuple[str, int], int]) -> None:
        self.acknowledged[writer].update(items)

    def write(self, writer: int) -> None:
        rng = random.Random(writer)
        devices = [f"dev-{writer}", f"hot-{writer % 2}"]
        known = self.acknowledged[writer]
        held: list[Any] = []  # items loaded a while ago, written later (maybe after a job moved them)
        next_at = 10_000 * (writer + 1)
        while not self.stop.is_set():
            model = self.deployed
            choice = rng.random()
            try:
                if choice < 0.4 or not known:
                    device = rng.choice(devices)
                    value = rng.randrange(1_000_000)
                    model(device, next_at, day=rng.choice(DAYS), value=value).save()
                    known[(device, next_at)] = value
                    next_at += 1
                elif choice < 0.6:
                    alive = [key for key, value in known.items() if value is not DELETED]
                    if alive:
                        key = rng.choice(alive)
                        held.append(model.get(*key, consistent_read=True))
                else:
                    if held:
                        item = held.pop(rng.randrange(len(held)))
                        key = (item.device, int(item.at))
                        if known.get(key) is DELETED:
                            continue
                        value = rng.randrange(1_000_000)
                        action = rng.random()
                        if action < 0.45:
                            item.value = value
                            item.save()
                        elif action < 0.85:
                            item.update(actions=[type(item).value.set(value)])
                        else:
                            item.delete()
                            value = DELETED
                        known[key] = value
            except BaseException as error:
                with self.lock:
                    self.errors.append(error)
                return
            self.ops[writer] += 1

    def read(self, reader: int) -> None:
        rng = random.Random(100 + reader)
        while not self.stop.is_set():
            model = self.deployed
            try:
                if rng.random() < 0.5:
                    device = rng.choice([f"hot-{n}" for n in range(2)] + [f"dev-{n}" for n in range(WRITERS)])
                    keys = [(item.device, int(item.at)) for item in model.query(device)]
                    where = f"query({device!r})"
                else:
                    day = rng.choice(DAYS)
                    keys = [(item.device, int(item.at)) for item in model.by_day.query(day, limit=200)]
                    where = f"by_day.query({day!r})"
            except BaseException as error:
                with self.lock:
                    self.errors.append(error)
                return
            repeated = [key for key, count in collections.Counter(keys).items() if count > 1]
            if repeated:
                with self.lock:
                    self.duplicates.append(f"{where} returned {repeated[:3]} twice")

    def settle(self) -> None:
        """Return once every writer did two more writes: none still works on a decision made
        before this call (a shard chosen under a count the test changed since)."""
        seen = list(self.ops)
        deadline = time.monotonic() + 120
        while any(self.ops[n] < seen[n] + 2 for n in range(WRITERS)) and not self.errors:
            assert time.monotonic() < deadline, "the writers stopped making progress"
            time.sleep(0.05)

    def check(self) -> None:
        assert [] == [repr(error) for error in self.errors]
        assert [] == self.duplicates


@pytest.fixture
def application(dynamodb_models: Callable[..., Any], checkpoint_table: str) -> Iterator[Application]:
    dynamodb_models(PlainEvent, Adopting, Sharded)
    app = Application(JobOptions(total_segments=2, page_size=40, checkpoint_table=checkpoint_table))
    # What the plain application and a raw tool left: 20 items per writer, bare keys and values.
    rng = random.Random(7)
    for writer in range(WRITERS):
        seeded: dict[tuple[str, int], int] = {}
        with PlainEvent.batch_write() as batch:
            for n in range(15):
                value = rng.randrange(1000)
                batch.save(PlainEvent(f"dev-{writer}", n, day=DAYS[n % 2], value=value))
                seeded[(f"dev-{writer}", n)] = value
        put_raw(PlainEvent, [{"device": {"S": f"hot-{writer % 2}"}, "at": {"N": str(1000 * writer + n)},
                              "day": {"S": DAYS[n % 2]}, "value": {"N": str(n)}} for n in range(5)])
        seeded.update({(f"hot-{writer % 2}", 1000 * writer + n): n for n in range(5)})
        app.seed(writer, seeded)
    stored = raw_items(PlainEvent)
    assert 120 == len(stored)
    assert all("_" not in raw["device"]["S"] and raw["day"]["S"] in DAYS for raw in stored)
    app.threads = [threading.Thread(target=app.write, args=(n,), daemon=True) for n in range(WRITERS)]
    app.threads += [threading.Thread(target=app.read, args=(n,), daemon=True) for n in range(READERS)]
    for thread in app.threads:
        thread.start()
    try:
        yield app
    finally:
        app.stop.set()
        for thread in app.threads:
            thread.join(timeout=60)


def test_adopt_shard_the_index_reshard_twice_and_compact_while_the_application_runs(
    application: Application,
) -> None:
    app = application
    options = app.options
    app.settle()

    # 1. The index: every bare value rewritten with its shard, while writers write.
    reindexed = reindex(Adopting, "by_day", options)
    assert reindexed.complete
    assert reindexed.tally.written > 0
    # 2. The table: every bare item moved into its shard (the first reshard).
    first = reshard(Adopting, options)
    assert first.complete
    assert first.tally.moved > 0
    app.check()
    assert all(raw["device"]["S"].rpartition("_")[2].isdigit() for raw in raw_items(PlainEvent))

    # 3. Deploy the model without the flags; writers still hold items loaded by the first one.
    app.deployed = Sharded
    app.settle()
    # 4. The hot devices grow (as throttles would grow them), then cool down and shrink.
    for device in ("hot-0", "hot-1"):
        Sharded.shards.grow(device)
        Sharded.shards.grow(device)
        Sharded.shards.grow(device)
    assert 8 == Sharded.shards.shard_count("hot-0")
    CLOCK.advance(31)  # every process sees the new count
    app.settle()
    app.settle()
    for device in ("hot-0", "hot-1"):
        Sharded.shards.shrink(device, to=2)
    CLOCK.advance(31)  # every process knows the shrink: jobs may move what lies above 2
    app.settle()
    # 5. The second reshard, then compact: moved down, history trimmed.
    second = reshard(Sharded, options)
    assert second.complete
    assert second.tally.moved > 0
    app.settle()
    compacted = compact(Sharded, options)
    assert compacted.complete
    app.settle()
    app.halt()
    app.check()
    # If a key is not trimmed, compact's report says why (items written above the count after
    # its scan passed, conflicts, a count changed too recently).
    assert (1, 2) == Sharded.shards.read_shards("hot-0") == Sharded.shards.read_shards("hot-1"), (
        compacted.notes, compacted.tally)

    # Every acknowledged write is read back once, with its last value.
    expected: dict[tuple[str, int], int] = {}
    gone: set[tuple[str, int]] = set()
    for known in app.acknowledged:
        for key, value in known.items():
            if value is DELETED:
                gone.add(key)
            else:
                expected[key] = value
    assert len(expected) > 150
    assert gone
    devices = sorted({device for device, _ in expected | dict.fromkeys(gone)})
    read_back = {}
    for device in devices:
        items = list(Sharded.query(device, consistent_read=True))
        keys = [(item.device, int(item.at)) for item in items]
        assert len(keys) == len(set(keys)), device
        read_back.update({(item.device, int(item.at)): item.value for item in items})
    assert expected == read_back
    for key, value in list(expected.items())[:40]:
        assert value == Sharded.get(*key, consistent_read=True).value
    by_day = {}
    for day in DAYS:
        items = list(Sharded.by_day.query(day))
        keys = [(item.device, int(item.at)) for item in items]
        assert len(keys) == len(set(keys)), day
        by_day.update({(item.device, int(item.at)): item.value for item in items})
    assert expected == by_day

    # The table itself: each item once, under a shard suffix, with a sharded index value.
    stored = raw_items(PlainEvent)
    identities = collections.Counter((raw["device"]["S"].rpartition("_")[0], int(raw["at"]["N"])) for raw in stored)
    assert set(expected) == set(identities)
    assert all(count == 1 for count in identities.values())
    for raw in stored:
        device, _, shard = raw["device"]["S"].rpartition("_")
        assert 1 <= int(shard) <= (2 if device.startswith("hot-") else 8)
        day, _, index_shard = raw["day"]["S"].rpartition("_")
        assert day in DAYS
        assert 1 <= int(index_shard) <= 4
