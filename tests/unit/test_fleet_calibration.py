"""The fleet simulator's in-memory DynamoDB against what DynamoDB documents (the table of
modelled behaviour in docs/scale.rst, row by row).

Proves:
- a partition key takes at most 1,000 write units and 3,000 read units a second, sustained,
  after one second of burst; two hot keys are each held to that alone (adaptive capacity
  isolates hot items on partitions of their own: the simulator gives every key one);
- a provisioned table keeps up to 300 seconds of unused capacity for bursts, and no more;
- units from item size: a write is one unit per started KB of the larger of the old and new
  item, a read one per started 4 KB (half when eventually consistent), a Query's items summed
  before rounding, a batch read's rounded item by item; a write refused by its condition
  still costs the existing item's units (at least one);
- transactions cost twice the units of each item;
- global secondary index back-pressure: a write whose index partition is out of capacity is
  refused (``IndexWriteKeyRangeThroughputExceeded``, naming the index) although the table's
  own partition has room; a write that changes the index key costs two index writes.
"""

from __future__ import annotations

from typing import Any

import pytest

from pynamodb_sharding.testing.fleet import FleetDynamoDB, _Index, _ServiceError, _Table
from tests.clock import Clock


def db_with(clock: Clock, **options: Any) -> FleetDynamoDB:
    db = FleetDynamoDB(clock)
    db.tables["log"] = _Table("log", "pk", "sk", **options)
    return db


def put(db: FleetDynamoDB, pk: str, sk: int, size: int = 10, **extra: Any) -> str | None:
    """The throttling reason of a refused put, ``None`` when it was admitted."""
    item = {"pk": {"S": pk}, "sk": {"N": str(sk)}, "pad": {"S": "x" * size}, **extra}
    try:
        db.handle("PutItem", {"TableName": "log", "Item": item})
    except _ServiceError as error:
        return str(error.body["ThrottlingReasons"][0]["reason"])
    return None


def test_a_key_takes_a_thousand_write_units_a_second_and_two_hot_keys_each_take_theirs() -> None:
    clock = Clock(0.0)
    db = db_with(clock)
    admitted = {"a": 0, "b": 0}
    serial = 0
    for tick in range(1, 1001):  # 10 s, 100 ticks a second, each key offered 2,000 puts a second
        clock.now = tick / 100
        for key in admitted:
            for _ in range(20):
                serial += 1
                admitted[key] += put(db, key, serial) is None
    # The one second the bucket starts with (at 0.01 s), then 1,000 a second to 10 s, each key alone.
    assert all(10_980 <= admitted[key] <= 10_990 for key in admitted), admitted


def test_a_key_takes_three_thousand_read_units_a_second() -> None:
    clock = Clock(0.0)
    db = db_with(clock)
    key = {"pk": {"S": "a"}, "sk": {"N": "1"}}
    put(db, "a", 1)
    served = 0
    for tick in range(1, 501):  # 5 s, 5,000 consistent reads a second offered
        clock.now = tick / 100
        for _ in range(50):
            try:
                db.handle("GetItem", {"TableName": "log", "Key": key, "ConsistentRead": True})
            except _ServiceError:
                continue
            served += 1
    assert 3_000 + 4.99 * 3_000 - 10 <= served <= 3_000 + 4.99 * 3_000


def test_a_provisioned_table_bursts_three_hundred_seconds_of_unused_capacity_and_no_more() -> None:
    clock = Clock(0.0)
    db = db_with(clock, provisioned=(100.0, 300.0))  # 100 write units a second
    clock.now = 400.0  # idle for more than 300 s: 30,000 units saved, not 40,000
    admitted = 0
    for serial in range(40_000):  # spread over 100 keys, so no key meets its partition's limit
        clock.now = 400.0 + serial / 40_000  # all within one second
        admitted += put(db, f"k{serial % 100}", serial) is None
    assert 30_000 <= admitted <= 30_100  # the burst, and the second's own 100 units
    assert put(db, "fresh", 1) == "TableWriteProvisionedThroughputExceeded"


@pytest.mark.parametrize(("size", "units"), [(1, 1), (1000, 1), (1030, 2), (3000, 3), (5000, 5)])
def test_a_write_costs_one_unit_per_started_kb(size: int, units: int) -> None:
    db = db_with(Clock(0.0))
    body = {"TableName": "log", "Item": {"pk": {"S": "k"}, "sk": {"N": "1"}, "pad": {"S": "x" * size}},
            "ReturnConsumedCapacity": "TOTAL"}
    assert db.handle("PutItem", body)["ConsumedCapacity"]["CapacityUnits"] == units


def test_reads_cost_one_unit_per_started_4kb_half_when_eventually_consistent() -> None:
    db = db_with(Clock(0.0))
    for sk, size in ((1, 3000), (2, 3000), (3, 9000)):
        put(db, "k", sk, size=size)

    def units(operation: str, **body: Any) -> float:
        answer = db.handle(operation, {"TableName": "log", "ReturnConsumedCapacity": "TOTAL", **body})
        return float(answer["ConsumedCapacity"]["CapacityUnits"])

    key = {"pk": {"S": "k"}, "sk": {"N": "3"}}
    assert units("GetItem", Key=key, ConsistentRead=True) == 3.0
    assert units("GetItem", Key=key) == 1.5
    query = {"KeyConditionExpression": "pk = :k AND sk <= :s", "ExpressionAttributeValues": {":k": {"S": "k"},
                                                                                            ":s": {"N": "2"}}}
    assert units("Query", ConsistentRead=True, **query) == 2.0  # 6 KB summed, then rounded: 2, not 1 + 1
    keys = [{"pk": {"S": "k"}, "sk": {"N": str(sk)}} for sk in (1, 2)]
    batch = db.handle("BatchGetItem", {"RequestItems": {"log": {"Keys": keys, "ConsistentRead": True}},
                                       "ReturnConsumedCapacity": "TOTAL"})
    assert batch["ConsumedCapacity"] == [{"TableName": "log", "CapacityUnits": 2.0}]  # 1 + 1, item by item


def test_a_write_refused_by_its_condition_costs_the_existing_items_units() -> None:
    db = db_with(Clock(0.0))
    put(db, "k", 1, size=2500)  # 3 units
    before = db.units[("log", True)]
    body = {"TableName": "log", "Key": {"pk": {"S": "k"}, "sk": {"N": "1"}}, "UpdateExpression": "SET pad = :p",
            "ConditionExpression": "attribute_not_exists(pk)", "ExpressionAttributeValues": {":p": {"S": "y"}}}
    with pytest.raises(_ServiceError, match="conditional request failed"):
        db.handle("UpdateItem", body)
    assert db.units[("log", True)] - before == 3
    missing = {**body, "Key": {"pk": {"S": "k"}, "sk": {"N": "2"}}, "ConditionExpression": "attribute_exists(pk)"}
    with pytest.raises(_ServiceError, match="conditional request failed"):
        db.handle("UpdateItem", missing)
    assert db.units[("log", True)] - before == 4  # no item: the minimum, one unit


def test_a_transaction_costs_twice_the_units_of_each_item() -> None:
    db = db_with(Clock(0.0))
    items = [{"Put": {"TableName": "log", "Item": {"pk": {"S": "k"}, "sk": {"N": str(n)}, "pad": {"S": "x" * size}}}}
             for n, size in ((1, 10), (2, 1500), (3, 10))]
    answer = db.handle("TransactWriteItems", {"TransactItems": items, "ReturnConsumedCapacity": "TOTAL"})
    assert answer["ConsumedCapacity"] == [{"TableName": "log", "CapacityUnits": 2.0 * (1 + 2 + 1)}]
    assert db.units[("log", True)] == 8.0


def test_a_hot_index_partition_refuses_writes_to_the_table() -> None:
    """Every item has ``day = "today"``: the index's one partition takes 1,000 write units a
    second, while the table's writes spread over many keys with room to spare."""
    clock = Clock(0.0)
    db = db_with(clock, indexes={"by_day": _Index("by_day", "day", "sk")})
    reasons = [put(db, f"user{n}", n, day={"S": "today"}) for n in range(1_500)]
    assert reasons.count(None) == 1_000
    assert set(reasons) == {None, "IndexWriteKeyRangeThroughputExceeded"}
    assert sum(1 for partition in db.tables["log"].partitions.values() if partition) == 1_000  # nothing half-written
    assert len(db.tables["log"].indexes["by_day"].partitions["today"]) == 1_000
    refused = {"pk": {"S": "userX"}, "sk": {"N": "1"}, "day": {"S": "today"}}
    with pytest.raises(_ServiceError) as raised:
        db.handle("PutItem", {"TableName": "log", "Item": refused})
    assert raised.value.body["ThrottlingReasons"][0]["resource"].endswith(":table/log/index/by_day")


def test_changing_an_index_key_costs_two_index_writes() -> None:
    db = db_with(Clock(0.0), indexes={"by_day": _Index("by_day", "day", "sk", projection="KEYS_ONLY")})
    put(db, "k", 1, day={"S": "mon"})
    body = {"TableName": "log", "Key": {"pk": {"S": "k"}, "sk": {"N": "1"}}, "UpdateExpression": "SET #d = :d",
            "ExpressionAttributeNames": {"#d": "day"}, "ReturnConsumedCapacity": "INDEXES"}
    moved = db.handle("UpdateItem", {**body, "ExpressionAttributeValues": {":d": {"S": "tue"}}})
    assert moved["ConsumedCapacity"]["GlobalSecondaryIndexes"] == {"by_day": {"CapacityUnits": 2.0}}
    padded = {**body, "UpdateExpression": "SET pad = :p", "ExpressionAttributeNames": None,
              "ExpressionAttributeValues": {":p": {"S": "y"}}}
    padded.pop("ExpressionAttributeNames")
    assert "GlobalSecondaryIndexes" not in db.handle("UpdateItem", padded)["ConsumedCapacity"]  # not projected
    assert set(db.tables["log"].indexes["by_day"].partitions["tue"]) == {(1, "k", 1)}
    assert not db.tables["log"].indexes["by_day"].partitions["mon"]
