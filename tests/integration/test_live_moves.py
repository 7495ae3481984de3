"""Reshard and compact on a table the application keeps using: jobs that run twice, and writes
of items loaded before a job moved them.

Each test holds items loaded before the job across it (never a sleep), then writes them, and
checks what a user reads and what the table holds (raw boto3 scans). Points of issue 23:

9. a second reshard of the same table (4 -> 16, then 16 -> 32) moves what the new layout needs:
   a job's checkpoints belong to the layout it moves to;
10. compact run again moves what writers put above the count since, and trims the history;
11. ``save()``/``update()``/``delete()``/``batch_write`` of an item loaded before a reshard moved
    it land where reads look, once, with the user's change, also while its move is in flight;
12. the same after a compaction trimmed the history.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.httpsession import URLLib3Session
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, HashedShards, RandomShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding._fanout import merged_query
from pynamodb_sharding._query_plan import QuerySpec
from pynamodb_sharding._strategies import md5_shard
from pynamodb_sharding.migration import JobOptions, compact, reshard
from pynamodb_sharding.migration._engine import RateLimiter, _Sender
from pynamodb_sharding.migration._jobs import Move, ReshardJob
from tests.clock import Clock
from tests.raw import put_raw, raw_items

KEY = "sensor"


class Layout4(ShardedModel):
    class Meta:
        table_name = "live_layouts"
        max_pool_connections = 32

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(HashedShards(4))


class Layout16(ShardedModel):
    Meta = Layout4.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(HashedShards(16, previous_counts=(4,)))


class Layout32(ShardedModel):
    Meta = Layout4.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(HashedShards(32, previous_counts=(16,)))


class Layout32Only(ShardedModel):
    """The 32-shard layout once ``previous_counts`` is dropped: reads cover 32 shards only."""

    Meta = Layout4.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(HashedShards(32))


def stored() -> collections.Counter[tuple[str, int, int]]:
    """``(stored hash key, at, value)`` of every item, counted (a duplicate counts twice)."""
    return collections.Counter((raw["sensor"]["S"], int(raw["at"]["N"]), int(raw["value"]["N"]))
                               for raw in raw_items(Layout4))


def shard_of(at: int, count: int) -> int:
    return md5_shard(f"{KEY}{at}".encode(), count)


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    """Job options with a checkpoint table of the test's own, deleted afterwards."""
    return JobOptions(total_segments=2, page_size=25, checkpoint_table=checkpoint_table)


@pytest.fixture
def layouts(dynamodb_models: Callable[..., Any]) -> None:
    """40 items written under 4 shards."""
    dynamodb_models(Layout4, Layout16, Layout32, Layout32Only)
    with Layout4.batch_write() as batch:
        for at in range(40):
            batch.save(Layout4(KEY, at, value=at))


@pytest.mark.usefixtures("layouts")
class TestReshardTwice:
    """A job's checkpoints belong to the layout it moves to."""

    def test_second_reshard_moves_to_the_new_layout(self, options: JobOptions) -> None:
        first = reshard(Layout16, options)
        assert first.complete
        assert sum(1 for at in range(40) if shard_of(at, 16) != shard_of(at, 4)) == first.tally.moved
        second = reshard(Layout32, options)
        assert second.complete
        assert sum(1 for at in range(40) if shard_of(at, 32) != shard_of(at, 16)) == second.tally.moved > 0
        assert collections.Counter((f"{KEY}_{shard_of(at, 32)}", at, at) for at in range(40)) == stored()
        for at in range(40):  # previous_counts dropped: every item is where 32 shards say
            assert at == Layout32Only.get(KEY, at).value
        assert 40 == Layout32Only.count(KEY)

    def test_a_finished_reshard_run_again_is_a_new_pass(self, options: JobOptions) -> None:
        reshard(Layout16, options)
        Layout4(KEY, 100, value=100).save()  # an old-layout writer still running
        again = reshard(Layout16, options)
        assert (again.tally.read, again.complete) == (41, True)
        assert (1 if shard_of(100, 16) != shard_of(100, 4) else 0) == again.tally.moved
        assert (f"{KEY}_{shard_of(100, 16)}", 100, 100) in stored()


def _loaded() -> list[Layout16]:
    """Items loaded through the 16-shard model before the reshard: pinned to their 4-shard copies."""
    moving = [at for at in range(40) if shard_of(at, 16) != shard_of(at, 4)]
    assert len(moving) >= 20
    items = [Layout16.get(KEY, at) for at in moving[:20]]
    assert all(item.shards == shard_of(int(item.at), 4) for item in items)
    return items


@pytest.mark.usefixtures("layouts")
class TestWritesAfterAReshardMovedTheItem:
    """Loaded before the move, written after: once, where reads look, with the change."""

    def test_save_update_delete(self, options: JobOptions) -> None:
        items = _loaded()
        assert reshard(Layout16, options).complete
        saved, updated, deleted = items[:7], items[7:14], items[14:]
        for item in saved:
            item.value = -int(item.at)
            item.save()
        for item in updated:
            item.update(actions=[Layout16.value.set(-int(item.at))])
        for item in deleted:
            item.delete()
        gone = {int(item.at) for item in deleted}
        expected = collections.Counter(
            (f"{KEY}_{shard_of(at, 16)}", at, -at if at in {int(i.at) for i in items} else at)
            for at in range(40) if at not in gone)
        assert expected == stored()  # 34 items, each once, in its 16-shard place
        for item in saved + updated:
            assert -int(item.at) == Layout16.get(KEY, item.at).value  # no ShardLocationError
            assert item.shards == shard_of(int(item.at), 16)
        assert 40 - len(gone) == Layout16.count(KEY)

    def test_batch_write(self, options: JobOptions) -> None:
        items = _loaded()
        assert reshard(Layout16, options).complete
        with Layout16.batch_write() as batch:
            for item in items[:10]:
                item.value = 1000
                batch.save(item)
            for item in items[10:]:
                batch.delete(item)
        changed, gone = {int(i.at) for i in items[:10]}, {int(i.at) for i in items[10:]}
        expected = collections.Counter((f"{KEY}_{shard_of(at, 16)}", at, 1000 if at in changed else at)
                                       for at in range(40) if at not in gone)
        assert expected == stored()

    def test_save_before_the_move_then_the_move(self, options: JobOptions) -> None:
        """The job read the item, then the application saved its change, then the job's move ran."""
        (item,) = _loaded()[:1]
        job = ReshardJob(Layout16)
        raw = next(raw for raw in raw_items(Layout4) if raw["at"]["N"] == str(item.at))
        move = job.plan(raw)
        assert isinstance(move, Move)
        item.value = -1
        item.save()  # moves it itself, with the change
        assert 0 == _Sender(job, RateLimiter(None)).move(move).moved  # finds it gone: skipped
        at = int(item.at)
        assert 1 == sum(n for (key, a, _), n in stored().items() if a == at)
        assert {(f"{KEY}_{shard_of(at, 16)}", at, -1)} == {k for k in stored() if k[1] == at}

    def test_update_in_place_while_the_move_is_in_flight(self) -> None:
        """The job read the item; the application updated the old copy; the move moves the update."""
        (item,) = _loaded()[:1]
        job = ReshardJob(Layout16)
        raw = next(raw for raw in raw_items(Layout4) if raw["at"]["N"] == str(item.at))
        move = job.plan(raw)
        assert isinstance(move, Move)
        item.update(actions=[Layout16.value.set(-7)])  # guarded: the old copy is still there
        assert 1 == _Sender(job, RateLimiter(None)).move(move).moved  # re-read, moved as it is now
        at = int(item.at)
        assert {(f"{KEY}_{shard_of(at, 16)}", at, -7)} == {k for k in stored() if k[1] == at}
        assert -7 == Layout16.get(KEY, at).value


CLOCK = Clock(1_000_000.0)
STALE_TIMER = Clock(1_000_000.0)  # another process's cache timer, which the test never moves


class LiveShards(ShardMetadata):
    class Meta:
        table_name = "live_compact_shards"


class LiveLog(ShardedModel):
    class Meta:
        table_name = "live_compact_log"
        max_pool_connections = 16

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(DynamicShards(LiveShards, max_shards=8, cache_ttl=60, clock=CLOCK, timer=CLOCK))


class OtherProcess(ShardedModel):
    """The same table written by another process, whose cache still holds the count of 4."""

    Meta = LiveLog.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(DynamicShards(LiveShards, max_shards=8, cache_ttl=60, clock=CLOCK, timer=STALE_TIMER))


def compact_stored() -> collections.Counter[tuple[int, int, int]]:
    """``(shard, at, value)`` of every item of the compacted table."""
    return collections.Counter((int(raw["sensor"]["S"].rpartition("_")[2]), int(raw["at"]["N"]),
                                int(raw["value"]["N"])) for raw in raw_items(LiveLog))


@pytest.fixture
def grown(dynamodb_models: Callable[..., Any]) -> None:
    """A key grown to 4 shards with 40 items, then shrunk to 1 at CLOCK.now."""
    dynamodb_models(LiveLog, OtherProcess)
    CLOCK.now = 1_000_000.0
    LiveLog.shards.grow(KEY)
    LiveLog.shards.grow(KEY)
    assert 4 == LiveLog.shards.shard_count(KEY)
    CLOCK.now += 60 + 1 + 1  # the growths are in effect (cached reads: cache_ttl + clock_skew later)
    for at in range(40):
        LiveLog(KEY, at, value=at).save()
    assert 4 == OtherProcess.shards.shard_count(KEY)  # cached in the other process
    CLOCK.now += 100
    LiveLog.shards.shrink(KEY, to=1)


@pytest.mark.usefixtures("grown")
class TestCompactRunAgain:
    """Each run moves what lies above the count once every writer can know the count."""

    def test_runs_inside_and_after_the_cache_ttl(self, options: JobOptions) -> None:
        above = sum(1 for shard, _, _ in compact_stored() if shard > 1)
        assert above > 10
        CLOCK.now += 10  # inside the TTL: writers may still write under 4
        first = compact(LiveLog, options)
        assert (first.tally.moved, first.tally.waiting) == (0, above)
        assert any("waiting" in note and "61 s" in note for note in first.notes)  # cache_ttl + clock_skew
        assert (1, 2, 3, 4) == LiveLog.shards.read_shards(KEY)  # not trimmed: nothing hidden
        for at in range(40, 48):  # a writer inside its cache TTL writes under the old count
            OtherProcess(KEY, at, value=at).save()
        above = sum(1 for shard, _, _ in compact_stored() if shard > 1)
        assert 48 == LiveLog.count(KEY)
        CLOCK.now += 100  # past the TTL
        second = compact(LiveLog, options)
        assert (second.tally.moved, second.tally.waiting) == (above, 0)
        assert any("trimmed 1 keys" in note for note in second.notes)
        assert (1,) == LiveLog.shards.read_shards(KEY)
        assert collections.Counter((1, at, at) for at in range(48)) == compact_stored()
        third = compact(LiveLog, options)  # a new pass: nothing left to do
        assert (third.tally.read, third.tally.moved, third.complete) == (48, 0, True)


    def test_items_left_waiting_are_named_so_when_the_wait_ends_before_the_trim(
            self, options: JobOptions, monkeypatch: pytest.MonkeyPatch) -> None:
        """A long scan: the items it reached inside the wait were left; by the trim the wait is
        over, and the trim finds them above the count. Its note says the run left them (they
        were not written after the scan), and the history is kept."""
        from pynamodb_sharding.migration import _compaction

        trim = _compaction.trim_histories

        def after_a_long_scan(*args: Any, **kwargs: Any) -> list[str]:
            CLOCK.now += 100  # the scan took longer than the wait
            return trim(*args, **kwargs)

        monkeypatch.setattr(_compaction, "trim_histories", after_a_long_scan)
        above = sum(1 for shard, _, _ in compact_stored() if shard > 1)
        CLOCK.now += 10  # inside the TTL: writers may still write under 4
        report = compact(LiveLog, options)
        assert (report.tally.moved, report.tally.waiting) == (0, above)
        [note] = [note for note in report.notes if note.startswith("not trimmed")]
        assert f"still has {above} items in shards above 1 (left waiting by this run" in note
        assert (1, 2, 3, 4) == LiveLog.shards.read_shards(KEY)  # nothing hidden


@pytest.mark.usefixtures("grown")
class TestWritesAfterACompaction:
    """Items loaded from a shard above the count, written after compact moved them and trimmed."""

    def test_save_update_delete(self, options: JobOptions) -> None:
        loaded = [item for item in LiveLog.query(KEY, consistent_read=True) if (item.shards or 0) > 1]
        assert len(loaded) >= 9
        CLOCK.now += 100
        report = compact(LiveLog, options)
        assert (1,) == LiveLog.shards.read_shards(KEY)
        assert report.tally.moved == len(loaded)
        for item in loaded[:3]:
            item.value = -1
            item.save()
        for item in loaded[3:6]:
            item.update(actions=[LiveLog.value.set(-2)])
        for item in loaded[6:9]:
            item.delete()
        values = {int(item.at): item.value for item in LiveLog.query(KEY)}
        assert 37 == len(values)
        assert all(-1 == values[int(item.at)] for item in loaded[:3])
        assert all(-2 == values[int(item.at)] for item in loaded[3:6])
        assert all(int(item.at) not in values for item in loaded[6:9])
        assert {1} == {shard for shard, _, _ in compact_stored()}  # nothing written where no read looks
        assert 37 == sum(compact_stored().values())


class Random8(ShardedModel):
    class Meta:
        table_name = "live_random"
        max_pool_connections = 16

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(RandomShards(8))


class Random2(ShardedModel):
    """The count lowered from 8 to 2: reads cover shards 1..8 until reshard emptied 3..8."""

    Meta = Random8.Meta

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(RandomShards(2, previous_counts=(8,)))


class MoveAfterReply:
    """Moves one item (a job's move, held ready) right after the query's request for one physical
    key got its reply, and before the query's next request: the interleaving that loses or
    doubles an item when the shard it left is read after the shard it went to, or the reverse."""

    def __init__(self, model: type[ShardedModel], physical: str, job: ReshardJob, move: Move) -> None:
        self.physical = physical
        self.job, self.move = job, move
        self.done = False
        self._http = URLLib3Session()
        model._get_connection().connection.client.meta.events.register_first("before-send.dynamodb", self)

    def __call__(self, request: Any, **_: Any) -> Any:
        if self.done or not request.headers["X-Amz-Target"].decode().endswith(".Query"):
            return None
        values = json.loads(request.body).get("ExpressionAttributeValues", {})
        if {"S": self.physical} not in values.values():
            return None
        self.done = True
        reply = self._http.send(request)  # the query gets the reply from before the move
        assert 1 == _Sender(self.job, RateLimiter(None)).move(self.move).moved
        return reply


def _planned_move(job: ReshardJob, model: type[ShardedModel], at: int) -> Move:
    raw = next(raw for raw in raw_items(model) if raw["at"]["N"] == str(at))
    move = job.plan(raw)
    assert isinstance(move, Move)
    return move


class TestQueriesWhileItemsMove:
    """A merged query returns an item once while a job moves it, whichever shard is read first."""

    @pytest.mark.parametrize("after", ["old shard", "new shard"])
    @pytest.mark.usefixtures("layouts")
    def test_hashed_layout_change(self, after: str) -> None:
        at = next(at for at in range(40) if shard_of(at, 16) != shard_of(at, 4))
        job = ReshardJob(Layout16)
        move = _planned_move(job, Layout4, at)
        shard = shard_of(at, 4) if after == "old shard" else shard_of(at, 16)
        hook = MoveAfterReply(Layout16, f"{KEY}_{shard}", job, move)
        spec = QuerySpec(hash_key=KEY, consistent_read=True)
        found = [int(item.at) for item in merged_query(Layout16, spec, max_workers=1)]
        assert hook.done
        assert list(range(40)) == found  # each item once, the moving one included
        assert 40 == Layout16.count(KEY, consistent_read=True)

    @pytest.mark.parametrize("after", ["old shard", "new shard"])
    def test_lowered_random_count(self, dynamodb_models: Callable[..., Any], after: str) -> None:
        dynamodb_models(Random8, Random2)
        put_raw(Random8, [{"sensor": {"S": f"{KEY}_{1 + at % 8}"}, "at": {"N": str(at)}, "value": {"N": str(at)}}
                          for at in range(24)])
        at = 7  # in shard 8, above the count of 2
        job = ReshardJob(Random2)
        move = _planned_move(job, Random8, at)
        target = int(move.new_hash_keys[0].rpartition("_")[2])
        hook = MoveAfterReply(Random2, f"{KEY}_{8 if after == 'old shard' else target}", job, move)
        spec = QuerySpec(hash_key=KEY, consistent_read=True)
        found = [int(item.at) for item in merged_query(Random2, spec, max_workers=1)]
        assert hook.done
        assert list(range(24)) == found
