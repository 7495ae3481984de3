"""Time-partitioned tables: one table per period (day, week or month) of an item's time.

A log's write heat is always on the current period, and deleting a whole table is free where
deleting its items one by one is not. So a log model may keep one table per period, named
from a template (``user_log.{period}`` gives ``user_log.201602``)::

    class UserLog(ShardedModel):
        class Meta:
            table_name = TimePartitioned("user_log.{period}", attribute="accessed_at", period="month")
        user_id = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        shards = Sharding(RandomShards(4))

This module holds the declaration and the calendar arithmetic, without I/O: which period a
time falls in, the text of a period in a table name, the periods a range of times touches.
:mod:`pynamodb_sharding._partitioned` sends each request to its period's table;
:mod:`pynamodb_sharding.rotation` creates, steps down, archives and drops the tables.

The text of a period is stable (table names depend on it):

============  ===================  ==========================================
``period``    text                 example (2016-02-26, a Friday)
============  ===================  ==========================================
``"day"``     ``YYYYMMDD``         ``20160226``
``"week"``    ``YYYYWww`` (ISO)    ``2016W08`` (ISO 8601 weeks start on Monday)
``"month"``   ``YYYYMM``           ``201602``
============  ===================  ==========================================

Texts of one kind sort as their periods do. Periods follow the declared ``timezone``
(UTC unless declared otherwise).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import attrs

from pynamodb_sharding._schedule import Schedule

__all__ = [
    "PERIODS",
    "PeriodTable",
    "TimePartitioned",
    "is_time_partitioned",
    "period_start",
    "period_text",
    "shard_namespace",
    "template_of",
]

#: The period kinds a model may be partitioned by.
PERIODS: tuple[str, ...] = ("day", "week", "month")

PeriodKind = Literal["day", "week", "month"]

_PLACEHOLDER = "{period}"
#: DynamoDB table names: 3 to 255 of these characters.
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_TEXT = {
    "day": re.compile(r"^(\d{4})(\d{2})(\d{2})$"),
    "week": re.compile(r"^(\d{4})W(\d{2})$"),
    "month": re.compile(r"^(\d{4})(\d{2})$"),
}
_UTC = dt.UTC


def period_start(kind: str, when: dt.datetime) -> dt.datetime:
    """The first instant of the period of ``kind`` that ``when`` (timezone-aware) falls in."""
    midnight = when.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "day":
        return midnight
    if kind == "week":
        return midnight - dt.timedelta(days=midnight.weekday())
    return midnight.replace(day=1)


def _next_start(kind: str, start: dt.datetime) -> dt.datetime:
    # Aware datetime arithmetic is wall-clock arithmetic: midnight + 1 day is the next midnight,
    # also across a daylight-saving change of a zoneinfo timezone.
    if kind == "day":
        return start + dt.timedelta(days=1)
    if kind == "week":
        return start + dt.timedelta(days=7)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return start.replace(year=year, month=month, day=1)


def _previous_start(kind: str, start: dt.datetime) -> dt.datetime:
    if kind == "month":
        year, month = (start.year - 1, 12) if start.month == 1 else (start.year, start.month - 1)
        return start.replace(year=year, month=month, day=1)
    return period_start(kind, start - dt.timedelta(days=1))


def period_text(kind: str, when: dt.datetime) -> str:
    """The text of the period of ``kind`` that ``when`` falls in (see the module's table)."""
    if kind == "day":
        return f"{when.year:04d}{when.month:02d}{when.day:02d}"
    if kind == "week":
        year, week, _ = when.isocalendar()
        return f"{year:04d}W{week:02d}"
    return f"{when.year:04d}{when.month:02d}"


def _parse_text(kind: str, text: str, tz: dt.tzinfo) -> dt.datetime | None:
    match = _TEXT[kind].match(text)
    if match is None:
        return None
    numbers = [int(part) for part in match.groups()]
    try:
        if kind == "day":
            start = dt.datetime(numbers[0], numbers[1], numbers[2], tzinfo=tz)
        elif kind == "week":
            start = dt.datetime.fromisocalendar(numbers[0], numbers[1], 1).replace(tzinfo=tz)
        else:
            start = dt.datetime(numbers[0], numbers[1], 1, tzinfo=tz)
    except ValueError:
        return None  # 20160230, 2016W54, 201613: not a period
    return start if period_text(kind, start) == text else None


@attrs.frozen
class PeriodTable:
    """One period's table of a time-partitioned model: what a rotation's archive step is given.

    .. versionadded:: 0.1.0
    """

    #: The period model: a subclass of the declared model bound to this period's table
    #: (``model.Meta.table_name == table_name``); its ``scan()`` reads the whole period.
    model: type[Any]
    #: The period's text, e.g. ``"201602"``.
    period: str
    #: The table's name, e.g. ``"user_log.201602"``.
    table_name: str
    #: The first instant of the period (timezone-aware).
    start: dt.datetime
    #: The first instant of the next period.
    end: dt.datetime


def _check_template(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or value.count(_PLACEHOLDER) != 1:
        msg = (
            f"TimePartitioned({value!r}): the table name template must contain '{_PLACEHOLDER}' "
            f"once, where the period's text goes; e.g. TimePartitioned('user_log.{_PLACEHOLDER}', ...)."
        )
        raise ValueError(msg)
    fixed = value.replace(_PLACEHOLDER, "")
    if fixed and not _TABLE_NAME.match(fixed):
        msg = (
            f"TimePartitioned({value!r}): a DynamoDB table name has only letters, digits, '_', '-' "
            f"and '.'; remove the other characters from the template."
        )
        raise ValueError(msg)
    if len(fixed) + 8 > 255:
        msg = f"TimePartitioned({value!r}): the table names would be over DynamoDB's 255 characters; shorten it."
        raise ValueError(msg)


def _check_choice(choices: tuple[str, ...]) -> Callable[[Any, Any, Any], None]:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value not in choices:
            msg = f"TimePartitioned({attribute.name}={value!r}): expected one of {', '.join(map(repr, choices))}."
            raise ValueError(msg)
    return check


def _check_count(minimum: int, *, optional: bool = False) -> Callable[[Any, Any, Any], None]:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value is None and optional:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            msg = f"TimePartitioned({attribute.name}={value!r}): expected a whole number >= {minimum}"
            if attribute.name == "retention":
                msg += (
                    " (past periods kept besides the current one; at least the previous period is "
                    "kept, for writers whose clocks run behind), or None to never drop a table"
                )
            raise ValueError(msg + ".")
    return check


def _check_step_down(instance: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(isinstance(units, int) and not isinstance(units, bool) and units >= 1 for units in value)):
        msg = (
            f"TimePartitioned(step_down={value!r}): expected (read_units, write_units), two whole "
            f"numbers >= 1, e.g. (1, 1), or None to leave past periods' throughput alone."
        )
        raise ValueError(msg)


def _check_seconds(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        msg = (
            f"TimePartitioned({attribute.name}={value!r}): expected a number of seconds > 0, e.g. 300 "
            f"(DynamoDB usually creates a table within a minute)."
        )
        raise ValueError(msg)


def _check_capacity(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, Schedule):
        msg = (
            f"TimePartitioned(capacity={value!r}): expected a pynamodb_sharding.Schedule, e.g. "
            f"Schedule({{'00:00-08:00': (5, 10), '08:00-24:00': (50, 100)}}), or None."
        )
        raise ValueError(msg)


def _check_timezone(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, dt.tzinfo):
        msg = (
            f"TimePartitioned(timezone={value!r}): expected a datetime.tzinfo such as "
            f"datetime.timezone.utc or zoneinfo.ZoneInfo('Asia/Tokyo')."
        )
        raise ValueError(msg)


@attrs.frozen(eq=False)
class TimePartitioned:
    """``Meta.table_name`` of a model kept in one table per period of one of its attributes.

    The attribute must be the model's range key, a ``NumberAttribute`` of epoch seconds (or
    milliseconds, ``unit="ms"``) or a ``UTCDateTimeAttribute``: an item's key then names its
    period, so ``get``, ``update`` and ``delete`` address one table, and a query whose range
    key condition bounds the time reads only the periods it touches.

    Args:
        template: the table name with ``{period}`` where the period's text goes.
        attribute: the model attribute (its range key) whose time picks the period.
        period: ``"day"``, ``"week"`` (ISO 8601, from Monday) or ``"month"``.
        unit: ``"s"`` or ``"ms"``: what a ``NumberAttribute`` counts since the epoch.
        timezone: where periods begin (default UTC).
        missing: a write whose period has no table: ``"refuse"`` (raise
            :class:`~pynamodb_sharding.PeriodTableMissingError`, write nothing) or
            ``"create"`` (create the table, wait for it, write). Either way a write whose
            period's table is being created (by another writer or a rotation) waits until it is
            active, then writes.
        creation_timeout: the most seconds a write waits for its period's table to become
            active; then it raises
            :class:`~pynamodb_sharding.PeriodTableNotActiveError` (nothing written).
        ahead: how many periods after the current one :func:`~pynamodb_sharding.rotation.rotate`
            creates in advance.
        retention: past periods kept besides the current one (at least 1); older tables are
            archived (when ``archive`` is set) and dropped by ``rotate``. ``None``: never drop.
        step_down: ``(read_units, write_units)`` a past period's provisioned table (and its
            global secondary indexes) is lowered to by ``rotate``; ``None`` leaves it. On-demand
            tables are left as they are.
        archive: called with a :class:`PeriodTable` before its table is dropped; if it raises,
            the table is kept (and the next rotation tries again).
            :func:`~pynamodb_sharding.rotation.export_to_s3` makes one that exports to S3.
        capacity: a :class:`~pynamodb_sharding.Schedule`: the provisioned capacity of
            the current period's table (and its global secondary indexes) by time of day, set by
            :func:`~pynamodb_sharding.capacity.scale` (``pynamodb-sharding tables scale``).
        missing_periods: what a query or count does about past periods it covers whose tables
            are missing (archived and dropped, deleted, or never created): ``"warn"`` (read
            them as empty and issue a
            :class:`~pynamodb_sharding.PeriodsMissingWarning` naming them),
            ``"raise"`` (list the tables first and raise
            :class:`~pynamodb_sharding.PeriodsMissingError` before sending) or
            ``"ignore"``. A read covers every period from the lower bound of its range key
            condition on; one without a lower bound covers the tables that exist.
        max_periods: the most periods one query, count or scan reads; a request that would read
            more raises :class:`~pynamodb_sharding.PeriodRangeError` before sending.
        clock: epoch seconds now; the current period (and the table ``create_table`` creates)
            follows it. Injectable for tests.

    .. versionadded:: 0.1.0
    """

    template: str = attrs.field(validator=_check_template)
    attribute: str = attrs.field(kw_only=True)
    period: str = attrs.field(default="month", kw_only=True, validator=_check_choice(PERIODS))
    unit: str = attrs.field(default="s", kw_only=True, validator=_check_choice(("s", "ms")))
    timezone: dt.tzinfo = attrs.field(default=_UTC, kw_only=True, validator=_check_timezone)
    missing: str = attrs.field(default="refuse", kw_only=True, validator=_check_choice(("refuse", "create")))
    creation_timeout: float = attrs.field(default=300.0, kw_only=True, validator=_check_seconds)
    missing_periods: str = attrs.field(default="warn", kw_only=True,
                                       validator=_check_choice(("warn", "raise", "ignore")))
    ahead: int = attrs.field(default=1, kw_only=True, validator=_check_count(0))
    retention: int | None = attrs.field(default=None, kw_only=True, validator=_check_count(1, optional=True))
    step_down: tuple[int, int] | None = attrs.field(default=None, kw_only=True, validator=_check_step_down)
    archive: Callable[[PeriodTable], object] | None = attrs.field(default=None, kw_only=True)
    capacity: Schedule | None = attrs.field(default=None, kw_only=True, validator=_check_capacity)
    max_periods: int = attrs.field(default=36, kw_only=True, validator=_check_count(1))
    clock: Callable[[], float] = attrs.field(default=time.time, kw_only=True, repr=False)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.attribute, str) or not self.attribute:
            msg = f"TimePartitioned({self.template!r}, attribute=...): name the model's time attribute (its range key)."
            raise ValueError(msg)
        archive: object = self.archive
        if archive is not None and not callable(archive):
            msg = f"TimePartitioned(archive={archive!r}): expected a callable taking a PeriodTable, or None."
            raise ValueError(msg)

    def __str__(self) -> str:
        return self.template

    # -- naming ---------------------------------------------------------------------------------

    def table_name(self, period: str) -> str:
        """The table of ``period`` (its text), e.g. ``"user_log.201602"``."""
        return self.template.replace(_PLACEHOLDER, period)

    def period_of_table(self, table_name: str) -> str | None:
        """The period whose table ``table_name`` is, or ``None`` if it is not one of them."""
        head, tail = self.template.split(_PLACEHOLDER)
        if not (table_name.startswith(head) and table_name.endswith(tail)):
            return None
        text = table_name[len(head):len(table_name) - len(tail)]
        return text if self.parse(text) is not None else None

    def renamed(self, template: str) -> TimePartitioned:
        """The same declaration with another table name template (test bindings use it)."""
        return attrs.evolve(self, template=template)

    # -- periods ---------------------------------------------------------------------------------

    def parse(self, text: str) -> dt.datetime | None:
        """The start of the period whose text is ``text``, ``None`` if it is not one."""
        return _parse_text(self.period, text, self.timezone) if isinstance(text, str) else None

    def when(self, value: Any) -> dt.datetime:
        """``value`` of the partition attribute (epoch number or datetime) as an aware datetime."""
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                msg = (
                    f"TimePartitioned({self.template!r}): {value!r} has no timezone; give an aware "
                    f"datetime (UTCDateTimeAttribute values are)."
                )
                raise ValueError(msg)
            return value.astimezone(self.timezone)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            msg = (
                f"TimePartitioned({self.template!r}): {self.attribute}={value!r} is not a time; "
                f"expected epoch {'milliseconds' if self.unit == 'ms' else 'seconds'} or a datetime."
            )
            raise ValueError(msg)
        seconds = value / 1000 if self.unit == "ms" else value
        return dt.datetime.fromtimestamp(seconds, self.timezone)

    def period_of(self, value: Any) -> str:
        """The text of the period ``value`` (epoch number or datetime) falls in."""
        return period_text(self.period, self.when(value))

    def current(self, now: float | None = None) -> str:
        """The current period (of ``now``, epoch seconds; default: the declared clock)."""
        return period_text(self.period, dt.datetime.fromtimestamp(self.clock() if now is None else now, self.timezone))

    def bounds(self, period: str) -> tuple[dt.datetime, dt.datetime]:
        """The first instant of ``period`` and of the one after it."""
        start = self._start(period)
        return start, _next_start(self.period, start)

    def after(self, period: str, steps: int = 1) -> str:
        """The period ``steps`` periods after ``period`` (before it when negative)."""
        start = self._start(period)
        move = _next_start if steps >= 0 else _previous_start
        for _ in range(abs(steps)):
            start = move(self.period, start)
        return period_text(self.period, start)

    def between(self, first: str, last: str) -> Iterator[str]:
        """The periods from ``first`` to ``last``, both included, oldest first."""
        start, end = self._start(first), self._start(last)
        while start <= end:
            yield period_text(self.period, start)
            start = _next_start(self.period, start)

    def _start(self, period: str) -> dt.datetime:
        start = self.parse(period)
        if start is None:
            msg = f"TimePartitioned({self.template!r}): {period!r} is not a {self.period} period's text."
            raise ValueError(msg)
        return start


def template_of(model: type[Any]) -> type[Any]:
    """The declared model of a period model (the model itself otherwise)."""
    return model.__dict__.get("_period_template") or model


def is_time_partitioned(model: type[Any]) -> bool:
    """Whether ``model`` is declared with ``Meta.table_name = TimePartitioned(...)``."""
    return isinstance(getattr(getattr(model, "Meta", None), "table_name", None), TimePartitioned)


def shard_namespace(model: type[Any]) -> str:
    """The table name the shard counts of ``model``'s keys are kept under.

    A time-partitioned model's periods share their keys' counts: a key hot this month is hot
    next month too. So every period model uses the template (``user_log.{period}``).
    """
    table = getattr(getattr(model, "Meta", None), "table_name", "")
    if isinstance(table, TimePartitioned):
        return table.template
    declared = getattr(model, "_partitioned_by", None)
    if isinstance(declared, TimePartitioned):
        return declared.template
    return str(table or "")
