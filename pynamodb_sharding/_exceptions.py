"""The ``ShardingError`` hierarchy, grouped by what a caller does about an error.

Every error names the model, the attribute and the fix. Each class carries its own short
``code``, the anchor of its section on the errors page of the documentation, and its message
ends with that section's URL::

    PynamoDBException (PynamoDB's)
    └── ShardingError
        ├── ShardingDefinitionError       fix the declaration or the installation
        │   └── HostContractError
        ├── ItemLocationError             fix the call: its key, condition or actions
        │   ├── ShardKeyError, LogicalKeyError, SortKeyTypeError
        │   │   └── LegacyItemError (a ShardKeyError)
        │   ├── ShardLocationError, ShardMoveError, DerivedAttributeUpdateError
        │   ├── ShardConditionError
        │   └── PartialItemError, WriteRegionError                (also ValueError)
        ├── ShardRequestError             retry, wait, or fix the table's setup
        │   ├── IndexThrottleError, CapacityThrottleError      (also PutError)
        │   ├── UnknownIndexError, ConsistentIndexReadError
        │   ├── IndexNotReadyError                              (also QueryError)
        │   └── PeriodTableMissingError, PeriodTableNotActiveError, PeriodsMissingError,
        │       PeriodRangeError
        ├── CursorError                   a page token or cursor that is not this query's
        ├── MetadataError                 shard counts: their items, their changes
        │   ├── MetadataRequestError                            (also PutError)
        │   │   └── HomeHandoverError
        │   └── FixedShardCountError, GrowthPolicyError, ShrinkTargetError,
        │       ShardCountConflictError, ShardCountLoweredError, FleetProtocolError
        ├── MigrationError                jobs and adoption
        │   └── AmbiguousLegacyKeyError, LegacyMoveError, ArchiveError
        └── DeliveryError                 the delivery recipe
            └── DeliveryExistsError (also PutError), DeliveryNotFoundError (LookupError),
                DeliveryNotReadyError, DeliveryInputError (ValueError),
                DeliveryConflictError (RuntimeError), DeliveryDataError (TypeError)

:class:`PeriodsMissingWarning` is a ``UserWarning``.
"""

from __future__ import annotations

import os
import sys

from pynamodb.exceptions import PutError, PynamoDBException, QueryError

__all__ = [  # noqa: RUF022 - in the order of the tree above, group by group
    "DOCS_URL",
    "ShardingError",
    "ShardingDefinitionError",
    "HostContractError",
    "ItemLocationError",
    "ShardKeyError",
    "LegacyItemError",
    "LogicalKeyError",
    "SortKeyTypeError",
    "ShardLocationError",
    "ShardMoveError",
    "DerivedAttributeUpdateError",
    "ShardConditionError",
    "PartialItemError",
    "WriteRegionError",
    "ShardRequestError",
    "IndexThrottleError",
    "CapacityThrottleError",
    "UnknownIndexError",
    "ConsistentIndexReadError",
    "IndexNotReadyError",
    "PeriodTableMissingError",
    "PeriodTableNotActiveError",
    "PeriodsMissingError",
    "PeriodRangeError",
    "PeriodsMissingWarning",
    "CursorError",
    "MetadataError",
    "MetadataRequestError",
    "HomeHandoverError",
    "FixedShardCountError",
    "GrowthPolicyError",
    "ShrinkTargetError",
    "ShardCountConflictError",
    "ShardCountLoweredError",
    "FleetProtocolError",
    "MigrationError",
    "AmbiguousLegacyKeyError",
    "LegacyMoveError",
    "ArchiveError",
    "DeliveryError",
    "DeliveryExistsError",
    "DeliveryNotFoundError",
    "DeliveryNotReadyError",
    "DeliveryInputError",
    "DeliveryConflictError",
    "DeliveryDataError",
]

#: Base URL of the built documentation; an error's message ends with
#: ``{DOCS_URL}errors.html#{code}``. Set ``PYNAMODB_SHARDING_DOCS_URL`` (read at import) to
#: point messages at another build, such as a pinned version or an internal mirror.
DOCS_URL = os.environ.get("PYNAMODB_SHARDING_DOCS_URL") or "https://pynamodb-sharding.readthedocs.io/en/latest/"


class ShardingError(PynamoDBException):
    """Base class of every error raised by pynamodb-sharding.

    It is a :class:`pynamodb.exceptions.PynamoDBException`, so ``except PynamoDBException``
    in existing code keeps catching it; ``cause`` keeps the botocore error when there is one.
    Each subclass has its own ``code``, the anchor of its section of the errors page, whose
    URL (:attr:`docs_url`) ends the message.
    """

    code = "sharding"
    msg = "sharding error"

    def __init__(self, msg: str | None = None, cause: Exception | None = None) -> None:
        super().__init__(msg, cause)

    @property
    def docs_url(self) -> str:
        """The URL of this error's section on the errors page of the documentation.

        .. versionadded:: 0.1.0
        """
        return f"{DOCS_URL.rstrip('/')}/errors.html#{self.code}"

    def __str__(self) -> str:
        return f"{self.msg} (see {self.docs_url})"


class ShardingDefinitionError(ShardingError):
    """A model class cannot be sharded as declared; raised when the class is defined.

    Also the group of the errors fixed by changing the declaration or the installation
    (:class:`HostContractError`).
    """

    code = "definition"


class ItemLocationError(ShardingError):
    """The group of the errors about one item's key or where it is stored: a key that cannot be
    encoded, a shard that cannot be known, a condition or an update that cannot be sent as
    written. Fixed by changing the call (its key, condition or actions); nothing was sent.

    .. versionadded:: 0.1.0
    """

    code = "item-errors"


class ShardRequestError(ShardingError):
    """The group of the errors of a request DynamoDB refused or could not serve as asked: a
    throttle that more shards do not fix, an index that is not there or not ready, periods
    without a table. Retried, waited for, or fixed in the table's setup.

    .. versionadded:: 0.1.0
    """

    code = "request-errors"


class ShardKeyError(ItemLocationError):
    """A key value cannot be encoded or decoded: wrong type, too long, not a physical key."""

    code = "key"


class LegacyItemError(ShardKeyError):
    """A read found no item in the key's shards, and the item stored under its bare, unsharded
    key (written before the model was sharded): the model is not declared
    ``Sharding(..., legacy_unsharded=True)``, so the answer would have been ``DoesNotExist``.

    .. versionadded:: 0.2.0
    """

    code = "legacy-item"


class ShardConditionError(ItemLocationError):
    """A condition or filter uses the sharded hash key in a way that cannot be rewritten exactly,
    or a save's condition cannot be checked across every shard its key may be in.

    .. versionadded:: 0.1.0
    """

    code = "condition"


class ShardLocationError(ItemLocationError):
    """The physical shard of an item cannot be determined for a write, update or delete."""

    code = "location"


class CursorError(ShardingError):
    """A ``last_evaluated_key`` cursor is truncated, tampered with or from another query."""

    code = "cursor"


class MetadataError(ShardingError):
    """A shard-count metadata item is missing fields or holds values out of range."""

    code = "metadata"


class HostContractError(ShardingDefinitionError):
    """The installed PynamoDB stopped routing a request through the hooks this library overrides.

    Raised before sending, so a request that would address a bare logical key is refused
    rather than written to the wrong key.
    """

    code = "host"


class IndexThrottleError(ShardRequestError, PutError):
    """A write was throttled by a global secondary index whose own partition key is hot.

    Also a :class:`pynamodb.exceptions.PutError`, which PynamoDB raises for the same throttle,
    so ``except PutError`` around ``save()`` keeps catching it; ``cause`` is PynamoDB's error.

    .. versionadded:: 0.1.0
    """

    code = "index-throttle"


class CapacityThrottleError(ShardRequestError, PutError):
    """A dynamic write was throttled for a reason more shards cannot fix: the table's or an
    index's provisioned capacity, the account's quota, the on-demand maximum, or a hot read
    partition. Raised after botocore's retries; the message names the fix by reason.

    .. versionadded:: 0.1.0
    """

    code = "capacity-throttle"


class MetadataRequestError(MetadataError, PutError):
    """A ``save()`` could not read or change the shard-count metadata table.

    Also a :class:`pynamodb.exceptions.PutError`, which is what ``save()`` promises to raise;
    ``cause`` is the metadata table's own error (``GetError``, ``UpdateError``, ``PutError``).

    .. versionadded:: 0.1.0
    """

    code = "metadata-request"


class WriteRegionError(ItemLocationError, ValueError):
    """The region a write goes to is unknown: ``Meta.item_home`` gave something that is not a
    region name, or ``write_connection()`` was not told which region. Nothing was sent.

    .. versionadded:: 0.1.0
    """

    code = "write-region"


class HomeHandoverError(MetadataRequestError):
    """A change of a shard count could not be made because the metadata table's home region
    is being moved (:func:`pynamodb_sharding.move_home`), or a move cannot proceed.

    .. versionadded:: 0.1.0
    """

    code = "home-handover"


class UnknownIndexError(ShardRequestError):
    """A query names an index that the model does not declare.

    .. versionadded:: 0.1.0
    """

    code = "unknown-index"


class ConsistentIndexReadError(ShardRequestError):
    """A query asks a global secondary index for a strongly consistent read, which DynamoDB refuses.

    .. versionadded:: 0.1.0
    """

    code = "consistent-index-read"


class IndexNotReadyError(ShardRequestError, QueryError):
    """A query of a sharded global secondary index that the table cannot answer in full yet:
    a ``layout="multi_attribute"`` index still declared ``legacy_unsharded`` (its shard
    attribute not backfilled), or a table index that does not exist, is not ``ACTIVE`` or lacks
    the shard attribute in its key schema.

    Also a :class:`pynamodb.exceptions.QueryError`, which PynamoDB raises for a query DynamoDB
    refuses; ``cause`` is DynamoDB's error when there is one.

    .. versionadded:: 0.1.0
    """

    code = "index-not-ready"


class SortKeyTypeError(ItemLocationError):
    """A sort-key value read back from DynamoDB is not of a key type (``S``, ``N`` or ``B``).

    .. versionadded:: 0.1.0
    """

    code = "sort-key-type"


class LogicalKeyError(ItemLocationError):
    """A request would send a logical key to DynamoDB, where only physical keys are stored.

    .. versionadded:: 0.1.0
    """

    code = "logical-key"


class ShardMoveError(ItemLocationError):
    """An item's shard-deciding attributes changed since it was read; only ``save()`` moves it.

    .. versionadded:: 0.1.0
    """

    code = "shard-move"


class PartialItemError(ItemLocationError, ValueError):
    """A full write (``save``, a batch or transactional put) of an item read with a projection
    that left out its key: the key attributes were fetched only for the library's own use, and
    the put would replace the stored item without the attributes not fetched. PynamoDB refuses
    the same write with a ``ValueError`` (the key is missing), which this error also is.

    .. versionadded:: 0.1.0
    """

    code = "partial-item"


class DerivedAttributeUpdateError(ItemLocationError):
    """An ``update()`` sets or removes an attribute the item's shard is computed from.

    .. versionadded:: 0.1.0
    """

    code = "derived-attribute-update"


class FixedShardCountError(MetadataError):
    """``grow`` or ``shrink`` was called on a strategy whose shard count is fixed.

    .. versionadded:: 0.1.0
    """

    code = "fixed-count"


class GrowthPolicyError(MetadataError):
    """A ``DynamicShards`` growth policy returned something other than a larger shard count.

    .. versionadded:: 0.1.0
    """

    code = "growth-policy"


class ShrinkTargetError(MetadataError):
    """``shrink`` was asked for a shard count outside ``1..`` the key's current count.

    .. versionadded:: 0.1.0
    """

    code = "shrink-target"


class ShardCountConflictError(MetadataError):
    """A key's shard count kept changing under a ``shrink``, so it gave up; retrying is safe.

    .. versionadded:: 0.1.0
    """

    code = "count-conflict"


class ShardCountLoweredError(MetadataError):
    """A merged read of a ``DynamicShards`` key stayed open while the key's shard count was
    lowered: a compaction may move items behind its position, so it stopped before it could
    miss any. Resume it from its ``last_evaluated_key`` (or page token).
    """

    code = "count-lowered"


class FleetProtocolError(MetadataError):
    """The fleet protocol stored in a metadata table cannot be read, or cannot be changed now
    (another change is under way). See ``store_fleet_protocol``.
    """

    code = "fleet-protocol"


class MigrationError(ShardingError):
    """A migration job cannot run as asked: models whose keys do not match, a model without
    sharding where the job needs one, or a checkpoint table of the wrong shape.

    Raised before the job writes anything.

    .. versionadded:: 0.1.0
    """

    code = "migration"


class AmbiguousLegacyKeyError(MigrationError):
    """Bare legacy keys of a ``legacy_unsharded`` table also read as physical keys of other keys.

    .. versionadded:: 0.1.0
    """

    code = "ambiguous-legacy-key"


class LegacyMoveError(MigrationError):
    """``move_legacy_item`` was given something that is not a legacy item of a ``legacy_unsharded`` model.

    .. versionadded:: 0.1.0
    """

    code = "legacy-move"


class PeriodTableMissingError(ShardRequestError):
    """A write to a time-partitioned model whose period has no table, declared ``missing="refuse"``.

    Nothing was written. Create the period's tables ahead (``pynamodb-sharding tables rotate``
    or :func:`pynamodb_sharding.rotation.rotate`), or declare ``missing="create"``.

    .. versionadded:: 0.1.0
    """

    code = "period-table-missing"


class PeriodTableNotActiveError(ShardRequestError):
    """A write to a time-partitioned model waited for its period's table, which another writer
    or a rotation was creating, longer than the declared ``creation_timeout``.

    Nothing was written. Retry the write, or create the tables ahead
    (``pynamodb-sharding tables rotate``) so that no write waits for one.

    .. versionadded:: 0.1.0
    """

    code = "period-table-not-active"


class PeriodsMissingError(ShardRequestError):
    """A read of a time-partitioned model covers past periods whose tables are missing (archived
    and dropped, deleted, or never created), and the model declares ``missing_periods="raise"``.

    Raised before anything is sent. ``periods`` and ``tables`` name them, oldest first.

    .. versionadded:: 0.1.0
    """

    code = "periods-missing"

    def __init__(
        self, msg: str | None = None, cause: Exception | None = None, *,
        periods: tuple[str, ...] = (), tables: tuple[str, ...] = (),
    ) -> None:
        super().__init__(msg, cause)
        self.periods = periods
        self.tables = tables


class PeriodsMissingWarning(UserWarning):
    """A read of a time-partitioned model covered past periods whose tables are missing: it read
    nothing there. Issued once per run of such periods a read meets (``missing_periods="warn"``,
    the default); ``periods`` and ``tables`` name them, oldest first.

    Not a :class:`ShardingError`: the read goes on. ``warnings.simplefilter("error",
    PeriodsMissingWarning)`` makes it one, or declare ``missing_periods="raise"``.

    .. versionadded:: 0.1.0
    """

    def __init__(self, message: str, *, periods: tuple[str, ...] = (), tables: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.periods = periods
        self.tables = tables


class ArchiveError(MigrationError):
    """The archive step of a rotation (:func:`~pynamodb_sharding.rotation.export_to_s3`) did not
    finish: the export failed, timed out, or could not start. The rotation keeps the table and
    reports the step as failed; the next rotation tries again.

    .. versionadded:: 0.1.0
    """

    code = "archive"


class PeriodRangeError(ShardRequestError):
    """A read of a time-partitioned model would cover more periods than its ``max_periods``, or
    was given a cursor of no period of the model; raised before anything is sent.

    .. versionadded:: 0.1.0
    """

    code = "period-range"


class DeliveryError(ShardingError):
    """Base class of the errors of the delivery-list recipe (:mod:`pynamodb_sharding.recipes.delivery`).

    .. versionadded:: 0.1.0
    """

    code = "delivery"


class DeliveryExistsError(DeliveryError, PutError):
    """``Delivery.create()`` for an id that exists already with other targets (or other chunking).

    Raised before anything is written. Also a :class:`pynamodb.exceptions.PutError`, as
    PynamoDB raises for a failed conditional put; ``cause`` is DynamoDB's
    ``ConditionalCheckFailedException`` when the refusal came from the conditional write.

    .. versionadded:: 0.1.0
    """

    code = "delivery-exists"


class DeliveryNotFoundError(DeliveryError, LookupError):
    """A delivery was walked, counted or resent before ``Delivery.create()`` made it.

    Also a ``LookupError``.

    .. versionadded:: 0.1.0
    """

    code = "delivery-not-found"


class DeliveryNotReadyError(DeliveryError):
    """A delivery was walked before its target items were written (``create()`` still running,
    or ``create(write_targets=False)`` without ``write_targets()`` yet). Nothing was claimed.

    .. versionadded:: 0.1.0
    """

    code = "delivery-not-ready"


class DeliveryInputError(DeliveryError, ValueError):
    """An argument of the delivery recipe is invalid: a target id that is not a non-empty string
    or too long for a chunk, a chunk bound below 1, a delivery mode without its write, a retry
    policy out of range. Raised before anything is written; also a ``ValueError``.

    .. versionadded:: 0.1.0
    """

    code = "delivery-input"


class DeliveryConflictError(DeliveryError, RuntimeError):
    """A delivery's write kept losing to concurrent writers: a take that conflicted in ten
    transactions in a row, or a ``create()``/``write_targets()`` that another call of the same
    delivery took over while it was writing. Nothing was doubled or lost; calling again is safe.
    Also a ``RuntimeError``.

    .. versionadded:: 0.1.0
    """

    code = "delivery-conflict"


class DeliveryDataError(DeliveryError, TypeError):
    """A delivery item read from DynamoDB is not what the recipe writes (a chunk's ``user_ids``
    that is not a JSON list of ids). Also a ``TypeError``.

    .. versionadded:: 0.1.0
    """

    code = "delivery-data"


def caller_stacklevel() -> int:
    """The ``stacklevel`` of a warning raised by the caller of this function that names the
    first frame outside this package: the application's line that made the call."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back
        level += 1
    return level
