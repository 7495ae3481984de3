"""``Schedule``: provisioned capacity by time of day, its windows and what it refuses."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding import TimePartitioned
from pynamodb_sharding._schedule import Schedule

UTC = dt.UTC
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
DAY = Schedule({"00:00-08:00": (5, 10), "08:00-20:00": (50, 100), "20:00-24:00": (20, 40)}, timezone=TOKYO)


@pytest.mark.parametrize(("utc", "window"), [
    ((2016, 2, 25, 22, 59), "00:00-08:00"),  # 07:59 in Tokyo
    ((2016, 2, 25, 23, 0), "08:00-20:00"),  # 08:00 in Tokyo
    ((2016, 2, 26, 10, 59), "08:00-20:00"),  # 19:59
    ((2016, 2, 26, 11, 0), "20:00-24:00"),  # 20:00
    ((2016, 2, 26, 14, 59), "20:00-24:00"),  # 23:59
    ((2016, 2, 26, 15, 0), "00:00-08:00"),  # midnight
])
def test_the_window_of_a_time_is_counted_in_the_schedules_timezone(utc: tuple[int, ...], window: str) -> None:
    assert DAY.window_at(dt.datetime(*utc, tzinfo=UTC)).text == window


def test_a_window_may_run_across_midnight_and_follows_the_wall_clock_on_dst_days() -> None:
    night = Schedule({"22:00-06:00": (1, 2), "06:00-22:00": (30, 40)}, timezone=BERLIN)
    # 27 March 2016: Berlin moves from 02:00 CET to 03:00 CEST.
    assert night.window_at(dt.datetime(2016, 3, 27, 3, 59, tzinfo=UTC)).text == "22:00-06:00"  # 05:59 CEST
    assert night.window_at(dt.datetime(2016, 3, 27, 4, 0, tzinfo=UTC)).text == "06:00-22:00"  # 06:00 CEST
    assert night.window_at(dt.datetime(2016, 3, 26, 20, 59, tzinfo=UTC)).text == "06:00-22:00"  # 21:59 CET
    assert night.window_at(dt.datetime(2016, 3, 26, 21, 0, tzinfo=UTC)).text == "22:00-06:00"  # 22:00 CET
    whole = Schedule({"00:00-24:00": (3, 4)})
    assert (whole.window_at(dt.datetime(2016, 2, 26, 12, tzinfo=UTC)).read, whole.windows[0].write) == (3, 4)


@given(st.integers(min_value=0, max_value=4_102_444_800))
def test_every_time_falls_in_exactly_one_window(epoch: int) -> None:
    when = dt.datetime.fromtimestamp(epoch, UTC)
    local = when.astimezone(TOKYO)
    minute = local.hour * 60 + local.minute
    assert [window.text for window in DAY.windows if minute in window] == [DAY.window_at(when).text]


@pytest.mark.parametrize(("hours", "message"), [
    ({"00:00-08:00": (1, 1)}, "no window covers 08:00-24:00"),
    ({"00:00-12:00": (1, 1), "11:30-24:00": (1, 1)}, "'00:00-12:00' and '11:30-24:00' overlap at 11:30"),
    ({"22:00-06:00": (1, 1), "05:00-22:00": (1, 1)}, "overlap at 05:00"),
    ({"08:00-08:00": (1, 1)}, "not empty"),
    ({"8:00-24:00": (1, 1)}, "'HH:MM-HH:MM'"),
    ({"00:00-24:30": (1, 1)}, "'HH:MM-HH:MM'"),
    ({"24:00-08:00": (1, 1)}, "'HH:MM-HH:MM'"),
    ({"00:00-24:00": (0, 1)}, "two whole numbers >= 1"),
    ({"00:00-24:00": 5}, "two whole numbers >= 1"),
    ({}, "expected a dict of windows"),
])
def test_a_schedule_that_does_not_cover_the_day_once_is_refused(hours: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Schedule(hours)  # type: ignore[arg-type]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="target_utilization"):
        Schedule({"00:00-24:00": (1, 1)}, target_utilization=1.5)
    with pytest.raises(ValueError, match="tzinfo"):
        Schedule({"00:00-24:00": (1, 1)}, timezone="Asia/Tokyo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"capacity=.*Schedule"):
        TimePartitioned("log.{period}", attribute="at", capacity={"00:00-24:00": (1, 1)})  # type: ignore[arg-type]
    assert TimePartitioned("log.{period}", attribute="at", capacity=DAY).capacity is DAY
