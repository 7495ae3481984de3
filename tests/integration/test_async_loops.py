"""The rules of docs/async.rst "Event loops, threads and fork", on DynamoDB Local.

A loop per thread: two threads, each running its own event loop, write and read merged queries
at once; each gets its own answers and its loop its own connections. Fork: a child forked
before its loop starts opens its own connections and works; a child forked while the parent's
loop holds pooled connections, running that same loop object, detects the fork by pid and
opens new connections: the parent's are neither used nor closed, and the parent's loop goes on
using them after the child has exited.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, _async_http
from pynamodb_sharding import _async_transport as transport
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop
from tests.raw import raw_items


class LoopLog(ShardedModel):
    class Meta:
        table_name = "async_loop_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


def session_of(loop: asyncio.AbstractEventLoop) -> _async_http.Pool:
    """The connections of ``loop`` in this process."""
    return _async_http._pools[loop]


def idle_connections(pool: _async_http.Pool) -> list[_async_http.Connection]:
    return [connection for connections in pool._idle.values() for connection in connections]


async def write_and_read(key: str, count: int) -> tuple[list[int], int, _async_http.Pool]:
    """``count`` items written at once under ``key``, then read back merged; and the connections used."""
    await asyncio.gather(*(LoopLog(key, n).asave() for n in range(count)))
    items = [item.at async for item in LoopLog.aquery(key)]
    total = await LoopLog.acount(key)
    session = session_of(asyncio.get_running_loop())
    await transport.close_sessions()
    return items, total, session


def stored(key: str) -> list[int]:
    """The items of ``key`` in the table itself, over its 4 shards (raw reads)."""
    return sorted(int(item["at"]["N"]) for item in raw_items(LoopLog) if item["path"]["S"].startswith(f"{key}_"))


def test_a_loop_per_thread(dynamodb_models: BindModels) -> None:
    dynamodb_models(LoopLog)
    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def worker(key: str, count: int) -> None:
        try:
            barrier.wait(timeout=30)  # both loops run at once
            results[key] = asyncio.run(write_and_read(key, count))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(key, count)) for key, count in (("/a", 30), ("/b", 40))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert results["/a"][:2] == (list(range(30)), 30)
    assert results["/b"][:2] == (list(range(40)), 40)
    assert results["/a"][2] is not results["/b"][2]  # each loop its own connections
    assert stored("/a") == list(range(30))
    assert stored("/b") == list(range(40))


def run_in_child(child: Any) -> int:
    """Fork; the child runs ``child()`` (true: exit 0) and never returns here; the exit status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child process
        code = 1
        try:
            code = 0 if child() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_child_forked_before_its_loop_starts_opens_its_own_connections(dynamodb_models: BindModels) -> None:
    dynamodb_models(LoopLog)

    def child() -> bool:
        items, total, _ = asyncio.run(write_and_read("/child", 12))
        return items == list(range(12)) and total == 12

    assert run_in_child(child) == 0
    assert stored("/child") == list(range(12))
    assert LoopLog.count("/child") == 12


def test_a_child_forked_while_the_parents_loop_holds_connections(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(LoopLog)
    for n in range(10):
        LoopLog("/parent", n).save()

    async def read(key: str) -> list[int]:
        return [item.at async for item in LoopLog.aquery(key)]

    assert loop.run(read("/parent")) == list(range(10))
    parent_session = session_of(loop.loop)
    pooled = idle_connections(parent_session)
    assert pooled  # idle keep-alive connections of the parent's loop

    def child() -> bool:
        async def work() -> bool:
            await asyncio.gather(*(LoopLog("/forked", n).asave() for n in range(8)))
            items = await read("/forked")
            own = session_of(asyncio.get_running_loop())
            return items == list(range(8)) and own is not parent_session and not parent_session.closed

        # The very loop object of the parent, run again in the child.
        return loop.loop.run_until_complete(work())

    assert run_in_child(child) == 0
    assert stored("/forked") == list(range(8))
    # The parent's connections were neither used nor closed by the child: its loop goes on.
    assert session_of(loop.loop) is parent_session
    assert not parent_session.closed
    assert idle_connections(parent_session) == pooled  # none used by the child, none closed
    assert not any(connection.lost for connection in pooled)
    assert loop.run(read("/parent")) == list(range(10))
    assert loop.run(read("/forked")) == list(range(8))


def test_a_result_used_on_another_loop_is_refused_and_resumes_there_from_its_cursor(
    dynamodb_models: BindModels,
) -> None:
    """A result started on one loop and iterated on another (another thread's, with the first
    loop still open; or a new loop after the first was closed) raises at once, naming the fix,
    instead of waiting forever on pages that belong to the first loop; its cursor resumes on the
    new loop with exactly the items not yet returned."""
    dynamodb_models(LoopLog)
    with LoopLog.batch_write() as batch:
        for n in range(40):
            batch.save(LoopLog("/shared", n))
    expected = [item.at for item in LoopLog.query("/shared")]
    first = asyncio.new_event_loop()
    result = LoopLog.aquery("/shared", page_size=5)

    async def take(count: int) -> list[int]:
        return [(await result.__anext__()).at for _ in range(count)]

    taken = first.run_until_complete(take(3))
    sent: list[str] = []
    events = LoopLog._get_connection().connection.client.meta.events
    def count(model: Any, **_: Any) -> None:
        sent.append(model.name)

    events.register("before-call.dynamodb", count)
    outcome: dict[str, Any] = {}

    def elsewhere() -> None:
        async def go_on() -> list[int]:
            return [item.at async for item in result]

        async def resume() -> list[int]:
            resumed = LoopLog.aquery("/shared", page_size=5, last_evaluated_key=result.last_evaluated_key)
            return [item.at async for item in resumed]

        try:
            asyncio.run(asyncio.wait_for(go_on(), 30))
        except RuntimeError as error:
            outcome["error"] = str(error)
            outcome["sent"] = list(sent)
        outcome["resumed"] = asyncio.run(resume())

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(60)
    events.unregister("before-call.dynamodb", count)
    assert not thread.is_alive()
    assert "LoopLog.aquery: this result was started on another event loop" in outcome["error"]
    assert "last_evaluated_key=result.last_evaluated_key" in outcome["error"]
    assert [] == outcome["sent"]  # refused before anything was sent
    assert expected == taken + outcome["resumed"]
    # The first loop closed with the result's pages pending: a new loop is refused the same way.
    first.close()
    assert any(task.get_loop() is first for task in transport._running)  # its read-ahead pages
    with pytest.raises(RuntimeError, match="started on another event loop"):
        asyncio.run(take(1))
    # The closed loop's pending pages never finish: the library lets them go.
    assert not any(task.get_loop() is first for task in transport._running)
