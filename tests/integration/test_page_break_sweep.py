"""A sweep: RandomShards(4, previous_counts=(8,)), every page break, both directions,
range conditions, filters, page sizes; the item the page ended on (and one ahead) moved down
between pages as the reshard moves them. Compared with an unpaged query of the data after."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client
from tests.raw import put_raw, raw_client, raw_items

KEY = "feed"


class Feed(ShardedModel):
    class Meta:
        table_name = "pbreak_sweep_feed"
        max_pool_connections = 16

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    n = NumberAttribute()
    shards = Sharding(RandomShards(4, previous_counts=(8,)))


def _physical(shard: int) -> str:
    return str(shard_manager(Feed).physical_key(KEY, shard))


def _item(shard: int, at: int, body: str = "", n: int = 0) -> dict[str, Any]:
    return {"feed": {"S": _physical(shard)}, "at": {"N": str(at)}, "body": {"S": body or f"item {at}"},
            "n": {"N": str(n)}}


# (shard, at, body): 0..29 over shards 1-8; second items of some keys in shards 1-4; a shadowed
# duplicate of 13 (yields to shard 2's).
BASE = ([(at % 8 + 1, at, f"item {at}") for at in range(30)]
        + [(2, 13, "second 13"), (1, 21, "second 21"), (3, 21, "third 21"), (4, 22, "second 22")])


def _reset() -> None:
    client = raw_client(Feed)
    for raw in raw_items(Feed):
        client.delete_item(TableName=Feed.Meta.table_name, Key={"feed": raw["feed"], "at": raw["at"]})
    put_raw(Feed, [_item(shard, at, body, n=len(body) % 3) for shard, at, body in BASE])


def _stored() -> dict[tuple[int, int], str]:
    return {(int(r["feed"]["S"].rpartition("_")[2]), int(r["at"]["N"])): r["body"]["S"] for r in raw_items(Feed)}


def _move_down(at: int) -> bool:
    """Move the shadowed items at ``at`` (shards 5-8) into the first free shard of 1-4, as the
    job does (a taken key tries the next shard)."""
    stored = _stored()
    moved = False
    for source in range(5, 9):
        if (source, at) not in stored:
            continue
        body = stored[(source, at)]
        for target in [*range(source - 4, 5), *range(1, source - 4)]:
            if (target, at) in stored:
                continue
            old = {"feed": {"S": _physical(source)}, "at": {"N": str(at)}}
            raw = raw_items(Feed)
            n = next(r["n"]["N"] for r in raw if r["feed"]["S"] == _physical(source) and r["at"]["N"] == str(at))
            botocore_client(Feed).transact_write_items(TransactItems=[
                {"Put": {"TableName": Feed.Meta.table_name, "Item": _item(target, at, body, int(n)),
                         "ConditionExpression": "attribute_not_exists(feed)"}},
                {"Delete": {"TableName": Feed.Meta.table_name, "Key": old}},
            ])
            stored[(target, at)] = body
            del stored[(source, at)]
            moved = True
            break
    return moved


def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(item.at), item.body) for item in results]


CASES = {
    "all": {},
    "between": {"range_key_condition": Feed.at.between(5, 22)},
    "gt": {"range_key_condition": Feed.at > 12},
    "lt": {"range_key_condition": Feed.at < 22},
    "filter": {"filter_condition": Feed.n == 0},
}


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("case", sorted(CASES))
def test_sweep(dynamodb_models: Callable[..., Any], case: str, forward: bool) -> None:
    dynamodb_models(Feed)
    kwargs = {**CASES[case], "scan_index_forward": forward}
    _reset()
    unpaged = _rows(Feed.query(KEY, **kwargs))
    failures = []
    for limit in range(1, len(unpaged)):
        for page_size in (None, 1):
            _reset()
            first = Feed.query(KEY, limit=limit, **kwargs)
            page = _rows(first)
            assert page == unpaged[:limit]
            at = page[-1][0]
            moved = _move_down(at)
            ahead = unpaged[limit][0] if limit < len(unpaged) else None
            if ahead is not None and ahead != at:
                _move_down(ahead)
            after = _rows(Feed.query(KEY, **kwargs))
            resumed = _rows(Feed.query(KEY, last_evaluated_key=first.last_evaluated_key, page_size=page_size,
                                       **kwargs))
            # Moving a shadowed item that yielded to another of its sort value makes it a
            # second item: compare with the data after, and with each stored body once.
            got = page + resumed
            if got != after and sorted(got) != sorted(after):
                failures.append((limit, page_size, moved, page[-1], got[limit - 2:limit + 3],
                                 after[limit - 2:limit + 3]))
    assert not failures, "\n".join(map(str, failures))
