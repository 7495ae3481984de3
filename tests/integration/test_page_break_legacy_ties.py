"""(From an adversarial trial.) legacy_unsharded RandomShards, page breaks on bare items that adoption moves."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding.migration import JobOptions, reshard
from tests.raw import put_raw, raw_items

KEY = "feed"


class Feed(ShardedModel):
    class Meta:
        table_name = "pbreak7_legacy_feed"
        max_pool_connections = 16

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(i.at), i.body) for i in results]


def _fill(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Feed)
    physical = shard_manager(Feed).physical_key
    rows = [{"feed": {"S": KEY}, "at": {"N": str(a)}, "body": {"S": f"item {a}"}} for a in range(0, 20, 2)]  # bare
    rows += [{"feed": {"S": physical(KEY, a % 4 + 1)}, "at": {"N": str(a)}, "body": {"S": f"item {a}"}}
             for a in range(1, 20, 2)]
    put_raw(Feed, rows)


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("token", [False, True])
def test_bare_tie_adopted_between_pages(dynamodb_models: Callable[..., Any], forward: bool, token: bool) -> None:
    _fill(dynamodb_models)
    unpaged = _rows(Feed.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((12, "item 12")) + 1  # a bare item
    first = Feed.query(KEY, scan_index_forward=forward, limit=cut)
    page = _rows(first)
    assert page == unpaged[:cut]
    cursor = first.next_page_token if token else first.last_evaluated_key
    reshard(Feed, JobOptions(total_segments=1, page_size=100, threads=1,
                             checkpoint_table=f"pbreak7_ckpt_{uuid.uuid4().hex[:8]}"), key_prefix=KEY)
    assert all(r["feed"]["S"] != KEY for r in raw_items(Feed))
    resumed = _rows(Feed.query(KEY, scan_index_forward=forward, last_evaluated_key=cursor))
    assert page + resumed == unpaged, resumed[:3]


@pytest.mark.parametrize("forward", [True, False])
def test_bare_tie_then_a_second_item_saved_at_its_value(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    # A bare tie keeps the earlier rule (a stale bare copy may sit beside the shard's): an item
    # saved at the tie's value after the page is not returned after it, as a plain cursor does
    # not return an item written at its own key; an unpaged read returns the new item.
    _fill(dynamodb_models)
    unpaged = _rows(Feed.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((12, "item 12")) + 1
    first = Feed.query(KEY, scan_index_forward=forward, limit=cut)
    assert _rows(first) == unpaged[:cut]
    Feed(KEY, at=12, body="second 12").save()
    assert (12, "second 12") in _rows(Feed.query(KEY, scan_index_forward=forward))
    resumed = _rows(Feed.query(KEY, scan_index_forward=forward, last_evaluated_key=first.last_evaluated_key))
    assert resumed == unpaged[cut:]
