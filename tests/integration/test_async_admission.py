"""Many merged queries at once on one event loop: they start as the loop's queue of shard
requests drains (``_async_transport._Slots.enter``), each returning the sync query's items."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding import _async_transport as transport
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop
from tests.paging import apage_by_page


class Hit(ShardedModel):
    class Meta:
        table_name = "async_admission_hit"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


KEYS = [f"/page/{n}" for n in range(12)]


def test_merged_queries_start_a_few_at_a_time_and_return_the_sync_items(
    dynamodb_models: BindModels, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYNAMODB_SHARDING_ASYNC_REQUESTS", "2")  # read when the loop's slots are made
    dynamodb_models(Hit)
    with Hit.batch_write() as batch:
        for key in KEYS:
            for at in range(8):
                batch.save(Hit(key, at))
    expected = {key: [hit.at for hit in Hit.query(key)] for key in KEYS}
    logical = {Hit.shards.physical_key(key, shard): key for key in KEYS for shard in range(1, 5)}
    started: set[str] = set()
    finished: set[str] = set()
    most_open = most_queued = 0
    loop = Loop()  # created after the environment variable is set

    def sent(request: Any, **_: Any) -> None:
        nonlocal most_open, most_queued
        body = json.loads(request.body)
        physical = next(value["S"] for value in body["ExpressionAttributeValues"].values())
        started.add(logical[physical])
        most_open = max(most_open, len(started - finished))
        most_queued = max(most_queued, len(transport._slots(loop.loop)._queue))

    events = Hit._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", sent, unique_id="test-admission-sent")

    async def one(key: str) -> tuple[str, list[int]]:
        items = [hit.at async for hit in Hit.aquery(key)]
        finished.add(key)
        return key, items

    async def burst() -> list[tuple[str, list[int]]]:
        return await asyncio.gather(*(one(key) for key in KEYS))

    try:
        results = loop.run(burst())
    finally:
        loop.close()
        events.unregister("before-send.dynamodb.Query", unique_id="test-admission-sent")
    assert [(key, expected[key]) for key in KEYS] == results
    assert [list(range(8))] * len(KEYS) == [items for _key, items in results]
    # 2 requests in flight, a new query let in once none waits for a slot: at most one query's
    # 4 shard requests wait for a slot at any time (planned all at once: 46), and the queries
    # are answered one after another.
    assert most_queued <= 4
    assert most_open <= 3
    assert set(KEYS) == started


def test_pages_with_a_limit_over_smaller_page_sizes_give_every_request_slot_back(
    dynamodb_models: BindModels, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A query with ``limit`` and a smaller ``page_size`` cancels the shard requests it no
    longer needs once it has its limit; those whose tasks had not started kept their request
    slots, and after a few dozen pages every async call on the loop waited forever."""
    monkeypatch.setenv("PYNAMODB_SHARDING_ASYNC_REQUESTS", "8")
    dynamodb_models(Hit)
    with Hit.batch_write() as batch:
        for at in range(60):
            batch.save(Hit("/hot", at))
    loop = Loop()

    async def every_page(limit: int, page_size: int) -> list[int]:
        read = await apage_by_page(Hit.aquery, hash_key="/hot", limit=limit, page_size=page_size)
        return [hit.at for hits, _ in read for hit in hits]

    async def rounds() -> list[list[int]]:
        # 3 rounds of 15 to 20 pages: without the slots back, the loop runs out in the first.
        return [await asyncio.wait_for(every_page(limit, 3), 60) for limit in (4, 4, 5)]

    try:
        results = loop.run(rounds())
        free = transport._slots(loop.loop).free
    finally:
        loop.close()
    assert [list(range(60))] * 3 == results
    assert 8 == free  # at rest, every slot is free
