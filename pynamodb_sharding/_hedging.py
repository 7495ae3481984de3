"""Hedged shard requests: a shard request slower than usual is sent once more, first answer wins.

One slow request makes a whole merged page slow: the merge waits for its slowest shard. With
``Sharding(..., hedged_requests=True)``, a shard request that has not answered after the
model's recent 95th-percentile latency (:data:`HEDGE_FACTOR` times it) is sent a second time; the
first answer is used and the other is discarded when it comes. Both are the same read (same
key, same start key, same limit), so the page the merge receives is one of two equal answers:
no item is returned twice, and the cursor is built from the page that was used. Only reads are
hedged.

A hedge is sent only once the model has :data:`MIN_SAMPLES` recent latencies; after that, the
requests slower than the 95th percentile, about 5 % of them, are sent twice: that is the cost
(``LatencyWindow.hedges`` counts them). The requests of one query are slow together (a pause
of the server or of the client stalls all 32 of them), and a few such queries in the window
would make its 95th percentile the stall's latency, leaving the slow requests that follow
unhedged. So the delay is the lower of the window's 95th percentile and a robust bound that such
clusters hardly move: the median plus :data:`SPREAD_FACTOR` times the distance from the median
to the 75th percentile (for normally spread latencies, about the 98th percentile; above the
95th, so it only wins when the tail is a cluster of stalls). A budget bounds the cost when
latency shifts faster than the window follows: at most :data:`HEDGE_BUDGET` hedges per request
sent, plus a burst of :data:`HEDGE_BURST`.

No PynamoDB import: the fan-out wraps its request callables with :func:`hedged`. Time and
threads come from a :class:`Scheduler` (the real clock and a thread pool unless one is given),
so the hedging rules can be driven in virtual time.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Protocol, TypeVar

from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._locals import ContextLocal

__all__ = [
    "HEDGE_BUDGET", "HEDGE_BURST", "HEDGE_FACTOR", "MIN_SAMPLES", "SPREAD_FACTOR", "WINDOW", "LatencyWindow",
    "Scheduler", "ThreadScheduler", "hedged", "mark_sent",
]

_T = TypeVar("_T")

#: Recent latencies kept per window.
WINDOW = 1024
#: The robust bound: median + this x (75th percentile - median).
SPREAD_FACTOR = 3.0
#: The percentile is computed again after this many new latencies (sorting costs).
_RECOMPUTE_EVERY = 64
#: Hedges allowed per request sent, over time (a guard: a steady p95 hedges about 5 %) ...
HEDGE_BUDGET = 0.1
#: ... plus this many at once (two stalled queries of 32 shards).
HEDGE_BURST = 64.0
#: Latencies a window needs before it hedges.
MIN_SAMPLES = 20
#: The hedge is sent after this many times the window's 95th percentile.
HEDGE_FACTOR = 1.0
_QUANTILE = 0.95

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_executor_pid = 0


class LatencyWindow:
    """The recent latencies of one model's shard requests, and what hedging did with them.

    .. versionadded:: 0.1.0
    """

    def __init__(self, size: int = WINDOW) -> None:
        self._lock = threading.Lock()
        self._samples: deque[float] = deque(maxlen=size)
        self._delay: float | None = None
        self._fresh = 0  # latencies added since the delay was computed
        self._tokens = HEDGE_BURST
        #: Shard requests sent once more because the first was slow.
        self.hedges = 0
        #: Of those, the ones where the second answer came first.
        self.hedge_wins = 0
        #: Requests sent (first attempts).
        self.requests = 0
        #: Slow requests not hedged because the budget was spent.
        self.hedges_refused = 0

    def add(self, seconds: float) -> None:
        with self._lock:
            self._samples.append(seconds)
            self._fresh += 1

    def delay(self) -> float | None:
        """How long to wait before hedging; ``None`` while too few latencies are known."""
        with self._lock:
            if len(self._samples) < MIN_SAMPLES:
                return None
            if self._delay is not None and self._fresh < min(_RECOMPUTE_EVERY, len(self._samples)):
                return self._delay
            ordered = sorted(self._samples)
            self._fresh = 0
            median = _quantile(ordered, 0.5)
            robust = median + SPREAD_FACTOR * (_quantile(ordered, 0.75) - median)
            self._delay = min(_quantile(ordered, _QUANTILE), robust) * HEDGE_FACTOR
            return self._delay

    def count(self, *, win: bool = False) -> None:
        """Count a first attempt (earning budget), or with ``win`` a hedge that answered first."""
        with self._lock:
            if win:
                self.hedge_wins += 1
            else:
                self.requests += 1
                self._tokens = min(HEDGE_BURST, self._tokens + HEDGE_BUDGET)

    def take_hedge(self) -> bool:
        """Whether the budget allows one more hedge now (and spend it)."""
        with self._lock:
            if self._tokens < 1.0:
                self.hedges_refused += 1
                return False
            self._tokens -= 1.0
            self.hedges += 1
            return True


def _quantile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def _hedge_executor() -> ThreadPoolExecutor:
    global _executor, _executor_pid
    pid = os.getpid()
    executor = _executor
    if executor is not None and _executor_pid == pid:
        return executor
    with _lock:
        if _executor is None or _executor_pid != pid:
            # Each hedged request holds two of these while its caller waits: room for 64 shards.
            _executor = ThreadPoolExecutor(128, thread_name_prefix="pynamodb-sharding-hedge")
            _executor_pid = pid
        return _executor


class Scheduler(Protocol):
    """The time and the threads a hedged call runs on.

    :class:`ThreadScheduler` (the default) reads ``time.perf_counter`` and runs attempts on a
    thread pool; a test gives one in virtual time, so that it never sleeps.

    .. versionadded:: 0.1.0
    """

    def now(self) -> float:
        """The current time, in seconds (any origin)."""

    def start(self, call: Callable[[], _T]) -> Future[_T]:
        """Run ``call()`` apart from the caller; its answer or error arrives in the future."""

    def wait_first(self, futures: Collection[Future[_T]], timeout: float | None) -> set[Future[_T]]:
        """Wait until one of ``futures`` is done or ``timeout`` seconds have passed (``None``:
        no limit); return the ones done."""


class ThreadScheduler:
    """The real clock (``time.perf_counter``) and a thread pool shared by every hedged call of
    the process (made again in a forked child).

    .. versionadded:: 0.1.0
    """

    def now(self) -> float:
        return time.perf_counter()

    def start(self, call: Callable[[], _T]) -> Future[_T]:
        return _hedge_executor().submit(call)

    def wait_first(self, futures: Collection[Future[_T]], timeout: float | None) -> set[Future[_T]]:
        done, _ = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
        return done


_THREADS = ThreadScheduler()


class _Attempt:
    """One attempt of a hedged call: when its request left, once the sender says so."""

    __slots__ = ("now", "sent_at")

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.sent_at: float | None = None

    def latency(self, start: float) -> float:
        """Seconds since the request left, or since ``start`` when the sender never said."""
        return self.now() - (start if self.sent_at is None else self.sent_at)


_current = ContextLocal("hedging.current")


def mark_sent() -> None:
    """Called by the code that sends a hedged call's request, as it leaves (botocore's
    ``before-send``): the hedge delay and the latency recorded count from here, not from when
    the call was queued behind others of the same fan-out."""
    attempt = getattr(_current, "attempt", None)
    if attempt is not None and attempt.sent_at is None:
        attempt.sent_at = attempt.now()


def _run(send: Callable[[], _T], attempt: _Attempt) -> _T:
    _current.attempt = attempt
    try:
        return send()
    finally:
        _current.attempt = None


def hedged(send: Callable[[], _T], window: LatencyWindow, *, scheduler: Scheduler = _THREADS) -> _T:
    """Call ``send()``; if it has not answered after the window's hedge delay, call it once
    more in parallel and return the first answer that succeeds (or raise the first error when
    both fail). Every first attempt's latency is recorded in ``window``.

    When ``send`` calls :func:`mark_sent` as its request leaves, the latency recorded counts
    from then, and so does the delay once the request has left: a call is hedged when its
    request has been out for the delay, or when it has waited the delay without leaving (a
    ``send`` that never says is timed from the call). ``scheduler`` gives the time and runs the
    attempts (:class:`ThreadScheduler` unless given)."""
    window.count()
    delay = window.delay()
    attempt = _Attempt(scheduler.now)
    start = scheduler.now()
    if delay is None:
        result = _run(send, attempt)
        window.add(attempt.latency(start))
        return result
    primary = scheduler.start(lambda: _run(send, attempt))
    primary.add_done_callback(lambda _: window.add(attempt.latency(start)))
    timeout = delay
    while True:
        if scheduler.wait_first((primary,), timeout):
            return primary.result()
        sent = attempt.sent_at
        timeout = (start if sent is None else sent) + delay - scheduler.now()
        if timeout <= 0:
            break
    if not window.take_hedge():
        scheduler.wait_first((primary,), None)
        return primary.result()
    backup = scheduler.start(lambda: _run(send, _Attempt(scheduler.now)))
    pending: set[Future[_T]] = {primary, backup}
    failure: BaseException | None = None
    while pending:
        done = scheduler.wait_first(pending, None)
        pending -= done
        for future in done:
            error = future.exception()
            if error is None:
                if future is backup:
                    window.count(win=True)
                return future.result()
            failure = failure or error
    assert failure is not None
    raise failure


def _after_fork_in_child() -> None:
    global _lock, _executor
    _lock = threading.Lock()
    _executor = None


at_fork(after_in_child=_after_fork_in_child)
