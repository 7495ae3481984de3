"""What users of ``pynamodb_sharding.recipes.delivery`` see, checked by ``mypy --strict`` (never executed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import assert_type

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding.recipes.delivery import (
    AtLeastOnce,
    AtMostOnce,
    Delivery,
    DeliveryChunk,
    DeliveryFailure,
    DeliveryStatus,
    ExactlyOnce,
    ResendReport,
    Retry,
    WalkReport,
    split_into_chunks,
)


class Inbox(Model):
    class Meta:
        table_name = "inbox"

    user_id = UnicodeAttribute(hash_key=True)
    delivery_id = UnicodeAttribute(range_key=True)


class MyChunks(DeliveryChunk):
    class Meta:
        table_name = "my_chunks"


def record(delivery_id: str, user_id: str) -> Inbox:
    return Inbox(user_id, delivery_id)


def also(transaction: TransactWrite, delivery_id: str, user_id: str) -> None:
    transaction.save(Inbox(user_id, delivery_id))


def send(delivery_id: str, user_id: str) -> None:
    print(delivery_id, user_id)


def check() -> None:
    delivery = Delivery("d", chunks=MyChunks)
    assert_type(delivery.create(["1", "2"], write_targets=False), DeliveryStatus)
    assert_type(delivery.write_targets(), int)
    assert_type(delivery.status().targets_left, int)
    assert_type(delivery.targets_left(), int)
    assert_type(delivery.chunk_ids(), Iterator[list[str]])
    assert_type(delivery.walk(ExactlyOnce(record)), WalkReport)
    assert_type(delivery.walk(ExactlyOnce(in_transaction=also), worker_id="w1", lease_seconds=5), WalkReport)
    assert_type(delivery.walk(AtMostOnce(send)), WalkReport)
    assert_type(delivery.walk(AtLeastOnce(send)), WalkReport)
    assert_type(split_into_chunks(["1"], max_bytes=100, max_targets=10), Iterator[list[str]])
    retry = Retry(attempts=5, backoff=0.5, max_backoff=30.0)
    assert_type(delivery.walk(AtLeastOnce(send, retry=retry)), WalkReport)
    assert_type(delivery.walk(ExactlyOnce(record, retry=retry)), WalkReport)
    assert_type(delivery.status().targets_failed, int)
    assert_type(delivery.status().state, str)
    assert_type(delivery.failed(), Iterator[DeliveryFailure])
    assert_type(delivery.resend_failed(AtMostOnce(send), limit=10), ResendReport)
    assert_type(delivery.resend_failed(ExactlyOnce(record)).resent, int)
