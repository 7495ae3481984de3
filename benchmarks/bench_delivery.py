"""Benchmark: the delivery-list recipe, targets created and delivered per second, capacity per target.

Creates a delivery of ``--targets`` ids (chunk items, target items and the progress item) and
walks it with ``--workers`` worker threads in each of the three modes (exactly once with an
inbox record, at most once and at least once with a no-op ``send``). Every request is sent with
``ReturnConsumedCapacity=TOTAL`` (a hook on the benchmark's own clients) and the read and write
units DynamoDB reports are summed per target: the walk's bookkeeping (progress, leases,
chunk reads) is in the figures, spread over the targets of a chunk.

DynamoDB Local reports the units DynamoDB would charge but runs at its own speed on this
machine: the targets/s figures compare the modes, they do not predict a real table's rate.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_delivery.py --targets 10000 --markdown out.md
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding.recipes.delivery import (
    AtLeastOnce,
    AtMostOnce,
    Delivery,
    DeliveryChunk,
    DeliveryFailure,
    DeliveryLease,
    DeliveryMode,
    DeliveryProgress,
    DeliveryTarget,
    ExactlyOnce,
)
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local

import report
from charts import Bars, Chart, Row, Series
from report import Report

READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})


class Inbox(Model):
    class Meta:
        table_name = "bench_delivery_inbox"

    user_id = UnicodeAttribute(hash_key=True)
    message_id = UnicodeAttribute(range_key=True)
    delivery_id = UnicodeAttribute()


#: Every table the recipe uses (a failed send would be recorded in DeliveryFailure's), and the inbox.
MODELS: tuple[type[Model], ...] = (DeliveryChunk, DeliveryTarget, DeliveryProgress, DeliveryLease, DeliveryFailure,
                                   Inbox)


class Capacity:
    """Read and write units reported by DynamoDB for the requests of the models' clients."""

    def __init__(self) -> None:
        self.units: Counter[str] = Counter()
        self._lock = threading.Lock()

    def ask(self, params: dict[str, Any], **_: Any) -> None:
        params.setdefault("ReturnConsumedCapacity", "TOTAL")
        # DynamoDB Local reports a transaction's units per table, not per item; DynamoDB
        # charges 2 write units per item of up to 1 KB written in a transaction (all of ours).
        with self._lock:
            self.units["transactional write (rule)"] += 2 * len(params.get("TransactItems", ()))

    def count(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity") or []
        entries = consumed if isinstance(consumed, list) else [consumed]
        kind = "read" if model.name in READS else "write"
        with self._lock:
            for entry in entries:
                self.units[kind] += float(entry.get("CapacityUnits", 0.0))


@contextmanager
def consumed_capacity() -> Iterator[Capacity]:
    capacity = Capacity()
    clients = {id(client): client for client in (m._get_connection().connection.client for m in MODELS)}
    for client in clients.values():
        client.meta.events.register("provide-client-params.dynamodb.*", capacity.ask)
        client.meta.events.register("after-call.dynamodb.*", capacity.count)
    try:
        yield capacity
    finally:
        for client in clients.values():
            client.meta.events.unregister("provide-client-params.dynamodb.*", capacity.ask)
            client.meta.events.unregister("after-call.dynamodb.*", capacity.count)


def walk_with_threads(delivery: Delivery, mode: DeliveryMode, workers: int) -> None:
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            delivery.walk(mode, lease_seconds=30.0)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def inbox_record(delivery_id: str, user_id: str) -> Inbox:
    return Inbox(user_id, uuid.uuid4().hex, delivery_id=delivery_id)


def run(args: argparse.Namespace, out: Report) -> None:
    if args.quick:
        args.targets = 2_000
    def no_op(_delivery_id: str, _user_id: str) -> None:
        return None

    modes: list[tuple[str, Callable[[], DeliveryMode]]] = [
        ("exactly once (inbox record in the transaction)", lambda: ExactlyOnce(inbox_record)),
        ("at most once (take, then send)", lambda: AtMostOnce(no_op)),
        ("at least once (send, then take)", lambda: AtLeastOnce(no_op)),
    ]
    rows: list[tuple[str, float, float, float, float]] = []
    with running_dynamodb_local() as server, bound_models(server, *MODELS):
        targets = [f"{n:09d}" for n in range(args.targets)]
        for name, make_mode in modes:
            delivery = Delivery(f"bench-{uuid.uuid4().hex[:8]}")
            with consumed_capacity() as capacity:
                began = time.perf_counter()
                delivery.create(targets, max_chunk_targets=args.chunk_targets)
                seconds = time.perf_counter() - began
            rows.append((f"create ({name.split(' (')[0]} run)", args.targets / seconds,
                         capacity.units["read"] / args.targets, capacity.units["write"] / args.targets,
                         capacity.units["transactional write (rule)"] / args.targets))
            with consumed_capacity() as capacity:
                began = time.perf_counter()
                walk_with_threads(delivery, make_mode(), args.workers)
                seconds = time.perf_counter() - began
            if delivery.targets_left() != 0:
                msg = f"the {name} walk left targets behind"
                raise AssertionError(msg)
            rows.append((f"deliver: {name}", args.targets / seconds,
                         capacity.units["read"] / args.targets, capacity.units["write"] / args.targets,
                         capacity.units["transactional write (rule)"] / args.targets))
    out(f"# Delivery list: {args.targets} targets, chunks of {args.chunk_targets}, {args.workers} worker threads")
    out()
    out("| step | targets/s | read units per target | write units per target (reported) "
        "| transactional write units per target (2 per item) |")
    out("|---|---:|---:|---:|---:|")
    for step, rate, reads, writes, transactional in rows:
        out(f"| {step} | {rate:.0f} | {reads:.3f} | {writes:.3f} | {transactional:.3f} |")
    out()
    out("- create writes a target item (1 WCU) per target and a ~400 KB-capped chunk item per chunk")
    out("- a take is a transactional delete (2 WCU per item written in a transaction); exactly once "
        "also writes the inbox record in it; the strongly consistent BatchGetItem before it is 1 RCU")
    out("- DynamoDB Local under-reports transactions (units per table, not per item): the last column "
        "counts the transactions' items at DynamoDB's documented 2 units each; a real table's write "
        "units per delivered target are that column plus the non-transactional writes (lease renewals)")


def _step(row: Row) -> str:
    """``deliver: exactly once``: the mode without its explanation (the table has it)."""
    step = row["step"]
    return step.split(" (")[0] if step.startswith("deliver") else step


#: Rates and capacity units per target have different units: side by side, same steps.
CHARTS = [
    Chart(
        arrange="columns",
        panels=(
            Bars(category=_step, value_label="targets per second on this machine",
                 series=(Series("targets/s", "targets/s"),), value_format="{:,.0f}"),
            Bars(category=_step, value_label="capacity units per target",
                 series=(
                     Series("read units", "read units per target"),
                     Series("write units (reported)", "write units per target (reported)"),
                     Series("transactional write units (2 per item)",
                            "transactional write units per target (2 per item)"),
                 ),
                 value_format="{:.2f}"),
        ),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--targets", type=int, default=10_000, help="targets of each delivery (10000)")
    parser.add_argument("--chunk-targets", type=int, default=1_000, help="most targets in a chunk (1000)")
    parser.add_argument("--workers", type=int, default=4, help="worker threads of each walk (4)")
    parser.add_argument("--quick", action="store_true", help="2,000 targets")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
