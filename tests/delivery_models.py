"""The tables the delivery tests bind: the recipe's own and the caller's inbox."""

from __future__ import annotations

import uuid

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding.recipes.delivery import (
    DeliveryChunk,
    DeliveryFailure,
    DeliveryLease,
    DeliveryProgress,
    DeliveryTarget,
)

#: The recipe's tables.
MODELS: tuple[type[Model], ...] = (DeliveryChunk, DeliveryTarget, DeliveryProgress, DeliveryLease, DeliveryFailure)


class Inbox(Model):
    """The caller's record of a delivery; ``message_id`` is unique per write, so a double shows."""

    class Meta:
        table_name = "inbox"

    user_id = UnicodeAttribute(hash_key=True)
    message_id = UnicodeAttribute(range_key=True)
    delivery_id = UnicodeAttribute()


def inbox_record(delivery_id: str, user_id: str) -> Inbox:
    """An exactly-once record: a new inbox item for the target."""
    return Inbox(user_id, uuid.uuid4().hex, delivery_id=delivery_id)
