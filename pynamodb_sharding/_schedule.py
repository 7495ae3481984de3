"""Provisioned capacity by time of day: the declaration, without I/O.

Seed 002's phase 2: once a service knows the hours its users are busy and the hours they sleep,
its table's provisioned throughput follows them. A :class:`Schedule` names the read and write
units for each window of the day, in one timezone::

    Schedule({"00:00-08:00": (5, 10), "08:00-20:00": (50, 100), "20:00-24:00": (20, 40)},
             timezone=zoneinfo.ZoneInfo("Asia/Tokyo"))

and ``TimePartitioned(..., capacity=schedule)`` gives it to a model's period tables;
:func:`pynamodb_sharding.capacity.scale` applies it to the current period's table.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping

import attrs

__all__ = ["CapacityWindow", "Schedule"]

_WINDOW = re.compile(r"^(\d{2}):(\d{2})-(\d{2}):(\d{2})$")
_DAY = 24 * 60


@attrs.frozen
class CapacityWindow:
    """One window of a :class:`Schedule`: from ``start`` to ``end`` (minutes after midnight;
    ``end`` <= ``start`` runs across midnight), ``read`` and ``write`` capacity units.

    .. versionadded:: 0.1.0
    """

    #: The window as declared, e.g. ``"08:00-20:00"``.
    text: str
    start: int
    end: int
    read: int
    write: int

    def __contains__(self, minute: int) -> bool:
        if self.start < self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


def _minute(hours: str, minutes: str, *, end: bool) -> int | None:
    hour, minute = int(hours), int(minutes)
    if minute > 59 or hour > 24 or (hour == 24 and (minute or not end)):
        return None
    return hour * 60 + minute


def _units(text: str, value: object) -> tuple[int, int]:
    if (not isinstance(value, tuple) or len(value) != 2
            or not all(isinstance(units, int) and not isinstance(units, bool) and units >= 1 for units in value)):
        msg = (
            f"Schedule({{{text!r}: {value!r}}}): expected (read_units, write_units), two whole numbers >= 1, "
            f"e.g. (5, 10)."
        )
        raise ValueError(msg)
    return value[0], value[1]


def _clock_text(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


@attrs.frozen(init=False)
class Schedule:
    """The provisioned capacity of a period's table (and each of its provisioned global
    secondary indexes) for each window of the day.

    Args:
        hours: ``{"HH:MM-HH:MM": (read_units, write_units)}``; the windows must cover the 24
            hours exactly once (``"24:00"`` ends the day; ``"22:00-06:00"`` runs across midnight).
        timezone: where the hours are counted (default UTC); daylight-saving days follow the
            wall clock.
        target_utilization: the share of the capacity the measured load may use: the scaler
            never sets less than ``load / target_utilization`` (DynamoDB's auto scaling
            defaults to 0.7 as well).

    Raises:
        ValueError: a window is malformed, the windows overlap or leave a gap, units are not
            whole numbers >= 1, or ``target_utilization`` is outside (0, 1].

    .. versionadded:: 0.1.0
    """

    windows: tuple[CapacityWindow, ...]
    timezone: dt.tzinfo
    target_utilization: float

    def __init__(self, hours: Mapping[str, tuple[int, int]], *, timezone: dt.tzinfo = dt.UTC,
                 target_utilization: float = 0.7) -> None:
        if not isinstance(hours, Mapping) or not hours:
            msg = (
                f"Schedule({hours!r}): expected a dict of windows, e.g. "
                f"Schedule({{'00:00-08:00': (5, 10), '08:00-24:00': (50, 100)}})."
            )
            raise ValueError(msg)
        zone: object = timezone  # callers are not always type-checked
        if not isinstance(zone, dt.tzinfo):
            msg = f"Schedule(timezone={zone!r}): expected a datetime.tzinfo such as zoneinfo.ZoneInfo('Asia/Tokyo')."
            raise ValueError(msg)
        if (isinstance(target_utilization, bool) or not isinstance(target_utilization, (int, float))
                or not 0 < target_utilization <= 1):
            msg = f"Schedule(target_utilization={target_utilization!r}): expected a share in (0, 1], e.g. 0.7."
            raise ValueError(msg)
        windows = []
        for text, units in hours.items():
            match = _WINDOW.match(text) if isinstance(text, str) else None
            start = None if match is None else _minute(match[1], match[2], end=False)
            end = None if match is None else _minute(match[3], match[4], end=True)
            if start is None or end is None or (start == end % _DAY and not (start == 0 and end == _DAY)):
                msg = (
                    f"Schedule({{{text!r}: ...}}): a window is 'HH:MM-HH:MM' from 00:00 to 24:00 and not empty, "
                    f"e.g. '08:00-20:00' or '22:00-06:00' (across midnight)."
                )
                raise ValueError(msg)
            read, write = _units(text, units)
            windows.append(CapacityWindow(text=text, start=start, end=end % _DAY if end != _DAY else 0,
                                          read=read, write=write))
        owner: list[CapacityWindow | None] = [None] * _DAY
        for window in windows:
            minute = window.start
            while True:
                taken = owner[minute]
                if taken is not None:
                    msg = (
                        f"Schedule: windows {taken.text!r} and {window.text!r} overlap at {_clock_text(minute)}; "
                        f"each minute of the day belongs to one window."
                    )
                    raise ValueError(msg)
                owner[minute] = window
                minute = (minute + 1) % _DAY
                if minute == window.end:
                    break
        if None in owner:
            first = owner.index(None)
            last = first
            while last + 1 < _DAY and owner[last + 1] is None:
                last += 1
            msg = (
                f"Schedule: no window covers {_clock_text(first)}-{_clock_text(last + 1)}; the windows must "
                f"cover the 24 hours (add e.g. '{_clock_text(first)}-{_clock_text(last + 1)}')."
            )
            raise ValueError(msg)
        self.__attrs_init__(
            windows=tuple(sorted(windows, key=lambda window: window.start)),
            timezone=timezone,
            target_utilization=float(target_utilization),
        )

    def window_at(self, when: dt.datetime) -> CapacityWindow:
        """The window ``when`` (timezone-aware) falls in, in the schedule's timezone."""
        local = when.astimezone(self.timezone)
        minute = local.hour * 60 + local.minute
        for window in self.windows:
            if minute in window:
                return window
        raise AssertionError(minute)  # __init__ checked that the windows cover the day
