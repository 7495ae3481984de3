"""Resending (再送) on DynamoDB Local: failed sends retried, recorded, counted and resent once.

Proves, per delivery mode (issue 24, point 6):

- at least once: a ``send`` that raises is retried with backoff after the rest of the group was
  sent, up to the retry policy's attempts, then recorded as failed with its error (its target
  item deleted in the same transaction); the rest of the chunk is delivered;
- at most once: a ``send`` that raises is recorded as failed and never retried by the walk;
- exactly once: a record that cannot be written is retried, then recorded as failed; a
  retry's lost reply (resent by botocore, or lost on every attempt) never records twice;
- ``resend_failed()`` delivers each failure once, also from two callers at once, and keeps a
  target that fails again with its new error and attempts;
- ``status().targets_failed`` equals the failure items stored, exactly, with four workers;
- a worker that loses its lease during a retry's wait leaves the targets to the new holder.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from pynamodb_sharding._exceptions import DeliveryInputError
from pynamodb_sharding.recipes.delivery import (
    AtLeastOnce,
    AtMostOnce,
    Delivery,
    DeliveryFailure,
    DeliveryLease,
    DeliveryProgress,
    DeliveryTarget,
    ExactlyOnce,
    ResendReport,
    Retry,
)
from pynamodb_sharding.testing.plugin import BindModels
from tests.delivery_models import MODELS, Inbox, inbox_record
from tests.faults import LostReplies
from tests.raw import raw_client, raw_items


def users(count: int) -> list[str]:
    return [f"u{n:04d}" for n in range(count)]


def recorded() -> Counter[str]:
    return Counter(item["user_id"]["S"] for item in raw_items(Inbox))


def stored_failures() -> dict[str, dict[str, Any]]:
    return {item["user_id"]["S"]: item for item in raw_items(DeliveryFailure)}


def raw_failed_count(delivery_id: str) -> int:
    item = raw_client(DeliveryProgress).get_item(
        TableName=DeliveryProgress.Meta.table_name, Key={"delivery_id": {"S": delivery_id}}, ConsistentRead=True
    )["Item"]
    return int(item["targets_failed"]["N"])


class Sender:
    """A ``send`` that logs each call and raises for the ids ``failing`` says."""

    def __init__(self, failing: Callable[[str], bool] = lambda _user_id: False) -> None:
        self.failing = failing
        self.calls: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, _delivery_id: str, user_id: str) -> None:
        with self._lock:
            self.calls[user_id] += 1
        if self.failing(user_id):
            msg = f"mail server refused {user_id}"
            raise ConnectionError(msg)
        with self._lock:
            self.sent[user_id] += 1


class LoseInboxReplies(LostReplies):
    """Loses the replies to the transactions that write ``user_id``'s inbox record: the first one
    sent once (botocore resends it, DynamoDB replays it), or, with ``every_attempt``, every
    attempt of that transaction (its client request token), so botocore gives up."""

    def __init__(self, user_id: str, *, every_attempt: bool = False) -> None:
        super().__init__(DeliveryProgress)
        self.user_id = user_id
        self.every_attempt = every_attempt
        self.token: str | None = None

    def lose(self, operation: str, body: dict[str, Any]) -> bool:
        if operation != "TransactWriteItems":
            return False
        puts = [write["Put"] for write in body["TransactItems"] if "Put" in write]
        if not any(
            put["TableName"] == Inbox.Meta.table_name and put["Item"]["user_id"]["S"] == self.user_id for put in puts
        ):
            return False
        if self.token is None:  # the first attempt (a resend is applied again, or replayed)
            self.token = body["ClientRequestToken"]
            return True
        return body["ClientRequestToken"] == self.token and self.every_attempt


class TestAtLeastOnce:
    """A failed send is retried with backoff, then recorded; resend_failed() sends it once."""

    def test_retry_record_and_resend(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        sleeps: list[float] = []
        # u0007 always fails; u0012 fails until the first retry's wait.
        sender = Sender(lambda user_id: user_id == "u0007" or (user_id == "u0012" and not sleeps))
        delivery = Delivery("d", sleep=sleeps.append)
        delivery.create(users(60), max_chunk_targets=30)

        report = delivery.walk(AtLeastOnce(sender, retry=Retry(attempts=3, backoff=0.5)))

        assert (report.chunks, report.taken) == (2, 59)
        assert [0.5, 1.0] == sleeps  # one group retried twice, waits doubling
        assert Counter(users(60)) + Counter({"u0007": 2, "u0012": 1}) == sender.calls  # 3 and 2 calls
        assert Counter(user_id for user_id in users(60) if user_id != "u0007") == sender.sent
        [failure] = list(delivery.failed())
        assert ("u0007", 3, "ConnectionError: mail server refused u0007") == (
            failure.user_id,
            failure.attempts,
            failure.error,
        )
        status = delivery.status()
        assert (status.finished, status.targets_failed, status.targets_done) == (True, 1, 60)
        assert 0 == delivery.targets_left()
        assert [] == raw_items(DeliveryTarget)  # u0007's target item went with its failure item's write
        assert ["u0007"] == list(stored_failures())
        assert 1 == raw_failed_count("d")

        again = Sender(lambda _user_id: True)
        assert ResendReport(resent=0, failed=1) == delivery.resend_failed(
            AtLeastOnce(again, retry=Retry(attempts=2, backoff=0))
        )
        [failure] = list(delivery.failed())
        assert (failure.attempts, delivery.status().targets_failed) == (5, 1)  # 3 in the walk, 2 now

        fixed = Sender()
        assert ResendReport(resent=1, failed=0) == delivery.resend_failed(AtLeastOnce(fixed))
        assert Counter({"u0007": 1}) == fixed.sent
        assert (0, 0, {}) == (delivery.status().targets_failed, raw_failed_count("d"), stored_failures())
        assert ResendReport(resent=0, failed=0) == delivery.resend_failed(AtLeastOnce(fixed))


class TestAtMostOnce:
    """A failed send is recorded, not retried; resend_failed() takes the failure before sending."""

    def test_record_without_retry_and_resend(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        sleeps: list[float] = []
        sender = Sender(lambda user_id: user_id in {"u0007", "u0031"})
        delivery = Delivery("d", sleep=sleeps.append)
        delivery.create(users(60), max_chunk_targets=30)

        report = delivery.walk(AtMostOnce(sender))

        assert (report.chunks, report.taken) == (2, 58)
        assert Counter(users(60)) == sender.calls  # each sent once: no retry of a send that raised
        assert [] == sleeps
        assert {
            "u0007": ("1", "ConnectionError: mail server refused u0007"),
            "u0031": ("1", "ConnectionError: mail server refused u0031"),
        } == {user_id: (item["attempts"]["N"], item["error"]["S"]) for user_id, item in stored_failures().items()}
        assert (2, 2) == (delivery.status().targets_failed, raw_failed_count("d"))
        assert [] == raw_items(DeliveryTarget)

        assert ResendReport(resent=0, failed=2) == delivery.resend_failed(AtMostOnce(Sender(lambda _u: True)))
        assert {"u0007": "2", "u0031": "2"} == {
            user_id: item["attempts"]["N"] for user_id, item in stored_failures().items()
        }
        assert (2, 2) == (delivery.status().targets_failed, raw_failed_count("d"))

        fixed = Sender()
        assert ResendReport(resent=1, failed=0) == delivery.resend_failed(AtMostOnce(fixed), limit=1)
        assert ResendReport(resent=1, failed=0) == delivery.resend_failed(AtMostOnce(fixed))
        assert Counter({"u0007": 1, "u0031": 1}) == fixed.sent
        assert (0, 0, {}) == (delivery.status().targets_failed, raw_failed_count("d"), stored_failures())


class TestExactlyOnce:
    """A record that cannot be written is retried, then recorded as failed; never recorded twice."""

    def test_retries_with_lost_replies(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        sleeps: list[float] = []

        def record(delivery_id: str, user_id: str) -> Inbox:
            # u0007 always fails; u0012 and u0020 until the first retry's wait.
            if user_id == "u0007" or (user_id in {"u0012", "u0020"} and not sleeps):
                msg = f"no template for {user_id}"
                raise LookupError(msg)
            return inbox_record(delivery_id, user_id)

        once = LoseInboxReplies("u0012")  # the retry's reply lost once: botocore resends it
        every = LoseInboxReplies("u0020", every_attempt=True)  # lost on every attempt: botocore gives up
        delivery = Delivery("d", sleep=sleeps.append)
        delivery.create(users(60), max_chunk_targets=30)

        delivery.walk(ExactlyOnce(record, retry=Retry(attempts=3, backoff=0.25)))

        assert (1, True) == (once.lost, every.lost > 1)
        assert [0.25, 0.5] == sleeps
        assert Counter(user_id for user_id in users(60) if user_id != "u0007") == recorded()
        [failure] = list(delivery.failed())
        assert ("u0007", 3, "LookupError: no template for u0007") == (failure.user_id, failure.attempts, failure.error)
        assert (1, 1) == (delivery.status().targets_failed, raw_failed_count("d"))
        assert [] == raw_items(DeliveryTarget)

        resend_lost = LoseInboxReplies("u0007")
        report = delivery.resend_failed(ExactlyOnce(inbox_record))

        assert ResendReport(resent=1, failed=0) == report
        assert 1 == resend_lost.lost
        assert Counter(users(60)) == recorded()
        assert (0, 0, {}) == (delivery.status().targets_failed, raw_failed_count("d"), stored_failures())

    def test_two_resends_at_once(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        failing = {f"u{n:04d}" for n in range(0, 120, 4)}

        def record(delivery_id: str, user_id: str) -> Inbox:
            if user_id in failing:
                msg = f"no template for {user_id}"
                raise LookupError(msg)
            return inbox_record(delivery_id, user_id)

        delivery = Delivery("d", sleep=lambda _seconds: None)
        delivery.create(users(120), max_chunk_targets=60)
        delivery.walk(ExactlyOnce(record, retry=Retry(attempts=1)))
        assert (30, 30) == (delivery.status().targets_failed, len(stored_failures()))
        failing.clear()
        start = threading.Barrier(2)
        reports: list[ResendReport] = []

        def resend() -> None:
            start.wait()
            reports.append(delivery.resend_failed(ExactlyOnce(inbox_record)))

        threads = [threading.Thread(target=resend) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)

        assert 30 == sum(report.resent for report in reports)
        assert [0, 0] == [report.failed for report in reports]
        assert Counter(users(120)) == recorded()  # each once
        assert (0, 0, {}) == (delivery.status().targets_failed, raw_failed_count("d"), stored_failures())


class TestExactCounts:
    """Four workers with failing sends: the failed count is the failure items stored, exactly."""

    def test_counts_with_four_workers(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        failing = {f"u{n:04d}" for n in range(0, 400, 10)}
        sender = Sender(lambda user_id: user_id in failing)
        delivery = Delivery("d", sleep=lambda _seconds: None)
        delivery.create(users(400), max_chunk_targets=50)
        mode = AtLeastOnce(sender, retry=Retry(attempts=2, backoff=0))
        threads = [threading.Thread(target=delivery.walk, args=(mode,), kwargs={"lease_seconds": 60}) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)

        status = delivery.status()
        assert (status.finished, status.targets_failed, status.targets_done) == (True, 40, 400)
        assert failing == set(stored_failures())
        assert 40 == raw_failed_count("d")
        assert Counter(user_id for user_id in users(400) if user_id not in failing) == sender.sent
        assert Counter({user_id: 2 for user_id in failing}) == +(sender.calls - sender.sent)

        failing.clear()
        assert ResendReport(resent=15, failed=0) == delivery.resend_failed(mode, limit=15)
        assert (25, 25) == (delivery.status().targets_failed, raw_failed_count("d"))
        assert ResendReport(resent=25, failed=0) == delivery.resend_failed(mode)
        assert Counter(users(400)) == sender.sent
        assert (0, 0) == (delivery.status().targets_failed, len(stored_failures()))


class TestLeaseLostDuringARetry:
    """A worker whose lease ran out while it waited to retry leaves the chunk; the chunk's new
    holder retries the targets in full."""

    def test_lease_lost_in_the_wait(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        sleeps: list[float] = []

        def sleep(seconds: float) -> None:
            if not sleeps:  # another worker takes the chunk over while this one waits
                raw_client(DeliveryLease).put_item(
                    TableName=DeliveryLease.Meta.table_name,
                    Item={"lease_key": {"S": "d#0"}, "owner": {"S": "other"}, "expires": {"N": "0"}},
                )
            sleeps.append(seconds)

        sender = Sender(lambda user_id: user_id == "u0007")
        delivery = Delivery("d", sleep=sleep)
        delivery.create(users(30), max_chunk_targets=30)

        report = delivery.walk(AtLeastOnce(sender, retry=Retry(attempts=3, backoff=0.5)))

        # The first wait lost the lease: the chunk's expired lease is taken over (by this same
        # worker here), whose retries of u0007 start again: 3 attempts after the lost one.
        assert 1 == report.takeovers
        assert [0.5, 0.5, 1.0] == sleeps
        assert 4 == sender.calls["u0007"]
        assert Counter(user_id for user_id in users(30) if user_id != "u0007") == sender.sent
        [failure] = list(delivery.failed())
        assert ("u0007", 3) == (failure.user_id, failure.attempts)
        status = delivery.status()
        assert (status.finished, status.targets_failed, status.chunks_done) == (True, 1, 1)


def test_resend_needs_a_resending_mode(dynamodb_models: BindModels) -> None:
    dynamodb_models(*MODELS)
    delivery = Delivery("d")
    delivery.create(["1"])

    class Custom:
        def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
            return len(delivery.take(delivery.present(user_ids)))

    with pytest.raises(DeliveryInputError, match="needs ExactlyOnce, AtMostOnce or AtLeastOnce"):
        delivery.resend_failed(Custom())  # type: ignore[arg-type]
