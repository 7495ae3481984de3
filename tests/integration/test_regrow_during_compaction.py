"""A DynamicShards key grown again while a compaction still moves its items down (DynamoDB Local).

The key was grown to 2, shrunk to 1 and the settle time passed: a compaction plans its moves
out of shard 2 with the count 1. Before it sends them, the application grows the key to 2
again (a throttle after the cooldown, or ``grow()``). The job goes on with the moves it
planned (its count is cached, its page planned); a merged read of the grown key must still
treat shard 2 as moved out of (read first), or it misses the items that move behind it (found
by an adversarial trial: 25 of 35 items returned, ``count()`` 15 of 35, without an error).

Two "processes" share one table and one metadata table: JobProc runs ``compact``; App reads
and grows. Each has its own count cache. Time is an injected clock, so nothing sleeps.

Items: shard 1 holds at=0..9 and 200..204, shard 2 holds at=100..119 (35 items). A merged query
with page_size=5 that has returned 0..9,100,101 has read shard 1 up to 204 (its page [200..204]
is prefetched) but shard 2 only up to 109: an item moved from shard 2 (110..119) into shard 1
now lies behind shard 1's position and is gone from shard 2.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import (
    DynamicShards,
    ShardCountLoweredError,
    ShardedModel,
    Sharding,
    ShardMetadata,
    _shard_requests,
)
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._dynamic import CountWatch
from pynamodb_sharding._fanout import planned_floor
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._keys import FIRST_READ, LEGACY_SHARD
from pynamodb_sharding._merge import ShardMerge
from pynamodb_sharding.migration import JobOptions, compact
from tests.clock import Clock
from tests.item_moves import move_item
from tests.raw import put_raw, raw_items

KEY = "hot"
CLOCK = Clock(1_000_000.0)          # epoch seconds, shared by both processes (no skew)
APP_TIMER = Clock(0.0)              # the app's cache timer
JOB_TIMER = Clock(0.0)              # the job's cache timer
OTHER_TIMER = Clock(0.0)            # a second job's cache timer


class LeadShards(ShardMetadata):
    class Meta:
        table_name = "regrow_compact_shards"


def _counts(timer: Clock) -> DynamicShards:
    """One process's DynamicShards of the table: the same settings, its own cache timer."""
    return DynamicShards(LeadShards, max_shards=8, cache_ttl=10, clock_skew=1, clock=CLOCK, timer=timer)


class App(ShardedModel):
    class Meta:
        table_name = "regrow_compact_log"
        max_pool_connections = 16

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(_counts(timer=APP_TIMER))


class JobProc(ShardedModel):
    """The compaction job's process: same table, its own cache."""

    Meta = App.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(_counts(timer=JOB_TIMER))


class OtherJobProc(ShardedModel):
    """A second compaction run's process (another worker, or a run started again)."""

    Meta = App.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(_counts(timer=OTHER_TIMER))


EXPECTED = [*range(10), *range(100, 120), *range(200, 205)]


def stored() -> dict[int, int]:
    """at -> shard, as the table holds it."""
    return {int(r["at"]["N"]): int(r["sensor"]["S"].rpartition("_")[2]) for r in raw_items(App)}


@pytest.fixture
def options() -> JobOptions:
    return JobOptions(total_segments=1, page_size=100, threads=1,
                      checkpoint_table=f"regrow_ckpt_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def shrunk(dynamodb_models: Callable[..., Any]) -> None:
    """Key grown to 2 (30 items over shards 1 and 2), then shrunk to 1, settled."""
    dynamodb_models(App, JobProc, OtherJobProc)
    CLOCK.now = 1_000_000.0
    APP_TIMER.now = JOB_TIMER.now = OTHER_TIMER.now = 0.0
    assert App.shards.grow(KEY) == 2
    CLOCK.now += 12  # growth in effect (cache_ttl + clock_skew = 11)
    APP_TIMER.now += 12
    manager = shard_manager(App)
    put_raw(App, [{"sensor": {"S": manager.physical_key(KEY, 1)}, "at": {"N": str(a)}, "value": {"N": str(a)}}
                  for a in [*range(10), *range(200, 205)]]
            + [{"sensor": {"S": manager.physical_key(KEY, 2)}, "at": {"N": str(a)}, "value": {"N": str(a)}}
               for a in range(100, 120)])
    assert sorted(int(i.at) for i in App.query(KEY, consistent_read=True)) == EXPECTED
    CLOCK.now += 100
    APP_TIMER.now += 100
    assert App.shards.shrink(KEY, to=1) == 1
    CLOCK.now += 12  # past settle: compaction may move shard 2's items
    APP_TIMER.now += 12
    JOB_TIMER.now += 112
    OTHER_TIMER.now += 112


def _on_first_move(model: type[Any], action: Callable[[], None]) -> Callable[[], None]:
    """Run ``action`` once, just before the job's first TransactWriteItems is sent."""
    client = botocore_client(model)
    fired = []

    def hook(**_: Any) -> None:
        if not fired:
            fired.append(True)
            action()

    client.meta.events.register("before-call.dynamodb.TransactWriteItems", hook, unique_id="regrow-hook")
    return lambda: client.meta.events.unregister("before-call.dynamodb.TransactWriteItems",
                                                 unique_id="regrow-hook")


@pytest.mark.usefixtures("shrunk")
def test_a_query_of_the_grown_key_while_the_planned_moves_run_returns_every_item(options: JobOptions) -> None:
    held: dict[str, Any] = {}

    def regrow_and_start_query() -> None:
        assert App.shards.grow(KEY) == 2
        held["moving_out"] = shard_manager(App).moving_out(KEY)
        results = iter(App.query(KEY, page_size=5))
        held["first"] = [int(next(results).at) for _ in range(12)]
        held["results"] = results

    undo = _on_first_move(JobProc, regrow_and_start_query)
    try:
        report = compact(JobProc, options)
    finally:
        undo()
    got = held["first"] + [int(item.at) for item in held["results"]]
    assert report.tally.moved == 20  # the moves planned with the count 1 went on
    assert held["moving_out"] == (2,)  # the grown key's shard 2: still moved out of
    assert got == EXPECTED  # in order, each once
    assert sorted(stored()) == EXPECTED  # the table holds each item once
    assert sorted(int(item.at) for item in App.query(KEY, consistent_read=True)) == EXPECTED


@pytest.mark.usefixtures("shrunk")
def test_a_count_of_the_grown_key_while_the_planned_moves_run_counts_every_item(
        options: JobOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    # Shard 1's requests wait until the job's moves are done; shard 2's go at once.
    manager = shard_manager(App)
    shard1, shard2 = manager.physical_key(KEY, 1), manager.physical_key(KEY, 2)
    shard2_read, moves_done = threading.Event(), threading.Event()
    result: dict[str, Any] = {}
    original = _shard_requests.ShardQuery.__call__

    def held(self: Any, hash_value: Any, start: Any, limit: Any = None) -> Any:
        if "counting" in result and hash_value == shard1:
            assert moves_done.wait(60)
        reply = original(self, hash_value, start, limit)
        if "counting" in result and hash_value == shard2:
            shard2_read.set()
        return reply

    monkeypatch.setattr(_shard_requests.ShardQuery, "__call__", held)

    def count() -> None:
        try:
            result["count"] = App.count(KEY)
        except BaseException as exc:  # reported below
            result["error"] = exc
            shard2_read.set()

    def regrow_and_start_count() -> None:
        assert App.shards.grow(KEY) == 2
        result["counting"] = True
        result["thread"] = thread = threading.Thread(target=count)
        thread.start()
        assert shard2_read.wait(60)  # shard 2 counted before the moves

    undo = _on_first_move(JobProc, regrow_and_start_count)
    try:
        report = compact(JobProc, options)
    finally:
        undo()
        moves_done.set()
    result["thread"].join(60)
    assert "error" not in result
    assert report.tally.moved == 20
    assert result["count"] == len(EXPECTED)  # each item once: not 15, not 55
    assert len(stored()) == len(EXPECTED)


@pytest.mark.usefixtures("shrunk")
def test_without_a_regrow_shard_2_is_read_first_too(options: JobOptions) -> None:
    held: dict[str, Any] = {}

    def start_query() -> None:
        App.shards.refresh(KEY)
        held["moving_out"] = shard_manager(App).moving_out(KEY)
        results = iter(App.query(KEY, page_size=5))
        held["first"] = [int(next(results).at) for _ in range(12)]
        held["results"] = results

    undo = _on_first_move(JobProc, start_query)
    try:
        compact(JobProc, options)
    finally:
        undo()
    assert held["moving_out"] == (2,)
    assert held["first"] + [int(item.at) for item in held["results"]] == EXPECTED


def test_once_the_compaction_trimmed_the_history_the_grown_key_reads_its_shards_at_once(
        dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now, OTHER_TIMER.now = 1_000_000.0, 0.0, 0.0, 0.0
    assert App.shards.grow(KEY) == 2
    _tick(12)
    for at in range(20):
        App(KEY, at, value=at).save()
    _tick(100)
    App.shards.shrink(KEY, to=1)
    _tick(12)
    report = compact(JobProc, options)
    assert any("trimmed 1 keys" in note for note in report.notes), report.notes
    assert App.shards.refresh(KEY) == 1
    _tick(100)
    assert App.shards.grow(KEY) == 2
    assert shard_manager(App).moving_out(KEY) == ()  # no shrink left in the history: no read first
    assert sorted(int(item.at) for item in App.query(KEY)) == list(range(20))


def _tick(seconds: float) -> None:
    """Every process's clocks move together (no skew)."""
    CLOCK.now += seconds
    APP_TIMER.now += seconds
    JOB_TIMER.now += seconds
    OTHER_TIMER.now += seconds


def _grown_with_items(dynamodb_models: Callable[..., Any]) -> None:
    """The key at 2 shards: shard 1 holds 0..9 and 200..204, shard 2 holds 100..119."""
    dynamodb_models(App, JobProc)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now, OTHER_TIMER.now = 1_000_000.0, 0.0, 0.0, 0.0
    assert App.shards.grow(KEY) == 2
    _tick(12)
    manager = shard_manager(App)
    put_raw(App, [{"sensor": {"S": manager.physical_key(KEY, 1)}, "at": {"N": str(a)}, "value": {"N": str(a)}}
                  for a in [*range(10), *range(200, 205)]]
            + [{"sensor": {"S": manager.physical_key(KEY, 2)}, "at": {"N": str(a)}, "value": {"N": str(a)}}
               for a in range(100, 120)])


@pytest.mark.parametrize("shard_2_next_page", ["landed", "held"])
def test_a_query_kept_open_across_a_shrink_and_its_compaction_stops_and_resumes_exactly(
        dynamodb_models: Callable[..., Any], options: JobOptions, monkeypatch: pytest.MonkeyPatch,
        shard_2_next_page: str) -> None:
    # An export reads part of the key, then waits; meanwhile the key is shrunk and compacted:
    # shard 2's 110..119 move into shard 1, behind the page of shard 1 the query holds.
    # Shard 2's next page (105..109) is prefetched while the export waits: either it landed
    # before the job ran, or its request is held until the job is done (it then reads nothing
    # left in shard 2). Both are made to happen, not left to the threads' timing.
    _grown_with_items(dynamodb_models)
    submitted: list[Future[Any]] = []
    submit = ShardMerge._submit

    def recorded(self: ShardMerge, shard: int, start: Any) -> Future[Any]:
        future = submit(self, shard, start)
        submitted.append(future)
        return future

    monkeypatch.setattr(ShardMerge, "_submit", recorded)
    job_done, holding = threading.Event(), threading.Event()
    if shard_2_next_page == "held":
        original = _shard_requests.ShardQuery.__call__
        shard_2 = shard_manager(App).physical_key(KEY, 2)

        def held(self: Any, hash_value: Any, start: Any, limit: Any = None) -> Any:
            if self._model is App and hash_value == shard_2 and start is not None and not job_done.is_set():
                holding.set()
                assert job_done.wait(60), "the compaction did not finish"
            return original(self, hash_value, start, limit)

        monkeypatch.setattr(_shard_requests.ShardQuery, "__call__", held)
    results = App.query(KEY, page_size=5)
    got = [int(next(results).at) for _ in range(12)]
    if shard_2_next_page == "landed":
        assert all(future.exception(60) is None for future in list(submitted))
    else:
        assert holding.wait(60), "shard 2's next page was not requested"
    _tick(100)
    App.shards.shrink(KEY, to=1)
    _tick(12)
    report = compact(JobProc, options)
    job_done.set()
    assert report.tally.moved == 20
    with pytest.raises(ShardCountLoweredError, match=r"App: the shard count of key 'hot' was lowered \(to 1\) "
                                                     r"while this merged read was open .* resume the read"):
        for item in results:
            got.append(int(item.at))
    assert got == EXPECTED[:len(got)]  # what it returned before it stopped is right
    resumed = [int(item.at) for item in App.query(KEY, last_evaluated_key=results.last_evaluated_key)]
    # The rest, in order, each once. The item it stopped after was in shard 2, and the job moved
    # it into shard 1: the resumed query reads shard 2 no more (trimmed), so that copy is it.
    assert got[-1] == (109 if shard_2_next_page == "landed" else 104)
    assert got + resumed == EXPECTED


def test_a_count_kept_open_across_a_shrink_stops(dynamodb_models: Callable[..., Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _grown_with_items(dynamodb_models)
    check = CountWatch.__call__
    shrunk: list[bool] = []

    def shrink_first(self: CountWatch) -> None:
        # A shard's page came back after the count was planned; then the count waits and the
        # key shrinks, before the page is checked (the check runs after every page, on
        # whichever thread took it, so the shrink cannot land before the plan).
        if not shrunk:
            shrunk.append(True)
            _tick(100)
            App.shards.shrink(KEY, to=1)
            _tick(12)
        check(self)

    monkeypatch.setattr(CountWatch, "__call__", shrink_first)
    with pytest.raises(ShardCountLoweredError):
        App.count(KEY)
    assert shrunk


def test_a_query_kept_open_without_a_shrink_goes_on(dynamodb_models: Callable[..., Any]) -> None:
    _grown_with_items(dynamodb_models)
    results = App.query(KEY, page_size=5)
    got = [int(next(results).at) for _ in range(12)]
    _tick(100)
    App.shards.grow(KEY)  # a growth moves nothing: the query goes on
    _tick(100)
    got.extend(int(item.at) for item in results)
    assert got == EXPECTED


class UncachedShards(ShardMetadata):
    class Meta:
        table_name = "regrow_uncached_shards"


class Uncached(ShardedModel):
    """A table whose fleet protocol caches no count."""

    class Meta:
        table_name = "regrow_uncached"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(UncachedShards, max_shards=8, cache_ttl=0))


def test_a_read_of_a_key_whose_count_is_not_cached_has_no_watch(dynamodb_models: Callable[..., Any]) -> None:
    # cache_ttl=0: a job moves at once after a shrink; no read is known safe for any time, and
    # checking the count after every page would cost a request a page.
    dynamodb_models(App, Uncached)
    CLOCK.now, APP_TIMER.now, JOB_TIMER.now, OTHER_TIMER.now = 1_000_000.0, 0.0, 0.0, 0.0
    assert shard_manager(Uncached).strategy.settle_seconds() == 0  # type: ignore[attr-defined]
    assert shard_manager(Uncached).count_watch("k") is None
    assert shard_manager(App).count_watch("k") is not None


@pytest.mark.usefixtures("shrunk")
def test_another_run_does_not_trim_the_grown_key_while_the_first_still_moves(options: JobOptions) -> None:
    # Found by a second adversarial trial: run B planned its moves with the count 1; the key is
    # grown again, and past the settle time a second run A compacts: it must not trim the
    # key's history (B still moves shard 2's items down), or a query reads the shards at once.
    held: dict[str, Any] = {}

    def regrow_another_run_then_query() -> None:
        assert App.shards.grow(KEY) == 2
        _tick(12)  # B's page of moves goes on (a rate-limited page takes minutes)
        other = JobOptions(total_segments=1, page_size=100, threads=1,
                           checkpoint_table=f"regrow_ckpt_{uuid.uuid4().hex[:8]}")
        held["notes"] = compact(OtherJobProc, other).notes
        App.shards.refresh(KEY)
        held["moving_out"] = shard_manager(App).moving_out(KEY)
        results = iter(App.query(KEY, page_size=5))
        held["first"] = [int(next(results).at) for _ in range(12)]
        held["results"] = results

    undo = _on_first_move(JobProc, regrow_another_run_then_query)
    try:
        report = compact(JobProc, options)
    finally:
        undo()
    assert report.tally.moved == 20
    assert any("trimmed 0 keys" in note for note in held["notes"]), held["notes"]
    assert held["moving_out"] == (2,)
    assert held["first"] + [int(item.at) for item in held["results"]] == EXPECTED
    assert sorted(stored()) == EXPECTED


@pytest.mark.parametrize(("streams", "first_reads", "floor"), [
    ((1, 2, 3, 4), (), 4),                       # nothing read first: its shards
    ((1, 2, 3, 4), (3, 4), 2),                   # shards 3 and 4 read first: a floor of 2
    ((1, 2, FIRST_READ + 2), (FIRST_READ + 2,), 1),  # shard 2 read first and again as written
    ((LEGACY_SHARD, 1, 2), (LEGACY_SHARD,), 2),  # a bare legacy key is not a shard
])
def test_the_floor_a_read_is_planned_with(streams: tuple[int, ...], first_reads: tuple[int, ...], floor: int) -> None:
    assert planned_floor(App, dict.fromkeys(streams, "value"), frozenset(first_reads)) == floor




def test_a_page_boundary_before_a_shrink_and_its_compaction_repeats_nothing(
        dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
    # A web page of 20 items ends on 109 of shard 2; before the next page is asked for, the key
    # is shrunk and compacted (109 and the rest of shard 2 move into shard 1, and the history
    # is trimmed: shard 2 is read no more). The next page starts right after 109, once each.
    _grown_with_items(dynamodb_models)
    first = App.query(KEY, limit=20)
    page = [int(item.at) for item in first]
    assert page == EXPECTED[:20]
    assert page[-1] == 109
    cursor = first.last_evaluated_key
    _tick(100)
    App.shards.shrink(KEY, to=1)
    _tick(12)
    report = compact(JobProc, options)
    assert any("trimmed 1 keys" in note for note in report.notes), report.notes
    assert set(stored().values()) == {1}
    assert page + [int(item.at) for item in App.query(KEY, last_evaluated_key=cursor)] == EXPECTED


def test_a_page_boundary_before_its_item_moves_out_of_a_shard_read_first_repeats_nothing(
        dynamodb_models: Callable[..., Any]) -> None:
    # As above, but the next page comes while the compaction is under way: 109 has moved into
    # shard 1, 110..119 are still in shard 2, which is read first.
    _grown_with_items(dynamodb_models)
    first = App.query(KEY, limit=20)
    page = [int(item.at) for item in first]
    assert page[-1] == 109
    _tick(100)
    App.shards.shrink(KEY, to=1)
    _tick(12)
    move_item(App, KEY, 109, source=2, target=1)
    assert shard_manager(App).moving_out(KEY) == (2,)
    resumed = [int(item.at) for item in App.query(KEY, last_evaluated_key=first.last_evaluated_key)]
    assert page + resumed == EXPECTED
    assert sorted(int(item.at) for item in App.query(KEY)) == EXPECTED  # the table holds 109 once


def test_a_second_item_of_the_key_after_a_page_boundary_is_returned_while_the_shard_is_read_first(
        dynamodb_models: Callable[..., Any]) -> None:
    # Two items stored under one key (an unconditional save of a new instance on
    # DynamicShards): 109 in shard 2 and another 109 in shard 1. Newest first, a page ends on
    # shard 2's; the key is then shrunk (shard 2 is read first) but nothing moves yet. The next
    # page starts with shard 1's 109: it is a second item, not a copy of the one returned.
    _grown_with_items(dynamodb_models)
    manager = shard_manager(App)
    put_raw(App, [{"sensor": {"S": manager.physical_key(KEY, 1)}, "at": {"N": "109"}, "value": {"N": "9109"}}])
    newest_first = [*range(204, 199, -1), *range(119, 109, -1), 109, 109, *range(108, 99, -1), *range(9, -1, -1)]
    assert [int(item.at) for item in App.query(KEY, scan_index_forward=False)] == newest_first
    first = App.query(KEY, scan_index_forward=False, limit=16)
    page = [(int(item.at), int(item.value)) for item in first]
    assert page[-1] == (109, 109)  # shard 2's
    _tick(100)
    App.shards.shrink(KEY, to=1)
    _tick(12)
    assert shard_manager(App).moving_out(KEY) == (2,)
    resumed = [(int(item.at), int(item.value))
               for item in App.query(KEY, scan_index_forward=False, last_evaluated_key=first.last_evaluated_key)]
    assert resumed[0] == (109, 9109)  # shard 1's, returned once
    assert [at for at, _ in page + resumed] == newest_first
