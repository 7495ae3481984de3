"""The fleet simulator runs the library's real code, and charges as DynamoDB Local does with
``simulate_partition_limits``.

Proves: a tiny fleet (processes scaling 2 -> 10 on one key, a reader checking every
acknowledged write) grows the key proactively before it throttles, stores exactly the items
acknowledged and misses none in reads; and the same workload (three processes, each its own
model class and ``DynamicShards``, a hot key offered three times its partition's 20 write
units/s, time injected) gives the same admitted writes, throttles and final shard count in the
fleet simulator as on DynamoDB Local under ``simulate_partition_limits`` (the calibration:
writes within 5 %, throttles within 20 %).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import PutError

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.testing.fleet import Fleet, Scenario, run_scenario
from pynamodb_sharding.testing.plugin import BindModels
from pynamodb_sharding.testing.simulator import simulate_partition_limits

LIMIT = 20.0
OFFERED = 60.0  # writes per second, three times one partition's limit
SECONDS = 3.0
PROCESSES = 3
START = 1_767_225_600.0


def test_a_tiny_fleet_grows_before_it_throttles_and_misses_no_acknowledged_write() -> None:
    tiny = Scenario(
        name="tiny", kind="viral", seconds=10.0, processes=(2, 10), write_units=(0.0, 150.0),
        partition_write_units=50.0, partition_read_units=150.0, max_shards=16, readers=1, read_every=1.0,
    )
    report = run_scenario(tiny, cooldown=2.0, rate_interval=1.0, cache_ttl=2.0, backoff=(0.1, 0.5))
    assert report.errors == {}
    assert report.writes > 500
    assert report.stored_items == report.writes  # weight 1: every acknowledged write stored once
    assert report.reads_checked >= 9
    assert report.missed_writes == 0
    assert report.final_count >= 3  # 150 units/s needs 3 shards of 50
    assert report.key_range_throttle_pct < 1.0
    assert report.growth_lag is not None
    assert report.growth_lag < 2 * 2.0


class LocalShards(ShardMetadata):
    class Meta:
        table_name = "fleet_calibration_shards"


class FleetShards(ShardMetadata):
    Meta = Fleet.meta("fleet_calibration_shards")


class CalibrationBase(ShardedModel):
    key = UnicodeAttribute(hash_key=True)
    at = UnicodeAttribute(range_key=True)


def _processes(
    metadata: type[ShardMetadata], meta: Callable[[], type], now: Callable[[], float], sleep: Callable[[float], None],
) -> list[Any]:
    models = []
    for index in range(PROCESSES):
        strategy = DynamicShards(
            metadata, max_shards=2, cooldown=0.5, backoff=(0.01, 0.05), cache_ttl=1.0, max_attempts=3,
            clock=lambda: START + now(), timer=now, sleep=sleep, random=random.Random(index),
        )
        models.append(type(f"CalibrationProcess{index}", (CalibrationBase,), {
            "Meta": meta(), "shards": Sharding(strategy),
        }))
    return models


def _drive(models: list[Any], sleep: Callable[[float], None]) -> tuple[int, int]:
    """Round-robin writes of one key at OFFERED/s of injected time; (admitted, failed)."""
    admitted = failed = 0
    for serial in range(int(OFFERED * SECONDS)):
        try:
            models[serial % PROCESSES]("hot", f"{serial:06d}").save()
        except PutError:
            failed += 1
        else:
            admitted += 1
        sleep(1.0 / OFFERED)
    return admitted, failed


def test_calibration_against_dynamodb_local(dynamodb_models: BindModels) -> None:
    # DynamoDB Local with the partition-limit simulator, on an injected clock.
    clock = {"now": 0.0}

    def local_sleep(seconds: float) -> None:
        clock["now"] += seconds

    def local_now() -> float:
        return clock["now"]

    local_meta = {"table_name": "fleet_calibration_log", "max_retry_attempts": 0}
    local_models = _processes(LocalShards, lambda: type("Meta", (), local_meta), local_now, local_sleep)
    dynamodb_models(*local_models)
    with simulate_partition_limits(local_models[0], write_units=LIMIT, read_units=3 * LIMIT, clock=local_now,
                                   extra_models=local_models[1:]) as simulator:
        local_admitted, local_failed = _drive(local_models, local_sleep)
    local_throttles = simulator.throttles_by_reason.get("TableWriteKeyRangeThroughputExceeded", 0)
    local_count = local_models[0].shards.refresh("hot")

    # The fleet simulator, the same processes and workload.
    fleet = Fleet(write_units=LIMIT, read_units=3 * LIMIT)
    fleet_models = _processes(
        FleetShards, lambda: Fleet.meta("fleet_calibration_log", max_retry_attempts=0), fleet.loop.monotonic,
        fleet.loop.sleep,
    )
    for model in fleet_models:
        fleet.bind(model)
    with fleet.running():
        fleet_admitted, fleet_failed = _drive(fleet_models, fleet.loop.sleep)
    fleet_throttles = fleet.db.throttles[("fleet_calibration_log", True)] + fleet.db.throttles[
        ("fleet_calibration_shards", True)]
    fleet_count = fleet_models[0].shards.refresh("hot")

    assert local_throttles > 10  # the workload does throttle: the comparison means something
    assert abs(fleet_admitted - local_admitted) <= 0.05 * local_admitted, (fleet_admitted, local_admitted)
    assert abs(fleet_throttles - local_throttles) <= max(3, 0.2 * local_throttles), (fleet_throttles, local_throttles)
    assert fleet_failed == local_failed or abs(fleet_failed - local_failed) <= 0.2 * max(local_failed, 5)
    assert fleet_count == local_count
    stored = sum(1 for _ in fleet.db.items("fleet_calibration_log"))
    assert stored == fleet_admitted
