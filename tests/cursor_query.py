"""The merged query the cursor tests make cursors for: ``AuditLog``'s key ``/shared/a.txt``."""

from __future__ import annotations

from pynamodb_sharding._cursor import CursorScope, RawKey
from pynamodb_sharding._exceptions import ShardKeyError

SCOPE = CursorScope(model="AuditLog", table="audit_log", key={"S": "/shared/a.txt"}, index=None, forward=True)
KEY_NAMES = ("file_path", "accessed_at")


def physical(shard: int) -> str:
    """The physical key of a shard of ``/shared/a.txt`` (shards 1 to 10,000)."""
    if not 1 <= shard <= 10_000:
        raise ShardKeyError(f"shard {shard} out of range")
    return f"/shared/a.txt_{shard}"


def start_key(shard: int, at: str = "17") -> RawKey:
    """A shard's start key: the item of that shard at ``accessed_at``."""
    return {"file_path": {"S": physical(shard)}, "accessed_at": {"N": at}}
