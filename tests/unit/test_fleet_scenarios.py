"""The fleet simulator's scenarios report what was offered, served, throttled and failed, and a
seed gives one result (no server, virtual time; scaled-down scenarios).

Proves (issue 40):
- the hot read scenario's merged queries arrive at the rate it offers whatever happens to them,
  and its report says how many were served, throttled and failed: a key whose 16 shards take
  more than three times a partition's read units fails most queries without read replicas
  (0.2 reported only the queries served, and called them the rate), and serves them all with 3;
- a merged query's metadata reads are one per process per ``cache_ttl``: at a fixed total query
  rate, their rate grows with the processes (10, 20, 40) and not with the queries;
- a seed gives one result: two runs of a scenario that throttles (botocore retries with jitter,
  a read replica drawn per request) give the same report in one process, and in another one
  whose string hashes differ (``PYTHONHASHSEED``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import attrs
import pytest

from pynamodb_sharding.testing.fleet import HOT_READ, Scenario, run_scenario

#: HOT_READ scaled down ten times in queries and in a partition's read units: 2,000 queries a
#: second of a key of 16 shards, half a read unit each, over partitions of 300: 3.3 times over.
SMALL_HOT_READ = attrs.evolve(
    HOT_READ, name="small_hot_read", seconds=6.0, processes=(200, 200), weight=40, queries=2_000.0,
    partition_read_units=300.0, partition_write_units=100.0, write_units=(10.0, 10.0),
)
CACHED = {"fresh_reads": False, "cache_ttl": 2.0}


def test_the_hot_read_scenario_reports_offered_served_throttled_and_failed_queries() -> None:
    alone = run_scenario(attrs.evolve(SMALL_HOT_READ, read_replicas=0), seed=0, **CACHED)
    replicated = run_scenario(SMALL_HOT_READ, seed=0, **CACHED)
    assert SMALL_HOT_READ.read_replicas == 3
    # Queries arrive at 2,000 a second whatever happens to them (Poisson: within 10 %).
    for report in (alone, replicated):
        assert 0.9 * 2_000 <= report.offered_queries / report.seconds <= 1.1 * 2_000
        assert report.offered_queries == report.queries + report.failed_queries
    assert alone.offered_queries == replicated.offered_queries  # the same seed, the same arrivals
    assert alone.failed_queries > alone.offered_queries / 3
    assert alone.data_read_throttles > alone.offered_queries
    assert replicated.failed_queries == 0
    assert replicated.queries == replicated.offered_queries
    assert replicated.throttled_queries <= replicated.offered_queries / 100
    assert replicated.missed_writes == 0


def test_metadata_reads_are_one_per_process_per_cache_ttl() -> None:
    """100 merged queries a second in all of a key of 4 shards, from 10, 20 and 40 processes
    (weight 1), each caching the count for 1 s."""
    reads = {}
    for processes in (10, 20, 40):
        scenario = attrs.evolve(SMALL_HOT_READ, processes=(processes, processes), weight=1, queries=100.0,
                                shards=4, read_replicas=0, seconds=6.0)
        report = run_scenario(scenario, seed=1, fresh_reads=False, cache_ttl=1.0)
        assert report.failed_queries == 0
        reads[processes] = report.metadata_reads_per_second
        # Per query, processes / (cache_ttl x query rate): 0.1, 0.2, 0.4.
        assert report.metadata_requests_per_query is not None
        assert abs(report.metadata_requests_per_query - processes / 100.0) <= 0.3 * processes / 100.0
    for processes, rate in reads.items():
        assert abs(rate - processes / 1.0) <= 0.3 * processes, reads


#: A small hot read key that throttles without replicas (botocore retries with jitter).
THROTTLED = Scenario(
    name="throttled_hot_read", kind="hot_read", seconds=6.0, processes=(20, 20), weight=2, write_units=(5.0, 5.0),
    queries=300.0, shards=4, partition_read_units=60.0, partition_write_units=50.0, max_shards=8,
)


def _report(scenario: Scenario) -> dict[str, object]:
    found = attrs.asdict(run_scenario(scenario, seed=3, **CACHED))
    found.pop("wall_seconds")
    return found


def test_a_seed_gives_one_result() -> None:
    first = _report(THROTTLED)
    assert first["data_read_throttles"] > 0
    assert first["throttled_queries"] > 0
    assert _report(THROTTLED) == first
    replicated = attrs.evolve(THROTTLED, read_replicas=2)
    assert _report(replicated) == _report(replicated)
    code = (
        "import attrs, json; from tests.unit.test_fleet_scenarios import THROTTLED, _report; "
        "print(json.dumps(_report(THROTTLED), sort_keys=True, default=repr))"
    )
    environment = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, check=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert json.loads(other.stdout) == json.loads(json.dumps(first, sort_keys=True, default=repr))


def test_the_retries_of_a_process_that_imported_the_async_side_wait_on_virtual_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``pynamodb_sharding.aio`` routes every sharded model's client, whose retries then pause
    through ``_pool.pause`` instead of botocore's sleep: in a fleet they wait on its virtual time
    too (before: the wall clock's, a simulated minute of throttled reads never ending)."""
    import pynamodb_sharding.aio  # noqa: F401  (arms every sharded model's client)

    slept: list[float] = []
    real_sleep, fleet_thread = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        # The fleet runs on this thread; other threads of the process (the test runner's, pools
        # left by other tests) sleep as they would: given no sleep at all, a thread polling in a
        # loop spun and filled this list until the worker ran out of memory.
        if threading.current_thread() is fleet_thread:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    report = run_scenario(THROTTLED, seed=3, **CACHED)
    assert report.data_read_throttles > 0  # retried
    assert slept == []
