"""``Model.batch_write()`` of a sharded model: PynamoDB's ``BatchWrite``, except for the items a
job may be moving.

``BatchWriteItem`` takes no conditions, so a put or delete sent to where an item was read from
cannot tell whether a migration moved the item meanwhile: the put would leave a second copy
beside the moved one, the delete would delete nothing. Such items (read from a shard the layout
no longer writes them to, or from a bare legacy key for a delete) are written on their own by
the model's ``save()`` and ``delete()``, which require the stored copy to be there and follow the
item when it moved; every other item goes in the batch as PynamoDB sends it.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pynamodb.constants import PUT
from pynamodb.models import BatchWrite, Model

from pynamodb_sharding._writes import batch_alone

__all__ = ["BatchItem", "ShardedBatchWrite"]

_T = TypeVar("_T", bound=Model)


class BatchItem(Protocol):
    """What :class:`ShardedBatchWrite` asks of each item."""

    def _batch_alone(self, put: bool) -> bool:
        """Whether this put (or delete) must be sent on its own, by ``save()`` (``delete()``)."""

    def save(self) -> Any: ...

    def delete(self) -> Any: ...


class ShardedBatchWrite(BatchWrite[_T]):
    """PynamoDB's ``BatchWrite``; items a job may be moving are written on their own.

    .. versionadded:: 0.4.0
    """

    def commit(self) -> None:
        alone: list[tuple[bool, BatchItem]] = []
        batched: list[dict[str, Any]] = []
        for operation in self.pending_operations:
            item: Any = operation["item"]  # a ShardedModel (see BatchItem)
            put = operation["action"] == PUT
            if batch_alone(item, put):
                alone.append((put, item))
            else:
                batched.append(operation)
        self.pending_operations = batched
        for put, item in alone:
            if put:
                item.save()
            else:
                item.delete()
        super().commit()
