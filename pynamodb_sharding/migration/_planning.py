"""The dry run: what a job would do, estimated from ``DescribeTable`` and a sampled scan.

Nothing is written (not even the checkpoint table). The sample is the first ``sample_size``
items of a few parallel-scan segments spread over the table; the job decides for each sampled
item what it would do, and the figures are scaled to the table's item count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
from botocore.exceptions import ClientError

from pynamodb_sharding._exceptions import ShardKeyError
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._keys import MAX_TRANSACTION_ITEMS
from pynamodb_sharding._sizes import transaction_write_units
from pynamodb_sharding.migration._checkpoints import CheckpointStore
from pynamodb_sharding.migration._engine import JobOptions, current_pass, item_write_units
from pynamodb_sharding.migration._jobs import CompactJob, CopyJob, Job, Move, Put, ReindexJob, Rewrite

__all__ = ["MigrationPlan", "move_write_units", "plan"]

#: Parallel-scan segments the sample is drawn from.
_SAMPLE_SEGMENTS = 16
#: Index values a reindex plan lists by name (``--json`` has them all).
_VALUES_LISTED = 50


@attrs.frozen
class MigrationPlan:
    """What a job would do: estimates, scaled from a sample to the table's size."""

    job: str
    table_items: int
    table_bytes: int
    sampled: int
    estimated_items: int
    #: Logical keys seen in the sample: a lower bound (hot keys repeat, cold ones may be missed).
    estimated_keys: int
    estimated_writes: int
    estimated_moves: int
    estimated_write_units: int
    #: Old copies the moves would delete (one each), and the histories compact would trim.
    deletes: str
    segments_done: int
    total_segments: int
    ambiguous_keys: tuple[str, ...] = ()
    undecodable_keys: tuple[str, ...] = ()
    #: Index entries ``reindex`` would rewrite in place (one conditional update each).
    estimated_rewrites: int = 0
    #: ``reindex``: per logical index value, ``(value, entries rewritten, entries left as they
    #: are because they are other models')``, estimated like the rest.
    index_values: tuple[tuple[str, int, int], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"event": "plan", **attrs.asdict(self)}

    def lines(self) -> Iterator[str]:
        yield f"dry run:    {self.job} (nothing is written)"
        yield f"table:      {self.table_items} items, {self.table_bytes} bytes (DescribeTable)"
        yield f"sample:     {self.sampled} items scanned"
        yield f"estimate:   {self.estimated_items} items, at least {self.estimated_keys} logical keys"
        if self.job.startswith(f"{ReindexJob.kind} "):
            yield f"writes:     {self.estimated_rewrites} index entries rewritten in place, " \
                  f"about {self.estimated_write_units} write units"
            # Counted in the sample and scaled to the table's item count: exact only when the
            # sample is the whole table.
            about = "" if self.sampled >= self.table_items else "about "
            for value, rewrites, left in self.index_values[:_VALUES_LISTED]:
                yield f"value:      {value!r}: {about}{rewrites} entries rewritten" + \
                      (f", {about}{left} left as they are (other models')" if left else "")
            if len(self.index_values) > _VALUES_LISTED:
                yield f"values:     and {len(self.index_values) - _VALUES_LISTED} more (--json lists them all)"
        else:
            yield f"writes:     {self.estimated_writes} copies, {self.estimated_moves} moves " \
                  f"(one transaction each), about {self.estimated_write_units} write units"
        yield f"deletes:    {self.deletes}"
        yield f"segments:   {self.segments_done}/{self.total_segments} already done (checkpoints)"
        for key in self.ambiguous_keys:
            yield f"ambiguous:  {key!r} is a legacy key that also reads as a shard of another key"
        for key in self.undecodable_keys:
            yield f"undecodable: {key!r} is not a key of the source model; it would be left alone"


def move_write_units(move: Move) -> int:
    """The write units a move costs, as the job counts them: one transaction putting the new copy
    and deleting the old one; a legacy move also checks the key's other shards (when they fit in
    the transaction; else a read checks them first)."""
    checks = len(move.new_hash_keys) - 1 if move.legacy else 0
    if checks > MAX_TRANSACTION_ITEMS - 2:
        checks = 0
    return transaction_write_units([move.item, move.item], checks=checks)


def _sample(job: Job, sample_size: int) -> list[dict[str, Any]]:
    client = botocore_client(job.source.model)
    per_segment = max(1, sample_size // _SAMPLE_SEGMENTS)
    items: list[dict[str, Any]] = []
    for segment in range(_SAMPLE_SEGMENTS):
        reply = client.scan(TableName=job.source.table, Segment=segment, TotalSegments=_SAMPLE_SEGMENTS,
                            Limit=per_segment, ConsistentRead=True)
        items.extend(reply.get("Items", []))
    return items


def _ambiguous_keys(job: Job) -> tuple[str, ...]:
    """Legacy keys of a ``legacy_unsharded`` model that also read as another key's shard."""
    manager = job.target.manager
    if manager is None or not manager.legacy_unsharded:
        return ()
    from pynamodb_sharding.legacy import find_ambiguous_keys

    return tuple(find_ambiguous_keys(job.target.model))


def plan(job: Job, options: JobOptions | None = None, *, sample_size: int = 1000) -> MigrationPlan:
    """Estimate what ``job`` would do, writing nothing."""
    options = options or JobOptions()
    client = botocore_client(job.source.model)
    table = client.describe_table(TableName=job.source.table)["Table"]
    table_items = int(table.get("ItemCount") or 0)
    sample = _sample(job, sample_size)
    writes = moves = rewrites = units = 0
    keys: set[str] = set()
    undecodable: list[str] = []
    per_value: dict[str, int] = {}
    if isinstance(job, ReindexJob):
        job.foreign.clear()
    for item in sample:
        try:
            action = job.plan(item)
        except ShardKeyError:
            undecodable.append(item[job.source.hash_name]["S"])
            continue
        if isinstance(action, Put):
            writes += 1
            units += item_write_units(action.item)
            keys.add(action.logical_key)
        elif isinstance(action, Move):
            moves += 1
            units += move_write_units(action)
            keys.add(action.logical_key)
        elif isinstance(action, Rewrite):
            rewrites += 1
            units += action.units
            keys.add(action.logical_key)
            per_value[action.logical_key] = per_value.get(action.logical_key, 0) + 1
        elif not isinstance(job, ReindexJob):
            keys.add(job.source.decode(item[job.source.hash_name]["S"])[0])
    items = max(table_items, len(sample))
    scale = items / len(sample) if sample else 0.0
    if isinstance(job, CopyJob):
        deletes = "nothing (the source table is only read)"
    elif isinstance(job, ReindexJob):
        deletes = "nothing (each index entry is rewritten in place, one conditional update per item)"
    else:
        deletes = f"about {round(moves * scale)} old copies, each in the transaction that puts its new copy"
        if isinstance(job, CompactJob):
            deletes += "; then the shard-count history of every key whose shards above its count are empty"
    done = 0
    store = CheckpointStore(client, options.checkpoint_table)
    try:
        done = sum(1 for c in store.load_all(current_pass(job, options, store), options.total_segments) if c.done)
    except ClientError:  # no checkpoint table yet: nothing done
        done = 0
    return MigrationPlan(
        job=job.describe(),
        table_items=table_items,
        table_bytes=int(table.get("TableSizeBytes") or 0),
        sampled=len(sample),
        estimated_items=items,
        estimated_keys=len(keys),
        estimated_writes=round(writes * scale),
        estimated_moves=round(moves * scale),
        estimated_write_units=round(units * scale),
        deletes=deletes,
        segments_done=done,
        total_segments=options.total_segments,
        ambiguous_keys=_ambiguous_keys(job),
        undecodable_keys=tuple(undecodable[:20]),
        estimated_rewrites=round(rewrites * scale),
        index_values=_index_values(job, per_value, scale),
    )


def _index_values(job: Job, rewrites: dict[str, int], scale: float) -> tuple[tuple[str, int, int], ...]:
    if not isinstance(job, ReindexJob):
        return ()
    values = sorted(set(rewrites) | set(job.foreign))
    return tuple((value, round(rewrites.get(value, 0) * scale), round(job.foreign.get(value, 0) * scale))
                 for value in values)
