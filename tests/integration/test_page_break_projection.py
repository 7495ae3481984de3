"""(From an adversarial trial.) A page break with attributes_to_get: a cursor keeps a digest of
whole items only, so one taken with a projection, or resumed with one, keeps the earlier rule.

RandomShards(4, previous_counts=(8,)): shards 5-8 are read first. A page ends on 13 (only in
shard 6); the job then moves that item into shard 3. The next page is asked with another
``attributes_to_get`` than the first (PynamoDB allows it; the cursor scope does not name the
projection)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding.migration import JobOptions, reshard
from tests.item_moves import move_item
from tests.raw import put_raw

KEY = "feed"


class Feed(ShardedModel):
    class Meta:
        table_name = "pbreak_proj_feed"
        max_pool_connections = 16

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(4, previous_counts=(8,)))


def _physical(shard: int) -> str:
    return str(shard_manager(Feed).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str = "") -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body or f"item {at}"}}




def _fill(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Feed)
    put_raw(Feed, [_item(at % 8 + 1, at) for at in range(40)])


def _ats(results: Any) -> list[int]:
    return [int(item.at) for item in results]


PROJECTIONS = {"none": None, "at": ["at"], "body": ["body"], "at_body": ["at", "body"]}


@pytest.mark.parametrize(("first_projection", "second_projection"), [
    ("at", "none"), ("none", "at"), ("body", "none"), ("at", "at_body"), ("at", "body"),
    ("at", "at"), ("none", "none"),  # controls
])
def test_projection_changes_between_pages(dynamodb_models: Callable[..., Any], first_projection: str,
                                          second_projection: str) -> None:
    _fill(dynamodb_models)
    first = Feed.query(KEY, limit=14, attributes_to_get=PROJECTIONS[first_projection])
    page = _ats(first)
    assert page == list(range(14))
    cursor = first.last_evaluated_key
    move_item(Feed, KEY, 13, source=6, target=3)
    after = _ats(Feed.query(KEY))
    assert after == list(range(40))  # unpaged: each once
    resumed = _ats(Feed.query(KEY, last_evaluated_key=cursor, attributes_to_get=PROJECTIONS[second_projection]))
    assert page + resumed == after, resumed[:3]


def test_projection_changes_between_pages_page_token(dynamodb_models: Callable[..., Any]) -> None:
    _fill(dynamodb_models)
    first = Feed.query(KEY, limit=14, attributes_to_get=["at"])
    page = _ats(first)
    token = first.next_page_token
    assert isinstance(token, str)
    move_item(Feed, KEY, 13, source=6, target=3)
    resumed = _ats(Feed.query(KEY, last_evaluated_key=token))
    assert page + resumed == list(range(40)), resumed[:3]


def test_projection_same_both_pages_real_reshard_then_json_roundtrip(dynamodb_models: Callable[..., Any]) -> None:
    # control: the real job, same projection on both pages, cursor through JSON
    _fill(dynamodb_models)
    first = Feed.query(KEY, limit=14, attributes_to_get=["body"])
    page = _ats(first)
    cursor = json.loads(json.dumps(first.last_evaluated_key))
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
    reshard(Feed, options, key_prefix=KEY)
    resumed = _ats(Feed.query(KEY, last_evaluated_key=cursor, attributes_to_get=["body"]))
    assert page + resumed == list(range(40)), resumed[:3]


def test_with_a_projection_a_tie_read_first_stands_for_every_item_at_its_value(
        dynamodb_models: Callable[..., Any]) -> None:
    # The page ends on shard 6's 13 (read first, the only 13). The application then writes a
    # second 13 ("new 13", other body) into shard 2 and deletes shard 6's 13. Whole items: the
    # new 13 is returned (its digest is not the tie's). With attributes_to_get the cursor keeps
    # no digest (one of some attributes would tell a copy read with others from the item), and
    # a tie of a shard read first stands for every item at its value (docs/query.rst): the new
    # 13, written at the cursor's position after the page, is not returned, as plain PynamoDB
    # does not return an item written at its cursor's key.
    _fill(dynamodb_models)
    whole = Feed.query(KEY, limit=14)
    assert _ats(whole) == list(range(14))
    first = Feed.query(KEY, limit=14, attributes_to_get=["at"])
    assert _ats(first) == list(range(14))
    put_raw(Feed, [_item(2, 13, "new 13")])
    botocore_client(Feed).delete_item(TableName=Feed.Meta.table_name,
                                      Key={"feed": {"S": _physical(6)}, "at": {"N": "13"}})
    full_rows = [(int(i.at), i.body) for i in Feed.query(KEY, last_evaluated_key=whole.last_evaluated_key)]
    assert full_rows[0] == (13, "new 13")
    resumed = _ats(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key, attributes_to_get=["at"]))
    assert resumed[:2] == [14, 15]
