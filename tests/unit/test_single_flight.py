"""single_flight: one call for every caller asking at once, and none for a caller that comes late."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from pynamodb_sharding._pool import single_flight


class Reads:
    """A cache of one key and the reads that fill it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flights: dict[str, Future[int]] = {}
        self.cache: dict[str, int] = {}
        self.calls = 0

    def read(self, value: int = 7, *, hold: threading.Event | None = None) -> int:
        self.calls += 1
        if hold is not None:
            assert hold.wait(10)
        return value

    def keep(self, value: int) -> int:
        self.cache["k"] = value
        return value

    def get(self, *, hold: threading.Event | None = None) -> int:
        return single_flight(self.lock, self.flights, "k", lambda: self.read(hold=hold), self.keep,
                             lambda: self.cache.get("k"))


def wait_for_waiters(flights: dict[str, Future[int]], waiters: int) -> None:
    """Until ``waiters`` callers wait on the flight under way (a private of Future's condition)."""
    for _ in range(10_000):
        flight = flights.get("k")
        if flight is not None and len(flight._condition._waiters) >= waiters:  # type: ignore[attr-defined]
            return
        threading.Event().wait(0.001)
    raise AssertionError(f"{waiters} callers never waited on the flight")


def test_callers_asking_at_once_share_one_call() -> None:
    reads = Reads()
    hold = threading.Event()
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(reads.get, hold=hold)
        wait_for_waiters(reads.flights, 0)  # the first caller's flight has started
        others = [pool.submit(reads.get, hold=hold) for _ in range(7)]
        wait_for_waiters(reads.flights, 7)
        hold.set()
        assert [first.result()] + [other.result() for other in others] == [7] * 8
    assert reads.calls == 1
    assert reads.flights == {}


def test_a_caller_that_missed_the_cache_just_before_a_flight_ended_takes_its_result() -> None:
    reads = Reads()
    assert reads.cache.get("k") is None  # this caller misses the cache ...
    assert reads.get() == 7  # ... another caller's flight ends and keeps 7 ...
    reads.calls = 0
    # ... and this caller, which saw no flight under way, must not read a second time.
    assert single_flight(reads.lock, reads.flights, "k", lambda: reads.read(8), reads.keep,
                         lambda: reads.cache.get("k")) == 7
    assert reads.calls == 0


def test_without_a_kept_value_a_new_flight_reads() -> None:
    reads = Reads()
    assert single_flight(reads.lock, reads.flights, "k", lambda: reads.read(8), reads.keep) == 8
    assert reads.calls == 1
    assert reads.cache == {"k": 8}


def test_a_failed_call_is_raised_to_every_caller_and_the_next_caller_reads_again() -> None:
    reads = Reads()
    hold = threading.Event()

    def fail() -> int:
        reads.calls += 1
        assert hold.wait(10)
        raise OSError("connection reset")

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(single_flight, reads.lock, reads.flights, "k", fail, reads.keep)
        wait_for_waiters(reads.flights, 0)
        second = pool.submit(single_flight, reads.lock, reads.flights, "k", fail, reads.keep)
        wait_for_waiters(reads.flights, 1)
        hold.set()
        for future in (first, second):
            with pytest.raises(OSError, match="connection reset"):
                future.result()
    assert reads.calls == 1
    assert reads.flights == {}
    assert reads.get() == 7
