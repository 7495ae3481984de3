"""(From an adversarial trial.) Scenarios around tie digests that are expected to hold.

RandomShards(8): item n in shard n % 8 + 1 (0..39). Ascending, a page of 14 ends on 13 (shard 6)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "feed"


class Feed(ShardedModel):
    class Meta:
        table_name = "pbreak7_held_feed"
        max_pool_connections = 16

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(8))


def _physical(shard: int) -> str:
    return str(shard_manager(Feed).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str = "") -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body or f"item {at}"}}


def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(i.at), i.body) for i in results]




def _update(shard: int, at: int, body: str) -> None:
    botocore_client(Feed).update_item(TableName=Feed.Meta.table_name,
                                      Key={"feed": {"S": _physical(shard)}, "at": {"N": str(at)}},
                                      UpdateExpression="SET body = :b", ExpressionAttributeValues={":b": {"S": body}})


def _fill(dynamodb_models: Callable[..., Any], extra: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment]
    dynamodb_models(Feed)
    put_raw(Feed, [_item(at % 8 + 1, at) for at in range(40)] + list(extra))


def _stored(at: int) -> list[tuple[int, str]]:
    return sorted((int(r["feed"]["S"].rpartition("_")[2]), r["body"]["S"]) for r in raw_items(Feed)
                  if r["at"]["N"] == str(at))


@pytest.mark.parametrize("page_size", [None, 1])
@pytest.mark.parametrize("consistent", [False, True])
def test_tie_updated_in_place_identical_twin_ahead(dynamodb_models: Callable[..., Any], page_size: Any,
                                                   consistent: bool) -> None:
    _fill(dynamodb_models, [_item(7, 13)])  # identical twin of shard 6's 13, in shard 7 (ahead)
    first = Feed.query(KEY, limit=14)
    page = _rows(first)
    assert page[-1] == (13, "item 13")
    _update(6, 13, "changed")
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key, page_size=page_size,
                               consistent_read=consistent))
    assert resumed == [(13, "item 13")] + [(a, f"item {a}") for a in range(14, 40)], resumed[:3]


def test_tie_updated_in_place_to_be_filtered_identical_twin_ahead(dynamodb_models: Callable[..., Any]) -> None:
    _fill(dynamodb_models, [_item(7, 13)])
    keep = Feed.body != "changed"
    first = Feed.query(KEY, filter_condition=keep, limit=14)
    page = _rows(first)
    assert page[-1] == (13, "item 13")
    _update(6, 13, "changed")
    after = _rows(Feed.query(KEY, filter_condition=keep))
    resumed = _rows(Feed.query(KEY, filter_condition=keep, last_evaluated_key=first.last_evaluated_key,
                               page_size=1))
    # invisible either way: one "item 13" over both pages, and one in the unpaged query after
    assert sorted(page + resumed) == sorted(after), resumed[:3]


@pytest.mark.parametrize("twin_at", [1, 8])
def test_two_ties_one_moved_plus_twin(dynamodb_models: Callable[..., Any], twin_at: int) -> None:
    # 13 in shards 3 ("A") and 6 ("item 13"); page ends after both. Twin of shard 6's in shard `twin_at`
    # (1: behind, at page-1 time already returned? no: written after; 8: ahead, not yet returned).
    _fill(dynamodb_models, [_item(3, 13, "A")])
    unpaged = _rows(Feed.query(KEY))
    cut = unpaged.index((13, "item 13")) + 1
    first = Feed.query(KEY, limit=cut)
    page = _rows(first)
    assert page[-2:] == [(13, "A"), (13, "item 13")]
    put_raw(Feed, [_item(twin_at, 13)])  # a second, identical item (after the page)
    move_item(Feed, KEY, 13, source=6, target=2)  # the tie moves (as a job moves it)
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    after = _rows(Feed.query(KEY))
    assert sorted(page + resumed) == sorted(after), resumed[:3]


def test_swap_identical_a_to_b_and_c_to_a(dynamodb_models: Callable[..., Any]) -> None:
    # 13 in shard 6 and an identical twin in shard 8 (ahead). 6's moves to 2, then 8's moves to 6.
    _fill(dynamodb_models, [_item(8, 13)])
    first = Feed.query(KEY, limit=14)
    page = _rows(first)
    move_item(Feed, KEY, 13, source=6, target=2)
    move_item(Feed, KEY, 13, source=8, target=6)
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    after = _rows(Feed.query(KEY))
    assert sorted(page + resumed) == sorted(after), resumed[:3]


@pytest.mark.parametrize("direction", ["async_then_sync", "sync_then_async", "json_async"])
def test_cursor_across_query_and_aquery(dynamodb_models: Callable[..., Any], loop: Any, direction: str) -> None:
    from tests.async_loop import collect

    _fill(dynamodb_models, [_item(8, 13)])
    if direction == "sync_then_async":
        first = Feed.query(KEY, limit=14)
        page = _rows(first)
        cursor = first.last_evaluated_key
    else:
        items, cursor, _ = loop.run(collect(Feed.aquery(KEY, limit=14)))
        page = _rows(items)
        if direction == "json_async":
            cursor = json.loads(json.dumps(cursor))
    assert page[-1] == (13, "item 13")
    move_item(Feed, KEY, 13, source=6, target=2)
    if direction == "async_then_sync":
        resumed = _rows(Feed.query(KEY, last_evaluated_key=cursor))
    else:
        items, _, _ = loop.run(collect(Feed.aquery(KEY, last_evaluated_key=cursor)))
        resumed = _rows(items)
    assert resumed == [(13, "item 13")] + [(a, f"item {a}") for a in range(14, 40)], resumed[:3]
    assert Feed.count(KEY) == len(page) + len(resumed)


def test_page_iter_chain_with_moves_between_every_page(dynamodb_models: Callable[..., Any]) -> None:
    # Many 13s: the twin structure repeated; pages of 1 through the 13s, a move after each page.
    _fill(dynamodb_models, [_item(s, 13, f"13-{s}") for s in (1, 2, 3, 4, 5, 7, 8)])
    expected = _rows(Feed.query(KEY))
    got: list[tuple[int, str]] = []
    cursor = None
    moves = iter([(6, 13), (5, 14), (4, 15)])  # unused shards targets are picked below
    while True:
        results = Feed.query(KEY, limit=3, last_evaluated_key=cursor)
        got.extend(_rows(results))
        cursor = results.last_evaluated_key
        if cursor is None:
            break
        last = got[-1]
        if last[0] == 13:
            # move the last returned 13 to any shard free at 13 (none are: only 6's twin structure)
            holders = {s for s, _ in _stored(13)}
            free = [s for s in range(1, 9) if s not in holders]
            src = next((s for s, b in _stored(13) if b == last[1]), None)
            if free and src is not None:
                move_item(Feed, KEY, 13, source=src, target=free[0])
        next(moves, None)
    assert sorted(got) == sorted(expected)
