"""Benchmark: one hot index value, unsharded GSI vs sharded GSI, under the partition-limit simulator.

``--writers`` threads write new items of one ``day`` (each item its own table key, so the table
is never hot) while every physical partition of the ``by_day`` index takes ``--limit`` write
units/s (``simulate_partition_limits(index_write_units=...)``). Prints, per second and over the
run, the acknowledged writes/s of a plain PynamoDB model with an unsharded index, of a
``ShardedModel`` whose index is ``HashedShards(8)`` (suffixed, and ``layout="multi_attribute"``),
and of one whose index is
``DynamicShards(max_shards=8)``, and the table writes refused by the index's back-pressure
(``IndexWriteKeyRangeThroughputExceeded``, every attempt counted, retries included).

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_index.py --duration 10 --writers 64 --limit 20 --markdown out.md

This machine (2 cores) runs both DynamoDB Local and the client and sustains ~250-300 single
writes/s: keep ``8 x limit`` well below that, or the machine is what you measure.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._strategies import HashedShards
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local
from pynamodb_sharding.testing.simulator import simulate_partition_limits

import report
from charts import Bars, Chart, Lines, Row, Series, Target, number_in
from report import Report

DAY = "20160226"
INDEX_REASON = "IndexWriteKeyRangeThroughputExceeded"


class PlainByDay(GlobalSecondaryIndex["PlainLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class PlainLog(Model):
    class Meta:
        table_name = "bench_index_plain"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = PlainByDay()


class HashedByDay(GlobalSecondaryIndex["HashedLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8))


class HashedLog(ShardedModel):
    class Meta:
        table_name = "bench_index_hashed"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = HashedByDay()
    shards = Sharding(HashedShards(1))  # the table is not hot: its own keys need no shards


class MultiByDay(GlobalSecondaryIndex["MultiLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8), layout="multi_attribute")


class MultiLog(ShardedModel):
    class Meta:
        table_name = "bench_index_multi"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = MultiByDay()
    shards = Sharding(HashedShards(1))


class IndexShards(ShardMetadata):
    class Meta:
        table_name = "bench_index_shards"


class DynamicByDay(GlobalSecondaryIndex["DynamicLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(IndexShards, max_shards=8, cooldown=1.0, backoff=(0.05, 0.2), max_attempts=1000))


class DynamicLog(ShardedModel):
    class Meta:
        table_name = "bench_index_dynamic"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = DynamicByDay()
    shards = Sharding(HashedShards(1))


def run(args: argparse.Namespace, out: Report) -> None:
    models: list[tuple[str, type[Model]]] = [
        ("unsharded index", PlainLog), ("HashedShards(8) index", HashedLog),
        ("HashedShards(8) multi-attribute index", MultiLog), ("DynamicShards index", DynamicLog),
    ]
    results: dict[str, dict[str, Any]] = {}
    with running_dynamodb_local() as server, bound_models(server, PlainLog, HashedLog, MultiLog, DynamicLog):
        for name, model in models:
            with simulate_partition_limits(model, write_units=None, index_write_units=args.limit) as simulator:
                start = time.time()
                # Each item its own table key: only the index's one day is hot.
                acks, failures = report.hammer(lambda index, seq, model=model: model(f"/files/{index}/{seq}", seq,
                                                                                      day=DAY),
                                               args.writers, args.duration)
            stored = model.by_day.count(DAY)  # type: ignore[attr-defined]
            results[name] = {
                "start": start, "acks": acks, "failures": failures, "stored": stored,
                "refused": simulator.throttles_by_reason.get(INDEX_REASON, 0),
                "partitions": sorted(key for (table, key) in simulator.write_units if "/index/" in table),
            }
        dynamic_count = DynamicLog.by_day.shards.shard_count(DAY)
    seconds = int(args.duration)
    out(f"# One hot index value, {args.writers} writers, {args.limit:g} write units/s per index partition")
    out()
    out("| second | " + " | ".join(f"{name} writes/s" for name, _ in models) + " |")
    out("|---:|" + "---:|" * len(models))
    series = {name: report.per_second(result["acks"], result["start"], seconds) for name, result in results.items()}
    for second in range(seconds):
        out(f"| {second + 1} | " + " | ".join(str(series[name][second]) for name, _ in models) + " |")
    out()
    out("| index | writes/s | x unsharded | x limit | table writes refused by the index | "
        "failed saves | items in the index | index partition values |")
    out("|---|---:|---:|---:|---:|---:|---:|---:|")
    plain_rate = len(results["unsharded index"]["acks"]) / args.duration
    for name, _ in models:
        result = results[name]
        rate = len(result["acks"]) / args.duration
        out(
            f"| {name} | {rate:.1f} | {rate / max(plain_rate, 1e-9):.1f} | {rate / args.limit:.2f} | "
            f"{result['refused']} | {result['failures']} | {result['stored']} | {len(result['partitions'])} |"
        )
    out()
    out(f"- DynamicShards index count for {DAY} at the end: {dynamic_count}")
    out("- every acknowledged write is in the index: " + ", ".join(
        f"{name} {results[name]['stored']}/{len(results[name]['acks'])}" for name, _ in models))


def _partition_limit(row: Row) -> float:
    return number_in(row.heading, r"([\d.]+) write units/s per index partition")


#: Writes/s per second against 8 index partitions' limit; over the run, with the table
#: writes the index's back-pressure refused beside them.
CHARTS = [
    Chart(panels=(Lines(
        x="second", x_label="second of the run", y_label="acknowledged writes/s", height=1.3,
        series=(
            Series("unsharded index", "unsharded index writes/s"),
            Series("HashedShards(8) index", "HashedShards(8) index writes/s"),
            Series("HashedShards(8) multi-attribute index", "HashedShards(8) multi-attribute index writes/s"),
            Series("DynamicShards index", "DynamicShards index writes/s"),
            Series("target: 8 index partitions x limit", lambda row: 8 * _partition_limit(row), kind="target"),
            Series("one index partition's limit", _partition_limit, kind="reference"),
        ),
    ),)),
    Chart(
        arrange="columns",
        panels=(
            Bars(category="index", value_label="acknowledged writes/s over the run",
                 series=(Series("writes/s", "writes/s"),),
                 targets=(Target("target: 8 index partitions x limit", lambda rows: 8 * _partition_limit(rows[0])),),
                 value_format="{:.1f}"),
            Bars(category="index", value_label="table writes",
                 series=(
                     Series("refused by the index (every attempt)", "table writes refused by the index"),
                     Series("failed after retries", "failed saves"),
                 ),
                 value_format="{:,.0f}"),
        ),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario (10)")
    parser.add_argument("--writers", type=int, default=64, help="writer threads (64)")
    parser.add_argument("--limit", type=float, default=20.0, help="write units/s per index partition (20)")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
