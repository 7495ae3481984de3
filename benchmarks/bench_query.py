"""Merged fan-out query vs a serial shard loop vs a plain PynamoDB query, on the same data.

Prints one table for 1, 4, 16 and 64 shards at an injected round-trip latency of 10 ms and
50 ms (botocore ``before-send``, :func:`pynamodb_sharding.testing.latency.inject_latency`):

(a) ``ShardedModel.query``: shards in parallel, streaming k-way merge (this library);
(b) a serial loop over the shards like the AWS write-sharding sample, but following each
    shard's ``LastEvaluatedKey`` (the sample does not), then sorting the collected items;
(c) a plain unsharded PynamoDB ``Model.query`` of the same items.

Then the client CPU to iterate a large result merged vs plain, and the peak memory of a merged
query as the result grows (tracemalloc: memory must stay flat, it is a stream).

Run::

    python benchmarks/bench_query.py                  # full sizes (1M items takes long)
    python benchmarks/bench_query.py --quick          # a smoke run for CI
    python benchmarks/bench_query.py --markdown benchmarks/RESULTS-query.md

It starts its own DynamoDB Local, or uses ``DYNAMODB_LOCAL_ENDPOINT`` when set.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import boto3
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import ShardedModel, Sharding
from pynamodb_sharding._strategies import ItemKey, ShardKey
from pynamodb_sharding.testing import bound_models, running_dynamodb_local
from pynamodb_sharding.testing.latency import inject_latency

from charts import Bars, Chart, Lines, Series, Target, first

PAYLOAD = "x" * 64  # a small item, like an audit-log entry


class KeyedShards:
    """The shard count is written in the key: ``"16-..."`` has 16 shards (one table, many counts)."""

    max_shards = 64

    def shard_count(self, key: ShardKey) -> int:
        return int(key.value.split("-", 1)[0])

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return tuple(range(1, self.shard_count(key) + 1))

    def write_shard(self, item: ItemKey) -> int:
        return 1  # the benchmark writes raw items with their physical keys

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return self.read_shards(item.key)


class BenchEvent(ShardedModel):
    class Meta:
        table_name = "bench_event"
        max_pool_connections = 64  # >= the merged query's threads (min(32, shards))

    key = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()
    shards = Sharding(KeyedShards())


class PlainEvent(Model):
    class Meta:
        table_name = "bench_plain"
        max_pool_connections = 64

    key = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()


# -- data ---------------------------------------------------------------------------------------


def _client(model: type[Model]) -> Any:
    meta = model.Meta
    return boto3.client("dynamodb", endpoint_url=meta.host, region_name=meta.region,
                        aws_access_key_id=meta.aws_access_key_id,
                        aws_secret_access_key=meta.aws_secret_access_key)


def write_items(model: type[Model], hash_values: Callable[[int], str], count: int) -> None:
    """Batch-write ``count`` raw items; item ``i`` gets hash key ``hash_values(i)``, sort key ``i``."""
    table = model.Meta.table_name
    local = threading.local()

    def write(begin: int) -> None:
        if not hasattr(local, "client"):
            local.client = _client(model)
        requests = [{"PutRequest": {"Item": {"key": {"S": hash_values(i)}, "seq": {"N": str(i)},
                                             "payload": {"S": PAYLOAD}}}}
                    for i in range(begin, min(begin + 25, count))]
        pending: dict[str, Any] = {table: requests}
        while pending:
            pending = local.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(0, count, 25)))


def sharded_key(shards: int, name: str) -> str:
    return f"{shards}-{name}"


def write_sharded(shards: int, name: str, count: int) -> str:
    """Round-robin ``count`` items over the shards of a new key; returns the logical key."""
    key = sharded_key(shards, name)
    write_items(BenchEvent, lambda i: f"{key}_{i % shards + 1}", count)
    return key


# -- the three ways to read ---------------------------------------------------------------------


def read_merged(key: str, limit: int | None = None, page_size: int | None = None) -> int:
    n = 0
    for _item in BenchEvent.query(key, limit=limit, page_size=page_size):
        n += 1
    return n


def read_serial(key: str) -> int:
    """The AWS sample's loop, one shard after the other, following LastEvaluatedKey; then sort."""
    connection = BenchEvent._get_connection()
    items = []
    for shard in BenchEvent.shards.read_shards(key):
        physical = BenchEvent.shards.physical_key(key, shard)
        start = None
        while True:
            page = connection.query(physical, exclusive_start_key=start)
            items.extend(BenchEvent.from_raw_data(raw) for raw in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if start is None:
                break
    items.sort(key=lambda item: item.seq)
    return len(items)


def read_plain(key: str, limit: int | None = None) -> int:
    n = 0
    for _item in PlainEvent.query(key, limit=limit):
        n += 1
    return n


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Measure:
    wall: float
    cpu: float
    requests: float
    peak_mb: float


class Sampler:
    """Runs several readers round-robin, so that load from elsewhere hits them all alike."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.samples: dict[str, list[tuple[float, float, int]]] = {}

    def run(self, name: str, read: Callable[[], int], expected: int) -> None:
        gc.collect()
        with inject_latency(BenchEvent, self.latency, extra_models=[PlainEvent]) as injector:
            wall0, cpu0 = time.perf_counter(), time.process_time()
            got = read()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            requests = injector.requests.get("Query", 0)
        if got != expected:
            raise AssertionError(f"{name}: read {got} items, expected {expected}")
        self.samples.setdefault(name, []).append((wall, cpu, requests))

    def result(self, name: str, read: Callable[[], int]) -> Measure:
        samples = self.samples[name]
        return Measure(statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples),
                       statistics.median(s[2] for s in samples), peak_memory(read))


def peak_memory(read: Callable[[], int]) -> float:
    """Peak Python allocation (MB) above the level before ``read`` (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - base) / 1e6


# -- output -------------------------------------------------------------------------------------


class Table:
    def __init__(self, title: str, headers: Sequence[str]) -> None:
        self.title = title
        self.headers = list(headers)
        self.rows: list[list[str]] = []

    def add(self, *cells: object) -> None:
        self.rows.append([str(cell) for cell in cells])

    def text(self) -> str:
        widths = [max(len(row[i]) for row in [self.headers, *self.rows]) for i in range(len(self.headers))]
        line = "  ".join("-" * w for w in widths)
        out = [self.title, line, "  ".join(h.rjust(w) for h, w in zip(self.headers, widths, strict=True)), line]
        out += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in self.rows]
        return "\n".join(out)

    def markdown(self) -> str:
        out = [f"### {self.title}", "", "| " + " | ".join(self.headers) + " |",
               "|" + "|".join("---:" for _ in self.headers) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(out)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


# -- the benchmark ------------------------------------------------------------------------------


def latency_table(args: argparse.Namespace) -> tuple[Table, list[str]]:
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    table = Table(
        f"Query of {args.items} items: (a) merged, (b) serial shard loop, (c) plain PynamoDB "
        f"(median of {args.repeat}; wall and client CPU in ms; load average before: {load})",
        ["latency", "shards", "way", "wall ms", "client CPU ms", "requests", "peak MB", "(a)/(c) wall"],
    )
    write_items(PlainEvent, lambda i: "plain", args.items)
    keys = {n: write_sharded(n, "query", args.items) for n in args.shards}
    readers: dict[str, Callable[[], int]] = {"plain": lambda: read_plain("plain")}
    for n, key in keys.items():
        readers[f"merged {n}"] = lambda key=key: read_merged(key)
        readers[f"serial {n}"] = lambda key=key: read_serial(key)
    notes = []
    for latency in args.latencies:
        sampler = Sampler(latency)
        for read in readers.values():  # warm-up: JIT of the server, pools of the client
            read()
        for _ in range(args.repeat):
            for name, read in readers.items():
                sampler.run(name, read, args.items)
        plain = sampler.result("plain", readers["plain"])
        label = f"{latency * 1000:.0f} ms"
        merged_by_shards = {}
        for n in args.shards:
            merged = sampler.result(f"merged {n}", readers[f"merged {n}"])
            serial = sampler.result(f"serial {n}", readers[f"serial {n}"])
            merged_by_shards[n] = merged
            for way, m in (("(a) merged", merged), ("(b) serial", serial), ("(c) plain", plain)):
                ratio = f"{merged.wall / plain.wall:.2f}" if way == "(a) merged" else ""
                table.add(label, n, way, ms(m.wall), ms(m.cpu), f"{m.requests:.0f}", f"{m.peak_mb:.2f}", ratio)
        if 16 in merged_by_shards and 1 in merged_by_shards:
            notes.append(
                f"at {label}: merged 16 shards / merged 1 shard = "
                f"{merged_by_shards[16].wall / merged_by_shards[1].wall:.2f}, "
                f"merged 16 shards / plain = {merged_by_shards[16].wall / plain.wall:.2f} (target <= 1.3 at 50 ms)"
            )
    return table, notes


def cpu_table(args: argparse.Namespace) -> Table:
    n = args.cpu_items
    table = Table(f"Client CPU to iterate {n} items, no injected latency (best of {args.repeat})",
                  ["way", "shards", "client CPU s", "wall s", "ratio to plain"])
    write_items(PlainEvent, lambda i: "cpu", n)
    key = write_sharded(16, "cpu", n)
    results = {}
    for name, read in (("plain PynamoDB", lambda: read_plain("cpu")), ("merged", lambda: read_merged(key))):
        cpus, walls = [], []
        for _ in range(args.repeat):
            gc.collect()
            wall0, cpu0 = time.perf_counter(), time.process_time()
            assert read() == n
            cpus.append(time.process_time() - cpu0)
            walls.append(time.perf_counter() - wall0)
        results[name] = (min(cpus), min(walls))
    base = results["plain PynamoDB"][0]
    for name, (cpu, wall) in results.items():
        table.add(name, 16 if name == "merged" else 1, f"{cpu:.2f}", f"{wall:.2f}",
                  f"{cpu / base:.2f}  (target <= 1.10)" if name == "merged" else "1.00")
    return table


def memory_table(args: argparse.Namespace) -> Table:
    sizes = sorted(args.memory_sizes)
    table = Table(
        "Peak memory as the result grows (tracemalloc, MB above the level before the query); "
        "a merged query holds at most 2 pages per shard, DynamoDB pages are up to 1 MB",
        ["items read", "plain PynamoDB", "merged 16 shards", "merged 16 shards, page_size=500", "target"],
    )
    key = write_sharded(16, "memory", sizes[-1])
    write_items(PlainEvent, lambda i: "memory", sizes[-1])
    for size in sizes:
        plain = peak_memory(lambda size=size: read_plain("memory", limit=size))
        merged = peak_memory(lambda size=size: read_merged(key, limit=size))
        paged = peak_memory(lambda size=size: read_merged(key, limit=size, page_size=500))
        table.add(size, f"{plain:.1f}", f"{merged:.1f}", f"{paged:.1f}", "flat, <= 50")
    return table


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=1000, help="items per query in the latency table")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--latencies-ms", type=float, nargs="+", default=[10.0, 50.0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpu-items", type=int, default=100_000)
    parser.add_argument("--memory-sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--skip", choices=["latency", "cpu", "memory"], nargs="*", default=[])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a CI smoke run")
    parser.add_argument("--markdown", metavar="PATH", help="also write the tables as Markdown")
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.shards, args.latencies_ms, args.repeat = 200, [1, 4, 16], [10.0], 1
        args.cpu_items, args.memory_sizes = 2_000, [1_000, 5_000]
    args.latencies = [value / 1000 for value in args.latencies_ms]
    return args


# -- charts -------------------------------------------------------------------------------------

#: Wall time of the three ways on a log axis (40 ms to 3.4 s), per latency, with the merged
#: query's ratio to plain and its target below; client CPU against its target; memory flat.
CHARTS = [
    Chart(
        facets=(None, "latency"),
        facet_titles={"latency": "{} per request"},
        panels=(
            Lines(x="shards", x_label="shards", x_scale="log2", y_scale="log", y_label="wall time of the query (ms)",
                  split="way", series=(Series("wall", "wall ms"),), height=1.4,
                  targets=(Target("target at 50 ms: merged ≤ 1.3 x plain",
                                  lambda rows: 1.3 * first(rows, "way", "(c) plain").number("wall ms")
                                  if rows[0]["latency"] == "50 ms" else None),)),
            Lines(x="shards", x_label="shards", x_scale="log2", y_label="merged ÷ plain (wall time)",
                  where={"way": "(a) merged"}, series=(Series("(a) merged ÷ (c) plain", "(a)/(c) wall"),),
                  targets=(Target("target at 50 ms: ≤ 1.3",
                                  lambda rows: 1.3 if rows[0]["latency"] == "50 ms" else None),)),
        ),
    ),
    Chart(panels=(Bars(
        category="way", value_label="seconds to iterate the items (best of the runs)",
        series=(Series("client CPU", "client CPU s"), Series("wall", "wall s")),
        targets=(Target("target: merged client CPU ≤ 1.10 x plain",
                        lambda rows: 1.1 * first(rows, "way", "plain PynamoDB").number("client CPU s")),),
        value_format="{:.2f} s",
    ),)),
    Chart(panels=(Lines(
        x="items read", x_label="items the query reads", x_scale="log",
        y_label="peak memory above baseline (MB)",
        series=(
            Series("plain PynamoDB", "plain PynamoDB"),
            Series("merged, 16 shards", "merged 16 shards"),
            Series("merged, 16 shards, page_size=500", "merged 16 shards, page_size=500"),
        ),
        targets=(Target("target: flat, ≤ 50 MB", 50.0),),
    ),)),
]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_dynamodb_local())
        stack.enter_context(bound_models(server, BenchEvent, PlainEvent))
        out: list[str] = []
        markdown: list[str] = []

        def emit(table: Table, notes: Sequence[str] = ()) -> None:
            text = table.text() + "".join(f"\n{note}" for note in notes)
            print(text + "\n", flush=True)
            out.append(text)
            markdown.append(table.markdown() + "".join(f"\n\n{note}" for note in notes))

        if "latency" not in args.skip:
            emit(*latency_table(args))
        if "cpu" not in args.skip:
            emit(cpu_table(args))
        if "memory" not in args.skip:
            emit(memory_table(args))
    if args.markdown:
        command = "python benchmarks/bench_query.py " + " ".join(sys.argv[1:] if argv is None else argv)
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(f"## Merged query benchmark\n\n`{command.strip()}`\n\n" + "\n\n".join(markdown) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
