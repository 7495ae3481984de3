"""(Found by an adversarial trial.) RandomShards page breaks on an item a reshard then moves, with a second item of
the key at the same sort value."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding.migration import JobOptions, reshard
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "feed"


def _feed8() -> type[ShardedModel]:
    """Before the reshard: the same model (same name) with 8 shards, every one written and read alike."""

    class Feed(ShardedModel):
        class Meta:
            table_name = "pbreak_random_feed"
            max_pool_connections = 16

        feed = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards = Sharding(RandomShards(8))

    return Feed


Feed8 = _feed8()


class Feed(ShardedModel):
    """The reshard to 4 deployed: shards 5-8 are read first and moved out of."""

    Meta = Feed8.Meta

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(4, previous_counts=(8,)))


def _physical(shard: int) -> str:
    return str(shard_manager(Feed).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str = "") -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body or f"item {at}"}}


def _stored() -> list[tuple[int, str, int]]:
    return sorted((int(r["at"]["N"]), r["body"]["S"], int(r["feed"]["S"].rpartition("_")[2])) for r in raw_items(Feed))




def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(item.at), item.body) for item in results]


def test_newest_first_cursor_from_before_the_reshard(dynamodb_models: Callable[..., Any]) -> None:
    # 0..39 over shards 1-8 (n in shard n % 8 + 1); 13 is in shard 6, and a second 13 in shard 1.
    dynamodb_models(Feed8, Feed)
    put_raw(Feed, [_item(at % 8 + 1, at) for at in range(40)] + [_item(1, 13, "second 13")])
    unpaged = _rows(Feed8.query(KEY, scan_index_forward=False))
    assert unpaged[26:28] == [(13, "item 13"), (13, "second 13")]  # shard 6 first, newest first
    first = Feed8.query(KEY, scan_index_forward=False, limit=27)
    page = _rows(first)
    assert page == unpaged[:27]
    # The reshard to 4 is deployed; the job moves shard 6's 13 (shard 1 holds a 13: it goes on).
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
    assert reshard(Feed, options, key_prefix=KEY).tally.moved > 0
    assert [shard for at, body, shard in _stored() if at == 13 and body == "item 13"] != [6]
    assert _rows(Feed.query(KEY, scan_index_forward=False))[26:28] in (
        [(13, "item 13"), (13, "second 13")], [(13, "second 13"), (13, "item 13")])
    resumed = _rows(Feed.query(KEY, scan_index_forward=False, last_evaluated_key=first.last_evaluated_key))
    assert resumed == unpaged[27:]


def test_ascending_new_item_at_the_cursor_value_then_the_tie_moves(dynamodb_models: Callable[..., Any]) -> None:
    # Already mid-reshard (shards 5-8 read first). The page ends on 13 of shard 6 (the only 13).
    # The application then writes a new 13 (RandomShards: a second item, here in shard 2), and
    # the job moves shard 6's 13 into shard 3. The next page must not return "item 13" again.
    dynamodb_models(Feed8, Feed)
    put_raw(Feed, [_item(at % 8 + 1, at) for at in range(40)])
    first = Feed.query(KEY, limit=14)
    page = _rows(first)
    assert page == [(at, f"item {at}") for at in range(14)]
    put_raw(Feed, [_item(2, 13, "new 13")])
    move_item(Feed, KEY, 13, source=6, target=3)
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    bodies = [body for _, body in page + resumed]
    assert bodies.count("item 13") == 1, resumed[:3]


import pytest  # noqa: E402


@pytest.mark.parametrize("forward", [True, False])
def test_two_ties_from_before_the_reshard_both_move(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    # 13 stored in shards 5 and 6 (two items), nothing else at 13; the 8-shard query returns
    # both and the page ends after them; the reshard moves both down; the next page repeats none.
    dynamodb_models(Feed8, Feed)
    put_raw(Feed, [_item(at % 8 + 1, at) for at in range(40)] + [_item(5, 13, "second 13")])
    unpaged = _rows(Feed8.query(KEY, scan_index_forward=forward))
    cut = max(i for i, row in enumerate(unpaged) if row[0] == 13) + 1
    first = Feed8.query(KEY, scan_index_forward=forward, limit=cut)
    page = _rows(first)
    move_item(Feed, KEY, 13, source=5, target=1)
    move_item(Feed, KEY, 13, source=6, target=3)
    move_item(Feed, KEY, 14, source=7, target=4)
    resumed = _rows(Feed.query(KEY, scan_index_forward=forward, last_evaluated_key=first.last_evaluated_key,
                               page_size=1))
    assert sorted(page + resumed) == sorted(unpaged)
    assert [at for at, _ in page + resumed] == [at for at, _ in unpaged]
