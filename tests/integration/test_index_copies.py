"""An index query while a job moves table items returns each item once, on DynamoDB Local.

A move puts the item's new copy and deletes the old one in one transaction, but a query sees a
transaction's writes one by one and an index follows its table a moment later: for that moment
the index holds an entry of each copy. The tests hold that moment by storing both copies (the
raw table then is what a reader may see mid-move), and check what ``query`` of the index
returns: the item once, also across page tokens (found by the live trial, where a reader of
``by_day`` got an item twice while ``migrate reshard`` moved the adopted table's bare items).

Random layouts allow two items of one logical key, which are two items: the negative control.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, HashedShards, RandomShards, ShardedModel, Sharding, ShardMetadata
from tests.day_index import day_index
from tests.paging import pages as read_pages
from tests.raw import put_raw, raw_client, raw_items

DAY = "20160226"


class PlainCopyEvent(Model):
    class Meta:
        table_name = "index_copy_events"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index()


class AdoptingCopyEvent(ShardedModel):
    """The table being adopted in place, its index sharded (bare entries rewritten already)."""

    Meta = PlainCopyEvent.Meta

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index(Sharding(HashedShards(4, attributes=("device",)), legacy_unsharded=True))
    # Seeded: the layout where a page break falls between the copies (a seed the resumed query
    # once lost the item under: it skipped the sharded copy after a dropped bare one).
    shards = Sharding(RandomShards(4, random=random.Random(0)), legacy_unsharded=True)


class HashedCopyEvent(ShardedModel):
    """One logical key, one shard: a second item of it can only be a copy."""

    class Meta:
        table_name = "index_copy_hashed"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index()
    shards = Sharding(HashedShards(4))


class RandomCopyEvent(ShardedModel):
    """Random shards, no adoption: two items of one logical key are two items."""

    class Meta:
        table_name = "index_copy_random"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index()
    shards = Sharding(RandomShards(4))


class CopyShards(ShardMetadata):
    class Meta:
        table_name = "index_copy_shards"


class DynamicCopyEvent(ShardedModel):
    """Dynamic shards: two items of one logical key are two items, unless one of them is in a
    shard above the key's lowered count, which a job is moving items out of."""

    class Meta:
        table_name = "index_copy_dynamic"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    value = NumberAttribute()
    by_day = day_index(Sharding(HashedShards(4, attributes=("device",))))
    shards = Sharding(DynamicShards(CopyShards, max_shards=8, cooldown=0))


def copy_to(model: type[Model], device: str, at: int, physical: str) -> None:
    """Store a copy of the item ``(device, at)`` under the table key ``physical`` (raw), as a
    move has it for a moment: both copies in the table and in its indexes."""
    [stored] = [raw for raw in raw_items(model)
                if raw["device"]["S"].startswith(device) and int(raw["at"]["N"]) == at]
    assert stored["device"]["S"] != physical
    put_raw(model, [{**stored, "device": {"S": physical}}])


def pages(query: Callable[..., Any], limit: int) -> list[tuple[str, int]]:
    """Every item of the index query, ``limit`` per page, each page resumed from the last one's
    cursor."""
    return [(item.device, int(item.at)) for item in read_pages(functools.partial(query, DAY), limit=limit)]


def test_an_adopted_tables_item_mid_move_is_one_index_entry(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainCopyEvent, AdoptingCopyEvent)
    for n in range(4):
        AdoptingCopyEvent(f"dev-{n}", 10 + n, day=DAY, value=n).save()  # in their shards
    copy_to(AdoptingCopyEvent, "dev-2", 12, "dev-2")  # the bare copy a move is leaving
    assert len(raw_items(AdoptingCopyEvent)) == 5  # both copies of dev-2's item: 5 index entries

    expected = [(f"dev-{n}", 10 + n) for n in range(4)]
    assert [(item.device, int(item.at)) for item in AdoptingCopyEvent.by_day.query(DAY)] == expected
    assert AdoptingCopyEvent.by_day.count(DAY) == 4
    for limit in (1, 2, 3, 4):  # a page break next to either copy: the item neither twice nor lost
        assert pages(AdoptingCopyEvent.by_day.query, limit) == expected, limit
    assert [int(item.at) for item in AdoptingCopyEvent.query("dev-2")] == [12]  # the table's own path


def test_a_unique_key_layouts_second_item_of_a_key_is_a_copy(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(HashedCopyEvent)
    for n in range(4):
        HashedCopyEvent(f"dev-{n}", 10 + n, day=DAY, value=n).save()
    physical = next(raw["device"]["S"] for raw in raw_items(HashedCopyEvent) if raw["device"]["S"].startswith("dev-1"))
    other = "dev-1_" + str(1 + int(physical.rpartition("_")[2]) % 4)  # another shard of dev-1
    copy_to(HashedCopyEvent, "dev-1", 11, other)

    expected = [(f"dev-{n}", 10 + n) for n in range(4)]
    assert [(item.device, int(item.at)) for item in HashedCopyEvent.by_day.query(DAY)] == expected
    for limit in (1, 2):
        assert pages(HashedCopyEvent.by_day.query, limit) == expected


def test_two_items_of_one_key_under_random_shards_are_two_items(dynamodb_models: Callable[..., Any]) -> None:
    """The negative control: the table query returns both, and so does the index."""
    dynamodb_models(RandomCopyEvent)
    RandomCopyEvent("dev-0", 10, day=DAY, value=1).save()
    physical = next(raw["device"]["S"] for raw in raw_items(RandomCopyEvent))
    other = "dev-0_" + str(1 + int(physical.rpartition("_")[2]) % 4)
    copy_to(RandomCopyEvent, "dev-0", 10, other)

    assert [int(item.at) for item in RandomCopyEvent.query("dev-0")] == [10, 10]
    assert [(item.device, int(item.at)) for item in RandomCopyEvent.by_day.query(DAY)] == [("dev-0", 10)] * 2


class HeldMove:
    """dev-2's item stored bare only, as before a job moves it; :meth:`move` is the job's move
    (the new copy put and the bare one deleted in one transaction), made at most once, from a
    request hook: held for the moment the test names."""

    def __init__(self) -> None:
        AdoptingCopyEvent("dev-2", 12, day=DAY, value=2).save()
        [self.sharded] = raw_items(AdoptingCopyEvent)
        self.bare = {**self.sharded, "device": {"S": "dev-2"}}
        self.client, self.table = raw_client(AdoptingCopyEvent), AdoptingCopyEvent.Meta.table_name
        put_raw(AdoptingCopyEvent, [self.bare])
        self.client.delete_item(TableName=self.table, Key={"device": self.sharded["device"], "at": self.sharded["at"]})
        self.moved = False

    def move(self, **_: Any) -> None:
        if not self.moved:
            self.moved = True
            self.client.transact_write_items(TransactItems=[
                {"Put": {"TableName": self.table, "Item": self.sharded}},
                {"Delete": {"TableName": self.table, "Key": {"device": self.bare["device"], "at": self.bare["at"]}}},
            ])


@contextmanager
def hooked(events: dict[str, Callable[..., None]]) -> Iterator[None]:
    """``AdoptingCopyEvent``'s botocore client calls each handler on its event meanwhile."""
    emitter = AdoptingCopyEvent._get_connection().connection.client.meta.events
    for name, handler in events.items():
        emitter.register(name, handler)
    try:
        yield
    finally:
        for name, handler in events.items():
            emitter.unregister(name, handler)


def test_an_item_moved_between_the_index_page_and_the_bare_lookup_is_returned(
        dynamodb_models: Callable[..., Any]) -> None:
    """The index page holds only the bare copy (read before the move); the query then looks the
    bare entry up in the item's shards (to drop it if a shard holds the item), and the move lands
    in between: the item existed before and after the query, and must be returned."""
    dynamodb_models(PlainCopyEvent, AdoptingCopyEvent)
    held = HeldMove()
    with hooked({"before-call.dynamodb.BatchGetItem": held.move}):  # between page and lookup
        found = [(item.device, int(item.at)) for item in AdoptingCopyEvent.by_day.query(DAY)]
    assert held.moved
    assert found == [("dev-2", 12)]


def _bare_copy_of(device: str, at: int, **values: Any) -> dict[str, Any]:
    """The item's sharded copy as stored (raw), as its bare copy with ``values`` changed."""
    [sharded] = [raw for raw in raw_items(AdoptingCopyEvent)
                 if raw["device"]["S"].startswith(device) and int(raw["at"]["N"]) == at]
    return {**sharded, "device": {"S": device}, **{name: {"N": str(value)} for name, value in values.items()}}


def _found(result: Any) -> list[tuple[str, int, int]]:
    return [(item.device, int(item.at), int(item.value)) for item in result]


def test_a_bare_entry_beside_a_newer_shard_copy_returns_the_copys_values(
        dynamodb_models: Callable[..., Any]) -> None:
    """The application wrote the item since (a batch write gave it its shard copy): the bare
    entry is stale, and whichever entry the query meets first, the item comes with its new value."""
    dynamodb_models(PlainCopyEvent, AdoptingCopyEvent)
    AdoptingCopyEvent("dev-2", 12, day=DAY, value=5).save()
    put_raw(AdoptingCopyEvent, [_bare_copy_of("dev-2", 12, value=1)])  # the old value, bare
    assert sorted(int(raw["value"]["N"]) for raw in raw_items(AdoptingCopyEvent)) == [1, 5]

    assert _found(AdoptingCopyEvent.by_day.query(DAY)) == [("dev-2", 12, 5)]
    for limit in (1, 2):
        assert pages(AdoptingCopyEvent.by_day.query, limit) == [("dev-2", 12)]
        token, found = None, []
        while True:
            result = AdoptingCopyEvent.by_day.query(DAY, limit=limit, last_evaluated_key=token)
            found += _found(result)
            token = result.last_evaluated_key
            if token is None:
                break
        assert found == [("dev-2", 12, 5)], limit


def test_a_filtered_index_query_reads_the_shard_copy_as_it_is_now(dynamodb_models: Callable[..., Any]) -> None:
    """A filter decides on the item's values now: a stale bare entry that passes it is not
    returned when the shard copy does not, and the shard copy's values are returned when it does."""
    dynamodb_models(PlainCopyEvent, AdoptingCopyEvent)
    AdoptingCopyEvent("dev-1", 11, day=DAY, value=1).save()  # now 1: fails value > 3
    AdoptingCopyEvent("dev-2", 12, day=DAY, value=7).save()  # now 7: passes
    put_raw(AdoptingCopyEvent, [_bare_copy_of("dev-1", 11, value=5), _bare_copy_of("dev-2", 12, value=5)])

    def query(day: str, **kwargs: Any) -> Any:
        return AdoptingCopyEvent.by_day.query(day, filter_condition=AdoptingCopyEvent.value > 3, **kwargs)

    assert _found(query(DAY)) == [("dev-2", 12, 7)]
    for limit in (1, 2):
        assert pages(query, limit) == [("dev-2", 12)], limit


def test_an_item_moved_mid_query_is_returned_by_a_filtered_index_query(dynamodb_models: Callable[..., Any]) -> None:
    """The move between the index page and the lookup of its bare entry, with a filter the
    item passes before and after (a move copies the item unchanged)."""
    dynamodb_models(PlainCopyEvent, AdoptingCopyEvent)
    held = HeldMove()
    with hooked({"before-call.dynamodb.BatchGetItem": held.move}):
        found = _found(AdoptingCopyEvent.by_day.query(DAY, filter_condition=AdoptingCopyEvent.value == 2))
    assert held.moved
    assert found == [("dev-2", 12, 2)]
    assert [raw["device"]["S"] for raw in raw_items(AdoptingCopyEvent)] == [held.sharded["device"]["S"]]

def test_a_copy_above_a_lowered_dynamic_count_is_one_index_entry(dynamodb_models: Callable[..., Any]) -> None:
    """``migrate reshard`` moves an item from shard 4 of a key shrunk to 2 down to shard 1:
    mid-move the index holds both entries, and the query returns the item once (found by the
    live trial, where a reader of ``by_day`` got a hot device's item twice)."""
    dynamodb_models(CopyShards, DynamicCopyEvent)
    DynamicCopyEvent.shards.grow("hot")
    DynamicCopyEvent.shards.grow("hot")  # 4 shards
    for n in range(4):
        DynamicCopyEvent("dev-0", 10 + 2 * n, day=DAY, value=n).save()
    put_raw(DynamicCopyEvent, [{"device": {"S": "hot_4"}, "at": {"N": "13"}, "day": {"S": DAY + "_3"},
                                "value": {"N": "9"}}])
    assert DynamicCopyEvent.shards.shrink("hot", to=2) == 2
    copy_to(DynamicCopyEvent, "hot", 13, "hot_1")  # the move's new copy, before its delete
    assert DynamicCopyEvent.shards.read_shards("hot") == (1, 2, 3, 4)

    expected = sorted([("dev-0", 10 + 2 * n) for n in range(4)] + [("hot", 13)], key=lambda key: key[1])
    assert [(item.device, int(item.at)) for item in DynamicCopyEvent.by_day.query(DAY)] == expected
    for limit in (1, 2, 3):
        assert pages(DynamicCopyEvent.by_day.query, limit) == expected, limit
    assert [int(item.at) for item in DynamicCopyEvent.query("hot")] == [13]  # the table's own path


def test_two_items_of_one_key_within_a_dynamic_count_are_two_items(dynamodb_models: Callable[..., Any]) -> None:
    """The negative control: nothing moves out of shards within the count."""
    dynamodb_models(CopyShards, DynamicCopyEvent)
    DynamicCopyEvent.shards.grow("hot")  # 2 shards
    put_raw(DynamicCopyEvent, [{"device": {"S": f"hot_{shard}"}, "at": {"N": "13"}, "day": {"S": DAY + "_3"},
                                "value": {"N": str(shard)}} for shard in (1, 2)])
    assert [(item.device, int(item.at)) for item in DynamicCopyEvent.by_day.query(DAY)] == [("hot", 13)] * 2
    for limit in (1, 2):
        assert pages(DynamicCopyEvent.by_day.query, limit) == [("hot", 13)] * 2, limit


def test_an_item_moved_mid_query_is_returned_by_a_filtered_table_query(dynamodb_models: Callable[..., Any]) -> None:
    """A filtered query of an adopted key reads the bare key first and looks its items up in
    the shards before it reads them: a move landing between the bare read and the lookup puts
    the item where the shard reads then find it."""
    dynamodb_models(PlainCopyEvent, AdoptingCopyEvent)
    held = HeldMove()
    sent: list[str] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem":
            sent.append("lookup")
            held.move()  # the job's move, held for the moment after the bare read
        else:
            sent.append(params["ExpressionAttributeValues"][":0"]["S"])

    with hooked({"before-parameter-build.dynamodb.Query": record,
                 "before-parameter-build.dynamodb.BatchGetItem": record}):
        found = _found(AdoptingCopyEvent.query("dev-2", filter_condition=AdoptingCopyEvent.value == 2))
    assert found == [("dev-2", 12, 2)]
    assert sent[:2] == ["dev-2", "lookup"]  # the bare key, its lookup, then the shards
    assert sorted(sent[2:]) == [f"dev-2_{shard}" for shard in range(1, 5)]
