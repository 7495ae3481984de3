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
(``LatencyWindow.hedges`` counts them).

No PynamoDB import: the fan-out wraps its request callables with :func:`hedged`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

__all__ = ["HEDGE_FACTOR", "MIN_SAMPLES", "LatencyWindow", "hedged"]

_T = TypeVar("_T")

#: Recent latencies kept per window.
WINDOW = 512
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

    .. versionadded:: 0.3.0
    """

    def __init__(self, size: int = WINDOW) -> None:
        self._lock = threading.Lock()
        self._samples: deque[float] = deque(maxlen=size)
        #: Shard requests sent once more because the first was slow.
        self.hedges = 0
        #: Of those, the ones where the second answer came first.
        self.hedge_wins = 0
        #: Requests sent (first attempts).
        self.requests = 0

    def add(self, seconds: float) -> None:
        with self._lock:
            self._samples.append(seconds)

    def delay(self) -> float | None:
        """How long to wait before hedging; ``None`` while too few latencies are known."""
        with self._lock:
            if len(self._samples) < MIN_SAMPLES:
                return None
            ordered = sorted(self._samples)
        return ordered[min(len(ordered) - 1, int(len(ordered) * _QUANTILE))] * HEDGE_FACTOR

    def count(self, *, hedge: bool = False, win: bool = False) -> None:
        with self._lock:
            self.requests += not hedge and not win
            self.hedges += hedge
            self.hedge_wins += win


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


def hedged(send: Callable[[], _T], window: LatencyWindow) -> _T:
    """Call ``send()``; if it has not answered after the window's hedge delay, call it once
    more in parallel and return the first answer that succeeds (or raise the first error when
    both fail). Every first attempt's latency is recorded in ``window``."""
    window.count()
    delay = window.delay()
    if delay is None:
        start = time.perf_counter()
        result = send()
        window.add(time.perf_counter() - start)
        return result
    executor = _hedge_executor()
    start = time.perf_counter()
    primary = executor.submit(send)
    primary.add_done_callback(lambda _: window.add(time.perf_counter() - start))
    try:
        return primary.result(timeout=delay)
    except FutureTimeout:
        pass
    window.count(hedge=True)
    backup = executor.submit(send)
    pending: set[Future[_T]] = {primary, backup}
    failure: BaseException | None = None
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
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


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
