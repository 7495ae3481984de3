"""The last step of ``compact``: trim shard-count histories so reads stop covering empty shards.

After ``shrink(key, to=n)`` reads of a ``DynamicShards`` key keep covering every count in its
history, so nothing written under the larger count is hidden. Once the compact job has moved
the items of the shards above ``n`` down, this step drops the old counts from the history
(:meth:`~pynamodb_sharding._metadata.ShardCountStore.trim_history`). A key is trimmed only when

* the shrink is older than the strategy's cache TTL, so no writer still writes under the old
  count from its cache;
* consistent queries find no item in any shard above the count (an item written there by a
  writer that had not seen the shrink yet is moved by the next run);
* nobody changed the count since it was read (the trim is conditional on ``last_updated``).

Otherwise the key is left as it is and the report says why; run ``compact`` again later.
"""

from __future__ import annotations

from typing import Any

from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._metadata import ShardCountStore
from pynamodb_sharding.migration._jobs import CompactJob

__all__ = ["trim_histories"]


def _items_above(job: CompactJob, key: str, count: int, read_count: int) -> int:
    layout = job.target
    assert layout.manager is not None
    client = botocore_client(layout.model)
    found = 0
    first = layout.manager.first_shard
    for shard in range(count + first, read_count + first):
        request: dict[str, Any] = {
            "TableName": layout.table,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": layout.hash_name},
            "ExpressionAttributeValues": {":h": {"S": layout.manager.physical_key(key, shard)}},
            "Select": "COUNT",
            "ConsistentRead": True,
        }
        while True:
            reply = client.query(**request)
            found += int(reply.get("Count", 0))
            if "LastEvaluatedKey" not in reply:
                break
            request["ExclusiveStartKey"] = reply["LastEvaluatedKey"]
    return found


def trim_histories(job: CompactJob, *, left_waiting: bool = False) -> list[str]:
    """Trim the history of every key of ``job``'s model whose shards above its count are empty
    (``left_waiting``: the run left items where they were, for a later run to move).

    Returns:
        One line per key trimmed or left, for the job's report.
    """
    manager = job.target.manager
    assert manager is not None
    strategy: Any = manager.strategy
    store = getattr(strategy, "store", None)
    if not isinstance(store, ShardCountStore):
        return [f"history:    {manager.describe()} keeps no shard-count history; nothing to trim "
                f"(after a HashedShards count change, drop previous_counts from the declaration now)."]
    namespace = strategy.namespace if strategy.namespace is not None else manager.space.namespace
    owner = manager.space.name
    meta = store.metadata_model
    notes: list[str] = []
    trimmed = 0
    for item in meta.scan(meta.model == namespace, consistent_read=True):
        key = item.partition_key
        state = store.load(namespace, key, owner=owner)
        if state is None or state.read_count <= state.count:
            # No shard above the count. A key grown again since its shrink keeps the shrink in
            # its history: another compact run may still be moving items down with the moves
            # it planned from the lowered count (its page of moves is not bounded in time), and
            # reads read those shards first until a later shrink's compaction trims it.
            continue
        # Since the count changed (as read now), or since this job republished it to the hot-key
        # hints that writers read (a lost publish): a writer may use the old count a while after.
        age = strategy.clock() - state.last_updated
        since_published = job._count_changed(key)
        if since_published is not None:
            age = min(age, since_published)
        wait = job._ttl()
        if age < wait:
            notes.append(f"not trimmed: {key!r} changed its count (or the hot-key list showed writers the "
                         f"old one) {age:.0f} s ago; writers may still use the old count from their cache "
                         f"for up to {wait - age:.0f} s more: run compact again after that.")
            continue
        left = _items_above(job, key, state.count, state.read_count)
        if left:
            # Items this run left waiting (its count changed too recently when the scan reached
            # them, and the wait ran out before this step), or written since the scan passed.
            why = "left waiting by this run, or written after the scan passed" if left_waiting else (
                "written after the scan passed")
            notes.append(f"not trimmed: {key!r} still has {left} items in shards above {state.count} "
                         f"({why}): run compact again.")
            continue
        if store.trim_history(namespace, key, state, owner=owner) is None:
            notes.append(f"not trimmed: {key!r} changed its count meanwhile: run compact again.")
            continue
        trimmed += 1
    notes.insert(0, f"history:    trimmed {trimmed} keys; reads of them now cover only their current count")
    return notes
