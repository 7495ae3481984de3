"""The async reads as users type-check them (``mypy --strict typing_tests``; never executed)."""

from __future__ import annotations

from typing import assert_type

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.indexes import AllProjection

from pynamodb_sharding import RandomShards, ShardedIndex, ShardedModel, Sharding
from pynamodb_sharding.aio import (
    AsyncBatchWrite,
    AsyncMergedResult,
    AsyncResult,
    AsyncResultIterator,
    AsyncTransactGet,
    AsyncTransactWrite,
)


class ByDay(ShardedIndex["AuditLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class AuditLog(ShardedModel):
    class Meta:
        table_name = "audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    shards = Sharding(RandomShards(8))
    by_day = ByDay()


async def read() -> None:
    page = AuditLog.aquery("/shared/firetvGen2.txt", AuditLog.accessed_at > 0, limit=50)
    assert_type(page, AsyncMergedResult[AuditLog])
    async for entry in page:
        assert_type(entry, AuditLog)
    token: str | None = page.next_page_token
    by_day = AuditLog.by_day.aquery("20160226", limit=30, last_evaluated_key=token)
    assert_type(by_day, AsyncMergedResult[AuditLog])
    async for logged in by_day:
        assert_type(logged.accessed_at, float)
    assert_type(await AuditLog.by_day.acount("20160226", AuditLog.accessed_at > 0), int)
    assert_type(await AuditLog.acount("/shared/firetvGen2.txt"), int)


async def the_rest() -> None:
    scan = AuditLog.ascan(AuditLog.day == "20160226", limit=10)
    assert_type(scan, AsyncResultIterator[AuditLog])
    async for scanned in scan:
        assert_type(scanned, AuditLog)
    assert_type(AuditLog.by_day.ascan(limit=3), AsyncResultIterator[AuditLog])
    found = AuditLog.abatch_get([("/a", 1), ("/a", 2)])
    assert_type(found, AsyncResult[AuditLog])
    assert_type(await found, list[AuditLog])
    entry = AuditLog("/a", 1, day="20160226")
    await entry.aupdate([AuditLog.day.set("20160227")])
    assert_type(await entry.arefresh(), None)
    async with AuditLog.abatch_write() as batch:
        assert_type(batch, AsyncBatchWrite[AuditLog])
        await batch.save(entry)
    connection = Connection()
    async with AsyncTransactWrite(connection=connection) as transaction:
        await transaction.save(entry)
    async with AsyncTransactGet(connection=connection) as reads:
        future = await reads.get(AuditLog, "/a", 1)
    assert_type(future.get(), AuditLog)
    assert_type(await AuditLog.aexists(), bool)
