"""The latency injector delays each request by at least the configured time and counts requests.

Against DynamoDB Local: every request sent while it is active waits ``seconds`` (at least that
much wall time, and an injected sleep that records each delay), a delay of 0 sleeps not at all,
only the chosen operations are delayed when ``operations`` is given, every request is counted
per operation, concurrent requests wait side by side rather than in turn (all eight are in
their delay at once), and leaving the block removes the delay. ``record_requests`` delays
nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.latency import inject_latency, network_pause, record_requests
from tests.async_loop import Loop
from tests.raw import put_raw

BindModels = Callable[..., dict[type[Model], str]]
DELAY = 0.05


class Event(Model):
    class Meta:
        table_name = "latency_event"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)


class Other(Model):
    class Meta:
        table_name = "latency_other"

    pk = UnicodeAttribute(hash_key=True)


class Feed(ShardedModel):
    class Meta:
        table_name = "latency_feed"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


@pytest.fixture
def bound(dynamodb_models: BindModels) -> None:
    dynamodb_models(Event, Other, Feed)


@pytest.mark.usefixtures("bound")
class TestDelay:
    """Each request waits at least the delay; leaving the block removes it."""

    def test_each_request_takes_at_least_the_delay(self) -> None:
        Event("warm", 0).save()  # the first request also opens the connection
        with inject_latency(Event, DELAY) as injector:
            started = time.monotonic()
            for sk in range(4):
                Event("a", sk).save()
            assert len(list(Event.query("a"))) == 4
            elapsed = time.monotonic() - started
        assert elapsed >= 5 * DELAY
        assert injector.requests == {"PutItem": 4, "Query": 1}
        assert injector.total_requests == 5

    def test_a_delay_of_zero_never_sleeps(self) -> None:
        delays: list[float] = []
        with inject_latency(Event, 0, sleep=delays.append) as injector:
            Event("a", 0).save()
            Event.get("a", 0)
        assert [] == delays
        assert {"PutItem": 1, "GetItem": 1} == injector.requests

    def test_exit_removes_the_delay(self) -> None:
        delays: list[float] = []
        with inject_latency(Event, DELAY, sleep=delays.append):
            Event("a", 0).save()
        Event("a", 1).save()
        Event.get("a", 1)
        assert delays == [DELAY]

    def test_only_chosen_operations_are_delayed_but_all_are_counted(self) -> None:
        delays: list[float] = []
        with inject_latency(Event, DELAY, operations={"Query"}, sleep=delays.append) as injector:
            Event("a", 0).save()
            list(Event.query("a"))
            Event.get("a", 0)
        assert delays == [DELAY]
        assert injector.requests == {"PutItem": 1, "Query": 1, "GetItem": 1}

    def test_extra_models_share_the_injector_and_other_models_are_untouched(self) -> None:
        delays: list[float] = []
        with inject_latency(Event, DELAY, extra_models=[Other], sleep=delays.append) as injector:
            Other("x").save()
            Event("a", 0).save()
        assert injector.requests == {"PutItem": 2}
        with inject_latency(Event, DELAY, sleep=delays.append) as alone:
            Other("y").save()
        assert alone.requests == {}
        assert delays == [DELAY, DELAY]

    def test_concurrent_requests_wait_side_by_side(self) -> None:
        """Each delay waits until all eight requests are in theirs: requests delayed in turn would
        never get there, and the barrier would break after its timeout."""
        Event("warm", 0).save()
        barrier = threading.Barrier(8, timeout=30)
        delays: list[float] = []

        def all_at_once(seconds: float) -> None:
            delays.append(seconds)
            barrier.wait()

        with (
            inject_latency(Event, DELAY, sleep=all_at_once) as injector,
            ThreadPoolExecutor(max_workers=8) as pool,
        ):
            list(pool.map(lambda sk: Event("a", sk).save(), range(8)))
        assert {"PutItem": 8} == injector.requests
        assert [DELAY] * 8 == delays
        assert not barrier.broken

    def test_on_an_event_loop_the_delays_leave_the_loop_running_and_use_none_of_its_timers(
            self, loop: Loop) -> None:
        """``aquery``'s four shard requests wait without blocking the loop (a task keeps ticking
        meanwhile), at least the delay, and no wait is a timer of the loop,
        which would wake up to a millisecond late (the injector's thread ends each wait)."""
        put_raw(Feed, [{"pk": {"S": f"f_{1 + shard}"}, "sk": {"N": str(shard)}} for shard in range(4)])
        timers: list[float] = []
        call_at = loop.loop.call_at

        def counted(when: float, *args: Any, **kwargs: Any) -> Any:
            timers.append(when - loop.loop.time())
            return call_at(when, *args, **kwargs)

        loop.loop.call_at = counted  # type: ignore[method-assign]

        async def read() -> tuple[int, float, int]:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            ticker = asyncio.ensure_future(tick())
            started = time.monotonic()
            found = len([item async for item in Feed.aquery("f")])
            elapsed = time.monotonic() - started
            ticker.cancel()
            return found, elapsed, ticks

        loop.run(read())  # warm: connections opened, the endpoint learned
        with inject_latency(Feed, DELAY) as injector:
            found, elapsed, ticks = loop.run(read())
        assert found == 4
        assert injector.requests == {"Query": 4}
        assert elapsed >= DELAY
        assert ticks > 10
        assert not [delay for delay in timers if DELAY / 2 <= delay <= 2 * DELAY]

    def test_on_an_event_loop_a_delayed_request_keeps_its_place_among_the_requests_in_flight(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """With 2 requests in flight at most on the loop, 4 concurrent ``aquery`` of 4 shards
        each never have more than 2 requests in their delay at once: a request waiting for its
        round trip holds its place, as one on the network does (a wait that gave it back would
        let all 16 wait at once, and a benchmark would measure no limit)."""
        monkeypatch.setenv("PYNAMODB_SHARDING_ASYNC_REQUESTS", "2")  # read when the loop's slots are made
        put_raw(Feed, [{"pk": {"S": f"f{key}_{1 + shard}"}, "sk": {"N": str(shard)}}
                       for key in range(4) for shard in range(4)])
        waiting = most = 0

        def counted(seconds: float) -> None:
            nonlocal waiting, most
            waiting += 1
            most = max(most, waiting)
            try:
                network_pause(seconds)
            finally:
                waiting -= 1

        async def burst() -> list[int]:
            async def one(key: int) -> int:
                return len([item async for item in Feed.aquery(f"f{key}")])
            return list(await asyncio.gather(*(one(key) for key in range(4))))

        loop = Loop()  # created after the environment variable is set
        try:
            with inject_latency(Feed, DELAY, sleep=counted) as injector:
                found = loop.run(burst())
        finally:
            loop.close()
        assert found == [4, 4, 4, 4]
        assert injector.requests == {"Query": 16}
        assert 1 <= most <= 2

    def test_negative_delay_is_refused(self) -> None:
        with pytest.raises(ValueError, match="0 or more"), inject_latency(Event, -1):
            pass



@pytest.mark.usefixtures("bound")
def test_record_requests_keeps_bodies_without_delay() -> None:
    """record_requests counts per operation and keeps each request's JSON body, in order.

    Its delay is 0, which never sleeps (``TestDelay.test_a_delay_of_zero_never_sleeps``).
    """
    Event("warm", 0).save()
    with record_requests(Event) as sent:
        Event("a", 1).save()
        Event.get("a", 1)
    assert 0 == sent.seconds
    assert {"PutItem": 1, "GetItem": 1} == sent.requests
    first, second = sent.bodies()
    assert "Item" in first  # in the order sent
    assert "Key" in second
    assert "a" == sent.bodies("PutItem")[0]["Item"]["pk"]["S"]
    assert {"pk": {"S": "a"}, "sk": {"N": "1"}} == sent.bodies("GetItem")[0]["Key"]
