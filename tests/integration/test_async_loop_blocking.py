"""With the async methods only, no call holds the event loop for long, 100 requests at once.

The requests of a web application (gets, a miss, saves, updates, a merged query page, a scan
lookup, a count, batch reads and writes, a transaction, a refresh, a delete) run first one at a
time, then 100 at once, each request delayed by a round trip. A call's *step* is what the loop's
thread runs of it between two waits (a stretch of its greenlet between two switches, timed with
``greenlet.settrace`` in CPU time of that thread, so a busy machine does not count). The bound,
a ratio so that the machine's speed does not matter: no step at 100 at once takes more than 3
times the longest step of the same requests one at a time (a step must not grow with the calls
in flight). And nothing waits on the loop's thread: no request goes through botocore's blocking
HTTP session and nothing calls ``time.sleep`` there (CPU time would not see a blocking wait).
``benchmarks/bench_loop_blocking.py`` prints the figures (and the loop's lag) in RESULTS.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import greenlet
import pytest
from botocore.httpsession import URLLib3Session
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._async_transport import _Bridged
from pynamodb_sharding.aio import AsyncTransactWrite
from pynamodb_sharding.testing import inject_latency
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop

USERS = 40
KEY = "/shared/firetvGen2.txt"
CONCURRENT = 100
RATIO = 3.0


class User(ShardedModel):
    class Meta:
        table_name = "blocking_users"
        max_pool_connections = 64

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    logins = NumberAttribute(default=0)
    shards = Sharding(HashedShards(4))


class AuditLog(ShardedModel):
    class Meta:
        table_name = "blocking_audit"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    shards = Sharding(RandomShards(8))


OPERATION: contextvars.ContextVar[str] = contextvars.ContextVar("test_operation", default="?")


class Steps:
    """CPU time of the loop's thread per stretch a greenlet of the async transport ran."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self._running: tuple[str, float] | None = None

    def _trace(self, event: str, args: Any) -> None:
        if event not in ("switch", "throw"):
            return
        origin, target = args
        now = time.thread_time()
        if self._running is not None and isinstance(origin, _Bridged):
            label, began = self._running
            self.times[label].append(now - began)
            self._running = None
        if isinstance(target, _Bridged):
            context = target.gr_context
            self._running = (context.get(OPERATION, "?") if context is not None else "?", now)

    def __enter__(self) -> Steps:
        self._previous = greenlet.settrace(self._trace)
        return self

    def __exit__(self, *_: object) -> None:
        greenlet.settrace(self._previous)

    def longest(self) -> tuple[float, str]:
        return max((max(times), name) for name, times in self.times.items())


def operations(connection: Connection) -> dict[str, Callable[[int], Awaitable[Any]]]:
    async def get(n: int) -> Any:
        return await User.aget(f"user{n % USERS}@example.com")

    async def get_miss(n: int) -> None:
        with pytest.raises(User.DoesNotExist):
            await User.aget(f"nobody{n}@example.com")

    async def save(n: int) -> Any:
        return await AuditLog(KEY, 1_000_000 + n, user_id="u").asave()

    async def update(n: int) -> Any:
        return await User(f"user{n % USERS}@example.com").aupdate([User.logins.add(1)])

    async def query(_: int) -> None:
        assert len([entry async for entry in AuditLog.aquery(KEY, scan_index_forward=False, limit=20)]) == 20

    async def scan(n: int) -> None:
        assert [user async for user in User.ascan(User.name == f"name{n % 4}", page_size=10, rate_limit=1000)]

    async def count(_: int) -> None:
        assert await AuditLog.acount(KEY) >= 100

    async def batch_get(n: int) -> None:
        assert len(await User.abatch_get([f"user{(n + k) % USERS}@example.com" for k in range(10)])) == 10

    async def batch_write(n: int) -> None:
        async with AuditLog.abatch_write() as batch:
            for k in range(5):
                await batch.save(AuditLog(f"/batch/{n}", k, user_id="b"))

    async def transaction(n: int) -> None:
        async with AsyncTransactWrite(connection=connection) as write:
            await write.save(AuditLog(f"/tx/{n}", n, user_id="t"))
            await write.update(User(f"user{n % USERS}@example.com"), [User.logins.add(1)])

    async def refresh(n: int) -> None:
        await User(f"user{n % USERS}@example.com").arefresh()

    async def delete(n: int) -> None:
        await AuditLog(f"/tx/{n}", n).adelete()

    return {"aget": get, "aget (miss)": get_miss, "asave": save, "aupdate": update, "aquery": query,
            "ascan": scan, "acount": count, "abatch_get": batch_get, "abatch_write": batch_write,
            "AsyncTransactWrite": transaction, "arefresh": refresh, "adelete": delete}


class LoopThreadWaits:
    """Requests sent through botocore's blocking HTTP session, and ``time.sleep`` calls, made on
    the loop's thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sends: list[str] = []
        self.sleeps: list[float] = []
        loop_thread = threading.current_thread()
        own_send, own_sleep = URLLib3Session.send, time.sleep

        def send(session: Any, request: Any) -> Any:
            if threading.current_thread() is loop_thread:
                self.sends.append(request.url)
            return own_send(session, request)

        def sleep(seconds: float) -> None:
            if threading.current_thread() is loop_thread:
                self.sleeps.append(seconds)
            own_sleep(seconds)

        monkeypatch.setattr(URLLib3Session, "send", send)
        monkeypatch.setattr(time, "sleep", sleep)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The garbage collector's pauses are the interpreter's, and land in whichever step allocates
    when one is due: left out here (the benchmark measures with them)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_no_call_holds_the_loop_longer_with_100_requests_at_once(
    dynamodb_models: BindModels, loop: Loop, monkeypatch: pytest.MonkeyPatch, no_collector: None,
) -> None:
    dynamodb_models(User, AuditLog)
    for n in range(USERS):
        User(f"user{n}@example.com", name=f"name{n % 4}").save()
    with AuditLog.batch_write() as batch:
        for n in range(120):
            batch.save(AuditLog(KEY, n, user_id="u"))
    meta = User.Meta
    connection = Connection(region=meta.region, host=meta.host, aws_access_key_id=meta.aws_access_key_id,
                            aws_secret_access_key=meta.aws_secret_access_key)
    ops = operations(connection)
    names = list(ops)

    async def one_at_a_time(first: int, repeat: int) -> Steps:
        with Steps() as steps:
            for n in range(first, first + repeat):
                for name in names:
                    OPERATION.set(name)
                    await ops[name](n)
        return steps

    async def at_once(first: int) -> Steps:
        async def one(n: int) -> None:
            OPERATION.set(names[n % len(names)])
            await ops[names[n % len(names)]](first + n)

        with Steps() as steps:
            await asyncio.gather(*(one(n) for n in range(CONCURRENT)))
        return steps

    waits = LoopThreadWaits(monkeypatch)
    with inject_latency(User, 0.02, extra_models=[AuditLog]):
        loop.run(one_at_a_time(0, 1))  # warm-up: clients, connections, botocore's data files
        alone = loop.run(one_at_a_time(1, 3))
        burst = loop.run(at_once(100))

    assert set(burst.times) == set(names)  # every operation ran, and was timed
    longest_alone, slowest_alone = alone.longest()
    longest_burst, slowest_burst = burst.longest()
    assert longest_burst <= RATIO * longest_alone, (
        f"{slowest_burst} held the loop {longest_burst * 1000:.2f} ms at {CONCURRENT} requests at once, "
        f"{longest_burst / longest_alone:.1f} x the longest step alone ({slowest_alone}, "
        f"{longest_alone * 1000:.2f} ms)")
    assert [] == waits.sends
    assert [] == waits.sleeps
