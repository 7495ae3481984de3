"""The hot-key demo's scenario: the load, the samples and the check, with no terminal.

A file's audit log goes viral: every write lands on one partition key. DynamoDB Local never
throttles, so :func:`~pynamodb_sharding.testing.simulator.simulate_partition_limits` makes it
answer like DynamoDB at a per-partition ceiling scaled down to ``limit`` units per second.

1. *Unsharded*: writers hammer a plain PynamoDB model; the key's partition refuses everything
   over the ceiling, so the write rate stays flat at about ``limit`` while throttles pile up.
2. *Dynamic*: the same load on a ``DynamicShards`` model; each throttle past the cooldown
   doubles the key's shard count (recorded in the metadata table) and the rate climbs with it.
3. *Check*: both keys are read back (the sharded one through the merged fan-out query) and
   every acknowledged write must come back exactly once, in sort-key order.

:func:`run_scenario` tells a :class:`ScenarioView` what happens as it happens and returns a
:class:`DemoResult`; it needs neither rich nor matplotlib (the live display and the chart are
:mod:`pynamodb_sharding.demo.display` and :mod:`pynamodb_sharding.demo.chart`).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import attrs
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding._descriptor import Sharding, shard_manager
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import running_dynamodb_local
from pynamodb_sharding.testing.simulator import PartitionLimitSimulator, simulate_partition_limits

__all__ = [
    "HOT_FILE",
    "DemoConfig",
    "DemoResult",
    "PhaseResult",
    "ReadBackCheck",
    "Sample",
    "ScenarioView",
    "SilentView",
    "check_read_back",
    "run_scenario",
]

#: The hot key of the story: one shared file whose audit log every access writes to.
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
        """The AWS example waits 30 s between growths; scaled so that a phase sees every growth."""
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
    errors: tuple[str, ...] = ()  # the first few errors of writes given up, one line each

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
    """Both phases, the dynamic key's shard history, and whether every check passed."""

    config: DemoConfig
    endpoint: str
    phases: tuple[PhaseResult, ...]
    #: The dynamic key's shard counts as the metadata table recorded them:
    #: ``(seconds since the dynamic phase started, count)``, oldest first; the count the key
    #: had before the phase (one shard, never recorded with a time) is at 0.
    history: tuple[tuple[float, int], ...] = ()

    @property
    def chart(self) -> Path:
        """Where :func:`~pynamodb_sharding.demo.run_demo` saves the chart (``config.out``)."""
        return self.config.out

    @property
    def passed(self) -> bool:
        return all(phase.check.passed for phase in self.phases)


# -- who watches ------------------------------------------------------------------------------


class ScenarioView(Protocol):
    """What :func:`run_scenario` tells whoever watches it, in the order it happens."""

    def server_ready(self, endpoint: str, source: str, seconds: float) -> None:
        """DynamoDB Local answers at ``endpoint``; ``source`` says where it came from."""

    def tables_ready(self, tables: Sequence[str]) -> None:
        """The demo's tables exist under these names."""

    def load_started(self, phase: str, model: str) -> None:
        """The writers of ``phase`` start hammering the hot key through ``model``."""

    def sampled(self, phase: str, samples: Sequence[Sample]) -> None:
        """A new sample (the last of ``samples``, all of the phase so far) was taken."""

    def load_stopped(self, phase: str) -> None:
        """The writers of ``phase`` stopped (also when the phase ends with an exception)."""

    def phase_checked(self, phase: PhaseResult) -> None:
        """The hot key of ``phase`` was read back and checked."""


class SilentView:
    """A :class:`ScenarioView` that shows nothing: for tests, benchmarks and scripts."""

    def server_ready(self, endpoint: str, source: str, seconds: float) -> None:
        pass

    def tables_ready(self, tables: Sequence[str]) -> None:
        pass

    def load_started(self, phase: str, model: str) -> None:
        pass

    def sampled(self, phase: str, samples: Sequence[Sample]) -> None:
        pass

    def load_stopped(self, phase: str) -> None:
        pass

    def phase_checked(self, phase: PhaseResult) -> None:
        pass


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
                # One process on one host: a growth is in use one cooldown after it is made
                # (cache_ttl + clock_skew, the default fleet protocol's delay, stored when the
                # demo creates its metadata table).
                cache_ttl=config.cooldown / 2,
                clock_skew=config.cooldown / 2,
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
    view: ScenarioView,
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
                view.sampled(name, samples)
        finally:
            load.stop()
        throttles = _throttles(simulator)
    return tuple(samples), load, throttles


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


# -- the scenario -----------------------------------------------------------------------------


def run_scenario(config: DemoConfig, view: ScenarioView | None = None) -> DemoResult:
    """Run both phases on DynamoDB Local and check the read-back; see the module docstring.

    Uses the server ``DYNAMODB_LOCAL_ENDPOINT`` names, else starts one for the run; the tables
    are created for the run and deleted after it.

    Args:
        config: the load and the simulated limit (``config.out`` is not used here).
        view: told what happens as it happens; default :class:`SilentView`.

    Returns:
        The result; ``result.passed`` is False if any acknowledged write was not read back
        exactly once and in order.

    Raises:
        pynamodb_sharding.testing.DynamoDBLocalError: DynamoDB Local cannot be started.
    """
    if view is None:
        view = SilentView()
    started = time.monotonic()
    source = "DYNAMODB_LOCAL_ENDPOINT" if os.environ.get("DYNAMODB_LOCAL_ENDPOINT") else "started for this demo"
    with running_dynamodb_local() as server:
        view.server_ready(server.endpoint, source, time.monotonic() - started)
        plain, sharded = _models(config)
        with bound_models(server, plain, sharded) as tables:
            view.tables_ready(sorted(tables.values()))
            sequence = itertools.count(1)
            phases = []
            runs: list[tuple[str, type[Model], Callable[[], int]]] = [
                ("unsharded", plain, lambda: 1),
                ("dynamic", sharded, lambda: shard_manager(sharded).shard_count(HOT_FILE)),
            ]
            # The metadata table dates the history with the wall clock; the count a key had
            # before its first growth is at epoch 0 (it had no metadata item).
            dynamic_started = 0.0
            for name, model, count in runs:
                if name == "dynamic":
                    dynamic_started = time.time()
                view.load_started(name, model.__name__)
                try:
                    samples, load, throttles = _run_phase(name, model, config, sequence, count, view)
                finally:
                    view.load_stopped(name)
                read, per_shard = _read_back(model)
                phase = PhaseResult(
                    name=name,
                    seconds=samples[-1].at,
                    samples=samples,
                    acknowledged=len(load.acknowledged),
                    failed=load.failed,
                    throttles=throttles,
                    final_shards=count(),
                    items_per_shard=per_shard,
                    check=check_read_back(load.acknowledged, load.attempted, read),
                    errors=tuple(load.errors),
                )
                view.phase_checked(phase)
                phases.append(phase)
            entries = shard_manager(sharded).history(HOT_FILE)
            history = tuple((max(0.0, float(entry.at) - dynamic_started), int(entry.count)) for entry in entries)
    return DemoResult(config=config, endpoint=server.endpoint, phases=tuple(phases), history=history)
