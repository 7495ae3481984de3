"""The delivery-list recipe on DynamoDB Local: chunks under 400 KB, crashed workers, lost replies.

Proves, one class per behaviour:

- 1,000,000 ids of 6 to 12 digits are stored as chunk items each under DynamoDB's 400 KB
  limit whose ids, in order, are exactly the targets (read back raw with boto3);
- a walk by 8 worker processes, 2 of them killed with SIGKILL mid-walk, is finished by the
  others: exactly once records each target once, at most once never sends one twice, at least
  once never loses one, and no target item is left;
- a take whose reply is lost (applied, then ``ReadTimeoutError``) neither doubles nor loses;
- progress is counted at any time.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pynamodb.exceptions import PutError

from pynamodb_sharding._host import reset_connection
from pynamodb_sharding.recipes.delivery import (
    MAX_ITEM_BYTES,
    AtLeastOnce,
    AtMostOnce,
    Delivery,
    DeliveryChunk,
    DeliveryLease,
    DeliveryMode,
    DeliveryProgress,
    DeliveryTarget,
    ExactlyOnce,
)
from pynamodb_sharding.testing.plugin import BindModels
from tests.delivery_models import MODELS, Inbox, inbox_record
from tests.faults import LostReplies
from tests.raw import raw_items

#: Targets of the crash test, per mode, in chunks of WALK_CHUNK: 80 chunks, so that each of the
#: 8 workers takes several and the 2 killed ones die holding one. Each walk takes about 20 s on
#: 2 cores (8 forked workers and DynamoDB Local).
WALK_TARGETS = 4_000
WALK_CHUNK = 50


def unique_ids(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    seen: set[str] = set()
    ids: list[str] = []
    while len(ids) < count:
        digits = rng.randint(6, 12)
        candidate = str(rng.randrange(10 ** (digits - 1), 10**digits))
        if candidate not in seen:
            seen.add(candidate)
            ids.append(candidate)
    return ids


def stored_size(item: dict[str, Any]) -> int:
    """DynamoDB's size of a raw item of strings and numbers: names plus values."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        if "S" in value:
            size += len(value["S"].encode())
        else:
            digits = value["N"].lstrip("-").replace(".", "")
            size += (len(digits) + 1) // 2 + 1
    return size


class TestMillionTargets:
    """1,000,000 ids become chunk items under 400 KB whose union, in order, is the targets."""

    def test_chunks_on_the_raw_table(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        targets = unique_ids(1_000_000, seed=1)
        status = Delivery("campaign-2016-02").create(targets, write_targets=False, max_chunk_targets=None)

        raw = raw_items(DeliveryChunk)
        assert status.chunk_count == len(raw)
        assert all(stored_size(item) < MAX_ITEM_BYTES for item in raw)
        by_order = sorted(raw, key=lambda item: int(item["order"]["N"]))
        assert [int(item["order"]["N"]) for item in by_order] == list(range(len(raw)))
        stored = [user_id for item in by_order for user_id in json.loads(item["user_ids"]["S"])]
        assert targets == stored
        physical = Counter(item["delivery_id"]["S"] for item in raw)
        assert len(physical) > 8, physical  # the chunk writes spread over the shards
        assert raw_items(DeliveryTarget) == []
        assert status.target_count == 1_000_000


def _walk_in_child(delivery_id: str, mode_name: str, out: str, lease_seconds: float, worker_id: str) -> None:
    for model in (*MODELS, Inbox):
        reset_connection(model)
    mode: DeliveryMode
    if mode_name == "exactly-once":
        mode = ExactlyOnce(inbox_record)
    else:
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def send(_delivery_id: str, user_id: str) -> None:
            os.write(fd, f"{user_id}\n".encode())

        mode = AtMostOnce(send) if mode_name == "at-most-once" else AtLeastOnce(send)
    report = Delivery(delivery_id).walk(mode, worker_id=worker_id, lease_seconds=lease_seconds)
    Path(out).with_name(f"report-{worker_id}.json").write_text(json.dumps(report.__dict__))


def _fork_worker(*args: Any) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            _walk_in_child(*args)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    return pid


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    msg = f"worker {pid} did not finish in {timeout} s"
    raise AssertionError(msg)


@pytest.mark.parametrize("mode_name", ["exactly-once", "at-most-once", "at-least-once"])
class TestCrashedWorkers:
    """8 workers, 2 killed with SIGKILL mid-walk: the others finish, each guarantee holds."""

    def test_walk(self, dynamodb_models: BindModels, mode_name: str, tmp_path: Path) -> None:
        dynamodb_models(*MODELS, Inbox)
        targets = unique_ids(WALK_TARGETS, seed=2)
        delivery = Delivery("d1")
        delivery.create(targets, max_chunk_targets=WALK_CHUNK)
        assert delivery.status().chunk_count == WALK_TARGETS // WALK_CHUNK
        out = tmp_path / "sent.txt"
        lease = 3.0
        pids = [_fork_worker("d1", mode_name, str(out), lease, f"w{n}") for n in range(8)]
        try:
            self._kill_two_mid_walk_and_wait_for_the_others(delivery, pids, tmp_path)
        finally:  # whatever failed, no worker outlives the test
            for pid in pids:
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG) == (0, 0):
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)

        status = delivery.status()
        assert (status.finished, status.targets_left, status.chunks_open) == (True, 0, 0)
        assert raw_items(DeliveryTarget) == []
        assert delivery.targets_left() == 0
        if mode_name == "exactly-once":
            recorded = Counter(item["user_id"]["S"] for item in raw_items(Inbox))
            assert set(recorded) == set(targets)
            assert {n for n in recorded.values()} == {1}
        else:
            sent = Counter(out.read_text().split())
            assert set(sent) <= set(targets)
            if mode_name == "at-most-once":
                assert max(sent.values()) == 1
            else:
                assert set(sent) == set(targets)

    @staticmethod
    def _kill_two_mid_walk_and_wait_for_the_others(delivery: Delivery, pids: list[int], tmp_path: Path) -> None:
        """Kill w0 and w1 once 4 chunks are done and each holds a chunk's lease; the other six
        finish the walk, taking over what the two held."""

        def owners() -> set[str]:
            return {item["owner"]["S"] for item in raw_items(DeliveryLease)}

        deadline = time.monotonic() + 120
        while True:
            if time.monotonic() > deadline:
                pytest.fail("in 120 s, w0 and w1 never both held a lease once 4 chunks were done")
            if delivery.status().chunks_done < 4 or not {"w0", "w1"} <= owners():
                time.sleep(0.05)
                continue
            # Stopped, they cannot finish their chunks between the look and the kill; seen
            # holding their leases while stopped, they die holding them.
            for pid in pids[:2]:
                os.kill(pid, signal.SIGSTOP)
            held = owners() & {"w0", "w1"}
            if held:
                break
            for pid in pids[:2]:
                os.kill(pid, signal.SIGCONT)
        for pid in pids[:2]:  # mid-walk, holding the lease of a chunk
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        orphaned = len(held)
        assert not delivery.status().finished
        statuses = [_wait(pid, 150) for pid in pids[2:]]
        assert statuses == [0] * 6
        reports = [json.loads(path.read_text()) for path in tmp_path.glob("report-*.json")]
        assert len(reports) == 6
        assert orphaned >= 1
        # The survivors took over what the dead held (the walk's end is checked by the caller:
        # finished, no target left, each delivered as the mode says). One takeover at least,
        # not one per lease seen orphaned: on a loaded machine a 3 s lease can run out while
        # its worker is alive but slow, and a killed worker may have taken that chunk over
        # itself (its report dies with it); the slow first owner then finishes the chunk in
        # its last group (a finish deletes the lease whoever holds it), so nobody takes over
        # that orphaned lease. CI counted 1 takeover for 2 orphaned leases once.
        assert sum(report["takeovers"] for report in reports) >= 1


class LostTakeReplies(LostReplies):
    """Every ``every``-th TransactWriteItems that deletes targets is applied, then its reply is lost.

    With ``bookkeeping=True``, every ``every``-th write of the walk instead: takes, claims,
    finishes (transactions) and lease renewals and takeovers (UpdateItem).
    """

    def __init__(self, every: int, *, bookkeeping: bool = False) -> None:
        super().__init__(DeliveryProgress)
        self.every = every
        self.bookkeeping = bookkeeping
        self.seen = 0

    def lose(self, operation: str, body: dict[str, Any]) -> bool:
        if not self._chosen(operation, body):
            return False
        self.seen += 1
        return self.seen % self.every == 0

    def _chosen(self, operation: str, body: dict[str, Any]) -> bool:
        if self.bookkeeping:
            return operation in ("TransactWriteItems", "UpdateItem")
        if operation != "TransactWriteItems":
            return False
        deletes = (write.get("Delete", {}).get("TableName") for write in body["TransactItems"])
        return DeliveryTarget.Meta.table_name in deletes


@pytest.mark.parametrize("mode_name", ["exactly-once", "at-most-once", "at-least-once"])
class TestLostReplies:
    """A take whose reply is lost is resent with its client request token: no double, no loss."""

    def test_walk_with_lost_replies(self, dynamodb_models: BindModels, mode_name: str) -> None:
        dynamodb_models(*MODELS, Inbox)
        targets = unique_ids(600, seed=3)
        delivery = Delivery("d-lost")
        delivery.create(targets, max_chunk_targets=100)
        faults = LostTakeReplies(every=3)
        sent: list[str] = []
        mode: DeliveryMode
        if mode_name == "exactly-once":
            mode = ExactlyOnce(inbox_record)
        elif mode_name == "at-most-once":
            mode = AtMostOnce(lambda _delivery_id, user_id: sent.append(user_id))
        else:
            mode = AtLeastOnce(lambda _delivery_id, user_id: sent.append(user_id))

        report = delivery.walk(mode)

        assert faults.lost > 3
        assert report.taken == len(targets)
        assert raw_items(DeliveryTarget) == []
        if mode_name == "exactly-once":
            recorded = Counter(item["user_id"]["S"] for item in raw_items(Inbox))
            assert Counter(targets) == recorded
        else:
            assert Counter(targets) == Counter(sent)


class TestLostBookkeepingReplies:
    """Lost replies to claims, finishes and lease updates neither skip, repeat nor miscount a chunk."""

    def test_walk_with_lost_replies(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        targets = unique_ids(600, seed=5)
        delivery = Delivery("d-lost-bookkeeping")
        delivery.create(targets, max_chunk_targets=50)
        # The lease model has a client of its own: lose its UpdateItem replies too.
        faults = [LostTakeReplies(every=3, bookkeeping=True)]
        progress_client = DeliveryProgress._get_connection().connection.client
        lease_client = DeliveryLease._get_connection().connection.client
        if lease_client is not progress_client:
            faults.append(LostTakeReplies(every=3, bookkeeping=True))
            progress_client.meta.events.unregister("before-send.dynamodb", faults[-1].before_send)
            lease_client.meta.events.register_first("before-send.dynamodb", faults[-1].before_send)

        report = delivery.walk(ExactlyOnce(inbox_record), lease_seconds=30)

        assert all(fault.lost > 3 for fault in faults), [fault.lost for fault in faults]
        status = delivery.status()
        assert (status.chunks_done, status.chunks_open, status.targets_done) == (12, 0, 600)
        assert (report.chunks, report.taken) == (12, 600)
        assert raw_items(DeliveryTarget) == []
        assert raw_items(DeliveryLease) == []
        assert Counter(targets) == Counter(item["user_id"]["S"] for item in raw_items(Inbox))


class TestProgress:
    """Progress is counted at any time: chunks done, targets left (exactly, from the target items)."""

    def test_counts_during_a_walk(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS, Inbox)
        targets = unique_ids(1000, seed=4)
        delivery = Delivery("d-count")
        created = delivery.create(targets, max_chunk_targets=300)
        assert (created.chunk_count, created.chunks_done, created.target_count, created.targets_left) == (
            4,
            0,
            1000,
            1000,
        )
        assert delivery.targets_left() == 1000

        sent: list[str] = []

        class StopAfter:
            def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
                if len(sent) >= 450:
                    raise KeyboardInterrupt
                return AtMostOnce(lambda _d, user_id: sent.append(user_id)).deliver(delivery, user_ids)

        with pytest.raises(KeyboardInterrupt):
            delivery.walk(StopAfter())
        status = delivery.status()
        assert (status.chunks_done, status.chunks_open, status.targets_left) == (1, 1, 700)
        assert delivery.targets_left() == 1000 - len(sent)
        assert [chunk for chunk in delivery.chunk_ids()] == [
            targets[0:300],
            targets[300:600],
            targets[600:900],
            targets[900:],
        ]


class TestCreate:
    """A delivery is created once; ids that are not strings are refused before anything is written."""

    def test_twice_is_refused(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        Delivery("d").create(["1", "2"])
        with pytest.raises(PutError):
            Delivery("d").create(["3"])

    def test_targets_written_later(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(*MODELS)
        delivery = Delivery("d")
        delivery.create([str(n) for n in range(100)], write_targets=False, max_chunk_targets=30)
        assert raw_items(DeliveryTarget) == []
        assert 100 == delivery.write_targets()
        assert {item["user_id"]["S"] for item in raw_items(DeliveryTarget)} == {str(n) for n in range(100)}
