"""No silent wrong results from ``DynamicShards`` under lost replies, throttles, skew and forks.

Faults are injected with botocore's ``before-send`` hook (tests/faults.py): a "lost" attempt
is really applied by DynamoDB Local and then raises ``ReadTimeoutError``, so botocore resends
it exactly as after a real lost reply. Where PynamoDB has the behaviour, a plain ``Model`` under
the same fault in the same test is the reference. The raw table is read with boto3.

Proves, one class per behaviour:

- a write attempt that may have been applied is only ever retried to the same physical key;
- after an ambiguous failure the instance keeps its shard, so the application's retry hits the
  same key (and ``VersionAttribute`` refuses it as PynamoDB does);
- a GSI throttle and metadata-table failures reach ``save()``'s caller as ``PutError``;
- shrinking a key whose history does not show its count keeps that count's shards readable;
- a ``last_updated`` in the future delays growth by one cooldown at most;
- ``shard_count_changed`` and return values agree with what is stored after a lost reply;
- a child forked during a metadata load does not wait for the parent's flight.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import GetError, PutError, UpdateError
from pynamodb.models import Model

from pynamodb_sharding._descriptor import Sharding, shard_manager
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._exceptions import IndexThrottleError, MetadataRequestError, ShardingError
from pynamodb_sharding._item import pin, state
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._strategies import RandomShards
from pynamodb_sharding.signals import shard_count_changed
from tests.faults import Faults
from tests.raw import count_items, raw_items

KEY = "/shared/firetvGen2.txt"
START = 1_700_000_000.0


class Clock:
    """Epoch seconds moved by hand; sleeping advances it."""

    def __init__(self) -> None:
        self.now = START
        self.skew = 0.0

    def __call__(self) -> float:
        return self.now + self.skew

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FaultShards(ShardMetadata):
    class Meta:
        table_name = "fault_shards"


def sharded_model(clock: Clock, *, versioned: bool = False, retries: int = 1, **options: Any) -> type[ShardedModel]:
    options.setdefault("initial", 8)
    options.setdefault("max_shards", 8)
    options.setdefault("backoff", (0.5, 1.0))
    strategy = DynamicShards(FaultShards, clock=clock, sleep=clock.sleep, random=random.Random(3), **options)
    attributes: dict[str, Any] = {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": "fault_log", "max_retry_attempts": retries}),
        "file_path": UnicodeAttribute(hash_key=True),
        "accessed_at": NumberAttribute(range_key=True),
        "shards": Sharding(strategy),
    }
    if versioned:
        attributes["version"] = VersionAttribute()
    return type("FaultLog", (ShardedModel,), attributes)


def plain_model(*, versioned: bool = False, retries: int = 1) -> type[Model]:
    attributes: dict[str, Any] = {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": "fault_plain", "max_retry_attempts": retries}),
        "file_path": UnicodeAttribute(hash_key=True),
        "accessed_at": NumberAttribute(range_key=True),
    }
    if versioned:
        attributes["version"] = VersionAttribute()
    return type("PlainLog", (Model,), attributes)


def physical_keys(model: type[Model]) -> list[tuple[str, int]]:
    return sorted((raw["file_path"]["S"], int(raw["accessed_at"]["N"])) for raw in raw_items(model))


def logical_items(model: type[ShardedModel]) -> list[tuple[str, int]]:
    return sorted((item.file_path, int(item.accessed_at)) for item in model.query(KEY))


@pytest.fixture
def clock() -> Clock:
    return Clock()


class TestLostReplyThenThrottle:
    """Point 12: an applied attempt whose resend is throttled is retried on the same shard."""

    def test_each_save_leaves_one_copy(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        sharded = sharded_model(clock, retries=3)
        plain = plain_model(retries=3)
        dynamodb_models(sharded, plain)
        sharded_puts, plain_puts = Faults(sharded, "PutItem"), Faults(plain, "PutItem")
        for n in range(3):
            for faults in (sharded_puts, plain_puts):
                faults.plan = ["lost", "throttle"]
            sharded(KEY, n).save()
            plain(KEY, n).save()
        assert len(physical_keys(plain)) == 3  # the reference: one item per save
        assert logical_items(sharded) == [(KEY, 0), (KEY, 1), (KEY, 2)]
        stored = physical_keys(sharded)
        assert len(stored) == 3
        assert all(physical.startswith(f"{KEY}_") for physical, _ in stored)


class TestRetryAfterAmbiguousFailure:
    """Point 13: after a lost reply the instance keeps its shard; the retry goes to the same key."""

    @pytest.mark.parametrize("fault", ["lost", "closed"])
    def test_retried_save_overwrites_its_own_copy(
        self, dynamodb_models: Callable[..., Any], clock: Clock, fault: str
    ) -> None:
        sharded, plain = sharded_model(clock), plain_model()
        dynamodb_models(sharded, plain)
        sharded_puts, plain_puts = Faults(sharded, "PutItem"), Faults(plain, "PutItem")
        for model, faults in ((sharded, sharded_puts), (plain, plain_puts)):
            for n in range(3):
                item = model(KEY, n)
                faults.plan = [fault, fault]  # both of botocore's attempts applied, replies lost
                with pytest.raises(PutError):
                    item.save()
                item.save()  # the application's retry
        assert len(physical_keys(plain)) == 3
        assert logical_items(sharded) == [(KEY, 0), (KEY, 1), (KEY, 2)]
        assert len(physical_keys(sharded)) == 3

    def test_shard_kept_when_later_attempts_were_refused(
        self, dynamodb_models: Callable[..., Any], clock: Clock
    ) -> None:
        """An ambiguous first attempt pins the shard, even if the last attempt was a plain 4xx."""
        sharded = sharded_model(clock, max_attempts=2)
        dynamodb_models(sharded)
        faults = Faults(sharded, "PutItem")
        for n in range(3):
            item = sharded(KEY, n)
            # attempt 1: applied, reply lost, resend throttled; attempt 2: throttled twice
            faults.plan = ["lost", "throttle", "throttle", "throttle"]
            with pytest.raises(PutError):
                item.save()
            item.save()
        assert logical_items(sharded) == [(KEY, 0), (KEY, 1), (KEY, 2)]
        assert len(physical_keys(sharded)) == 3

    def test_random_shards_keep_the_shard_too(self, dynamodb_models: Callable[..., Any]) -> None:
        random_model = type("RandomLog", (ShardedModel,), {
            "__module__": __name__,
            "Meta": type("Meta", (), {"table_name": "fault_random", "max_retry_attempts": 1}),
            "file_path": UnicodeAttribute(hash_key=True),
            "accessed_at": NumberAttribute(range_key=True),
            "shards": Sharding(RandomShards(8)),
        })
        dynamodb_models(random_model)
        faults = Faults(random_model, "PutItem")
        for n in range(3):
            item = random_model(KEY, n)
            faults.plan = ["lost", "lost"]
            with pytest.raises(PutError):
                item.save()
            item.save()
        assert len(physical_keys(random_model)) == 3

    def test_version_attribute_refuses_the_retry_like_pynamodb(
        self, dynamodb_models: Callable[..., Any], clock: Clock
    ) -> None:
        sharded, plain = sharded_model(clock, versioned=True), plain_model(versioned=True)
        dynamodb_models(sharded, plain)
        codes = []
        for model in (sharded, plain):
            # The sharded save of a new versioned item is one transaction: the put, and no other
            # shard holding the key.
            faults = Faults(model, "TransactWriteItems" if model is sharded else "PutItem")
            item = model(KEY, 1)
            faults.plan = ["lost", "lost"]
            with pytest.raises(PutError):
                item.save()
            with pytest.raises(PutError) as retry:
                item.save()
            codes.append(retry.value.cause_response_code)
            if model is sharded:
                faults_of_sharded = faults
        assert codes == ["ConditionalCheckFailedException"] * 2
        # The retry is a transaction again: the first may not have been applied, so whether
        # another shard holds the key is still to be checked; its put's version check fails.
        assert ["lost", "lost", "ok"] == faults_of_sharded.log
        [stored] = raw_items(sharded)
        assert stored["version"] == {"N": "1"}
        assert [(item.file_path, item.version) for item in sharded.query(KEY)] == [(KEY, 1)]

    def test_a_rejected_write_forgets_the_shard(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        """A 4xx (nothing written) still lets the next save choose a shard afresh."""
        sharded = sharded_model(clock)
        dynamodb_models(sharded)
        faults = Faults(sharded, "PutItem")
        item = sharded(KEY, 1)
        faults.plan = ["denied"]
        with pytest.raises(PutError):
            item.save()
        assert state(item).shard is None


class TestIndexThrottleIsAPutError:
    """Point 11: a GSI throttle stays a PutError to code that catches PynamoDB's exceptions."""

    def test_caught_as_put_error_like_pynamodb(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        sharded, plain = sharded_model(clock), plain_model()
        dynamodb_models(sharded, plain)
        caught: list[PutError] = []
        for model in (sharded, plain):
            Faults(model, "PutItem").plan = ["index-throttle"] * 10
            try:
                model(KEY, 1).save()
            except PutError as exc:  # what callers of PynamoDB catch
                caught.append(exc)
        assert [type(exc) for exc in caught] == [IndexThrottleError, PutError]
        assert isinstance(caught[0], ShardingError)
        assert "by-date" in str(caught[0])
        assert isinstance(caught[0].cause, PutError)
        assert raw_items(sharded) == []


class TestMetadataFailuresArePutErrors:
    """Point 17: save() raises PutError when the metadata table fails, keeping its error as cause."""

    def test_metadata_read_failure(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        sharded = sharded_model(clock)
        dynamodb_models(sharded)
        sharded(KEY, 0).save()  # a key's first write reads no count
        faults = Faults(FaultShards, "GetItem")
        faults.plan = ["denied"]
        with pytest.raises(PutError) as info:
            sharded(KEY, 1).save()  # the second reads it
        assert isinstance(info.value, MetadataRequestError)
        assert isinstance(info.value.cause, GetError)
        assert "FaultLog.file_path" in str(info.value)
        assert logical_items(sharded) == [(KEY, 0)]

    def test_metadata_update_failure_while_growing(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        sharded = sharded_model(clock, initial=1)
        dynamodb_models(sharded)
        sharded(KEY, 0).save()
        assert sharded.shards.grow(KEY) == 2  # the key has its metadata item
        clock.now += 3600  # past the cooldown: the throttle grows the key
        Faults(sharded, "PutItem").plan = ["throttle"]
        Faults(FaultShards, "UpdateItem").plan = ["denied"]
        with pytest.raises(PutError) as info:
            sharded(KEY, 1).save()
        assert isinstance(info.value, MetadataRequestError)
        assert isinstance(info.value.cause, UpdateError)
        assert logical_items(sharded) == [(KEY, 0)]

    def test_metadata_insert_failure_at_the_first_growth(
        self, dynamodb_models: Callable[..., Any], clock: Clock,
    ) -> None:
        """A key without an item grows by inserting it: a failed insert is the same PutError."""
        sharded = sharded_model(clock, initial=1)
        dynamodb_models(sharded)
        sharded(KEY, 0).save()
        Faults(sharded, "PutItem").plan = ["throttle"]
        Faults(FaultShards, "PutItem").plan = ["denied"]
        with pytest.raises(PutError) as info:
            sharded(KEY, 1).save()
        assert isinstance(info.value, MetadataRequestError)
        assert isinstance(info.value.cause, PutError)
        assert logical_items(sharded) == [(KEY, 0)]
        assert count_items(FaultShards) == []


class TestShrinkWithoutHistory:
    """Point 4: the count before a change is recorded, so shrinking never hides its shards."""

    @pytest.mark.parametrize("history", [None, {f"{int(START) - 100}:1"}], ids=["no-history", "fixed-by-hand"])
    def test_old_shards_stay_readable(
        self, dynamodb_models: Callable[..., Any], clock: Clock, history: set[str] | None
    ) -> None:
        sharded = sharded_model(clock)
        dynamodb_models(sharded)
        namespace = sharded.Meta.table_name
        FaultShards(KEY, namespace, number_of_shards=4, last_updated=START - 50, shard_history=history).save()
        for shard in range(1, 5):
            item = sharded(KEY, shard)
            pin(item, shard_manager(type(item)), shard)
            item.save()
        assert sharded.shards.shrink(KEY, to=1) == 1
        assert sharded.shards.read_shards(KEY) == (1, 2, 3, 4)
        cold = DynamicShards(FaultShards, max_shards=8)  # another process
        assert cold.read_shards(sharded.shards.key(KEY)) == (1, 2, 3, 4)
        assert logical_items(sharded) == [(KEY, 1), (KEY, 2), (KEY, 3), (KEY, 4)]
        assert (4, 1) == tuple(entry.count for entry in sharded.shards.history(KEY))[-2:]


class TestClockSkew:
    """Point 15: a last_updated in the future blocks growth for one cooldown at most."""

    def test_growth_resumes_after_one_cooldown(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        sharded = sharded_model(clock, initial=1, cooldown=30.0)
        dynamodb_models(sharded)
        puts = Faults(sharded, "PutItem")
        clock.skew = 3600.0  # this host's clock runs an hour fast
        sharded(KEY, 0).save()
        clock.now += 31
        puts.plan = ["throttle"]
        sharded(KEY, 1).save()
        assert sharded.shards.shard_count(KEY) == 2
        clock.skew = 0.0  # every other host: history lies an hour ahead
        sharded.shards.strategy.store.clear()
        clock.now += 31
        puts.plan = ["throttle"]
        sharded(KEY, 2).save()  # first sight of the future value: one cooldown from now
        assert sharded.shards.shard_count(KEY) == 2
        clock.now += 31
        puts.plan = ["throttle"]
        sharded(KEY, 3).save()
        assert sharded.shards.shard_count(KEY) == 4
        clock.now += 31
        puts.plan = ["throttle"]
        sharded(KEY, 4).save()  # our own growth counts from when we made it
        assert sharded.shards.shard_count(KEY) == 8
        history = sharded.shards.history(KEY)
        assert [entry.count for entry in history] == [1, 2, 4, 8]
        lock_values = [entry.at for entry in history]
        assert lock_values == sorted(set(lock_values))  # strictly increasing
        assert len(logical_items(sharded)) == 5


class TestSignalsAfterLostReply:
    """Point 16: a change applied whose reply was lost is reported and returned as made."""

    @pytest.mark.parametrize("change", ["throttle", "grow", "shrink"])
    def test_signal_and_return_value_match_the_table(
        self, dynamodb_models: Callable[..., Any], clock: Clock, change: str
    ) -> None:
        sharded = sharded_model(clock, initial=2)
        dynamodb_models(sharded)
        stored_at = START - 7200
        FaultShards(KEY, sharded.Meta.table_name, number_of_shards=2, last_updated=stored_at,
                    shard_history={f"{int(stored_at)}:2"}).save()  # the key has grown before
        sharded(KEY, 0).save()
        clock.now += 3600
        updates = Faults(FaultShards, "UpdateItem")
        updates.plan = ["lost"]
        changes: list[tuple[int, int, str]] = []

        def record(sender: Any, key: str, old: int, new: int, reason: str) -> None:
            changes.append((old, new, reason))

        with shard_count_changed.connected_to(record):
            if change == "throttle":
                Faults(sharded, "PutItem").plan = ["throttle"]
                sharded(KEY, 1).save()
                expected = (2, 4, "throttle")
            elif change == "grow":
                assert sharded.shards.grow(KEY) == 4
                expected = (2, 4, "grow")
            else:
                assert sharded.shards.shrink(KEY, to=1) == 1
                expected = (2, 1, "shrink")
        assert updates.log[:2] == ["lost", "ok"]  # botocore's resend failed the condition
        assert changes == [expected]
        stored = FaultShards.get(KEY, sharded.Meta.table_name, consistent_read=True)
        assert stored.number_of_shards == expected[1]


class TestForkDuringMetadataLoad:
    """Point 14: a child forked while a parent thread loads a key's metadata does not hang."""

    def test_child_writes_the_key(self, dynamodb_models: Callable[..., Any], clock: Clock) -> None:
        sharded = sharded_model(clock)
        dynamodb_models(sharded)
        parent = os.getpid()
        loading, release = threading.Event(), threading.Event()

        def hold_get(**_: Any) -> None:
            if os.getpid() == parent and not release.is_set():
                loading.set()
                release.wait(30)

        events = FaultShards._get_connection().connection.client.meta.events
        events.register("before-send.dynamodb.GetItem", hold_get)
        loader = threading.Thread(target=lambda: sharded.shards.shard_count(KEY))
        loader.start()
        try:
            assert loading.wait(10)
            pid = os.fork()
            if pid == 0:  # the child: write the key, report by exit code, never return
                code = 1
                try:
                    sharded(KEY, 1).save()
                    code = 0
                finally:
                    os._exit(code)
            deadline = time.monotonic() + 20
            status = None
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child hung on its first write of the key")
        finally:
            release.set()
            loader.join(10)
        assert os.waitstatus_to_exitcode(status) == 0
        assert logical_items(sharded) == [(KEY, 1)]
