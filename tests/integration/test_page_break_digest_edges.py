"""(From an adversarial trial.) what the tie digest holds equal.

RandomShards(4, previous_counts=(8,)): shards 5-8 are read first. 0..39 over shards 1-8
(n in shard n % 8 + 1): a page of 14 ascending ends on 13, in shard 6 (the only 13)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import (
    BinaryAttribute,
    BinarySetAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding.migration import JobOptions, reshard
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "feed"


class Feed(ShardedModel):
    class Meta:
        table_name = "pbreak_edges_feed"
        max_pool_connections = 16

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    big = NumberAttribute(null=True)
    tags = UnicodeSetAttribute(null=True)
    nums = NumberSetAttribute(null=True)
    blob = BinaryAttribute(null=True, legacy_encoding=False)
    blobs = BinarySetAttribute(null=True, legacy_encoding=False)
    doc = MapAttribute(null=True)
    seq = ListAttribute(null=True)
    shards = Sharding(RandomShards(4, previous_counts=(8,)))


def _physical(shard: int) -> str:
    return str(shard_manager(Feed).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str = "", **extra: Any) -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body or f"item {at}"}, **extra}


def _stored(at: int) -> list[dict[str, Any]]:
    return [r for r in raw_items(Feed) if r["at"]["N"] == str(at)]




def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(item.at), item.body) for item in results]


RICH = {
    "big": {"N": "1.50"},
    "tags": {"SS": ["b", "a", "é"]},
    "nums": {"NS": ["1.0", "10", "-0.5"]},
    "blob": {"B": b"\x00\xffbinary"},
    "blobs": {"BS": [b"\x01", b"\x00"]},
    "doc": {"M": {"x": {"N": "1.0"}, "y": {"L": [{"S": "z"}, {"NULL": True}, {"BOOL": False}]}}},
    "seq": {"L": [{"N": "2.50"}, {"B": b"\x02"}, {"SS": ["q"]}]},
}


def _fill(dynamodb_models: Callable[..., Any], **extra13: Any) -> None:
    dynamodb_models(Feed)
    rows = [_item(at % 8 + 1, at) for at in range(40) if at != 13]
    rows.append(_item(6, 13, **extra13))
    put_raw(Feed, rows)


@pytest.mark.parametrize("how", ["raw", "job"])
@pytest.mark.parametrize("resume", ["dict", "json", "token", "async"])
def test_rich_item_moved_by_the_job(dynamodb_models: Callable[..., Any], how: str, resume: str, loop: Any) -> None:
    _fill(dynamodb_models, **{k: v for k, v in RICH.items() if k != "nums"},
          nums={"NS": ["1.0", "-0.5", "2e3"]})
    first = Feed.query(KEY, limit=14)
    page = _rows(first)
    assert [at for at, _ in page] == list(range(14))
    cursor: Any = first.last_evaluated_key
    if resume == "json":
        cursor = json.loads(json.dumps(cursor))
    elif resume == "token":
        cursor = first.next_page_token
    if how == "raw":
        move_item(Feed, KEY, 13, source=6, target=3)
    else:
        reshard(Feed, JobOptions(total_segments=1, page_size=100, threads=1,
                                 checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}"), key_prefix=KEY)
    assert [r["feed"]["S"] for r in _stored(13)] != [_physical(6)]
    if resume == "async":
        from tests.async_loop import collect

        items, _, _ = loop.run(collect(Feed.aquery(KEY, last_evaluated_key=cursor)))
        resumed = _rows(items)
    else:
        resumed = _rows(Feed.query(KEY, last_evaluated_key=cursor, page_size=1))
    assert [at for at, _ in page + resumed] == list(range(40)), resumed[:3]


def test_38_digit_numbers_differing_past_28_digits_are_not_one_item(dynamodb_models: Callable[..., Any]) -> None:
    # The page ends on shard 6's 13 (big = X). The app deletes it and writes a second, different
    # 13 into shard 2 (big = X + 1: a 38-digit number, differing in its last digit). Documented:
    # only an item identical in every attribute is taken for the deleted one's copy.
    x = "12345678901234567890123456789012345678"
    y = "12345678901234567890123456789012345679"
    _fill(dynamodb_models, big={"N": x})
    first = Feed.query(KEY, limit=14)
    page = _rows(first)
    assert [at for at, _ in page] == list(range(14))
    botocore_client(Feed).delete_item(TableName=Feed.Meta.table_name,
                                      Key={"feed": {"S": _physical(6)}, "at": {"N": "13"}})
    put_raw(Feed, [_item(2, 13, big={"N": y})])
    assert {r["big"]["N"] for r in _stored(13)} == {y}
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    assert resumed[0] == (13, "item 13"), resumed[:3]


def test_control_second_item_differing_in_a_short_number(dynamodb_models: Callable[..., Any]) -> None:
    _fill(dynamodb_models, big={"N": "5"})
    first = Feed.query(KEY, limit=14)
    page = _rows(first)
    botocore_client(Feed).delete_item(TableName=Feed.Meta.table_name,
                                      Key={"feed": {"S": _physical(6)}, "at": {"N": "13"}})
    put_raw(Feed, [_item(2, 13, big={"N": "6"})])
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    assert page[-1][0] == 13
    assert resumed[0] == (13, "item 13"), resumed[:3]


def test_a_save_that_changes_the_item_as_it_moves_returns_it_again(dynamodb_models: Callable[..., Any]) -> None:
    # The page ends on shard 6's 13, stored by an older writer with an attribute the model does
    # not declare. The application saves that item as loaded from the page: save() moves it into
    # a current shard (docs/migrations.rst) and, as PynamoDB's save() does, writes the model's
    # attributes only. The item changed as it moved: the next page returns it again, as it is
    # now (docs/query.rst), as it would any second item stored under its key.
    _fill(dynamodb_models, note={"S": "written by v1"})
    first = Feed.query(KEY, limit=14)
    items = list(first)
    assert [int(i.at) for i in items] == list(range(14))
    items[-1].save()
    stored = _stored(13)
    assert len(stored) == 1, stored
    assert stored[0]["feed"]["S"] != _physical(6), stored
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    assert [at for at, _ in resumed] == list(range(13, 40)), resumed[:3]


def test_control_unchanged_save_of_a_plain_item(dynamodb_models: Callable[..., Any]) -> None:
    _fill(dynamodb_models, **{k: RICH[k] for k in ("big", "tags", "doc")})
    first = Feed.query(KEY, limit=14)
    items = list(first)
    items[-1].save()
    stored = _stored(13)
    assert len(stored) == 1, stored
    assert stored[0]["feed"]["S"] != _physical(6), stored
    resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key))
    assert [int(i.at) for i in items] + [at for at, _ in resumed] == list(range(40)), resumed[:3]
