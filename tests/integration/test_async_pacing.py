"""``rate_limit`` and ``Sharding(hedged_requests=True)`` on the async path, on DynamoDB Local.

``aquery``/``acount`` with a ``rate_limit`` pace the shards' requests as the sync path does (one
limiter shared by the shards, consuming each page's capacity), waiting by yielding to the event
loop: no ``time.sleep`` on the loop's thread, other tasks run meanwhile. A hedged model's slow
shard requests (every 10th held until the read is done, the wait yielding to the loop) are sent
once more as tasks of the loop; the first answer wins and the items are those of the sync query.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding import _async_transport as transport
from pynamodb_sharding._async_transport import wait_on_loop
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._wire import observes_only
from pynamodb_sharding.testing import inject_latency, record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop, loop_thread_sleeps
from tests.paging import apage_by_page


class Paced(ShardedModel):
    class Meta:
        table_name = "async_paced"

    name = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class AsyncHedged(ShardedModel):
    class Meta:
        table_name = "async_hedged"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(16), hedged_requests=True)


async def with_ticker(read: Callable[[], Any]) -> tuple[Any, int]:
    """``await read()`` while another task of the loop ticks; the result and the ticks."""
    ticks = 0
    done = False

    async def tick() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.ensure_future(tick())
    try:
        return await read(), ticks
    finally:
        done = True
        await ticker


def test_rate_limit_paces_the_shards_by_awaiting(dynamodb_models: BindModels, loop: Loop,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb_models(Paced)
    with Paced.batch_write() as batch:
        for at in range(200):
            batch.save(Paced("cpu", at))
    expected = [item.at for item in Paced.query("cpu", page_size=10)]
    sleeps = loop_thread_sleeps(monkeypatch)

    async def read() -> list[int]:
        return [item.at async for item in Paced.aquery("cpu", page_size=10, rate_limit=40)]

    with record_requests(Paced) as sent:
        start = time.monotonic()
        got, ticks = loop.run(with_ticker(read))
        elapsed = time.monotonic() - start
    bodies = sent.bodies("Query")
    assert got == expected == list(range(200))
    assert all(body["ReturnConsumedCapacity"] == "TOTAL" for body in bodies)
    # As the sync test (test_query_execution): one limiter for the 4 shards pauses for every
    # page's 0.5 units but those of each shard's first and last request: about 0.2 s here ...
    assert len(bodies) >= 20
    assert elapsed >= (len(bodies) - 2 * 4) * 0.5 / 40
    # ... spent awaiting: the loop's thread never slept and the other task ran meanwhile.
    assert sleeps == []
    assert ticks >= 5


def test_acount_with_a_rate_limit_paces_and_counts(dynamodb_models: BindModels, loop: Loop,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb_models(Paced)
    with Paced.batch_write() as batch:
        for at in range(60):
            batch.save(Paced("mem", at))
    sleeps = loop_thread_sleeps(monkeypatch)
    with record_requests(Paced) as sent:
        count, _ = loop.run(with_ticker(lambda: Paced.acount("mem", rate_limit=40)))
    assert count == Paced.count("mem") == 60
    bodies = sent.bodies("Query")
    assert bodies
    assert all(body["ReturnConsumedCapacity"] == "TOTAL" for body in bodies)
    assert sleeps == []


class HeldRequests:
    """A ``before-send`` observer that holds the first sending of every ``nth`` distinct Query
    (by its body) until :meth:`release`, yielding to the event loop meanwhile, as a request whose
    reply never comes; the same request sent again (its hedge) goes through. A read that returns
    while some are held did not wait for them, whatever the machine's speed."""

    def __init__(self, nth: int) -> None:
        self.nth = nth
        self.seen: set[bytes] = set()
        self.held: list[asyncio.Future[None]] = []
        self.outlasted: list[bytes] = []  # held requests that waited out the 20 s guard

    @observes_only
    def __call__(self, event_name: str, request: Any = None, **_: Any) -> None:
        body = bytes(request.body or b"")
        if body in self.seen:
            return
        self.seen.add(body)
        if len(self.seen) % self.nth:
            return
        loop = asyncio.get_running_loop()  # on the loop's thread: the async transport's request
        waiter: asyncio.Future[None] = loop.create_future()
        # A guard, so that a read that waits for the held request fails instead of hanging.
        loop.call_later(20, lambda: waiter.done() or (self.outlasted.append(body), waiter.set_result(None)))
        self.held.append(waiter)
        wait_on_loop(waiter)

    async def release(self) -> None:
        for waiter in self.held:
            if not waiter.done():
                waiter.set_result(None)
        pending = running()
        if pending:
            await asyncio.wait(pending)


@contextlib.contextmanager
def holding(model: type[Any], nth: int) -> Iterator[HeldRequests]:
    held = HeldRequests(nth)
    events = botocore_client(model).meta.events
    events.register("before-send.dynamodb.Query", held, unique_id="test-held-requests")
    try:
        yield held
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="test-held-requests")


def test_slow_shard_requests_are_hedged_with_tasks(dynamodb_models: BindModels, loop: Loop,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb_models(AsyncHedged)
    with AsyncHedged.batch_write() as batch:
        for at in range(400):
            batch.save(AsyncHedged("/home", at))

    async def read(**kwargs: Any) -> list[int]:
        return [int(item.at) async for item in AsyncHedged.aquery("/home", **kwargs)]

    for _ in range(3):  # the window learns the model's latencies (16 shards a query)
        assert loop.run(read()) == list(range(400))
    window = AsyncHedged.shards.latency_window
    assert window is not None
    before, wins, threads = window.hedges, window.hedge_wins, threading.active_count()
    sleeps = loop_thread_sleeps(monkeypatch)
    with holding(AsyncHedged, 10) as held:
        got = loop.run(read(page_size=20))
        # No held request was answered when the read returned (each was abandoned, or is still
        # held): the read did not wait for them.
        first_held = list(held.held)
        abandoned = [waiter.cancelled() for waiter in first_held if waiter.cancelled() or not waiter.done()]
        # Page by page through page tokens: the same items, none twice.
        pages = loop.run(apage_by_page(AsyncHedged.aquery, token=True, hash_key="/home", limit=30,
                                       scan_index_forward=False))
        resumed = [int(item.at) for items, _ in pages for item in items]
        loop.run(held.release())
    assert got == list(range(400))
    assert resumed == list(range(399, -1, -1))
    assert first_held, "some requests were held"
    assert len(abandoned) == len(first_held)
    assert any(abandoned)  # the hedge's answer ended the held request
    assert held.outlasted == []
    assert window.hedges > before
    assert window.hedge_wins > wins  # a hedge answered before the held request it doubled
    assert sleeps == []
    assert threading.active_count() == threads  # no thread for the hedges: tasks of the loop


def running() -> list[asyncio.Future[Any]]:
    """The tasks of the running loop that the async transport started and that are not done."""
    loop = asyncio.get_running_loop()
    return [task for task in transport._running if task.get_loop() is loop and not task.done()]


def test_a_cancelled_hedged_query_leaves_no_attempt_in_flight(dynamodb_models: BindModels, loop: Loop) -> None:
    """Every request slowed by 1 s (yielding): each shard request is hedged, then the query is
    cancelled; both attempts of every shard are cancelled, none left running."""
    dynamodb_models(AsyncHedged)
    with AsyncHedged.batch_write() as batch:
        for at in range(64):
            batch.save(AsyncHedged("/cancel", at))

    async def read() -> list[int]:
        return [int(item.at) async for item in AsyncHedged.aquery("/cancel")]

    for _ in range(3):  # the window learns the model's latencies
        assert loop.run(read()) == list(range(64))
    window = AsyncHedged.shards.latency_window
    assert window is not None
    before = window.hedges

    async def cancel_while_hedged() -> tuple[int, int]:
        with inject_latency(AsyncHedged, 1.0, operations={"Query"}):
            task = asyncio.ensure_future(read())
            for _ in range(400):  # until the hedges are out (their delay is the window's p95)
                await asyncio.sleep(0.005)
                if window.hedges - before >= 16:
                    break
            in_flight = len(running())
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(100):
                if not running():
                    break
                await asyncio.sleep(0)
            return in_flight, len(running())

    in_flight, left = loop.run(cancel_while_hedged())
    assert window.hedges - before == 16  # every shard's request was sent a second time
    assert in_flight >= 32  # the 16 shard tasks' two attempts each
    assert left == 0
