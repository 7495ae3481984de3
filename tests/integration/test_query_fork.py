"""A merged query started before ``os.fork()`` continues in the child and in the parent.

The parent reads the first items, so every shard's next page is requested (prefetched) and held
in flight by a slow request hook when the process forks. The child has none of the parent's
threads: a wait on those requests would never end. Both processes must read every remaining
item exactly once, as a plain PynamoDB query does (the reference, under the same hooks).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels
from tests.forked import fork_running

ITEMS = 80
READ_BEFORE_FORK = 3


class Tick(ShardedModel):
    class Meta:
        table_name = "fanout_tick"

    clock = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4))  # deterministic: every shard holds 20 or so items


class PlainTick(Model):
    class Meta:
        table_name = "fanout_plain_tick"

    clock = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class HeldNextPages:
    """Holds the parent's requests for a next page (those with a start key) until released.

    Every request also asks the server to close its connection afterwards, so that the parent
    and the child never share a pooled keep-alive socket (two processes writing requests to one
    socket at once would mix up their responses, whatever the library does).
    """

    def __init__(self) -> None:
        self.parent = os.getpid()
        self.released = threading.Event()
        self.held = 0
        self._lock = threading.Lock()

    def __call__(self, request: Any, **_: Any) -> None:
        request.headers["Connection"] = "close"
        if os.getpid() != self.parent or "ExclusiveStartKey" not in json.loads(request.body or b"{}"):
            return
        with self._lock:
            self.held += 1
        self.released.wait(10)

    def wait_until_held(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while self.held < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.held >= count, f"only {self.held} of {count} next-page requests were in flight"


@contextmanager
def held_next_pages(model: type[Model]) -> Iterator[HeldNextPages]:
    hook = HeldNextPages()
    events = model._get_connection().connection.client.meta.events
    events.register_first("before-send.dynamodb.Query", hook, unique_id="test-held-next-pages")
    try:
        yield hook
    finally:
        hook.released.set()
        events.unregister("before-send.dynamodb.Query", unique_id="test-held-next-pages")


@pytest.fixture
def ticks(dynamodb_models: BindModels) -> None:
    dynamodb_models(Tick, PlainTick)
    for model in (Tick, PlainTick):
        with model.batch_write() as batch:
            for at in range(ITEMS):
                batch.save(model("c", at))


@pytest.mark.parametrize("model", [PlainTick, Tick])
def test_a_query_started_before_fork_continues_in_child_and_parent(ticks: None, model: type[Model]) -> None:
    with held_next_pages(model) as hook:
        results = model.query("c", page_size=4)
        before = [int(next(results).at) for _ in range(READ_BEFORE_FORK)]
        if model is Tick:
            hook.wait_until_held(4)  # every shard's next page is in flight
        child = fork_running(lambda: [int(item.at) for item in results], timeout=30)
        hook.released.set()
        in_parent = [int(item.at) for item in results]
        in_child = child.result()
    assert before == list(range(READ_BEFORE_FORK))
    assert in_parent == list(range(READ_BEFORE_FORK, ITEMS))
    assert in_child == list(range(READ_BEFORE_FORK, ITEMS))
    assert results.last_evaluated_key is None
