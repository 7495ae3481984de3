"""The virtual clock the rate tests run on (tests/virtual_time.py)."""

from __future__ import annotations

from typing import Any

import pytest

import tests.virtual_time as virtual_time
from tests.virtual_time import VirtualClock, paced_writes


class BackingOff:
    """A save that backs off ``seconds`` of the clock before it is acknowledged."""

    def __init__(self, clock: VirtualClock, seconds: float, saved: list[tuple[int, float]], number: int) -> None:
        self.clock, self.seconds, self.saved, self.number = clock, seconds, saved, number

    def save(self) -> None:
        self.clock.sleep(self.seconds)
        self.saved.append((self.number, self.clock.now))


def test_a_write_backing_off_past_the_last_step_ends_on_virtual_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the clock moving on after the last step, the write issued in it would sleep until
    # the stall timeout (300 real seconds; 5 here) and fail as a TimeoutError.
    monkeypatch.setattr(virtual_time, "STALL_TIMEOUT", 5.0)
    clock = VirtualClock(start=100.0)
    saved: list[tuple[int, float]] = []

    def model(number: int) -> Any:
        return BackingOff(clock, 0.3, saved, number)

    # One write a step for 4 steps (0.2 s), each backing off 0.3 s of the clock.
    acks, failures = paced_writes(model, lambda t: 20.0, 0.2, clock=clock, threads=4)
    assert failures == []
    assert sorted(acks) == [1, 2, 3, 4]
    # The last write was issued at 100.15 and ended 0.3 s later, at the first step's boundary
    # past its wake-up time (100.45, or 100.5 where the sum of the steps rounds below it);
    # the clock stopped there.
    last = max(at for _, at in saved)
    assert 100.45 - 1e-9 <= last <= 100.5 + 1e-9
    assert clock.now == last


def test_the_steps_issue_the_rate_asked_for() -> None:
    clock = VirtualClock(start=0.0)
    issued_at: list[float] = []

    class Instant:
        def __init__(self, number: int) -> None:
            self.number = number

        def save(self) -> None:
            issued_at.append(clock.now)

    acks, failures = paced_writes(Instant, lambda t: 40.0, 1.0, clock=clock, threads=2)
    assert failures == []
    assert len(acks) == 40  # 40 writes/s for one second of the clock
    assert clock.now == pytest.approx(1.0)  # nothing backing off: no step after the last
    assert sum(1 for at in issued_at if at < 0.475) == 20  # the first 10 steps (the 10th at 0.45)
