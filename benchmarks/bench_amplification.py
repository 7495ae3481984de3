"""Benchmark: items and read units a page of ``limit=L`` costs, merged over N shards vs plain.

``--keys`` keys each hold ``--items`` items spread at random over N shards (``RandomShards(N)``),
and the same items under keys of a plain PynamoDB model, for small (200 B) and large (2 KB)
items. For several L and N, a first page of ``limit=L`` of every key is read three ways, side by
side: the plain query; the merged query as it is now (each shard is first asked for 1.5 x its
share of L, or below 5 items per shard for as many more as fit in the read units that costs
anyway, and only a shard whose next item is needed is read again); and the merged query as it
was (``page_size=L``: every shard asked for L). Prints the mean items read per page
(``ScannedCount``), the mean read units DynamoDB reports (``ReturnConsumedCapacity``, requested
by a botocore hook) and the mean latency of a page at ``--latency`` seconds per request, with the mean requests a
merged page sent (N: one round trip; more: shards read again).

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_amplification.py --markdown out.md
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.latency import inject_latency
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Chart, Lines, Series
from report import Report

LIMITS = (20, 100)
SHARDS = (4, 10, 16)
SIZES = (200, 2000)


def plain_model(size: int) -> type[Model]:
    class PlainLog(Model):
        class Meta:
            table_name = f"bench_amp_plain_{size}"

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()

    return PlainLog


def sharded_model(shards: int, size: int, page_reads: Any = "one_round_trip") -> type[ShardedModel]:
    class ShardedLog(ShardedModel):
        class Meta:
            table_name = f"bench_amp_{shards}_{size}"  # both ways read the same table
            max_pool_connections = 32

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards_ = Sharding(RandomShards(shards), page_reads=page_reads)

    ShardedLog.__name__ = f"ShardedLog{shards}x{size}{page_reads}"
    return ShardedLog


def key(n: int) -> str:
    return f"/shared/{n}.txt"


@contextmanager
def consumed(model: type[Model]) -> Iterator[list[float]]:
    """Ask every Query of ``model``'s client for ``ConsumedCapacity`` and collect the units."""
    units: list[float] = []
    lock = threading.Lock()

    def ask(params: dict[str, Any], **_: Any) -> None:
        params["ReturnConsumedCapacity"] = "TOTAL"

    def collect(parsed: dict[str, Any], **_: Any) -> None:
        with lock:
            units.append(float(parsed.get("ConsumedCapacity", {}).get("CapacityUnits", 0.0)))

    events = model._get_connection().connection.client.meta.events
    events.register("provide-client-params.dynamodb.Query", ask, unique_id="bench-amp-ask")
    events.register("after-call.dynamodb.Query", collect, unique_id="bench-amp-collect")
    try:
        yield units
    finally:
        events.unregister("provide-client-params.dynamodb.Query", unique_id="bench-amp-ask")
        events.unregister("after-call.dynamodb.Query", unique_id="bench-amp-collect")


def first_pages(model: Any, limit: int, keys: int, **kwargs: Any) -> tuple[float, float]:
    """(mean items read, mean read units) of a first page of ``limit`` items of each key."""
    scanned, units_per_page = [], []
    for n in range(keys):
        with consumed(model) as units:
            results = model.query(key(n), limit=limit, **kwargs)
            assert len(list(results)) == limit
            scanned.append(results.page_iter.total_scanned_count)
        units_per_page.append(sum(units))
    return statistics.mean(scanned), statistics.mean(units_per_page)


def latency_ms(model: Any, limit: int, seconds: float, repeat: int, keys: int, **kwargs: Any) -> tuple[float, float]:
    """(mean latency in ms, mean requests) of a first page of each key, ``repeat`` times."""
    times = []
    with inject_latency(model, seconds) as injected:
        for _ in range(repeat):
            for n in range(keys):
                start = time.perf_counter()
                list(model.query(key(n), limit=limit, **kwargs))
                times.append(time.perf_counter() - start)
    return statistics.mean(times) * 1000, injected.requests.get("Query", 0) / len(times)


def run(args: argparse.Namespace, out: Report) -> None:
    plains = {size: plain_model(size) for size in SIZES}
    models = {(shards, size): sharded_model(shards, size) for shards in SHARDS for size in SIZES}
    leans = {(shards, size): sharded_model(shards, size, "fewest_items") for shards in SHARDS for size in SIZES}
    rows = []
    with running_dynamodb_local() as server, bound_models(server, *plains.values(), *models.values(),
                                                           *leans.values()):
        writes = [(plain, size) for size, plain in plains.items()] + [(m, size) for (_n, size), m in models.items()]
        for model, size in writes:
            body = "x" * size
            with model.batch_write() as batch:
                for n in range(args.keys):
                    for at in range(args.items):
                        batch.save(model(key(n), at, body=body))
        for size in SIZES:
            for limit in LIMITS:
                plain = first_pages(plains[size], limit, args.keys)
                plain_ms = latency_ms(plains[size], limit, args.latency, args.repeat, args.keys)
                for shards in SHARDS:
                    model, lean = models[(shards, size)], leans[(shards, size)]
                    ways = {"one": (model, {}), "lean": (lean, {}), "before": (model, {"page_size": limit})}
                    reads = {name: first_pages(m, limit, args.keys, **kw) for name, (m, kw) in ways.items()}
                    times = {name: latency_ms(m, limit, args.latency, args.repeat, args.keys, **kw)
                             for name, (m, kw) in ways.items()}
                    rows.append((size, limit, shards, plain, plain_ms, reads, times))
    out(f"# Items read by a first page of limit L over N shards ({args.keys} keys of {args.items} items, "
        f"{args.latency * 1000:g} ms per request)")
    out()
    out("one round trip: `Sharding(page_reads=\"one_round_trip\")`, the default; fewest items: "
        "`page_reads=\"fewest_items\"`; before: every shard asked for L (`page_size=L`).")
    out()
    out("| item | L | N | plain items read | one round trip: items read | fewest items: items read | "
        "target 1.5 x L + N | one round trip | fewest items | before: items read | plain read units | "
        "one round trip: read units | fewest items: read units | before: read units |")
    out("|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for size, limit, shards, plain, _plain_ms, reads, _times in rows:
        target = 1.5 * limit + shards
        one, lean, before = reads["one"], reads["lean"], reads["before"]
        out(f"| {size} B | {limit} | {shards} | {plain[0]:g} | {one[0]:g} | {lean[0]:g} | {target:g} | "
            f"{'met' if one[0] <= target else 'missed'} | {'met' if lean[0] <= target else 'missed'} | "
            f"{before[0]:g} | {plain[1]:g} | {one[1]:g} | {lean[1]:g} | {before[1]:g} |")
    out()
    out("| item | L | N | plain page (ms) | one round trip: page (ms) | fewest items: page (ms) | "
        "before: page (ms) | one round trip / before | fewest items / before | target <= 1.3 | one round trip | "
        "fewest items | one round trip: requests | fewest items: requests |")
    out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|")
    for size, limit, shards, _plain, plain_ms, _reads, times in rows:
        one, lean, before = times["one"], times["lean"], times["before"]
        verdicts = ["met" if way[0] / before[0] <= 1.3 else "missed" for way in (one, lean)]
        out(f"| {size} B | {limit} | {shards} | {plain_ms[0]:.1f} | {one[0]:.1f} | {lean[0]:.1f} | {before[0]:.1f} | "
            f"{one[0] / before[0]:.2f} | {lean[0] / before[0]:.2f} | 1.3 | "
            f"{verdicts[0]} | {verdicts[1]} | "
            f"{one[1]:.1f} | {lean[1]:.1f} |")


def _latency_title(heading: str) -> str:
    return "Latency of that first page, relative to every shard asked for L " + heading[heading.find("("):]


_FACETS = {"item": "{} items", "L": "limit L = {}"}

#: Items read by the page against its target, and its latency against asking every shard for
#: L, for each item size (down) and limit (across).
CHARTS = [
    Chart(
        facets=("item", "L"),
        facet_titles=_FACETS,
        panels=(Lines(
            x="N", x_label="shards (N)", y_label="items read (mean per page)",
            series=(
                Series("every shard asked for L (before)", "before: items read"),
                Series("one round trip (default)", "one round trip: items read"),
                Series("fewest items", "fewest items: items read"),
                Series("plain query of one key", "plain items read", kind="reference"),
                Series("target: 1.5 x L + N", "target 1.5 x L + N", kind="target"),
            ),
        ),),
    ),
    Chart(
        facets=("item", "L"),
        facet_titles=_FACETS,
        title=_latency_title,
        panels=(Lines(
            x="N", x_label="shards (N)", y_label="page latency, x before",
            series=(
                Series("every shard asked for L (before)", lambda row: 1.0),
                Series("one round trip (default)", "one round trip / before"),
                Series("fewest items", "fewest items / before"),
                Series("target: ≤ 1.3 x", "target <= 1.3", kind="target"),
            ),
        ),),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=300, help="items of each key (300)")
    parser.add_argument("--keys", type=int, default=20, help="keys read (20)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (0.05)")
    parser.add_argument("--repeat", type=int, default=1, help="pages timed per key and case (1)")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
