"""``Sharding(..., hedged_requests=True)`` on DynamoDB Local, with slow answers injected.

Proves: with every 10th shard request held back (botocore ``before-send``), a hedged merged
query sends those requests once more and returns while the held ones are still held: it never
waited for them, whatever the machine's speed. With every nth request slowed by 1 s, the first
answer wins and the results, read to the end or page by page through JSON cursors, are exactly
those of the same query unhedged: no item lost, repeated or out of order; the discarded slow
answers change nothing; counts agree.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, ShardedModel, Sharding
from tests.paging import pages

Bind = Callable[..., Any]


class Hedged(ShardedModel):
    class Meta:
        table_name = "hedge_log"
        max_pool_connections = 64

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(16), hedged_requests=True)


class Unhedged(ShardedModel):
    """The same table, read without hedging: the reference."""

    class Meta:
        table_name = "hedge_log"
        max_pool_connections = 64

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(16))


@contextmanager
def slow_every(model: type[Model], nth: int, seconds: float) -> Iterator[list[int]]:
    """Delay every ``nth`` Query request of ``model``'s client by ``seconds``."""
    counter = itertools.count()
    slowed: list[int] = []
    lock = threading.Lock()

    def before_send(**_: Any) -> None:
        with lock:
            number = next(counter)
        if number % nth == nth - 1:
            slowed.append(number)
            time.sleep(seconds)

    events = model._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", before_send, unique_id="test-slow-every")
    try:
        yield slowed
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="test-slow-every")


class Held:
    """The shard requests :func:`held_every` holds back, and how many are held now."""

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.bodies: set[bytes] = set()
        self.waiting = 0
        self.release = threading.Event()
        self.lock = threading.Lock()


@contextmanager
def held_every(model: type[Model], nth: int) -> Iterator[Held]:
    """Hold every ``nth`` Query request of ``model``'s client at ``before-send`` until the block
    ends; a second attempt of a held request (its hedge, the same body) is not held."""
    counter = itertools.count()
    held = Held()

    def before_send(request: Any, **_: Any) -> None:
        with held.lock:
            number = next(counter)
            hold = number % nth == nth - 1 and request.body not in held.bodies
            if hold:
                held.numbers.append(number)
                held.bodies.add(request.body)
                held.waiting += 1
        if hold:
            held.release.wait(120)
            with held.lock:
                held.waiting -= 1

    events = model._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", before_send, unique_id="test-held-every")
    try:
        yield held
    finally:
        held.release.set()
        events.unregister("before-send.dynamodb.Query", unique_id="test-held-every")


@pytest.fixture
def logs(dynamodb_models: Bind) -> None:
    dynamodb_models(Hedged, Unhedged)
    with Hedged.batch_write() as batch:
        for at in range(400):
            batch.save(Hedged("/home", at))
        for at in range(40):
            batch.save(Hedged("/small", at))
    for _ in range(12):  # the window learns the model's latencies
        list(Hedged.query("/home"))


def _pages(model: Any, limit: int, forward: bool, key: str = "/home") -> list[int]:
    return [int(item.at) for item in pages(model.query, hash_key=key, limit=limit, scan_index_forward=forward)]


def test_slow_requests_are_hedged_and_results_are_unchanged(logs: None) -> None:
    window = Hedged.shards.latency_window
    assert window is not None
    before = window.hedges
    with held_every(Hedged, 10) as held:
        got = [int(item.at) for item in Hedged.query("/home", page_size=20)]
        with held.lock:
            still_held = held.waiting
    assert got == list(range(400))
    assert held.numbers, "some requests were held"
    assert window.hedges > before
    # Every held request was still held when the query returned: no answer of theirs was waited for.
    assert len(held.numbers) == still_held
    assert Hedged.count("/home") == Unhedged.count("/home") == 400


class TestProperty:
    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(limit=st.integers(5, 40), forward=st.booleans(), nth=st.integers(3, 12))
    def test_resumed_pages_equal_the_unhedged_query(self, logs: None, limit: int, forward: bool, nth: int) -> None:
        with slow_every(Hedged, nth, 1.0):
            got = _pages(Hedged, limit, forward, "/small")
        assert got == _pages(Unhedged, limit, forward, "/small") == sorted(range(40), reverse=not forward)
