"""Index partitions in the simulator, and DynamicShards on a sharded global index (DynamoDB Local).

The simulator charges a put to the partition of each global index's value it stores and refuses
it, past ``index_write_units``, with ``IndexWriteKeyRangeThroughputExceeded`` and that index's
ARN, as DynamoDB's back-pressure does. A ``DynamicShards`` index grows its count for the value
under such throttles, while the table's own dynamic count stays put; a throttle of the table's
partition grows the table and never the index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError, TransactWriteError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding._indexes import sharded_indexes_of
from pynamodb_sharding._throttling import ThrottleKind, classify
from pynamodb_sharding.testing.simulator import simulate_partition_limits
from tests.clock import Clock
from tests.raw import raw_client

BindModels = Callable[..., dict[type[Model], str]]


class PlainByDay(GlobalSecondaryIndex["PlainEvent"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)


class PlainEvent(Model):
    class Meta:
        table_name = "gsi_sim_plain"
        max_retry_attempts = 0

    event_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    by_day = PlainByDay()


class TestIndexPartitionsInTheSimulator:
    """Puts are charged to the index partition of the value they store."""

    def test_hot_index_value_is_refused_with_the_index_reason_and_arn(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(PlainEvent)
        clock = Clock(1_000.0)
        with simulate_partition_limits(PlainEvent, write_units=None, index_write_units=3, clock=clock) as sim:
            for n in range(3):
                PlainEvent(f"e{n}", day="hot").save()
            PlainEvent("c0", day="cold").save()  # another index value: its own partition
            with pytest.raises(PutError) as raised:
                PlainEvent("e3", day="hot").save()
            throttle = classify(raised.value)
            assert throttle.kind is ThrottleKind.INDEX
            assert throttle.index_name == "by_day"
            assert [r.reason for r in throttle.reasons] == ["IndexWriteKeyRangeThroughputExceeded"]
            assert throttle.reasons[0].resource == (
                f"arn:aws:dynamodb:{PlainEvent.Meta.region}:000000000000:table/{PlainEvent.Meta.table_name}/index/by_day"
            )
            clock.advance(1)
            PlainEvent("e3", day="hot").save()
            table = PlainEvent.Meta.table_name
            assert sim.write_units[(f"{table}/index/by_day", "hot")] == 4
            assert sim.write_units[(f"{table}/index/by_day", "cold")] == 1
            assert sim.throttles_by_reason == {"IndexWriteKeyRangeThroughputExceeded": 1}
        # The refused put was not written (raw read of the table).
        stored = raw_client(PlainEvent).scan(TableName=table, ConsistentRead=True)["Items"]
        assert sorted(item["event_id"]["S"] for item in stored) == ["c0", "e0", "e1", "e2", "e3"]

    def test_batch_and_transaction_puts_are_charged(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(PlainEvent)
        clock = Clock(1_000.0)
        with simulate_partition_limits(PlainEvent, write_units=None, index_write_units=4, clock=clock) as sim:
            with PlainEvent.batch_write() as batch:
                for n in range(4):
                    batch.save(PlainEvent(f"b{n}", day="hot"))
            with pytest.raises(TransactWriteError) as raised, \
                    TransactWrite(connection=PlainEvent._get_connection().connection) as transaction:
                transaction.save(PlainEvent("t0", day="hot"))
            assert [r.code for r in raised.value.cancellation_reasons if r] == ["ThrottlingError"]
            assert sim.write_units[(f"{PlainEvent.Meta.table_name}/index/by_day", "hot")] == 4

    def test_no_index_limit_by_default(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(PlainEvent)
        with simulate_partition_limits(PlainEvent, write_units=None, clock=Clock(1_000.0)) as sim:
            for n in range(5):
                PlainEvent(f"e{n}", day="hot").save()
            assert sim.throttles == {}


class EventShards(ShardMetadata):
    class Meta:
        table_name = "gsi_sim_event_shards"


def dynamic(clock: Clock, **kwargs: Any) -> DynamicShards:
    # Growths written to at once (the fleet protocol of fresh reads, stored with the table).
    kwargs.setdefault("fresh_reads", True)
    return DynamicShards(EventShards, initial=1, max_shards=8, cooldown=0, backoff=(0, 0),
                         growth="double", clock=clock, sleep=clock.advance, **kwargs)


CLOCK = Clock(1_000.0)


class ByDay(GlobalSecondaryIndex["Event"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(dynamic(CLOCK))


class Event(ShardedModel):
    class Meta:
        table_name = "gsi_sim_event"
        max_retry_attempts = 0

    source = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = ByDay()
    shards = Sharding(dynamic(CLOCK))


def counts() -> tuple[int, int]:
    """(the table's count of source "s", the index's count of day "hot"), read fresh."""
    return Event.shards.refresh("s"), Event.by_day.shards.refresh("hot")


class TestDynamicIndexGrowth:
    """An index throttle grows the index's count, a table throttle the table's, never the other."""

    def test_index_throttle_grows_the_index_only(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Event)
        with simulate_partition_limits(Event, write_units=None, index_write_units=5, clock=CLOCK) as sim:
            for n in range(60):
                Event("s", n, day="hot").save()
                CLOCK.advance(0.05)  # 20 writes a second against 5 units a second per partition
            index_values = {key for (table, key) in sim.write_units if table.endswith("/index/by_day")}
        assert counts()[0] == 1
        assert counts()[1] > 1
        assert sim.throttles.get(ThrottleKind.INDEX, 0) > 0
        assert len(index_values) > 1
        assert index_values <= {f"hot_{shard}" for shard in range(1, counts()[1] + 1)}
        assert sorted(e.at for e in Event.by_day.query("hot")) == list(range(60))
        assert Event.by_day.count("hot") == 60
        assert Event.by_day.shards.read_shards("hot") == tuple(range(1, counts()[1] + 1))

    def test_table_throttle_grows_the_table_only(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Event)
        with simulate_partition_limits(Event, write_units=5, clock=CLOCK) as sim:
            for n in range(60):
                Event("s", n, day="hot").save()
                CLOCK.advance(0.05)
        assert counts()[0] > 1
        assert counts()[1] == 1
        assert sim.throttles.get(ThrottleKind.KEY_RANGE, 0) > 0
        assert sorted(e.at for e in Event.query("s")) == list(range(60))
        assert sorted(e.at for e in Event.by_day.query("hot")) == list(range(60))

    @pytest.mark.parametrize(("resource", "grows"), [
        ("table/{table}/index/by_day", True),
        ("table/other_table/index/by_day", False),
        ("table/{table}/index/by_other", False),
        ("table/{table}", False),
    ])
    def test_only_a_throttle_naming_this_index_of_this_table_grows(
        self, dynamodb_models: BindModels, resource: str, grows: bool,
    ) -> None:
        dynamodb_models(Event)
        from botocore.exceptions import ClientError

        from pynamodb_sharding._indexes import _throttled_index

        table = Event.Meta.table_name
        reason = ("IndexWriteKeyRangeThroughputExceeded" if "index" in resource
                  else "TableWriteKeyRangeThroughputExceeded")
        arn = f"arn:aws:dynamodb:us-east-1:000000000000:{resource.format(table=table)}"
        cause = ClientError({
            "Error": {"Code": "ProvisionedThroughputExceededException", "Message": "throttled"},
            "ThrottlingReasons": [{"reason": reason, "resource": arn}],
        }, "PutItem")
        found = _throttled_index(PutError("throttled", cause), table, dict(sharded_indexes_of(Event)))
        assert (found is not None) is grows
