"""The fleet simulator's pure parts: virtual time, per-partition charging, expressions.

Proves: processes run in virtual-time order and a sleeping process lets the others run; a
partition's bucket admits one second of burst and refills at its limit, writes cost one unit
per started KB of the larger of the old and new item and reads one per started 4 KB (half when
eventually consistent), admitted on their minimum and charged the rest; a process of weight
``w`` is charged (and counted) ``w`` times and its ADDs add ``w`` times; over any sequence of
requests a partition never admits more than its limit per second plus one second of burst;
condition and update expressions give DynamoDB's answers. Global tables (``Replication``): a
change reaches each other region after its own lag; of two concurrent changes of one item the
later wins everywhere and the other is recorded lost; a change arriving after one made on top
of it (through a third region) is skipped, not counted lost; replicated writes take the
receiving partition's capacity and are never refused; however changes of one item interleave
across regions and lags, every replica ends on the change made last (property test).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding.testing._expressions import condition, update
from pynamodb_sharding.testing.fleet import (
    EventLoop,
    FleetDynamoDB,
    Replication,
    _ServiceError,
    _Table,
    activity,
    needed_shards,
)
from tests.clock import Clock


def _db(clock: Clock, **limits: float) -> FleetDynamoDB:
    db = FleetDynamoDB(clock, **limits)
    db.tables["log"] = _Table("log", "pk", "sk")
    return db


def _put(db: FleetDynamoDB, pk: str, sk: int, size: int = 10) -> bool:
    item = {"pk": {"S": pk}, "sk": {"N": str(sk)}, "pad": {"S": "x" * size}}
    try:
        db.handle("PutItem", {"TableName": "log", "Item": item})
    except _ServiceError as error:
        refused = error.body
    else:
        return True
    assert refused["__type"].endswith("ProvisionedThroughputExceededException")
    assert refused["ThrottlingReasons"][0]["reason"] == "TableWriteKeyRangeThroughputExceeded"
    return False


# -- virtual time -------------------------------------------------------------------------------


def test_processes_run_in_virtual_time_order() -> None:
    loop = EventLoop(start_epoch=1000.0)
    seen: list[tuple[str, float]] = []

    def process(name: str, pause: float) -> Any:
        def run() -> None:
            for _ in range(3):
                seen.append((name, loop.now))
                loop.sleep(pause)
        return run

    loop.spawn(process("a", 1.0))
    loop.spawn(process("b", 0.4), at=0.5)
    loop.run(until=10.0)
    assert seen == [("a", 0.0), ("b", 0.5), ("b", 0.9), ("a", 1.0), ("b", 1.3), ("a", 2.0)]
    assert loop.now == 10.0
    assert loop.time() == 1010.0


def test_run_stops_at_until_and_resumes_later() -> None:
    loop = EventLoop()
    ticks: list[float] = []

    def ticker() -> None:
        while True:
            ticks.append(loop.now)
            loop.sleep(1.0)

    loop.spawn(ticker)
    loop.run(until=2.5)
    assert ticks == [0.0, 1.0, 2.0]
    loop.run(until=4.0)
    assert ticks == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_sleep_outside_a_process_moves_time() -> None:
    loop = EventLoop()
    loop.sleep(2.5)
    assert loop.monotonic() == 2.5


def test_a_process_error_ends_the_run() -> None:
    loop = EventLoop()

    def broken() -> None:
        loop.sleep(1.0)
        raise RuntimeError("boom")

    loop.spawn(broken)
    with pytest.raises(RuntimeError, match="boom"):
        loop.run(until=5.0)


# -- charging -----------------------------------------------------------------------------------


def test_a_partition_bursts_one_second_then_refills_at_its_limit() -> None:
    clock = Clock(0.0)
    db = _db(clock, write_units=50)
    assert sum(_put(db, "hot", n) for n in range(80)) == 50  # one second of burst
    assert _put(db, "cold", 0)  # another partition has its own bucket
    clock.now = 0.5
    assert sum(_put(db, "hot", 100 + n) for n in range(40)) == 25
    assert db.throttles[("log", True)] == 30 + 15
    assert db.item_throttles == {("log", "hot", True): 45}


def test_writes_cost_one_unit_per_started_kb_of_the_larger_item() -> None:
    clock = Clock(0.0)
    db = _db(clock, write_units=10)
    assert _put(db, "k", 1, size=1500)  # 2 units
    assert _put(db, "k", 1, size=10)  # replaces a 2-unit item: still 2 units
    assert db.units[("log", True)] == 4
    db.handle("DeleteItem", {"TableName": "log", "Key": {"pk": {"S": "k"}, "sk": {"N": "1"}}})
    assert db.units[("log", True)] == 5
    assert list(db.items("log")) == []


def test_reads_are_admitted_on_their_minimum_and_charged_what_they_returned() -> None:
    clock = Clock(0.0)
    db = _db(clock, read_units=4)
    _put(db, "k", 1, size=10_000)  # a 10 KB item: 3 read units consistent, 1.5 eventually
    key = {"pk": {"S": "k"}, "sk": {"N": "1"}}
    found = db.handle("GetItem", {"TableName": "log", "Key": key, "ConsistentRead": True})
    assert found["Item"]["pad"]["S"] == "x" * 10_000
    assert db.units[("log", False)] == 3
    db.handle("GetItem", {"TableName": "log", "Key": key})  # 1 unit left: admitted, then in debt
    assert db.units[("log", False)] == 4.5
    with pytest.raises(_ServiceError, match="throughput"):
        db.handle("GetItem", {"TableName": "log", "Key": key})
    assert db.throttles[("log", False)] == 1


def test_a_weighted_process_is_charged_and_counted_weight_times() -> None:
    loop = EventLoop()
    db = _db(Clock(0.0), write_units=100)
    admitted: list[bool] = []

    def heavy() -> None:
        with activity("write", weight=40):
            admitted.extend(_put(db, "k", n) for n in range(3))

    loop.spawn(heavy)
    loop.run(until=1.0)
    assert admitted == [True, True, False]  # 40 + 40 units, then 20 left
    assert db.units[("log", True)] == 80
    assert db.requests[("log", "PutItem", "write")] == 120
    assert db.throttles[("log", True)] == 40


def test_a_weighted_add_adds_weight_times() -> None:
    loop = EventLoop()
    db = _db(Clock(0.0))
    body = {
        "TableName": "log", "Key": {"pk": {"S": "k"}, "sk": {"N": "1"}}, "UpdateExpression": "ADD #0 :0",
        "ExpressionAttributeNames": {"#0": "units"}, "ExpressionAttributeValues": {":0": {"N": "2.5"}},
        "ReturnValues": "ALL_NEW",
    }

    def reporter() -> None:
        with activity("write", weight=10):
            db.handle("UpdateItem", body)

    loop.spawn(reporter)
    loop.run(until=1.0)
    assert db.handle("UpdateItem", body)["Attributes"]["units"] == {"N": "27.5"}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 0.3), st.integers(1, 3000)), min_size=1, max_size=200))
def test_a_partition_never_admits_more_than_its_limit_plus_one_second(requests: list[tuple[float, int]]) -> None:
    clock = Clock(0.0)
    db = _db(clock, write_units=20)
    admitted: list[tuple[float, int]] = []
    for serial, (pause, size) in enumerate(requests):
        clock.now += pause
        if _put(db, "hot", serial, size=size):
            admitted.append((clock.now, -(-(size + 30) // 1024)))
    for start, _ in admitted:
        window = sum(units for at, units in admitted if start <= at < start + 1.0)
        assert window <= 20 * 1.0 + 20 + 1e-9


def test_needed_shards() -> None:
    assert needed_shards(0, 1000) == 1
    assert needed_shards(1000, 1000) == 1
    assert needed_shards(1001, 1000) == 2
    assert needed_shards(100_000, 700) == 143


# -- expressions --------------------------------------------------------------------------------

ITEM = {
    "pk": {"S": "hot"}, "count": {"N": "4"}, "history": {"SS": ["0:1", "5:4"]},
    "window": {"N": "100"}, "tags": {"L": [{"S": "a"}]}, "meta": {"M": {"owner": {"S": "me"}}},
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("attribute_exists (#pk)", True),
        ("attribute_not_exists (#pk)", False),
        ("attribute_not_exists (#missing)", True),
        ("#count = :four", True),
        ("#count <> :four", False),
        ("#count < :five AND #count >= :four", True),
        ("(#window = :five) OR (#window < :five)", False),
        ("NOT #count = :five", True),
        ("#count BETWEEN :four AND :five", True),
        ("#count IN (:five, :four)", True),
        ("begins_with (#pk, :h)", True),
        ("contains (#history, :h1)", True),
        ("size (#history) = :two", True),
        ("#meta.#owner = :me", True),
        ("#count < :text", False),  # a number and a string never compare
    ],
)
def test_conditions(expression: str, expected: bool) -> None:
    names = {"#pk": "pk", "#missing": "missing", "#count": "count", "#window": "window", "#history": "history",
             "#meta": "meta", "#owner": "owner"}
    values = {":four": {"N": "4"}, ":five": {"N": "5"}, ":h": {"S": "ho"}, ":h1": {"S": "5:4"},
              ":two": {"N": "2"}, ":me": {"S": "me"}, ":text": {"S": "9"}}
    assert condition(expression, names, values)(ITEM) is expected


def test_updates_set_add_remove() -> None:
    item: dict[str, Any] = {key: value for key, value in ITEM.items()}
    names = {"#c": "count", "#h": "history", "#w": "window", "#p": "previous", "#u": "units", "#t": "tags",
             "#m": "meta"}
    values = {":n": {"N": "8"}, ":e": {"SS": ["9:8"]}, ":one": {"N": "1.5"}, ":l": {"L": [{"S": "b"}]},
              ":zero": {"N": "0"}}
    update("SET #c = :n, #p = #w, #w = #w + :one ADD #h :e, #u :one REMOVE #m", names, values)(item)
    update("SET #t = list_append(#t, :l), #u = if_not_exists(#u, :zero)", names, values)(item)
    assert item["count"] == {"N": "8"}
    assert item["previous"] == {"N": "100"}
    assert item["window"] == {"N": "101.5"}
    assert set(item["history"]["SS"]) == {"0:1", "5:4", "9:8"}
    assert item["units"] == {"N": "1.5"}
    assert item["tags"] == {"L": [{"S": "a"}, {"S": "b"}]}
    assert "meta" not in item
    update("ADD #u :one", names, values, add_scale=Decimal(4))(item)
    assert item["units"] == {"N": "7.5"}


# -- global tables ------------------------------------------------------------------------------

REGIONS = ("us-east-1", "eu-west-1", "ap-northeast-1")


class ScriptedLags:
    """A ``random`` whose ``uniform`` gives the lags a test scripts, in order."""

    def __init__(self, *lags: float) -> None:
        self.lags = list(lags)

    def uniform(self, low: float, high: float) -> float:
        lag = self.lags.pop(0)
        assert low <= lag <= high
        return lag


def _replicas(loop: EventLoop, *lags: float, write_units: float = 1000) -> tuple[dict[str, FleetDynamoDB], Replication]:
    replicas = {}
    for region in REGIONS:
        replica = FleetDynamoDB(loop.monotonic, write_units=write_units, region=region)
        replica.tables["log"] = _Table("log", "pk", "sk")
        replicas[region] = replica
    lag_range = (min(lags), max(lags)) if lags else (0.5, 1.5)
    return replicas, Replication(loop, replicas, lag=lag_range, random=ScriptedLags(*lags))  # type: ignore[arg-type]


def _write(replica: FleetDynamoDB, note: str) -> None:
    replica.handle("PutItem", {"TableName": "log", "Item": {"pk": {"S": "k"}, "sk": {"N": "1"}, "note": {"S": note}}})


def _note(replica: FleetDynamoDB) -> str | None:
    item = replica.tables["log"].partitions.get("k", {}).get(Decimal(1))
    return None if item is None else str(item["note"]["S"])


def test_a_change_reaches_each_region_after_its_own_lag() -> None:
    loop = EventLoop()
    replicas, replication = _replicas(loop, 0.5, 1.5)
    _write(replicas["us-east-1"], "first")
    assert [_note(replicas[region]) for region in REGIONS] == ["first", None, None]
    loop.run(until=0.6)
    assert [_note(replicas[region]) for region in REGIONS] == ["first", "first", None]
    loop.run(until=1.6)
    assert [_note(replicas[region]) for region in REGIONS] == ["first", "first", "first"]
    assert replication.copied == 2
    assert replication.pending == 0
    assert replication.lost == {}
    assert replication.differing("log") == 0


def test_concurrent_changes_of_one_item_the_last_writer_wins_and_the_other_is_lost() -> None:
    loop = EventLoop()
    replicas, replication = _replicas(loop, 1.0, 1.0, 1.0, 1.0)
    _write(replicas["us-east-1"], "us")  # at 0, arrives everywhere at 1
    loop.run(until=0.5)
    _write(replicas["eu-west-1"], "eu")  # at 0.5, before us's change arrived: concurrent; later
    loop.run(until=5.0)
    assert [_note(replicas[region]) for region in REGIONS] == ["eu", "eu", "eu"]
    (lost,) = replication.lost.values()
    assert (lost.region, lost.at, lost.winner) == ("us-east-1", 0.0, "eu-west-1")
    assert replication.lost_in("log") == [lost]
    assert replication.differing("log") == 0


def test_a_change_arriving_after_one_made_on_top_of_it_is_old_news_not_a_loss() -> None:
    loop = EventLoop()
    # us's change: to eu after 0.2, to ap after 2.0; eu's change on top of it: 0.1 to us and ap.
    replicas, replication = _replicas(loop, 0.2, 2.0, 0.1, 0.1)
    _write(replicas["us-east-1"], "us")
    loop.run(until=0.3)
    assert _note(replicas["eu-west-1"]) == "us"
    _write(replicas["eu-west-1"], "eu on top")
    loop.run(until=5.0)  # ap gets eu's change at 0.6, then us's older one at 2.0
    assert [_note(replicas[region]) for region in REGIONS] == ["eu on top"] * 3
    assert replication.lost == {}
    assert replication.superseded == 1


def test_replicated_writes_take_the_partition_capacity_and_are_never_refused() -> None:
    loop = EventLoop()
    replicas, _ = _replicas(loop, *[0.5] * 40, write_units=10)
    for n in range(20):  # 20 units in us-east-1: 10 admitted at once (one second of burst)
        _put(replicas["us-east-1"], "hot", n)
    assert replicas["us-east-1"].throttles[("log", True)] == 10
    loop.run(until=0.5)
    eu = replicas["eu-west-1"]
    assert sum(1 for _ in eu.items("log")) == 10  # every admitted change arrived, none refused
    assert eu.replicated_units["log"] == 10
    assert not _put(eu, "hot", 100)  # the copies used the partition's second: a local write throttles
    assert _put(eu, "cold", 100)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 2), st.integers(0, 2), st.floats(0.5, 1.5), st.floats(0.5, 1.5)),
                min_size=1, max_size=12))
def test_replicas_converge_on_the_last_change_made(writes: list[tuple[float, int, float, float]]) -> None:
    """However changes of one item interleave across regions, once replication settles every
    region holds the change made last, and a change is recorded lost only if concurrent."""
    loop = EventLoop()
    lags = [lag for _, _, first, second in writes for lag in (first, second)]
    replicas, replication = _replicas(loop, *lags)
    replication.lag = (0.5, 1.5)
    at = 0.0
    last = ""
    for serial, (pause, region, _, _) in enumerate(writes):
        at += pause
        loop.run(until=at)
        last = f"{serial}"
        _write(replicas[REGIONS[region]], last)
    loop.run(until=at + 2.0)
    assert replication.pending == 0
    assert [_note(replicas[region]) for region in REGIONS] == [last] * 3
    assert replication.differing("log") == 0
    if len({region for _, region, _, _ in writes}) == 1:
        assert replication.lost == {}  # one region's changes are never concurrent
    assert all(lost.winner != lost.region for lost in replication.lost.values())
