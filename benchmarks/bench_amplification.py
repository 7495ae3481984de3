"""Benchmark: items and read units a page of ``limit=L`` costs, merged over N shards vs plain.

One key holds ``--items`` items spread at random over N shards (``RandomShards(N)``), and the
same items under one key of a plain PynamoDB model. For several L and N, a first page of
``limit=L`` is read three ways, side by side: the plain query; the merged query as it is now
(each shard is first asked for 1.5 x its share of L, only a shard whose next item is needed is
read again); and the merged query as it was (``page_size=L``: every shard asked for L). Prints
the items read (``ScannedCount``), the read units DynamoDB reports (``ReturnConsumedCapacity``,
requested by a botocore hook) and the median latency of the page at ``--latency`` seconds per
request.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_amplification.py --markdown out.md
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.latency import inject_latency
from pynamodb_sharding.testing.local import running_dynamodb_local

KEY = "/shared/a.txt"
LIMITS = (20, 100)
SHARDS = (4, 10, 16)


class PlainLog(Model):
    class Meta:
        table_name = "bench_amp_plain"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()


def sharded_model(shards: int) -> type[ShardedModel]:
    class ShardedLog(ShardedModel):
        class Meta:
            table_name = f"bench_amp_{shards}"
            max_pool_connections = 32

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards_ = Sharding(RandomShards(shards))

    ShardedLog.__name__ = f"ShardedLog{shards}"
    return ShardedLog


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


def first_page(model: Any, limit: int, **kwargs: Any) -> tuple[int, int, float]:
    """(items returned, items read, read units) of a first page of ``limit`` items."""
    with consumed(model) as units:
        results = model.query(KEY, limit=limit, **kwargs)
        items = list(results)
        scanned = results.page_iter.total_scanned_count
    return len(items), scanned, sum(units)


def latency_ms(model: Any, limit: int, seconds: float, repeat: int, **kwargs: Any) -> float:
    times = []
    with inject_latency(model, seconds):
        for _ in range(repeat):
            start = time.perf_counter()
            list(model.query(KEY, limit=limit, **kwargs))
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def run(args: argparse.Namespace, say: Callable[[str], None]) -> list[str]:
    lines: list[str] = []

    def out(line: str = "") -> None:
        lines.append(line)
        say(line)

    models = {shards: sharded_model(shards) for shards in SHARDS}
    rows = []
    with running_dynamodb_local() as server, bound_models(server, PlainLog, *models.values()):
        body = "x" * args.item_bytes
        with PlainLog.batch_write() as batch:
            for n in range(args.items):
                batch.save(PlainLog(KEY, n, body=body))
        for model in models.values():
            with model.batch_write() as batch:
                for n in range(args.items):
                    batch.save(model(KEY, n, body=body))
        for limit in LIMITS:
            plain = first_page(PlainLog, limit)
            plain_ms = latency_ms(PlainLog, limit, args.latency, args.repeat)
            for shards, model in models.items():
                share = first_page(model, limit)
                before = first_page(model, limit, page_size=limit)
                share_ms = latency_ms(model, limit, args.latency, args.repeat)
                before_ms = latency_ms(model, limit, args.latency, args.repeat, page_size=limit)
                rows.append((limit, shards, plain, share, before, plain_ms, share_ms, before_ms))
    out(f"# Items read by a first page of limit L over N shards ({args.items} items, "
        f"{args.item_bytes} B each, {args.latency * 1000:g} ms per request)")
    out()
    out("| L | N | plain items read | merged items read | merged / L | target 1.5 x L + N | met | "
        "before (page_size=L) items read | plain read units | merged read units | before read units |")
    out("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for limit, shards, plain, share, before, *_ in rows:
        target = 1.5 * limit + shards
        out(f"| {limit} | {shards} | {plain[1]} | {share[1]} | {share[1] / limit:.2f} | {target:g} | "
            f"{'met' if share[1] <= target else 'missed'} | {before[1]} | {plain[2]:g} | {share[2]:g} | "
            f"{before[2]:g} |")
    out()
    out("| L | N | plain page (ms) | merged page (ms) | before (page_size=L) page (ms) | merged / before | "
        "target <= 1.3 | met |")
    out("|---:|---:|---:|---:|---:|---:|---:|---|")
    for limit, shards, _plain, _share, _before, plain_ms, share_ms, before_ms in rows:
        ratio = share_ms / before_ms
        out(f"| {limit} | {shards} | {plain_ms:.1f} | {share_ms:.1f} | {before_ms:.1f} | {ratio:.2f} | 1.3 | "
            f"{'met' if ratio <= 1.3 else 'missed'} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=2000, help="items of the key (2000)")
    parser.add_argument("--item-bytes", type=int, default=200, help="body size of an item (200)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds added to every request (0.05)")
    parser.add_argument("--repeat", type=int, default=5, help="pages timed per case (5)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    lines = run(args, print)
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
