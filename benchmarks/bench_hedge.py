"""Benchmark: hedged vs unhedged merged queries when 1 % of shard requests are slow.

A key with ``--shards`` shards (``HashedShards``, one page per shard) is queried ``--queries``
times by a model with ``Sharding(..., hedged_requests=True)`` and by one without, over the same
table. Every request gets ``--latency`` seconds added (the round trip), and ``--slow-share`` of
them ``--slow`` seconds more (botocore ``before-send``, a seeded random choice). Prints, side by
side, the p50 and p99 latency of a query, and the requests sent per query (hedges included).

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_hedge.py --shards 32 --queries 150 --markdown out.md
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, ShardedModel, Sharding
from pynamodb_sharding._hedging import WINDOW
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Melt, Series, Target, first
from report import Report

KEY = "/page/home"


def make_models(shards: int) -> tuple[type[ShardedModel], type[ShardedModel]]:
    class Hedged(ShardedModel):
        class Meta:
            table_name = "bench_hedge"
            max_pool_connections = 2 * shards + 8

        page = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        shards_ = Sharding(HashedShards(shards), hedged_requests=True)

    class Unhedged(ShardedModel):
        class Meta:
            table_name = "bench_hedge"
            max_pool_connections = 2 * shards + 8

        page = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        shards_ = Sharding(HashedShards(shards))

    return Hedged, Unhedged


class Delays:
    """``before-send``: every Query waits ``latency``; a seeded ``share`` of them ``slow`` more."""

    def __init__(self, latency: float, slow: float, share: float, seed: int = 7) -> None:
        self.latency, self.slow, self.share = latency, slow, share
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.requests = 0

    def __call__(self, **_: Any) -> None:
        with self._lock:
            self.requests += 1
            slow = self._random.random() < self.share
        time.sleep(self.latency + (self.slow if slow else 0.0))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def measure(model: Any, args: argparse.Namespace, warmup: int) -> dict[str, float]:
    delays = Delays(args.latency, args.slow, args.slow_share)
    events = model._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", delays, unique_id="bench-hedge-delays")
    try:
        for _ in range(warmup):
            list(model.query(KEY))
        delays.requests = 0
        times = []
        for _ in range(args.queries):
            start = time.perf_counter()
            items = list(model.query(KEY))
            times.append(time.perf_counter() - start)
            assert len(items) == args.shards * 4
        time.sleep(args.slow + args.latency)  # discarded answers still in flight are counted too
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="bench-hedge-delays")
    return {
        "p50": percentile(times, 0.50) * 1000, "p99": percentile(times, 0.99) * 1000,
        "requests": delays.requests / args.queries,
    }


def run(args: argparse.Namespace, out: Report) -> None:
    hedged_model, unhedged_model = make_models(args.shards)
    with running_dynamodb_local() as server, bound_models(server, hedged_model, unhedged_model):
        with hedged_model.batch_write() as batch:
            for at in range(args.shards * 4):
                batch.save(hedged_model(KEY, at))
        # Warm-up: enough queries for the hedged model's latency window (1,024 requests) to
        # hold the steady state, not the cold start; the same for both models.
        warmup = -(-WINDOW // args.shards) + 5
        unhedged = measure(unhedged_model, args, warmup=warmup)
        hedged = measure(hedged_model, args, warmup=warmup)
    out(f"# {args.shards}-shard merged query, {args.latency * 1000:g} ms per request, "
        f"{args.slow_share * 100:g} % of requests {args.slow * 1000:g} ms slower")
    out()
    out("| queries | p50 (ms) | p99 (ms) | requests per query |")
    out("|---|---:|---:|---:|")
    for name, result in (("unhedged", unhedged), ("hedged", hedged)):
        out(f"| {name} | {result['p50']:.1f} | {result['p99']:.1f} | {result['requests']:.2f} |")
    out()
    out(f"- p99: hedged / unhedged = {hedged['p99'] / unhedged['p99']:.2f} (target <= 0.5)")
    extra = hedged["requests"] / unhedged["requests"] - 1
    out(f"- extra requests: {extra * 100:.1f} % (target <= 5 %)")


#: p50 and p99 side by side for both models, the p99 target on the hedged bar's group; and
#: the requests per query against their target.
CHARTS = [
    Chart(
        arrange="columns",
        panels=(
            Bars(category="percentile", melt=Melt(r"^(p\d+) \(ms\)$", "percentile", "latency (ms)"),
                 split="queries", value_label="latency of a query (ms)",
                 series=(Series("latency", "latency (ms)"),),
                 targets=(Target("target: hedged p99 ≤ 0.5 x unhedged p99",
                                 lambda rows: 0.5 * first(rows, "queries", "unhedged").number("latency (ms)")
                                 if rows[0]["percentile"] == "p99" else None,
                                 per_category=True),),
                 value_format="{:.1f}"),
            Bars(category="queries", value_label="requests per query (hedges included)",
                 series=(Series("requests per query", "requests per query"),),
                 targets=(Target("target: requests ≤ 1.05 x unhedged",
                                 lambda rows: 1.05 * first(rows, "queries", "unhedged").number("requests per query")),),
                 value_format="{:.2f}"),
        ),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shards", type=int, default=32, help="shards of the key (32)")
    parser.add_argument("--queries", type=int, default=150, help="queries measured per model (150)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (0.05)")
    parser.add_argument("--slow", type=float, default=0.2, help="seconds more for the slow requests (0.2)")
    parser.add_argument("--slow-share", type=float, default=0.01, help="share of slow requests (0.01)")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
