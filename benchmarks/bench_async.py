"""Benchmark: 500 concurrent merged queries, async on one event loop vs sync on the shared pool.

A key with ``--shards`` shards (``HashedShards``, one page of 4 items per shard) is queried
``--queries`` times at once, every request answered after ``--latency`` seconds (the round trip
to DynamoDB):

- **sync**: ``--queries`` request threads (a threaded web server answering that many requests
  at once) each run ``list(Model.query(key))``, whose shard requests run on the process-wide
  fan-out pool (32 threads by default);
- **async**: ``--queries`` tasks on one event loop each run ``[x async for x in
  Model.aquery(key)]``.

Each runs in a fresh process of its own after one warm-up query, ``--rounds`` times (sync, then
async, then sync again...: a machine whose CPU is shared, or stolen by its hypervisor, varies
from one minute to the next, and each round's pair shares its minute). Prints, side by side, the
median of each figure over the rounds and each round's throughput ratio: the
throughput (queries per second over the whole burst), the p50 and p99 latency of a query, the
most threads alive at once, the peak memory the burst added to the process (peak RSS during
the burst over the RSS before it; the kernel's peak is reset as the burst starts, so a higher
peak of the process's start-up is not counted), and the client CPU time per query (the
process's, over the burst), with the cores each process got (throughput x CPU per query: on a
shared machine a process of one thread gets less of a busy CPU than one of 533 threads).

The shards' pages are read from DynamoDB Local once, then served by a small HTTP server of
this benchmark (a process of its own, on 127.0.0.1) that answers each Query with its recorded
page after ``--latency`` seconds. Both clients send real HTTP requests, built, signed and parsed
by botocore; what is measured is the client, not DynamoDB Local, whose own cost per request on
a small shared machine would cap both modes alike (8,000 requests a burst).

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_async.py --queries 500 --shards 16 --markdown out.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, ShardedModel, Sharding, observes_only
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


def _start_peak() -> int:
    """The RSS now, with the kernel's peak RSS reset to it (Linux 4.0+): the peak read after
    the burst is the burst's, not the start-up's (botocore loading its service model briefly
    takes more than a whole async burst holds)."""
    rss = _rss_bytes()
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:  # not Linux, or not allowed: the process's peak since it started
        pass
    return rss


def _peak_bytes() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KB on Linux


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
    """One mode's burst, in this (fresh) process, against the answering server at ``--endpoint``."""
    model = make_model(args.shards)
    model.Meta.host = args.endpoint
    model.Meta.region = "us-east-1"
    model.Meta.aws_access_key_id = model.Meta.aws_secret_access_key = "bench"
    expected = args.shards * ITEMS_PER_SHARD
    threads = Threads()
    events = model._get_connection().connection.client.meta.events
    # It only observes: the shard requests keep their fast path (pynamodb_sharding.observes_only).
    events.register("before-send.dynamodb.Query", observes_only(threads), unique_id="bench-async-threads")
    if mode == "sync":
        assert len(list(model.query(KEY))) == expected  # warm-up
        times, wall, rss_before, cpu = _sync_burst(model, args.queries, expected)
    else:
        times, wall, rss_before, cpu = asyncio.run(_async_burst(model, args.queries, expected))
    peak = _peak_bytes()
    return {
        "throughput": args.queries / wall, "p50": percentile(times, 0.50) * 1000,
        "p99": percentile(times, 0.99) * 1000, "threads": threads.peak,
        "memory": max(0, peak - rss_before) / 2**20, "cpu": cpu / args.queries * 1000,
    }


def _sync_burst(model: Any, queries: int, expected: int) -> tuple[list[float], float, int, float]:
    start_line = threading.Barrier(queries + 1)
    times: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        start_line.wait()
        start = time.perf_counter()
        assert len(list(model.query(KEY))) == expected
        with lock:
            times.append(time.perf_counter() - start)

    rss_before = _start_peak()
    with ThreadPoolExecutor(queries) as requests:
        futures = [requests.submit(one) for _ in range(queries)]
        start_line.wait()
        began, cpu = time.perf_counter(), time.process_time()
        for future in futures:
            future.result()
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    return times, wall, rss_before, cpu


async def _async_burst(model: Any, queries: int, expected: int) -> tuple[list[float], float, int, float]:
    from pynamodb_sharding.aio import close_connections

    assert len([item async for item in model.aquery(KEY)]) == expected  # warm-up
    times: list[float] = []

    async def one() -> None:
        start = time.perf_counter()
        assert len([item async for item in model.aquery(KEY)]) == expected
        times.append(time.perf_counter() - start)

    rss_before = _start_peak()
    began, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(queries)))
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    await close_connections()
    return times, wall, rss_before, cpu


def run(args: argparse.Namespace, out: Report) -> None:
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    if args.serve:
        serve(args)
        return
    if args.quick:
        args.queries = min(args.queries, 100)
        args.rounds = 1
    answers = record_pages(args.shards)
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as scratch:
        pages = Path(scratch) / "pages.json"
        pages.write_text(json.dumps(answers))
        port_file = Path(scratch) / "port"
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(pages), "--port-file", str(port_file),
                                   "--latency", str(args.latency)])
        try:
            while not port_file.exists() or not port_file.read_text():
                if server.poll() is not None:
                    raise SystemExit("the answering server did not start")
                time.sleep(0.05)
            endpoint = f"http://127.0.0.1:{port_file.read_text()}"
            for _ in range(args.rounds):
                pair = {}
                for mode in ("sync", "async"):
                    command = [sys.executable, __file__, "--child", mode, "--queries", str(args.queries),
                               "--shards", str(args.shards), "--endpoint", endpoint]
                    done = subprocess.run(command, capture_output=True, text=True, check=False)
                    if done.returncode != 0:
                        raise SystemExit(f"{mode} run failed:\n{done.stderr[-3000:]}")
                    pair[mode] = json.loads(done.stdout.strip().splitlines()[-1])
                rounds.append(pair)
        finally:
            server.terminate()
            server.wait()
    results = {mode: {figure: statistics.median(pair[mode][figure] for pair in rounds) for figure in rounds[0][mode]}
               for mode in ("sync", "async")}
    out(f"# {args.queries} concurrent {args.shards}-shard merged queries, {args.latency * 1000:g} ms per request")
    out()
    out(f"Medians of {len(rounds)} rounds, each a sync burst then an async one, every burst in a fresh process.")
    out()
    out("| mode | throughput (queries/s) | p50 (ms) | p99 (ms) | threads | peak memory (MB) | CPU per query (ms) |")
    out("|---|---:|---:|---:|---:|---:|---:|")
    for mode, result in results.items():
        name = "sync (shared pool)" if mode == "sync" else "async (one event loop)"
        out(f"| {name} | {result['throughput']:.1f} | {result['p50']:.0f} | {result['p99']:.0f} | "
            f"{result['threads']:.0f} | {result['memory']:.1f} | {result['cpu']:.1f} |")
    out()
    sync, aio = results["sync"], results["async"]
    ratios = [pair["async"]["throughput"] / pair["sync"]["throughput"] for pair in rounds]
    out(f"- throughput: async / sync = {aio['throughput'] / sync['throughput']:.2f} (target >= 2); "
        f"each round's: {', '.join(f'{ratio:.2f}' for ratio in ratios)}")
    out(f"- peak memory: async / sync = {aio['memory'] / max(sync['memory'], 1e-9):.2f} (target <= 0.5)")
    out(f"- p99: async / sync = {aio['p99'] / sync['p99']:.2f}")
    out(f"- client CPU per query: async / sync = {aio['cpu'] / sync['cpu']:.2f} (the burst is CPU-bound when "
        f"throughput x CPU per query nears the cores the process gets)")
    out(f"- cores the process got over its burst (throughput x CPU per query): sync "
        f"{sync['throughput'] * sync['cpu'] / 1000:.2f}, async {aio['throughput'] * aio['cpu'] / 1000:.2f}")


def record_pages(shards: int) -> dict[str, str]:
    """Each shard's Query response body as DynamoDB Local sends it, by physical key."""
    model = make_model(shards)
    with running_dynamodb_local() as server, bound_models(server, model):
        with model.batch_write() as batch:
            for at in range(shards * ITEMS_PER_SHARD):
                batch.save(model(KEY, at))
        with inject_latency(model, 0, operations=(), record_bodies=True):
            client = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name=server.region,
                                  aws_access_key_id=server.aws_access_key_id,
                                  aws_secret_access_key=server.aws_secret_access_key)
            answers = {}
            for shard in range(1, shards + 1):
                physical = model.shards_.physical_key(KEY, shard)
                page = client.query(TableName=model.Meta.table_name, KeyConditionExpression="#k = :k",
                                    ExpressionAttributeNames={"#k": "page"},
                                    ExpressionAttributeValues={":k": {"S": physical}})
                page.pop("ResponseMetadata")
                answers[physical] = json.dumps(page)
    return answers


def serve(args: argparse.Namespace) -> None:
    """Answer each Query with the recorded page of its physical key after ``--latency`` seconds."""
    from aiohttp import web

    answers: dict[str, str] = json.loads(Path(args.serve).read_text())

    async def answer(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        values = [value["S"] for value in body.get("ExpressionAttributeValues", {}).values() if "S" in value]
        page = next((answers[value] for value in values if value in answers), None)
        await asyncio.sleep(args.latency)
        if page is None:
            return web.Response(status=400, content_type="application/x-amz-json-1.0", text=json.dumps({
                "__type": "com.amazonaws.dynamodb.v20120810#ValidationException", "message": "unknown key"}))
        return web.Response(content_type="application/x-amz-json-1.0", text=page)

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/", answer)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = runner.addresses[0][1]
        Path(args.port_file).write_text(str(port))
        await asyncio.Event().wait()

    asyncio.run(main())


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
    parser.add_argument("--rounds", type=int, default=5, help="sync and async bursts, each (5)")
    parser.add_argument("--quick", action="store_true", help="100 queries and 1 round")
    parser.add_argument("--child", choices=("sync", "async"), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port-file", help=argparse.SUPPRESS)
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
