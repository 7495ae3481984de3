"""One process-wide fan-out pool serves every merged query and count (DynamoDB Local).

A web server runs many merged queries at once: their shard requests share one bounded pool,
so the threads alive never exceed its size, every query still returns exactly its items, a
forked child (a preloading server's worker) queries on a pool of its own, and the pool warning
counts the queries in flight.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import (
    FanoutPoolWarning,
    HashedShards,
    ShardedModel,
    Sharding,
    _pool,
    fanout_threads,
    set_fanout_threads,
)
from pynamodb_sharding.testing.plugin import BindModels
from tests.forked import fork_running

KEYS = [f"/page/{n}" for n in range(4)]
PER_KEY = 60
WIDE = 40


class Hit(ShardedModel):
    class Meta:
        table_name = "pool_hit"
        max_pool_connections = 64

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(16))


class WideHit(ShardedModel):
    """More shards than the default pool's 32 threads, and as many workers declared."""

    class Meta:
        table_name = "pool_wide_hit"
        max_pool_connections = WIDE

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(WIDE, attributes=("at",)), max_workers=WIDE)


class QueuedHit(ShardedModel):
    """Two requests at a time: the rest of a query's wait in its own queue, submitted later."""

    class Meta:
        table_name = "pool_queued_hit"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(16, attributes=("at",)), max_workers=2)


class NarrowHit(ShardedModel):
    class Meta:
        table_name = "pool_narrow_hit"
        max_pool_connections = 10

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4))


@pytest.fixture
def hits(dynamodb_models: BindModels) -> None:
    dynamodb_models(Hit, NarrowHit)
    with Hit.batch_write() as batch:
        for key in KEYS:
            for at in range(PER_KEY):
                batch.save(Hit(key, at))


@pytest.fixture
def pool_of_8() -> Iterator[None]:
    before = fanout_threads()
    set_fanout_threads(8)
    # The previous pool's idle threads exit on their own, shortly after (shutdown(wait=False)):
    # wait for them, so the peak counts only the new pool's threads.
    deadline = time.monotonic() + 30
    while pool_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool_threads() == 0, "the previous fan-out pool's idle threads did not exit"
    yield
    set_fanout_threads(before)


@pytest.fixture
def default_pool() -> Iterator[None]:
    """The pool's size left to its default (32, or the largest max_workers declared), as an
    application that never sets it has it; the size before is restored afterwards."""
    before = _pool._size
    set_fanout_threads(None)
    yield
    set_fanout_threads(before)


def pool_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith("pynamodb-sharding-fanout"))


def test_32_concurrent_queries_never_exceed_the_pool(hits: None, pool_of_8: None) -> None:
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, pool_threads())
            time.sleep(0.001)

    results: dict[int, list[int]] = {}
    counts: dict[int, int] = {}
    errors: list[BaseException] = []

    def request(n: int) -> None:
        try:
            key = KEYS[n % len(KEYS)]
            results[n] = [int(hit.at) for hit in Hit.query(key, page_size=7, scan_index_forward=n % 2 == 0)]
            counts[n] = Hit.count(key)
        except BaseException as exc:  # reported below
            errors.append(exc)

    sampler = threading.Thread(target=sample)
    sampler.start()
    requests = [threading.Thread(target=request, args=(n,)) for n in range(32)]
    for thread in requests:
        thread.start()
    for thread in requests:
        thread.join(120)
    done.set()
    sampler.join()
    assert errors == []
    assert all(not thread.is_alive() for thread in requests), "a query did not finish: the pool deadlocked"
    for n, got in results.items():
        assert got == sorted(range(PER_KEY), reverse=n % 2 == 1)
    assert set(counts.values()) == {PER_KEY}
    assert len(results) == 32
    assert 0 < peak <= 8


def test_a_forked_child_queries_on_a_pool_of_its_own(hits: None) -> None:
    assert len(list(Hit.query(KEYS[0]))) == PER_KEY  # the parent's pool exists and has threads
    assert pool_threads() > 0

    def in_child() -> tuple[list[int], int, int]:
        return [int(hit.at) for hit in Hit.query(KEYS[1], page_size=5)], Hit.count(KEYS[2]), pool_threads()

    got, count, threads = fork_running(in_child, timeout=60).result()
    assert got == list(range(PER_KEY))
    assert count == PER_KEY
    assert 0 < threads <= fanout_threads()
    assert len(list(Hit.query(KEYS[3]))) == PER_KEY  # the parent's pool still works


def test_the_pool_warning_counts_the_queries_in_flight(hits: None) -> None:
    for at in range(40):
        NarrowHit("/n", at).save()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FanoutPoolWarning)
        first = NarrowHit.query("/n", page_size=2)
        second = NarrowHit.query("/n", page_size=2)
        next(first)
        next(second)  # 4 + 4 requests at once: within the 10 connections
    with pytest.warns(FanoutPoolWarning, match="12 requests at once"):
        third = NarrowHit.query("/n", page_size=2)  # 4 more while the other two are open
    for query in (first, second, third):
        query.close()


def all_at_once(requests: int) -> tuple[Any, threading.Barrier]:
    """A ``before-send`` hook that holds each shard request until ``requests`` of them are in
    flight together: a query sending fewer at once breaks the barrier (after 60 s) and fails."""
    barrier = threading.Barrier(requests, timeout=60)

    def hold(**_: Any) -> None:
        barrier.wait()

    return hold, barrier


def test_a_declared_max_workers_sends_every_shard_request_at_once(dynamodb_models: BindModels,
                                                                  default_pool: None) -> None:
    dynamodb_models(WideHit)
    with WideHit.batch_write() as batch:
        for at in range(2 * WIDE):
            batch.save(WideHit("/wide", at))
    assert fanout_threads() >= WIDE  # 32 by default: grown to the max_workers declared
    events = WideHit._get_connection().connection.client.meta.events
    hold, barrier = all_at_once(WIDE)
    events.register("before-send.dynamodb.Query", hold, unique_id="test-all-at-once")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FanoutPoolWarning)
            got = [int(hit.at) for hit in WideHit.query("/wide", limit=10)]
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="test-all-at-once")
    assert got == list(range(10))
    assert not barrier.broken


def test_a_pool_set_below_max_workers_warns_and_still_answers(dynamodb_models: BindModels,
                                                              default_pool: None) -> None:
    dynamodb_models(WideHit)
    with WideHit.batch_write() as batch:
        for at in range(2 * WIDE):
            batch.save(WideHit("/set", at))
    set_fanout_threads(8)
    with pytest.warns(FanoutPoolWarning, match=r"asks for 40 shard requests at once .* has 8 threads"
                                               r".*set_fanout_threads\(40\)") as warned:
        got = [int(hit.at) for hit in WideHit.query("/set")]
    assert [warning.filename for warning in warned] == [__file__]  # the application's line
    assert got == list(range(2 * WIDE))
    set_fanout_threads(None)
    assert fanout_threads() >= WIDE  # back to the default: the max_workers declared


def test_a_query_in_flight_when_a_model_grows_the_pool_finishes_exactly(dynamodb_models: BindModels,
                                                                        default_pool: None) -> None:
    dynamodb_models(QueuedHit)
    with QueuedHit.batch_write() as batch:
        for at in range(48):
            batch.save(QueuedHit("/q", at))
    held, go = threading.Event(), threading.Event()

    def hold(**_: Any) -> None:
        held.set()
        assert go.wait(60)

    events = QueuedHit._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", hold, unique_id="test-held-across-growth")
    got: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            got.extend(int(hit.at) for hit in QueuedHit.query("/q", page_size=4))
        except BaseException as exc:  # reported below
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert held.wait(60)  # its first requests run on the pool, 14 shards wait in its queue
        before = fanout_threads()
        Sharding(HashedShards(8), max_workers=before + 1)  # a model module imported meanwhile
        assert fanout_threads() == before + 1  # a new pool; the old one shut down
    finally:
        go.set()
        reader.join(120)
        events.unregister("before-send.dynamodb.Query", unique_id="test-held-across-growth")
    assert errors == []
    assert got == list(range(48))
