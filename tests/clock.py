"""The hand-moved clock of the tests whose library and simulator take ``clock=``/``timer=``/``sleep=``."""

from __future__ import annotations

__all__ = ["Clock"]


class Clock:
    """Seconds that move only when the test moves them (or a library's ``sleep`` waits).

    ``clock()`` reads them; :meth:`advance` moves them on, :meth:`at` sets them to ``start +
    seconds``; :meth:`sleep`, given to a library as its wait, moves them on at once and is
    recorded in :attr:`sleeps`. Pass the value a test's dates need (an epoch second, or 0).
    """

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.start = now
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def at(self, seconds: float) -> None:
        self.now = self.start + seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
