"""What users see, checked by ``mypy --strict typing_tests`` (never executed)."""

from __future__ import annotations

from typing import Any, assert_type

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    IndexThrottleError,
    ItemKey,
    MergedPageIterator,
    MetadataRequestError,
    RandomShards,
    ResizableShardStrategy,
    ShardedModel,
    Sharding,
    ShardingError,
    ShardKey,
    ShardManager,
    ShardStrategy,
    shard_manager,
)
from pynamodb_sharding._strategies import HistoryEntry


class OneShard:
    """A custom strategy written against the protocol alone."""

    max_shards = 1

    def shard_count(self, key: ShardKey) -> int:
        return 1

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return (1,)

    def write_shard(self, item: ItemKey) -> int:
        return 1

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return (1,)


def strategies(dynamic: DynamicShards) -> tuple[ShardStrategy, ShardStrategy, ShardStrategy, ResizableShardStrategy]:
    # The built-in strategies and a custom one satisfy the protocols they claim.
    return RandomShards(4), HashedShards(4), OneShard(), dynamic


class AuditLog(ShardedModel):
    class Meta:
        table_name = "audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(10))


class ArchivedAuditLog(AuditLog):
    pass


class ByDay(GlobalSecondaryIndex["DailyLog"]):  # type: ignore[no-untyped-call]  # PynamoDB: untyped __init_subclass__
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    shards = Sharding(HashedShards(8))


class DailyLog(ShardedModel):
    class Meta:
        table_name = "daily_log"

    log_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    by_day = ByDay()
    shards = Sharding(RandomShards(2))


def check_index() -> None:
    assert_type(DailyLog.by_day.shards, ShardManager[Any])
    assert_type(DailyLog.by_day.shards.read_shards("20160226"), tuple[int, ...])


def check() -> None:
    assert_type(AuditLog.shards, ShardManager[AuditLog])
    assert_type(shard_manager(AuditLog), ShardManager[AuditLog])
    assert_type(AuditLog.shards.refresh("/f"), int)
    assert_type(ArchivedAuditLog.shards, ShardManager[ArchivedAuditLog])
    assert_type(AuditLog.shards.read_shards("/f"), tuple[int, ...])
    assert_type(AuditLog.shards.history("/f"), list[HistoryEntry])
    assert_type(AuditLog.shards.decode_stored("/f"), tuple[str, int | None])
    assert_type(AuditLog.shards.legacy_unsharded, bool)
    item = AuditLog.get("/f", 1)
    assert_type(item, AuditLog)
    assert_type(item.shards, int | None)
    assert_type(item.file_path, str)
    for found in AuditLog.query("/f"):
        assert_type(found, AuditLog)
    pages = AuditLog.query("/f").page_iter
    assert_type(pages, MergedPageIterator)
    assert_type(pages.last_evaluated_key, dict[str, Any] | str | None)
    assert_type(pages.next_page_token, str | None)
    assert_type(AuditLog.query("/f").next_page_token, str | None)
    assert_type(pages.total_scanned_count, int)
    for page in pages:
        assert_type(page, dict[str, Any])
    for got in AuditLog.batch_get([("/f", 1)]):
        assert_type(got, AuditLog)
    assert_type(AuditLog.count("/f"), int)
    for scanned in AuditLog.scan(AuditLog.file_path == "/f"):
        assert_type(scanned, AuditLog)
    for archived in ArchivedAuditLog.scan():
        assert_type(archived, ArchivedAuditLog)


def save_errors(error: IndexThrottleError | MetadataRequestError) -> tuple[PutError, ShardingError]:
    # What save() raises under DynamicShards is caught by `except PutError` and `except ShardingError`.
    return error, error
