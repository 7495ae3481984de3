"""The settings that keep a fleet's metadata cheap, without a server: which count a writer
may use while a growth is not in effect yet (``ShardState.count_at``, ``delayed_growth``), and
sampled rate reports (``rate_reports``)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding import DynamicShards, ShardingDefinitionError, ShardMetadata
from pynamodb_sharding._metadata import ShardState
from pynamodb_sharding._protocol import FleetProtocol, StoredProtocol
from pynamodb_sharding._strategies import HistoryEntry
from tests.clock import Clock


class SettingsShards(ShardMetadata):
    class Meta:
        table_name = "settings_shards"


def state(count: int, *entries: tuple[float, int]) -> ShardState:
    history = tuple(HistoryEntry(at=at, count=n) for at, n in entries)
    return ShardState(count=count, last_updated=max((at for at, _ in entries), default=0.0), history=history)


GROWN = state(4, (0.0, 1), (100.0, 2), (200.0, 4))


@pytest.mark.parametrize(("at", "expected"), [(50, 1), (100, 2), (150, 2), (199.9, 2), (200, 4), (10_000, 4)])
def test_count_at_is_the_count_of_the_latest_change_by_then(at: float, expected: int) -> None:
    assert GROWN.count_at(at) == expected


def test_a_shrink_is_in_effect_at_once() -> None:
    shrunk = state(2, (0.0, 1), (100.0, 4), (300.0, 2))
    assert shrunk.count_at(250) == 2  # 4 was in effect, but nothing above 2 is written any more
    assert shrunk.count_at(50) == 1


def test_before_any_recorded_change_the_oldest_count_is_used() -> None:
    created = state(1, (500.0, 1))  # the item was created at 500 with the initial count
    assert created.count_at(0) == 1
    grown_at_creation = state(4, (0.0, 1), (500.0, 4))
    assert grown_at_creation.count_at(499) == 1


def test_a_count_set_by_hand_is_in_effect_from_its_last_updated() -> None:
    by_hand = ShardState(count=8, last_updated=300.0, history=(HistoryEntry(0.0, 1), HistoryEntry(100.0, 2)))
    assert by_hand.count_at(200) == 2
    assert by_hand.count_at(300) == 8


growths = st.lists(st.tuples(st.floats(0, 1e6), st.integers(1, 64)), min_size=1, max_size=8).map(
    lambda entries: sorted({at: n for at, n in entries}.items())
)


@given(growths, st.floats(0, 1e6), st.floats(0, 1e6))
def test_count_at_never_exceeds_a_count_in_effect_and_never_the_current(
    entries: list[tuple[float, int]], first: float, second: float
) -> None:
    grown = state(entries[-1][1], *entries)
    early, late = sorted((first, second))
    for at in (early, late):
        assert 1 <= grown.count_at(at) <= grown.count
        started = [n for when, n in entries if when <= at]
        if started:
            assert grown.count_at(at) == min(grown.count, started[-1])
    if all(later >= earlier for (_, earlier), (_, later) in itertools.pairwise(entries)):
        assert grown.count_at(early) <= grown.count_at(late)  # growths only: never back down


def unbound(strategy: DynamicShards, record: StoredProtocol | None = None) -> DynamicShards:
    """``strategy``, following ``record`` (``None``: a table that stores no protocol) without a table."""
    strategy._protocol.assume(record)
    return strategy


def test_writers_wait_cache_ttl_plus_clock_skew_with_cached_reads() -> None:
    clock = Clock(1_000.0)
    strategy = unbound(DynamicShards(SettingsShards, fresh_reads=False, cache_ttl=10, clock_skew=2, clock=clock))
    assert strategy.activation_delay == 12
    grown = state(2, (0.0, 1), (1_000.0, 2))
    assert strategy.write_count(grown) == 1
    clock.now = 1_011.9
    assert strategy.write_count(grown) == 1
    clock.now = 1_012.0
    assert strategy.write_count(grown) == 2


@pytest.mark.parametrize(
    ("options", "delay"),
    [({}, 0.0), ({"cache_ttl": 0, "fresh_reads": False}, 0.0), ({"delayed_growth": True}, 11.0),
     ({"fresh_reads": False}, 11.0)],
)
def test_which_settings_delay_a_growth(options: dict[str, Any], delay: float) -> None:
    clock = Clock(1_000.0)
    strategy = unbound(DynamicShards(SettingsShards, clock=clock, **options))
    assert strategy.activation_delay == delay
    assert strategy.write_count(state(2, (0.0, 1), (1_000.0, 2))) == (2 if delay == 0 else 1)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"fresh_reads": False, "delayed_growth": False}, "drop delayed_growth=False"),
        ({"clock_skew": -1}, r"clock_skew must be a non-negative \(finite\) number"),
        ({"fresh_reads": "no"}, "fresh_reads must be None, True or False, got 'no'"),
        ({"delayed_growth": 1}, "delayed_growth must be None, True or False"),
        ({"rate_reports": 0}, "rate_reports must be None"),
        ({"rate_reports": True}, "rate_reports must be None"),
        ({"rate_reports": 2.5}, "rate_reports must be None"),
    ],
)
def test_bad_fleet_settings_are_refused(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ShardingDefinitionError, match=says):
        DynamicShards(SettingsShards, **options)


def reporter(seed: int = 1, **options: Any) -> DynamicShards:
    options = {"target_utilization": 0.7, "partition_write_units": 1000, "rate_interval": 5, **options}
    return DynamicShards(SettingsShards, random=random.Random(seed), **options)


def test_the_report_quantum_at_known_settings() -> None:
    # 0.7 x 1000 units/s x 5 s = 3,500 units per interval and shard; 100 reports.
    assert reporter().report_quantum(1) == 35
    assert reporter().report_quantum(8) == 280
    assert reporter(rate_reports=10).report_quantum(1) == 350


def test_a_process_at_or_above_the_quantum_reports_what_it_wrote() -> None:
    strategy = reporter()
    assert strategy.sampled_report(35, 1) == 35
    assert strategy.sampled_report(1_000, 1) == 1_000
    assert strategy.sampled_report(0, 1) is None


def test_sampled_reports_add_up_to_the_units_written_on_average() -> None:
    """10,000 processes each writing 70 units (a quarter of the quantum at 8 shards): about
    2,500 reports instead of 10,000, and their sum is the 700,000 units written, within 5 %."""
    strategy = reporter(seed=26)
    reports = [strategy.sampled_report(70, 8) for _ in range(10_000)]
    sent = [units for units in reports if units is not None]
    assert 2_300 <= len(sent) <= 2_700
    assert set(sent) == {280}
    assert 665_000 <= sum(sent) <= 735_000


def test_a_quiet_writer_reports_the_threshold_units_rarely() -> None:
    """Under 1 % of the threshold (35 units per interval here) a report stands for the
    threshold's whole interval, 3,500 units: 10,000 quiet processes writing 10 units each send
    about 29 reports, which add up to the 100,000 units written (within 20 %)."""
    strategy = reporter(seed=7)
    reports = [strategy.sampled_report(10, 1) for _ in range(10_000)]
    sent = [units for units in reports if units is not None]
    assert set(sent) == {3_500}
    assert 15 <= len(sent) <= 45
    assert 80_000 <= sum(sent) <= 120_000


def test_quadruple_growth_policy() -> None:
    from pynamodb_sharding._dynamic import quadruple

    assert DynamicShards(SettingsShards, growth="quadruple").growth is quadruple

    assert [quadruple(n) for n in (1, 2, 16)] == [4, 8, 64]


def _growth(**options: Any) -> DynamicShards:
    """Growth threshold 700 units/s per shard; rate cooldown 10 s."""
    return unbound(DynamicShards(SettingsShards, target_utilization=0.7, partition_write_units=1000.0,
                                 rate_interval=5.0, **options))


@pytest.mark.parametrize(("earlier", "previous", "units", "spread", "expected"), [
    (5000.0, 5000.0, 5000.0, 0.0, 1000.0),     # steady at 1,000 units/s: its rate
    # 500 -> 750 -> 1000 units/s, a rise counted beyond the writes' own randomness (2.5 sd of a
    # count of arrivals: 153 units at 3,750, 125 at 2,500): +38.9 a second over 0 + 10 + 5 s to come
    (2500.0, 3750.0, 5000.0, 0.0, 1583.1),
    (4800.0, 4900.0, 5000.0, 2500.0, 955.0),   # a rise within the noise (sd 50 units): no ramp, the bound
    (100.0, 1000.0, 2000.0, 0.0, 200.0),       # under one shard's worth: a quiet key's estimate, confirmed
    (7500.0, 5000.0, 2500.0, 0.0, 1000.0),     # falling: what two windows confirm, nothing projected
    (0.0, 2500.0, 5000.0, 0.0, 500.0),         # a key just starting to be written is not ramping
])
def test_proactive_growth_sizes_for_the_rate_a_rising_key_is_heading_to(
    earlier: float, previous: float, units: float, spread: float, expected: float,
) -> None:
    from pynamodb_sharding._write_rate import RateWindow

    window = RateWindow(start=100.0, units=units, previous=previous, interval=5.0, spread=spread,
                        previous_spread=spread, earlier=earlier, earlier_spread=spread)
    assert _growth().projected_rate(window, 105.0 - 1e-7) == pytest.approx(expected, rel=1e-4)


def test_a_delayed_growth_projects_over_its_delay_too() -> None:
    from pynamodb_sharding._write_rate import RateWindow

    window = RateWindow(start=100.0, units=5000.0, previous=3750.0, interval=5.0, earlier=2500.0)
    cached = _growth(fresh_reads=False)  # growths in use 10 + 1 s after they are made
    assert cached.activation_delay == 11.0
    assert cached.projected_rate(window, 105.0 - 1e-7) == pytest.approx(1000.0 + 38.877 * (11 + 10 + 5), rel=1e-4)


def test_a_stored_protocol_is_followed_whatever_the_declaration() -> None:
    """Declared fresh reads (0.2: growths used at once), on a table storing cached reads with a
    cache TTL of 7 s: growths are used 8 s later, and merged reads use the cache."""
    clock = Clock(1_000.0)
    stored = StoredProtocol(current=FleetProtocol(cached_reads=True, cache_ttl=7.0, clock_skew=1.0))
    strategy = unbound(DynamicShards(SettingsShards, fresh_reads=None, clock=clock), stored)
    assert strategy.activation_delay == 8.0
    assert strategy.protocol_in_force().cached_reads
    assert strategy.store.ttl == 7.0  # counts cached for the table's TTL, shorter than the declared 10
    assert strategy.settle_seconds() == 8.0


@pytest.mark.parametrize(("before", "after", "reads", "delay", "ttl"), [
    (FleetProtocol(cached_reads=False), FleetProtocol(), False, 11.0, 10.0),  # fresh -> cached
    (FleetProtocol(), FleetProtocol(cached_reads=False), False, 11.0, 10.0),  # cached -> fresh
    (FleetProtocol(cache_ttl=10.0), FleetProtocol(cache_ttl=20.0), True, 21.0, 10.0),
])
def test_during_a_change_every_process_follows_the_safer_settings(
    before: FleetProtocol, after: FleetProtocol, reads: bool, delay: float, ttl: float,
) -> None:
    clock = Clock(1_000.0)
    changing = StoredProtocol(current=after, previous=before, changed_at=clock.now, effective_at=clock.now + 400)
    strategy = unbound(DynamicShards(SettingsShards, cache_ttl=30.0, clock=clock), changing)
    in_force = strategy.protocol_in_force()
    assert (in_force.cached_reads, in_force.delay, in_force.cache_ttl) == (reads, delay, ttl)
    clock.now += 400  # in force everywhere: the new settings alone
    in_force = strategy.protocol_in_force()
    assert (in_force.cached_reads, in_force.cache_ttl) == (after.cached_reads, after.cache_ttl)
