"""Benchmark: ``migrate copy`` throughput vs an item-by-item copy, and the ``--workers`` curve.

Copies ``--items`` items on 5 hot keys from a plain PynamoDB table into a ``RandomShards(8)``
table, on the same data in one run:

* item by item, the way a hand-written script does it: ``Source.scan()`` and ``save()`` per
  item, one thread;
* with the toolkit (:func:`pynamodb_sharding.migration.copy`): parallel scan, 25-item
  ``BatchWriteItem`` requests, ``--threads`` requests in flight, checkpoints per page;

both with a simulated round trip of ``--latency`` seconds per request (``inject_latency``) and
without. Then the toolkit with ``--workers`` 1, 2, 4 processes (no injected latency: the
forked workers open their own connections). Every copy is checked: the target holds exactly
``--items`` items.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_migration.py --items 3000 --latency 0.005 --markdown out.md

This machine (2 cores) runs both DynamoDB Local and the client: the toolkit's batching shows
at any latency, while more worker processes mostly compete for the same two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding.migration import JobOptions, copy
from pynamodb_sharding.testing.binding import ModelBinding
from pynamodb_sharding.testing.latency import inject_latency
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Lines, Melt, Series, Target, first
from report import Report

KEYS = [f"sensor-{n}" for n in range(5)]


class Source(Model):
    class Meta:
        table_name = "bench_migration_source"
        max_pool_connections = 32

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()


def _target() -> type[ShardedModel]:
    """A fresh target model class (its own table) per measurement."""

    class Meta:
        table_name = f"bench_migration_target_{uuid.uuid4().hex[:6]}"
        max_pool_connections = 32

    attributes: dict[str, Any] = {
        "Meta": Meta,
        "sensor": UnicodeAttribute(hash_key=True),
        "at": NumberAttribute(range_key=True),
        "value": UnicodeAttribute(),
        "shards": Sharding(RandomShards(8)),
    }
    return type(f"Target{uuid.uuid4().hex[:6]}", (ShardedModel,), attributes)


def _count(model: type[Model]) -> int:
    client = botocore_client(model)
    total, request = 0, {"TableName": model.Meta.table_name, "Select": "COUNT"}
    while True:
        page = client.scan(**request)
        total += page["Count"]
        if "LastEvaluatedKey" not in page:
            return total
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _fill(items: int) -> None:
    with Source.batch_write() as batch:
        for n in range(items):
            batch.save(Source(KEYS[n % len(KEYS)], n, value=f"reading {n:08d} " + "x" * 80))


def item_by_item(target: type[ShardedModel]) -> None:
    """What a hand-written migration script does: scan, then save() each item, one thread."""
    for item in Source.scan():
        target(item.sensor, item.at, value=item.value).save()


def toolkit(target: type[ShardedModel], workers: int, threads: int) -> None:
    options = JobOptions(total_segments=max(4, workers), workers=workers, threads=threads, page_size=500,
                         checkpoint_table=f"bench_migration_checkpoints_{uuid.uuid4().hex[:6]}")
    report = copy(Source, target, options)
    assert report.complete, report
    botocore_client(Source).delete_table(TableName=options.checkpoint_table)


@contextlib.contextmanager
def _latency(target: type[Model], seconds: float) -> Iterator[None]:
    if seconds <= 0:
        yield
        return
    with inject_latency(Source, seconds, extra_models=[target]):
        yield


def measure(binding: ModelBinding, copy_with: Callable[[type[ShardedModel]], None], latency: float,
            items: int) -> float:
    target = _target()
    binding.bind(target)
    with _latency(target, latency):
        started = time.perf_counter()
        copy_with(target)
        seconds = time.perf_counter() - started
    stored = _count(target)
    assert stored == items, f"{stored} items copied, expected {items}"
    target.delete_table()
    return seconds


def run(args: argparse.Namespace, out: Report) -> None:
    if args.quick:
        args.items = 1000
    with running_dynamodb_local() as server, ModelBinding(server) as binding:
        binding.bind(Source)
        _fill(args.items)
        rates: dict[str, list[float]] = {"item by item (scan, save() per item)": [], "toolkit (migrate copy)": []}
        latencies = (0.0, args.latency)
        for latency in latencies:
            baseline = measure(binding, item_by_item, latency, args.items)
            fast = measure(binding, lambda target: toolkit(target, 1, args.threads), latency, args.items)
            rates["item by item (scan, save() per item)"].append(args.items / baseline)
            rates["toolkit (migrate copy)"].append(args.items / fast)
            print(f"round trip {latency * 1000:.0f} ms: item by item {args.items / baseline:.0f} items/s, "
                  f"toolkit {args.items / fast:.0f} items/s, {baseline / fast:.1f}x", flush=True)
        out(f"### Copy of {args.items} items on {len(KEYS)} hot keys into RandomShards(8)")
        out()
        out("| copy | " + " | ".join(f"items/s, {lat * 1000:.0f} ms round trip" for lat in latencies) + " |")
        out("|---|" + "---:|" * len(latencies))
        for name, figures in rates.items():
            out(f"| {name} | " + " | ".join(f"{rate:.0f}" for rate in figures) + " |")
        base, fast_rates = rates["item by item (scan, save() per item)"], rates["toolkit (migrate copy)"]
        out()
        for lat, b, f in zip(latencies, base, fast_rates, strict=True):
            out(f"- toolkit / item by item at {lat * 1000:.0f} ms round trip: {f / b:.1f}x")
        out()
        out(f"Toolkit: 1 process, {args.threads} requests in flight, 25 items per BatchWriteItem, "
            f"a checkpoint per 500-item page. Item by item: Source.scan() and save() per item, one thread.")
        out()
        out("### --workers scaling (no injected latency)")
        out()
        out("| workers | items/s | speedup vs 1 worker |")
        out("|---:|---:|---:|")
        first = None
        for workers in args.workers:
            seconds = measure(binding, lambda target, w=workers: toolkit(target, w, args.threads), 0.0, args.items)
            rate = args.items / seconds
            first = first or rate
            out(f"| {workers} | {rate:.0f} | {rate / first:.2f} |")
        out()
        out("Two cores run DynamoDB Local and every worker: past one worker, processes mostly compete "
            "for them; on a real table each worker adds its own connections and the table's capacity "
            "(or --rate) is the limit.")


#: Items/s of both copies at each round trip, the target on the toolkit's bar; the --workers
#: curve against linear scaling.
CHARTS = [
    Chart(panels=(Bars(
        category="round trip", melt=Melt(r"^items/s, (.+)$", "round trip", "items/s"), split="copy",
        value_label="items copied per second", series=(Series("items/s", "items/s"),),
        targets=(Target("target: the toolkit ≥ 5 x item by item",
                        lambda rows: 5 * first(rows, "copy", "item by item (scan, save() per item)").number("items/s"),
                        per_category=True),),
        value_format="{:,.0f}",
    ),)),
    Chart(panels=(Lines(
        x="workers", x_label="worker processes (--workers)", y_label="items copied per second",
        series=(
            Series("migrate copy", "items/s"),
            Series("linear scaling from 1 worker",
                   lambda row: row.number("workers") * first(row.table.records(), "workers", "1").number("items/s"),
                   kind="reference"),
        ),
    ),)),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=3000, help="items to copy (3000)")
    parser.add_argument("--latency", type=float, default=0.005, help="simulated round trip, s (0.005)")
    parser.add_argument("--threads", type=int, default=4, help="requests in flight per process (4)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker counts (1 2 4)")
    parser.add_argument("--quick", action="store_true", help="1000 items")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
