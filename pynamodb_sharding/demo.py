"""The hot-key demo behind ``pynamodb-sharding demo`` (seed 000's story, with real requests).

A file's audit log goes viral: every write lands on one partition key. DynamoDB Local never
throttles, so :func:`~pynamodb_sharding.testing.simulator.simulate_partition_limits` makes it
answer like DynamoDB at a per-partition ceiling scaled down to ``limit`` units per second.

1. *Unsharded*: writers hammer a plain PynamoDB model; the key's partition refuses everything
   over the ceiling, so the write rate stays flat at about ``limit`` while throttles pile up.
2. *Dynamic*: the same load on a ``DynamicShards`` model; each throttle past the cooldown
   doubles the key's shard count (recorded in the metadata table) and the rate climbs with it.
3. *Check*: both keys are read back (the sharded one through the merged fan-out query) and
   every acknowledged write must come back exactly once, in sort-key order.

The result is a live progress display, a summary table and a PNG chart.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from pynamodb_sharding.descriptor import Sharding
from pynamodb_sharding.dynamic import DynamicShards
from pynamodb_sharding.metadata import ShardMetadata
from pynamodb_sharding.model import ShardedModel
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local
from pynamodb_sharding.testing.simulator import PartitionLimitSimulator, simulate_partition_limits

__all__ = ["DemoConfig", "DemoResult", "PhaseResult", "ReadBackCheck", "check_read_back", "run_demo"]

#: The hot key of the story (seed 000).
HOT_FILE = "/shared/firetvGen2.txt"

#: Seconds between two samples of the timeline (and two refreshes of the display).
SAMPLE_EVERY = 0.5


@attrs.frozen
class DemoConfig:
    """What ``pynamodb-sharding demo`` was asked to do.

    Attributes:
        duration: total seconds of load, split evenly between the two phases.
        writers: writer threads per phase.
        limit: simulated write units per second per partition.
        max_shards: the most shards the dynamic model grows to.
        out: where the PNG chart is saved.
    """

    duration: float = 60.0
    writers: int = 16
    limit: float = 50.0
    max_shards: int = 4
    out: Path = Path("hot-key-demo.png")

    @property
    def phase_seconds(self) -> float:
        return self.duration / 2

    @property
    def cooldown(self) -> float:
        """Seed 000 waits 30 s between growths; scaled so that a phase sees every growth."""
        return max(0.3, self.phase_seconds / 10)


@attrs.frozen
class Sample:
    """The counters of one phase at one moment."""

    at: float  # seconds since the phase started
    writes: int  # acknowledged writes so far
    throttles: int  # refused attempts so far (botocore retries included)
    shards: int  # the key's shard count


@attrs.frozen
class ReadBackCheck:
    """What reading the hot key back found, against what the writers were told was written."""

    acknowledged: int
    read: int
    duplicates: int
    missing: int
    unexpected: int  # read but never acknowledged nor attempted
    in_order: bool

    @property
    def passed(self) -> bool:
        return self.in_order and self.duplicates == 0 and self.missing == 0 and self.unexpected == 0

    def describe(self) -> str:
        if self.passed:
            return (
                f"all {self.acknowledged} acknowledged writes read back exactly once, "
                f"in sort-key order ({self.read} items read)"
            )
        return (
            f"{self.acknowledged} acknowledged, {self.read} read: {self.missing} missing, "
            f"{self.duplicates} duplicated, {self.unexpected} never written, "
            f"{'in order' if self.in_order else 'OUT OF ORDER'}"
        )


def check_read_back(acknowledged: Sequence[int], attempted: Sequence[int], read: Sequence[int]) -> ReadBackCheck:
    """Compare the sort keys read back with the acknowledged (and all attempted) writes.

    A write that failed on the client may still have reached the table (a timeout after the
    server applied it), so items read but only *attempted* are not errors; items read that
    were never attempted, duplicates, missing acknowledged writes and disorder are.
    """
    read_set = set(read)
    acked = set(acknowledged)
    return ReadBackCheck(
        acknowledged=len(acked),
        read=len(read),
        duplicates=len(read) - len(read_set),
        missing=len(acked - read_set),
        unexpected=len(read_set - set(attempted) - acked),
        in_order=all(a < b for a, b in itertools.pairwise(read)),
    )


@attrs.frozen
class PhaseResult:
    """One phase of the demo: its timeline, its totals and its read-back check."""

    name: str
    seconds: float
    samples: tuple[Sample, ...]
    acknowledged: int
    failed: int
    throttles: int
    final_shards: int
    items_per_shard: dict[int, int]
    check: ReadBackCheck

    @property
    def mean_rate(self) -> float:
        return self.acknowledged / self.seconds if self.seconds else 0.0

    def rate_over_last(self, fraction: float) -> float:
        """Writes per second over the last ``fraction`` of the phase (its steady state)."""
        start = self.seconds * (1 - fraction)
        before = max((s for s in self.samples if s.at <= start), key=lambda s: s.at, default=None)
        if before is None or not self.samples:
            return self.mean_rate
        end = self.samples[-1]
        return (end.writes - before.writes) / (end.at - before.at) if end.at > before.at else 0.0

    def rates(self, window: float = 1.0) -> list[tuple[float, float, float]]:
        """``(time, writes/s, throttles/s)`` over sliding windows of ``window`` seconds."""
        points = []
        for sample in self.samples:
            earlier = [s for s in self.samples if s.at <= sample.at - window]
            if not earlier:
                continue
            base = earlier[-1]
            span = sample.at - base.at
            points.append((sample.at, (sample.writes - base.writes) / span, (sample.throttles - base.throttles) / span))
        return points


@attrs.frozen
class DemoResult:
    """Both phases, where the chart went, and whether every check passed."""

    config: DemoConfig
    endpoint: str
    phases: tuple[PhaseResult, ...]
    chart: Path

    @property
    def passed(self) -> bool:
        return all(phase.check.passed for phase in self.phases)


# -- the models -------------------------------------------------------------------------------


def _models(config: DemoConfig) -> tuple[type[Model], type[ShardedModel]]:
    """Fresh model classes for one run (the dynamic strategy takes the run's settings)."""

    class AuditLog(Model):
        """The unsharded audit log: one partition key per file."""

        class Meta:
            table_name = "demo_audit_log"
            max_retry_attempts = 3

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        user_id = UnicodeAttribute()

    class AuditLogShards(ShardMetadata):
        class Meta:
            table_name = "demo_audit_log_shards"

    class ShardedAuditLog(ShardedModel):
        """The same audit log with one added line: dynamic write sharding."""

        class Meta:
            table_name = "demo_sharded_audit_log"
            max_retry_attempts = 3

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        user_id = UnicodeAttribute()
        shards = Sharding(
            DynamicShards(
                AuditLogShards,
                max_shards=config.max_shards,
                cooldown=config.cooldown,
                backoff=(0.05, max(0.05, config.cooldown / 4)),
                cache_ttl=1.0,
            )
        )

    return AuditLog, ShardedAuditLog


# -- one phase --------------------------------------------------------------------------------


class _Load:
    """Writer threads saving new audit entries of the hot file as fast as they are let."""

    def __init__(self, model: type[Model], writers: int, sequence: Iterator[int]) -> None:
        self.model = model
        self.writers = writers
        self._sequence = sequence
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.acknowledged: list[int] = []
        self.attempted: list[int] = []
        self.failed = 0
        self.errors: list[str] = []
        self._threads = [threading.Thread(target=self._write, name=f"writer-{n}") for n in range(writers)]

    def _write(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                accessed_at = next(self._sequence)
                self.attempted.append(accessed_at)
            item = self.model(HOT_FILE, accessed_at=accessed_at, user_id=f"user{accessed_at % 97}")
            try:
                item.save()
            except Exception as error:  # a throttled write that ran out of retries, mostly
                with self._lock:
                    self.failed += 1
                    if len(self.errors) < 3:
                        self.errors.append(f"{type(error).__name__}: {error}")
                continue
            with self._lock:
                self.acknowledged.append(accessed_at)

    @property
    def writes(self) -> int:
        with self._lock:
            return len(self.acknowledged)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def _throttles(simulator: PartitionLimitSimulator) -> int:
    return sum(simulator.throttles.values())


def _run_phase(
    name: str,
    model: type[Model],
    config: DemoConfig,
    sequence: Iterator[int],
    shard_count: Callable[[], int],
    show: Callable[[str, float, list[Sample]], None],
) -> tuple[tuple[Sample, ...], _Load, int]:
    samples: list[Sample] = []
    with simulate_partition_limits(model, write_units=config.limit, read_units=None) as simulator:
        load = _Load(model, config.writers, sequence)
        started = time.monotonic()
        load.start()
        try:
            samples.append(Sample(0.0, 0, 0, shard_count()))
            while (elapsed := time.monotonic() - started) < config.phase_seconds:
                time.sleep(min(SAMPLE_EVERY, max(0.0, config.phase_seconds - elapsed)))
                at = time.monotonic() - started
                samples.append(Sample(at, load.writes, _throttles(simulator), shard_count()))
                show(name, at, samples)
        finally:
            load.stop()
        throttles = _throttles(simulator)
    return tuple(samples), load, throttles


# -- display ----------------------------------------------------------------------------------


class _Display:
    """A live panel on a terminal; a line every few seconds when the output is a file or pipe."""

    def __init__(self, console: Console, config: DemoConfig) -> None:
        self.console = console
        self.config = config
        self._live: Live | None = None
        self._last_line = 0.0

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        if self.console.is_terminal:
            with Live(console=self.console, refresh_per_second=4, transient=True) as live:
                self._live = live
                try:
                    yield
                finally:
                    self._live = None
        else:
            yield

    def show(self, phase: str, at: float, samples: list[Sample]) -> None:
        last = samples[-1]
        earlier = [s for s in samples if s.at <= at - 1.0] or samples[:1]
        base = earlier[-1]
        span = max(at - base.at, 1e-9)
        rate = (last.writes - base.writes) / span
        throttle_rate = (last.throttles - base.throttles) / span
        if self._live is not None:
            table = Table.grid(padding=(0, 2))
            table.add_row(Text(phase, style="bold"), f"{at:5.1f} / {self.config.phase_seconds:.0f} s")
            table.add_row("writes/s", f"{rate:7.1f}")
            table.add_row("throttles/s", f"{throttle_rate:7.1f}")
            table.add_row("shard count", str(last.shards))
            table.add_row("acknowledged", str(last.writes))
            bar = ProgressBar(total=self.config.phase_seconds, completed=at, width=40)
            self._live.update(Group(table, bar))
        elif at - self._last_line >= 2.0 or at >= self.config.phase_seconds:
            self._last_line = at
            self.console.print(
                f"  {phase:<9} t={at:5.1f}s  writes/s={rate:7.1f}  throttles/s={throttle_rate:7.1f}  "
                f"shards={last.shards}  acknowledged={last.writes}",
                highlight=False,
            )
        if at >= self.config.phase_seconds:
            self._last_line = 0.0


# -- read back --------------------------------------------------------------------------------


def _read_back(model: type[Model]) -> tuple[list[int], dict[int, int]]:
    """The hot key's sort keys in query order, and the items per shard (0 when unsharded)."""
    keys: list[int] = []
    per_shard: dict[int, int] = {}
    for item in model.query(HOT_FILE):
        keys.append(int(item.attribute_values["accessed_at"]))
        shard = getattr(item, "shards", None) if issubclass(model, ShardedModel) else 0
        per_shard[shard or 0] = per_shard.get(shard or 0, 0) + 1
    return keys, dict(sorted(per_shard.items()))


# -- chart ------------------------------------------------------------------------------------


def _chart(result: DemoResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (rates, shards) = plt.subplots(2, 1, sharex=True, figsize=(9, 6.5), gridspec_kw={"height_ratios": [3, 1.4]})
    colours = {"unsharded": "tab:red", "dynamic": "tab:blue"}
    for phase in result.phases:
        points = phase.rates()
        colour = colours.get(phase.name)
        label = "unsharded PynamoDB model" if phase.name == "unsharded" else "DynamicShards model"
        rates.plot([p[0] for p in points], [p[1] for p in points], color=colour, linewidth=2, label=label)
        shards.step(
            [s.at for s in phase.samples],
            [s.shards for s in phase.samples],
            where="post",
            color=colour,
            linewidth=2,
            label=label,
        )
    counts = sorted({s.shards for phase in result.phases for s in phase.samples})
    for n, count in enumerate(counts):
        rates.axhline(
            result.config.limit * count,
            color="grey",
            linestyle="--",
            linewidth=1,
            label="partition limit \N{MULTIPLICATION SIGN} shard count" if n == 0 else None,
        )
    top = counts[-1]
    rates.set_ylabel("acknowledged writes / s")
    rates.set_title(
        f"One hot key under a simulated {result.config.limit:g} WCU/s partition limit, {result.config.writers} writers"
    )
    rates.legend(loc="upper left")
    rates.grid(alpha=0.3)
    rates.set_ylim(bottom=0)
    shards.set_ylabel("shard count")
    shards.set_xlabel("seconds since the phase started")
    shards.set_ylim(0, top + 1)
    shards.legend(loc="upper left")
    shards.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


# -- summary ----------------------------------------------------------------------------------


def _summary(result: DemoResult) -> Table:
    table = Table(title="hot-key demo", title_justify="left")
    table.add_column("")
    for phase in result.phases:
        table.add_column(phase.name, justify="right")
    rows: list[tuple[str, Callable[[PhaseResult], str]]] = [
        ("acknowledged writes", lambda p: str(p.acknowledged)),
        ("mean writes/s", lambda p: f"{p.mean_rate:.1f}"),
        ("writes/s, last third", lambda p: f"{p.rate_over_last(1 / 3):.1f}"),
        ("throttled attempts", lambda p: str(p.throttles)),
        ("writes given up", lambda p: str(p.failed)),
        ("final shard count", lambda p: str(p.final_shards)),
        ("items per shard", lambda p: ", ".join(f"{k or '-'}:{v}" for k, v in p.items_per_shard.items()) or "-"),
        ("read back", lambda p: "exactly once, in order" if p.check.passed else "FAILED"),
    ]
    for label, value in rows:
        table.add_row(label, *(value(phase) for phase in result.phases))
    return table


# -- the demo ---------------------------------------------------------------------------------


def run_demo(config: DemoConfig, console: Console | None = None) -> DemoResult:
    """Run the demo, print its progress and summary, save the chart; see the module docstring.

    Returns:
        The result; ``result.passed`` is False if any acknowledged write was not read back
        exactly once and in order.

    Raises:
        pynamodb_sharding.testing.DynamoDBLocalError: DynamoDB Local cannot be started.
    """
    if console is None:
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=120)
    console.print(
        f"[bold]pynamodb-sharding demo[/bold]: {config.writers} writers, one hot key ({HOT_FILE}), "
        f"simulated limit {config.limit:g} write units/s per partition, "
        f"{config.phase_seconds:g} s per phase"
    )
    started = time.monotonic()
    source = "DYNAMODB_LOCAL_ENDPOINT" if os.environ.get("DYNAMODB_LOCAL_ENDPOINT") else "started for this demo"
    with running_dynamodb_local() as server:
        console.print(f"DynamoDB Local at {server.endpoint} ({source}, {time.monotonic() - started:.1f} s)")
        plain, sharded = _models(config)
        with bound_models(server, plain, sharded) as tables:
            console.print("tables: " + ", ".join(sorted(tables.values())))
            sequence = itertools.count(1)
            display = _Display(console, config)
            phases = []
            runs: list[tuple[str, type[Model], Callable[[], int]]] = [
                ("unsharded", plain, lambda: 1),
                ("dynamic", sharded, lambda: sharded._shard_manager().shard_count(HOT_FILE)),
            ]
            for name, model, count in runs:
                console.print(
                    f"[bold]{name}[/bold]: {config.writers} writers on {model.__name__} for {config.phase_seconds:g} s"
                )
                with display.running():
                    samples, load, throttles = _run_phase(name, model, config, sequence, count, display.show)
                if load.errors:
                    example = " ".join(load.errors[0].split())[:150]
                    console.print(f"  {load.failed} writes given up, e.g. {example}", highlight=False, markup=False)
                read, per_shard = _read_back(model)
                check = check_read_back(load.acknowledged, load.attempted, read)
                phases.append(
                    PhaseResult(
                        name=name,
                        seconds=samples[-1].at,
                        samples=samples,
                        acknowledged=len(load.acknowledged),
                        failed=load.failed,
                        throttles=throttles,
                        final_shards=count(),
                        items_per_shard=per_shard,
                        check=check,
                    )
                )
                console.print(f"  {name} read back: {check.describe()}", highlight=False)
            result = DemoResult(config=config, endpoint=server.endpoint, phases=tuple(phases), chart=config.out)
            history = sharded._shard_manager().history(HOT_FILE)
            changes = ", ".join(f"{entry.count} at +{entry.at - history[0].at:.1f}s" for entry in history)
            console.print(f"dynamic shard history (metadata table): {changes}", highlight=False)
    console.print(_summary(result))
    _chart(result, config.out)
    console.print(f"chart: {config.out.resolve()}", highlight=False)
    unsharded, dynamic = result.phases
    if unsharded.rate_over_last(1 / 3) > 0:
        console.print(
            f"steady write rate: {dynamic.rate_over_last(1 / 3):.1f}/s with {dynamic.final_shards} shards vs "
            f"{unsharded.rate_over_last(1 / 3):.1f}/s unsharded "
            f"({dynamic.rate_over_last(1 / 3) / unsharded.rate_over_last(1 / 3):.1f}x)",
            highlight=False,
        )
    verdict = "PASSED" if result.passed else "FAILED"
    console.print(
        f"check {verdict}: " + "; ".join(f"{p.name}: {p.check.describe()}" for p in result.phases),
        highlight=False,
    )
    return result
