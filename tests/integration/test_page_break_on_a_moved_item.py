"""A page that ends on an item a reshard then moves: the next page neither repeats nor skips it.

``RandomShards(4, previous_counts=(8,))`` reads shards 1-8 (5-8 first: a reshard moves their
items down) and writes 1-4. RandomShards may hold two items of one key, so a copy of the page's
last item in another shard is only taken for it when that item is gone from where it was read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "feed"


class FeedMeta:
    table_name = "moved_tie_feed"
    max_pool_connections = 16


def _feed(layout: RandomShards) -> type[ShardedModel]:
    """The feed model as one deploy declares it (each deploy names it ``Feed``: a cursor names
    its model)."""

    class Feed(ShardedModel):
        Meta = FeedMeta

        feed = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards = Sharding(layout)

    return Feed


Feed: Any = _feed(RandomShards(4, previous_counts=(8,)))
#: The same table once the reshard is done and ``previous_counts`` is dropped.
FeedAfter: Any = _feed(RandomShards(4))


def _physical(shard: int) -> str:
    return str(shard_manager(Feed).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str = "") -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body or f"item {at}"}}


def _stored(at: int) -> list[tuple[int, str]]:
    """(shard, body) of every stored item ``at``, from a raw scan."""
    return sorted((int(raw["feed"]["S"].rpartition("_")[2]), raw["body"]["S"])
                  for raw in raw_items(Feed) if raw["at"]["N"] == str(at))




def _fill(dynamodb_models: Callable[..., Any]) -> list[int]:
    """0..39 over shards 1-8 (item n in shard n % 8 + 1); returns them in order."""
    dynamodb_models(Feed, FeedAfter)
    put_raw(Feed, [_item(at % 8 + 1, at) for at in range(40)])
    return list(range(40))


def test_a_page_ending_on_an_item_the_reshard_moves_next_repeats_nothing(
        dynamodb_models: Callable[..., Any]) -> None:
    expected = _fill(dynamodb_models)
    first = Feed.query(KEY, limit=14)
    page = [int(item.at) for item in first]
    assert page == expected[:14]
    assert _stored(13) == [(6, "item 13")]  # the page's last item is in shard 6, read first
    move_item(Feed, KEY, 13, source=6, target=2)
    move_item(Feed, KEY, 20, source=5, target=3)  # and one ahead of the page, as the job goes on
    resumed = [int(item.at) for item in Feed.query(KEY, last_evaluated_key=first.last_evaluated_key)]
    assert page + resumed == expected


def test_once_the_old_shards_are_read_no_more_the_moved_item_is_not_repeated(
        dynamodb_models: Callable[..., Any]) -> None:
    expected = _fill(dynamodb_models)
    first = Feed.query(KEY, limit=14)
    page = [int(item.at) for item in first]
    for at in expected:  # the reshard moves every item of shards 5-8 into shards 1-4
        shard = at % 8 + 1
        if shard > 4:
            move_item(Feed, KEY, at, source=shard, target=shard - 4)
    resumed = [int(item.at) for item in FeedAfter.query(KEY, last_evaluated_key=first.last_evaluated_key)]
    assert page + resumed == expected


def test_a_second_item_of_the_key_keeps_its_place_across_every_page_break(
        dynamodb_models: Callable[..., Any]) -> None:
    # 13 is stored twice: in shard 6 (read first) and, a second item, in shard 2 (an item of a
    # shard read first yields to one of its sort key elsewhere: one 13 is returned); 21 three
    # times, in shard 6 and, second items, in shards 2 and 3 (two 21s are returned). Nothing
    # moves. Wherever a page breaks, the pages return what one unpaged query returns.
    _fill(dynamodb_models)
    put_raw(Feed, [_item(2, 13, "second 13"), _item(2, 21, "second 21"), _item(3, 21, "third 21")])
    unpaged = [(int(item.at), item.body) for item in Feed.query(KEY)]
    assert [at for at, _ in unpaged].count(13) == 1
    assert [body for at, body in unpaged if at == 21] == ["second 21", "third 21"]
    for limit in range(1, len(unpaged)):
        first = Feed.query(KEY, limit=limit)
        page = [(int(item.at), item.body) for item in first]
        resumed = [(int(item.at), item.body) for item in Feed.query(KEY, last_evaluated_key=first.last_evaluated_key)]
        assert page + resumed == unpaged, limit
