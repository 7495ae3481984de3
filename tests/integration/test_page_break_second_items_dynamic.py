"""(Found by an adversarial trial.) a page break on an item a compaction then moves, while the key holds a second
item at the same sort value (DynamicShards, no unique_keys), read newest first."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding.migration import JobOptions, compact
from tests.clock import Clock
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "hot"
CLOCK = Clock(1_000_000.0)
APP_TIMER = Clock(0.0)
JOB_TIMER = Clock(0.0)


class BreakShards(ShardMetadata):
    class Meta:
        table_name = "pbreak_dyn_shards"


def _counts(timer: Clock) -> DynamicShards:
    return DynamicShards(BreakShards, max_shards=8, cache_ttl=10, clock_skew=1, clock=CLOCK, timer=timer)


class App(ShardedModel):
    class Meta:
        table_name = "pbreak_dyn_log"
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
    """(at, value, shard) of every item, from a raw scan."""
    return sorted((int(r["at"]["N"]), int(r["value"]["N"]), int(r["sensor"]["S"].rpartition("_")[2]))
                  for r in raw_items(App))


@pytest.fixture
def options() -> JobOptions:
    return JobOptions(total_segments=1, page_size=100, threads=1,
                      checkpoint_table=f"pbreak_ckpt_{uuid.uuid4().hex[:8]}")


def _grown(dynamodb_models: Callable[..., Any]) -> int:
    """The key grown to at least 3 shards; returns its count."""
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    count = 1
    while count < 3:
        count = App.shards.grow(KEY)
        _tick(12)
    return count


def _setup(dynamodb_models: Callable[..., Any]) -> int:
    """shard 1: 0..9 and a 13 (value 1013); top shard: a 13 (value 13, the one that will move);
    shard 2: 20..24."""
    count = _grown(dynamodb_models)
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(1, 13, 1013)]
            + [_raw(count, 13, 13)] + [_raw(2, a, a) for a in range(20, 25)])
    return count


def _items(results: Any) -> list[tuple[int, int]]:
    return [(int(item.at), int(item.value)) for item in results]



# Newest first over 4 shards: at 13 the top shard's item comes before shard 1's.
UNPAGED = [(a, a) for a in range(24, 19, -1)] + [(13, 13), (13, 1013)] + [(a, a) for a in range(9, -1, -1)]
# What the page after the first 6 items (ending on the top shard's 13) must be.
REST = [(13, 1013)] + [(a, a) for a in range(9, -1, -1)]


def _first_page(dynamodb_models: Callable[..., Any], **kwargs: Any) -> tuple[int, list[tuple[int, int]], Any]:
    count = _setup(dynamodb_models)
    assert count == 4
    assert _items(App.query(KEY, scan_index_forward=False, **kwargs)) == UNPAGED
    first = App.query(KEY, scan_index_forward=False, limit=6, **kwargs)
    page = _items(first)
    assert page == UNPAGED[:6]
    assert page[-1] == (13, 13)  # the top shard's 13; shard 1's 13 (value 1013) is not returned yet
    _tick(100)
    App.shards.shrink(KEY, to=2)
    _tick(12)
    return count, page, first.last_evaluated_key


def test_newest_first_page_ends_on_top_shard_item_then_compaction_trims(
        dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
    _, _page, cursor = _first_page(dynamodb_models)
    report = compact(JobProc, options)
    assert report.tally.moved == 1
    assert any("trimmed 1 keys" in note for note in report.notes), report.notes
    assert stored()[10:12] == [(13, 13, 2), (13, 1013, 1)]  # the top shard's 13 moved into shard 2
    assert _items(App.query(KEY, scan_index_forward=False)) == UNPAGED  # unpaged: each once
    resumed = _items(App.query(KEY, scan_index_forward=False, last_evaluated_key=cursor))
    assert resumed == REST


def test_newest_first_page_ends_on_top_shard_item_then_it_moves_while_read_first(
        dynamodb_models: Callable[..., Any]) -> None:
    count, _page, cursor = _first_page(dynamodb_models)
    move_item(App, KEY, 13, source=count, target=2)  # shard 1 holds a 13 already: the job puts it in shard 2
    assert shard_manager(App).moving_out(KEY) == (3, 4)
    assert _items(App.query(KEY, scan_index_forward=False)) == UNPAGED
    resumed = _items(App.query(KEY, scan_index_forward=False, last_evaluated_key=cursor))
    assert resumed == REST


def test_newest_first_page_ends_on_top_shard_item_then_the_app_deletes_it(
        dynamodb_models: Callable[..., Any]) -> None:
    # Nothing moves: the application deletes the item the page ended on (in the shard read first).
    count, _page, cursor = _first_page(dynamodb_models)
    botocore_client(App).delete_item(TableName=App.Meta.table_name, Key={
        "sensor": {"S": shard_manager(App).physical_key(KEY, count)}, "at": {"N": "13"}})
    unpaged_after = _items(App.query(KEY, scan_index_forward=False))
    assert unpaged_after == [x for x in UNPAGED if x != (13, 13)]
    resumed = _items(App.query(KEY, scan_index_forward=False, last_evaluated_key=cursor))
    assert resumed == REST  # shard 1's 13 was never touched


def test_newest_first_filtered_page_ends_on_item_then_it_stops_matching(
        dynamodb_models: Callable[..., Any]) -> None:
    # Nothing moves: the item the page ended on no longer matches the filter.
    count, _page, cursor = _first_page(dynamodb_models, filter_condition=App.value >= 0)
    botocore_client(App).update_item(TableName=App.Meta.table_name, Key={
        "sensor": {"S": shard_manager(App).physical_key(KEY, count)}, "at": {"N": "13"}},
        UpdateExpression="SET #v = :v", ExpressionAttributeNames={"#v": "value"},
        ExpressionAttributeValues={":v": {"N": "-1"}})
    unpaged_after = _items(App.query(KEY, scan_index_forward=False, filter_condition=App.value >= 0))
    assert unpaged_after == [x for x in UNPAGED if x != (13, 13)]
    resumed = _items(App.query(KEY, scan_index_forward=False, filter_condition=App.value >= 0,
                               last_evaluated_key=cursor))
    assert resumed == REST


def test_async_resume_of_the_same_cursor(dynamodb_models: Callable[..., Any], loop: Any) -> None:
    from tests.async_loop import collect

    count, _page, cursor = _first_page(dynamodb_models)
    move_item(App, KEY, 13, source=count, target=2)
    items, _, _ = loop.run(collect(App.aquery(KEY, scan_index_forward=False, last_evaluated_key=cursor)))
    assert [(int(i.at), int(i.value)) for i in items] == REST


def test_count_is_right(dynamodb_models: Callable[..., Any]) -> None:
    count, _page, _cursor = _first_page(dynamodb_models)
    move_item(App, KEY, 13, source=count, target=2)
    assert App.count(KEY) == len(UNPAGED)


# A key shrunk, compacted (the tie moved down, the history trimmed) and grown back before the
# next page: the tie's place is a current shard again, read through its value without it.


def _grow_to(target: int) -> int:
    count = 0
    while count < target:
        count = App.shards.grow(KEY)
        _tick(12)
    return count


def _page_ending_on_the_top_shard(dynamodb_models: Callable[..., Any],
                                  forward: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]], Any]:
    """The key grown to 4 shards: shard 1 holds 0..9, shard 2 20..24, the top shard 4 holds 13;
    the unpaged items, and the first page, which ends on 13, with its results."""
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now = 1_000_000.0, 0.0, 0.0
    assert _grow_to(3) == 4
    put_raw(App, [_raw(1, a, a) for a in range(10)] + [_raw(4, 13, 13)] + [_raw(2, a, a) for a in range(20, 25)])
    unpaged = _items(App.query(KEY, scan_index_forward=forward))
    cut = unpaged.index((13, 13)) + 1
    first = App.query(KEY, scan_index_forward=forward, limit=cut)
    page = _items(first)
    assert page == unpaged[:cut]
    return unpaged, page, first


@pytest.mark.parametrize("forward", [False, True])
@pytest.mark.parametrize("token", [False, True])
def test_page_ends_on_top_shard_item_compacted_down_then_key_regrown(
        dynamodb_models: Callable[..., Any], forward: bool, token: bool) -> None:
    unpaged, page, first = _page_ending_on_the_top_shard(dynamodb_models, forward)
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
    unpaged, page, first = _page_ending_on_the_top_shard(dynamodb_models, forward)
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
    unpaged, page, first = _page_ending_on_the_top_shard(dynamodb_models, forward)
    _tick(100)
    App.shards.shrink(KEY, to=2)
    _tick(12)
    move_item(App, KEY, 13, source=4, target=2)
    _tick(100)
    _grow_to(4)
    resumed = _items(App.query(KEY, scan_index_forward=forward, last_evaluated_key=first.last_evaluated_key))
    assert page + resumed == unpaged, resumed[:3]
