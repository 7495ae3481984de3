"""64 writers on one hot key under the partition-limit simulator, in threads and in processes.

The machine sustains ~250-300 single writes/s, so a partition here takes 12 write units/s and a
key may grow to 8 shards (96 writes/s in all). Proves, against DynamoDB Local: the count grows
to ``max_shards``; history entries strictly increase in time and count, at most one growth per
cooldown window, and every growth a writer reported is in the history (no lost or double
growth); no write fails; every acknowledged write is read back exactly once (count and per
item) and nothing else is stored; writes after the last growth reach every shard.

The write rate after growth (against ``count x limit``) is a wall-clock figure, measured by
``benchmarks/bench_dynamic.py`` (threads, and ``--processes`` for the multi-process case), not
asserted here.

The multi-process variant runs 4 spawned processes x 16 threads; the simulator is per process,
so each process gets a quarter of the partition limit: 2 units/s each, 8 units/s in all.

The writers, the strategy's cooldown, cache and backoffs, and the simulator share a virtual
clock (``tests/virtual_time.py``, one per process, in step): each writer writes once per
``THINK`` seconds of it (waiting for its write, backoffs included, as a hammering client
does), and the clock moves once every writer is thinking or backing off. The offered load and
the limits are then the same on an idle machine and under a load average of 20.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding.signals import shard_count_changed
from pynamodb_sharding.testing.simulator import simulate_partition_limits
from tests.growth import growth_problems
from tests.virtual_time import VirtualClock, closed_loop_writes, run_in_processes

KEY = "/shared/firetvGen2.txt"
# Write units per second per physical partition: 8 shards x 12 = 96 writes/s, well below what
# this machine sustains even while other test suites share its two cores, so that the writers
# keep the partitions throttled until the count reaches max_shards.
LIMIT = 12.0
# Four client processes cost more CPU per write than threads: their variant gets 8 units/s
# (2 per process), 64 writes/s at 8 shards.
PROCESS_LIMIT = 8.0
MAX_SHARDS = 8
COOLDOWN = 1.0
#: Seconds between two writes of one writer: 64 writers offer 256 writes/s, above the 96 that
#: 8 shards take, so the key keeps being throttled until it has them all.
THINK = 0.25
#: Seconds of writes: the growths to 8 shards take about 3 cooldowns; the rest reaches every shard.
SECONDS = 8.0
#: The clock of the strategy, the simulator and the writers (each process's own, in step).
CLOCK = VirtualClock()


class HotKeyShards(ShardMetadata):
    class Meta:
        table_name = "hot_key_shards"


class HotAuditLog(ShardedModel):
    class Meta:
        table_name = "hot_audit_log"
        max_retry_attempts = 1

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    shards = Sharding(
        DynamicShards(
            HotKeyShards,
            max_shards=MAX_SHARDS,
            cooldown=COOLDOWN,
            backoff=(0.05, 0.2),
            cache_ttl=5.0,
            max_attempts=1000,
            # Growths written to at once (the fleet protocol of fresh reads, stored when the
            # table is created): the writes after the last growth reach every shard in the run.
            fresh_reads=True,
            clock=CLOCK,
            timer=CLOCK,
            sleep=CLOCK.sleep,
        )
    )


class Run:
    """What the writers of one process saw: acknowledged writes and the growths they made."""

    def __init__(self) -> None:
        self.acks: list[int] = []  # range keys of the acknowledged writes
        self.failures: list[str] = []
        self.growths: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def on_change(self, sender: Any, key: str, old: int, new: int, reason: str) -> None:
        with self._lock:
            self.growths.append((old, new))


def run_writers(threads: int, base: int, limit: float, sync: Callable[[], object] | None = None) -> Run:
    """``threads`` writers for ``SECONDS`` of the clock under a partition limit of ``limit``."""
    run = Run()
    with (
        simulate_partition_limits(HotAuditLog, write_units=limit, clock=CLOCK),
        shard_count_changed.connected_to(run.on_change, sender=HotAuditLog),
    ):
        run.acks, run.failures = closed_loop_writes(
            lambda n: HotAuditLog(KEY, n, user_id=f"u{n // 1_000_000 % 1000}"), SECONDS, clock=CLOCK,
            writers=threads, think=THINK, base=base, sync=sync)
    return run


def check_run(acks: list[int], reported: list[tuple[int, int]]) -> None:
    """The count reached ``MAX_SHARDS`` soundly and every acknowledged write is stored once."""
    history = HotAuditLog.shards.history(KEY)
    assert MAX_SHARDS == history[-1].count
    assert MAX_SHARDS == HotAuditLog.shards.shard_count(KEY)
    assert [] == growth_problems(history, reported, COOLDOWN)

    stored = [item.accessed_at for item in HotAuditLog.query(KEY)]
    assert len(acks) == len(stored)
    assert sorted(acks) == sorted(stored)
    assert set(range(1, MAX_SHARDS + 1)) == {item.shards for item in HotAuditLog.query(KEY)}


def test_64_threads_grow_one_hot_key(dynamodb_models: Callable[..., Any]) -> None:
    """64 threads of one process: the key grows soundly to 8 shards and no write is lost."""
    dynamodb_models(HotAuditLog)
    run = run_writers(64, 0, LIMIT)
    assert [] == run.failures
    check_run(run.acks, run.growths)


def _process(endpoint: dict[str, Any], tables: tuple[str, str], index: int, start: float, *,
             sync: Callable[[], object]) -> Any:
    """A spawned writer process: bind the models by hand, then write like the threaded test."""
    for model, table in ((HotAuditLog, tables[0]), (HotKeyShards, tables[1])):
        for name, value in endpoint.items():
            setattr(model.Meta, name, value)
        model.Meta.table_name = table
        model._connection = None
    HotAuditLog.shards.strategy._random = random.Random()
    CLOCK.set(start)
    run = run_writers(16, (index + 1) * 1_000_000_000, PROCESS_LIMIT / 4, sync)
    return run.acks, run.growths, run.failures


def test_4_processes_x_16_threads_grow_one_hot_key(dynamodb_models: Callable[..., Any], dynamodb_local: Any) -> None:
    """4 processes, each with its own cache: growths neither lost nor doubled, no write lost."""
    dynamodb_models(HotAuditLog)
    endpoint = {
        "host": dynamodb_local.endpoint,
        "region": dynamodb_local.region,
        "aws_access_key_id": dynamodb_local.aws_access_key_id,
        "aws_secret_access_key": dynamodb_local.aws_secret_access_key,
    }
    tables = (HotAuditLog.Meta.table_name, HotKeyShards.Meta.table_name)
    results = run_in_processes(_process, [(endpoint, tables, i, CLOCK.now) for i in range(4)])
    CLOCK.advance(SECONDS)  # the writers' clocks went on at least this far
    acks = [ack for result in results for ack in result[0]]
    growths = [growth for result in results for growth in result[1]]
    assert [] == [failure for result in results for failure in result[2]]
    check_run(acks, growths)
