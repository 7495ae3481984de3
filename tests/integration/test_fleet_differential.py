"""The fleet simulator's in-memory DynamoDB answers as DynamoDB Local does.

Proves, by sending the same request sequences to both (:mod:`tests.differential`) and comparing
the parsed responses (items, counts, keys to resume from, consumed capacity, errors and
cancellation reasons by code):

- every kind of request the library sends (``GetItem``, ``PutItem``, ``UpdateItem``,
  ``DeleteItem``, ``Query`` of a table, of a global index and of a read replica, ``Scan``,
  ``BatchGetItem``, ``BatchWriteItem``, ``TransactWriteItems``, ``TransactGetItems``,
  ``DescribeTable``) in the shapes it sends them: conditions, ``ADD`` to numbers and sets,
  ``ReturnValues``, limits, resumption, filters, projections, consumed capacity with indexes;
- the difference found by issue 40: an ``UpdateItem`` whose condition fails and whose ``SET``
  reads a missing attribute is a ``ConditionalCheckFailedException`` (the simulator used to
  answer ``ValidationException``, which dropped a rate report);
- write units from item size (a 3 KB item costs 3), twice the units in a transaction, an index
  write per changed index entry and two when the index key changes;
- the requests a small fleet of processes running the library's real code sent to the
  simulator (growths, rate reports, hot-key hints, merged queries over read replicas, point
  reads), replayed in order against DynamoDB Local, get the responses the simulator gave.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pynamodb_sharding.testing import DynamoDBLocal
from tests.differential import Differential, IndexSpec, TableSpec

META = TableSpec("meta", ("partition_key", "S"), ("model", "S"))
DATA = TableSpec("data", ("key", "S"), ("at", "S"), indexes=(
    IndexSpec("read-replica-1", ("key", "S"), ("at", "S")),
    IndexSpec("by_day", ("day", "S"), ("n", "N"), projection="INCLUDE", included=("user",)),
))


@pytest.fixture
def both(dynamodb_local: DynamoDBLocal) -> Iterator[Differential]:
    differential = Differential(dynamodb_local, [META, DATA])
    yield differential
    differential.close()


def same(both: Differential, operation: str, body: dict[str, Any], **options: Any) -> dict[str, Any]:
    simulated, local = both.send(operation, body, **options)
    assert simulated == local, f"{operation} {json.dumps(body)[:400]}"
    return simulated


def meta_key(key: str = "hot") -> dict[str, Any]:
    return {"partition_key": {"S": key}, "model": {"S": "data"}}


def test_the_metadata_requests_of_growth_and_rate_reports(both: Differential) -> None:
    key = meta_key()
    assert same(both, "GetItem", {"TableName": "meta", "Key": key, "ConsistentRead": True}) == {}
    create = {"TableName": "meta", "Item": {**key, "number_of_shards": {"N": "1"},
                                            "last_updated": {"N": "1767225600.25"},
                                            "shard_history": {"SS": ["1767225600.25:1"]}},
              "ConditionExpression": "attribute_not_exists (#0)", "ExpressionAttributeNames": {"#0": "partition_key"},
              "ReturnConsumedCapacity": "TOTAL"}
    assert same(both, "PutItem", create)["ConsumedCapacity"]["CapacityUnits"] == 1.0
    assert same(both, "PutItem", create) == {"error": "ConditionalCheckFailedException"}
    grow = {"TableName": "meta", "Key": key, "ReturnValues": "ALL_NEW", "ReturnConsumedCapacity": "TOTAL",
            "UpdateExpression": "SET #0 = :0, #1 = :1 ADD #2 :2",
            "ConditionExpression": "#1 = :3",
            "ExpressionAttributeNames": {"#0": "number_of_shards", "#1": "last_updated", "#2": "shard_history"},
            "ExpressionAttributeValues": {":0": {"N": "2"}, ":1": {"N": "1767225601.5"},
                                          ":2": {"SS": ["1767225601.5:2"]}, ":3": {"N": "1767225600.25"}}}
    grown = same(both, "UpdateItem", grow)
    assert grown["Attributes"]["number_of_shards"] == {"N": "2"}
    assert same(both, "UpdateItem", grow) == {"error": "ConditionalCheckFailedException"}
    exists = "attribute_exists (#0) AND attribute_exists (#1)"
    names = {"#0": "partition_key", "#1": "number_of_shards", "#2": "rate_units", "#3": "rate_window"}
    add = {"TableName": "meta", "Key": key, "ReturnValues": "ALL_NEW", "UpdateExpression": "ADD #2 :0",
           "ConditionExpression": f"{exists} AND #3 = :1", "ExpressionAttributeNames": names,
           "ExpressionAttributeValues": {":0": {"N": "35"}, ":1": {"N": "1767225600"}}}
    names = {**names, "#4": "rate_previous_units"}
    shift = {"TableName": "meta", "Key": key, "ReturnValues": "ALL_NEW",
             "UpdateExpression": "SET #4 = #2, #2 = :0, #3 = :1",
             "ConditionExpression": f"{exists} AND #3 = :2", "ExpressionAttributeNames": names,
             "ExpressionAttributeValues": {":0": {"N": "35"}, ":1": {"N": "1767225600"}, ":2": {"N": "1767225595"}}}
    reset = {"TableName": "meta", "Key": key, "ReturnValues": "ALL_NEW",
             "UpdateExpression": "SET #4 = :0, #2 = :1, #3 = :2",
             "ConditionExpression": f"{exists} AND (attribute_not_exists (#3) OR #3 < :3)",
             "ExpressionAttributeNames": names,
             "ExpressionAttributeValues": {":0": {"N": "0"}, ":1": {"N": "35"}, ":2": {"N": "1767225600"},
                                           ":3": {"N": "1767225595"}}}
    assert same(both, "UpdateItem", add) == {"error": "ConditionalCheckFailedException"}
    unused = {**add, "ExpressionAttributeNames": names}
    assert same(both, "UpdateItem", unused) == {"error": "ValidationException"}
    # Issue 40's difference: the condition fails, and the SET reads rate_units, which is missing.
    assert same(both, "UpdateItem", shift) == {"error": "ConditionalCheckFailedException"}
    assert same(both, "UpdateItem", reset)["Attributes"]["rate_units"] == {"N": "35"}
    assert same(both, "UpdateItem", add)["Attributes"]["rate_units"] == {"N": "70"}
    half = {**add, "ExpressionAttributeValues": {":0": {"N": "0.50"}, ":1": {"N": "1767225600"}}}
    # Exact decimal arithmetic keeps the larger scale of its operands (DynamoDB Local's answer).
    assert same(both, "UpdateItem", half)["Attributes"]["rate_units"] == {"N": "70.50"}
    # Without a condition, a SET that reads a missing attribute is invalid.
    missing = {"TableName": "meta", "Key": key, "UpdateExpression": "SET #0 = #1",
               "ExpressionAttributeNames": {"#0": "copy", "#1": "nothing"}}
    assert same(both, "UpdateItem", missing) == {"error": "ValidationException"}
    swap = {"TableName": "meta", "Key": key, "UpdateExpression": "SET #0 = #1, #1 = #0", "ReturnValues": "UPDATED_NEW",
            "ExpressionAttributeNames": {"#0": "rate_units", "#1": "rate_window"}}
    assert same(both, "UpdateItem", swap)["Attributes"] == {"rate_units": {"N": "1767225600"},
                                                           "rate_window": {"N": "70.50"}}
    key_change = {"TableName": "meta", "Key": key, "UpdateExpression": "SET #0 = :0",
                  "ExpressionAttributeNames": {"#0": "model"}, "ExpressionAttributeValues": {":0": {"S": "x"}}}
    assert same(both, "UpdateItem", key_change) == {"error": "ValidationException"}
    same(both, "GetItem", {"TableName": "meta", "Key": key, "ConsistentRead": True, "ReturnConsumedCapacity": "TOTAL"})
    same(both, "GetItem", {"TableName": "meta", "Key": key, "ProjectionExpression": "#0, #1",
                           "ExpressionAttributeNames": {"#0": "number_of_shards", "#1": "shard_history"}})
    assert same(both, "DeleteItem", {"TableName": "meta", "Key": key, "ReturnValues": "ALL_OLD",
                                     "ReturnConsumedCapacity": "TOTAL"})["ConsumedCapacity"]["CapacityUnits"] == 1.0
    same(both, "DescribeTable", {"TableName": "meta"})


def test_transactions_cost_twice_and_cancel_with_their_reasons(both: Differential) -> None:
    home = {"partition_key": {"S": "#home"}, "model": {"S": "#home"}}
    insert = {"TransactItems": [
        {"ConditionCheck": {"TableName": "meta", "Key": home,
                            "ConditionExpression":
                                "(#0 = :0 OR attribute_not_exists (#0)) AND attribute_not_exists (#1)",
                            "ExpressionAttributeNames": {"#0": "home", "#1": "moving_to"},
                            "ExpressionAttributeValues": {":0": {"S": "us-east-1"}}}},
        {"Put": {"TableName": "meta", "Item": {**meta_key(), "number_of_shards": {"N": "2"}, "pad": {"S": "x" * 1500}},
                 "ConditionExpression": "attribute_not_exists (#0)",
                 "ExpressionAttributeNames": {"#0": "partition_key"}}},
    ], "ReturnConsumedCapacity": "TOTAL"}
    # Two items of different units (DynamoDB Local reports transactions right only then): 2 x (1 + 2).
    assert same(both, "TransactWriteItems", insert, transaction_capacity=True)["ConsumedCapacity"] == [
        {"TableName": "meta", "CapacityUnits": 6.0}]
    assert same(both, "TransactWriteItems", insert) == {
        "error": "TransactionCanceledException", "reasons": ["None", "ConditionalCheckFailed"]}
    publish = {"TransactItems": [
        {"Update": {"TableName": "meta",
                    "Key": {"partition_key": {"S": f"#hot-keys#{n}"}, "model": {"S": "data#hot-keys"}},
                    "UpdateExpression": "ADD #0 :0", "ExpressionAttributeNames": {"#0": "hot_keys"},
                    "ExpressionAttributeValues": {":0": {"SS": ["1767229200:1767225601.5:=2@1767225601.5:hot"]}}}}
        for n in range(3)
    ] + [{"ConditionCheck": {"TableName": "meta", "Key": meta_key(), "ConditionExpression": "#0 = :0",
                             "ExpressionAttributeNames": {"#0": "number_of_shards"},
                             "ExpressionAttributeValues": {":0": {"N": "2"}}}}]}
    assert same(both, "TransactWriteItems", publish) == {}
    gets = {"TransactItems": [{"Get": {"TableName": "meta", "Key": {"partition_key": {"S": f"#hot-keys#{n}"},
                                                                    "model": {"S": "data#hot-keys"}}}}
                              for n in range(3)] + [{"Get": {"TableName": "meta", "Key": meta_key("absent")}}]}
    same(both, "TransactGetItems", gets)
    check = {"TableName": "meta", "Key": meta_key(), "ConditionExpression": "attribute_exists (#0)",
             "ExpressionAttributeNames": {"#0": "model"}}
    twice = {"TransactItems": [{"ConditionCheck": check},
                               {"Delete": {"TableName": "meta", "Key": meta_key()}}]}
    assert same(both, "TransactWriteItems", twice) == {"error": "ValidationException"}


def item(at: str, *, day: str = "20260101", n: int = 0, size: int = 10, **extra: Any) -> dict[str, Any]:
    return {"key": {"S": "hot_1"}, "at": {"S": at}, "day": {"S": day}, "n": {"N": str(n)},
            "user": {"S": "u"}, "pad": {"S": "x" * size}, **extra}


def test_data_requests_queries_and_index_writes(both: Differential) -> None:
    put = {"TableName": "data", "Item": item("t01", size=3000), "ReturnConsumedCapacity": "INDEXES"}
    assert same(both, "PutItem", put)["ConsumedCapacity"]["Table"] == {"CapacityUnits": 3.0}
    for number in range(2, 13):
        same(both, "PutItem", {"TableName": "data", "Item": item(f"t{number:02d}", n=number, size=number * 100,
                                                                 score={"N": f"{number}.50"}),
                               "ReturnConsumedCapacity": "INDEXES"})
    moved = {"TableName": "data", "Key": {"key": {"S": "hot_1"}, "at": {"S": "t02"}},
             "ReturnConsumedCapacity": "INDEXES",
             "UpdateExpression": "SET #0 = :0", "ExpressionAttributeNames": {"#0": "day"},
             "ExpressionAttributeValues": {":0": {"S": "20260102"}}, "ReturnValues": "ALL_OLD"}
    same(both, "UpdateItem", moved)  # the index key changes: two index writes
    unprojected = {**moved, "ExpressionAttributeNames": {"#0": "pad"}, "ExpressionAttributeValues": {":0": {"S": "y"}}}
    same(both, "UpdateItem", unprojected)  # by_day does not project pad: no index write there
    query = {"TableName": "data", "KeyConditionExpression": "#0 = :0 AND #1 >= :1",
             "ExpressionAttributeNames": {"#0": "key", "#1": "at"},
             "ExpressionAttributeValues": {":0": {"S": "hot_1"}, ":1": {"S": "t03"}}, "ReturnConsumedCapacity": "TOTAL"}
    page = same(both, "Query", {**query, "Limit": 4})
    assert page["Count"] == 4
    same(both, "Query", {**query, "Limit": 4, "ExclusiveStartKey": page["LastEvaluatedKey"]})
    same(both, "Query", {**query, "ScanIndexForward": False, "ConsistentRead": True})
    same(both, "Query", {**query, "FilterExpression": "#2 > :2", "ExpressionAttributeNames": {
        "#0": "key", "#1": "at", "#2": "n"}, "ExpressionAttributeValues": {
        ":0": {"S": "hot_1"}, ":1": {"S": "t03"}, ":2": {"N": "6"}}, "Limit": 5})
    same(both, "Query", {**query, "Select": "COUNT"})
    same(both, "Query", {**query, "ProjectionExpression": "#1, #2", "ExpressionAttributeNames": {
        "#0": "key", "#1": "at", "#2": "score"}})
    replica = {**query, "IndexName": "read-replica-1", "ReturnConsumedCapacity": "INDEXES"}
    first = same(both, "Query", {**replica, "Limit": 3})
    same(both, "Query", {**replica, "Limit": 3, "ExclusiveStartKey": first["LastEvaluatedKey"]})
    assert same(both, "Query", {**replica, "ConsistentRead": True}) == {"error": "ValidationException"}
    by_day = {"TableName": "data", "IndexName": "by_day", "KeyConditionExpression": "#0 = :0 AND #1 BETWEEN :1 AND :2",
              "ExpressionAttributeNames": {"#0": "day", "#1": "n"},
              "ExpressionAttributeValues": {":0": {"S": "20260101"}, ":1": {"N": "3"}, ":2": {"N": "9"}}}
    same(both, "Query", {**by_day, "ReturnConsumedCapacity": "TOTAL"})
    same(both, "Query", {**by_day, "Select": "COUNT"})
    same(both, "Query", {**query, "IndexName": "nowhere"})
    same(both, "Scan", {"TableName": "data", "FilterExpression": "#0 < :0", "ExpressionAttributeNames": {"#0": "n"},
                        "ExpressionAttributeValues": {":0": {"N": "7"}}})
    same(both, "Scan", {"TableName": "data", "IndexName": "by_day"})
    keys = [{"key": {"S": "hot_1"}, "at": {"S": f"t{number:02d}"}} for number in (1, 5, 99)]
    same(both, "BatchGetItem", {"RequestItems": {"data": {"Keys": keys, "ProjectionExpression": "#0, #1",
                                                                "ExpressionAttributeNames": {"#0": "at", "#1": "n"}}},
                                      "ReturnConsumedCapacity": "TOTAL"})
    writes = {"RequestItems": {"data": [{"PutRequest": {"Item": item("t20", n=1)}},
                                        {"DeleteRequest": {"Key": {"key": {"S": "hot_1"}, "at": {"S": "t03"}}}}]}}
    assert same(both, "BatchWriteItem", writes) == {"UnprocessedItems": {}}
    same(both, "Query", query)
    same(both, "GetItem", {"TableName": "data", "Key": {"key": {"S": "hot_1"}, "at": {"S": "t05"}, "n": {"N": "1"}}})
    same(both, "DescribeTable", {"TableName": "data"})


# -- what the library really sends -----------------------------------------------------------


def test_a_fleets_requests_replayed_on_dynamodb_local_get_the_simulators_answers(dynamodb_local: DynamoDBLocal) -> None:
    """Four writer processes (proactive growth, sampled rate reports, hot-key hints) and a reader
    (merged queries over a read replica, get, count, batch_get) run the library's real code in
    the fleet simulator; every request they sent is then sent, in order, to a fresh simulator and
    to DynamoDB Local, and each pair of responses must be the same."""
    from pynamodb.attributes import NumberAttribute, UnicodeAttribute

    from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
    from pynamodb_sharding.testing import Fleet

    fleet = Fleet(write_units=1e9, read_units=1e9, record=True)  # nothing throttles: DynamoDB Local never does

    class ReplayShards(ShardMetadata):
        Meta = Fleet.meta("replay_shards")

    class ReplayBase(ShardedModel):
        key = UnicodeAttribute(hash_key=True)
        at = UnicodeAttribute(range_key=True)
        n = NumberAttribute(null=True)

    def process(index: int) -> Any:
        strategy = DynamicShards(ReplayShards, max_shards=8, cooldown=2.0, cache_ttl=2.0, rate_interval=1.0,
                                 partition_write_units=20.0, target_utilization=0.7, hot_key_hints=2,
                                 rate_reports=4, **fleet.strategy_clock())
        return fleet.bind(type(f"ReplayProcess{index}", (ReplayBase,), {
            "Meta": Fleet.meta("replay_items"), "shards": Sharding(strategy, read_replicas=1)}))

    writers, reader = [process(n) for n in range(4)], process(9)
    seen: list[int] = []

    def write(model: Any, index: int) -> Any:
        def run() -> None:
            for n in range(60):  # 4 x 10 writes/s: twice the 20 units/s of a shard at 0.7
                model("hot", f"{index}-{n:03d}", n=n).save()
                fleet.loop.sleep(0.1)
        return run

    def read() -> None:
        for second in range(6):
            fleet.loop.sleep(1.0)
            seen.append(len(list(reader.query("hot", limit=25, page_size=10))))
            reader.count("hot")
            found = reader.get("hot", f"0-{second:03d}")
            found.update(actions=[ReplayBase.n.set(100 + second)])
            list(reader.batch_get([("hot", f"1-{second:03d}"), ("hot", "absent")]))
        reader.get("hot", "2-000").delete()

    for index, model in enumerate(writers):
        fleet.loop.spawn(write(model, index), at=index * 0.01)
    fleet.loop.spawn(read)
    with fleet.running():
        fleet.loop.run(until=10.0)
    assert writers[0].shards.refresh("hot") >= 2  # grown: growth, reports and hints were sent
    assert seen[-1] == 25

    journal = fleet.db.journal
    assert journal is not None
    operations = {operation for operation, *_ in journal}
    assert {"GetItem", "PutItem", "UpdateItem", "Query", "TransactWriteItems", "BatchGetItem",
            "DeleteItem"} <= operations
    specs = [
        TableSpec("replay_shards", ("partition_key", "S"), ("model", "S")),
        TableSpec("replay_items", ("key", "S"), ("at", "S"),
                  indexes=(IndexSpec("read-replica-1", ("key", "S"), ("at", "S")),)),
    ]
    replay = Differential(dynamodb_local, specs)
    try:
        for operation, body, _status, _answer in journal:
            simulated, local = replay.send(operation, body)
            assert simulated == local, f"{operation} {json.dumps(body)[:600]}"
    finally:
        replay.close()
    assert len(journal) > 200
