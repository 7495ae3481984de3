"""Every one of DynamoDB's sixteen throttling reasons, on a ``DynamicShards`` write and read.

``ThrottlingReasons`` is ``<Table|Index><Read|Write><KeyRange|Provisioned|AccountLimit|
MaxOnDemand>Exceeded`` with the resource ARN. Proves, one test per reason, on DynamoDB Local
with the reason injected through botocore's ``before-send``: a table write key range grows the
key's shards and the save succeeds; an index key range raises ``IndexThrottleError``; every
other reason raises ``CapacityThrottleError`` naming the fix for that reason (provisioned
capacity, account quota, ``MaxWriteRequestUnits``...), after botocore's retries, and grows
nothing; a read reason on a query raises PynamoDB's ``QueryError`` and grows nothing. The raw
table is checked: nothing is written by a refused save.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError

from pynamodb_sharding import (
    CapacityThrottleError,
    DynamicShards,
    IndexThrottleError,
    ShardedModel,
    Sharding,
    ShardMetadata,
)
from tests.faults import Faults
from tests.raw import raw_items

Bind = Callable[..., Any]

REASONS = [
    f"{resource}{kind}{limit}"
    for resource, kind, limit in itertools.product(
        ("Table", "Index"), ("Write", "Read"),
        ("KeyRangeThroughputExceeded", "ProvisionedThroughputExceeded", "AccountLimitExceeded",
         "MaxOnDemandThroughputExceeded"),
    )
]

#: The fix each limit's message names.
FIXES = {
    "ProvisionedThroughputExceeded": "provisioned",
    "AccountLimitExceeded": "quota",
    "MaxOnDemandThroughputExceeded": "OnDemandThroughput",
    "KeyRangeThroughputExceeded": "hot read partition",
}


class ReasonShards(ShardMetadata):
    class Meta:
        table_name = "reason_shards"


class Upload(ShardedModel):
    class Meta:
        table_name = "reason_upload"
        max_retry_attempts = 1

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(ReasonShards, max_shards=8, cooldown=0, backoff=(0, 0)))


def test_there_are_sixteen() -> None:
    assert len(set(REASONS)) == 16


@pytest.mark.parametrize("reason", [r for r in REASONS if "Write" in r], ids=str)
def test_write_reason_and_its_action(dynamodb_models: Bind, reason: str) -> None:
    dynamodb_models(Upload)
    puts = Faults(Upload, "PutItem")
    puts.plan = [f"reason:{reason}"] * 3
    key = f"/{reason}"
    if reason == "TableWriteKeyRangeThroughputExceeded":
        Upload(key, 1).save()  # grows, then succeeds
        assert Upload.shards.shard_count(key) > 1
        assert [raw["at"]["N"] for raw in raw_items(Upload)] == ["1"]
        return
    expected = IndexThrottleError if reason.startswith("IndexWriteKeyRange") else CapacityThrottleError
    with pytest.raises(expected) as raised:
        Upload(key, 1).save()
    assert Upload.shards.shard_count(key) == 1  # more shards cannot help: none were added
    assert raw_items(Upload) == []
    if expected is CapacityThrottleError:
        message = str(raised.value)
        assert reason in message
        assert FIXES[next(limit for limit in FIXES if reason.endswith(limit))] in message
        assert "more shards cannot help" in message
        assert puts.log.count(f"reason:{reason}") == 2  # botocore retried once, then it raised


@pytest.mark.parametrize("reason", [r for r in REASONS if "Read" in r], ids=str)
def test_read_reason_grows_no_write_shards(dynamodb_models: Bind, reason: str) -> None:
    dynamodb_models(Upload)
    Upload("/read", 1).save()
    queries = Faults(Upload, "Query")
    queries.plan = [f"reason:{reason}"] * 3
    with pytest.raises(QueryError):
        list(Upload.query("/read"))
    assert Upload.shards.shard_count("/read") == 1
    assert [item.at for item in Upload.query("/read")] == [1]  # the plan is used up
