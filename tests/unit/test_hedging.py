"""``hedged``: the second attempt of a slow call, first success wins (virtual time, no DynamoDB).

Every test drives ``hedged`` through :class:`VirtualTime`, a ``Scheduler`` in which an attempt
runs at once when it starts, its ``sleep`` calls say how long it takes, and its answer arrives
when the caller's waits reach that time: no test sleeps, and each asserts the exact times.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from pynamodb_sharding._hedging import MIN_SAMPLES, LatencyWindow, hedged, mark_sent

_T = TypeVar("_T")


class VirtualTime:
    """A ``Scheduler`` in virtual time: attempts run at once, their answers come when due."""

    def __init__(self) -> None:
        self.now_ = 0.0
        self._attempt_at: float | None = None  # the running attempt's own time
        self._due: list[tuple[float, int, Future[Any], tuple[bool, Any]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self.now_ if self._attempt_at is None else self._attempt_at

    def sleep(self, seconds: float) -> None:
        """Called by a ``send``: the attempt (or the caller, outside one) takes that long."""
        if self._attempt_at is None:
            self.now_ += seconds
        else:
            self._attempt_at += seconds

    def start(self, call: Callable[[], _T]) -> Future[_T]:
        future: Future[_T] = Future()
        self._attempt_at = self.now_
        outcome: tuple[bool, Any]
        try:
            outcome = (True, call())
        except Exception as error:  # delivered when due, as a thread's error would be
            outcome = (False, error)
        finally:
            due, self._attempt_at = self._attempt_at, None
        heapq.heappush(self._due, (due, next(self._order), future, outcome))
        return future

    def wait_first(self, futures: Collection[Future[_T]], timeout: float | None) -> set[Future[_T]]:
        deadline = None if timeout is None else self.now_ + timeout
        while True:
            done = {future for future in futures if future.done()}
            if done:
                return done
            if not self._due or (deadline is not None and self._due[0][0] > deadline):
                assert deadline is not None, "waiting without a limit for an answer that never comes"
                self.now_ = deadline
                return set()
            due, _, arriving, (answered, value) = heapq.heappop(self._due)
            self.now_ = max(self.now_, due)
            if answered:
                arriving.set_result(value)
            else:
                arriving.set_exception(value)


def _warm(window: LatencyWindow, seconds: float = 0.01) -> None:
    for _ in range(MIN_SAMPLES):
        window.add(seconds)


def _attempts(clock: VirtualTime, *plans: tuple[float, str | Exception]) -> Callable[[], str]:
    """A ``send`` whose n-th call takes ``plans[n][0]`` seconds, then answers or raises ``plans[n][1]``."""
    calls = iter(plans)

    def send() -> str:
        seconds, outcome = next(calls)
        clock.sleep(seconds)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return send


def test_no_hedge_until_the_window_knows_enough_latencies() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    assert hedged(_attempts(clock, (0.5, "ok")), window, scheduler=clock) == "ok"
    assert (window.hedges, window.requests, clock.now()) == (0, 1, 0.5)
    assert window.delay() is None


def test_fast_call_is_sent_once() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    _warm(window, 0.2)
    assert hedged(_attempts(clock, (0.15, "ok")), window, scheduler=clock) == "ok"
    assert (window.hedges, window.requests, clock.now()) == (0, 1, 0.15)


def test_slow_call_is_hedged_and_the_faster_answer_wins() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    _warm(window, 0.01)  # hedge after 10 ms
    assert hedged(_attempts(clock, (0.5, "slow"), (0.02, "fast")), window, scheduler=clock) == "fast"
    assert clock.now() == pytest.approx(0.03)  # the hedge left at 10 ms and answered 20 ms later
    assert (window.requests, window.hedges, window.hedge_wins) == (1, 1, 1)


def test_an_error_of_one_attempt_is_covered_by_the_other() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    _warm(window, 0.01)
    send = _attempts(clock, (0.1, ConnectionError("first attempt lost")), (0.3, "second"))
    assert hedged(send, window, scheduler=clock) == "second"
    assert clock.now() == pytest.approx(0.31)
    assert (window.hedges, window.hedge_wins) == (1, 1)


def test_both_attempts_failing_raises_the_first_error() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    _warm(window, 0.01)
    send = _attempts(clock, (0.1, ConnectionError("attempt 1")), (0.2, ConnectionError("attempt 2")))
    with pytest.raises(ConnectionError, match="attempt 1"):
        hedged(send, window, scheduler=clock)
    assert clock.now() == pytest.approx(0.21)  # after both answered


def test_the_first_error_is_the_first_to_come_not_the_first_sent() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    _warm(window, 0.01)
    send = _attempts(clock, (0.3, ConnectionError("attempt 1")), (0.1, ConnectionError("attempt 2")))
    with pytest.raises(ConnectionError, match="attempt 2"):
        hedged(send, window, scheduler=clock)


def test_a_fast_error_is_raised_without_a_hedge() -> None:
    window, clock = LatencyWindow(), VirtualTime()
    _warm(window, 0.2)
    with pytest.raises(ValueError, match="bad request"):
        hedged(_attempts(clock, (0.05, ValueError("bad request"))), window, scheduler=clock)
    assert (window.hedges, clock.now()) == (0, 0.05)


def test_delay_is_the_95th_percentile_times_the_factor() -> None:
    window = LatencyWindow()
    for n in range(1, 101):
        window.add(n / 1000)  # 1..100 ms
    assert window.delay() == pytest.approx(0.096)


def test_one_stalled_query_does_not_move_the_hedge_delay() -> None:
    # The requests of one query are slow together: 32 requests of one stalled query among
    # 4,000 usual ones leave the 95th percentile where it was (a 512-request window did not).
    window = LatencyWindow()
    for n in range(4000):
        window.add(0.050 + (n % 100) / 10_000)  # 50..59.9 ms
    usual = window.delay()
    for _ in range(32):
        window.add(0.150)
    for _ in range(64):
        window.add(0.055)
    assert usual == pytest.approx(0.0595)
    assert window.delay() == pytest.approx(usual, abs=0.0005)


def test_hedges_stay_within_the_budget_when_every_request_is_slow() -> None:
    # Latency triples at once: every request is slower than the window's delay (1 ms), but
    # hedges stay within the budget: the burst of 64, then one per 10 requests sent (the first
    # request's share is lost to the full burst, so 199 requests earn 19).
    window, clock = LatencyWindow(), VirtualTime()
    for _ in range(4000):
        window.add(0.001)
    for _ in range(200):
        assert hedged(_attempts(clock, (0.003, "ok"), (0.003, "ok")), window, scheduler=clock) == "ok"
    assert window.delay() == 0.001
    assert window.requests == 200
    assert (window.hedges, window.hedges_refused) == (83, 117)
    assert window.hedge_wins == 0  # the first attempt answers first, 1 ms before the hedge
    assert clock.now() == pytest.approx(200 * 0.003)


def test_the_delay_counts_from_when_the_request_leaves() -> None:
    # In a wide fan-out a request may wait its turn (serialising, signing) before it leaves:
    # that wait is not the service being slow. A call that leaves after 150 ms and answers
    # 100 ms later is not hedged with a 200 ms delay (it would be at 350 ms); timed from the
    # call (no mark_sent), it is (at 200 ms, before its answer at 250 ms).
    def queued_then_quick(clock: VirtualTime, mark: bool) -> Callable[[], str]:
        def send() -> str:
            clock.sleep(0.15)
            if mark:
                mark_sent()
            clock.sleep(0.1)
            return "ok"

        return send

    hedges = {}
    for mark in (True, False):
        window, clock = LatencyWindow(), VirtualTime()
        _warm(window, 0.2)
        assert hedged(queued_then_quick(clock, mark), window, scheduler=clock) == "ok"
        assert clock.now() == pytest.approx(0.25)
        hedges[mark] = window.hedges
    assert hedges == {True: 0, False: 1}


def test_the_latency_recorded_counts_from_when_the_request_leaves() -> None:
    # 150 ms queued, then 100 ms out: 20 calls before the window hedges record 100 ms each;
    # then 64 calls 50 ms out (sent by the pool, not hedged) make the delay 50 ms.
    window, clock = LatencyWindow(), VirtualTime()

    def queued(seconds_out: float) -> Callable[[], str]:
        def send() -> str:
            clock.sleep(0.15)
            mark_sent()
            clock.sleep(seconds_out)
            return "ok"

        return send

    for _ in range(MIN_SAMPLES):
        hedged(queued(0.1), window, scheduler=clock)
    assert window.delay() == pytest.approx(0.1)
    for _ in range(64):
        hedged(queued(0.05), window, scheduler=clock)
    assert window.delay() == pytest.approx(0.05)
    assert window.hedges == 0
