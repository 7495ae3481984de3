"""The dynamic writer against DynamoDB Local, one throttle at a time.

Throttles are injected the way DynamoDB sends them: a botocore ``before-send`` handler answers
chosen PutItem requests with the real 400 response, which botocore parses and PynamoDB wraps.
Proves: a new key gets its metadata item and the item is written under a shard in 1..count;
growth starts after exactly one throttled response (not after botocore's retry ladder);
inside the cooldown a throttle retries without growing; table-level throttles never grow and
raise PynamoDB's PutError; GSI throttles raise a ShardingError about the index; corrupt
metadata raises MetadataError before anything is written; the count never passes
``max_shards``; signals fire with what happened.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._exceptions import MetadataError, ShardingError
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._throttling import ThrottleKind
from pynamodb_sharding.signals import shard_count_changed, throttle_observed
from tests.clock import Clock
from tests.raw import count_items
from tests.traffic import INDEX_KEY_RANGE, TABLE_LEVEL, Traffic

KEY = "/shared/firetvGen2.txt"


class WritesShards(ShardMetadata):
    class Meta:
        table_name = "writes_shards"


def make_model(clock: Clock, **options: Any) -> type[ShardedModel]:
    options.setdefault("cooldown", 30.0)
    options.setdefault("backoff", (1.0, 2.0))
    strategy = DynamicShards(WritesShards, clock=clock, sleep=clock.sleep, random=random.Random(7), **options)

    class AuditLog(ShardedModel):
        class Meta:
            table_name = "writes_audit_log"
            max_retry_attempts = 1  # keeps botocore's (real-time) retry ladder short

        file_path = UnicodeAttribute(hash_key=True)
        accessed_at = NumberAttribute(range_key=True)
        shards = Sharding(strategy)

    return AuditLog


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def bound(dynamodb_models: Callable[..., Any], clock: Clock) -> Callable[..., tuple[type[ShardedModel], Traffic]]:
    def bind(**options: Any) -> tuple[type[ShardedModel], Traffic]:
        model = make_model(clock, **options)
        dynamodb_models(model)
        # The fleet protocol (stored when the tables were created) is read once per process
        # per 300 s: before the requests counted.
        model.shards.strategy.protocol_in_force()
        traffic = Traffic()
        for client in {
            model._get_connection().connection.client,
            WritesShards._get_connection().connection.client,
        }:
            client.meta.events.register_first("before-send.dynamodb", traffic.before_send)
        return model, traffic

    return bind


def stored_shards(model: type[ShardedModel]) -> list[int]:
    return sorted(item.shards for item in model.scan())


def test_a_cold_key_costs_one_request_and_no_metadata_item(bound: Any, clock: Clock) -> None:
    """A key without a metadata item has its initial count: its first write reads nothing and
    creates nothing; written again within the cache TTL it is warm and its count is read once."""
    model, traffic = bound(initial=3)
    model(KEY, 1).save()
    assert traffic.log == ["PutItem"]
    model(KEY, 2).save()
    model(KEY, 3).save()
    assert traffic.log == ["PutItem", "GetItem", "PutItem", "PutItem"]  # one read per TTL
    assert count_items(WritesShards) == []  # no item beside the table's fleet protocol
    assert sorted(item.accessed_at for item in model.query(KEY)) == [1, 2, 3]
    assert all(1 <= item.shards <= 3 for item in model.scan())


def test_without_a_cache_every_write_reads_the_count(bound: Any, clock: Clock) -> None:
    """``cache_ttl=0`` sees every change at once: the first write of a key reads its count too,
    so a growth made elsewhere is used by the very next write."""
    model, traffic = bound(cache_ttl=0)
    model(KEY, 1).save()
    assert traffic.log == ["GetItem", "PutItem"]
    model.shards.grow(KEY)
    model.shards.grow(KEY)  # 4 shards
    traffic.log.clear()
    for at in range(2, 42):
        model(KEY, at).save()
    assert traffic.log == ["GetItem", "PutItem"] * 40
    assert len(set(stored_shards(model))) > 1  # the writes spread over the grown count


def warm(model: type[ShardedModel], traffic: Traffic) -> None:
    """Write KEY twice (its count is then known to this process), then clear the log."""
    model(KEY, 100).save()
    model(KEY, 101).save()
    traffic.log.clear()


def test_growth_starts_after_exactly_one_throttled_response(bound: Any, clock: Clock) -> None:
    model, traffic = bound()
    warm(model, traffic)
    traffic.throttle_next = 1
    model(KEY, 2).save()
    # One throttled PutItem, then the conditional insert of the key's metadata item (its
    # first growth: no botocore retry of the PutItem in between), then the write on the
    # wider space.
    assert traffic.log == ["PutItem throttled", "PutItem", "PutItem"]
    assert model.shards.shard_count(KEY) == 2
    history = model.shards.history(KEY)
    assert [entry.count for entry in history] == [1, 2]
    assert history[0].at == 0  # the initial count, in effect from the start
    assert len(clock.sleeps) == 1
    assert 1.0 <= clock.sleeps[0] <= 2.0  # the random backoff before growing
    clock.now += 31  # past the cooldown: the next growth changes the item
    traffic.log.clear()
    traffic.throttle_next = 1
    model(KEY, 3).save()
    assert traffic.log == ["PutItem throttled", "UpdateItem", "PutItem"]
    assert [entry.count for entry in model.shards.history(KEY)] == [1, 2, 4]


def test_without_the_early_hook_botocore_would_retry_instead(bound: Any, clock: Clock) -> None:
    """The control of the test above: a plain PynamoDB save retries the throttle itself."""
    model, traffic = bound()
    model(KEY, 1).save()
    clock.now += 31
    item = model(KEY, 2)
    item.save()
    traffic.log.clear()
    traffic.throttle_next = 1
    item.save()  # a known shard: written directly, not through the strategy
    assert traffic.log == ["PutItem throttled", "PutItem"]
    assert model.shards.shard_count(KEY) == 1


def test_throttle_inside_the_cooldown_retries_without_growing(bound: Any, clock: Clock) -> None:
    model, traffic = bound()
    model(KEY, 1).save()
    assert model.shards.grow(KEY) == 2  # a change: the cooldown counts from it
    clock.now += 5  # inside the 30 s cooldown
    traffic.log.clear()
    traffic.throttle_next = 3
    model(KEY, 2).save()
    assert traffic.log == ["PutItem throttled"] * 3 + ["PutItem"]
    assert model.shards.shard_count(KEY) == 2
    # Pauses grow from backoff[0] (jittered), capped at backoff[1].
    assert all(0 <= pause <= 2.0 for pause in clock.sleeps)
    assert len(clock.sleeps) == 3
    assert sorted(item.accessed_at for item in model.query(KEY)) == [1, 2]


def test_an_item_only_created_starts_no_cooldown(bound: Any, clock: Clock) -> None:
    """A key's item created without a change of its count (a first write-rate report does
    that) does not hold back its first growth; its first change does hold back the next."""
    model, traffic = bound()
    warm(model, traffic)
    model.shards.strategy.store.create(model.Meta.table_name, KEY, 1, clock(), owner="AuditLog.shards")
    assert [entry.count for entry in model.shards.history(KEY)] == [1]
    traffic.log.clear()
    clock.now += 5  # well inside the 30 s cooldown, had the creation been a change
    traffic.throttle_next = 1
    model(KEY, 2).save()
    assert traffic.log == ["PutItem throttled", "UpdateItem", "PutItem"]
    assert model.shards.shard_count(KEY) == 2
    clock.now += 5
    traffic.log.clear()
    traffic.throttle_next = 1
    model(KEY, 3).save()
    assert traffic.log == ["PutItem throttled", "PutItem"]  # 5 s after a change: no growth
    assert model.shards.shard_count(KEY) == 2


def test_table_level_throttle_never_grows(bound: Any, clock: Clock) -> None:
    model, traffic = bound()
    warm(model, traffic)
    clock.now += 3600
    traffic.reason = TABLE_LEVEL
    traffic.throttle_next = 100
    seen: list[ThrottleKind] = []

    def record(sender: Any, key: str, throttle: Any) -> None:
        seen.append(throttle.kind)

    with throttle_observed.connected_to(record), pytest.raises(PutError):
        model(KEY, 2).save()
    attempts = 1 + model.Meta.max_retry_attempts
    assert traffic.log == ["PutItem throttled"] * attempts  # botocore's ladder, nothing else
    assert seen == [ThrottleKind.TABLE]
    assert model.shards.shard_count(KEY) == 1
    assert sorted(item.accessed_at for item in model.query(KEY)) == [100, 101]


def test_index_throttle_raises_a_sharding_error_about_the_index(bound: Any, clock: Clock) -> None:
    model, traffic = bound()
    model(KEY, 1).save()
    clock.now += 3600
    traffic.reason = INDEX_KEY_RANGE
    traffic.resource += "/index/by-date"
    traffic.throttle_next = 100
    with pytest.raises(ShardingError, match="by-date") as info:
        model(KEY, 2).save()
    assert "base-table shards do not fix a GSI hot key" in str(info.value)
    assert isinstance(info.value.cause, PutError)
    assert model.shards.shard_count(KEY) == 1


def test_growth_is_capped_by_max_shards(bound: Any, clock: Clock) -> None:
    # Growths written to at once (fresh reads): each throttle past the cooldown grows again.
    model, traffic = bound(max_shards=3, cooldown=0.0, max_attempts=50, fresh_reads=True)
    model(KEY, 0).save()
    for n in range(1, 4):
        traffic.throttle_next = 2
        model(KEY, n).save()
    assert model.shards.shard_count(KEY) == 3
    assert [entry.count for entry in model.shards.history(KEY)] == [1, 2, 3]
    assert model.shards.read_shards(KEY) == (1, 2, 3)


def test_writes_give_up_after_max_attempts(bound: Any, clock: Clock) -> None:
    model, traffic = bound(max_shards=1, max_attempts=4)
    model(KEY, 1).save()
    traffic.log.clear()
    traffic.throttle_next = 1000
    with pytest.raises(PutError):
        model(KEY, 2).save()
    # three early attempts, then one with botocore's own retries
    assert traffic.count("PutItem throttled") == 3 + 1 + model.Meta.max_retry_attempts
    assert [item.accessed_at for item in model.query(KEY)] == [1]


@pytest.mark.parametrize(
    ("attributes", "problem"),
    [
        ({"number_of_shards": None, "last_updated": 1.0}, "no number_of_shards"),
        ({"number_of_shards": 0, "last_updated": 1.0}, "number_of_shards=0"),
        ({"number_of_shards": -2, "last_updated": 1.0}, "number_of_shards=-2"),
        ({"number_of_shards": 99, "last_updated": 1.0}, "number_of_shards=99"),
        ({"number_of_shards": 2}, "no valid last_updated"),
        ({"number_of_shards": 2, "last_updated": 1.0, "shard_history": {"soon:2"}}, "unparsable"),
    ],
)
def test_corrupt_metadata_raises_and_writes_nothing(
    bound: Any, clock: Clock, attributes: dict[str, Any], problem: str
) -> None:
    model, traffic = bound(max_shards=8)
    WritesShards(KEY, model.Meta.table_name, **attributes).save()
    model(KEY, 1).save()  # a key's first write reads no count: shard 1 is always valid
    traffic.log.clear()
    with pytest.raises(MetadataError) as info:
        model(KEY, 2).save()  # the second reads it
    message = str(info.value)
    assert problem in message
    assert f"AuditLog.file_path: the shard metadata of key {KEY!r}" in message
    assert "fix or delete the item" in message
    assert traffic.count("PutItem") == 0
    assert [item.accessed_at for item in model.scan()] == [1]


def test_signals_report_growth_and_throttles(bound: Any, clock: Clock) -> None:
    model, traffic = bound()
    model(KEY, 1).save()
    clock.now += 31
    changes: list[tuple[Any, str, int, int, str]] = []
    throttles: list[tuple[Any, str, ThrottleKind]] = []

    def on_change(sender: Any, key: str, old: int, new: int, reason: str) -> None:
        changes.append((sender, key, old, new, reason))

    def on_throttle(sender: Any, key: str, throttle: Any) -> None:
        throttles.append((sender, key, throttle.kind))

    traffic.throttle_next = 1
    with shard_count_changed.connected_to(on_change), throttle_observed.connected_to(on_throttle):
        model(KEY, 2).save()
        model.shards.grow(KEY)
        model.shards.shrink(KEY, to=1)
    assert throttles == [(model, KEY, ThrottleKind.KEY_RANGE)]
    assert changes == [
        (model, KEY, 1, 2, "throttle"),
        (model, KEY, 2, 4, "grow"),
        (model, KEY, 4, 1, "shrink"),
    ]
