"""One event loop per test for the async methods, closed with its HTTP connections."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from pynamodb_sharding.aio import close_connections

_T = TypeVar("_T")


class Loop:
    """``run(coroutine)`` on the test's own event loop (the one an app would run)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.loop.run_until_complete(close_connections())
        self.loop.close()


@pytest.fixture
def loop() -> Iterator[Loop]:
    running = Loop()
    try:
        yield running
    finally:
        running.close()


async def collect(result: Any) -> tuple[list[Any], Any, Any]:
    """The items of an async result, with its cursor and page token after the last one."""
    items = [item async for item in result]
    return items, result.last_evaluated_key, result.next_page_token


def loop_thread_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The ``time.sleep`` calls made on this (the event loop's) thread from now on."""
    sleeps: list[float] = []
    real_sleep = time.sleep
    loop_thread = threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is loop_thread:
            sleeps.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    return sleeps
