"""The early-throttle hook: registered once per botocore client, active only inside a dynamic write.

Proves: many threads registering at once leave one handler on the client (it runs once per
response); the private exception it raises for a key-range throttle comes out of botocore's
endpoint and PynamoDB's connection unchanged (not wrapped in PutError), before any retry;
outside a dynamic write the hook does nothing and botocore retries as usual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import _dynamic as dynamic
from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._throttling import ThrottleKind
from tests.traffic import Traffic

KEY = "/shared/firetvGen2.txt"


class HookShards(ShardMetadata):
    class Meta:
        table_name = "hook_shards"


class HookLog(ShardedModel):
    class Meta:
        table_name = "hook_log"
        max_retry_attempts = 1

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(HookShards))


@pytest.fixture
def traffic(dynamodb_models: Callable[..., Any]) -> Traffic:
    dynamodb_models(HookLog)
    traffic = Traffic()
    HookLog._get_connection().connection.client.meta.events.register_first("before-send.dynamodb", traffic.before_send)
    return traffic


def put(shard: int, range_key: int) -> Any:
    """A raw PutItem on a physical key, through PynamoDB's connection."""
    return HookLog._get_connection().put_item(
        f"{KEY}_{shard}", range_key, attributes={"file_path": {"S": f"{KEY}_{shard}"}}
    )


def test_registered_once_under_many_threads(traffic: Traffic, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = dynamic._react_early

    def counting(**kwargs: Any) -> None:
        calls.append(1)
        original(**kwargs)

    monkeypatch.setattr(dynamic, "_react_early", counting)
    barrier = threading.Barrier(32)

    def register(_: int) -> None:
        barrier.wait()
        dynamic._ensure_hook(HookLog)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(register, range(32)))
    put(1, 1)
    assert calls == [1]


def test_early_throttle_passes_botocore_and_pynamodb_unchanged(traffic: Traffic) -> None:
    dynamic._ensure_hook(HookLog)
    traffic.throttle_next = 1
    with dynamic._reacting_early(True), pytest.raises(dynamic._EarlyThrottle) as info:
        put(1, 1)
    assert info.value.throttle.kind is ThrottleKind.KEY_RANGE
    assert traffic.log == ["PutItem throttled"]  # no retry by botocore


def test_outside_a_dynamic_write_botocore_retries(traffic: Traffic) -> None:
    dynamic._ensure_hook(HookLog)
    traffic.throttle_next = 1
    put(1, 1)
    assert traffic.log == ["PutItem throttled", "PutItem"]
