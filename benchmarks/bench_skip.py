"""Benchmark: queries of data older than a growth, with and without ``written_at`` skipping.

A ``DynamicShards`` key holds ``--items`` items written while it had one shard, then grows
1 -> 64 shards. Queries of the old data (a range ending before the growth) are sent by a model
that declares ``Sharding(..., written_at="accessed_at")`` and by one over the same table that
does not, at ``--latency`` seconds added to every request (botocore ``before-send``). Prints,
side by side, the requests per query (shard queries and metadata reads) and the latency of a
query, median of ``--repeat``.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_skip.py --items 200 --latency 0.05 --markdown out.md
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.latency import inject_latency
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Series, Target
from report import Report

KEY = "/shared/firetvGen2.txt"
FEBRUARY = 1_456_444_800  # 2016-02-26


class SkipBenchShards(ShardMetadata):
    class Meta:
        table_name = "bench_skip_shards"


class Skipping(ShardedModel):
    class Meta:
        table_name = "bench_skip"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(SkipBenchShards, max_shards=64, cooldown=0), written_at="accessed_at")


class Everything(ShardedModel):
    class Meta:
        table_name = "bench_skip"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(SkipBenchShards, max_shards=64, cooldown=0))


def measure(model: Any, upper: int, latency: float, repeat: int) -> dict[str, float]:
    """Median latency and the requests of a query of ``KEY`` up to ``upper``."""
    times: list[float] = []
    queries = metadata = 0
    items: list[Any] = []
    for _ in range(repeat):
        with inject_latency(model, latency, record_bodies=True) as injector:
            start = time.perf_counter()
            items = list(model.query(KEY, model.accessed_at < upper))
            times.append(time.perf_counter() - start)
        queries = len(injector.bodies("Query"))
        metadata = len(injector.bodies("GetItem"))
    return {"ms": statistics.median(times) * 1000, "queries": queries, "metadata": metadata, "items": len(items)}


def run(args: argparse.Namespace, out: Report) -> None:
    with running_dynamodb_local() as server, bound_models(server, Skipping, Everything):
        with Skipping.batch_write() as batch:
            for n in range(args.items):
                batch.save(Skipping(KEY, FEBRUARY + n))
        while Skipping.shards.shard_count(KEY) < 64:
            Skipping.shards.grow(KEY)
        upper = FEBRUARY + 86_400
        results = {
            "every shard (no written_at)": measure(Everything, upper, args.latency, args.repeat),
            "written_at: skips shards added later": measure(Skipping, upper, args.latency, args.repeat),
        }
    out(f"# A query of data older than a 1 -> 64 growth, {args.items} items, "
        f"{args.latency * 1000:g} ms per request")
    out()
    out("| query | shard queries | metadata reads | items | median latency (ms) |")
    out("|---|---:|---:|---:|---:|")
    for name, result in results.items():
        out(f"| {name} | {result['queries']:.0f} | {result['metadata']:.0f} | {result['items']:.0f} | "
            f"{result['ms']:.1f} |")
    plain, skip = results["every shard (no written_at)"], results["written_at: skips shards added later"]
    out()
    out(f"- requests per query: {skip['queries']:.0f} with written_at vs {plain['queries']:.0f} without "
        f"(target: 1 instead of 64)")
    out(f"- latency: {skip['ms'] / plain['ms']:.2f} x the query of every shard")


#: Requests per query against the target of 1, and the latency they cost, side by side.
CHARTS = [
    Chart(
        arrange="columns",
        panels=(
            Bars(category="query", value_label="Query requests per query",
                 series=(Series("shard queries", "shard queries"),),
                 targets=(Target("target: 1 request", 1.0),), value_format="{:,.0f}"),
            Bars(category="query", value_label="median latency of the query (ms)",
                 series=(Series("median latency", "median latency (ms)"),), value_format="{:.1f} ms"),
        ),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=200, help="items written before the growth (200)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (0.05)")
    parser.add_argument("--repeat", type=int, default=5, help="queries measured per model (5)")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
