"""The ``ShardingError`` hierarchy.

Every error names the model, the attribute and the fix. Each class carries a short ``code``
that maps to a section of ``docs/errors.rst`` so a message can point at its explanation.
"""

from __future__ import annotations

from pynamodb.exceptions import PutError, PynamoDBException

__all__ = [
    "CursorError",
    "HostContractError",
    "IndexThrottleError",
    "MetadataError",
    "MetadataRequestError",
    "ShardConditionError",
    "ShardKeyError",
    "ShardLocationError",
    "ShardingDefinitionError",
    "ShardingError",
]


class ShardingError(PynamoDBException):
    """Base class of every error raised by pynamodb-sharding.

    It is a :class:`pynamodb.exceptions.PynamoDBException`, so ``except PynamoDBException``
    in existing code keeps catching it; ``cause`` keeps the botocore error when there is one.
    """

    code = "sharding"
    msg = "sharding error"

    def __init__(self, msg: str | None = None, cause: Exception | None = None) -> None:
        super().__init__(msg, cause)

    def __str__(self) -> str:
        return f"{self.msg} (see docs/errors.rst#{self.code})"


class ShardingDefinitionError(ShardingError):
    """A model class cannot be sharded as declared; raised when the class is defined."""

    code = "definition"


class ShardKeyError(ShardingError):
    """A key value cannot be encoded or decoded: wrong type, too long, not a physical key."""

    code = "key"


class ShardConditionError(ShardingError):
    """A condition or filter uses the sharded hash key in a way that cannot be rewritten exactly.

    .. versionadded:: 0.1.0
    """

    code = "condition"


class ShardLocationError(ShardingError):
    """The physical shard of an item cannot be determined for a write, update or delete."""

    code = "location"


class CursorError(ShardingError):
    """A ``last_evaluated_key`` cursor is truncated, tampered with or from another query."""

    code = "cursor"


class MetadataError(ShardingError):
    """A shard-count metadata item is missing fields or holds values out of range."""

    code = "metadata"


class HostContractError(ShardingError):
    """The installed PynamoDB stopped routing a request through the hooks this library overrides.

    Raised before sending, so a request that would address a bare logical key is refused
    rather than written to the wrong key.
    """

    code = "host"


class IndexThrottleError(ShardingError, PutError):
    """A write was throttled by a global secondary index whose own partition key is hot.

    Also a :class:`pynamodb.exceptions.PutError`, which PynamoDB raises for the same throttle,
    so ``except PutError`` around ``save()`` keeps catching it; ``cause`` is PynamoDB's error.

    .. versionadded:: 0.1.0
    """

    code = "index-throttle"


class MetadataRequestError(ShardingError, PutError):
    """A ``save()`` could not read or change the shard-count metadata table.

    Also a :class:`pynamodb.exceptions.PutError`, which is what ``save()`` promises to raise;
    ``cause`` is the metadata table's own error (``GetError``, ``UpdateError``, ``PutError``).

    .. versionadded:: 0.1.0
    """

    code = "metadata-request"
