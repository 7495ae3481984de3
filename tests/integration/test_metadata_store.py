"""The cached shard-count store against DynamoDB Local.

Proves: a new key is inserted once even when writers race (the loser reads the winner's
item); a change is conditional on the ``last_updated`` read (exactly one of two racing changes
wins); a warm key is served from the cache, and many threads missing one key cause one
metadata read (requests counted at the botocore level); the TTL expires entries by the
injected timer; corrupt or undecodable items raise MetadataError and leave the item as it was.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pynamodb_sharding._exceptions import MetadataError
from pynamodb_sharding._metadata import ShardCountStore, ShardMetadata, ShardState
from pynamodb_sharding._strategies import HistoryEntry

OWNER = "AuditLog.file_path"
NS = "audit_log"
KEY = "/shared/firetvGen2.txt"


class StoreShards(ShardMetadata):
    class Meta:
        table_name = "store_shards"


class FakeTimer:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RequestCounter:
    """Counts HTTP requests per operation as botocore sends them."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, model: Any, **kwargs: Any) -> None:
        name = model.name
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1

    def __getitem__(self, operation: str) -> int:
        return self.counts.get(operation, 0)


@pytest.fixture
def requests(dynamodb_models: Callable[..., Any]) -> Iterator[RequestCounter]:
    dynamodb_models(StoreShards)
    counter = RequestCounter()
    events = StoreShards._get_connection().connection.client.meta.events
    # before-call carries the operation model; it fires once per API call.
    events.register("before-call.dynamodb", counter)
    return counter


@pytest.fixture
def timer() -> FakeTimer:
    return FakeTimer()


@pytest.fixture
def store(requests: RequestCounter, timer: FakeTimer) -> ShardCountStore:
    return ShardCountStore(StoreShards, max_shards=8, ttl=10.0, timer=timer)


def test_absent_key_reads_none_and_is_not_cached(store: ShardCountStore, requests: RequestCounter) -> None:
    assert store.get(NS, KEY, owner=OWNER) is None
    assert store.get(NS, KEY, owner=OWNER) is None
    assert requests["GetItem"] == 2


def test_create_writes_count_time_and_history_item(store: ShardCountStore) -> None:
    state = store.create(NS, KEY, 1, 1562858912.0, owner=OWNER)
    assert ShardState(1, 1562858912.0, (HistoryEntry(1562858912.0, 1),)) == state
    item = StoreShards.get(KEY, NS, consistent_read=True)
    assert (1, 1562858912, {"1562858912:1"}) == (item.number_of_shards, item.last_updated, item.shard_history)


def test_create_race_loser_reads_winner(store: ShardCountStore, timer: FakeTimer) -> None:
    other = ShardCountStore(StoreShards, max_shards=8, ttl=10.0, timer=timer)
    first = store.create(NS, KEY, 2, 100.0, owner=OWNER)
    second = other.create(NS, KEY, 5, 200.0, owner=OWNER)
    assert first == second
    assert StoreShards.get(KEY, NS, consistent_read=True).number_of_shards == 2


def test_concurrent_creates_insert_once(store: ShardCountStore, timer: FakeTimer) -> None:
    stores = [ShardCountStore(StoreShards, max_shards=8, ttl=10.0, timer=timer) for _ in range(8)]
    barrier = threading.Barrier(len(stores))

    def create(index: int) -> ShardState:
        barrier.wait()
        return stores[index].create(NS, KEY, index % 8 + 1, 100.0 + index, owner=OWNER)

    with ThreadPoolExecutor(len(stores)) as pool:
        states = list(pool.map(create, range(len(stores))))
    assert len(set(states)) == 1
    stored = store.load(NS, KEY, owner=OWNER)
    assert states[0] == stored
    assert stored is not None
    assert len(stored.history) == 1


def test_change_is_conditional_on_the_lock_value(store: ShardCountStore, timer: FakeTimer) -> None:
    seen = store.create(NS, KEY, 1, 100.0, owner=OWNER)
    other = ShardCountStore(StoreShards, max_shards=8, ttl=10.0, timer=timer)
    won = other.change(NS, KEY, seen, 2, 100.0, owner=OWNER)
    lost = store.change(NS, KEY, seen, 2, 100.0, owner=OWNER)
    assert won is not None
    assert lost is None
    assert (won.count, won.last_updated) == (2, 100.001)
    assert (HistoryEntry(100.0, 1), HistoryEntry(100.001, 2)) == won.history
    assert won == store.load(NS, KEY, owner=OWNER)


def test_a_change_updates_this_process_cache_at_once(store: ShardCountStore, requests: RequestCounter) -> None:
    seen = store.create(NS, KEY, 1, 100.0, owner=OWNER)
    changed = store.change(NS, KEY, seen, 4, 105.0, owner=OWNER)
    reads_before = requests["GetItem"]
    assert changed == store.get(NS, KEY, owner=OWNER)
    assert changed is not None
    assert changed.count == 4
    assert reads_before == requests["GetItem"]


def test_an_older_state_never_replaces_a_newer_one(store: ShardCountStore) -> None:
    seen = store.create(NS, KEY, 1, 100.0, owner=OWNER)
    changed = store.change(NS, KEY, seen, 2, 200.0, owner=OWNER)
    assert changed == store.remember(NS, KEY, seen)
    assert changed == store.cached(NS, KEY)


def test_a_read_sent_before_a_trim_does_not_bring_the_trimmed_history_back(
    store: ShardCountStore, requests: RequestCounter
) -> None:
    # The key grew to 4 and shrank to 2; compact trims its history while another thread of the
    # same process has a read of the untrimmed item in flight (its reply held until the trim is
    # done). Reads must then cover 1..2, as the table says, not 1..4 until the cache expires.
    seen = store.create(NS, KEY, 1, 100.0, owner=OWNER)
    grown = store.change(NS, KEY, seen, 4, 105.0, owner=OWNER)
    assert grown is not None
    shrunk = store.change(NS, KEY, grown, 2, 200.0, owner=OWNER)
    assert shrunk is not None
    assert 4 == shrunk.read_count
    replied = threading.Event()
    trimmed_now = threading.Event()
    reader = threading.current_thread()

    def hold(http_response: Any, parsed: Any, model: Any, **kwargs: Any) -> None:
        if model.name == "GetItem" and threading.current_thread() is not reader:
            replied.set()
            assert trimmed_now.wait(30)

    events = StoreShards._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb", hold)
    try:
        with ThreadPoolExecutor(1) as pool:
            late = pool.submit(store.load, NS, KEY, owner=OWNER)
            assert replied.wait(30)
            trimmed = store.trim_history(NS, KEY, shrunk, owner=OWNER)
            trimmed_now.set()
            answered = late.result(30)
    finally:
        events.unregister("after-call.dynamodb", hold)
    assert trimmed is not None
    assert (HistoryEntry(200.0, 2),) == trimmed.history
    assert answered is not None
    assert 2 == answered.read_count
    cached = store.cached(NS, KEY)
    assert cached is not None
    assert 2 == cached.read_count
    # The table agrees, and a later change is cached as usual (the trim no longer applies).
    stored = store.load(NS, KEY, owner=OWNER)
    assert stored is not None
    assert (HistoryEntry(200.0, 2),) == stored.history
    grown_again = store.change(NS, KEY, stored, 3, 300.0, owner=OWNER)
    assert grown_again is not None
    assert store.remember(NS, KEY, stored) == grown_again
    assert (2, 3) == (grown_again.history[0].count, grown_again.read_count)


def test_warm_key_is_read_once_per_ttl(store: ShardCountStore, requests: RequestCounter, timer: FakeTimer) -> None:
    store.create(NS, KEY, 3, 100.0, owner=OWNER)
    store.forget(NS, KEY)
    for _ in range(1000):
        state = store.get(NS, KEY, owner=OWNER)
    assert state is not None
    assert state.count == 3
    assert requests["GetItem"] == 1
    timer.now += 9.9
    store.get(NS, KEY, owner=OWNER)
    assert requests["GetItem"] == 1
    timer.now += 0.2
    store.get(NS, KEY, owner=OWNER)
    assert requests["GetItem"] == 2


def test_stampede_of_threads_causes_one_read(store: ShardCountStore, requests: RequestCounter) -> None:
    store.create(NS, KEY, 3, 100.0, owner=OWNER)
    store.forget(NS, KEY)
    threads = 32
    barrier = threading.Barrier(threads)

    def read(_: int) -> ShardState | None:
        barrier.wait()
        return store.get(NS, KEY, owner=OWNER)

    with ThreadPoolExecutor(threads) as pool:
        states = list(pool.map(read, range(threads)))
    assert {3} == {state.count for state in states if state is not None}
    assert threads == len([s for s in states if s is not None])
    assert requests["GetItem"] == 1


def test_stampede_shares_the_error_of_a_corrupt_item(store: ShardCountStore, requests: RequestCounter) -> None:
    StoreShards(KEY, NS, number_of_shards=0, last_updated=1.0, shard_history={"1:1"}).save()
    threads = 16
    barrier = threading.Barrier(threads)

    def read(_: int) -> str:
        barrier.wait()
        try:
            store.get(NS, KEY, owner=OWNER)
        except MetadataError as exc:
            return str(exc)
        return "no error"

    with ThreadPoolExecutor(threads) as pool:
        messages = set(pool.map(read, range(threads)))
    assert len(messages) == 1
    assert "number_of_shards=0" in messages.pop()
    with pytest.raises(MetadataError):
        store.get(NS, KEY, owner=OWNER)


def test_undecodable_item_raises_metadata_error(store: ShardCountStore) -> None:
    StoreShards._get_connection().put_item(
        KEY,
        NS,
        attributes={"number_of_shards": {"S": "two"}, "last_updated": {"N": "1"}},
    )
    with pytest.raises(MetadataError, match="cannot be decoded") as info:
        store.get(NS, KEY, owner=OWNER)
    assert OWNER in str(info.value)
    assert KEY in str(info.value)


def test_corrupt_item_is_not_changed(store: ShardCountStore) -> None:
    StoreShards(KEY, NS, number_of_shards=-1, last_updated=1.0, shard_history={"1:1"}).save()
    with pytest.raises(MetadataError, match="number_of_shards=-1"):
        store.load(NS, KEY, owner=OWNER)
    item = StoreShards.get(KEY, NS, consistent_read=True)
    assert (-1, 1, {"1:1"}) == (item.number_of_shards, item.last_updated, item.shard_history)


def test_namespaces_keep_models_apart(store: ShardCountStore) -> None:
    store.create("audit_log", KEY, 2, 100.0, owner=OWNER)
    store.create("access_log", KEY, 5, 100.0, owner="AccessLog.path")
    store.clear()
    first = store.get("audit_log", KEY, owner=OWNER)
    second = store.get("access_log", KEY, owner="AccessLog.path")
    assert first is not None
    assert second is not None
    assert (first.count, second.count) == (2, 5)


def test_many_threads_creating_one_key_insert_once(store: ShardCountStore, requests: RequestCounter) -> None:
    threads = 32
    barrier = threading.Barrier(threads)

    def write(_: int) -> ShardState:
        barrier.wait()
        return store.get_or_create(NS, KEY, 2, lambda: 100.0, owner=OWNER)

    with ThreadPoolExecutor(threads) as pool:
        states = set(pool.map(write, range(threads)))
    assert states == {ShardState(2, 100.0, (HistoryEntry(100.0, 2),))}
    assert requests["PutItem"] == 1
