"""Migrations: copy a table into a sharded model, re-shard or compact one, rewrite the bare
entries of a sharded index, verify the result.

Every job runs on one engine (:mod:`~pynamodb_sharding.migration._engine`): a parallel scan
split into segments, batched writes, one transaction per move, and a checkpoint per segment in
a DynamoDB table, so a job killed at any point resumes where it stopped and writes each item
exactly once. The command line ``pynamodb-sharding migrate ...`` calls these functions.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from collections.abc import Iterable

from pynamodb.models import Model

from pynamodb_sharding.migration._checkpoints import DEFAULT_CHECKPOINT_TABLE, Checkpoint, CheckpointStore
from pynamodb_sharding.migration._engine import JobOptions, RateLimiter, run, run_segment
from pynamodb_sharding.migration._jobs import CompactJob, CopyJob, Job, ReindexJob, ReshardJob
from pynamodb_sharding.migration._planning import MigrationPlan, plan
from pynamodb_sharding.migration._progress import (
    JsonProgress,
    MigrationReport,
    NullProgress,
    ProgressSink,
    RichProgress,
    Tally,
)
from pynamodb_sharding.migration._verification import (
    IndexDifference,
    KeyDifference,
    Snapshot,
    VerifyReport,
    compare,
    snapshot,
    verify,
)

__all__ = [
    "DEFAULT_CHECKPOINT_TABLE",
    "Checkpoint",
    "CheckpointStore",
    "CompactJob",
    "CopyJob",
    "IndexDifference",
    "Job",
    "JobOptions",
    "JsonProgress",
    "KeyDifference",
    "MigrationPlan",
    "MigrationReport",
    "NullProgress",
    "ProgressSink",
    "RateLimiter",
    "ReindexJob",
    "ReshardJob",
    "RichProgress",
    "Snapshot",
    "Tally",
    "VerifyReport",
    "compact",
    "compare",
    "copy",
    "plan",
    "reindex",
    "reshard",
    "run",
    "run_segment",
    "snapshot",
    "verify",
]


def copy(source: type[Model], target: type[Model], options: JobOptions | None = None,
         *, progress: ProgressSink | None = None) -> MigrationReport:
    """Copy every item of ``source``'s table into ``target``'s, keyed the way ``target`` shards.

    The source is only read. Safe to run again: a copy of an item always lands on the same
    physical key, also for random strategies, so it overwrites instead of doubling.

    Raises:
        MigrationError: the models' key attributes differ, or both use one table.
    """
    options = options or JobOptions()
    return run(CopyJob(source, target), options, progress=progress)


def reshard(model: type[Model], options: JobOptions | None = None,
            *, progress: ProgressSink | None = None, key_prefix: str | None = None) -> MigrationReport:
    """Move the items of ``model``'s table that are not where its current layout puts them.

    Each move is one transaction (conditional put of the new copy, delete of the unchanged
    old copy). Safe to run while the application reads and writes the table. On a table other
    models share, ``key_prefix`` (or a ``DiscriminatorAttribute``) says which items are
    ``model``'s; the others are left as they are.

    Raises:
        MigrationError: ``model`` is not a sharded model; or, without ``key_prefix`` or a
            discriminator, another model class of this process stores items in its table.
    """
    options = options or JobOptions()
    return run(ReshardJob(model, key_prefix=key_prefix), options, progress=progress)


def compact(model: type[Model], options: JobOptions | None = None,
            *, progress: ProgressSink | None = None, key_prefix: str | None = None) -> MigrationReport:
    """:func:`reshard`, then trim the shard-count history of keys whose shards above their
    count are empty, so reads stop covering them.

    Raises:
        MigrationError: ``model`` is not a sharded model; or, without ``key_prefix`` or a
            discriminator, another model class of this process stores items in its table.
    """
    options = options or JobOptions()
    return run(CompactJob(model, key_prefix=key_prefix), options, progress=progress)


def reindex(model: type[Model], index_name: str, options: JobOptions | None = None,
            *, progress: ProgressSink | None = None, values: Iterable[str] | None = None,
            key_prefix: str | None = None) -> MigrationReport:
    """Rewrite the entries of ``model``'s sharded index ``index_name`` that are not stored
    sharded: bare values of an index adopted in place (suffixed layout), or items without the
    shard attribute (``layout="multi_attribute"``).

    Each rewrite is one UpdateItem conditional on the item still holding the value read, so it
    applies once and an application write meanwhile wins. Safe to run while the application
    reads and writes the table; resumable like every job.

    Only ``model``'s entries are rewritten, in a table other models share (a single-table
    design): ``values`` names its index values, ``key_prefix`` the prefix of its table hash keys,
    and a model with a ``DiscriminatorAttribute`` takes the items its discriminator names
    (itself and its subclasses). Each scope is a job of its own (its own checkpoints).

    Raises:
        MigrationError: ``model`` has no sharded index ``index_name``, or a suffixed one that is
            not declared ``legacy_unsharded``; or, without ``values``, ``key_prefix`` or a
            discriminator, another model class of this process stores the index's attribute in
            the same table (the job would rewrite its values too).
        ShardingDefinitionError: another sharded model of the table declares the index sharded
            another way.

    .. versionadded:: 0.1.0

    .. versionchanged:: 0.2.0
       ``values`` and ``key_prefix``; the refusal of an unscoped job on a shared table.
    """
    options = options or JobOptions()
    return run(ReindexJob(model, index_name, values=values, key_prefix=key_prefix), options, progress=progress)
