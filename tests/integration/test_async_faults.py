"""Faults, cancellations and throttles on the async methods, on DynamoDB Local.

Lost replies, closed connections and server errors are retried by botocore as on the sync path
(the same client and hooks); a request that fails raises PynamoDB's error from ``__anext__``
and the next ``__anext__`` sends it again; a read that times out on the loop's connection is botocore's
``ReadTimeoutError`` while the loop keeps running; a cancelled query leaves no request in
flight; a cancelled ``asave`` finishes its write first; a hot ``DynamicShards`` key written
with ``asave`` under the partition-limit simulator grows, each item stored once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import GetError, PutError, QueryError

from pynamodb_sharding import (
    CursorError,
    DynamicShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardMetadata,
)
from pynamodb_sharding import _async_transport as transport
from pynamodb_sharding.testing import inject_latency
from pynamodb_sharding.testing.plugin import BindModels
from pynamodb_sharding.testing.simulator import simulate_partition_limits
from tests.async_loop import Loop
from tests.faults import Faults
from tests.raw import raw_items


class Visit(ShardedModel):
    class Meta:
        table_name = "async_fault_visit"
        max_retry_attempts = 2

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class HotShards(ShardMetadata):
    class Meta:
        table_name = "async_hot_shards"


class HotLog(ShardedModel):
    class Meta:
        table_name = "async_hot_log"
        max_retry_attempts = 1

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(HotShards, max_shards=8, cooldown=0.5, backoff=(0.05, 0.1), max_attempts=1000))


def fill(count: int) -> None:
    for n in range(count):
        Visit("/home", n).save()


def test_lost_replies_and_server_errors_are_retried(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(Visit)
    fill(20)
    expected = [visit.at for visit in Visit.query("/home", page_size=3)]
    faults = Faults(Visit, "Query")
    faults.plan = ["lost", "closed", "server-error", "ok", "lost"]

    async def read() -> list[int]:
        return [visit.at async for visit in Visit.aquery("/home", page_size=3)]

    assert expected == loop.run(read())
    assert ["lost", "closed", "server-error", "ok", "lost"] == faults.log[:5]


def test_a_failed_request_raises_and_the_next_anext_sends_it_again(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(Visit)
    fill(12)
    expected = [visit.at for visit in Visit.query("/home", page_size=2)]
    faults = Faults(Visit, "Query")

    async def read() -> tuple[list[int], list[str | None]]:
        result = Visit.aquery("/home", page_size=2)
        seen = [(await result.__anext__()).at]
        faults.plan = ["denied"]  # AccessDenied: not retried by botocore
        errors: list[str | None] = []
        while True:
            try:
                seen.append((await result.__anext__()).at)
            except QueryError as error:
                errors.append(error.cause_response_code)
            except StopAsyncIteration:
                return seen, errors

    assert (expected, ["AccessDeniedException"]) == loop.run(read())


def test_errors_are_the_sync_ones(dynamodb_models: BindModels, loop: Loop) -> None:
    """Each failing call raises, async, the class its sync twin raises."""
    dynamodb_models(Visit)
    fill(2)
    stored = Visit.get("/home", 1)
    calls: list[tuple[Any, Any]] = [
        (lambda: stored.save(condition=Visit.at.does_not_exist()),
         lambda: stored.asave(condition=Visit.at.does_not_exist())),
        (lambda: Visit.get("/home", 99), lambda: Visit.aget("/home", 99)),
        (lambda: next(Visit.query("/home", last_evaluated_key="not-a-token")),
         lambda: Visit.aquery("/home", last_evaluated_key="not-a-token").__anext__()),
        (lambda: Visit("/home").save(), lambda: Visit("/home").asave()),
    ]

    def sync_error(call: Any) -> type[BaseException]:
        with pytest.raises(Exception) as raised:  # noqa: PT011  # the class is what is compared
            call()
        return raised.type

    async def async_errors() -> list[type[BaseException]]:
        found = []
        for _, call in calls:
            with pytest.raises(Exception) as raised:  # noqa: PT011
                await call()
            found.append(raised.type)
        return found

    expected = [sync_error(call) for call, _ in calls]
    assert expected == loop.run(async_errors())
    assert issubclass(expected[0], PutError)
    assert issubclass(expected[1], Visit.DoesNotExist)
    assert issubclass(expected[2], CursorError)


def test_a_bad_cursor_names_the_call_made(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(Visit)
    fill(2)
    with pytest.raises(CursorError) as sync:
        next(Visit.query("/home", last_evaluated_key="not-a-token"))

    async def bad() -> CursorError:
        with pytest.raises(CursorError) as raised:
            await Visit.aquery("/home", last_evaluated_key="not-a-token").__anext__()
        return raised.value

    error = loop.run(bad())
    assert str(sync.value).startswith("Visit.query(last_evaluated_key=...): the cursor")
    assert str(error) == str(sync.value).replace("Visit.query(", "Visit.aquery(", 1)


def test_a_read_timeout_on_the_loop_is_botocores_and_the_loop_keeps_running(loop: Loop) -> None:
    """A server that accepts and never answers: each attempt times out, botocore retries once,
    PynamoDB raises ``GetError`` caused by ``ReadTimeoutError``; other tasks run meanwhile."""
    accepted: list[Any] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # keeps the connection open, answers nothing

    server = loop.run(asyncio.start_server(silent, "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]

    class Silent(ShardedModel):
        class Meta:
            table_name = "async_silent"
            host = f"http://127.0.0.1:{port}"
            region = "us-east-1"
            aws_access_key_id = "local"
            aws_secret_access_key = "local"
            read_timeout_seconds = 0.2
            max_retry_attempts = 1

        page = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        shards = Sharding(RandomShards(4))

    async def get_while_ticking() -> tuple[BaseException, int]:
        ticks = 0
        task = asyncio.ensure_future(Silent.aget("/home", 1))
        while not task.done():
            await asyncio.sleep(0.01)
            ticks += 1
        error = task.exception()
        assert error is not None
        return error, ticks

    try:
        error, ticks = loop.run(get_while_ticking())
    finally:
        server.close()
        for writer in accepted:
            writer.close()
    assert isinstance(error, GetError)
    assert isinstance(error.cause, ReadTimeoutError)
    assert len(accepted) == 2  # the attempt and botocore's retry
    assert ticks >= 20  # 2 x 0.2 s of timeouts, the loop ticking every 10 ms


def _in_flight() -> int:
    """The library's tasks of the running loop still in flight (another test's closed loop may
    have left its own)."""
    loop = asyncio.get_running_loop()
    return sum(1 for task in transport._running if task.get_loop() is loop)


async def _settled() -> None:
    """Let cancelled tasks run their cancellation (a bounded number of loop turns)."""
    for _ in range(100):
        if not _in_flight():
            return
        await asyncio.sleep(0)


def test_a_cancelled_query_leaves_no_request_in_flight(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(Visit)
    fill(8)

    async def cancel_mid_flight() -> tuple[int, int, int]:
        sent = asyncio.Event()
        with inject_latency(Visit, 0.5, operations=["Query"]) as latency:
            client = Visit._get_connection().connection.client
            client.meta.events.register("before-send.dynamodb", lambda **_: sent.set(), unique_id="async-sent")
            try:
                task = asyncio.ensure_future(Visit.aquery("/home").__anext__())
                await sent.wait()
                in_flight = _in_flight()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await _settled()
                return in_flight, _in_flight(), latency.requests.get("Query", 0)
            finally:
                client.meta.events.unregister("before-send.dynamodb", unique_id="async-sent")

    in_flight, left, queries = loop.run(cancel_mid_flight())
    assert in_flight == 4  # one request per shard was in flight
    assert left == 0
    assert queries == 4  # nothing was sent after the cancellation


def test_a_cancelled_asave_finishes_its_write_first(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(Visit)

    async def cancel_mid_put() -> list[dict[str, Any]]:
        sent = asyncio.Event()
        with inject_latency(Visit, 0.2, operations=["PutItem"]):
            client = Visit._get_connection().connection.client
            client.meta.events.register("before-send.dynamodb", lambda **_: sent.set(), unique_id="async-put")
            try:
                task = asyncio.ensure_future(Visit("/home", 7).asave())
                await sent.wait()
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                return raw_items(Visit)  # read at once: the put is done when the cancellation is raised
            finally:
                client.meta.events.unregister("before-send.dynamodb", unique_id="async-put")

    stored = loop.run(cancel_mid_put())
    assert [item["at"] for item in stored] == [{"N": "7"}]
    assert stored[0]["page"]["S"].startswith("/home_")


def test_a_hot_key_grows_under_async_writes(dynamodb_models: BindModels, loop: Loop) -> None:
    """16 concurrent writers on one event loop, 10 saves each, 5 write units per partition."""
    dynamodb_models(HotLog)

    async def writers() -> None:
        async def writer(index: int) -> None:
            for n in range(10):
                await HotLog("/hot", index * 100 + n).asave()

        await asyncio.gather(*(writer(index) for index in range(16)))

    with simulate_partition_limits(HotLog, write_units=5) as simulator:
        loop.run(writers())
    assert HotLog.shards.shard_count("/hot") > 1
    assert simulator is not None
    stored = raw_items(HotLog)
    assert sorted(int(item["accessed_at"]["N"]) for item in stored) == sorted(
        index * 100 + n for index in range(16) for n in range(10))
    assert loop.run(HotLog.acount("/hot")) == 160 == HotLog.count("/hot")
    counts = [entry.count for entry in HotLog.shards.history("/hot")]
    assert counts == sorted(set(counts))  # each change grew the count
