"""A cursor is a position in the merged order: it resumes right after the last item returned in
every stream the resumed query reads, wherever the items live by then.

Each test pages a key, moves items between two pages the way a job or the application does
(``migrate reshard`` of adopted legacy items, a ``HashedShards(4)`` -> 8 reshard, ``migrate
reindex`` of an index adopted in place), and checks that every item that existed throughout is
returned exactly once, in order, and that the raw table holds each item once. A cursor that
plain PynamoDB gave before the deploy resumes on a model adopted in place; a page that ends on
the bound of a range condition resumes with key attributes declared under other names
(``attr_name``), as PynamoDB does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding.migration import JobOptions, reindex, reshard
from tests.raw import index_items, raw_items

KEY = "stream-1"
ITEMS = 100


class PlainEvent(Model):
    """What wrote the table before the deploy."""

    class Meta:
        table_name = "cursor_moves_events"

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)


class AdoptedEvent(ShardedModel):
    """The same table, adopted in place."""

    Meta = PlainEvent.Meta

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class Layout4(ShardedModel):
    class Meta:
        table_name = "cursor_moves_layouts"

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4))


class Layout8(ShardedModel):
    Meta = Layout4.Meta

    stream = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8, previous_counts=(4,)))


class PlainOrdersByState(GlobalSecondaryIndex["PlainOrder"]):
    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    placed_at = NumberAttribute(range_key=True)


class PlainOrder(Model):
    class Meta:
        table_name = "cursor_moves_orders"

    order_id = UnicodeAttribute(hash_key=True)
    state = UnicodeAttribute()
    placed_at = NumberAttribute()
    by_state = PlainOrdersByState()


class OrdersByState(GlobalSecondaryIndex["Order"]):
    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    placed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


class Order(ShardedModel):
    Meta = PlainOrder.Meta

    order_id = UnicodeAttribute(hash_key=True)
    state = UnicodeAttribute()
    placed_at = NumberAttribute()
    by_state = OrdersByState()


class PlainRenamed(Model):
    """Key attributes stored under other names than the Python ones."""

    class Meta:
        table_name = "cursor_moves_renamed"

    sensor = UnicodeAttribute(hash_key=True, attr_name="s")
    at = NumberAttribute(range_key=True, attr_name="t")


class Renamed(ShardedModel):
    class Meta:
        table_name = "cursor_moves_renamed_sharded"

    sensor = UnicodeAttribute(hash_key=True, attr_name="s")
    at = NumberAttribute(range_key=True, attr_name="t")
    shards = Sharding(RandomShards(4))


def page(query: Callable[..., Any], cursor: Any, limit: int, **kwargs: Any) -> tuple[list[Any], Any]:
    """One page, and its cursor as a client stores it (JSON round trip)."""
    result = query(limit=limit, last_evaluated_key=cursor, **kwargs)
    items = list(result)
    next_cursor = result.last_evaluated_key
    return items, None if next_cursor is None else json.loads(json.dumps(next_cursor))


def rest(query: Callable[..., Any], cursor: Any, limit: int, **kwargs: Any) -> list[Any]:
    items: list[Any] = []
    while cursor is not None:
        more, cursor = page(query, cursor, limit, **kwargs)
        items.extend(more)
    return items


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    return JobOptions(total_segments=2, page_size=25, checkpoint_table=checkpoint_table)


@pytest.mark.parametrize("limit", [7, 20, 33])
def test_legacy_items_moved_between_pages_are_returned_once(
    dynamodb_models: Callable[..., Any], options: JobOptions, limit: int,
) -> None:
    """``migrate reshard`` moves the bare items into shards between two pages: the rest of the
    pages returns each remaining item once, in order (before: 125 items for 100)."""
    dynamodb_models(PlainEvent, AdoptedEvent)
    with PlainEvent.batch_write() as batch:
        for at in range(ITEMS):
            batch.save(PlainEvent(KEY, at, body="old"))
    first, cursor = page(AdoptedEvent.query, None, limit, hash_key=KEY)
    report = reshard(AdoptedEvent, options)
    assert report.tally.moved == ITEMS
    assert all(raw["stream"]["S"] != KEY for raw in raw_items(PlainEvent))  # every item moved
    returned = [int(item.at) for item in first + rest(AdoptedEvent.query, cursor, limit, hash_key=KEY)]
    assert list(range(ITEMS)) == returned


@pytest.mark.parametrize("limit", [9, 25])
def test_a_reshard_between_pages_returns_each_item_once(
    dynamodb_models: Callable[..., Any], options: JobOptions, limit: int,
) -> None:
    """A ``HashedShards(4)`` -> 8 reshard between pages (before: 116 items for 100)."""
    dynamodb_models(Layout4, Layout8)
    with Layout4.batch_write() as batch:
        for at in range(ITEMS):
            batch.save(Layout4(KEY, at))
    first, cursor = page(Layout8.query, None, limit, hash_key=KEY)
    reshard(Layout8, options)
    returned = [int(item.at) for item in first + rest(Layout8.query, cursor, limit, hash_key=KEY)]
    assert list(range(ITEMS)) == returned
    assert len(raw_items(Layout4)) == ITEMS


@pytest.mark.parametrize("token", [False, True], ids=["cursor", "page_token"])
def test_an_index_reindexed_between_pages_returns_each_item_once(
    dynamodb_models: Callable[..., Any], options: JobOptions, token: bool,
) -> None:
    """docs/indexes.rst's orders/by_state: ``migrate reindex`` between pages (before: 39 items
    for 30, out of order)."""
    dynamodb_models(PlainOrder, Order)
    with PlainOrder.batch_write() as batch:
        for n in range(30):
            batch.save(PlainOrder(f"o-{n}", state="pending", placed_at=n))
    result = Order.by_state.query("pending", limit=7)
    returned = [int(order.placed_at) for order in result]
    cursor = result.next_page_token if token else json.loads(json.dumps(result.last_evaluated_key))
    reindex(Order, "by_state", options)
    assert all(entry["state"]["S"] != "pending" for entry in index_items(PlainOrder, "by_state"))
    while cursor is not None:
        result = Order.by_state.query("pending", limit=7, last_evaluated_key=cursor)
        returned.extend(int(order.placed_at) for order in result)
        cursor = result.next_page_token if token else result.last_evaluated_key
    assert list(range(30)) == returned


def test_a_plain_pynamodb_cursor_resumes_on_the_adopted_table(dynamodb_models: Callable[..., Any]) -> None:
    """A client paging across the deploy sends the cursor plain PynamoDB gave it: the adopted
    model resumes right after it (before: CursorError), also once some items were moved."""
    dynamodb_models(PlainEvent, AdoptedEvent)
    with PlainEvent.batch_write() as batch:
        for at in range(ITEMS):
            batch.save(PlainEvent(KEY, at, body="old"))
    plain = PlainEvent.query(KEY, limit=30)
    before = [int(item.at) for item in plain]
    cursor = json.loads(json.dumps(plain.last_evaluated_key))
    assert {"stream": {"S": KEY}, "at": {"N": "29"}} == cursor
    AdoptedEvent(KEY, 55, body="new").save()  # a write after the deploy moves it to a shard
    after = [(int(item.at), item.body) for item in AdoptedEvent.query(KEY, last_evaluated_key=cursor)]
    assert list(range(30)) == before
    assert [(at, "new" if at == 55 else "old") for at in range(30, ITEMS)] == after
    # Backwards too, as plain PynamoDB would.
    plain = PlainEvent.query(KEY, limit=10, scan_index_forward=False)
    list(plain)
    backwards = AdoptedEvent.query(KEY, scan_index_forward=False, last_evaluated_key=plain.last_evaluated_key)
    assert list(range(89, -1, -1)) == [int(item.at) for item in backwards]


def test_a_plain_pynamodb_index_cursor_resumes_on_the_adopted_index(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainOrder, Order)
    with PlainOrder.batch_write() as batch:
        for n in range(30):
            batch.save(PlainOrder(f"o-{n}", state="pending", placed_at=n))
    plain = PlainOrder.by_state.query("pending", limit=12)
    assert list(range(12)) == [int(order.placed_at) for order in plain]
    cursor = json.loads(json.dumps(plain.last_evaluated_key))
    Order("o-40", state="pending", placed_at=40).save()  # a new order: stored sharded
    resumed = Order.by_state.query("pending", last_evaluated_key=cursor)
    assert [*range(12, 30), 40] == [int(order.placed_at) for order in resumed]


@pytest.mark.parametrize("limit", [2, 5])
@pytest.mark.parametrize(("condition", "forward"), [("le", True), ("between", True), ("ge", False), ("eq", True)])
def test_a_page_ending_on_the_range_bound_resumes_with_renamed_keys(
    dynamodb_models: Callable[..., Any], condition: str, forward: bool, limit: int,
) -> None:
    """Pages that end on the bound a range condition includes, on keys declared with
    ``attr_name``: the same pages and cursors as plain PynamoDB's, which has no cursor after an
    item on the bound (before: QueryError "The provided starting key does not match the range
    key predicate" when resuming there)."""
    dynamodb_models(PlainRenamed, Renamed)
    for model in (PlainRenamed, Renamed):
        with model.batch_write() as batch:
            for at in range(10):
                batch.save(model("s-1", at))
    results: dict[type[Any], list[list[int]]] = {}
    for model in (PlainRenamed, Renamed):
        conditions = {"le": model.at <= 4, "between": model.at.between(2, 6), "ge": model.at >= 5, "eq": model.at == 3}
        pages_read: list[list[int]] = []
        cursor = None
        while True:
            result = model.query("s-1", conditions[condition], scan_index_forward=forward, limit=limit,
                                 last_evaluated_key=cursor)
            pages_read.append([int(item.at) for item in result])
            cursor = result.last_evaluated_key
            if cursor is None:
                break
        results[model] = pages_read
    assert results[PlainRenamed] == results[Renamed]
    assert results[Renamed][-1] != []  # no empty page after the bound, as DynamoDB gives none


def test_an_order_saved_with_a_new_sort_key_during_an_index_query_is_returned_once(
    dynamodb_models: Callable[..., Any],
) -> None:
    """The application saves an order with a new ``placed_at`` after the query read the bare
    value and before it reads the shards: its bare entry was read, its new sharded entry is read
    too. It is one order: returned once (before: 21 items for 20), as a plain GSI query returns it."""
    dynamodb_models(PlainOrder, Order)
    with PlainOrder.batch_write() as batch:
        for n in range(20):
            batch.save(PlainOrder(f"o-{n}", state="pending", placed_at=n))
    events = Order._get_connection().connection.client.meta.events
    saved: list[int] = []
    lock = threading.Lock()

    def save_before_the_shards(params: dict[str, Any], **_: Any) -> None:
        # Every shard's request waits here until the save is done (the bare value's is done).
        value = params.get("ExpressionAttributeValues", {}).get(":0", {}).get("S", "")
        with lock:
            if value.startswith("pending_") and not saved:
                saved.append(1)
                order = Order.get("o-5", consistent_read=True)
                order.placed_at = 100
                order.save()

    events.register("before-parameter-build.dynamodb.Query", save_before_the_shards)
    try:
        found = [(order.order_id, int(order.placed_at)) for order in Order.by_state.query("pending")]
    finally:
        events.unregister("before-parameter-build.dynamodb.Query", save_before_the_shards)
    assert saved == [1]
    assert [f"o-{n}" for n in range(20)] == sorted((order_id for order_id, _ in found), key=lambda o: int(o[2:]))
    assert [entry["placed_at"]["N"] for entry in index_items(PlainOrder, "by_state")
            if entry["order_id"]["S"] == "o-5"] == ["100"]


def version_1_cursor(model: type[Any], scope_key: str, items: list[Any], *, index: str | None = None) -> Any:
    """The cursor the release before this one gave after returning ``items`` of a table query:
    per shard, the key of the last item returned from it (its layout, ``encode_cursor`` of a
    state without a position, is pinned against that release's literal cursors in
    tests/unit/test_merge_position.py)."""
    from pynamodb_sharding._cursor import CursorScope, CursorState, encode_cursor

    positions: dict[int, Any] = {}
    for item in items:
        raw = item.serialize()
        shard = item.shards
        positions[shard] = {"stream": {"S": model.shards.physical_key(scope_key, shard)}, "at": raw["at"]}
    scope = CursorScope(model.__name__, model.Meta.table_name, {"S": scope_key}, index, True)
    return json.loads(json.dumps(encode_cursor(scope, CursorState(positions=positions))))


def test_a_cursor_of_the_release_before_resumes(dynamodb_models: Callable[..., Any]) -> None:
    """A client that holds a cursor given before the upgrade resumes after its last item."""
    dynamodb_models(Layout4)
    with Layout4.batch_write() as batch:
        for at in range(60):
            batch.save(Layout4(KEY, at))
    first = list(Layout4.query(KEY, limit=25))
    cursor = version_1_cursor(Layout4, KEY, first)
    assert cursor["version"] == 1
    rest_of_it = [int(item.at) for item in Layout4.query(KEY, last_evaluated_key=cursor)]
    assert list(range(25, 60)) == rest_of_it


def test_an_entry_moved_after_the_shards_were_read_and_before_the_bare_values_next_page_is_returned(
    dynamodb_models: Callable[..., Any],
) -> None:
    """A resumed page of an adopted index whose bare value needs a second page (its first one
    starts with the entry the cursor's position returned, skipped): that page is read after the
    shards were. An entry rewritten into a shard between the two was in neither read; the shards
    are read again after the bare value's later page, and it is returned (before: lost, as a new
    user's trial of Confidant saw while `migrate reindex` ran)."""
    dynamodb_models(PlainOrder, Order)
    with PlainOrder.batch_write() as batch:
        for n in range(20):
            batch.save(PlainOrder(f"o-{n}", state="pending", placed_at=n))
    first = Order.by_state.query("pending", limit=3)
    assert [0, 1, 2] == [int(order.placed_at) for order in first]
    events = Order._get_connection().connection.client.meta.events
    moved: list[str] = []

    def move_before_the_later_page(params: dict[str, Any], **_: Any) -> None:
        value = params.get("ExpressionAttributeValues", {}).get(":0", {}).get("S", "")
        if value == "pending" and "ExclusiveStartKey" in params and not moved:
            moved.append("o-5")  # the shards were read; the bare value's next page is next
            order = Order.get("o-5", consistent_read=True)
            order.save()  # the application's save stores the sharded entry

    events.register("before-parameter-build.dynamodb.Query", move_before_the_later_page)
    try:
        page = Order.by_state.query("pending", limit=3, last_evaluated_key=first.last_evaluated_key)
        found = [int(order.placed_at) for order in page]
    finally:
        events.unregister("before-parameter-build.dynamodb.Query", move_before_the_later_page)
    assert moved == ["o-5"]
    assert [3, 4, 5] == found
    rest = Order.by_state.query("pending", last_evaluated_key=page.last_evaluated_key)
    assert list(range(6, 20)) == [int(order.placed_at) for order in rest]


def test_a_reindex_counts_and_paces_the_index_writes_it_costs(
    dynamodb_models: Callable[..., Any], options: JobOptions,
) -> None:
    """Each rewrite of a bare index value writes the item and, in the index, deletes the old
    entry and puts the new one: 3 units for a small item, which the dry run estimates, the rate
    limit paces and the report counts (before: 1 estimated and paced, 3 reported: a job at
    ``--rate 40`` wrote 124 units a second, found by a new user's trial)."""
    from pynamodb_sharding.migration import ReindexJob, plan

    dynamodb_models(PlainOrder, Order)
    with PlainOrder.batch_write() as batch:
        for n in range(20):
            batch.save(PlainOrder(f"o-{n}", state="pending", placed_at=n))
    job = ReindexJob(Order, "by_state")
    rewrites = [job.plan(raw) for raw in raw_items(PlainOrder)]
    assert [3] * 20 == [rewrite.units for rewrite in rewrites if rewrite is not None]
    assert 60 == plan(ReindexJob(Order, "by_state"), options).estimated_write_units
    report = reindex(Order, "by_state", options)
    assert (20, 60.0) == (report.tally.written, report.tally.units)
