"""Creating a delivery on DynamoDB Local: refused, retried, repeated, resent and half-written creations.

Proves, one class per behaviour (issue 24, points 1 to 5 and 7):

- a create of an existing id with other targets is refused before anything is written, also
  while another create holds the id half-way (the raw tables are compared item by item);
- a create retried while the delivery is walked, with a worker killed mid-chunk, writes
  nothing: after the lease takeover every target has one record; and two creates of the same
  targets at once cannot write a target item once the delivery is ready;
- a repeated id is one target: stored, delivered and counted once;
- a lost reply to any of create()'s writes returns the status of the delivery it made;
- a delivery whose target items are not written yet is refused to walkers, counts every target
  as left, and is delivered in full once ``write_targets()`` has run;
- the recipe's errors are ``ShardingError`` subclasses with a code, a message naming the
  delivery and the fix, and PynamoDB's or Python's own class where it raised that before.
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.exceptions import PutError
from pynamodb.models import Model

from pynamodb_sharding._exceptions import (
    DeliveryConflictError,
    DeliveryDataError,
    DeliveryError,
    DeliveryExistsError,
    DeliveryInputError,
    DeliveryNotFoundError,
    DeliveryNotReadyError,
    ShardingError,
)
from pynamodb_sharding._host import reset_connection
from pynamodb_sharding.recipes.delivery import (
    AtLeastOnce,
    Delivery,
    DeliveryChunk,
    DeliveryLease,
    DeliveryProgress,
    DeliveryTarget,
    ExactlyOnce,
    Retry,
)
from pynamodb_sharding.testing.plugin import BindModels
from tests.delivery_models import MODELS, Inbox, inbox_record
from tests.faults import Faults, LostReplies
from tests.raw import raw_client, raw_items


def users(count: int, prefix: str = "u") -> list[str]:
    return [f"{prefix}{n:04d}" for n in range(count)]


def snapshot() -> dict[str, list[str]]:
    """Every item of the recipe's tables, raw, in a comparable form."""
    return {
        model.__name__: sorted(json.dumps(item, sort_keys=True) for item in raw_items(model)) for model in MODELS
    }


def stored_chunks() -> list[list[str]]:
    by_order = sorted(raw_items(DeliveryChunk), key=lambda item: int(item["order"]["N"]))
    return [json.loads(item["user_ids"]["S"]) for item in by_order]


def stored_targets() -> set[str]:
    return {item["user_id"]["S"] for item in raw_items(DeliveryTarget)}


def raw_progress(delivery_id: str) -> dict[str, Any]:
    item = raw_client(DeliveryProgress).get_item(
        TableName=DeliveryProgress.Meta.table_name, Key={"delivery_id": {"S": delivery_id}}, ConsistentRead=True
    )["Item"]
    return dict(item)


def recorded() -> Counter[str]:
    return Counter(item["user_id"]["S"] for item in raw_items(Inbox))


def _operation(request: Any) -> str:
    return str(request.headers["X-Amz-Target"].decode().split(".")[-1])


def _writes_targets(operation: str, body: dict[str, Any]) -> bool:
    return operation == "TransactWriteItems" and any(
        write.get("Put", {}).get("TableName") == DeliveryTarget.Meta.table_name for write in body["TransactItems"]
    )


class Hold:
    """Holds the ``nth`` request of one thread that ``chosen`` picks in botocore's ``before-send``
    until ``release`` is set: a step held open so that another call runs inside it, without sleeping."""

    def __init__(self, model: type[Model], chosen: Callable[[str, dict[str, Any]], bool], nth: int = 1) -> None:
        self.chosen = chosen
        self.nth = nth
        self.seen = 0
        self.thread: threading.Thread | None = None
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        model._get_connection().connection.client.meta.events.register_first("before-send.dynamodb", self.before_send)

    def before_send(self, request: Any, **_: Any) -> None:
        if threading.current_thread() is not self.thread:
            return
        if not self.chosen(_operation(request), json.loads(request.body)):
            return
        with self._lock:
            self.seen += 1
            if self.seen != self.nth:
                return
        self.arrived.set()
        assert self.release.wait(120), "the held request was never released"


class Background:
    """A call run in a thread, its result or error kept."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def run() -> None:
            try:
                self.result = call()
            except BaseException as error:
                self.error = error

        self.thread = threading.Thread(target=run, daemon=True)

    def join(self) -> Any:
        self.thread.join(120)
        assert not self.thread.is_alive(), "the background call did not return"
        if self.error is not None:
            raise self.error
        return self.result


class TestRefusedCreate:
    """A create of an existing id with other targets changes nothing, whenever it comes (point 1)."""

    def test_other_targets_write_nothing(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        original = users(250)
        Delivery("d").create(original, max_chunk_targets=100)
        before = snapshot()

        with pytest.raises(PutError) as refused:  # what create() raised before: except PutError still works
            Delivery("d").create(users(120, prefix="other-"), max_chunk_targets=100)

        assert before == snapshot()
        assert isinstance(refused.value, DeliveryExistsError)
        assert "ConditionalCheckFailedException" == refused.value.cause_response_code
        assert "Delivery 'd' exists already with other targets" in str(refused.value)
        Delivery("d").walk(ExactlyOnce(inbox_record))
        assert Counter(original) == recorded()

    def test_other_chunking_writes_nothing(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        targets = users(250)
        Delivery("d").create(targets, max_chunk_targets=100)
        before = snapshot()

        with pytest.raises(PutError) as refused:
            Delivery("d").create(targets, max_chunk_targets=50)  # other chunks under the same orders

        assert before == snapshot()
        assert isinstance(refused.value, DeliveryExistsError)
        assert [targets[0:100], targets[100:200], targets[200:]] == stored_chunks()

    def test_while_another_create_holds_the_id(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        first, second = users(150, prefix="first-"), users(90, prefix="second-")
        # The first create is held at its first chunk write: the id is reserved, nothing else written.
        hold = Hold(DeliveryChunk, lambda operation, _body: operation == "BatchWriteItem")
        creating = Background(lambda: Delivery("d").create(first, max_chunk_targets=100))
        hold.thread = creating.thread
        creating.thread.start()
        assert hold.arrived.wait(60), "the first create never wrote a chunk"
        during = snapshot()
        assert [] == during["DeliveryChunk"]
        assert [] == during["DeliveryTarget"]
        assert {"S": "creating"} == raw_progress("d")["state"]

        with pytest.raises(DeliveryExistsError):
            Delivery("d").create(second, max_chunk_targets=100)
        with pytest.raises(DeliveryNotReadyError):
            Delivery("d").walk(AtLeastOnce(lambda _d, _u: None))

        assert during == snapshot()
        hold.release.set()
        status = creating.join()
        assert (status.state, status.chunk_count, status.target_count) == ("ready", 2, 150)
        assert [first[:100], first[100:]] == stored_chunks()
        assert set(first) == stored_targets()


def _walk_until_first_group(delivery_id: str, signal_fd: int) -> None:  # pragma: no cover - the child
    """A worker that takes the first group of its chunk, says so, and hangs holding the lease."""
    for model in (*MODELS, Inbox):
        reset_connection(model)
    exactly_once = ExactlyOnce(inbox_record)

    class DieAfterOneGroup:
        def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
            taken = exactly_once.deliver(delivery, user_ids)
            os.write(signal_fd, b"taken\n")
            time.sleep(600)  # killed here, mid-chunk, with its lease
            return taken

    Delivery(delivery_id).walk(DieAfterOneGroup(), worker_id="doomed", lease_seconds=600)


class TestRetriedCreate:
    """A create() retried at any time never brings a taken target back (point 2)."""

    def test_retry_while_walked_with_a_dead_worker(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        targets = users(300)
        first = Delivery("d").create(targets, max_chunk_targets=100)
        assert (first.chunk_count, first.target_count) == (3, 300)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                _walk_until_first_group("d", write_end)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            os._exit(code)
        try:
            assert select.select([read_end], [], [], 120)[0], "the worker never took a group"
            assert b"taken\n" == os.read(read_end, 6)
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            os.close(write_end)
        assert Counter(targets[:25]) == recorded()
        assert set(targets[25:]) == stored_targets()
        before = snapshot()

        retried = Delivery("d").create(targets, max_chunk_targets=100)  # e.g. a job runner's retry

        assert (retried.state, retried.chunks_open, retried.chunks_done, retried.target_count) == ("ready", 1, 0, 300)
        assert before == snapshot()  # nothing written: the 25 taken targets stay taken
        later = Delivery("d", clock=lambda: time.time() + 3600)  # the dead worker's lease has expired
        report = later.walk(ExactlyOnce(inbox_record))
        assert (report.takeovers, report.chunks, report.taken) == (1, 3, 275)
        assert Counter(targets) == recorded()  # each target recorded once
        assert set() == stored_targets()
        status = later.status()
        assert (status.finished, status.targets_done, status.chunks_open) == (True, 300, 0)

    def test_two_creates_of_the_same_targets_at_once(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        targets = users(300)
        # The first create is held at its second transaction of target items (99 written).
        hold = Hold(DeliveryProgress, _writes_targets, nth=2)
        creating = Background(lambda: Delivery("d").create(targets, max_chunk_targets=100))
        hold.thread = creating.thread
        creating.thread.start()
        assert hold.arrived.wait(60), "the first create never wrote its second transaction of targets"
        assert 99 == len(stored_targets())

        second = Delivery("d").create(targets, max_chunk_targets=100)  # takes the writing over, finishes
        assert (second.state, second.target_count) == ("ready", 300)
        Delivery("d").walk(ExactlyOnce(inbox_record))
        assert set() == stored_targets()
        hold.release.set()  # the first create's held transaction of 99 target items goes out now

        first = creating.join()

        assert first.finished  # it recognised the creation, finished by the other call
        assert set() == stored_targets()  # its late write was refused by the fence: nothing came back
        assert Counter(targets) == recorded()

    def test_the_first_create_taken_over_before_it_finished(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        targets = users(300)
        hold = Hold(DeliveryProgress, _writes_targets, nth=2)
        creating = Background(lambda: Delivery("d").create(targets, max_chunk_targets=100))
        hold.thread = creating.thread
        creating.thread.start()
        assert hold.arrived.wait(60)
        # Another call takes the writing over and is itself stopped before it finishes.
        raw_client(DeliveryProgress).update_item(
            TableName=DeliveryProgress.Meta.table_name,
            Key={"delivery_id": {"S": "d"}},
            UpdateExpression="SET writer = :other",
            ExpressionAttributeValues={":other": {"S": "another-call"}},
        )
        hold.release.set()

        with pytest.raises(DeliveryConflictError, match="took the writing over"):
            creating.join()

        assert 99 == len(stored_targets())
        status = Delivery("d").create(targets, max_chunk_targets=100)  # calling again finishes it
        assert (status.state, status.target_count) == ("ready", 300)
        assert set(targets) == stored_targets()


class TestRepeatedIds:
    """A repeated id is one target: stored, delivered and counted once (point 3)."""

    def test_repeated_ids(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        delivery = Delivery("d")

        status = delivery.create(["a", "b", "a", "c"])

        assert (status.chunk_count, status.target_count, status.targets_left) == (1, 3, 3)
        assert [["a", "b", "c"]] == stored_chunks()
        assert {"a", "b", "c"} == stored_targets()
        sent: list[str] = []
        report = delivery.walk(AtLeastOnce(lambda _d, user_id: sent.append(user_id)))
        assert ["a", "b", "c"] == sent
        assert 3 == report.taken
        status = delivery.status()
        assert (status.finished, status.targets_done, status.targets_left) == (True, 3, 0)

    def test_the_same_targets_in_another_order_of_repeats(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        Delivery("d").create(["a", "b", "a", "c"])
        status = Delivery("d").create(["a", "b", "c", "c", "b"])  # the same creation: a, b, c
        assert (status.state, status.target_count) == ("ready", 3)


class LoseOnce(LostReplies):
    """Loses the reply of the first request ``chosen`` picks: applied by the server, then
    ``ReadTimeoutError``, so botocore sends it again."""

    def __init__(self, model: type[Model], chosen: Callable[[str, dict[str, Any]], bool]) -> None:
        super().__init__(model)
        self.chosen = chosen

    def lose(self, operation: str, body: dict[str, Any]) -> bool:
        return not self.lost and self.chosen(operation, body)


class TestLostCreateReplies:
    """A lost reply to any of create()'s writes, resent by botocore, returns the status (point 4)."""

    def test_lost_reply_to_the_conditional_put(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        faults = Faults(DeliveryProgress, "PutItem")
        faults.plan = ["lost"]

        status = Delivery("d").create(users(250), max_chunk_targets=100)

        assert ["lost", "ok"] == faults.log  # applied, then resent: the resend fails its condition
        assert (status.state, status.chunk_count, status.target_count, status.targets_left) == ("ready", 3, 250, 250)
        assert set(users(250)) == stored_targets()
        assert 3 == len(stored_chunks())

    def test_lost_reply_to_the_final_update(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        faults = Faults(DeliveryProgress, "UpdateItem")
        faults.plan = ["lost"]

        status = Delivery("d").create(users(250), max_chunk_targets=100)

        assert ["lost", "ok"] == faults.log
        assert (status.state, status.target_count) == ("ready", 250)
        progress = raw_progress("d")
        assert {"S": "ready"} == progress["state"]
        assert "writer" not in progress
        sent: list[str] = []
        Delivery("d").walk(AtLeastOnce(lambda _d, user_id: sent.append(user_id)))
        assert users(250) == sorted(sent)

    def test_lost_reply_to_a_transaction_of_targets(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        lose = LoseOnce(DeliveryProgress, _writes_targets)

        status = Delivery("d").create(users(250), max_chunk_targets=100)

        assert 1 == lose.lost
        assert (status.state, status.target_count) == ("ready", 250)
        assert set(users(250)) == stored_targets()


class TestTargetsWrittenLater:
    """A delivery is walked only once its target items are written; counts say so (point 5)."""

    def test_walk_refused_until_write_targets(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        targets = [str(n) for n in range(100)]
        delivery = Delivery("d")
        status = delivery.create(targets, write_targets=False, max_chunk_targets=30)
        assert (status.finished, status.targets_left) == (False, 100)
        sent: list[str] = []

        with pytest.raises(DeliveryNotReadyError, match=r"call write_targets\(\) first"):
            delivery.walk(AtLeastOnce(lambda _d, user_id: sent.append(user_id)))

        assert 100 == delivery.targets_left()  # nobody delivered: every target is left
        assert (status.state, status.ready) == ("chunks", False)
        progress = raw_progress("d")
        assert ({"N": "0"}, {"N": "0"}) == (progress["nextSequence"], progress["chunks_done"])
        assert [] == raw_items(DeliveryLease)
        assert set() == stored_targets()

        assert 100 == delivery.write_targets()
        assert 0 == delivery.write_targets()  # ready: nothing written again
        assert "ready" == delivery.status().state
        assert 100 == delivery.targets_left()
        delivery.walk(AtLeastOnce(lambda _d, user_id: sent.append(user_id)))
        assert Counter(targets) == Counter(sent)
        assert 0 == delivery.targets_left()
        status = delivery.status()
        assert (status.finished, status.targets_done, status.targets_left) == (True, 100, 0)

    def test_write_targets_after_a_walk_brings_nothing_back(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        delivery = Delivery("d")
        delivery.create([str(n) for n in range(60)], max_chunk_targets=30)
        delivery.walk(AtLeastOnce(lambda _d, _u: None))

        assert 0 == delivery.write_targets()

        assert set() == stored_targets()
        assert 0 == delivery.targets_left()

    def test_create_again_with_write_targets_writes_them(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        targets = [str(n) for n in range(60)]
        Delivery("d").create(targets, write_targets=False, max_chunk_targets=30)
        assert "chunks" == Delivery("d").create(targets, write_targets=False, max_chunk_targets=30).state

        status = Delivery("d").create(targets, max_chunk_targets=30)

        assert (status.state, status.target_count) == ("ready", 60)
        assert set(targets) == stored_targets()


class TestErrors:
    """The recipe's errors are one family under ``ShardingError``, each with its code (point 7)."""

    def test_unknown_delivery(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        for call in (
            lambda: Delivery("nope").walk(AtLeastOnce(lambda _d, _u: None)),
            lambda: Delivery("nope").status(),
            lambda: Delivery("nope").write_targets(),
            lambda: Delivery("nope").resend_failed(AtLeastOnce(lambda _d, _u: None)),
        ):
            with pytest.raises(DeliveryNotFoundError) as missing:
                call()
            assert isinstance(missing.value, LookupError)  # what the recipe raised before
            assert "delivery 'nope' has no progress item; create it with Delivery.create() first" in str(missing.value)
            assert str(missing.value).endswith("errors.html#delivery-not-found)")

    @pytest.mark.parametrize(
        ("targets", "message"),
        [(["1", ""], "target id '' is not a non-empty string"), (["1", 2], "target id 2 is not a non-empty string")],
    )
    def test_bad_target_ids_write_nothing(self, dynamodb_models: BindModels, targets: list[Any], message: str) -> None:
        dynamodb_models(*MODELS)
        with pytest.raises(DeliveryInputError, match=message) as bad:
            Delivery("d").create(targets)
        assert isinstance(bad.value, ValueError)
        assert "delivery-input" == bad.value.code
        assert {model.__name__: [] for model in MODELS} == snapshot()

    def test_bad_arguments(self) -> None:
        with pytest.raises(DeliveryInputError, match="ExactlyOnce needs record= or in_transaction="):
            ExactlyOnce()
        with pytest.raises(DeliveryInputError, match="attempts counts the first send"):
            Retry(attempts=0)
        with pytest.raises(DeliveryInputError, match="0 <= backoff <= max_backoff"):
            Retry(backoff=-1)

    def test_a_corrupt_chunk(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        Delivery("d").create(["1", "2"])
        chunk = raw_items(DeliveryChunk)[0]
        raw_client(DeliveryChunk).update_item(
            TableName=DeliveryChunk.Meta.table_name,
            Key={"delivery_id": chunk["delivery_id"], "order": chunk["order"]},
            UpdateExpression="SET user_ids = :not_a_list",
            ExpressionAttributeValues={":not_a_list": {"S": '{"1": true}'}},
        )
        with pytest.raises(DeliveryDataError, match="not a JSON list of ids") as corrupt:
            list(Delivery("d").chunk_ids())
        assert isinstance(corrupt.value, TypeError)

    def test_one_family(self) -> None:
        errors = (
            DeliveryConflictError,
            DeliveryDataError,
            DeliveryExistsError,
            DeliveryInputError,
            DeliveryNotFoundError,
            DeliveryNotReadyError,
        )
        assert all(issubclass(error, DeliveryError) and issubclass(error, ShardingError) for error in errors)
        assert [
            "delivery-conflict",
            "delivery-data",
            "delivery-exists",
            "delivery-input",
            "delivery-not-found",
            "delivery-not-ready",
        ] == [error.code for error in errors]
