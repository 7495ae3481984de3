"""``hedged``: the second attempt of a slow call, first success wins (threads, no DynamoDB)."""

from __future__ import annotations

import threading
import time

import pytest

from pynamodb_sharding._hedging import HEDGE_BUDGET, HEDGE_BURST, MIN_SAMPLES, LatencyWindow, hedged, mark_sent


def _warm(window: LatencyWindow, seconds: float = 0.01) -> None:
    for _ in range(MIN_SAMPLES):
        window.add(seconds)


def test_no_hedge_until_the_window_knows_enough_latencies() -> None:
    window = LatencyWindow()
    calls = []
    assert hedged(lambda: calls.append(1) or "ok", window) == "ok"
    assert (calls, window.hedges, window.requests) == ([1], 0, 1)
    assert window.delay() is None


def test_fast_call_is_sent_once() -> None:
    window = LatencyWindow()
    _warm(window, 0.2)
    calls = []
    assert hedged(lambda: calls.append(1) or "ok", window) == "ok"
    assert (len(calls), window.hedges) == (1, 0)


def test_slow_call_is_hedged_and_the_faster_answer_wins() -> None:
    window = LatencyWindow()
    _warm(window, 0.01)  # hedge after 10 ms
    attempts = []
    lock = threading.Lock()

    def send() -> str:
        with lock:
            attempts.append(len(attempts))
            mine = attempts[-1]
        if mine == 0:
            time.sleep(0.5)
            return "slow"
        return "fast"

    start = time.perf_counter()
    assert hedged(send, window) == "fast"
    assert time.perf_counter() - start < 0.4
    assert (len(attempts), window.hedges, window.hedge_wins) == (2, 1, 1)


def test_an_error_of_one_attempt_is_covered_by_the_other() -> None:
    window = LatencyWindow()
    _warm(window, 0.01)
    attempts = []
    lock = threading.Lock()

    def send() -> str:
        with lock:
            attempts.append(1)
            mine = len(attempts)
        if mine == 1:
            time.sleep(0.1)
            raise ConnectionError("first attempt lost")
        time.sleep(0.3)
        return "second"

    assert hedged(send, window) == "second"


def test_both_attempts_failing_raises_the_first_error() -> None:
    window = LatencyWindow()
    _warm(window, 0.01)
    attempts = []
    lock = threading.Lock()

    def send() -> str:
        with lock:
            attempts.append(1)
            mine = len(attempts)
        time.sleep(0.1 if mine == 1 else 0.2)
        raise ConnectionError(f"attempt {mine}")

    with pytest.raises(ConnectionError, match="attempt 1"):
        hedged(send, window)


def test_a_fast_error_is_raised_without_a_hedge() -> None:
    window = LatencyWindow()
    _warm(window, 0.2)

    def send() -> str:
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        hedged(send, window)
    assert window.hedges == 0


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
    # Latency triples at once: every request is slower than the window's delay, but hedges stay
    # within the budget: one per 10 requests, plus a burst of 64.
    window = LatencyWindow()
    for _ in range(4000):
        window.add(0.001)
    for _ in range(200):
        assert hedged(lambda: time.sleep(0.003) or "ok", window) == "ok"
    assert window.requests == 200
    # 64 at once, then one per 10 requests: 83 or 84 of the 200 slow requests are hedged.
    assert HEDGE_BURST <= window.hedges <= HEDGE_BURST + 200 * HEDGE_BUDGET
    assert window.hedges_refused >= 200 - HEDGE_BURST - 200 * HEDGE_BUDGET - 5  # a few may answer in time


def test_the_delay_counts_from_when_the_request_leaves() -> None:
    # In a wide fan-out a request may wait its turn (serialising, signing) before it leaves:
    # that wait is not the service being slow. A call that leaves after 150 ms and answers
    # 100 ms later is not hedged with a 200 ms delay (it would be at 350 ms); timed from the
    # call (no mark_sent), it is (at 200 ms, before its answer at 250 ms).
    def queued_then_quick(mark: bool) -> str:
        time.sleep(0.15)
        if mark:
            mark_sent()
        time.sleep(0.1)
        return "ok"

    marked, unmarked = LatencyWindow(), LatencyWindow()
    _warm(marked, 0.2)
    _warm(unmarked, 0.2)
    assert hedged(lambda: queued_then_quick(True), marked) == "ok"
    assert hedged(lambda: queued_then_quick(False), unmarked) == "ok"
    assert (marked.hedges, unmarked.hedges) == (0, 1)
