"""Benchmark: one hot key read at a fixed rate, with 0, 1, 2 and 4 read replicas.

A key of ``--shards`` shards (``RandomShards``) is queried by ``--threads`` threads at a fixed
offered load (``--load`` queries a second) under the partition-limit simulator: every partition
of the table, and of each replica, serves ``--read-units`` read units a second, an eventually
consistent shard request costs half a unit, so one copy of the key serves ``2 x read-units``
queries a second. The load (160) is above what 5 copies serve (100), so each run shows its
capacity.

Time is the simulator's injected clock, advanced by ``1 / load`` seconds per query started, so
the figures are DynamoDB's partition arithmetic, not this machine's speed: the load is offered
for ``--seconds`` simulated seconds after ``--warmup`` seconds that drain the buckets' one
second of burst. ``max_retry_attempts = 0``: a request throttled on every copy fails its query
at once (a query not served).

One shard by default: a merged query of several shards that fails one shard's request has
spent the other shards' reads for nothing, so past capacity the queries served fall below what
the partitions serve (the table alone serves fewer than its 20 queries a second), which would
measure that waste rather than the replicas' capacity. ``--shards 2`` shows it.

Prints, per replica count: queries served per (simulated) second, queries failed, throttled
requests out of those sent, and the served rate per copy against the table alone's. Every
served query's answer is checked against the key's items.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_hot_reads.py --markdown out.md
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local
from pynamodb_sharding.testing.simulator import LoadClock, simulate_partition_limits

import report
from charts import Bars, Chart, Series, Target, first
from report import Report

KEY = "/feed/launch"
REPLICA_COUNTS = (0, 1, 2, 4)


def make_model(replicas: int, shards: int, threads: int) -> type[ShardedModel]:
    class Feed(ShardedModel):
        class Meta:
            table_name = f"bench_hot_reads_{replicas}"
            max_retry_attempts = 0
            max_pool_connections = 2 * threads * shards + 8

        feed_id = UnicodeAttribute(hash_key=True)
        posted_at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards_ = Sharding(RandomShards(shards), read_replicas=replicas)

    Feed.__name__ = f"Feed{replicas}"
    return Feed




def offer(model: Any, clock: LoadClock, queries: int, threads: int, items: int) -> tuple[int, int]:
    """``queries`` queries of the key by ``threads`` threads; returns (served, failed)."""
    served = failed = 0
    left = queries
    lock = threading.Lock()

    def reader() -> None:
        nonlocal served, failed, left
        while True:
            with lock:
                if left == 0:
                    return
                left -= 1
            clock.tick()
            try:
                answer = [int(item.posted_at) for item in model.query(KEY)]
            except QueryError:
                with lock:
                    failed += 1
                continue
            if answer != list(range(items)):
                msg = f"{model.__name__}: a query returned {answer}, not the key's {items} items"
                raise AssertionError(msg)
            with lock:
                served += 1

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return served, failed


def measure(model: Any, args: argparse.Namespace) -> dict[str, float]:
    clock = LoadClock(args.load)
    with simulate_partition_limits(model, read_units=args.read_units, write_units=None,
                                   index_read_units=args.read_units, clock=clock) as simulator:
        offer(model, clock, int(args.warmup * args.load), args.threads, args.items)  # drain the burst
        sent_before = simulator.requests.get("Query", 0)
        throttled_before = sum(simulator.throttles.values())
        started = clock()
        wall = time.perf_counter()
        served, failed = offer(model, clock, int(args.seconds * args.load), args.threads, args.items)
        seconds = clock() - started
        wall = time.perf_counter() - wall
        sent = simulator.requests.get("Query", 0) - sent_before
        throttled = sum(simulator.throttles.values()) - throttled_before
    return {"served": served / seconds, "failed": failed, "sent": sent, "throttled": throttled, "wall": wall}


def run(args: argparse.Namespace, out: Report) -> None:
    models = {replicas: make_model(replicas, args.shards, args.threads) for replicas in REPLICA_COUNTS}
    results: dict[int, dict[str, float]] = {}
    with running_dynamodb_local() as server, bound_models(server, *models.values()):
        for model in models.values():
            with model.batch_write() as batch:
                for n in range(args.items):
                    batch.save(model(KEY, n, body=f"post {n}"))
        for replicas, model in models.items():
            results[replicas] = measure(model, args)
    per_copy = 2 * args.read_units
    shards = f"{args.shards} shard{'s' if args.shards != 1 else ''}"
    out(f"# One key of {shards} read at {args.load:g} queries/s by {args.threads} threads, "
        f"{args.read_units:g} read units/s per partition")
    out()
    out(f"One copy serves {per_copy:g} queries/s ({args.read_units:g} units/s per partition, half a unit per "
        f"eventually consistent shard request); {args.seconds:g} simulated seconds after {args.warmup:g} of warm-up.")
    out()
    out("| replicas | copies | served (queries/s) | failed queries | throttled requests | "
        "served per copy / table alone | wall seconds |")
    out("|---:|---:|---:|---:|---:|---:|---:|")
    alone = results[0]["served"]
    for replicas, result in results.items():
        copies = 1 + replicas
        share = result["throttled"] / max(1.0, result["sent"])
        out(f"| {replicas} | {copies} | {result['served']:.1f} | {result['failed']:.0f} | "
            f"{result['throttled']:.0f} of {result['sent']:.0f} ({share * 100:.1f} %) | "
            f"{result['served'] / copies / alone:.2f} | {result['wall']:.1f} |")
    out()
    worst = min(result["served"] / (1 + replicas) / alone for replicas, result in results.items())
    out(f"- capacity per copy, worst of 1, 2, 4 replicas: {worst:.2f} x the table alone's (target >= 0.9)")
    out(f"- offered load: {args.load:g} queries/s, {args.load / per_copy:.1f} x one copy's capacity")


#: Queries served per replica count, against the target (1 + replicas) x 0.9 x the table alone's.
CHARTS = [
    Chart(
        panels=(
            Bars(category="replicas",
                 value_label="queries served per second (simulated partition limits)",
                 series=(Series("served", "served (queries/s)"),),
                 targets=(Target("target: >= 0.9 x (1 + replicas) x the table alone",
                                 lambda rows: 0.9 * (1 + float(rows[0]["replicas"]))
                                 * first(rows[0].table.records(), "replicas", "0").number("served (queries/s)"),
                                 per_category=True),),
                 value_format="{:.1f}"),
        ),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shards", type=int, default=1, help="shards of the key (1)")
    parser.add_argument("--threads", type=int, default=8, help="reader threads (8)")
    parser.add_argument("--read-units", type=float, default=10.0, help="read units/s per partition (10)")
    parser.add_argument("--load", type=float, default=160.0, help="offered queries per simulated second (160)")
    parser.add_argument("--seconds", type=float, default=8.0, help="simulated seconds measured (8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="simulated seconds of warm-up (2)")
    parser.add_argument("--items", type=int, default=6, help="items of the key (6)")
    parser.add_argument("--quick", action="store_true", help="4 simulated seconds instead of 8")
    return report.main(parser, _run_quick_aware, argv)


def _run_quick_aware(args: argparse.Namespace, out: Report) -> None:
    if args.quick:
        args.seconds = 4.0
    run(args, out)


if __name__ == "__main__":
    raise SystemExit(main())
