"""(From an adversarial trial.) A key's layout lowered (the item a page ended on moves down) and
raised again before the next page, and a new item of the same sort value saved meanwhile.

Saved into a shard other than the one the page read the item from, both are right: the moved
item is not repeated, the new one is returned. Saved at the very key the page ended on (left
alone, docs/query.rst): that item stands for the page's in its place, as a plain cursor never
returns its own key's item, and the moved one comes again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, RandomShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding.migration import JobOptions, compact, reshard
from tests.clock import Clock
from tests.raw import put_raw, raw_items


class Pick:
    """randint that returns a chosen shard (what a RandomShards save would draw)."""

    def __init__(self) -> None:
        self.shard = 1

    def randint(self, a: int, b: int) -> int:
        assert a <= self.shard <= b
        return self.shard


PICK = Pick()


class FeedMeta:
    table_name = "pbreak7_reuse_random"
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
Feed8Again: Any = _feed(RandomShards(8, random=PICK))


def _rows(results: Any) -> list[tuple[int, str]]:
    return [(int(i.at), i.body) for i in results]


def _stored13(model: Any) -> list[tuple[str, str]]:
    return sorted((r["feed"]["S"], r["body"]["S"]) for r in raw_items(model) if r["at"]["N"] == "13")


@pytest.mark.parametrize("forward", [True, False])
# A new item saved at the tie's own key (shard 6) after the tie moved away is taken for the tie
# in its place: the moved tie comes again and the new item does not (a plain cursor never
# returns its own key's item). Left alone: it needs a layout lowered and raised again, and an
# item saved at that very key, between two pages. Saved into another shard, both are right:
@pytest.mark.parametrize("target", [7])
def test_random_new_item_saved_at_the_ties_vacated_key(dynamodb_models: Callable[..., Any], forward: bool,
                                                        target: int) -> None:
    dynamodb_models(Feed8, Feed4, Feed8Again)
    physical = shard_manager(Feed8).physical_key
    put_raw(Feed8, [{"feed": {"S": physical("feed", at % 8 + 1)}, "at": {"N": str(at)},
                     "body": {"S": f"item {at}"}} for at in range(40)])
    before = _rows(Feed8.query("feed", scan_index_forward=forward))
    cut = [at for at, _ in before].index(13) + 1
    first = Feed8.query("feed", scan_index_forward=forward, limit=cut)
    page = _rows(first)
    assert page[-1] == (13, "item 13")
    cursor = first.last_evaluated_key
    options = JobOptions(total_segments=1, page_size=100, threads=1,
                         checkpoint_table=f"pbreak7_ckpt_{uuid.uuid4().hex[:8]}")
    reshard(Feed4, options, key_prefix="feed")  # 13 leaves shard 6
    PICK.shard = target
    Feed8Again("feed", at=13, body="second 13").save()  # a second item of key (feed, 13)
    after = _rows(Feed8Again.query("feed", scan_index_forward=forward))
    assert sorted(after) == sorted([(a, f"item {a}") for a in range(40)] + [(13, "second 13")])
    resumed = _rows(Feed8Again.query("feed", scan_index_forward=forward, last_evaluated_key=cursor))
    # Each item once over the two pages: item 13 was on page 1, so it must not come again.
    assert sorted(page + resumed) == sorted(after), resumed[:3]


# DynamicShards, library operations only: shrink + compact + grow back, then a save lands in the
# shard the tie was moved out of.
KEY = "hot"
CLOCK = Clock(1_000_000.0)
APP_TIMER = Clock(0.0)
JOB_TIMER = Clock(0.0)


class ReuseShards(ShardMetadata):
    class Meta:
        table_name = "pbreak7_reuse_shards"


class PickRandom:
    """A random.Random stand-in: randint gives the chosen shard, the rest is seeded."""

    def __init__(self) -> None:
        import random

        self._r = random.Random(7)
        self.shard: int | None = None

    def randint(self, a: int, b: int) -> int:
        if self.shard is not None and a == 1 and a <= self.shard <= b:
            return self.shard
        return self._r.randint(a, b)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._r, name)


DPICK = PickRandom()


def _counts(timer: Clock, rnd: Any = None) -> DynamicShards:
    return DynamicShards(ReuseShards, max_shards=8, cache_ttl=10, clock_skew=1, clock=CLOCK, timer=timer,
                         random=rnd)


class App(ShardedModel):
    class Meta:
        table_name = "pbreak7_reuse_dyn"
        max_pool_connections = 16

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(_counts(APP_TIMER, DPICK))


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


def _grow_to(target: int) -> int:
    count = 0
    while count < target:
        count = App.shards.grow(KEY)
        _tick(12)
    return count


def _items(results: Any) -> list[tuple[int, int]]:
    return [(int(item.at), int(item.value)) for item in results]


def _where() -> list[tuple[int, int, int]]:
    return sorted((int(r["at"]["N"]), int(r["value"]["N"]), int(r["sensor"]["S"].rpartition("_")[2]))
                  for r in raw_items(App))


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("target", [3])  # not the tie's own key (4): see above
def test_dynamic_new_item_saved_at_the_ties_vacated_key(dynamodb_models: Callable[..., Any], forward: bool,
                                                         target: int) -> None:
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    DPICK.shard = None
    assert _grow_to(3) == 4
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(4, 13, 13)] + [_raw(2, a, a) for a in range(20, 25)])
    unpaged = _items(App.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((13, 13)) + 1
    first = App.query(KEY, scan_index_forward=forward, limit=cut)
    page = _items(first)
    assert page == unpaged[:cut]
    cursor = first.last_evaluated_key
    _tick(100)
    App.shards.shrink(KEY, to=2)
    _tick(12)
    compact(JobProc, JobOptions(total_segments=1, page_size=100, threads=1,
                                checkpoint_table=f"pbreak7_ckpt_{uuid.uuid4().hex[:8]}"))
    assert [s for at, _, s in _where() if at == 13] != [4]
    _tick(100)
    assert _grow_to(4) == 4
    _tick(100)
    assert shard_manager(App).read_shards(KEY) == (1, 2, 3, 4)  # the count, read into the cache
    DPICK.shard = target
    App(KEY, at=13, value=99).save()  # a second, different item at (hot, 13)
    DPICK.shard = None
    assert (13, 99, target) in _where()
    after = _items(App.query(KEY, scan_index_forward=forward))
    assert sorted(after) == sorted([*unpaged, (13, 99)])
    resumed = _items(App.query(KEY, scan_index_forward=forward, last_evaluated_key=cursor))
    assert sorted(page + resumed) == sorted(after), resumed[:3]


@pytest.mark.parametrize("forward", [True, False])
def test_control_dynamic_count_raised_twin_in_a_new_shard(dynamodb_models: Callable[..., Any], forward: bool) -> None:
    # Count 2; the page ends on 13 (shard 2). The key grows to 4 and an identical twin of 13 is
    # written into new shard 3, a different 13 into new shard 4: both come on the next page.
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    DPICK.shard = None
    assert _grow_to(2) == 2
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(2, 13, 13)] + [_raw(1, a, a) for a in range(20, 25)])
    unpaged = _items(App.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((13, 13)) + 1
    first = App.query(KEY, scan_index_forward=forward, limit=cut)
    page = _items(first)
    _tick(100)
    assert _grow_to(4) == 4
    put_raw(App, [_raw(3, 13, 13), _raw(4, 13, 77)])
    after = _items(App.query(KEY, scan_index_forward=forward))
    resumed = _items(App.query(KEY, scan_index_forward=forward, last_evaluated_key=first.last_evaluated_key))
    assert sorted(page + resumed) == sorted(after), resumed[:3]
    assert sorted(resumed[:2]) == [(13, 13), (13, 77)]
