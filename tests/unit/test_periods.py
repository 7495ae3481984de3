"""The calendar of time-partitioned tables: period texts, boundaries, ranges, table names."""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding import TimePartitioned

UTC = dt.UTC
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
SEED_TIME = 1456473647  # 2016-02-26T07:20:47Z, a row of seed 002's user_log

kinds = st.sampled_from(["day", "week", "month"])
zones = st.sampled_from([UTC, TOKYO, BERLIN, dt.timezone(dt.timedelta(hours=-5))])
times = st.integers(min_value=0, max_value=4_102_444_800)  # 1970 .. 2100


def declared(period: str = "month", **options: object) -> TimePartitioned:
    return TimePartitioned("user_log.{period}", attribute="accessed_at", period=period, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(("period", "text"), [("day", "20160226"), ("week", "2016W08"), ("month", "201602")])
def test_the_text_of_a_period_is_the_documented_one(period: str, text: str) -> None:
    assert declared(period).period_of(SEED_TIME) == text
    assert declared(period).table_name(text) == f"user_log.{text}"


def test_known_boundaries() -> None:
    # 1 January 2016 is a Friday: ISO week 53 of 2015.
    assert declared("week").period_of(dt.datetime(2016, 1, 1, tzinfo=UTC)) == "2015W53"
    assert declared("week").period_of(dt.datetime(2016, 1, 4, tzinfo=UTC)) == "2016W01"
    # 2016-02-29T15:30Z is already 1 March in Tokyo.
    assert declared(timezone=TOKYO).period_of(dt.datetime(2016, 2, 29, 15, 30, tzinfo=UTC).timestamp()) == "201603"
    assert declared().period_of(dt.datetime(2016, 2, 29, 15, 30, tzinfo=UTC).timestamp()) == "201602"
    # Milliseconds.
    assert declared("day", unit="ms").period_of(SEED_TIME * 1000) == "20160226"
    # Periods step over year ends, and a day across a daylight-saving change is still a day.
    assert declared().after("201512") == "201601"
    assert declared().after("201601", -1) == "201512"
    assert list(declared().between("201511", "201602")) == ["201511", "201512", "201601", "201602"]
    start, end = declared("day", timezone=BERLIN).bounds("20160327")  # clocks go forward that night
    assert (start.hour, end.hour, end.day, end.timestamp() - start.timestamp()) == (0, 0, 28, 23 * 3600)


@given(kind=kinds, zone=zones, seconds=times)
def test_a_time_falls_inside_the_bounds_of_its_period(kind: str, zone: dt.tzinfo, seconds: int) -> None:
    partitioned = declared(kind, timezone=zone)
    period = partitioned.period_of(seconds)
    start, end = partitioned.bounds(period)
    assert start.timestamp() <= seconds < end.timestamp()
    assert partitioned.period_of(start.timestamp()) == period
    assert partitioned.period_of(end.timestamp()) == partitioned.after(period)
    assert partitioned.parse(period) == start


@given(kind=kinds, zone=zones, first=times, second=times)
def test_period_texts_sort_as_times_do(kind: str, zone: dt.tzinfo, first: int, second: int) -> None:
    partitioned = declared(kind, timezone=zone)
    low, high = sorted((first, second))
    assert partitioned.period_of(low) <= partitioned.period_of(high)
    touched = list(partitioned.between(partitioned.period_of(low), partitioned.period_of(high)))
    assert touched[0] == partitioned.period_of(low)
    assert touched[-1] == partitioned.period_of(high)
    assert touched == sorted(set(touched))
    assert all(partitioned.after(one) == two for one, two in itertools.pairwise(touched))


@given(kind=kinds, seconds=times, steps=st.integers(min_value=-60, max_value=60))
def test_after_is_undone_by_after_backwards(kind: str, seconds: int, steps: int) -> None:
    partitioned = declared(kind)
    period = partitioned.period_of(seconds)
    assert partitioned.after(partitioned.after(period, steps), -steps) == period


def test_table_names_are_recognised_and_others_are_not() -> None:
    partitioned = TimePartitioned("app.user_log.{period}.v2", attribute="accessed_at")
    assert partitioned.period_of_table("app.user_log.201602.v2") == "201602"
    for other in ("app.user_log.201613.v2", "app.user_log.2016-02.v2", "app.user_log.201602", "user_log.201602.v2",
                  "app.user_log.20160226.v2"):
        assert partitioned.period_of_table(other) is None
    assert declared("week").period_of_table("user_log.2015W53") == "2015W53"
    assert declared("week").period_of_table("user_log.2016W53") is None  # 2016 has 52 ISO weeks


@pytest.mark.parametrize(("options", "message"), [
    ({"template": "user_log"}, "must contain '{period}' once"),
    ({"template": "user log.{period}"}, "letters, digits"),
    ({"period": "year"}, "expected one of 'day', 'week', 'month'"),
    ({"unit": "us"}, "expected one of 's', 'ms'"),
    ({"retention": 0}, "at least the previous period is kept"),
    ({"step_down": (0, 1)}, "(read_units, write_units)"),
    ({"timezone": "Asia/Tokyo"}, "zoneinfo.ZoneInfo"),
    ({"missing": "ignore"}, "'refuse', 'create'"),
    ({"max_periods": 0}, ">= 1"),
    ({"archive": "s3://bucket"}, "callable"),
])
def test_bad_declarations_say_what_to_write(options: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"template": "user_log.{period}", "attribute": "accessed_at", **options}
    template = arguments.pop("template")
    with pytest.raises(ValueError, match="TimePartitioned") as refused:
        TimePartitioned(template, **arguments)  # type: ignore[arg-type]
    assert message in str(refused.value)


def test_values_that_are_not_times_are_refused() -> None:
    with pytest.raises(ValueError, match="accessed_at=None is not a time"):
        declared().period_of(None)
    with pytest.raises(ValueError, match="has no timezone"):
        declared().period_of(dt.datetime(2016, 2, 26))
