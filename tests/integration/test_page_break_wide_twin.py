"""(From an adversarial trial.) More than MAX_TIES (32) items at the value a page ends on, and a second,
identical item of one of them (a key stored twice, every attribute equal) in a shard the page has
not reached at that value. NOTHING changes between the pages.

The cursor is incomplete, so the tie streams resume exactly after their own key (not at the
position): the tie is never read again "in its place", and the merge takes that for "gone" and
skips the identical twin as its moved copy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._descriptor import shard_manager
from tests.raw import put_raw, raw_items

KEY = "wide"


class Wide(ShardedModel):
    class Meta:
        table_name = "pbreak7_wide_twin"
        max_pool_connections = 64

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(48))


def _item(shard: int, at: int, body: str) -> dict[str, Any]:
    return {"feed": {"S": str(shard_manager(Wide).physical_key(KEY, shard))}, "at": {"N": str(at)},
            "body": {"S": body}}


def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(item.at), item.body) for item in results]


@pytest.mark.parametrize("ties", [33, 40])
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("resume", ["dict", "token", "page_iter"])
def test_identical_twin_behind_an_incomplete_cursor(dynamodb_models: Callable[..., Any], forward: bool,
                                                     ties: int, resume: str) -> None:
    dynamodb_models(Wide)
    # ascending: shards 1..ties hold a 13 each and shard 48 an identical copy of shard `twin_of`'s.
    # descending: shards 48-ties+1..48 hold one each and shard 1 the copy (last at 13 either way).
    shards = list(range(1, ties + 1)) if forward else list(range(48 - ties + 1, 49))
    twin_of = shards[-1]  # a tie the cursor keeps (it keeps the 32 of the highest shards)
    twin_shard = 48 if forward else 1
    items = [_item(s, 13, f"13 of shard {s}") for s in shards]
    items.append(_item(twin_shard, 13, f"13 of shard {twin_of}"))
    items += [_item(at % 8 + 2, at, f"item {at}") for at in (*range(0, 13), *range(14, 20))]
    put_raw(Wide, items)
    unpaged = _rows(Wide.query(KEY, scan_index_forward=forward))
    assert len(unpaged) == ties + 1 + 19
    at13 = [i for i, (at, _) in enumerate(unpaged) if at == 13]
    cut = at13[-2] + 1  # after every 13 but the twin, which comes last at 13
    assert unpaged[cut] == (13, f"13 of shard {twin_of}")
    if resume == "page_iter":
        results = Wide.query(KEY, scan_index_forward=forward, page_size=cut)
        pages = iter(results.page_iter)
        page = [(int(r["at"]["N"]), r["body"]["S"]) for r in next(pages)["Items"]]
        cursor = results.page_iter.last_evaluated_key
    else:
        first = Wide.query(KEY, scan_index_forward=forward, limit=cut)
        page = _rows(first)
        cursor = first.next_page_token if resume == "token" else first.last_evaluated_key
    assert page == unpaged[:cut]
    resumed = _rows(Wide.query(KEY, scan_index_forward=forward, last_evaluated_key=cursor))
    assert len(raw_items(Wide)) == len(unpaged)
    assert page + resumed == unpaged, resumed[:3]
