"""(From an adversarial trial.) More than MAX_TIES (32) items at the sort value a page ends on; the tie left out
of the cursor (the oldest) is the one a reshard then moves.

RandomShards(48) before the reshard; RandomShards(40, previous_counts=(48,)) after (shards 41-48
read first and moved out of). 13 is stored in shards 1-39 and 45 (40 items, shard 40 holds no
13). Newest first, a 48-shard query returns shard 45's 13 first at that value; the page ends after
all 40. The job moves shard 45's 13 into shard 40 (the only free one)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding.migration import JobOptions, reshard
from tests.raw import put_raw, raw_items

KEY = "wide"


class WideMeta:
    table_name = "pbreak_wide_feed"
    max_pool_connections = 64


def _model(layout: RandomShards) -> type[ShardedModel]:
    class Wide(ShardedModel):
        Meta = WideMeta

        feed = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards = Sharding(layout)

    return Wide


Wide48: Any = _model(RandomShards(48))
Wide: Any = _model(RandomShards(40, previous_counts=(48,)))


def _physical(shard: int) -> str:
    return str(shard_manager(Wide48).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str) -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body}}


THIRTEENS = [*range(1, 40), 45]


def _fill(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Wide48, Wide)
    items = [_item(s, 13, f"13 of shard {s}") for s in THIRTEENS]
    items += [_item(at % 8 + 1, at, f"item {at}") for at in (*range(0, 13), *range(14, 20))]
    put_raw(Wide48, items)


def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(item.at), item.body) for item in results]


def _move(at: int, source: int, target: int) -> None:
    old = {"feed": {"S": _physical(source)}, "at": {"N": str(at)}}
    item = next(r for r in raw_items(Wide) if r["feed"]["S"] == _physical(source) and r["at"]["N"] == str(at))
    item = {**item, "feed": {"S": _physical(target)}}
    botocore_client(Wide).transact_write_items(TransactItems=[
        {"Put": {"TableName": WideMeta.table_name, "Item": item, "ConditionExpression": "attribute_not_exists(feed)"}},
        {"Delete": {"TableName": WideMeta.table_name, "Key": old, "ConditionExpression": "attribute_exists(feed)"}},
    ])


@pytest.mark.parametrize("how", ["raw_move", "reshard_job"])
@pytest.mark.parametrize("token", [False, True])
def test_oldest_tie_left_out_of_the_cursor_moves(dynamodb_models: Callable[..., Any], how: str, token: bool) -> None:
    _fill(dynamodb_models)
    unpaged = _rows(Wide48.query(KEY, scan_index_forward=False))
    assert len(unpaged) == 40 + 19
    thirteens = [body for at, body in unpaged if at == 13]
    assert thirteens[0] == "13 of shard 45", thirteens[:3]
    cut = max(i for i, (at, _) in enumerate(unpaged) if at == 13) + 1  # the page ends after every 13
    first = Wide48.query(KEY, scan_index_forward=False, limit=cut)
    page = _rows(first)
    assert page == unpaged[:cut]
    cursor = first.next_page_token if token else first.last_evaluated_key
    if how == "raw_move":
        _move(13, source=45, target=40)
    else:
        options = JobOptions(total_segments=1, page_size=100, threads=1,
                             checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
        reshard(Wide, options, key_prefix=KEY)
    where = sorted(int(r["feed"]["S"].rpartition("_")[2]) for r in raw_items(Wide)
                   if r["body"]["S"] == "13 of shard 45")
    assert where == [40], where
    after = _rows(Wide.query(KEY, scan_index_forward=False))
    assert sorted(after) == sorted(unpaged)  # unpaged after the move: each once
    resumed = _rows(Wide.query(KEY, scan_index_forward=False, last_evaluated_key=cursor))
    got = page + resumed
    assert sorted(got) == sorted(unpaged), [row for row in resumed if row[0] == 13]
