"""Write-rate estimates per logical key: what ``DynamicShards`` grows on before DynamoDB throttles.

With ``DynamicShards(..., target_utilization=0.7)`` every writer process counts the write
units each key's puts consumed (the ``ConsumedCapacity`` DynamoDB returns with the put, asked
for on the put itself, so no request is added) and, at most once per ``rate_interval``
seconds per key, adds its count to the key's metadata item with one ``UpdateItem``. The item
holds two windows of ``rate_interval`` seconds, the current one and the one before, summed
over every process that wrote the key; :class:`RateWindow` turns them into units per second.
Each process reports once per interval what it wrote in the interval before, so a complete
window holds about one interval of every writer's units: the estimate lags the real rate by
one to two intervals, which the growth threshold's headroom (``1 - target_utilization``) covers.

A process does not report a key whose units in an interval stay under
:data:`QUIET_FRACTION` of the growth threshold: cold keys cost no metadata write.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable

import attrs
from cachetools import TTLCache

__all__ = [
    "QUIET_FRACTION",
    "LocalWrites",
    "RateWindow",
    "stored_window",
    "window_start",
]

#: A process reports a key's units only when they reach this fraction of the growth
#: threshold's units per interval (``target_utilization x partition_write_units x
#: rate_interval``): a key written below 1 % of what would grow it is not reported.
QUIET_FRACTION = 0.01


def window_start(now: float, interval: float) -> float:
    """The start (epoch seconds) of the ``interval``-second window that holds ``now``."""
    return math.floor(now / interval) * interval


@attrs.frozen
class RateWindow:
    """The write units every process reported for one key in two consecutive windows.

    Attributes:
        start: epoch seconds where the current window starts (a multiple of ``interval``).
        units: units reported in the current window.
        previous: units reported in the window before it.
        interval: the window length in seconds.
    """

    start: float
    units: float
    previous: float
    interval: float

    def per_second(self, now: float) -> float:
        """Write units per second at ``now``.

        A report holds the units of the ``interval`` seconds before it, so a window's units
        describe, once every writer reported in it, about one interval of writes: the rate is
        the larger of the current window's units (filling as writers report) and the previous
        window's (complete), over ``interval``. After the window, its units alone count; once
        a whole window passed without a report the key is cold (zero).
        """
        elapsed = max(0.0, now - self.start)
        if elapsed >= 2 * self.interval:
            return 0.0
        if elapsed >= self.interval:
            return self.units / self.interval
        return max(self.units, self.previous) / self.interval


def stored_window(item: object, interval: float) -> RateWindow | None:
    """The rate windows a metadata item holds, ``None`` when no writer ever reported."""
    start = getattr(item, "rate_window", None)
    if start is None:
        return None
    units = getattr(item, "rate_units", None) or 0
    previous = getattr(item, "rate_previous_units", None) or 0
    return RateWindow(start=float(start), units=float(units), previous=float(previous), interval=interval)


class LocalWrites:
    """The write units this process sent per key since it last reported them (thread-safe).

    Args:
        interval: the least number of seconds between two reports of one key.
        quiet_units: units under which an interval's count is dropped instead of reported.
        timer: monotonic seconds (``time.monotonic``); inject one in tests.
        maxsize: how many keys are followed at once (the least recently written go first).
    """

    def __init__(
        self,
        interval: float,
        quiet_units: float,
        *,
        timer: Callable[[], float] = time.monotonic,
        maxsize: int = 100_000,
    ) -> None:
        self.interval = interval
        self.quiet_units = quiet_units
        self._timer = timer
        # [units since the last report, when counting started]; a key not written for three
        # intervals is forgotten (its count would be dropped as stale anyway).
        self._counts: TTLCache[Hashable, list[float]] = TTLCache(maxsize=maxsize, ttl=3 * interval, timer=timer)
        self._lock = threading.Lock()
        _counters.add(self)

    def add(self, key: Hashable, units: float, *, report_quiet: bool = False) -> float | None:
        """Count ``units`` written to ``key``; return the units to report now, or ``None``.

        A report is due once ``interval`` seconds passed since counting started. Its units
        are handed to the caller and the count starts over. Under ``quiet_units`` the count
        is dropped instead, unless ``report_quiet`` (a key that may shrink needs its low rate
        reported).
        """
        now = self._timer()
        with self._lock:
            entry = self._counts.get(key)
            if entry is None:
                self._counts[key] = [units, now]
                return None
            entry[0] += units
            if now - entry[1] < self.interval:
                return None
            due = entry[0]
            self._counts[key] = [0.0, now]
        if due < self.quiet_units and not report_quiet:
            return None
        return due

    def clear(self) -> None:
        """Forget every count (a forked child starts its own)."""
        with self._lock:
            self._counts.clear()


#: Every counter of this process: a forked child starts with empty counts (the parent reports
#: its own) and a fresh lock (a parent's thread may have held it at the fork).
_counters: weakref.WeakSet[LocalWrites] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for counter in list(_counters):
        counter._lock = threading.Lock()
        counter._counts.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
