"""The request slots of an event loop and the reads they let in (``_async_transport._Slots``)."""

from __future__ import annotations

import asyncio
import contextlib

from pynamodb_sharding._async_transport import DEFAULT_ASYNC_REQUESTS, _LoopExecutor, _Slots, _slots, run
from pynamodb_sharding._pool import BoundedSubmitter


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


def test_a_slot_handed_to_a_task_cancelled_before_it_resumes_goes_on() -> None:
    """The slot a release hands to a waiting ``acquire`` is not lost when the waiting task is
    cancelled before it runs again (it ran out of slots for good, and the loop hung)."""

    async def scenario() -> int:
        slots = _Slots(1)
        await slots.acquire()
        waiting = asyncio.ensure_future(slots.acquire())
        await asyncio.sleep(0)  # queued behind the held slot
        slots.release()  # handed to the waiting task, which has not resumed yet
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        return slots.free

    assert 1 == asyncio.run(scenario())


def test_a_shard_request_cancelled_before_its_task_starts_gives_its_slot_back() -> None:
    """A merged query cancels the shard requests it no longer needs once it has its limit; one
    whose task had not started yet kept its slot, and after 64 such the loop's requests hung."""

    async def scenario() -> tuple[int, list[str]]:
        loop = asyncio.get_running_loop()
        executor = _LoopExecutor(loop)
        ran: list[str] = []
        futures = [executor.submit(ran.append, f"request {n}") for n in range(8)]
        for future in futures[:6]:  # their tasks were created, none has run a step
            future.cancel()
        await asyncio.sleep(0.01)
        return _slots(loop).free, ran

    free, ran = asyncio.run(scenario())
    assert (DEFAULT_ASYNC_REQUESTS, ["request 6", "request 7"]) == (free, ran)


def test_a_merged_query_request_cancelled_before_it_starts_frees_its_place_in_the_query() -> None:
    """A shard request cancelled before its task started still counts itself out of the merged
    query's requests running (``max_workers``): the query's next request starts."""

    def query() -> tuple[bool, str]:
        submitter = BoundedSubmitter(1)  # one request of the query at a time
        first = submitter.submit(lambda: "first")
        first.cancel()  # its task was created, and has not run a step
        second = submitter.submit(lambda: "second")
        return first.cancelled(), second.result()

    async def scenario() -> tuple[bool, str]:
        return await asyncio.wait_for(run(query), 5)

    assert (True, "second") == asyncio.run(scenario())
