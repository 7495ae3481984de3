"""The request slots of an event loop and the reads they let in (``_async_transport._Slots``)."""

from __future__ import annotations

import asyncio

from pynamodb_sharding._async_transport import _Slots


def _busy(slots: _Slots, running: int, queued: int) -> list[str]:
    """Take ``running`` slots and queue ``queued`` calls; returns the log of calls started."""
    started: list[str] = []
    for n in range(running + queued):
        slots.start_or_queue(lambda n=n: started.append(f"call {n}"))
    return started


def test_a_read_waits_while_the_queue_is_half_the_limit_long() -> None:
    async def scenario() -> list[str]:
        slots = _Slots(4)  # backlog: 2 queued calls
        log = _busy(slots, 4, 2)

        async def read(name: str) -> None:
            await slots.enter()
            log.append(f"{name} in")
            slots.entered()

        first = asyncio.ensure_future(read("read A"))
        await asyncio.sleep(0)
        assert not first.done()
        slots.release()  # call 4 starts: one queued, shorter than the backlog
        await first
        return log

    assert ["call 0", "call 1", "call 2", "call 3", "call 4", "read A in"] == asyncio.run(scenario())


def test_reads_are_let_in_one_at_a_time_in_the_order_they_came() -> None:
    async def scenario() -> list[str]:
        slots = _Slots(4)
        log: list[str] = []
        gate = asyncio.Event()

        async def read(name: str) -> None:
            await slots.enter()
            log.append(f"{name} in")
            await gate.wait()  # has not sent its first requests yet
            log.append(f"{name} sent")
            slots.entered()

        tasks = [asyncio.ensure_future(read(name)) for name in ("A", "B", "C")]
        await asyncio.sleep(0.01)
        assert ["A in"] == log  # B and C wait although no request is queued
        gate.set()
        await asyncio.gather(*tasks)
        return log

    assert ["A in", "A sent", "B in", "B sent", "C in", "C sent"] == asyncio.run(scenario())


def test_a_read_cancelled_while_it_waits_lets_the_next_in() -> None:
    async def scenario() -> list[str]:
        slots = _Slots(2)  # backlog: 1 queued call
        log = _busy(slots, 2, 1)

        async def read(name: str) -> None:
            await slots.enter()
            log.append(f"{name} in")
            slots.entered()

        gone = asyncio.ensure_future(read("A"))
        waiting = asyncio.ensure_future(read("B"))
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.sleep(0)
        slots.release()  # call 2 starts: the queue is empty
        await waiting
        assert gone.cancelled()
        return log

    assert ["call 0", "call 1", "call 2", "B in"] == asyncio.run(scenario())


def test_a_read_cancelled_once_let_in_lets_the_next_in() -> None:
    async def scenario() -> list[str]:
        slots = _Slots(2)
        log = _busy(slots, 2, 1)

        async def read(name: str) -> None:
            await slots.enter()
            log.append(f"{name} in")
            slots.entered()

        first = asyncio.ensure_future(read("A"))
        second = asyncio.ensure_future(read("B"))
        await asyncio.sleep(0)
        slots.release()  # A is let in ...
        first.cancel()  # ... and cancelled before it runs
        await second
        assert first.cancelled()
        return log

    assert ["call 0", "call 1", "call 2", "B in"] == asyncio.run(scenario())
