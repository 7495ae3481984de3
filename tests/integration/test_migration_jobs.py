"""Migration jobs on DynamoDB Local, checked on the raw table.

Proves: ``copy`` writes every item of an unsharded table exactly once under its logical key,
on the shard the target's strategy gives it, and copying again (checkpoints forgotten) only
overwrites; ``reshard`` moves a ``HashedShards`` table from 4 to 16 shards and a
``RandomShards`` table from 16 down to 4 with every item kept once and per-key digests
unchanged; ``compact`` after ``shrink`` moves items below the count and trims the history so
reads cover the count only; throttles injected by the simulator during a copy lose nothing;
a dry run writes nothing; ``verify`` names the keys that differ.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, HashedShards, RandomShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding._host import reset_connection
from pynamodb_sharding._strategies import md5_shard
from pynamodb_sharding.migration import (
    CheckpointStore,
    CopyJob,
    JobOptions,
    compact,
    copy,
    plan,
    reshard,
    snapshot,
    verify,
)
from pynamodb_sharding.migration._jobs import ReshardJob
from pynamodb_sharding.testing import simulate_partition_limits
from tests.raw import put_raw, raw_client, raw_items

KEYS = [f"sensor-{n}" for n in range(5)]


class Readings(Model):
    class Meta:
        table_name = "mig_readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()


class ShardedReadings(ShardedModel):
    """The readings' keys, declared once for every sharded layout below (an abstract base)."""

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()


class RandomReadings(ShardedReadings):
    class Meta:
        table_name = "mig_random"

    shards = Sharding(RandomShards(8))


class HashedReadings(ShardedReadings):
    class Meta:
        table_name = "mig_hashed"

    shards = Sharding(HashedShards(8))


class Hashed16(ShardedReadings):
    class Meta:
        table_name = "mig_hashed16"
        max_pool_connections = 16

    shards = Sharding(HashedShards(16, previous_counts=(4,)))


class Hashed4(ShardedReadings):
    class Meta:
        table_name = "mig_hashed4"

    shards = Sharding(HashedShards(4))


class Random16(ShardedReadings):
    class Meta:
        table_name = "mig_random16"
        max_pool_connections = 16

    shards = Sharding(RandomShards(16))


class Random4(ShardedReadings):
    class Meta:
        table_name = "mig_random4"
        max_pool_connections = 16

    # The count lowered from 16: reads cover the old shards until reshard has emptied them.
    shards = Sharding(RandomShards(4, previous_counts=(16,)))


class CompactShards(ShardMetadata):
    class Meta:
        table_name = "mig_compact_shards"


class CompactLog(ShardedReadings):
    class Meta:
        table_name = "mig_compact_log"

    # cache_ttl=0: a shrink is seen by every writer at once, so compact may trim right after it.
    shards = Sharding(DynamicShards(CompactShards, max_shards=8, cache_ttl=0))


def _fill(model: type[Model], per_key: int) -> None:
    put_raw(model, [{"sensor": {"S": key}, "at": {"N": str(n)}, "value": {"S": f"{key}/{n}"}}
                    for key in KEYS for n in range(per_key)])


def _decoded(model: type[Model]) -> collections.Counter[tuple[str, int, str]]:
    """Every stored item as (logical key, range key, value), decoded here, not by the library."""
    found: collections.Counter[tuple[str, int, str]] = collections.Counter()
    for item in raw_items(model):
        logical, sep, shard = item["sensor"]["S"].rpartition("_")
        assert sep, item["sensor"]
        assert shard.isdigit(), item["sensor"]
        found[(logical, int(item["at"]["N"]), item["value"]["S"])] += 1
    return found


def _expected(per_key: int) -> collections.Counter[tuple[str, int, str]]:
    return collections.Counter((key, n, f"{key}/{n}") for key in KEYS for n in range(per_key))


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    """Job options with a checkpoint table of the test's own (deleted afterwards)."""
    return JobOptions(total_segments=3, page_size=50, checkpoint_table=checkpoint_table)



class TestCopy:
    """An unsharded table copied into sharded ones."""

    @pytest.mark.parametrize("target", [RandomReadings, HashedReadings])
    def test_every_item_once_on_its_strategy_shard(self, dynamodb_models: Callable[..., Any],
                                                   options: JobOptions, target: type[ShardedModel]) -> None:
        dynamodb_models(Readings, target)
        _fill(Readings, 40)
        report = copy(Readings, target, options)
        assert (report.tally.read, report.tally.written, report.complete) == (200, 200, True)
        assert _decoded(target) == _expected(40)
        # Copy again from scratch (checkpoints forgotten): the same keys are overwritten.
        CheckpointStore(raw_client(Readings), options.checkpoint_table).reset(
            CopyJob(Readings, target).job_id(options.total_segments), options.total_segments)
        assert copy(Readings, target, options).tally.written == 200
        assert _decoded(target) == _expected(40)
        assert sorted(item.at for item in target.query(KEYS[0])) == list(range(40))
        assert verify(Readings, target).ok

    def test_hashed_copy_uses_the_md5_shard(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(Readings, HashedReadings)
        _fill(Readings, 10)
        copy(Readings, HashedReadings, options)
        for item in raw_items(HashedReadings):
            logical, _, shard = item["sensor"]["S"].rpartition("_")
            assert int(shard) == md5_shard(f"{logical}{item['at']['N']}".encode(), 8)
        # A point read finds each item where HashedShards computes it.
        assert HashedReadings.get(KEYS[2], 7).value == f"{KEYS[2]}/7"

    def test_a_finished_job_run_again_is_a_new_pass(self, dynamodb_models: Callable[..., Any],
                                                    options: JobOptions) -> None:
        """Run again after it finished, a copy catches up with the source and adds no second copy."""
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 10)
        copy(Readings, RandomReadings, options)
        put_raw(Readings, [{"sensor": {"S": KEYS[0]}, "at": {"N": "10"}, "value": {"S": f"{KEYS[0]}/10"}}])
        again = copy(Readings, RandomReadings, options)
        assert (again.tally.read, again.tally.written, again.complete) == (51, 51, True)
        assert _decoded(RandomReadings) == _expected(10) + collections.Counter([(KEYS[0], 10, f"{KEYS[0]}/10")])

    def test_runs_of_one_named_pass_resume_each_other(self, dynamodb_models: Callable[..., Any],
                                                      options: JobOptions) -> None:
        """External schedulers: segment runs of one --pass share checkpoints; a new name starts over."""
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 10)
        named = attrs.evolve(options, pass_name="job-1")
        for segment in range(options.total_segments):
            copy(Readings, RandomReadings, attrs.evolve(named, segment=segment))
        assert copy(Readings, RandomReadings, attrs.evolve(named, segment=0)).tally.read == 0  # done in job-1
        assert copy(Readings, RandomReadings, named).tally.read == 0  # every segment of job-1 is done
        fresh = copy(Readings, RandomReadings, attrs.evolve(options, pass_name="job-2"))
        assert (fresh.tally.read, fresh.complete) == (50, True)
        assert _decoded(RandomReadings) == _expected(10)

    def test_throttled_writes_are_retried_not_lost(self, dynamodb_models: Callable[..., Any],
                                                   options: JobOptions) -> None:
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 60)
        with simulate_partition_limits(RandomReadings, write_units=3, read_units=None) as simulator:
            report = copy(Readings, RandomReadings, options)
        assert sum(simulator.throttles.values()) > 0
        assert report.tally.written == 300
        assert _decoded(RandomReadings) == _expected(60)

    def test_dry_run_writes_nothing(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 20)
        the_plan = plan(CopyJob(Readings, RandomReadings), options)
        assert (the_plan.sampled, the_plan.estimated_writes, the_plan.estimated_moves) == (100, 100, 0)
        assert the_plan.estimated_keys == 5
        assert raw_items(RandomReadings) == []
        assert options.checkpoint_table not in raw_client(Readings).list_tables()["TableNames"]


class _SharedTable:
    """Point ``new`` at ``old``'s table (the same table declared with another layout)."""

    def __init__(self, old: type[Model], new: type[Model]) -> None:
        self.new, self.saved = new, dict(vars(new.Meta))
        for name in ("table_name", "host", "region", "aws_access_key_id", "aws_secret_access_key"):
            setattr(new.Meta, name, getattr(old.Meta, name))
        reset_connection(new)

    def close(self) -> None:
        for name in ("table_name", "host", "region", "aws_access_key_id", "aws_secret_access_key"):
            if name in self.saved:
                setattr(self.new.Meta, name, self.saved[name])
            elif name in vars(self.new.Meta):
                delattr(self.new.Meta, name)
        reset_connection(self.new)


@pytest.fixture
def shared() -> Iterator[Callable[[type[Model], type[Model]], None]]:
    opened: list[_SharedTable] = []
    yield lambda old, new: opened.append(_SharedTable(old, new)) and None
    for table in opened:
        table.close()


@pytest.fixture
def changed_move(dynamodb_models: Callable[..., Any],
                 shared: Callable[[type[Model], type[Model]], None]) -> tuple[ReshardJob, Any]:
    """A reshard job of ``Random4`` and the move it planned for an item on shard 9, which the
    application then changed: the move finds its copy stale."""
    dynamodb_models(Random16)
    shared(Random16, Random4)
    stale = {"sensor": {"S": f"{KEYS[0]}_9"}, "at": {"N": "1"}, "value": {"S": "old"}}
    put_raw(Random4, [stale])
    job = ReshardJob(Random4)
    move = job.plan(stale)
    assert move is not None
    put_raw(Random4, [{**stale, "value": {"S": "new"}}])  # the application changed it meanwhile
    return job, move


class TestReshard:
    """Items moved to the shard the current layout gives them; nothing lost or doubled."""

    def test_hashed_4_to_16(self, dynamodb_models: Callable[..., Any], options: JobOptions,
                            shared: Callable[[type[Model], type[Model]], None]) -> None:
        dynamodb_models(Hashed4)
        for key in KEYS:
            for n in range(30):
                Hashed4(key, n, value=f"{key}/{n}").save()
        before = snapshot(Hashed4)
        shared(Hashed4, Hashed16)
        report = reshard(Hashed16, options)
        assert report.tally.read >= 150
        # Items whose 16-shard md5 equals their 4-shard one stay; every other one moved.
        stay = sum(1 for key in KEYS for n in range(30)
                   if md5_shard(f"{key}{n}".encode(), 16) == md5_shard(f"{key}{n}".encode(), 4))
        assert report.tally.moved == 150 - stay
        assert _decoded(Hashed16) == _expected(30)
        for item in raw_items(Hashed16):
            logical, _, shard = item["sensor"]["S"].rpartition("_")
            assert int(shard) == md5_shard(f"{logical}{item['at']['N']}".encode(), 16)
        assert compare_ok(before, snapshot(Hashed16))
        assert sorted(item.at for item in Hashed16.query(KEYS[1])) == list(range(30))
        assert reshard(Hashed16, options).tally.moved == 0  # a finished job

    def test_random_16_lowered_to_4(self, dynamodb_models: Callable[..., Any], options: JobOptions,
                                    shared: Callable[[type[Model], type[Model]], None]) -> None:
        dynamodb_models(Random16)
        for key in KEYS:
            for n in range(40):
                Random16(key, n, value=f"{key}/{n}").save()
        above = sum(1 for item in raw_items(Random16) if int(item["sensor"]["S"].rpartition("_")[2]) > 4)
        shared(Random16, Random4)
        assert Random4.count(KEYS[0]) == 40  # nothing hidden before the move
        report = reshard(Random4, options)
        # A moved item may be scanned again at its new place: it is then skipped, not moved twice.
        assert report.tally.moved == above > 100
        assert _decoded(Random4) == _expected(40)
        assert {int(item["sensor"]["S"].rpartition("_")[2]) for item in raw_items(Random4)} <= {1, 2, 3, 4}
        assert Random4.count(KEYS[0]) == 40

    def test_a_changed_item_is_moved_as_it_is_now(self, changed_move: tuple[ReshardJob, Any]) -> None:
        """The delete of the old copy requires it unchanged: a stale copy is re-read, not written."""
        from pynamodb_sharding.migration._engine import RateLimiter, _Sender

        job, move = changed_move
        assert _Sender(job, RateLimiter(None)).move(move).moved == 1
        (stored,) = raw_items(Random4)
        assert stored["value"]["S"] == "new"
        assert int(stored["sensor"]["S"].rpartition("_")[2]) <= 4


def compare_ok(before: Any, after: Any) -> bool:
    from pynamodb_sharding.migration import compare

    report = compare(before, after)
    assert report.differences == ()
    return report.ok


class TestCompact:
    """After shrink: items moved down, the history trimmed, reads cover the count only."""

    def test_compact_after_shrink(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(CompactLog)
        for key in KEYS[:2]:
            CompactLog(key, 0, value=f"{key}/0").save()
            CompactLog.shards.grow(key)
            CompactLog.shards.grow(key)
            for n in range(1, 50):
                CompactLog(key, n, value=f"{key}/{n}").save()
            CompactLog.shards.shrink(key, to=1)
        before = snapshot(CompactLog)
        assert CompactLog.shards.read_shards(KEYS[0]) == (1, 2, 3, 4)
        report = compact(CompactLog, options)
        assert report.tally.moved > 0
        assert any("trimmed 2 keys" in note for note in report.notes)
        assert {item["sensor"]["S"] for item in raw_items(CompactLog)} == {f"{key}_1" for key in KEYS[:2]}
        assert CompactLog.shards.read_shards(KEYS[0]) == (1,)
        assert [entry.count for entry in CompactLog.shards.history(KEYS[0])] == [1]
        assert compare_ok(before, snapshot(CompactLog))
        assert CompactLog.count(KEYS[1]) == 50
        assert sorted(item.at for item in CompactLog.query(KEYS[0])) == list(range(50))


class TestVerify:
    def test_differing_keys_are_named(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 10)
        copy(Readings, RandomReadings, options)
        assert verify(Readings, RandomReadings).ok
        client = raw_client(RandomReadings)
        victim = next(item for item in raw_items(RandomReadings) if item["sensor"]["S"].startswith(KEYS[3]))
        client.delete_item(TableName=RandomReadings.Meta.table_name,
                           Key={"sensor": victim["sensor"], "at": victim["at"]})
        changed = next(item for item in raw_items(RandomReadings) if item["sensor"]["S"].startswith(KEYS[1]))
        client.put_item(TableName=RandomReadings.Meta.table_name, Item={**changed, "value": {"S": "edited"}})
        report = verify(Readings, RandomReadings)
        assert not report.ok
        assert [(d.key, d.source_count, d.target_count) for d in report.differences] == [
            (KEYS[1], 10, 10), (KEYS[3], 10, 9)]


class LegacyReadings(ShardedModel):
    class Meta:
        table_name = "mig_legacy"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class TestLegacyAdoption:
    """``reshard`` of a ``legacy_unsharded`` table while the application writes and reads it."""

    def test_legacy_items_moved_while_the_application_runs(self, dynamodb_models: Callable[..., Any],
                                                           options: JobOptions) -> None:
        import threading

        dynamodb_models(LegacyReadings)
        _fill(LegacyReadings, 60)  # bare keys: the table before adoption
        stop, problems, written = threading.Event(), [], []

        def application() -> None:
            n = 1000
            while not stop.is_set():
                LegacyReadings(KEYS[n % 5], n, value=f"{KEYS[n % 5]}/{n}").save()
                written.append((KEYS[n % 5], n))
                ats = [item.at for item in LegacyReadings.query(KEYS[0])]
                if len(ats) != len(set(ats)) or not set(range(60)) <= set(ats):
                    problems.append(sorted(ats))
                n += 1

        thread = threading.Thread(target=application)
        thread.start()
        try:
            report = reshard(LegacyReadings, options)
        finally:
            stop.set()
            thread.join()
        assert problems == []
        assert report.tally.moved == 300
        expected = _expected(60) + collections.Counter((key, n, f"{key}/{n}") for key, n in written)
        assert _decoded(LegacyReadings) == expected  # every stored key has a shard suffix, once each

    def test_dry_run_reports_ambiguous_legacy_keys(self, dynamodb_models: Callable[..., Any],
                                                   options: JobOptions) -> None:
        dynamodb_models(LegacyReadings)
        put_raw(LegacyReadings, [{"sensor": {"S": "sensor_2016_3"}, "at": {"N": "1"}, "value": {"S": "x"}},
                                 {"sensor": {"S": "plain"}, "at": {"N": "1"}, "value": {"S": "y"}}])
        the_plan = plan(ReshardJob(LegacyReadings), options)
        assert the_plan.ambiguous_keys == ("sensor_2016_3",)
        assert "ambiguous:  'sensor_2016_3'" in "\n".join(the_plan.lines())
        assert len(raw_items(LegacyReadings)) == 2


class ConsumedCapacity:
    """What DynamoDB reported as consumed to ``model``'s client for ``model``'s table, per
    operation (a botocore ``after-call`` hook): the reference a job's report is compared with."""

    WRITES = frozenset({"PutItem", "DeleteItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"})

    def __init__(self, model: type[Model]) -> None:
        self.table = model.Meta.table_name
        self.events = model._get_connection().connection.client.meta.events
        self.by_operation: collections.Counter[str] = collections.Counter()
        self.requests: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def __enter__(self) -> ConsumedCapacity:
        self.events.register("after-call.dynamodb", self.after_call)
        return self

    def __exit__(self, *_: object) -> None:
        self.events.unregister("after-call.dynamodb", self.after_call)

    def after_call(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        entries = parsed.get("ConsumedCapacity") or []
        for entry in [entries] if isinstance(entries, dict) else entries:
            if entry.get("TableName") == self.table:
                with self._lock:
                    self.by_operation[model.name] += entry.get("CapacityUnits", 0.0)
                    self.requests[model.name] += 1

    @property
    def write_units(self) -> float:
        return sum(units for operation, units in self.by_operation.items() if operation in self.WRITES)

    @property
    def read_units(self) -> float:
        return sum(units for operation, units in self.by_operation.items() if operation not in self.WRITES)


class TestReportedUnits:
    """Every job's report counts the units DynamoDB reported for its requests (on DynamoDB
    Local: 1 unit a small put, delete or consistent read of an item found), and for a moving
    transaction what DynamoDB bills (2 units a KB for the put and the delete, 2 for each shard a
    legacy move checks), which DynamoDB Local reports as 2: the dry run estimates the same, so a
    dry run's units and the job's agree."""

    def test_copy(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 10)
        with ConsumedCapacity(RandomReadings) as consumed:
            report = copy(Readings, RandomReadings, options)
        assert (report.tally.written, report.tally.units, report.tally.read_units) == (50, 50.0, 0.0)
        assert consumed.write_units == report.tally.units
        assert "units:      50 write units consumed" in list(report.lines())

    def test_reshard(self, dynamodb_models: Callable[..., Any], options: JobOptions,
                     shared: Callable[[type[Model], type[Model]], None]) -> None:
        dynamodb_models(Random16)
        for n in range(40):
            Random16(KEYS[0], n, value=f"{KEYS[0]}/{n}").save()
        shared(Random16, Random4)
        the_plan = plan(ReshardJob(Random4), attrs.evolve(options, total_segments=1), sample_size=40 * 16)
        with ConsumedCapacity(Random4) as consumed:
            report = reshard(Random4, options)
        assert report.tally.moved > 20
        assert (the_plan.estimated_moves, the_plan.estimated_write_units) == (report.tally.moved, report.tally.units)
        assert report.tally.units == 4.0 * report.tally.moved  # 2 for the put, 2 for the delete
        assert consumed.write_units == 2.0 * report.tally.moved  # DynamoDB Local's figure
        assert consumed.requests["TransactWriteItems"] == report.tally.moved

    def test_compact(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(CompactLog)
        CompactLog(KEYS[0], 0, value="v").save()
        CompactLog.shards.grow(KEYS[0])
        CompactLog.shards.grow(KEYS[0])
        for n in range(1, 30):
            CompactLog(KEYS[0], n, value="v").save()
        CompactLog.shards.shrink(KEYS[0], to=1)
        with ConsumedCapacity(CompactLog) as consumed:
            report = compact(CompactLog, options)
        assert report.tally.moved > 10
        assert report.tally.units == 4.0 * report.tally.moved
        assert consumed.write_units == 2.0 * report.tally.moved

    def test_a_changed_item_reread_by_a_move_counts_its_read(self, changed_move: tuple[ReshardJob, Any]) -> None:
        from pynamodb_sharding.migration._engine import RateLimiter, _Sender

        job, move = changed_move  # changed meanwhile: read again
        with ConsumedCapacity(Random4) as consumed:
            tally = _Sender(job, RateLimiter(None)).move(move)
        assert (tally.moved, tally.units, tally.read_units) == (1, 4.0, 1.0)
        assert (consumed.write_units, consumed.read_units) == (2.0, 1.0)

    def test_legacy_moves(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        """20 bare items moved, and one whose sharded copy the application wrote first: its
        transaction is cancelled, the bare key and the shards are read, the stale copy deleted."""
        dynamodb_models(LegacyReadings)
        _fill(LegacyReadings, 4)
        put_raw(LegacyReadings, [{"sensor": {"S": f"{KEYS[0]}_2"}, "at": {"N": "3"}, "value": {"S": "newer"}}])
        the_plan = plan(ReshardJob(LegacyReadings), options)
        # A move: one transaction of the put, the delete and a check of each of the 3 other
        # shards, billed 2 units each.
        assert (the_plan.estimated_moves, the_plan.estimated_write_units) == (20, 200)
        with ConsumedCapacity(LegacyReadings) as consumed:
            report = reshard(LegacyReadings, options)
        assert report.tally.moved == 19  # the shadowed one is skipped (and moved items scanned again)
        # 19 transactions of 10 units (DynamoDB Local reports 2 each), the delete of the stale
        # copy 1; one consistent GetItem of the bare key and one BatchGetItem of the 4 shards'
        # keys, which finds one item: 1 each.
        assert (report.tally.units, report.tally.read_units) == (191.0, 2.0)
        assert (consumed.write_units, consumed.read_units) == (39.0, 2.0), (consumed.by_operation, consumed.requests)
        assert consumed.requests == {"TransactWriteItems": 19, "GetItem": 1, "BatchGetItem": 1, "DeleteItem": 1}
        assert "units:      191 write units consumed (and 2 read units by moves' own reads)" in list(report.lines())
        assert sorted(item["sensor"]["S"] for item in raw_items(LegacyReadings)
                      if item["at"]["N"] == "3" and item["sensor"]["S"].startswith(KEYS[0])) == [f"{KEYS[0]}_2"]
        assert [item.value for item in LegacyReadings.query(KEYS[0]) if item.at == 3] == ["newer"]


class _RequestFaults:
    """Faults for one operation of a model's client whose body names tables inside (batch,
    transaction): ``"lost"`` sends the request (applied) and drops the reply; ``"throttle"``
    answers a key-range throttle (nothing applied)."""

    def __init__(self, model: type[Model], operation: str, plan: list[str]) -> None:
        from botocore.httpsession import URLLib3Session

        from pynamodb_sharding._host import botocore_client

        self.operation, self.plan, self.log = operation, list(plan), []
        self._http = URLLib3Session()
        self._client = botocore_client(model)
        self._client.meta.events.register_first("before-send.dynamodb", self.before_send,
                                                unique_id=f"migration-faults-{id(self)}")

    def close(self) -> None:
        self._client.meta.events.unregister("before-send.dynamodb", unique_id=f"migration-faults-{id(self)}")

    def before_send(self, request: Any, **_: Any) -> Any:
        from botocore.exceptions import ReadTimeoutError

        from tests.faults import KEY_RANGE, error_response

        if request.headers["X-Amz-Target"].decode().split(".")[-1] != self.operation or not self.plan:
            return None
        fault = self.plan.pop(0)
        self.log.append(fault)
        if fault == "lost":
            self._http.send(request)
            raise ReadTimeoutError(endpoint_url=request.url)
        return error_response(request.url, 400, "ProvisionedThroughputExceededException", "throttled (injected)",
                      ThrottlingReasons=[{"reason": KEY_RANGE, "resource": "arn:aws:dynamodb:::table/t"}])


class TestFaults:
    """Lost replies and throttles during a job: every item still stored exactly once."""

    def test_lost_replies_of_moves_and_throttles(self, dynamodb_models: Callable[..., Any], options: JobOptions,
                                                 shared: Callable[[type[Model], type[Model]], None]) -> None:
        dynamodb_models(Random16)
        put_raw(Random16, [{"sensor": {"S": f"{KEYS[0]}_{9 + n % 7}"}, "at": {"N": str(n)},
                            "value": {"S": f"{KEYS[0]}/{n}"}} for n in range(30)])
        shared(Random16, Random4)
        faults = _RequestFaults(Random4, "TransactWriteItems", ["lost", "throttle", "lost", "lost", "throttle"])
        try:
            report = reshard(Random4, options)
        finally:
            faults.close()
        assert faults.log == ["lost", "throttle", "lost", "lost", "throttle"]
        assert report.tally.moved + report.tally.skipped >= 30
        assert _decoded(Random4) == collections.Counter((KEYS[0], n, f"{KEYS[0]}/{n}") for n in range(30))
        assert {int(item["sensor"]["S"].rpartition("_")[2]) for item in raw_items(Random4)} <= {1, 2, 3, 4}

    def test_lost_and_throttled_batch_writes(self, dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
        dynamodb_models(Readings, RandomReadings)
        _fill(Readings, 20)
        # Six lost replies in a row outlast botocore's own retries: the job retries the batch itself.
        faults = _RequestFaults(RandomReadings, "BatchWriteItem", ["lost"] * 6 + ["throttle"] * 12 + ["lost"])
        try:
            report = copy(Readings, RandomReadings, options)
        finally:
            faults.close()
        assert faults.plan == []
        assert report.tally.written == 100
        assert _decoded(RandomReadings) == _expected(20)
