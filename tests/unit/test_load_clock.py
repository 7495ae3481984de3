"""LoadClock: simulated seconds moved by the operations started."""

from __future__ import annotations

import threading

import pytest

from pynamodb_sharding.testing import LoadClock


def test_each_tick_is_one_operations_share_of_a_second() -> None:
    clock = LoadClock(40, start=100.0)
    assert clock() == 100.0
    for _ in range(40):
        clock.tick()
    assert clock() == pytest.approx(101.0)


def test_threads_ticking_at_once_lose_no_tick() -> None:
    clock = LoadClock(1000, start=0.0)
    threads = [threading.Thread(target=lambda: [clock.tick() for _ in range(500)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock() == pytest.approx(4.0)


@pytest.mark.parametrize("rate", [0, -1.5, float("nan")])
def test_a_rate_that_is_no_positive_number_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="per_second must be a positive number"):
        LoadClock(rate)
