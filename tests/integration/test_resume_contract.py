"""The resume contract, one property over every model shape: a key paged with random limits,
while items move between pages, returns every item that existed throughout exactly once, in
order, through ``query`` and ``aquery``.

The moves are the ones jobs and the application make, item by item, each the same transaction a
job sends: adopted legacy items moved into shards, a ``HashedShards(4)`` -> 8 reshard, a
``DynamicShards`` key grown (and new items written to the new shards), a key shrunk and its
items above the count compacted, an adopted index's entries rewritten into its shards. Items
written while the key is paged may come back, at most once and in order. Each example reads a
key of its own (the tables are the test's); DynamoDB Local is the server.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, HashedShards, RandomShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.legacy import move_legacy_item
from tests.async_loop import Loop
from tests.raw import raw_items

ITEMS = 16


class PlainEvent(Model):
    class Meta:
        table_name = "contract_events"

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class AdoptedEvent(ShardedModel):
    Meta = PlainEvent.Meta

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class Layout4(ShardedModel):
    class Meta:
        table_name = "contract_layouts"

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4))


class Layout8(ShardedModel):
    Meta = Layout4.Meta

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8, previous_counts=(4,)))


class ContractShards(ShardMetadata):
    class Meta:
        table_name = "contract_shards"


class DynamicEvent(ShardedModel):
    class Meta:
        table_name = "contract_dynamic"

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(ContractShards, max_shards=8))


class PlainByState(GlobalSecondaryIndex["PlainOrder"]):
    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    placed_at = NumberAttribute(range_key=True)


class PlainOrder(Model):
    class Meta:
        table_name = "contract_orders"

    order_id = UnicodeAttribute(hash_key=True)
    state = UnicodeAttribute()
    placed_at = NumberAttribute()
    by_state = PlainByState()


class ByState(GlobalSecondaryIndex["Order"]):
    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    placed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class Order(ShardedModel):
    Meta = PlainOrder.Meta

    order_id = UnicodeAttribute(hash_key=True)
    state = UnicodeAttribute()
    placed_at = NumberAttribute()
    by_state = ByState()


class Shape:
    """A model shape: how its key's items are written, moved, paged and told apart."""

    models: tuple[type[Model], ...] = ()

    def __init__(self, key: str) -> None:
        self.key = key
        self.written = 0

    def write(self, values: range) -> None:
        raise NotImplementedError

    def move(self, value: int) -> None:
        """Move the item of ``value`` where the current layout puts it (if it is not there)."""
        raise NotImplementedError

    def between_pages(self, rng: random.Random) -> None:
        """What happens to the key's layout itself between two pages (nothing, by default)."""

    def query(self) -> Callable[..., Any]:
        raise NotImplementedError

    def aquery(self) -> Callable[..., Any]:
        raise NotImplementedError

    def value(self, item: Any) -> int:
        return int(item.at)

    def extra(self, rng: random.Random) -> int | None:
        """Write one item while the key is paged; its value, or None."""
        return None


class Legacy(Shape):
    models = (PlainEvent, AdoptedEvent)

    def write(self, values: range) -> None:
        with PlainEvent.batch_write() as batch:
            for at in values:
                batch.save(PlainEvent(self.key, at))

    def move(self, value: int) -> None:
        move_legacy_item(AdoptedEvent, {"stream": {"S": self.key}, "at": {"N": str(value)}})

    def query(self) -> Callable[..., Any]:
        return AdoptedEvent.query

    def aquery(self) -> Callable[..., Any]:
        return AdoptedEvent.aquery


class Reshard(Shape):
    models = (Layout4, Layout8)

    def write(self, values: range) -> None:
        with Layout4.batch_write() as batch:
            for at in values:
                batch.save(Layout4(self.key, at))

    def move(self, value: int) -> None:
        Layout8.get(self.key, value, consistent_read=True).save()  # a misplaced item moves on save

    def query(self) -> Callable[..., Any]:
        return Layout8.query

    def aquery(self) -> Callable[..., Any]:
        return Layout8.aquery

    def extra(self, rng: random.Random) -> int | None:
        value = 1000 + self.written
        self.written += 1
        Layout8(self.key, value).save()
        return value


class Growth(Shape):
    models = (ContractShards, DynamicEvent)

    def write(self, values: range) -> None:
        with DynamicEvent.batch_write() as batch:
            for at in values:
                batch.save(DynamicEvent(self.key, at))

    def move(self, value: int) -> None:
        """Nothing moves on growth: new items go to the new shards."""

    def between_pages(self, rng: random.Random) -> None:
        if rng.random() < 0.5 and DynamicEvent.shards.shard_count(self.key) < 8:
            DynamicEvent.shards.grow(self.key)

    def query(self) -> Callable[..., Any]:
        return DynamicEvent.query

    def aquery(self) -> Callable[..., Any]:
        return DynamicEvent.aquery

    def extra(self, rng: random.Random) -> int | None:
        value = rng.choice([-1000, 1000]) + self.written  # behind or ahead of every page
        self.written += 1
        DynamicEvent(self.key, value).save()
        return value


class Compaction(Shape):
    """Items written over 4 shards, the key shrunk to 2: the items above move down."""

    models = (ContractShards, DynamicEvent)

    def write(self, values: range) -> None:
        DynamicEvent.shards.grow(self.key)
        DynamicEvent.shards.grow(self.key)
        with DynamicEvent.batch_write() as batch:
            for at in values:
                batch.save(DynamicEvent(self.key, at))
        DynamicEvent.shards.shrink(self.key, to=2)

    def move(self, value: int) -> None:
        DynamicEvent.get(self.key, value, consistent_read=True).save()

    def query(self) -> Callable[..., Any]:
        return DynamicEvent.query

    def aquery(self) -> Callable[..., Any]:
        return DynamicEvent.aquery


class Reindex(Shape):
    """An index adopted in place: the application's saves rewrite its entries into shards."""

    models = (PlainOrder, Order)

    def write(self, values: range) -> None:
        with PlainOrder.batch_write() as batch:
            for at in values:
                batch.save(PlainOrder(f"{self.key}-{at}", state=self.key, placed_at=at))

    def move(self, value: int) -> None:
        Order.get(f"{self.key}-{value}", consistent_read=True).save()

    def query(self) -> Callable[..., Any]:
        return Order.by_state.query

    def aquery(self) -> Callable[..., Any]:
        return Order.by_state.aquery

    def value(self, item: Any) -> int:
        return int(item.placed_at)


SHAPES: dict[str, type[Shape]] = {"legacy": Legacy, "reshard": Reshard, "growth": Growth,
                                  "compaction": Compaction, "reindex": Reindex}
_keys = iter(range(1_000_000))


@pytest.fixture(params=sorted(SHAPES))
def shape_type(request: pytest.FixtureRequest, dynamodb_models: Callable[..., Any]) -> type[Shape]:
    shape = SHAPES[request.param]
    dynamodb_models(*shape.models)
    return shape


def read_page(shape: Shape, reader: str, loop: Loop, cursor: Any, limit: int, forward: bool) -> tuple[list[int], Any]:
    if reader == "sync":
        result = shape.query()(shape.key, limit=limit, last_evaluated_key=cursor, scan_index_forward=forward)
        items = list(result)
        cursor = result.last_evaluated_key
    else:
        async def read() -> tuple[list[Any], Any]:
            result = shape.aquery()(shape.key, limit=limit, last_evaluated_key=cursor, scan_index_forward=forward)
            return [item async for item in result], result.last_evaluated_key

        items, cursor = loop.run(read())
    return [shape.value(item) for item in items], None if cursor is None else json.loads(json.dumps(cursor))


@pytest.mark.parametrize("reader", ["sync", "async"])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limits=st.lists(st.integers(1, 9), min_size=2, max_size=6), forward=st.booleans(), seed=st.integers(0, 2**32))
def test_items_moved_between_pages_are_returned_once_in_order(
    shape_type: type[Shape], reader: str, loop: Loop, limits: list[int], forward: bool, seed: int,
) -> None:
    rng = random.Random(seed)
    shape = shape_type(f"key-{next(_keys)}")
    shape.write(range(ITEMS))
    returned: list[int] = []
    written: set[int] = set()
    cursor: Any = None
    for number in range(4 * ITEMS):
        limit = limits[number % len(limits)]
        if number:
            shape.between_pages(rng)
            for value in rng.sample(range(ITEMS), rng.randint(0, 4)):
                shape.move(value)
            extra = shape.extra(rng) if rng.random() < 0.3 else None
            if extra is not None:
                written.add(extra)
        page, cursor = read_page(shape, reader, loop, cursor, limit, forward)
        returned.extend(page)
        if cursor is None:
            break
    assert cursor is None, "the pages did not reach the end"
    existing = [value for value in returned if value not in written]
    assert (list(range(ITEMS)) if forward else list(range(ITEMS - 1, -1, -1))) == existing
    assert returned == sorted(returned, reverse=not forward)  # in order, items written meanwhile too
    assert len(set(returned)) == len(returned)


def test_the_raw_tables_hold_each_item_once_after_the_moves(dynamodb_models: Callable[..., Any]) -> None:
    """The moves the property makes leave one stored copy of each item (checked on the table)."""
    dynamodb_models(*Legacy.models)
    shape = Legacy("raw-check")
    shape.write(range(ITEMS))
    for value in range(0, ITEMS, 2):
        shape.move(value)
        shape.move(value)  # a second move of a moved item changes nothing
    stored = sorted(int(raw["at"]["N"]) for raw in raw_items(PlainEvent) if raw["stream"]["S"].startswith("raw-check"))
    assert list(range(ITEMS)) == stored
