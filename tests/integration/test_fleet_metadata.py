"""The metadata a fleet of processes costs, on DynamoDB Local (issue 26's checks).

Many processes are simulated as model classes over one table, each with a ``DynamicShards`` of
its own (its own cache, counters and random source) and one shared hand-driven clock, so every
step is repeatable: nothing sleeps.

Proves:
- with cached reads (the fleet protocol the table stores) a grown key is read whole by another
  process right after the writes are acknowledged: a growth is written to only
  ``cache_ttl + clock_skew`` seconds after it, so the reader's cached count covers every shard
  written (raw table checked); on a table storing no protocol (0.2's), a writer declared for
  fresh reads makes the cached reader miss items (the control);
- 40 processes x 25 merged queries of a grown key send one metadata read per process per
  ``cache_ttl`` (processes declared ``fresh_reads=True``: one per query);
- 40 processes reporting their write rate send the reports their load needs (about
  ``rate_reports`` a window at the growth threshold), one write each that no condition refuses
  (every process every interval without sampling), and the key grows;
- with ``hot_key_hints`` writers of a hot key read only the hint copies (never the key's item),
  a state the item no longer holds is never published, and a lowered count reaches the hints
  before ``migrate compact`` moves items off the shards above it.
"""

from __future__ import annotations

import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata, _pool
from pynamodb_sharding._hot_keys import hint_item_key, parse_entry
from pynamodb_sharding._protocol import PROTOCOL_KEY
from pynamodb_sharding.migration import CompactJob, JobOptions, compact
from pynamodb_sharding.migration._jobs import Wait
from pynamodb_sharding.testing import record_requests
from tests.clock import Clock
from tests.forked import fork_running
from tests.raw import drop_fleet_protocol, raw_items

KEY = "/shared/firetvGen2.txt"
TTL = 10.0

Bind = Callable[..., Any]


CLOCK = Clock()


class FleetShards(ShardMetadata):
    class Meta:
        table_name = "fleet_shards"


def strategy(seed: int, **options: Any) -> DynamicShards:
    options.setdefault("cache_ttl", TTL)
    return DynamicShards(FleetShards, max_shards=8, clock=CLOCK, timer=CLOCK, sleep=CLOCK.sleep,
                         random=random.Random(seed), **options)


class FleetLog(ShardedModel):
    """The table every simulated process uses (bound once)."""

    class Meta:
        table_name = "fleet_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(strategy(0, fresh_reads=False))


def process(seed: int, **options: Any) -> type[FleetLog]:
    """One more process: the same table and metadata table, a DynamicShards of its own."""
    return type(f"Process{seed}", (FleetLog,), {"__module__": __name__, "shards": Sharding(strategy(seed, **options))})


def metadata_reads(sent: Any) -> int:
    """GetItems of key items and hint copies (not of the fleet protocol record, read once per
    process per PROTOCOL_TTL)."""
    return sum(1 for body in metadata_gets(sent))


def metadata_gets(sent: Any) -> list[dict[str, Any]]:
    return [body for body in sent.bodies("GetItem") if body["TableName"] == FleetShards.Meta.table_name
            and body["Key"]["partition_key"]["S"] != PROTOCOL_KEY[0]]


def shards_written(start: int) -> Counter[str]:
    """How many items each physical key holds, of ``accessed_at >= start`` (raw table)."""
    return Counter(raw["file_path"]["S"] for raw in raw_items(FleetLog) if int(raw["accessed_at"]["N"]) >= start)


def test_a_growth_is_read_whole_by_a_cached_reader(dynamodb_models: Bind) -> None:
    writer, reader = process(1, fresh_reads=False), process(2, fresh_reads=False)
    dynamodb_models(FleetLog)  # after the processes are declared, as an application's are
    CLOCK.at(0)
    writer(KEY, 0).save()
    assert [item.accessed_at for item in reader.query(KEY)] == [0]  # the reader caches 1 shard

    CLOCK.at(1)
    assert writer.shards.grow(KEY) == 2
    for n in range(1, 21):
        writer(KEY, n).save()  # acknowledged, and still on shard 1: the growth is not in effect
    assert shards_written(1) == {f"{KEY}_1": 20}
    with record_requests(reader) as sent:
        assert [item.accessed_at for item in reader.query(KEY)] == list(range(21))
        assert reader.count(KEY) == 21
    assert metadata_reads(sent) == 0  # read from the reader's cache

    CLOCK.at(1 + TTL + 1.5)  # the reader's cache expired at 10; the growth is in effect from 12
    for n in range(21, 61):
        writer(KEY, n).save()
    assert set(shards_written(21)) == {f"{KEY}_1", f"{KEY}_2"}
    with record_requests(reader) as sent:
        assert [item.accessed_at for item in reader.query(KEY)] == list(range(61))
    assert metadata_reads(sent) == 1  # its cache expired: the count is read once


def test_a_writer_without_delayed_growth_is_what_a_cached_reader_would_miss(dynamodb_models: Bind) -> None:
    """The control, on a metadata table that stores no fleet protocol (0.2's, where each process
    follows its own declaration): a growth written to at once (0.2's default, fresh reads) puts
    items on a shard a cached reader does not read. A stored protocol rules it out
    (test_fleet_protocol.py)."""
    writer, reader = process(3), process(4, fresh_reads=False)
    dynamodb_models(FleetLog)
    drop_fleet_protocol(FleetShards, writer, reader)
    CLOCK.at(100)
    writer(KEY, 0).save()
    assert [item.accessed_at for item in reader.query(KEY)] == [0]
    writer.shards.grow(KEY)
    for n in range(1, 21):
        writer(KEY, n).save()
    assert len(shards_written(1)) == 2
    assert len(list(reader.query(KEY))) < 21


def test_forty_processes_query_a_grown_key_with_one_metadata_read_each(dynamodb_models: Bind) -> None:
    grower = process(5, fresh_reads=False)
    fleet = [process(100 + n, fresh_reads=False) for n in range(40)]
    fresh = [process(200 + n, fresh_reads=True) for n in range(2)]  # declared so: one read per query
    dynamodb_models(FleetLog)
    CLOCK.at(200)
    grower.shards.grow(KEY)  # 2 shards
    CLOCK.at(200 + TTL + 2)  # in effect
    for n in range(40):
        grower(KEY, n).save()
    assert len(shards_written(0)) == 2

    with record_requests(FleetLog) as sent:
        for round_ in range(25):
            for model in fleet:
                assert [item.accessed_at for item in model.query(KEY, limit=40)] == list(range(40)), round_
            CLOCK.sleep(TTL / 25 * 0.99)  # the 25 rounds span one cache_ttl
    assert metadata_reads(sent) == 40  # one per process

    with record_requests(FleetLog) as sent:
        for _ in range(25):
            for model in fresh:
                assert len(list(model.query(KEY))) == 40
    assert metadata_reads(sent) == 50


def report_writes(sent: Any) -> list[dict[str, Any]]:
    return [body for body in sent.bodies() if body.get("TableName") == FleetShards.Meta.table_name
            and ("UpdateExpression" in body or "Item" in body)]


def reporting_fleet(**options: Any) -> list[type[FleetLog]]:
    """40 processes with proactive growth: 50 units/s per shard, 1 s windows."""
    settings = {"partition_write_units": 100.0, "target_utilization": 0.5, "rate_interval": 1.0,
                "fresh_reads": False, **options}
    return [process(300 + n, **settings) for n in range(40)]


def run_reporting_fleet(fleet: list[type[FleetLog]], seconds: int) -> tuple[list[int], int]:
    """Each process writes the key 3 times a simulated second (120 units/s in all); returns
    the metadata writes of each second and the key's count at the end."""
    per_second: list[int] = []
    at = 0
    for _second in range(seconds):
        with record_requests(FleetLog) as sent:
            for _tick in range(3):
                for model in fleet:
                    model(KEY, at).save()
                    at += 1
                CLOCK.sleep(1 / 3)
        per_second.append(len(report_writes(sent)))
    item = FleetShards.get(KEY, FleetLog.Meta.table_name, consistent_read=True)
    return per_second, int(item.number_of_shards)


def test_forty_reporting_processes_send_the_reports_their_load_needs(dynamodb_models: Bind) -> None:
    """120 units/s over a quantum of 0.5 x 100 x 1 s / 10 = 5 units a shard: 24 reports a second
    at 1 shard, 12 at 2, however many processes write (tests/unit/test_rate_reports.py: the
    same at 10, 20 and 40 processes), each one write, none refused by a condition."""
    fleet = reporting_fleet(rate_reports=10)
    dynamodb_models(FleetLog)
    CLOCK.at(1000)
    refused: list[str] = []

    def on_update(parsed: Any = None, **_: Any) -> None:
        code = (parsed or {}).get("Error", {}).get("Code")
        if code:
            refused.append(code)

    client = FleetShards._get_connection().connection.client
    client.meta.events.register("after-call.dynamodb.UpdateItem", on_update, unique_id="test.refused")
    try:
        per_second, count = run_reporting_fleet(fleet, 8)
    finally:
        client.meta.events.unregister("after-call.dynamodb.UpdateItem", unique_id="test.refused")
    print("metadata writes per second, sampled:", per_second)
    # On average at most 24 a second (and a growth); processes that start together report what
    # is left of their units together, so the seconds are lumpy.
    assert 8 <= sum(per_second) / len(per_second) <= 24 + 2, per_second
    assert count >= 2  # 120 units/s over 50 per shard: the key grew (once: the cooldown is 30 s)
    assert refused == []  # one write per report: none refused by a condition


def test_every_process_reports_without_sampling(dynamodb_models: Bind) -> None:
    """The control: ``rate_reports=None`` (0.1's rule) has every process report every interval."""
    fleet = reporting_fleet(rate_reports=None)
    dynamodb_models(FleetLog)
    CLOCK.at(2000)
    per_second, _count = run_reporting_fleet(fleet, 3)
    print("metadata writes per second, every process:", per_second)
    assert max(per_second) >= 35, per_second


def test_new_processes_spread_their_first_writes_of_a_hinted_hot_key(dynamodb_models: Bind) -> None:
    """A scale-out: 40 processes start on a key grown to 4 shards and write it once each. With
    ``hot_key_hints`` their first writes spread over the 4 shards (no shard above 1.5 x its
    share); a cold key's first write still reads nothing but one hint copy per process."""
    grower = process(400, hot_key_hints=4)
    hinted = [process(500 + n, hot_key_hints=4) for n in range(40)]
    unhinted = [process(600 + n) for n in range(40)]  # 0.1's rule, the control
    dynamodb_models(FleetLog)
    CLOCK.at(3000)
    grower(KEY, 0).save()
    grower.shards.grow(KEY)
    grower.shards.grow(KEY)  # 4 shards, listed in every hint copy
    CLOCK.sleep(TTL + 1.5)  # the growth is in effect (cached reads: cache_ttl + clock_skew after it)
    stored = {raw["partition_key"]["S"]: raw for raw in raw_items(FleetShards) if "#hot-keys" in raw["model"]["S"]}
    assert sorted(stored) == [f"#hot-keys#{n}" for n in range(4)]

    with record_requests(FleetLog) as sent:
        for n, model in enumerate(hinted, start=1):
            model(KEY, n).save()
            model(f"/cold/{n}", 0).save()  # a cold key: no read of its own
    written = shards_written(1)
    assert sum(count for key, count in written.items() if key.startswith(KEY)) == 40
    assert set(key for key in written if key.startswith(KEY)) == {f"{KEY}_{n}" for n in range(1, 5)}
    assert max(count for key, count in written.items() if key.startswith(KEY)) <= 15  # 1.5 x 10
    reads = metadata_gets(sent)
    hint_reads = [body for body in reads if body["Key"]["partition_key"]["S"].startswith("#hot-keys#")]
    assert len(hint_reads) == 40  # one per process (a cache_ttl)
    assert reads == hint_reads  # the hinted key's count comes with the hints; nothing for cold keys

    for n, model in enumerate(unhinted, start=100):
        model(KEY, n).save()
    assert shards_written(100) == {f"{KEY}_1": 40}  # every first write on the initial shard


def hinted_counts(key: str) -> list[int]:
    """The count the newest entry of ``key`` shows in each hint copy (raw table; 0: none)."""
    shown = []
    for raw in sorted(raw_items(FleetShards), key=lambda raw: raw["partition_key"]["S"]):
        if not raw["model"]["S"].endswith("#hot-keys"):
            continue
        entries = [parse_entry(text) for text in raw.get("hot_keys", {}).get("SS", [])]
        mine = [entry for entry in entries if entry is not None and entry.key == key]
        shown.append(max(mine, key=lambda entry: entry.state.last_updated).state.count if mine else 0)
    return shown


def test_writers_of_a_hinted_hot_key_read_only_the_hints(dynamodb_models: Bind) -> None:
    """40 writer processes of a key grown to 4 shards, 3 writes each over 1.5 cache TTLs: their
    metadata reads are hint copies only (at most 2 per process), never the key's item, which
    is what ten thousand writers of one key would otherwise read every ``cache_ttl``. Their
    writes spread over the 4 shards, and a cached reader reads every one of them."""
    key = "/hinted/writers"
    grower = process(700, hot_key_hints=4, fresh_reads=False)
    writers = [process(800 + n, hot_key_hints=4, fresh_reads=False) for n in range(40)]
    reader = process(899, fresh_reads=False)
    dynamodb_models(FleetLog)
    CLOCK.at(4000)
    grower(key, 0).save()
    grower.shards.grow(key)
    assert grower.shards.grow(key) == 4
    assert hinted_counts(key) == [4, 4, 4, 4]  # published in every copy with the growth
    CLOCK.at(4000 + TTL + 2)  # the growths are in effect for writers (cache_ttl + clock_skew)

    with record_requests(FleetLog) as sent:
        for step in range(3):
            for n, model in enumerate(writers):
                model(key, 10_000 + 100 * step + n).save()
            CLOCK.sleep(TTL / 2)
    reads = metadata_gets(sent)
    assert reads, "the writers read the hints"
    assert all(body["Key"]["partition_key"]["S"].startswith("#hot-keys#") for body in reads)
    assert all(body["ConsistentRead"] for body in reads)
    assert len(reads) <= 80  # one copy per process per cache_ttl
    written = shards_written(10_000)
    assert set(written) == {f"{key}_{n}" for n in range(1, 5)}
    assert sum(written.values()) == 120
    assert max(written.values()) <= 45
    assert len(list(reader.query(key))) == 121


def test_a_state_the_item_no_longer_holds_is_not_published(dynamodb_models: Bind) -> None:
    """A process that publishes late (the count changed since it read it) adds nothing: the
    transaction checks the item's ``last_updated``. Writers only ever see states the item had."""
    key = "/hinted/stale"
    slow, fast = process(710, hot_key_hints=2), process(711, hot_key_hints=2)
    dynamodb_models(FleetLog)
    CLOCK.at(5000)
    slow(key, 0).save()
    assert slow.shards.grow(key) == 2
    manager = slow.shards
    strategy: Any = manager.strategy
    namespace = manager.space.namespace
    held = strategy.store.load(namespace, key, owner=manager.space.name)  # count 2, held across a growth
    CLOCK.sleep(1)
    assert fast.shards.grow(key) == 4
    assert hinted_counts(key) == [4, 4]
    before = {raw["partition_key"]["S"]: raw["hot_keys"]["SS"] for raw in raw_items(FleetShards)
              if raw["model"]["S"].endswith("#hot-keys")}

    assert strategy._hints.publish(strategy.store.writer, namespace, key, held) is False
    after = {raw["partition_key"]["S"]: raw["hot_keys"]["SS"] for raw in raw_items(FleetShards)
             if raw["model"]["S"].endswith("#hot-keys")}
    assert after == before  # nothing added to any copy
    assert hinted_counts(key) == [4, 4]


def test_a_lowered_count_reaches_the_hints_before_compact_moves_items(dynamodb_models: Bind) -> None:
    """A shrink publishes the lowered count. When its publish was lost (copies still show 4),
    ``migrate compact`` republishes it and waits one cache TTL before moving an item off
    shard 4, since a writer may hold the old entry that long; the item is moved after that."""
    key = "/hinted/shrunk"
    model = process(720, hot_key_hints=2)
    dynamodb_models(FleetLog)
    CLOCK.at(6000)
    model(key, 0).save()
    model.shards.grow(key)
    model.shards.grow(key)
    model(key, 1).save()
    CLOCK.sleep(100)
    assert model.shards.shrink(key, 1) == 1
    assert hinted_counts(key) == [1, 1]  # the shrink's state, published

    # The shrink's publish lost in one copy: it still shows 4 shards to writers.
    manager = model.shards
    strategy: Any = manager.strategy
    namespace = manager.space.namespace
    current = strategy.store.load(namespace, key, owner=manager.space.name)
    copy_key = hint_item_key(namespace, 1)
    raw = next(raw for raw in raw_items(FleetShards) if raw["partition_key"]["S"] == copy_key[0])
    newest = [text for text in raw["hot_keys"]["SS"] if (entry := parse_entry(text)) is not None
              and entry.key == key and entry.state.last_updated == current.last_updated]
    FleetShards(*copy_key).update(actions=[FleetShards.hot_keys.delete(set(newest))])
    assert hinted_counts(key)[1] in (2, 4)  # an older state (the grown count) shows again

    CLOCK.sleep(TTL * 2)  # the shrink itself is older than a cache TTL
    above = {"file_path": {"S": f"{key}_4"}, "accessed_at": {"N": "99"}}
    job = CompactJob(model)
    assert isinstance(job.plan(above), Wait)  # republished: writers may use the old entry a TTL more
    assert hinted_counts(key) == [1, 1]
    CLOCK.sleep(TTL + 1.5)  # cache_ttl + clock_skew after the republish
    assert job.plan(above) is not None
    assert not isinstance(job.plan(above), Wait)


def test_compact_trims_nothing_while_a_writer_may_hold_the_old_count_from_the_hints(
    dynamodb_models: Bind, checkpoint_table: str,
) -> None:
    """A shrink whose publish was lost leaves every hint copy showing 4 shards. A writer reads
    the list; compact then finds no item above the count. It must not trim the history yet (the
    writer may still write shards 2-4 from its list): it republishes the count and waits a cache
    TTL plus clock skew. Every item the writer writes meanwhile stays readable, and the next
    compact moves them and trims. (Found by a new user's trial: the trim did not wait.)"""
    key = "/hinted/trim"
    grower, writer, operator = (process(seed, hot_key_hints=2) for seed in (730, 731, 732))
    reader, fresh = process(733, fresh_reads=False), process(734, fresh_reads=True)
    dynamodb_models(FleetLog)
    options = JobOptions(total_segments=1, page_size=50, checkpoint_table=checkpoint_table)
    CLOCK.at(7000)
    grower(key, 0).save()
    grower.shards.grow(key)
    grower.shards.grow(key)
    CLOCK.sleep(100)
    assert operator.shards.shrink(key, 1) == 1  # a fresh process: it knows no older entry to delete
    manager = operator.shards
    strategy: Any = manager.strategy
    namespace = manager.space.namespace
    current = strategy.store.load(namespace, key, owner=manager.space.name)
    for copy in range(2):  # the shrink's publish lost in every copy
        copy_key = hint_item_key(namespace, copy)
        raw = next(raw for raw in raw_items(FleetShards) if raw["partition_key"]["S"] == copy_key[0])
        published = {text for text in raw["hot_keys"]["SS"] if (entry := parse_entry(text)) is not None
                     and entry.key == key and entry.state.last_updated == current.last_updated}
        FleetShards(*copy_key).update(actions=[FleetShards.hot_keys.delete(published)])
    assert hinted_counts(key) == [4, 4]

    CLOCK.sleep(TTL * 2)  # the shrink is long past a cache TTL
    writer("/hinted/elsewhere", 0).save()  # the writer reads a hint copy: the key shows 4 shards
    first = compact(operator, options)
    assert not any("trimmed 1 keys" in note for note in first.notes), first.notes
    assert any("not trimmed" in note and key in note for note in first.notes), first.notes
    assert operator.shards.read_shards(key) == (1, 2, 3, 4)  # reads still cover the old shards
    assert hinted_counts(key) == [1, 1]  # republished

    for n in range(20):  # the writer's list is still the old one
        writer(key, 1000 + n).save()
    assert sum(count for physical, count in shards_written(1000).items() if not physical.endswith("_1")) > 0
    assert len(list(reader.query(key))) == 21

    CLOCK.sleep(TTL + 1.5)
    second = compact(operator, options)
    assert any("trimmed 1 keys" in note for note in second.notes), second.notes
    assert operator.shards.read_shards(key) == (1,)
    assert set(shards_written(0)) >= {f"{key}_1"}
    assert {physical for physical in shards_written(0) if physical.startswith(key)} == {f"{key}_1"}
    assert len(list(fresh.query(key))) == 21


HELD_EVENT = "before-parameter-build.dynamodb.GetItem"
#: Declared before the tests bind the tables, as an application's models are.
HINTED_PROCESSES = (process(740, hot_key_hints=2), process(741, hot_key_hints=2))


class HeldHintReads:
    """Holds every read of a hint copy (``GetItem`` of ``#hot-keys#N``) until ``release`` is
    set, counting them; ``waiting`` counts the callers that wait, until it is let go, for another's
    read instead."""

    def __init__(self) -> None:
        self.reads = 0
        self.waiting = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.changed = threading.Condition()
        self.parent = os.getpid()

    def before_parameter_build(self, params: dict[str, Any] | None = None, **_: Any) -> None:
        key = (params or {}).get("Key", {}).get("partition_key", {}).get("S", "")
        if os.getpid() != self.parent or not key.startswith("#hot-keys#"):
            return
        with self.changed:
            self.reads += 1
            self.changed.notify_all()
        self.started.set()
        self.release.wait(30)

    def future(self) -> Future[Any]:
        held = self

        class Counted(Future[Any]):
            def result(self, timeout: float | None = None) -> Any:
                with held.changed:
                    # Counted until the hint read is let go: no writer gets further before it (a
                    # metadata read's single flight, which uses these futures too, comes after).
                    if not held.release.is_set():
                        held.waiting += 1
                        held.changed.notify_all()
                return super().result(timeout)

        return Counted()

    def until(self, condition: Callable[[], bool], timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(condition, timeout)


@pytest.fixture
def held(dynamodb_models: Bind, monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldHintReads]:
    """The tables bound (``FleetLog`` and its metadata), hint reads held and counted."""
    dynamodb_models(FleetLog)
    hold = HeldHintReads()
    # The metadata model follows its owner's connection: hook every client the reads may use.
    clients = {id(client): client for client in (model._get_connection().connection.client
                                                 for model in (FleetShards, FleetLog, *HINTED_PROCESSES))}
    for client in clients.values():
        client.meta.events.register(HELD_EVENT, hold.before_parameter_build, unique_id="held-hints")
    monkeypatch.setattr(_pool, "new_future", hold.future)  # the futures single flights wait on
    try:
        yield hold
    finally:
        hold.release.set()
        for client in clients.values():
            client.meta.events.unregister(HELD_EVENT, unique_id="held-hints")


def test_threads_that_miss_the_hint_list_at_once_wait_for_one_read(held: HeldHintReads) -> None:
    """Eight threads of one process write at once, none with the list cached: one reads a hint
    copy, the seven others wait for its answer (each used to read a copy of its own)."""
    model = HINTED_PROCESSES[0]
    CLOCK.at(8000)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            start.wait(10)
            model("/single/flight", n).save()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    assert held.started.wait(10)
    waited = held.until(lambda: held.waiting == 7 or held.reads > 1, timeout=10)
    held.release.set()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert waited
    assert (held.reads, held.waiting) == (1, 7)
    assert sorted(item.accessed_at for item in model.query("/single/flight")) == list(range(8))


def test_a_child_forked_while_a_thread_reads_the_hint_list_reads_it_itself(held: HeldHintReads) -> None:
    """The parent's read of the list is held when the process forks: the child does not wait
    for it (its thread is not in the child) but reads the list itself, and writes."""
    model = HINTED_PROCESSES[1]
    CLOCK.at(8100)
    reader = threading.Thread(target=lambda: model("/forked/hints", 0).save())
    reader.start()
    try:
        assert held.started.wait(10)
        child = fork_running(lambda: bool(model("/forked/hints", 1).save()), timeout=20)
        assert child.result() is True
    finally:
        held.release.set()
        reader.join(30)
    assert sorted(item.accessed_at for item in model.query("/forked/hints")) == [0, 1]
