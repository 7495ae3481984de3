"""Every one of DynamoDB's sixteen throttling reasons, produced by the simulator, and its action.

``ThrottlingReasons`` is ``<Table|Index><Write|Read><KeyRange|Provisioned|AccountLimit|
MaxOnDemand>Exceeded`` with the resource ARN. One test per reason, on DynamoDB Local, a
``DynamicShards`` model with a plain (unsharded) global index, and the reason produced by
:func:`simulate_partition_limits` (a clock that never moves, so no bucket refills). Proves:

* ``TableWriteKeyRangeThroughputExceeded`` grows the key's shards and the save succeeds (one
  item in the raw table);
* ``IndexWriteKeyRangeThroughputExceeded`` raises ``IndexThrottleError`` and grows nothing;
* every other write reason raises ``CapacityThrottleError`` naming the reason and its fix
  (provisioned capacity, account quota, ``OnDemandThroughput``) after botocore's one retry,
  grows nothing, and the refused save writes nothing;
* a read reason (a query of the table or of the index) raises PynamoDB's ``QueryError`` after
  botocore's retry and grows no write shard.

Each checks the error code DynamoDB uses for the reason (``RequestLimitExceeded`` for an account
quota, ``ThrottlingException`` for an on-demand maximum), the resource ARN, and the simulator's
count.
A throttle without reasons (DynamoDB Local, older DynamoDB) falls back on its error code.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError, QueryError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import (
    CapacityThrottleError,
    DynamicShards,
    IndexThrottleError,
    ShardedModel,
    Sharding,
    ShardMetadata,
    store_fleet_protocol,
)
from pynamodb_sharding._throttling import classify
from pynamodb_sharding.testing.simulator import simulate_partition_limits
from tests.faults import Faults
from tests.raw import raw_items

Bind = Callable[..., Any]

PTEE = "ProvisionedThroughputExceededException"
THROTTLING = "ThrottlingException"
REQUEST_LIMIT = "RequestLimitExceeded"


class FixedClock:
    """A clock that never moves: the simulator's buckets do not refill, the cache never expires."""

    def __call__(self) -> float:
        return 1_000.0


class HighestShard(random.Random):
    """Writes go to the highest shard of the count, so a grown key leaves its hot shard at once."""

    def randint(self, a: int, b: int) -> int:
        return b


class ReasonShards(ShardMetadata):
    class Meta:
        table_name = "reason_shards"


class ByDay(GlobalSecondaryIndex["Upload"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)


CLOCK = FixedClock()


class Upload(ShardedModel):
    class Meta:
        table_name = "reason_upload"
        max_retry_attempts = 1

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = ByDay()
    shards = Sharding(
        DynamicShards(
            ReasonShards, max_shards=8, cooldown=0, backoff=(0, 0), fresh_reads=False,
            clock=CLOCK, timer=CLOCK, random=HighestShard(),
        )
    )


class GrowingUpload(Upload):
    """The same table, for the test of a growth: on a table whose fleet protocol says fresh
    reads, writers use a grown count at once, which cached reads delay by ``cache_ttl +
    clock_skew`` (the clock here never moves)."""

    shards = Sharding(
        DynamicShards(
            ReasonShards, max_shards=8, cooldown=0, backoff=(0, 0), clock=CLOCK, timer=CLOCK, random=HighestShard(),
        )
    )


#: The simulator's limits that produce each reason (units per second; the clock is fixed). The
#: partition limit applies to the metadata table too: 2 units leave room for the key's metadata
#: item to be created and then grown.
LIMITS: dict[str, dict[str, Any]] = {
    "TableWriteKeyRangeThroughputExceeded": {"write_units": 2},
    "TableWriteProvisionedThroughputExceeded": {"table_write_units": 1},
    "TableWriteAccountLimitExceeded": {"table_write_units": 1, "capacity_limit": "account"},
    "TableWriteMaxOnDemandThroughputExceeded": {"table_write_units": 1, "capacity_limit": "on_demand_maximum"},
    "IndexWriteKeyRangeThroughputExceeded": {"index_write_units": 1},
    "IndexWriteProvisionedThroughputExceeded": {"index_table_write_units": 1},
    "IndexWriteAccountLimitExceeded": {"index_table_write_units": 1, "capacity_limit": "account"},
    "IndexWriteMaxOnDemandThroughputExceeded": {"index_table_write_units": 1, "capacity_limit": "on_demand_maximum"},
    "TableReadKeyRangeThroughputExceeded": {"read_units": 0.5},
    "TableReadProvisionedThroughputExceeded": {"table_read_units": 0.5},
    "TableReadAccountLimitExceeded": {"table_read_units": 0.5, "capacity_limit": "account"},
    "TableReadMaxOnDemandThroughputExceeded": {"table_read_units": 0.5, "capacity_limit": "on_demand_maximum"},
    "IndexReadKeyRangeThroughputExceeded": {"index_read_units": 0.5},
    "IndexReadProvisionedThroughputExceeded": {"index_table_read_units": 0.5},
    "IndexReadAccountLimitExceeded": {"index_table_read_units": 0.5, "capacity_limit": "account"},
    "IndexReadMaxOnDemandThroughputExceeded": {"index_table_read_units": 0.5, "capacity_limit": "on_demand_maximum"},
}

#: The fix each capacity limit's message names.
FIXES = {
    "ProvisionedThroughputExceeded": "provisioned write capacity is used up",
    "AccountLimitExceeded": "request a higher quota",
    "MaxOnDemandThroughputExceeded": "raise MaxWriteRequestUnits",
}

WRITE_REASONS = [reason for reason in LIMITS if "Write" in reason]
READ_REASONS = [reason for reason in LIMITS if "Read" in reason]
LIMITED = {"write_units": None, "read_units": None, "clock": CLOCK}


def _code(reason: str) -> str:
    """The error DynamoDB sends the reason in (its error reference lists one per limit)."""
    if reason.endswith("AccountLimitExceeded"):
        return REQUEST_LIMIT
    return THROTTLING if reason.endswith("MaxOnDemandThroughputExceeded") else PTEE


def _resource(reason: str) -> str:
    arn = f"arn:aws:dynamodb:{Upload.Meta.region}:000000000000:table/{Upload.Meta.table_name}"
    return f"{arn}/index/by_day" if reason.startswith("Index") else arn


@pytest.fixture
def upload(dynamodb_models: Bind) -> None:
    dynamodb_models(Upload)


def test_every_reason_has_its_test() -> None:
    limits = ("KeyRangeThroughputExceeded", "ProvisionedThroughputExceeded", "AccountLimitExceeded",
              "MaxOnDemandThroughputExceeded")
    expected = {f"{r}{o}{limit}" for r, o, limit in itertools.product(("Table", "Index"), ("Write", "Read"), limits)}
    assert len(expected) == 16
    assert set(LIMITS) == expected


def test_table_write_key_range_grows_and_the_save_succeeds(upload: None) -> None:
    reason = "TableWriteKeyRangeThroughputExceeded"
    store_fleet_protocol(GrowingUpload, cached_reads=False, immediately=True)  # before any process runs
    with simulate_partition_limits(Upload, **{**LIMITED, **LIMITS[reason]}) as simulator:
        for at in (90, 91):  # empty the key's only partition (deletes of absent items cost a unit)
            GrowingUpload("/hot", at).delete()
        GrowingUpload("/hot", 1, day="d").save()  # throttled on shard 1, grows, lands on shard 2
    assert GrowingUpload.shards.shard_count("/hot") == 2
    assert simulator.throttles_by_reason == {reason: 1}
    assert [(raw["at"]["N"], raw["day"]["S"]) for raw in raw_items(Upload)] == [("1", "d")]


def test_index_write_key_range_raises_index_throttle_error(upload: None) -> None:
    reason = "IndexWriteKeyRangeThroughputExceeded"
    with simulate_partition_limits(Upload, **{**LIMITED, **LIMITS[reason]}) as simulator:
        Upload("/first", 1, day="d").save()  # takes index partition "d"'s only unit
        before = raw_items(Upload)
        with pytest.raises(IndexThrottleError) as raised:
            Upload("/key", 1, day="d").save()
    assert isinstance(raised.value, PutError)
    assert Upload.shards.shard_count("/key") == 1
    assert raw_items(Upload) == before
    assert simulator.throttles_by_reason == {reason: 2}  # botocore retried once
    throttle = classify(raised.value)
    assert (throttle.code, [(r.reason, r.resource) for r in throttle.reasons]) == (
        PTEE, [(reason, _resource(reason))]
    )


@pytest.mark.parametrize("reason", [r for r in WRITE_REASONS if "KeyRange" not in r], ids=str)
def test_capacity_write_reason_raises_capacity_throttle_error(upload: None, reason: str) -> None:
    with simulate_partition_limits(Upload, **{**LIMITED, **LIMITS[reason]}) as simulator:
        if reason.startswith("Table"):
            Upload("/other", 0).delete()  # takes the table's only unit (an absent item costs one)
        else:
            Upload("/first", 1, day="a").save()  # takes the index's only unit
        before = raw_items(Upload)
        with pytest.raises(CapacityThrottleError) as raised:
            Upload("/key", 1, day="b").save()
    message = str(raised.value)
    assert reason in message
    assert FIXES[next(limit for limit in FIXES if reason.endswith(limit))] in message
    assert "more shards cannot help" in message
    assert Upload.shards.shard_count("/key") == 1
    assert raw_items(Upload) == before
    assert simulator.throttles_by_reason == {reason: 2}  # botocore retried once, then it raised
    throttle = classify(raised.value)
    assert (throttle.code, [(r.reason, r.resource) for r in throttle.reasons]) == (
        _code(reason), [(reason, _resource(reason))]
    )


@pytest.mark.parametrize("reason", READ_REASONS, ids=str)
def test_read_reason_raises_query_error_and_grows_no_write_shards(upload: None, reason: str) -> None:
    Upload("/read", 1, day="d").save()  # before the limits; caches the key's count
    query = Upload.by_day.query if reason.startswith("Index") else Upload.query
    value = "d" if reason.startswith("Index") else "/read"
    with simulate_partition_limits(Upload, **{**LIMITED, **LIMITS[reason]}) as simulator:
        assert [item.at for item in query(value)] == [1]  # an eventually consistent read: half a unit
        with pytest.raises(QueryError) as raised:
            list(query(value))
    assert Upload.shards.shard_count("/read") == 1
    assert simulator.throttles_by_reason == {reason: 2}  # botocore retried once
    throttle = classify(raised.value)
    assert (throttle.code, [(r.reason, r.resource) for r in throttle.reasons]) == (
        _code(reason), [(reason, _resource(reason))]
    )


@pytest.mark.parametrize(
    ("code", "grows"),
    [(PTEE, True), (THROTTLING, False), (REQUEST_LIMIT, False)],
    ids=str,
)
def test_a_throttle_without_reasons_falls_back_on_its_code(upload: None, code: str, grows: bool) -> None:
    puts = Faults(Upload, "PutItem")
    if grows:  # a ProvisionedThroughputExceededException alone meant a hot partition
        puts.plan = [f"no-reasons:{code}"]
        Upload("/bare", 1, day="d").save()
        assert Upload.shards.shard_count("/bare") == 2
        assert [raw["at"]["N"] for raw in raw_items(Upload)] == ["1"]
        return
    puts.plan = [f"no-reasons:{code}"] * 2  # the attempt and botocore's one retry
    with pytest.raises(CapacityThrottleError) as raised:
        Upload("/bare", 1, day="d").save()
    assert f"{code} names no reason" in str(raised.value)
    assert Upload.shards.shard_count("/bare") == 1
    assert raw_items(Upload) == []
