"""(From an adversarial trial.) DynamicShards (no unique_keys). A page ends on an item of the top shard; the key
is shrunk, ``compact`` moves that item down and trims, then the key is grown back before the next
page. The tie's place (the top shard) is then a current shard again, read normally (not read first,
not "read no more"): the resumed query cannot see that the item left it."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding.migration import JobOptions, compact, reshard
from tests.clock import Clock
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "hot"
CLOCK = Clock(1_000_000.0)
APP_TIMER = Clock(0.0)
JOB_TIMER = Clock(0.0)


class RegrowShards(ShardMetadata):
    class Meta:
        table_name = "pbreak_regrow_shards"


def _counts(timer: Clock) -> DynamicShards:
    return DynamicShards(RegrowShards, max_shards=8, cache_ttl=10, clock_skew=1, clock=CLOCK, timer=timer)


class App(ShardedModel):
    class Meta:
        table_name = "pbreak_regrow_log"
        max_pool_connections = 16

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(_counts(APP_TIMER))


class JobProc(ShardedModel):
    Meta = App.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(_counts(JOB_TIMER))


def _tick(seconds: float) -> None:
    CLOCK.now += seconds
    APP_TIMER.now += seconds
    JOB_TIMER.now += seconds


def _raw(shard: int, at: int, value: int) -> dict[str, Any]:
    return {"sensor": {"S": shard_manager(App).physical_key(KEY, shard)}, "at": {"N": str(at)},
            "value": {"N": str(value)}}


def stored() -> list[tuple[int, int, int]]:
    return sorted((int(r["at"]["N"]), int(r["value"]["N"]), int(r["sensor"]["S"].rpartition("_")[2]))
                  for r in raw_items(App))


def _grow_to(target: int) -> int:
    count = 0
    while count < target:
        count = App.shards.grow(KEY)
        _tick(12)
    return count


def _items(results: Any) -> list[tuple[int, int]]:
    return [(int(item.at), int(item.value)) for item in results]


@pytest.mark.parametrize("forward", [False, True])
@pytest.mark.parametrize("token", [False, True])
def test_page_ends_on_top_shard_item_compacted_down_then_key_regrown(
        dynamodb_models: Callable[..., Any], forward: bool, token: bool) -> None:
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    count = _grow_to(3)
    assert count == 4
    # shard 1: 0..9; top shard 4: 13 (the item the page ends on); shard 2: 20..24
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(4, 13, 13)] + [_raw(2, a, a) for a in range(20, 25)])
    unpaged = _items(App.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((13, 13)) + 1
    first = App.query(KEY, scan_index_forward=forward, limit=cut)
    page = _items(first)
    assert page == unpaged[:cut]
    cursor = first.next_page_token if token else first.last_evaluated_key
    _tick(100)
    App.shards.shrink(KEY, to=2)
    _tick(12)
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
    assert compact(JobProc, options).tally.moved > 0
    where = [shard for at, _, shard in stored() if at == 13]
    assert where != [4], where  # moved down
    _tick(100)
    assert _grow_to(4) == 4
    after = _items(App.query(KEY, scan_index_forward=forward))
    assert after == unpaged  # unpaged: each once
    resumed = _items(App.query(KEY, scan_index_forward=forward, last_evaluated_key=cursor))
    assert page + resumed == unpaged, resumed[:3]


@pytest.mark.parametrize("forward", [False, True])
def test_control_without_regrow(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    _grow_to(3)
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(4, 13, 13)] + [_raw(2, a, a) for a in range(20, 25)])
    unpaged = _items(App.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((13, 13)) + 1
    first = App.query(KEY, scan_index_forward=forward, limit=cut)
    page = _items(first)
    _tick(100)
    App.shards.shrink(KEY, to=2)
    _tick(12)
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
    compact(JobProc, options)
    _tick(100)
    resumed = _items(App.query(KEY, scan_index_forward=forward, last_evaluated_key=first.last_evaluated_key))
    assert page + resumed == unpaged, resumed[:3]




@pytest.mark.parametrize("forward", [False, True])
def test_control_regrow_before_the_history_is_trimmed(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    # The same, but the item is moved (as the job does) without a trim: the regrown key reads
    # shard 4 first and again (stream FIRST_READ + 4).
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    _grow_to(3)
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(4, 13, 13)] + [_raw(2, a, a) for a in range(20, 25)])
    unpaged = _items(App.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((13, 13)) + 1
    first = App.query(KEY, scan_index_forward=forward, limit=cut)
    page = _items(first)
    _tick(100)
    App.shards.shrink(KEY, to=2)
    _tick(12)
    move_item(App, KEY, 13, source=4, target=2)
    _tick(100)
    _grow_to(4)
    resumed = _items(App.query(KEY, scan_index_forward=forward, last_evaluated_key=first.last_evaluated_key))
    assert page + resumed == unpaged, resumed[:3]


# RandomShards: scaled down 8 -> 4 (reshard moves shard 6's 13 down), then back up to 8 before the next page.
from pynamodb_sharding import RandomShards  # noqa: E402


class FeedMeta:
    table_name = "pbreak_regrow_random"
    max_pool_connections = 16


def _feed(layout: RandomShards) -> Any:
    class Feed(ShardedModel):
        Meta = FeedMeta

        feed = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        body = UnicodeAttribute()
        shards = Sharding(layout)

    return Feed


Feed8: Any = _feed(RandomShards(8))
Feed4: Any = _feed(RandomShards(4, previous_counts=(8,)))
Feed8Again: Any = _feed(RandomShards(8))


@pytest.mark.parametrize("forward", [False, True])
def test_random_scaled_down_resharded_then_scaled_up_again(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    dynamodb_models(Feed8, Feed4, Feed8Again)
    physical = shard_manager(Feed8).physical_key
    put_raw(Feed8, [{"feed": {"S": physical("feed", at % 8 + 1)}, "at": {"N": str(at)},
                     "body": {"S": f"item {at}"}} for at in range(40)])
    unpaged = [int(i.at) for i in Feed8.query("feed", scan_index_forward=forward)]
    cut = unpaged.index(13) + 1
    first = Feed8.query("feed", scan_index_forward=forward, limit=cut)
    page = [int(i.at) for i in first]
    assert page[-1] == 13
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")
    report = reshard(Feed4, options, key_prefix="feed")  # moves shards 5-8 down, 13 among them
    assert report.tally.moved == 20, report.tally
    assert sorted(int(i.at) for i in Feed8Again.query("feed")) == list(range(40))
    resumed = [int(i.at) for i in Feed8Again.query("feed", scan_index_forward=forward,
                                                   last_evaluated_key=first.last_evaluated_key)]
    assert page + resumed == unpaged, resumed[:3]
