"""Write-rate estimates per logical key: what ``DynamicShards`` grows on before DynamoDB throttles.

With ``DynamicShards(..., target_utilization=0.7)`` every writer process counts the write
units each key's puts consumed (the ``ConsumedCapacity`` DynamoDB returns with the put, asked
for on the put itself, so no request is added) and adds them to the key's metadata item in
*reports*, one ``UpdateItem`` each. A report is sent each time a process has counted a
*quantum* ``q`` of units of a key (the key's growth threshold's units per interval over
``rate_reports``); what a process counted below ``q`` when its interval ends is reported as
``q`` with probability ``units / q`` (an unbiased estimate). So a key's item takes about
``U / q`` reports per interval, ``U`` the units all processes wrote, however many processes
wrote them (flat in the number of processes), and the estimate's error comes only from the
sampled remainders.

The item holds one attribute per rate window (the current one and the two before it):
``rate_units@<window start>``, the units reported in it, and ``rate_spread@<window start>``, the
variance of that figure (of the sampled remainders, and of where reports fall), so that growth
decides on a lower confidence bound, not on noise. A window's units are what its writes needed,
so a steady key's bound leaves out the writes' own randomness; a rise is projected only when it
stands clear of that too (a window's units vary as a count of random arrivals does: their
variance is about their number). A report adds
to the current window's attributes (``ADD``) and removes the windows older than the two before
(``REMOVE``), in one request that no other report can make fail: one write per report.
:class:`RateWindow` turns the windows into units per second. Items written by 0.2
(``rate_window``, ``rate_units``, ``rate_previous_units``: one write or two per report) are
read too, and added in.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import attrs
from cachetools import TTLCache

from pynamodb_sharding._forks import at_fork

__all__ = [
    "QUIET_FRACTION",
    "RATE_SPREAD_PREFIX",
    "RATE_UNITS_PREFIX",
    "Due",
    "LocalWrites",
    "RateWindow",
    "rate_attribute_names",
    "stored_window",
    "window_attribute",
    "window_start",
]

#: A process reports a key's units only when they reach this fraction of the growth
#: threshold's units per interval (``target_utilization x partition_write_units x
#: rate_interval``): a key written below 1 % of what would grow it is not reported.
QUIET_FRACTION = 0.01

#: ``rate_units@<window start>``: the units reported in one window.
RATE_UNITS_PREFIX = "rate_units@"
#: ``rate_spread@<window start>``: the variance of those units' sampled part.
RATE_SPREAD_PREFIX = "rate_spread@"
_PREFIXES = (RATE_UNITS_PREFIX, RATE_SPREAD_PREFIX)
#: The attributes 0.2 kept the windows in (read, never written).
_LEGACY = ("rate_window", "rate_units", "rate_previous_units")


def window_start(now: float, interval: float) -> float:
    """The start (epoch seconds) of the ``interval``-second window that holds ``now``."""
    return math.floor(now / interval) * interval


def _epoch(at: float) -> str:
    rounded = round(at, 3)
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


def window_attribute(prefix: str, start: float) -> str:
    """The name of one window's attribute: ``rate_units@1767225600``."""
    return f"{prefix}{_epoch(start)}"


def rate_attribute_names(attributes: Iterable[str]) -> dict[str, float]:
    """The rate-window attributes among ``attributes`` (an item's names), with their window's start."""
    found: dict[str, float] = {}
    for name in attributes:
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                try:
                    found[name] = float(name[len(prefix):])
                except ValueError:
                    continue
    return found


@attrs.frozen
class RateWindow:
    """The write units every process reported for one key in three consecutive windows.

    Attributes:
        start: epoch seconds where the current window starts (a multiple of ``interval``).
        units: units reported in the current window (so far: it fills as writers report).
        previous: units reported in the window before it (complete).
        interval: the window length in seconds.
        spread: the variance of ``units`` (of its sampled part; 0: every unit counted exactly).
        previous_spread: the variance of ``previous``.
        earlier: units reported in the window before ``previous`` (0 when none was kept).
        earlier_spread: the variance of ``earlier``.
    """

    start: float
    units: float
    previous: float
    interval: float
    spread: float = 0.0
    previous_spread: float = 0.0
    earlier: float = 0.0
    earlier_spread: float = 0.0

    def per_second(self, now: float) -> float:
        """Write units per second at ``now``, as shown (``pynamodb-sharding status``) and shrunk
        on: the larger of the current window's units (filling as writers report) and the
        previous window's (complete), over ``interval``. After the window, its units alone
        count; once a whole window passed without a report the key is cold (zero).
        """
        elapsed = now - self.start
        if elapsed >= 2 * self.interval:
            return 0.0
        if elapsed >= self.interval:
            return self.units / self.interval
        return max(self.units, self.previous) / self.interval

    def _low(self, units: float, spread: float, z: float) -> float:
        return max(0.0, units - z * math.sqrt(max(0.0, spread))) / self.interval

    def _high(self, units: float, spread: float, z: float) -> float:
        return (units + z * math.sqrt(max(0.0, spread))) / self.interval

    def bounds(self, now: float, z: float) -> tuple[float, float]:
        """A lower and an upper confidence bound of the rate at ``now`` (units per second), of
        the window :meth:`per_second` takes: its units less (plus) ``z`` standard deviations of
        their sampled part, over ``interval`` (a window still filling only ever shows less than
        it will hold: its lower bound is one of the rate)."""
        elapsed = now - self.start
        if elapsed >= 2 * self.interval:
            return 0.0, 0.0
        windows = [(self.units, self.spread)]
        if elapsed < self.interval:
            windows.append((self.previous, self.previous_spread))
        return (max(self._low(units, spread, z) for units, spread in windows),
                max(self._high(units, spread, z) for units, spread in windows))

    def confirmed(self, now: float, z: float) -> float:
        """The rate two consecutive windows' lower bounds both show at ``now`` (the larger of
        the previous window's and the window before's smaller bound, and the previous's and the
        current's): what a steady key grows on, so that one noisy window cannot grow it. While
        the current window fills, it confirms the previous one once it holds as much."""
        if now - self.start >= self.interval:
            return 0.0
        current = self._low(self.units, self.spread, z)
        previous = self._low(self.previous, self.previous_spread, z)
        earlier = self._low(self.earlier, self.earlier_spread, z)
        return max(min(earlier, previous), min(previous, current))

    def rise(self, now: float, z: float) -> float:
        """How much the rate rises per second, counting only what is beyond the noise (of the
        reports, and of the writes' arrivals): from the
        window before the previous one to the previous one, the previous window's lower bound over
        the earlier one's upper bound, when the current window (still filling) already holds more
        than the previous one's upper bound, so the rise goes on. 0 otherwise, and for a key whose
        earliest window kept shows no writes (a key just starting to be written is not ramping:
        its first windows fill as its writers start)."""
        if now - self.start >= self.interval or self.earlier <= 0:
            return 0.0
        # A rise must also stand clear of the writes' own randomness: a window's units vary as
        # a count of random arrivals does (variance: about the units, for puts of one unit).
        previous_low = self._low(self.previous, self.previous_spread + self.previous, z)
        earlier_high = self._high(self.earlier, self.earlier_spread + self.earlier, z)
        if previous_low <= earlier_high:
            return 0.0
        if self._low(self.units, self.spread + self.units, z) <= self._high(self.previous,
                                                                           self.previous_spread + self.previous, z):
            return 0.0
        return (previous_low - earlier_high) / self.interval


def _number(value: Any) -> float | None:
    if isinstance(value, Mapping) and "N" in value:
        value = value["N"]
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def stored_window(item: Mapping[str, Any] | object, interval: float, now: float | None = None) -> RateWindow | None:
    """The rate windows an item holds (raw DynamoDB JSON attributes, or a deserialized
    ``ShardMetadata``, which keeps only 0.2's fields), ``None`` when no writer ever reported.

    The current window is the latest one stored (at ``now``: the one holding ``now``, when
    given); 0.2's fields are added to the windows they name.
    """
    attributes: Mapping[str, Any] = item if isinstance(item, Mapping) else {
        name: getattr(item, name, None) for name in _LEGACY}
    units: dict[float, float] = {}
    spreads: dict[float, float] = {}
    for name, start in rate_attribute_names(attributes).items():
        value = _number(attributes[name])
        if value is not None:
            target = units if name.startswith(RATE_UNITS_PREFIX) else spreads
            target[round(start, 3)] = target.get(round(start, 3), 0.0) + value
    legacy = _number(attributes.get("rate_window"))
    if legacy is not None:
        # 0.2's reports each held a whole interval of a process's writes, sent when it ended:
        # its current window describes the interval before it (added there, complete).
        earlier = round(legacy - interval, 3)
        units[earlier] = units.get(earlier, 0.0) + (_number(attributes.get("rate_units")) or 0.0)
    if not units:
        return None
    current = round(window_start(now, interval), 3) if now is not None else max(units)
    previous = round(current - interval, 3)
    if current not in units and previous not in units:
        current = max(units)
        previous = round(current - interval, 3)
    earlier = round(current - 2 * interval, 3)
    return RateWindow(
        start=current, units=units.get(current, 0.0), previous=units.get(previous, 0.0), interval=interval,
        spread=spreads.get(current, 0.0), previous_spread=spreads.get(previous, 0.0),
        earlier=units.get(earlier, 0.0), earlier_spread=spreads.get(earlier, 0.0),
    )


@attrs.frozen
class Due:
    """Units of a key a process is to report now.

    Attributes:
        units: the units counted.
        exact: ``True`` when they reached the quantum (reported as they are); ``False`` for
            what was left below it when the interval ended (the caller samples it).
    """

    units: float
    exact: bool


class LocalWrites:
    """The write units this process sent per key since it last reported them (thread-safe).

    Args:
        interval: the least number of seconds between two reports of what is left below the
            quantum (and, without a quantum, between two reports of one key).
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

        Without a quantum (0.1's rule): a report is due once ``interval`` seconds passed since
        counting started; its units are handed to the caller and the count starts over. Under
        ``quiet_units`` the count is dropped instead, unless ``report_quiet`` (a key that may
        shrink needs its low rate reported).
        """
        due = self.count(key, units, quantum=None)
        if due is None or (due.units < self.quiet_units and not report_quiet):
            return None
        return due.units

    def count(self, key: Hashable, units: float, *, quantum: float | None) -> Due | None:
        """Count ``units`` written to ``key``; return what is due now, or ``None``.

        With a ``quantum``: as soon as the count reaches it, the count is due (exact) and starts
        over; when ``interval`` seconds passed since counting started with less, that is due
        (not exact: the caller samples it). Without one: only at the interval's end.
        """
        now = self._timer()
        with self._lock:
            entry = self._counts.get(key)
            if entry is None:
                entry = self._counts[key] = [0.0, now]
            entry[0] += units
            if quantum is not None and entry[0] >= quantum:
                due = Due(entry[0], exact=True)
            elif now - entry[1] >= self.interval and entry[0] > 0:
                due = Due(entry[0], exact=False)
            else:
                return None
            self._counts[key] = [0.0, now]
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


at_fork(after_in_child=_after_fork_in_child)
