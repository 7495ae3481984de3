"""Benchmark: how long one call holds the event loop, 100 requests of a web app at once.

A FastAPI-like application's requests (``aget`` of a user, hit and miss, ``asave`` of an audit
entry, ``aupdate`` of a login count, an ``aquery`` page over 8 shards, an ``ascan`` lookup of a
small user table, ``acount``, ``abatch_get``, ``abatch_write``, an ``AsyncTransactWrite``,
``arefresh``, ``adelete``) run against DynamoDB Local, every request delayed by ``--latency``
(the round trip), three ways:

- **one at a time**: each operation alone, ``--repeat`` times: the longest step of each;
- **100 at once**: ``--requests`` tasks started together, each one operation (the mix in turn),
  ``--rounds`` times;
- **sync calls in async handlers** (the mistake the async methods replace): the same requests, each
  task calling the sync method (``get``, ``save`` ...) from its coroutine.

A *step* is what the loop's thread runs of one call between two waits: an async call runs the
sync code in a greenlet that hands the loop an awaitable wherever it would block, so each stretch
of a greenlet between two switches is one step; the loop can run nothing else meanwhile. Steps
are timed in CPU time of the loop's thread (``time.thread_time``: what the loop itself spent,
not the time a busy machine took the CPU away) with ``greenlet.settrace``. A probe task waking
every millisecond measures the loop's lag as the application sees it (wall time): the sum of
the steps that ran before it, and the machine's share. The garbage collector is left on; its
pauses fall into the steps that trigger them, which are reported apart, with the pauses.

The bound: no step under 100 requests at once longer than 3 x the longest step of the same
operations run one at a time (the steps of a call must not grow with the calls in flight), and
none longer than the ``--bound`` in ms. ``tests/integration/test_async_loop_blocking.py``
checks the ratio on every CI run.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_loop_blocking.py --requests 100 --markdown out.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import cProfile
import gc
import io
import pstats
import statistics
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import greenlet
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import HashedShards, ShardedModel, Sharding
from pynamodb_sharding.aio import AsyncTransactWrite, close_connections
from pynamodb_sharding.testing import inject_latency
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Series, Target
from report import Report

USERS = 60
KEY = "/shared/firetvGen2.txt"


class User(ShardedModel):
    class Meta:
        table_name = "bench_loop_users"
        max_pool_connections = 64

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    logins = NumberAttribute(default=0)
    shards = Sharding(HashedShards(4))


class AuditLog(ShardedModel):
    class Meta:
        table_name = "bench_loop_audit"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    shards = Sharding(HashedShards(8))


#: The operation a step belongs to (the greenlet of a call inherits its caller's context).
OPERATION: contextvars.ContextVar[str] = contextvars.ContextVar("bench_operation", default="?")


class Steps:
    """The steps of bridged greenlets (``greenlet.settrace``): CPU time of the loop's thread per
    stretch a greenlet of the async transport ran between two switches, by operation. A step in
    which the garbage collector ran is counted apart (``collected``), with the collector's pauses
    (``pauses``): its time is the interpreter's, spent in whichever step allocated when a
    collection was due."""

    def __init__(self) -> None:
        from pynamodb_sharding._async_transport import _Bridged

        self._bridged = _Bridged
        self.times: dict[str, list[float]] = defaultdict(list)
        self.collected: dict[str, list[float]] = defaultdict(list)
        self.pauses: list[float] = []
        self._running: tuple[str, float] | None = None
        self._collecting_since = 0.0
        self._collected_in_step = False
        self._previous: Any = None

    def _trace(self, event: str, args: Any) -> None:
        if event not in ("switch", "throw"):
            return
        origin, target = args
        now = time.thread_time()
        if self._running is not None and isinstance(origin, self._bridged):
            label, began = self._running
            (self.collected if self._collected_in_step else self.times)[label].append(now - began)
            self._running = None
        if isinstance(target, self._bridged):
            self._running = (target.gr_context.get(OPERATION, "?") if target.gr_context is not None else "?", now)
            self._collected_in_step = False

    def _on_collection(self, phase: str, _: dict[str, Any]) -> None:
        if phase == "start":
            self._collecting_since = time.thread_time()
        else:
            self.pauses.append(time.thread_time() - self._collecting_since)
            self._collected_in_step = True

    def __enter__(self) -> Steps:
        self._previous = greenlet.settrace(self._trace)
        gc.callbacks.append(self._on_collection)
        return self

    def __exit__(self, *_: object) -> None:
        greenlet.settrace(self._previous)
        gc.callbacks.remove(self._on_collection)

    def longest(self) -> float:
        return max((max(times) for times in self.times.values() if times), default=0.0)

    def every(self) -> list[float]:
        return [value for times in self.times.values() for value in times]


class LagProbe:
    """A task that asks to wake every millisecond and records how late it woke (wall time)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(0.001)
            self.lags.append(max(0.0, time.perf_counter() - asked - 0.001))

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def operations(connection: Connection) -> dict[str, Callable[[int], Awaitable[Any]]]:
    """The application's requests, async; ``n`` varies the keys."""

    async def get(n: int) -> Any:
        return await User.aget(f"user{n % USERS}@example.com")

    async def get_miss(n: int) -> None:
        try:
            await User.aget(f"nobody{n}@example.com")
        except User.DoesNotExist:
            return

    async def save(n: int) -> Any:
        return await AuditLog(KEY, 10_000_000 + n, user_id=f"user{n % USERS}").asave()

    async def update(n: int) -> Any:
        return await User(f"user{n % USERS}@example.com").aupdate([User.logins.add(1)])

    async def query(_: int) -> list[Any]:
        return [entry async for entry in AuditLog.aquery(KEY, scan_index_forward=False, limit=20)]

    async def scan(n: int) -> list[Any]:
        return [user async for user in User.ascan(User.name == f"name{n % 7}")]

    async def count(_: int) -> int:
        return await AuditLog.acount(KEY)

    async def batch_get(n: int) -> list[Any]:
        return await User.abatch_get([f"user{(n + k) % USERS}@example.com" for k in range(10)])

    async def batch_write(n: int) -> None:
        async with AuditLog.abatch_write() as batch:
            for k in range(5):
                await batch.save(AuditLog(f"/batch/{n % 5}", n * 10 + k, user_id="batch"))

    async def transaction(n: int) -> None:
        async with AsyncTransactWrite(connection=connection) as write:
            await write.save(AuditLog(f"/tx/{n % 5}", n, user_id="tx"))
            await write.update(User(f"user{n % USERS}@example.com"), [User.logins.add(1)])

    async def refresh(n: int) -> None:
        await User(f"user{n % USERS}@example.com").arefresh()

    async def delete(n: int) -> Any:
        return await AuditLog(KEY, 10_000_000 + n).adelete()

    return {"aget": get, "aget (miss)": get_miss, "asave": save, "aupdate": update, "aquery": query,
            "ascan": scan, "acount": count, "abatch_get": batch_get, "abatch_write": batch_write,
            "AsyncTransactWrite": transaction, "arefresh": refresh, "adelete": delete}


def sync_operations(connection: Connection) -> dict[str, Callable[[int], Any]]:
    """The same requests with the sync methods (called from coroutines: they block the loop)."""

    def get_miss(n: int) -> None:
        try:
            User.get(f"nobody{n}@example.com")
        except User.DoesNotExist:
            return

    def batch_write(n: int) -> None:
        with AuditLog.batch_write() as batch:
            for k in range(5):
                batch.save(AuditLog(f"/batch/{n % 5}", n * 10 + k, user_id="batch"))

    def transaction(n: int) -> None:
        with TransactWrite(connection=connection) as write:
            write.save(AuditLog(f"/tx/{n % 5}", n, user_id="tx"))
            write.update(User(f"user{n % USERS}@example.com"), [User.logins.add(1)])

    return {
        "aget": lambda n: User.get(f"user{n % USERS}@example.com"), "aget (miss)": get_miss,
        "asave": lambda n: AuditLog(KEY, 10_000_000 + n, user_id=f"user{n % USERS}").save(),
        "aupdate": lambda n: User(f"user{n % USERS}@example.com").update([User.logins.add(1)]),
        "aquery": lambda _: list(AuditLog.query(KEY, scan_index_forward=False, limit=20)),
        "ascan": lambda n: list(User.scan(User.name == f"name{n % 7}")),
        "acount": lambda _: AuditLog.count(KEY),
        "abatch_get": lambda n: list(User.batch_get([f"user{(n + k) % USERS}@example.com" for k in range(10)])),
        "abatch_write": batch_write, "AsyncTransactWrite": transaction,
        "arefresh": lambda n: User(f"user{n % USERS}@example.com").refresh(),
        "adelete": lambda n: AuditLog(KEY, 10_000_000 + n).delete(),
    }


def fill() -> None:
    for n in range(USERS):
        User(f"user{n}@example.com", name=f"name{n % 7}").save()
    with AuditLog.batch_write() as batch:
        for n in range(200):
            batch.save(AuditLog(KEY, n, user_id=f"user{n % USERS}"))


async def _one_at_a_time(ops: dict[str, Callable[[int], Awaitable[Any]]], repeat: int) -> Steps:
    with Steps() as steps:
        for n in range(repeat):
            for name, op in ops.items():
                OPERATION.set(name)
                await op(n)
    return steps


async def _at_once(ops: dict[str, Callable[[int], Awaitable[Any]]], requests: int, rounds: int,
                   offset: int) -> tuple[Steps, LagProbe, float]:
    names = list(ops)

    async def one(n: int) -> None:
        name = names[n % len(names)]
        OPERATION.set(name)
        await ops[name](offset + n)

    probe = LagProbe()
    with Steps() as steps:
        probe.start()
        began = time.perf_counter()
        for round_number in range(rounds):
            await asyncio.gather(*(one(round_number * requests + n) for n in range(requests)))
        elapsed = time.perf_counter() - began
        await probe.stop()
    return steps, probe, requests * rounds / elapsed


async def _sync_in_coroutines(ops: dict[str, Callable[[int], Any]], requests: int, rounds: int,
                              offset: int) -> tuple[list[float], LagProbe, float]:
    """Each task calls a sync method: the loop is held for the whole call (round trips included)."""
    names = list(ops)
    held: list[float] = []

    async def one(n: int) -> None:
        await asyncio.sleep(0)
        began = time.perf_counter()
        ops[names[n % len(names)]](offset + n)
        held.append(time.perf_counter() - began)

    probe = LagProbe()
    probe.start()
    began = time.perf_counter()
    for round_number in range(rounds):
        await asyncio.gather(*(one(round_number * requests + n) for n in range(requests)))
    elapsed = time.perf_counter() - began
    await probe.stop()
    return held, probe, requests * rounds / elapsed


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Everything the report prints, measured in this process."""
    connection = Connection(region=User.Meta.region, host=User.Meta.host,
                            aws_access_key_id=User.Meta.aws_access_key_id,
                            aws_secret_access_key=User.Meta.aws_secret_access_key)
    ops = operations(connection)
    sync_ops = sync_operations(connection)
    fill()
    with inject_latency(User, args.latency, extra_models=[AuditLog]) as injected:
        async def async_part() -> dict[str, Any]:
            await _one_at_a_time(ops, 1)  # warm-up: clients, connections, botocore's data
            alone = await _one_at_a_time(ops, args.repeat)
            sent, cpu = injected.total_requests, time.process_time()
            burst, probe, rate = await _at_once(ops, args.requests, args.rounds, 1_000)
            sent, cpu = injected.total_requests - sent, time.process_time() - cpu
            profile = ""
            if args.profile:  # one more round, profiled apart: the profiler slows every step
                profiler = cProfile.Profile(time.thread_time)  # CPU time: not the machine's other work
                profiler.enable()
                await _at_once(ops, args.requests, 1, 500_000)
                profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(12)
                profile = text.getvalue()
            await close_connections()
            return {"alone": alone, "burst": burst, "probe": probe, "rate": rate, "profile": profile,
                    "cpu_per_request": cpu / max(1, sent), "requests_per_call": sent / (args.requests * args.rounds)}

        found = asyncio.run(async_part())
        held, sync_probe, sync_rate = asyncio.run(
            _sync_in_coroutines(sync_ops, args.requests, args.rounds, 1_000_000))
    return {**found, "held": held, "sync_probe": sync_probe, "sync_rate": sync_rate}


def run(args: argparse.Namespace, out: Report) -> None:
    if args.quick:
        args.rounds, args.repeat = 1, 3
    with running_dynamodb_local() as server, bound_models(server, User, AuditLog):
        found = measure(args)
    alone, burst = found["alone"], found["burst"]
    ms = 1000.0
    out(f"### One call's hold on the event loop, {args.requests} requests at once "
        f"({args.latency * 1000:.0f} ms per request, {args.rounds} rounds)")
    out()
    out("Steps: what the loop's thread runs of one call between two waits, in CPU time of that thread.")
    out()
    out("| operation | longest step, alone (ms) | longest step, 100 at once (ms) | p99 step, 100 at once (ms) "
        "| steps per call | longest step with a garbage collection in it, 100 at once (ms) |")
    out("|---|---|---|---|---|---|")
    for name in alone.times:
        single, many = alone.times[name], burst.times.get(name, [])
        per_call = (len(single) + len(alone.collected.get(name, []))) / args.repeat
        collected = burst.collected.get(name)
        out(f"| {name} | {max(single) * ms:.2f} | {max(many, default=0) * ms:.2f} | "
            f"{percentile(many, 0.99) * ms:.2f} | {per_call:.0f} | "
            f"{f'{max(collected) * ms:.2f}' if collected else '-'} |")
    longest_alone, longest_burst = alone.longest(), burst.longest()
    ratio = longest_burst / longest_alone if longest_alone else 0.0
    bound_met = ratio <= 3 and longest_burst * ms <= args.bound
    out()
    out("| mode | longest hold of the loop by one call (ms) | loop lag p50 / p99 / max (ms) | requests/s |")
    out("|---|---|---|---|")
    probe, sync_probe = found["probe"], found["sync_probe"]
    out(f"| async methods | {longest_burst * ms:.1f} (one step, CPU) | {percentile(probe.lags, 0.5) * ms:.1f} / "
        f"{percentile(probe.lags, 0.99) * ms:.1f} / {max(probe.lags, default=0) * ms:.1f} | {found['rate']:.0f} |")
    out(f"| sync methods called in async handlers | {max(found['held']) * ms:.1f} (one call, wall) | "
        f"{percentile(sync_probe.lags, 0.5) * ms:.1f} / {percentile(sync_probe.lags, 0.99) * ms:.1f} / "
        f"{max(sync_probe.lags, default=0) * ms:.1f} | {found['sync_rate']:.0f} |")
    out()
    out(f"- bound: no step at {args.requests} at once above 3 x the longest alone and {args.bound:.0f} ms: longest "
        f"{longest_burst * ms:.2f} ms = **{ratio:.2f} x** the longest alone ({longest_alone * ms:.2f} ms); "
        f"median step {statistics.median(burst.every()) * ms:.2f} ms — {'met' if bound_met else 'missed'}")
    out(f"- the loop's lag is the steps that were ready before the probe's: the client's CPU per request "
        f"(build, sign, send, parse; {found['requests_per_call']:.1f} requests per call here) was "
        f"{found['cpu_per_request'] * ms:.2f} ms, so a lag of {percentile(probe.lags, 0.99) * ms:.0f} ms is "
        f"about {percentile(probe.lags, 0.99) / found['cpu_per_request']:.0f} requests' work queued at once")
    pauses = burst.pauses
    out(f"- the garbage collector ran {len(pauses)} times during the 100-at-once rounds, "
        f"{sum(pauses) * ms:.0f} ms in all, the longest pause {max(pauses, default=0) * ms:.1f} ms (a full "
        f"collection: its length grows with the objects the process holds, botocore's models included; "
        f"`gc.freeze()` after an application's start-up leaves those out of it); the steps it fell in are "
        f"in the last column, not in the others")
    if found["profile"]:
        out()
        out(f"Where the loop's CPU goes, {args.requests} at once (cProfile, one more round, by own time):")
        out()
        out("```")
        out(found["profile"].strip())
        out("```")


CHARTS = [
    Chart(
        panels=(
            Bars(category="operation", value_label="longest step of one call (CPU ms of the loop, lower is better)",
                 series=(Series("alone", "longest step, alone (ms)"),
                         Series("100 at once", "longest step, 100 at once (ms)")),
                 targets=(Target("bound: 3 x the longest alone",
                                 lambda rows: 3 * max(row.number("longest step, alone (ms)") for row in rows)),),
                 value_format="{:.2f}", height=2.0),
        ),
    ),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10, help="each operation run alone this many times")
    parser.add_argument("--latency", type=float, default=0.01, help="seconds added to each request")
    parser.add_argument("--bound", type=float, default=10.0, help="the longest step allowed (ms)")
    parser.add_argument("--profile", action="store_true",
                        help="add a profile of one more round of requests at once (cProfile, CPU time; it "
                             "does not follow greenlet switches exactly: read it as a hint)")
    parser.add_argument("--quick", action="store_true")
    return report.main(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())
