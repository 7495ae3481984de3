"""Benchmark: one hot key, unsharded vs ``DynamicShards``, under the partition-limit simulator.

Prints, per second, the write rate of a plain PynamoDB model and of a ``DynamicShards`` model
(with its shard count) while ``--writers`` threads write one key whose physical partitions each
take ``--limit`` write units/s; then the steady rate after the last growth against
``count x limit``; then the same for ``DynamicShards`` written from ``--processes`` spawned
processes (each with ``writers / processes`` threads and its own simulator granting
``limit / processes``, so the partitions take ``--limit`` in all); then the metadata reads a
warm key costs per 10,000 writes; then the ramp: the offered write rate of one key rises from 0
to ``--ramp-peak`` x ``--ramp-limit`` over ``--ramp-seconds`` and holds, for an unsharded model,
reactive ``DynamicShards`` (grows on throttles) and proactive ``DynamicShards``
(``target_utilization=0.7``, grows on the observed rate), each second's acknowledged writes
and key-range throttles side by side.

Run (starts its own DynamoDB Local unless ``DYNAMODB_LOCAL_ENDPOINT`` is set)::

    python benchmarks/bench_dynamic.py --duration 12 --writers 64 --limit 20 --markdown out.md

This machine (2 cores) runs both DynamoDB Local and the client and sustains ~250-300 single
writes/s: keep ``max_shards x limit`` well below that, or the machine is what you measure.
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.models import Model

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._strategies import HistoryEntry
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.latency import inject_latency
from pynamodb_sharding.testing.local import DynamoDBLocal, running_dynamodb_local
from pynamodb_sharding.testing.simulator import simulate_partition_limits

import report
from charts import Chart, Lines, Row, Series, number_in
from report import Report

KEY = "/shared/firetvGen2.txt"
PROCESS_KEY = "/shared/from-processes.txt"
RAMP_KEY = "/shared/ramp.txt"
KEY_RANGE = "TableWriteKeyRangeThroughputExceeded"


class BenchShards(ShardMetadata):
    class Meta:
        table_name = "bench_dynamic_shards"


class PlainAuditLog(Model):
    class Meta:
        table_name = "bench_plain_audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)


class RampShards(ShardMetadata):
    class Meta:
        table_name = "bench_ramp_shards"


class RampPlainLog(Model):
    class Meta:
        table_name = "bench_ramp_plain_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


def ramp_models(args: argparse.Namespace) -> dict[str, type[Model]]:
    """The ramp's three models: unsharded, reactive and proactive ``DynamicShards``."""

    def sharding(**proactive: float) -> Sharding:
        return Sharding(DynamicShards(
            RampShards, max_shards=args.max_shards, cooldown=args.cooldown, backoff=(0.05, 0.2), cache_ttl=5.0,
            max_attempts=1000, partition_write_units=args.ramp_limit, rate_interval=0.5, **proactive,
        ))

    class RampReactiveLog(ShardedModel):
        class Meta:
            table_name = "bench_ramp_reactive_log"
            max_retry_attempts = 1

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        shards = sharding()

    class RampProactiveLog(ShardedModel):
        class Meta:
            table_name = "bench_ramp_proactive_log"
            max_retry_attempts = 1

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        shards = sharding(target_utilization=0.7)

    return {"unsharded": RampPlainLog, "reactive": RampReactiveLog, "proactive": RampProactiveLog}


def paced(model: type[Model], rate: Callable[[float], float], seconds: float, threads: int,
          throttled: Callable[[], int]) -> tuple[list[int], list[int], int]:
    """Offer ``rate(t)`` writes/s of ``RAMP_KEY`` for ``seconds`` from ``threads`` threads.

    Returns each second's acknowledged writes and key-range throttles (``throttled()`` sampled
    at each second), and the writes that failed. Writes still queued at the end are dropped.
    """
    tickets: queue.Queue[int | None] = queue.Queue()
    acks: list[float] = []
    failures = [0]
    lock = threading.Lock()

    def writer() -> None:
        while (ticket := tickets.get()) is not None:
            try:
                model(RAMP_KEY, ticket).save()
            except PutError:
                with lock:
                    failures[0] += 1
                continue
            with lock:
                acks.append(time.monotonic())

    workers = [threading.Thread(target=writer, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    start = last = time.monotonic()
    issued, serial = 0.0, 0
    samples = [throttled()]
    while (now := time.monotonic()) - start < seconds:
        issued += rate(now - start) * (now - last)
        last = now
        while issued >= 1:
            issued -= 1
            serial += 1
            tickets.put(serial)
        if now - start >= len(samples):
            samples.append(throttled())
        time.sleep(0.005)
    samples.append(throttled())
    while True:  # what the writers could not take in time is not offered any more
        try:
            tickets.get_nowait()
        except queue.Empty:
            break
    for _ in workers:
        tickets.put(None)
    for worker in workers:
        worker.join()
    per = [0] * int(seconds)
    for at in acks:
        index = int(at - start)
        if 0 <= index < len(per):
            per[index] += 1
    throttles = [samples[i + 1] - samples[i] for i in range(min(int(seconds), len(samples) - 1))]
    return per, throttles, failures[0]


def ramp_run(args: argparse.Namespace, server: DynamoDBLocal, out: Callable[[str], None]) -> None:
    """The ramp, the three models one after the other on the same simulated partitions."""
    models = ramp_models(args)
    peak = args.ramp_peak * args.ramp_limit
    seconds = args.ramp_seconds + args.ramp_hold

    def rate(t: float) -> float:
        return peak * min(1.0, t / args.ramp_seconds)

    results: dict[str, tuple[list[int], list[int], int]] = {}
    counts: dict[str, list[HistoryEntry]] = {}
    starts: dict[str, float] = {}
    with bound_models(server, *models.values()):
        for name, model in models.items():
            with simulate_partition_limits(model, write_units=args.ramp_limit) as simulator:
                starts[name] = time.time()
                results[name] = paced(model, rate, seconds, args.ramp_threads,
                                      lambda s=simulator: s.throttles_by_reason.get(KEY_RANGE, 0))
            if isinstance(model, type) and issubclass(model, ShardedModel):
                counts[name] = model.shards.history(RAMP_KEY)
    out("")
    out(
        f"## Ramp: one key from 0 to {peak:g} writes/s over {args.ramp_seconds:g} s, then held "
        f"{args.ramp_hold:g} s; {args.ramp_limit:g} write units/s per partition"
    )
    out("")
    out(
        f"DynamicShards(partition_write_units={args.ramp_limit:g}, rate_interval=0.5, cooldown={args.cooldown:g}, "
        f"max_shards={args.max_shards}); proactive: target_utilization=0.7, growing at "
        f"{0.7 * args.ramp_limit:g} units/s per shard. {args.ramp_threads} writer threads per model."
    )
    out("")
    out("| second | offered writes/s | unsharded writes/s | reactive writes/s | proactive writes/s | "
        "unsharded throttles | reactive throttles | proactive throttles | reactive shards | proactive shards |")
    out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for second in range(int(seconds)):
        cells = [f"{rate(second + 0.5):.0f}"]
        cells += [str(results[name][0][second]) for name in models]
        cells += [str(results[name][1][second]) if second < len(results[name][1]) else "0" for name in models]
        cells += [str(count_at(counts[name], starts[name] + second + 1)) for name in ("reactive", "proactive")]
        out(f"| {second + 1} | " + " | ".join(cells) + " |")
    out("")
    for name in models:
        per, throttles, failures = results[name]
        final = counts[name][-1].count if name in counts else 1
        out(
            f"- {name}: {sum(throttles)} key-range throttles, {sum(per)} writes acknowledged, {failures} failed "
            f"after retries, {sum(per[-int(args.ramp_hold):]) / args.ramp_hold:.1f} writes/s while held at "
            f"{peak:g}; {final} shard(s) at the end"
        )


def dynamic_model(args: argparse.Namespace) -> tuple[type[ShardedModel], DynamicShards]:
    """The dynamically sharded twin of ``PlainAuditLog``, configured from the command line."""
    strategy = DynamicShards(
        BenchShards,
        max_shards=args.max_shards,
        cooldown=args.cooldown,
        backoff=(0.05, 0.2),
        cache_ttl=args.cache_ttl,
        max_attempts=1000,
    )

    class DynamicAuditLog(ShardedModel):
        class Meta:
            table_name = "bench_dynamic_audit_log"

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        user_id = UnicodeAttribute(null=True)
        shards = Sharding(strategy)

    return DynamicAuditLog, strategy


def hammer(model: type[Model], writers: int, duration: float, key: str, base: int = 0) -> tuple[list[float], int]:
    """``writers`` threads write new items of ``key`` for ``duration`` s; returns ack times, failures.

    Range keys start above ``base``, so that processes writing the same key do not collide.
    """
    return report.hammer(lambda index, seq: model(key, base + index * 1_000_000 + seq, user_id=f"u{index}"),
                         writers, duration)


def timeline(history: list[HistoryEntry], start: float) -> list[tuple[float | str, int]]:
    """``(seconds from start, count)`` per entry; ``"start"`` for the initial count (epoch 0)."""
    return [("start" if entry.at <= 0 else round(entry.at - start, 2), entry.count) for entry in history]


def count_at(history: list[HistoryEntry], at: float) -> int:
    current = history[0].count if history else 1
    for entry in history:
        if entry.at <= at:
            current = entry.count
    return current


def metadata_reads(model: type[ShardedModel], strategy: DynamicShards, writes: int, writers: int) -> dict[str, float]:
    """Write ``writes`` items of a warm key (no limits) and count the metadata requests sent."""
    key = "/warm/key"
    model(key, 0).save()
    counter = iter(range(1, writes + 1))
    lock = threading.Lock()

    def writer() -> None:
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return
            model(key, n).save()

    with inject_latency(BenchShards, 0.0) as metadata:  # no delay: it counts the requests
        start = time.time()
        threads = [threading.Thread(target=writer) for _ in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.time() - start
    reads = metadata.requests.get("GetItem", 0)
    ttl = strategy.store.ttl
    return {
        "writes": writes,
        "seconds": elapsed,
        "reads": reads,
        "ttl": ttl,
        "per_10k": reads * 10_000 / writes,
        "per_ttl": reads / max(elapsed / ttl, 1e-9),
        "other_requests": metadata.total_requests - reads,
    }


def _process_writer(
    settings: dict[str, str], tables: tuple[str, str], args: argparse.Namespace, index: int, start_at: float
) -> tuple[list[float], int, float]:
    """A spawned writer process: bind its own dynamic model by hand, then write ``PROCESS_KEY``.

    Returns its ack times, its failed writes and when it began writing.
    """
    model, _ = dynamic_model(args)
    for bound, table in ((model, tables[0]), (BenchShards, tables[1])):
        for name, value in settings.items():
            setattr(bound.Meta, name, value)
        bound.Meta.table_name = table
    time.sleep(max(0.0, start_at - time.time()))
    began = time.time()
    with simulate_partition_limits(model, write_units=args.limit / args.processes):
        threads, base = args.writers // args.processes, (index + 1) * 1_000_000_000
        acks, failures = hammer(model, threads, args.duration, PROCESS_KEY, base)
    return acks, failures, began


def steady_rate(acks: list[float], history: list[HistoryEntry], end: float) -> tuple[float, float] | None:
    """Writes/s from one second after the last growth (its burst spent) to ``end``, and that window."""
    steady_from = history[-1].at + 1.0
    window = end - steady_from
    if window <= 1.0:
        return None
    return sum(1 for at in acks if steady_from <= at <= end) / window, window


def processes_run(
    args: argparse.Namespace, model: type[ShardedModel], strategy: DynamicShards, server: DynamoDBLocal,
    out: Callable[[str], None],
) -> None:
    """``PROCESS_KEY`` written from ``args.processes`` spawned processes; prints its steady rate."""
    settings = {
        "host": server.endpoint,
        "region": server.region,
        "aws_access_key_id": server.aws_access_key_id,
        "aws_secret_access_key": server.aws_secret_access_key,
    }
    tables = (model.Meta.table_name, BenchShards.Meta.table_name)
    start_at = time.time() + 5.0  # all processes start writing together, if spawned by then
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.processes) as pool:
        results = pool.starmap(
            _process_writer, [(settings, tables, args, index, start_at) for index in range(args.processes)]
        )
    acks = [at for result in results for at in result[0]]
    failures = sum(result[1] for result in results)
    # A process spawned late starts late: measure only while all of them were writing.
    start = min(result[2] for result in results)
    end = start + args.duration
    late = max(result[2] for result in results) - start
    history = model.shards.history(PROCESS_KEY)
    stored = model.count(PROCESS_KEY)
    threads = args.writers // args.processes
    out("")
    out(
        f"## One hot key from {args.processes} processes x {threads} threads, "
        f"{args.limit:g} write units/s per partition"
    )
    out("")
    final = history[-1]
    rate = steady_rate(acks, history, end)
    if rate is None:
        out(
            f"- last growth at {final.at - start:.1f} s, too late to measure a steady rate; "
            f"run with a longer --duration"
        )
    else:
        out(
            f"- {final.count} shards from {final.at - start:.1f} s; {rate[0]:.1f} writes/s over the last "
            f"{rate[1]:.1f} s = {rate[0] / (final.count * args.limit):.2f} x count x limit"
        )
    out(
        f"- history {timeline(history, start)} (seconds from start, count); "
        f"{failures} writes failed; {stored} items stored for {len(acks)} acknowledged writes; "
        f"the last process began {late:.1f} s after the first"
    )


def run(args: argparse.Namespace, out: Report) -> None:
    DynamicAuditLog, strategy = dynamic_model(args)
    with running_dynamodb_local() as server, bound_models(server, PlainAuditLog, DynamicAuditLog):
        with simulate_partition_limits(PlainAuditLog, write_units=args.limit):
            plain_start = time.time()
            plain_acks, plain_failures = hammer(PlainAuditLog, args.writers, args.duration, KEY)
        with simulate_partition_limits(DynamicAuditLog, write_units=args.limit):
            dynamic_start = time.time()
            dynamic_acks, dynamic_failures = hammer(DynamicAuditLog, args.writers, args.duration, KEY)
        history = DynamicAuditLog.shards.history(KEY)
        stored = DynamicAuditLog.count(KEY)
        seconds = int(args.duration)
        plain = report.per_second(plain_acks, plain_start, seconds)
        dynamic = report.per_second(dynamic_acks, dynamic_start, seconds)

        out(f"# One hot key, {args.writers} writers, {args.limit:g} write units/s per partition")
        out()
        out(f"DynamicShards(max_shards={args.max_shards}, cooldown={args.cooldown:g} s, backoff=(0.05, 0.2) s)")
        out()
        out("| second | unsharded writes/s | dynamic writes/s | dynamic shard count |")
        out("|---:|---:|---:|---:|")
        for second in range(seconds):
            shards = count_at(history, dynamic_start + second + 1)
            out(f"| {second + 1} | {plain[second]} | {dynamic[second]} | {shards} |")
        out()
        final = history[-1]
        steady_from = final.at + 1.0
        steady_end = dynamic_start + args.duration
        steady = [at for at in dynamic_acks if at >= steady_from]
        window = steady_end - steady_from
        plain_steady = [at for at in plain_acks if at >= plain_start + 2.0]
        plain_rate = len(plain_steady) / (args.duration - 2.0)
        out(
            f"- unsharded: {plain_rate:.1f} writes/s after the first 2 s "
            f"({plain_rate / args.limit:.2f} x limit), {plain_failures} writes failed after PynamoDB's retries"
        )
        if window > 1.0:
            rate = len(steady) / window
            out(
                f"- dynamic: {final.count} shards from {final.at - dynamic_start:.1f} s; "
                f"{rate:.1f} writes/s over the last {window:.1f} s = "
                f"{rate / (final.count * args.limit):.2f} x count x limit; {rate / plain_rate:.1f}x unsharded"
            )
        else:
            out(
                f"- dynamic: last growth at {final.at - dynamic_start:.1f} s, too late to measure a steady "
                f"rate; run with a longer --duration"
            )
        out(
            f"- dynamic: history {timeline(history, dynamic_start)} "
            f"(seconds from start, count); {dynamic_failures} writes failed; "
            f"{stored} items stored for {len(dynamic_acks)} acknowledged writes"
        )

        if args.processes > 0:
            processes_run(args, DynamicAuditLog, strategy, server, out)

        if args.ramp_seconds > 0:
            ramp_run(args, server, out)

        figures = metadata_reads(DynamicAuditLog, strategy, args.meta_writes, 16)
        out()
        out("## Metadata reads of a warm key")
        out()
        out("| writes | seconds | metadata reads | cache TTL (s) | reads per 10k writes | reads per TTL |")
        out("|---:|---:|---:|---:|---:|---:|")
        out(
            f"| {figures['writes']:.0f} | {figures['seconds']:.1f} | {figures['reads']:.0f} | "
            f"{figures['ttl']:g} | {figures['per_10k']:.1f} | {figures['per_ttl']:.2f} |"
        )


def _partition_limit(row: Row) -> float:
    return number_in(row.heading, r"([\d.]+) write units/s per partition")


#: Writes/s against the target, with the shard count below; the ramp's writes/s, throttles
#: (a log axis: 0 to 200 a second) and shard counts in panels of their own.
CHARTS = [
    Chart(panels=(
        Lines(x="second", x_label="second of the run", y_label="acknowledged writes/s", height=2.0,
              series=(
                  Series("unsharded", "unsharded writes/s"),
                  Series("DynamicShards", "dynamic writes/s"),
                  Series("target: 0.9 x shard count x partition limit",
                         lambda row: 0.9 * row.number("dynamic shard count") * _partition_limit(row),
                         kind="target", step=True),
                  Series("one partition's limit", _partition_limit, kind="reference"),
              )),
        Lines(x="second", x_label="second of the run", y_label="shards of the key", y_scale="log2",
              y_ticks=(1, 2, 4, 8),
              series=(Series("DynamicShards", "dynamic shard count", step=True),)),
    )),
    Chart(panels=(
        Lines(x="second", x_label="second of the ramp", y_label="writes/s", height=1.6,
              series=(
                  Series("offered", "offered writes/s", kind="reference"),
                  Series("unsharded", "unsharded writes/s"),
                  Series("reactive", "reactive writes/s"),
                  Series("proactive", "proactive writes/s"),
                  Series("one partition's limit", _partition_limit, kind="reference"),
              )),
        Lines(x="second", x_label="second of the ramp", y_label="key-range throttles per second",
              y_scale="symlog", y_ticks=(0, 1, 10, 100, 1000),
              series=(
                  Series("unsharded", "unsharded throttles"),
                  Series("reactive", "reactive throttles"),
                  Series("proactive", "proactive throttles"),
              )),
        Lines(x="second", x_label="second of the ramp", y_label="shards of the key", y_scale="log2",
              y_ticks=(1, 2, 4, 8),
              series=(
                  Series("reactive", "reactive shards", step=True),
                  Series("proactive", "proactive shards", step=True),
              )),
    )),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=12.0, help="seconds per scenario (12)")
    parser.add_argument("--writers", type=int, default=64, help="writer threads (64)")
    parser.add_argument("--limit", type=float, default=20.0, help="write units/s per partition (20)")
    parser.add_argument("--max-shards", type=int, default=8, help="DynamicShards max_shards (8)")
    parser.add_argument("--cooldown", type=float, default=1.0, help="DynamicShards cooldown, s (1.0)")
    parser.add_argument(
        "--processes", type=int, default=4, help="spawned processes of the multi-process run, 0 to skip (4)"
    )
    parser.add_argument("--meta-writes", type=int, default=10_000, help="writes of the metadata-read figure (10000)")
    parser.add_argument("--cache-ttl", type=float, default=10.0, help="DynamicShards cache_ttl, s (10)")
    parser.add_argument("--ramp-seconds", type=float, default=30.0, help="seconds of the ramp, 0 to skip (30)")
    parser.add_argument("--ramp-hold", type=float, default=6.0, help="seconds the ramp's peak is held (6)")
    parser.add_argument("--ramp-limit", type=float, default=12.0, help="the ramp's write units/s per partition (12)")
    parser.add_argument("--ramp-peak", type=float, default=5.0, help="the ramp's peak, x the partition limit (5)")
    parser.add_argument("--ramp-threads", type=int, default=16, help="writer threads of each ramp model (16)")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
