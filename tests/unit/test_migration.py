"""The pure parts of the migration toolkit.

Proves: the rate limiter lets through one second of units at once and then exactly ``rate``
units per second (fake clock, no sleeping); write units follow DynamoDB's 1 KB rounding; the
item checksum ignores attribute order and set order but sees any changed value; batches never
hold one key twice nor more than 25 puts; a copy plans the same physical key every time for
the same source item (what makes a re-run overwrite), within the target's count;
``RandomShards(previous_counts=...)`` reads cover the old count while writes use the new one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._exceptions import MigrationError
from pynamodb_sharding.migration import CopyJob, JobOptions, RateLimiter
from pynamodb_sharding.migration._engine import _batches, item_write_units
from pynamodb_sharding.migration._jobs import Put
from pynamodb_sharding.migration._verification import item_checksum


class Source(Model):
    class Meta:
        table_name = "unit_source"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class RandomTarget(ShardedModel):
    class Meta:
        table_name = "unit_random"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8))


class HashedTarget(ShardedModel):
    class Meta:
        table_name = "unit_hashed"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8))


class OtherKeys(ShardedModel):
    class Meta:
        table_name = "unit_other"

    device = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class TestRateLimiter:
    def test_a_burst_of_one_second_then_the_rate(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(100, clock=clock, sleep=clock.sleep)
        limiter.acquire(100)
        assert clock.now == 0.0
        limiter.acquire(50)
        assert clock.now == pytest.approx(0.5)
        for _ in range(10):
            limiter.acquire(25)
        assert clock.now == pytest.approx(3.0)

    def test_unlimited_never_waits(self) -> None:
        clock = FakeClock()
        limiter = RateLimiter(None, clock=clock, sleep=clock.sleep)
        for _ in range(1000):
            limiter.acquire(1000)
        assert clock.slept == []


class TestWriteUnits:
    @pytest.mark.parametrize(("item", "units"), [
        ({"k": {"S": "a"}}, 1),
        ({"k": {"S": "a" * 1023}}, 1),
        ({"k": {"S": "a" * 1024}}, 2),
        ({"k": {"S": "x"}, "blob": {"B": b"\0" * 3000}}, 3),
    ])
    def test_one_unit_per_started_kilobyte(self, item: dict[str, Any], units: int) -> None:
        assert item_write_units(item) == units


_values = st.one_of(
    st.text(max_size=5).map(lambda s: {"S": s}),
    st.integers(-1000, 1000).map(lambda n: {"N": str(n)}),
    st.sets(st.text(min_size=1, max_size=3), min_size=1, max_size=4).map(lambda s: {"SS": sorted(s)}),
)


class TestChecksum:
    @given(st.dictionaries(st.text(min_size=1, max_size=4), _values, min_size=1, max_size=6), st.randoms())
    def test_order_of_attributes_and_set_members_does_not_matter(self, item: dict[str, Any], rng: Any) -> None:
        names = list(item)
        rng.shuffle(names)
        shuffled = {}
        for name in names:
            value = item[name]
            if "SS" in value:
                members = list(value["SS"])
                rng.shuffle(members)
                value = {"SS": members}
            shuffled[name] = value
        assert item_checksum(item) == item_checksum(shuffled)

    def test_a_changed_value_changes_it(self) -> None:
        assert item_checksum({"k": {"S": "a"}, "v": {"N": "1"}}) != item_checksum({"k": {"S": "a"}, "v": {"N": "2"}})

    def test_numbers_stored_alike_hash_alike(self) -> None:
        assert item_checksum({"v": {"N": "5.0"}}) == item_checksum({"v": {"N": "5"}})


class TestBatches:
    def test_at_most_25_and_no_key_twice(self) -> None:
        # 30 keys written twice each: a batch closes at 25 puts or before a key it already holds.
        puts = [Put(item={"sensor": {"S": f"k_{n % 30}"}, "at": {"N": "1"}}, logical_key="k") for n in range(60)]
        batches = _batches(puts, "sensor", "at")
        assert [len(batch) for batch in batches] == [25, 25, 10]
        assert [put.item["sensor"]["S"] for put in batches[0]] == [f"k_{n}" for n in range(25)]
        for batch in batches:
            keys = [put.item["sensor"]["S"] for put in batch]
            assert len(keys) == len(set(keys))


class TestCopyPlan:
    def test_random_target_shard_is_derived_from_the_source_key(self) -> None:
        job = CopyJob(Source, RandomTarget)
        item = {"sensor": {"S": "sensor-1"}, "at": {"N": "7"}}
        first = job.plan(item)
        assert all(job.plan(item) == first for _ in range(20))
        shards = {job.plan({"sensor": {"S": "sensor-1"}, "at": {"N": str(n)}}).item["sensor"]["S"]
                  for n in range(200)}
        assert shards == {f"sensor-1_{shard}" for shard in range(1, 9)}

    def test_hashed_target_uses_the_strategy_shard(self) -> None:
        # md5("sensor-1" + "7") % 8 + 1, computed once by hand: 4
        planned = CopyJob(Source, HashedTarget).plan({"sensor": {"S": "sensor-1"}, "at": {"N": "7"}})
        assert planned.item["sensor"] == {"S": "sensor-1_4"}

    def test_models_storing_keys_under_other_names_are_refused(self) -> None:
        with pytest.raises(MigrationError, match="declare the target's hash and range keys with the same attr_name"):
            CopyJob(Source, OtherKeys)

    def test_a_segment_outside_the_job_is_refused(self) -> None:
        with pytest.raises(MigrationError, match=r"segment 4 is outside 0\.\.3"):
            JobOptions(total_segments=4, segment=4)


class TestRandomPreviousCounts:
    def test_reads_cover_the_old_count_writes_the_new(self) -> None:
        strategy = RandomShards(4, previous_counts=(16,))
        assert strategy.read_shards(None) == tuple(range(1, 17))  # type: ignore[arg-type]
        assert strategy.shard_count(None) == 4  # type: ignore[arg-type]
        assert strategy.max_shards == 16
        assert repr(strategy) == "RandomShards(4, previous_counts=(16,))"


class ZeroBased(ShardedModel):
    class Meta:
        table_name = "unit_zero_based"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4), separator=".", first_shard=0)


class TestFirstShardZero:
    def test_a_copy_into_a_zero_based_layout_uses_shards_0_to_3(self) -> None:
        job = CopyJob(Source, ZeroBased)
        keys = {job.plan({"sensor": {"S": "2014-07-09"}, "at": {"N": str(n)}}).item["sensor"]["S"]
                for n in range(100)}
        assert keys == {f"2014-07-09.{shard}" for shard in range(4)}


class TestProgressOutput:
    def test_json_lines_then_the_report(self) -> None:
        import io
        import json

        from pynamodb_sharding.migration import JsonProgress, MigrationReport, Tally

        clock = FakeClock()
        stream = io.StringIO()
        sink = JsonProgress(stream, interval=1.0, clock=clock)
        sink.start(total_segments=2, segments_done=0, estimated_items=200)
        clock.now = 1.0
        sink.advance(Tally(read=50))
        clock.now = 1.5
        sink.advance(Tally(read=50))  # within the interval: no line
        sink.segment_done()
        sink.finish(MigrationReport(job="copy A -> B", tally=Tally(read=100, written=100, units=100.0),
                                    duration=2.0, segments_done=1, total_segments=2))
        events = [json.loads(line) for line in stream.getvalue().splitlines()]
        assert [event["event"] for event in events] == ["progress", "progress", "report"]
        assert (events[0]["items"], events[0]["items_per_s"], events[0]["eta_s"]) == (50, 50.0, 3.0)
        assert (events[1]["items"], events[1]["segments_done"], events[1]["total_segments"]) == (100, 1, 2)
        assert (events[2]["written"], events[2]["units"], events[2]["complete"]) == (100, 100.0, False)

    def test_the_live_bar_shows_items_and_segments(self) -> None:
        import io

        from rich.console import Console

        from pynamodb_sharding.migration import MigrationReport, RichProgress, Tally

        out = io.StringIO()
        sink = RichProgress(console=Console(file=out, force_terminal=False, width=120))
        sink.start(total_segments=4, segments_done=1, estimated_items=1000)
        sink.advance(Tally(read=250))
        sink.segment_done()
        sink.finish(MigrationReport(job="j", tally=Tally(read=250), duration=1.0, segments_done=2,
                                    total_segments=4))
        shown = out.getvalue()
        assert "250/1000" in shown
        assert "segments 2/4" in shown
