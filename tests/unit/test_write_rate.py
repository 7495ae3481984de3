"""The write-rate estimate of proactive growth: sliding windows and per-process counts.

Proves: :class:`RateWindow` gives known rates inside the current window, after it, and zero
once two windows passed; the rate never exceeds what the two windows hold nor goes negative
(property); :class:`LocalWrites` reports a key at most once per interval, hands over every
unit it counted, and drops quiet keys' counts unless asked to report them.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding._write_rate import LocalWrites, RateWindow, window_start
from tests.clock import Clock


def test_window_start_is_a_multiple_of_the_interval() -> None:
    assert window_start(1000.0, 5.0) == 1000.0
    assert window_start(1004.99, 5.0) == 1000.0
    assert window_start(1005.0, 5.0) == 1005.0
    assert window_start(7.3, 0.5) == 7.0


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (100.0, 50 / 10),  # the current window already holds more than the previous one
        (109.9, 50 / 10),
        (110.0, 50 / 10),  # the window just ended: it is the last complete one
        (119.9, 50 / 10),
        (120.0, 0.0),  # nobody reported for a whole window: cold
        (500.0, 0.0),
        (90.0, 50 / 10),  # a clock behind the window's start counts as its start
    ],
)
def test_rate_per_second_at_known_times(now: float, expected: float) -> None:
    window = RateWindow(start=100.0, units=50.0, previous=30.0, interval=10.0)
    assert window.per_second(now) == pytest.approx(expected)


def test_a_window_still_filling_keeps_the_previous_rate() -> None:
    """Early in a window only some writers reported: the complete previous window counts."""
    window = RateWindow(start=100.0, units=5.0, previous=80.0, interval=10.0)
    assert window.per_second(101.0) == 8.0
    assert window.per_second(111.0) == 0.5  # that window ended with only 5 units reported


@given(
    units=st.floats(0, 1e6),
    previous=st.floats(0, 1e6),
    interval=st.floats(0.01, 3600),
    offset=st.floats(-10, 10_000),
)
def test_rate_is_bounded_by_the_two_windows(units: float, previous: float, interval: float, offset: float) -> None:
    window = RateWindow(start=1000.0, units=units, previous=previous, interval=interval)
    rate = window.per_second(1000.0 + offset)
    assert 0 <= rate <= max(units, previous) / interval


def test_a_key_is_reported_once_per_interval_with_every_unit() -> None:
    clock = Clock(0.0)
    local = LocalWrites(interval=1.0, quiet_units=0.0, timer=clock)
    assert local.add("k", 2.0) is None  # counting starts
    clock.now = 0.5
    assert local.add("k", 3.0) is None  # not an interval yet
    clock.now = 1.0
    assert local.add("k", 1.0) == 6.0  # due: everything counted so far
    clock.now = 1.2
    assert local.add("k", 4.0) is None  # the next interval starts at the report
    clock.now = 2.1
    assert local.add("k", 1.0) == 5.0


def test_keys_are_counted_apart() -> None:
    clock = Clock(0.0)
    local = LocalWrites(interval=1.0, quiet_units=0.0, timer=clock)
    local.add("a", 1.0)
    local.add("b", 10.0)
    clock.now = 1.0
    assert local.add("a", 1.0) == 2.0
    assert local.add("b", 1.0) == 11.0


def test_quiet_keys_are_not_reported_unless_asked() -> None:
    clock = Clock(0.0)
    local = LocalWrites(interval=1.0, quiet_units=5.0, timer=clock)
    local.add("cold", 1.0)
    clock.now = 1.0
    assert local.add("cold", 1.0) is None  # 2 units < 5: dropped, nothing to write
    clock.now = 1.5
    local.add("cold", 1.0)
    clock.now = 2.0
    assert local.add("cold", 1.0, report_quiet=True) == 2.0  # a key that may shrink reports


def test_clear_forgets_counts() -> None:
    clock = Clock(0.0)
    local = LocalWrites(interval=1.0, quiet_units=0.0, timer=clock)
    local.add("k", 7.0)
    local.clear()
    clock.now = 1.0
    assert local.add("k", 1.0) is None  # counting starts over
