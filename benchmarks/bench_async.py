"""Benchmark: 500 concurrent merged queries, async on one event loop vs sync on the shared pool.

A key with ``--shards`` shards (``HashedShards``, one page of 4 items per shard) is queried
``--queries`` times at once, every request ``--latency`` seconds slower (botocore
``before-send``, :func:`~pynamodb_sharding.testing.inject_latency`, the network round trip):

- **sync**: ``--queries`` request threads (a threaded web server answering that many requests
  at once) each run ``list(Model.query(key))``, whose shard requests run on the process-wide
  fan-out pool (32 threads by default);
- **async**: ``--queries`` tasks on one event loop each run ``[x async for x in
  Model.aquery(key)]``.

Each runs in a fresh process of its own after one warm-up query. Prints, side by side, the
throughput (queries per second over the whole burst), the p50 and p99 latency of a query, the
most threads alive at once, and the peak memory the burst added to the process (peak RSS over
the RSS before it).

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_async.py --queries 500 --shards 16 --markdown out.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, ShardedModel, Sharding
from pynamodb_sharding.testing import inject_latency
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Series, Target, first
from report import Report

KEY = "/page/home"
ITEMS_PER_SHARD = 4


def make_model(shards: int) -> type[ShardedModel]:
    class Visit(ShardedModel):
        class Meta:
            table_name = "bench_async"
            max_pool_connections = 64

        page = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        shards_ = Sharding(HashedShards(shards))

    return Visit


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


class Threads:
    """The most threads alive at once, sampled as each request is sent."""

    def __init__(self) -> None:
        self.peak = threading.active_count()

    def __call__(self, **_: Any) -> None:
        self.peak = max(self.peak, threading.active_count())


def child(mode: str, args: argparse.Namespace) -> dict[str, float]:
    """One mode's burst, in this (fresh) process, on the server ``DYNAMODB_LOCAL_ENDPOINT`` names."""
    model = make_model(args.shards)
    expected = args.shards * ITEMS_PER_SHARD
    with running_dynamodb_local() as server, bound_models(server, model):
        with model.batch_write() as batch:
            for at in range(expected):
                batch.save(model(KEY, at))
        threads = Threads()
        events = model._get_connection().connection.client.meta.events
        events.register("before-send.dynamodb.Query", threads, unique_id="bench-async-threads")
        with inject_latency(model, args.latency, operations=["Query"]):
            if mode == "sync":
                assert len(list(model.query(KEY))) == expected  # warm-up
                times, wall, rss_before = _sync_burst(model, args.queries, expected)
            else:
                times, wall, rss_before = asyncio.run(_async_burst(model, args.queries, expected))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KB on Linux
    return {
        "throughput": args.queries / wall, "p50": percentile(times, 0.50) * 1000,
        "p99": percentile(times, 0.99) * 1000, "threads": threads.peak,
        "memory": max(0, peak - rss_before) / 2**20,
    }


def _sync_burst(model: Any, queries: int, expected: int) -> tuple[list[float], float, int]:
    start_line = threading.Barrier(queries + 1)
    times: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        start_line.wait()
        start = time.perf_counter()
        assert len(list(model.query(KEY))) == expected
        with lock:
            times.append(time.perf_counter() - start)

    rss_before = _rss_bytes()
    with ThreadPoolExecutor(queries) as requests:
        futures = [requests.submit(one) for _ in range(queries)]
        start_line.wait()
        began = time.perf_counter()
        for future in futures:
            future.result()
        wall = time.perf_counter() - began
    return times, wall, rss_before


async def _async_burst(model: Any, queries: int, expected: int) -> tuple[list[float], float, int]:
    from pynamodb_sharding.aio import close_connections

    assert len([item async for item in model.aquery(KEY)]) == expected  # warm-up
    times: list[float] = []

    async def one() -> None:
        start = time.perf_counter()
        assert len([item async for item in model.aquery(KEY)]) == expected
        times.append(time.perf_counter() - start)

    rss_before = _rss_bytes()
    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(queries)))
    wall = time.perf_counter() - began
    await close_connections()
    return times, wall, rss_before


def run(args: argparse.Namespace, out: Report) -> None:
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    results = {}
    with running_dynamodb_local() as server:
        env = {**os.environ, "DYNAMODB_LOCAL_ENDPOINT": server.endpoint}
        for mode in ("sync", "async"):
            command = [sys.executable, __file__, "--child", mode, "--queries", str(args.queries),
                       "--shards", str(args.shards), "--latency", str(args.latency)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{mode} run failed:\n{done.stderr[-3000:]}")
            results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    out(f"# {args.queries} concurrent {args.shards}-shard merged queries, {args.latency * 1000:g} ms per request")
    out()
    out("| mode | throughput (queries/s) | p50 (ms) | p99 (ms) | threads | peak memory (MB) |")
    out("|---|---:|---:|---:|---:|---:|")
    for mode, result in results.items():
        name = "sync (shared pool)" if mode == "sync" else "async (one event loop)"
        out(f"| {name} | {result['throughput']:.1f} | {result['p50']:.0f} | {result['p99']:.0f} | "
            f"{result['threads']:.0f} | {result['memory']:.1f} |")
    out()
    sync, aio = results["sync"], results["async"]
    out(f"- throughput: async / sync = {aio['throughput'] / sync['throughput']:.2f} (target >= 2)")
    out(f"- peak memory: async / sync = {aio['memory'] / max(sync['memory'], 1e-9):.2f} (target <= 0.5)")
    out(f"- p99: async / sync = {aio['p99'] / sync['p99']:.2f}")


#: Throughput and memory side by side, each with its target.
CHARTS = [
    Chart(
        arrange="columns",
        panels=(
            Bars(category="mode", value_label="queries per second (higher is better)",
                 series=(Series("throughput", "throughput (queries/s)"),),
                 targets=(Target("target: async ≥ 2 x sync",
                                 lambda rows: 2 * first(rows, "mode", "sync (shared pool)").number(
                                     "throughput (queries/s)")),),
                 value_format="{:.0f}"),
            Bars(category="mode", value_label="peak memory added by the burst (MB, lower is better)",
                 series=(Series("peak memory", "peak memory (MB)"),),
                 targets=(Target("target: async ≤ 0.5 x sync",
                                 lambda rows: 0.5 * first(rows, "mode", "sync (shared pool)").number(
                                     "peak memory (MB)")),),
                 value_format="{:.1f}"),
        ),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--queries", type=int, default=500, help="concurrent merged queries (500)")
    parser.add_argument("--shards", type=int, default=16, help="shards of the key (16)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (0.05)")
    parser.add_argument("--child", choices=("sync", "async"), help=argparse.SUPPRESS)
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
