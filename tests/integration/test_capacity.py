"""``capacity.scale()``: a period table's provisioned capacity by time of day, on DynamoDB Local.

Proves, against the table's own description read with boto3: the schedule's units for the hour
(in the schedule's timezone) are set on the current period's table and its provisioned global
secondary index; a dry run changes nothing; a second run sends no UpdateTable; the load a
``ConsumedCapacityMeter`` measured from this process's requests (DynamoDB Local returns real
``ConsumedCapacity``) keeps the capacity above ``load / target_utilization``; a refused
decrease fails the step and changes nothing; an on-demand table is left alone.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, TimePartitioned
from pynamodb_sharding._schedule import Schedule
from pynamodb_sharding.capacity import ConsumedCapacityMeter, TableLoad, scale
from tests.clock import Clock
from tests.faults import Faults
from tests.raw import provisioned_throughput

Bind = Callable[..., Any]
TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")


def tokyo(hour: int, minute: int = 0) -> float:
    """Epoch seconds of 26 February 2016 at ``hour`` in Tokyo (a month of table 201602)."""
    return dt.datetime(2016, 2, 26, hour, minute, tzinfo=TOKYO).timestamp()


CLOCK = Clock(tokyo(10))
SCHEDULE = Schedule({"00:00-08:00": (2, 3), "08:00-20:00": (40, 30), "20:00-24:00": (10, 8)}, timezone=TOKYO)


class ByPage(GlobalSecondaryIndex["ScaledLog"]):
    class Meta:
        index_name = "by_page"
        projection = AllProjection()
        read_capacity_units = 5
        write_capacity_units = 5

    page = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class ScaledLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("cap_log.{period}", attribute="accessed_at", capacity=SCHEDULE, clock=CLOCK)
        read_capacity_units = 5
        write_capacity_units = 5

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    page = UnicodeAttribute(default="/")
    by_page = ByPage()
    shards = Sharding(RandomShards(2))


class OnDemandLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("cap_on_demand.{period}", attribute="accessed_at", capacity=SCHEDULE,
                                     clock=CLOCK)

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


def capacity(model: type[Any]) -> tuple[int, int, tuple[int, int]]:
    """February's table's capacity units, and its index's."""
    return provisioned_throughput(model.period_model("201602"))


@pytest.fixture
def scaled_log(dynamodb_models: Bind) -> type[ScaledLog]:
    CLOCK.now = tokyo(10)
    dynamodb_models(ScaledLog)
    # The binding creates an on-demand table; make February's provisioned as Meta says: 5 / 5
    # (its index too), as a rotation creates it.
    ScaledLog.period_model("201602").delete_table(wait=True)
    ScaledLog.create_table(wait=True)
    return ScaledLog


def test_the_schedule_sets_the_current_table_and_its_index_for_the_hour(scaled_log: type[ScaledLog]) -> None:
    updates = Faults(scaled_log.period_model("201602"), "UpdateTable")
    dry = scale(scaled_log, dry_run=True)
    assert [(step.action, step.period, step.done) for step in dry.steps] == [("scale", "201602", False)]
    assert dry.steps[0].detail == "read 5 -> 40, write 5 -> 30; index by_page: read 5 -> 40, write 5 -> 30"
    assert dry.lines()[0] == "ScaledLog: current period 201602, 08:00-20:00 Asia/Tokyo: 40 RCU / 30 WCU " \
                             "(dry run: nothing changed)"
    assert capacity(scaled_log) == (5, 5, (5, 5))
    assert updates.log == []

    done = scale(scaled_log)
    assert done.steps[0].done
    assert capacity(scaled_log) == (40, 30, (40, 30))
    assert updates.log == ["ok"]

    again = scale(scaled_log)
    assert again.steps == ()
    assert again.lines()[-1].startswith("nothing to do: ")
    assert updates.log == ["ok"]  # already at its capacity: no UpdateTable

    scale(scaled_log, now=tokyo(23, 30))
    assert capacity(scaled_log) == (10, 8, (10, 8))
    scale(scaled_log, now=tokyo(3))
    assert capacity(scaled_log) == (2, 3, (2, 3))


def test_the_measured_load_keeps_the_capacity_above_what_it_needs(scaled_log: type[ScaledLog]) -> None:
    """70 puts in 10 s: 7 write units/s on the table and on the index each, which need
    ceil(7 / 0.7) = 10 units, more than the night's 3; reads need nothing over the night's 2."""
    seconds = Clock(0.0)
    meter = ConsumedCapacityMeter(scaled_log, window=60, clock=seconds)
    with scaled_log.batch_write() as batch:
        for number in range(70):
            batch.save(ScaledLog(user_id=f"user{number}", accessed_at=tokyo(9) + number, page="/top"))
    seconds.now = 10.0
    load = meter(_period_table(scaled_log))
    assert load == TableLoad(read=0.0, write=7.0, indexes={"by_page": (0.0, 7.0)})

    night = scale(scaled_log, now=tokyo(3), load=meter)
    assert capacity(scaled_log) == (2, 10, (2, 10))
    assert "the load needs more than the schedule's 2 RCU / 3 WCU at 70% utilization" in night.steps[0].detail
    assert night.lines()[1] == "load:  read 0.0 units/s, write 7.0 units/s"

    seconds.now = 100.0  # the puts are older than the window: the schedule alone
    scale(scaled_log, now=tokyo(3), load=meter)
    assert capacity(scaled_log) == (2, 3, (2, 3))


def _period_table(model: type[Any]) -> Any:
    from pynamodb_sharding import PeriodTable

    start, end = model.Meta.table_name.bounds("201602")
    table = model.period_model("201602")
    return PeriodTable(model=table, period="201602", table_name=table.Meta.table_name, start=start, end=end)


def test_a_refused_decrease_fails_the_step_and_changes_nothing(scaled_log: type[ScaledLog]) -> None:
    """DynamoDB limits decreases per day (LimitExceededException): the report says so."""
    updates = Faults(scaled_log.period_model("201602"), "UpdateTable")
    updates.plan = ["no-reasons:LimitExceededException"] * 10
    result = scale(scaled_log, now=tokyo(3))
    (failed,) = result.failed
    assert "LimitExceededException" in (failed.error or "")
    assert "FAILED" in result.lines()[-1]
    assert capacity(scaled_log) == (5, 5, (5, 5))


def test_an_on_demand_table_and_a_missing_table_are_reported_not_changed(dynamodb_models: Bind) -> None:
    CLOCK.now = tokyo(10)
    dynamodb_models(OnDemandLog)
    updates = Faults(OnDemandLog.period_model("201602"), "UpdateTable")
    result = scale(OnDemandLog)
    assert result.steps == ()
    assert "is on-demand" in result.lines()[-1]
    assert updates.log == []
    missing = scale(OnDemandLog, now=dt.datetime(2016, 4, 2, tzinfo=TOKYO).timestamp())
    assert "does not exist" in (missing.failed[0].error or "")
    with pytest.raises(ValueError, match="declares no capacity schedule"):
        from tests.integration.test_rotation import RotLog

        scale(RotLog)
