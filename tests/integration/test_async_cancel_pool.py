"""The pool warning counts only the requests that share the model's connection pool (DynamoDB Local).

:class:`~pynamodb_sharding.FanoutPoolWarning` says that a sync merged query may run more requests
at once than the model's botocore pool holds, counting this query's requests and those of the
model's other merged queries still open. An ``aquery`` sends its requests over its event loop's
connections, never that pool: an ``aquery`` left open, or cancelled by a timeout while its
caller awaited something else (its result still referenced, as a traceback or a task does),
adds nothing to what a sync query afterwards counts, exactly as after a completed ``aquery``.
"""

from __future__ import annotations

import asyncio
import warnings

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import FanoutPoolWarning, HashedShards, ShardedModel, Sharding
from pynamodb_sharding.aio import AsyncMergedResult
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop

KEY = "/pool"


class PooledHit(ShardedModel):
    """8 shards, 10 connections: one sync query's 8 requests fit; 16 would not."""

    class Meta:
        table_name = "cancel_pool_hit"
        max_pool_connections = 10

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8))


def test_an_aquery_cancelled_between_items_adds_nothing_to_a_sync_querys_count(
        dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(PooledHit)
    with PooledHit.batch_write() as batch:
        for at in range(40):
            batch.save(PooledHit(KEY, at))

    async def handler(result: AsyncMergedResult[PooledHit], seen: list[int]) -> None:
        async with asyncio.timeout(None) as deadline:
            async for hit in result:
                seen.append(hit.at)
                deadline.reschedule(asyncio.get_running_loop().time())  # its time is up now
                await asyncio.Event().wait()  # a slow client: the timeout cancels the handler here

    async def timed_out() -> tuple[AsyncMergedResult[PooledHit], list[int]]:
        result, seen = PooledHit.aquery(KEY, page_size=2), []
        with pytest.raises(TimeoutError):
            await handler(result, seen)
        return result, seen

    kept, seen = loop.run(timed_out())  # the result stays referenced, its merged query open
    assert [0] == seen
    with warnings.catch_warnings():
        warnings.simplefilter("error", FanoutPoolWarning)
        assert list(range(40)) == [hit.at for hit in PooledHit.query(KEY)]  # its own 8 requests
    # The control: two sync queries open at once share the pool, and the third one warns.
    first = PooledHit.query(KEY, page_size=2)
    next(first)
    with pytest.warns(FanoutPoolWarning, match="16 requests at once"):
        second = PooledHit.query(KEY, page_size=2)
    for query in (first, second):
        query.close()
    loop.run(kept.aclose())
