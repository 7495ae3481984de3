"""A ShardedModel declared over a table sharded by hand, the two ways AWS's guidance shows.

Proves, for tables written with raw boto3 exactly as the hand-written code writes them:

- the aws-dynamodb-examples sample (``f"{date}.{int(item_id) % N}"``, shards 0..N-1, ``.``):
  merged reads return every item in order, a point read costs one GetItem (counted as botocore
  sends it), and the model's writes land where the hand-written reader looks;
- the developer guide (``2014-07-09.1`` .. ``2014-07-09.200``, random, shards 1..N): merged
  reads return every item in order, and every write lands on one of the 200 keys the
  hand-written reader queries.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardLocationError,
    ShardMetadata,
    shard_manager,
)
from tests.raw import put_raw, raw_client, raw_items

SAMPLE_SHARDS = 4
GUIDE_SHARDS = 200


class SampleEvent(ShardedModel):
    """The aws-dynamodb-examples write-sharding sample: ``f"{date}.{int(item_id) % N}"``."""

    class Meta:
        table_name = "sample_events"

    date = UnicodeAttribute(hash_key=True)
    item_id = NumberAttribute(range_key=True)
    payload = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(SAMPLE_SHARDS, attributes=("item_id",), hash=int), separator=".",
                      first_shard=0)


class GuideOrder(ShardedModel):
    """The developer guide's layout: ``2014-07-09.1`` .. ``2014-07-09.200``, a random suffix."""

    class Meta:
        table_name = "guide_orders"

    date = UnicodeAttribute(hash_key=True)
    order_id = UnicodeAttribute(range_key=True)
    shards = Sharding(RandomShards(GUIDE_SHARDS), separator=".", max_workers=10)


class Requests:
    """Counts API calls per operation as botocore sends them (``before-call``: once per call)."""

    def __init__(self, model: type[Any]) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()
        model._get_connection().connection.client.meta.events.register("before-call.dynamodb", self)

    def __call__(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.counts[model.name] = self.counts.get(model.name, 0) + 1

    def total(self) -> int:
        return sum(self.counts.values())


def sample_reader(model: type[Any], date: str, item_id: int) -> dict[str, Any] | None:
    """The sample's hand-written point read: one GetItem of ``date.(item_id % N)``."""
    reply = raw_client(model).get_item(
        TableName=model.Meta.table_name, ConsistentRead=True,
        Key={"date": {"S": f"{date}.{item_id % SAMPLE_SHARDS}"}, "item_id": {"N": str(item_id)}},
    )
    item: dict[str, Any] | None = reply.get("Item")
    return item


def guide_reader(model: type[Any], date: str) -> list[dict[str, Any]]:
    """The guide's hand-written read: query ``date.1`` .. ``date.200`` and merge."""
    client = raw_client(model)
    found: list[dict[str, Any]] = []
    for shard in range(1, GUIDE_SHARDS + 1):
        paginator = client.get_paginator("query")
        for page in paginator.paginate(
            TableName=model.Meta.table_name, ConsistentRead=True,
            KeyConditionExpression="#d = :d", ExpressionAttributeNames={"#d": "date"},
            ExpressionAttributeValues={":d": {"S": f"{date}.{shard}"}},
        ):
            found.extend(page["Items"])
    return found


class TestSampleLayout:
    """The 0-based, calculated layout of the aws-dynamodb-examples sample."""

    @pytest.fixture
    def table(self, dynamodb_models: Callable[..., Any]) -> list[int]:
        dynamodb_models(SampleEvent)
        ids = list(range(100, 140))
        put_raw(SampleEvent, [
            {"date": {"S": f"2024-01-15.{item_id % SAMPLE_SHARDS}"}, "item_id": {"N": str(item_id)},
             "payload": {"S": f"p{item_id}"}}
            for item_id in ids
        ] + [{"date": {"S": "2024-01-16.1"}, "item_id": {"N": "5"}}])
        return ids

    def test_reads_every_item_merged_in_order(self, table: list[int]) -> None:
        assert table == [item.item_id for item in SampleEvent.query("2024-01-15", consistent_read=True)]
        assert table[::-1] == [item.item_id for item in
                               SampleEvent.query("2024-01-15", scan_index_forward=False, consistent_read=True)]
        assert len(table) == SampleEvent.count("2024-01-15", consistent_read=True)
        items = list(SampleEvent.query("2024-01-15", consistent_read=True))
        assert {"2024-01-15"} == {item.date for item in items}
        assert [item_id % SAMPLE_SHARDS for item_id in table] == [item.shards for item in items]
        assert (0, 1, 2, 3) == shard_manager(SampleEvent).read_shards("2024-01-15")

    def test_scan_decodes_shard_zero(self, table: list[int]) -> None:
        scanned = sorted((item.date, item.item_id, item.shards) for item in SampleEvent.scan())
        expected = sorted([("2024-01-15", i, i % SAMPLE_SHARDS) for i in table] + [("2024-01-16", 5, 1)])
        assert expected == scanned

    def test_point_read_costs_one_request(self, table: list[int]) -> None:
        requests = Requests(SampleEvent)
        item = SampleEvent.get("2024-01-15", 104, consistent_read=True)
        assert ("2024-01-15", 104, "p104", 0) == (item.date, item.item_id, item.payload, item.shards)
        assert {"GetItem": 1} == requests.counts

    def test_writes_land_where_the_hand_written_reader_looks(self, table: list[int]) -> None:
        SampleEvent("2024-01-15", 7, payload="new").save()
        SampleEvent("2024-01-15", 104, payload="overwritten").save()
        new = sample_reader(SampleEvent, "2024-01-15", 7)
        assert new is not None
        assert {"S": "2024-01-15.3"} == new["date"]
        overwritten = sample_reader(SampleEvent, "2024-01-15", 104)
        assert overwritten is not None
        assert {"S": "overwritten"} == overwritten["payload"]
        item = SampleEvent.get("2024-01-15", 105)
        item.update(actions=[SampleEvent.payload.set("updated")])
        updated = sample_reader(SampleEvent, "2024-01-15", 105)
        assert updated is not None
        assert {"S": "updated"} == updated["payload"]
        SampleEvent.get("2024-01-15", 106).delete()
        assert sample_reader(SampleEvent, "2024-01-15", 106) is None
        # the fixture's items and the other date's one, +7, -106
        assert len(table) + 1 == len(raw_items(SampleEvent))

    def test_physical_key_numbers_from_zero(self, table: list[int]) -> None:
        manager = shard_manager(SampleEvent)
        assert "2024-01-15.0" == manager.physical_key("2024-01-15", 0)
        assert ("2024-01-15", 0) == manager.decode("2024-01-15.0")


class TestGuideLayout:
    """The 1-based, random layout of the DynamoDB developer guide (200 suffixes)."""

    @pytest.fixture
    def table(self, dynamodb_models: Callable[..., Any]) -> list[str]:
        dynamodb_models(GuideOrder)
        draw = random.Random(7)
        orders = [f"order-{n:03d}" for n in range(60)]
        put_raw(GuideOrder, [
            {"date": {"S": f"2014-07-09.{draw.randint(1, GUIDE_SHARDS)}"}, "order_id": {"S": order}}
            for order in orders
        ])
        return orders

    def test_reads_every_item_merged_in_order(self, table: list[str]) -> None:
        assert table == [item.order_id for item in GuideOrder.query("2014-07-09", consistent_read=True)]
        assert table[:25] == [item.order_id for item in GuideOrder.query("2014-07-09", limit=25)]
        assert len(table) == GuideOrder.count("2014-07-09", consistent_read=True)
        assert tuple(range(1, GUIDE_SHARDS + 1)) == shard_manager(GuideOrder).read_shards("2014-07-09")

    def test_writes_land_where_the_hand_written_reader_looks(self, table: list[str]) -> None:
        for n in range(20):
            GuideOrder("2014-07-09", f"new-{n:02d}").save()
        found = guide_reader(GuideOrder, "2014-07-09")
        assert sorted([*table, *(f"new-{n:02d}" for n in range(20))]) == sorted(
            item["order_id"]["S"] for item in found
        )
        assert len(found) == len(raw_items(GuideOrder))  # nothing outside the 200 keys


class ZeroShards(ShardMetadata):
    class Meta:
        table_name = "zero_shards"


class ZeroDynamic(ShardedModel):
    """A dynamic count over keys numbered from 0."""

    class Meta:
        table_name = "zero_dynamic"

    date = UnicodeAttribute(hash_key=True)
    item_id = NumberAttribute(range_key=True)
    # Growths written to at once (the fleet protocol of fresh reads, stored with the table).
    shards = Sharding(DynamicShards(ZeroShards, initial=3, fresh_reads=True), separator=".", first_shard=0)


def test_dynamic_shards_number_from_zero(dynamodb_models: Callable[..., Any]) -> None:
    """Writes land in 0..count-1 before and after growth; reads cover every one of them."""
    dynamodb_models(ZeroDynamic)
    for item_id in range(30):
        ZeroDynamic("2024-01-15", item_id).save()
    assert (0, 1, 2) == ZeroDynamic.shards.read_shards("2024-01-15")
    new_count = ZeroDynamic.shards.grow("2024-01-15")
    for item_id in range(30, 90):
        ZeroDynamic("2024-01-15", item_id).save()
    stored = {raw["date"]["S"] for raw in raw_items(ZeroDynamic)}
    assert stored <= {f"2024-01-15.{shard}" for shard in range(new_count)}
    assert "2024-01-15.0" in stored
    assert f"2024-01-15.{new_count - 1}" in stored
    assert tuple(range(new_count)) == ZeroDynamic.shards.read_shards("2024-01-15")
    assert list(range(90)) == [item.item_id for item in ZeroDynamic.query("2024-01-15", consistent_read=True)]


class TextIdEvent(ShardedModel):
    """The sample's ``int(item_id) % N`` over ids stored as text, some of them not digits."""

    class Meta:
        table_name = "text_id_events"

    date = UnicodeAttribute(hash_key=True)
    item_id = UnicodeAttribute(range_key=True)
    shards = Sharding(HashedShards(SAMPLE_SHARDS, attributes=("item_id",), hash=int), separator=".", first_shard=0)


class TestHashFunctionThatRaises:
    """``hash=int`` over a value it cannot convert: a ShardLocationError naming the model, the
    attribute, the value and the fix (not a bare ``ValueError``), and nothing written."""

    def test_save_names_the_attribute_and_the_value(self, dynamodb_models: Callable[..., Any]) -> None:
        dynamodb_models(TextIdEvent)
        TextIdEvent("2024-01-15", "17").save()
        with pytest.raises(ShardLocationError) as raised:
            TextIdEvent("2024-01-15", "order-17").save()
        message = str(raised.value)
        assert message.startswith("TextIdEvent.date: HashedShards(hash=int) raised ValueError for the "
                                  "attribute 'item_id' of this TextIdEvent ('order-17'): invalid literal for int()")
        assert "Store a value int accepts there, or declare a hash function that accepts every value " \
               "'item_id' can hold. Nothing was sent." in message
        assert isinstance(raised.value.__cause__, ValueError)
        assert [(raw["date"]["S"], raw["item_id"]["S"]) for raw in raw_items(TextIdEvent)] == [("2024-01-15.1", "17")]

    def test_batch_write_sends_nothing(self, dynamodb_models: Callable[..., Any]) -> None:
        """The batch's items are keyed when it commits: the refused one stops the whole request."""
        dynamodb_models(TextIdEvent)
        with (pytest.raises(ShardLocationError, match=r"'item_id' of this TextIdEvent \('x9'\)"),
              TextIdEvent.batch_write() as batch):
            batch.save(TextIdEvent("2024-01-15", "9"))
            batch.save(TextIdEvent("2024-01-15", "x9"))
        assert raw_items(TextIdEvent) == []
