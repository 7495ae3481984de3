"""``Model.batch_write()`` of a sharded model: PynamoDB's ``BatchWrite``, except for the items a
job may be moving.

``BatchWriteItem`` takes no conditions, so a put or delete sent to where an item was read from
cannot tell whether a migration moved the item meanwhile: the put would leave a second copy
beside the moved one, the delete would delete nothing. Such items (read from a shard the layout
no longer writes them to, or from a bare legacy key for a delete) are written on their own by
the model's ``save()`` and ``delete()``, which require the stored copy to be there and follow the
item when it moved; so are the deletes of a ``legacy_unsharded`` model, whose ``delete()`` first
deletes the bare copy a sharded copy may shadow. Every other item goes in the batch as PynamoDB
sends it.

In a global table the batch goes to ``Meta.write_region`` when the model declares one (without
``local_inserts``); an item whose write goes to another region than the batch (its
``Meta.item_home``; a write other than an insert under ``local_inserts``) is written on its
own, by ``save()`` or ``delete()``, which send it there.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pynamodb.constants import PUT
from pynamodb.models import BatchWrite, Model

from pynamodb_sharding import _regions as regions
from pynamodb_sharding._writes import batch_alone

__all__ = ["BatchItem", "ShardedBatchWrite"]

_T = TypeVar("_T", bound=Model)


class BatchItem(Protocol):
    """What :class:`ShardedBatchWrite` asks of an item written on its own (see
    :func:`pynamodb_sharding._writes.batch_alone`)."""

    def save(self, *, add_version_condition: bool = ...) -> Any: ...

    def delete(self, *, add_version_condition: bool = ...) -> Any: ...


class ShardedBatchWrite(BatchWrite[_T]):
    """PynamoDB's ``BatchWrite``; items a job may be moving are written on their own.

    .. versionadded:: 0.1.0
    """

    def commit(self) -> None:
        alone: list[tuple[bool, BatchItem]] = []
        batched: list[dict[str, Any]] = []
        route = regions.batch_route(self.model)
        for operation in self.pending_operations:
            item: Any = operation["item"]  # a ShardedModel (see BatchItem)
            put = operation["action"] == PUT
            if batch_alone(item, put, route):
                alone.append((put, item))
            else:
                batched.append(operation)
        self.pending_operations = batched
        # PynamoDB's batch writes check no version: neither do the ones sent on their own.
        for put, item in alone:
            if put:
                item.save(add_version_condition=False)
            else:
                item.delete(add_version_condition=False)
        with regions.routed(route):
            super().commit()

