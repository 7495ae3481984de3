"""Merged queries of secondary indexes (DynamoDB Local).

A local secondary index shares the sharded hash key: it fans out over the shards and merges by
the index's range key, and its cursor carries the index keys. A global secondary index keyed by
another attribute is not sharded: one plain query, items still decoded to logical keys. A
strongly consistent read of a global index is refused before anything is sent.
"""

from __future__ import annotations

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex, LocalSecondaryIndex

from pynamodb_sharding import (
    ConsistentIndexReadError,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingError,
    UnknownIndexError,
)
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.paging import pages


class ByTime(LocalSecondaryIndex["Order"]):
    class Meta:
        index_name = "by_time"
        projection = AllProjection()

    customer = UnicodeAttribute(hash_key=True)
    placed_at = NumberAttribute(range_key=True)


class ByStatus(GlobalSecondaryIndex["Order"]):
    class Meta:
        index_name = "by_status"
        projection = AllProjection()

    status = UnicodeAttribute(hash_key=True)
    placed_at = NumberAttribute(range_key=True)


class Order(ShardedModel):
    class Meta:
        table_name = "fanout_order"

    customer = UnicodeAttribute(hash_key=True)
    order_id = NumberAttribute(range_key=True)
    placed_at = NumberAttribute()
    status = UnicodeAttribute()
    by_time = ByTime()
    by_status = ByStatus()
    shards = Sharding(RandomShards(4))


@pytest.fixture
def orders(dynamodb_models: BindModels) -> list[Order]:
    dynamodb_models(Order)
    made = []
    for order_id in range(40):
        # placed_at runs against order_id, and repeats across orders (ties between shards).
        order = Order("alice", order_id, placed_at=(100 - order_id) // 2,
                      status="shipped" if order_id % 3 else "open")
        order.save()
        made.append(order)
    Order("bob", 1, placed_at=7, status="shipped").save()
    return made


@pytest.mark.parametrize("forward", [True, False])
def test_local_index_merges_by_its_range_key(orders: list[Order], forward: bool) -> None:
    got = pages(lambda **kw: Order.query("alice", index_name="by_time", scan_index_forward=forward, **kw), limit=6)
    assert [(o.customer, o.order_id) for o in got if o.customer != "alice"] == []
    assert sorted(o.order_id for o in got) == list(range(40))
    placed = [o.placed_at for o in got]
    assert placed == sorted(placed, reverse=not forward)
    # Ties on placed_at across shards come out by shard, as the direction says (two items of
    # one shard with equal placed_at form equal pairs, whose order does not show here).
    keyed = [(o.placed_at, o.shards) for o in got]
    assert keyed == sorted(keyed, reverse=not forward)


def test_local_index_cursor_carries_the_index_keys(orders: list[Order]) -> None:
    page = Order.query("alice", index_name="by_time", limit=3)
    list(page)
    cursor = page.last_evaluated_key
    assert cursor is not None
    for position in cursor["positions"]:
        assert set(position["start_key"]) == {"customer", "order_id", "placed_at"}
    with pytest.raises(ShardingError, match="index"):
        Order.query("alice", last_evaluated_key=cursor)  # a table query refuses an index cursor


def test_local_index_with_range_condition_and_count(orders: list[Order]) -> None:
    expected = sorted(o.order_id for o in orders if 30 <= o.placed_at <= 40)
    got = pages(lambda **kw: Order.query("alice", Order.placed_at.between(30, 40), index_name="by_time", **kw),
                limit=4)
    assert sorted(o.order_id for o in got) == expected
    assert Order.count("alice", Order.placed_at.between(30, 40), index_name="by_time") == len(expected)


def test_global_index_is_one_plain_query_with_logical_keys(orders: list[Order]) -> None:
    got = pages(lambda **kw: Order.query("shipped", index_name="by_status", **kw), limit=5)
    expected = {("alice", o.order_id) for o in orders if o.status == "shipped"} | {("bob", 1)}
    assert {(o.customer, o.order_id) for o in got} == expected
    assert len(got) == len(expected)
    assert all(o.shards in (1, 2, 3, 4) for o in got)
    assert [o.placed_at for o in got] == sorted(o.placed_at for o in got)
    assert Order.count("shipped", index_name="by_status") == len(expected)


def test_consistent_read_of_a_global_index_is_refused_before_sending(orders: list[Order]) -> None:
    with record_requests(Order) as sent:
        with pytest.raises(ConsistentIndexReadError, match=r"Order\.ByStatus\('by_status'\).*consistent"):
            Order.query("shipped", index_name="by_status", consistent_read=True)
        with pytest.raises(ConsistentIndexReadError, match="consistent"):
            Order.count("shipped", index_name="by_status", consistent_read=True)
    assert sent.requests == {}


def test_unknown_index_is_named(orders: list[Order]) -> None:
    with pytest.raises(UnknownIndexError, match="no index 'by_nothing'"):
        Order.query("alice", index_name="by_nothing")
