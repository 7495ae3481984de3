"""Benchmark: what ``DynamicShards`` costs per write and per query, cold keys, warm keys, grown keys.

Counts the requests botocore sends (data table and metadata table apart) for: ``--keys`` writes
to as many new keys (cold: no metadata item), ``--writes`` writes to one key written before
(warm), and ``--writes`` writes to a key grown to 4 shards; then the requests of a merged query
of each kind of key, and the median latency of those queries at ``--rtt`` seconds of injected
round-trip time against a plain PynamoDB ``Model`` query (the metadata read of a merged query
runs while the shards this process last saw are queried; every query asks for
``--query-items`` items, the cold key holds 1). Ends with the metadata table's item count (target: 0 for keys
that never grew).

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_cold_keys.py --keys 10000 --markdown out.md
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import Counter

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.latency import LatencyInjector, inject_latency, record_requests
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Series, Target, first
from report import Report

WARM = "/warm/key"
GROWN = "/grown/key"


class ColdShards(ShardMetadata):
    class Meta:
        table_name = "bench_cold_shards"


class DeviceLog(ShardedModel):
    class Meta:
        table_name = "bench_cold_device_log"

    device_id = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(ColdShards, max_shards=8, cache_ttl=10.0))


class PlainDeviceLog(Model):
    class Meta:
        table_name = "bench_cold_plain_device_log"

    device_id = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


def by_table(sent: LatencyInjector) -> Counter[str]:
    """Requests sent, as ``"<data|metadata> <Operation>"``."""
    counts: Counter[str] = Counter()
    for operation in sent.requests:
        for body in sent.bodies(operation):
            table = "metadata" if body.get("TableName") == ColdShards.Meta.table_name else "data"
            counts[f"{table} {operation}"] += 1
    return counts


def write_all(items: list[tuple[str, int]], threads: int) -> None:
    lock = threading.Lock()
    pending = iter(items)

    def writer() -> None:
        while True:
            with lock:
                item = next(pending, None)
            if item is None:
                return
            DeviceLog(item[0], item[1]).save()

    workers = [threading.Thread(target=writer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def describe(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items())) or "none"


def run(args: argparse.Namespace, out: Report) -> None:
    if args.quick:
        args.keys, args.writes, args.repeats = 1_000, 200, 5
    with running_dynamodb_local() as server, bound_models(server, DeviceLog, PlainDeviceLog):
        DeviceLog(WARM, 0).save()
        DeviceLog(WARM, 1).save()  # written twice: this process knows its count
        DeviceLog(GROWN, 0).save()
        DeviceLog.shards.grow(GROWN)
        DeviceLog.shards.grow(GROWN)  # 4 shards
        rows: list[tuple[str, int, Counter[str], float]] = []
        for name, items in (
            ("cold (new keys)", [(f"device-{n:06d}", 1) for n in range(args.keys)]),
            ("warm (one key written before)", [(WARM, n) for n in range(10, 10 + args.writes)]),
            ("grown (one key with 4 shards)", [(GROWN, n) for n in range(10, 10 + args.writes)]),
        ):
            with record_requests(DeviceLog) as sent:
                began = time.perf_counter()
                write_all(items, args.threads)
                seconds = time.perf_counter() - began
            rows.append((name, len(items), by_table(sent), len(items) / seconds))
        out(f"# Requests per write and per query of DynamicShards (cache_ttl=10 s, {args.threads} writer threads)")
        out()
        out("| writes to | writes | requests | requests per write | target | writes/s |")
        out("|---|---:|---|---:|---:|---:|")
        for name, writes, counts, rate in rows:
            target = "1.00" if name.startswith("cold") else "-"
            out(f"| {name} | {writes} | {describe(counts)} | {sum(counts.values()) / writes:.4f} | {target} | "
                f"{rate:.0f} |")
        out()
        metadata_items = ColdShards.count()
        cold_items = sum(1 for item in ColdShards.scan() if item.partition_key.startswith("device-"))
        out(f"- metadata items after {args.keys} writes to {args.keys} new keys: {cold_items} for those keys "
            f"(target 0); {metadata_items} in all (the grown key, and the warm key's rate report if any)")

        for n in range(args.query_items):
            PlainDeviceLog("device-000000", n).save()
        queries: list[tuple[str, str, Counter[str], float]] = []
        whole = {"page_size": args.query_items}  # every shard asked for the whole limit: no refill
        for name, model, key, options in (
            ("plain Model, one key", PlainDeviceLog, "device-000000", {}),
            ("cold key (no metadata item, 1 item)", DeviceLog, "device-000001", {}),
            ("warm key (1 shard)", DeviceLog, WARM, {}),
            ("grown key (4 shards)", DeviceLog, GROWN, {}),
            (f"grown key (4 shards), page_size={args.query_items}", DeviceLog, GROWN, whole),
        ):
            with record_requests(model) as sent:
                list(model.query(key, limit=args.query_items, **options))
            timings = []
            with inject_latency(model, args.rtt):
                for _ in range(args.repeats):
                    began = time.perf_counter()
                    list(model.query(key, limit=args.query_items, **options))
                    timings.append(time.perf_counter() - began)
            queries.append((name, key, by_table(sent), statistics.median(timings)))
        out()
        out(f"## Requests and median latency of a query of {args.query_items} items (limit) at "
            f"{args.rtt * 1000:.0f} ms RTT ({args.repeats} queries each)")
        out()
        out("| query of | requests | median ms | x plain |")
        out("|---|---|---:|---:|")
        plain = queries[0][3]
        for name, _key, counts, median in queries:
            out(f"| {name} | {describe(counts)} | {median * 1000:.1f} | {median / plain:.2f} |")
        out()
        out("- target: no added latency from the metadata read (the cold key's query within ~1.1 x plain)")
        out("- a grown key's limited page asks each shard for about its share of the limit and refills the "
            "shards the merge runs short of (fewer items read, sometimes another round trip); with "
            "page_size = limit each shard is asked for the whole limit, in one round trip")


#: Requests per write (the figure) beside the write rate; the queries' latency against plain.
CHARTS = [
    Chart(
        arrange="columns",
        panels=(
            Bars(category="writes to", value_label="requests sent per write (data and metadata tables)",
                 series=(Series("requests per write", "requests per write"),),
                 targets=(Target("target for new keys: 1.00", 1.0),), value_format="{:.4f}"),
            Bars(category="writes to", value_label="writes/s on this machine", series=(Series("writes/s", "writes/s"),),
                 value_format="{:,.0f}"),
        ),
    ),
    Chart(panels=(Bars(
        category="query of", value_label="median latency of the query (ms)",
        series=(Series("median latency", "median ms"),),
        targets=(Target("target: the cold key's query ≤ 1.1 x the plain query",
                        lambda rows: 1.1 * first(rows, "query of", "plain Model, one key").number("median ms")),),
        value_format="{:.1f} ms",
    ),)),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000, help="new keys written once each (10000)")
    parser.add_argument("--writes", type=int, default=2_000, help="writes to the warm and to the grown key (2000)")
    parser.add_argument("--threads", type=int, default=8, help="writer threads (8)")
    parser.add_argument("--rtt", type=float, default=0.05, help="injected round-trip seconds of the queries (0.05)")
    parser.add_argument("--repeats", type=int, default=20, help="timed queries of each kind (20)")
    parser.add_argument("--query-items", type=int, default=20, help="items of the plain model's key (20)")
    parser.add_argument("--quick", action="store_true", help="1,000 keys, 200 writes, 5 repeats")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
