"""Time-partitioned tables (``Meta.table_name = TimePartitioned(...)``) on DynamoDB Local.

Proves, with an injected clock and raw boto3 reads of each period's table: writes across a
month boundary land in two tables; ``get``, ``refresh``, ``update``, ``delete``, ``batch_get``,
``batch_write`` and transactions address the period of the item's key; a query spanning three
months returns the items of all three in sort-key order (both directions) and resumes exactly
from its cursor (dict or token) at every position, as a plain ``Model`` over one table does;
``count`` and ``scan`` cover every period; a missing period table is refused (nothing written)
or created, as declared; a read of a period without a table reads nothing; bad declarations
and ranges wider than ``max_periods`` are refused before sending.
"""

from __future__ import annotations

import datetime as dt
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.exceptions import PutError, PynamoDBException
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import (
    CursorError,
    DynamicShards,
    PeriodRangeError,
    PeriodsMissingError,
    PeriodsMissingWarning,
    PeriodTableMissingError,
    PeriodTableNotActiveError,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
    ShardMetadata,
    TimePartitioned,
)
from pynamodb_sharding._partitioned import existing_periods
from tests.clock import Clock
from tests.faults import Faults, TableCreation
from tests.paging import page_by_page
from tests.raw import count_items, raw_client, raw_items

Bind = Callable[..., Any]
UTC = dt.UTC


def epoch(year: int, month: int, day: int, hour: int = 0, second: int = 0) -> int:
    return int(dt.datetime(year, month, day, hour, 0, second, tzinfo=UTC).timestamp())


CLOCK = Clock(float(epoch(2016, 2, 26)))


class UserLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("tp_user_log.{period}", attribute="accessed_at", period="month", clock=CLOCK)

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    page = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


class PlainLog(Model):
    """The reference: the same items in one unsharded table."""

    class Meta:
        table_name = "tp_plain_log"

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    page = UnicodeAttribute(null=True)


class CreatingLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("tp_creating.{period}", attribute="accessed_at", period="day",
                                     missing="create", clock=CLOCK)
        extra_headers = {"x-trace": "time-partitioned"}  # noqa: RUF012  # a setting that is not hashable

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


class ImpatientLog(ShardedModel):
    """Waits at most 0.3 s for a table being created."""

    class Meta:
        table_name = TimePartitioned("tp_impatient.{period}", attribute="accessed_at", period="day",
                                     missing="create", creation_timeout=0.3, clock=CLOCK)

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


class StrictLog(ShardedModel):
    """Refuses reads of past periods without a table."""

    class Meta:
        table_name = TimePartitioned("tp_strict.{period}", attribute="accessed_at", missing_periods="raise",
                                     clock=CLOCK)

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


class QuietLog(ShardedModel):
    """Reads past periods without a table as empty, silently (as before missing_periods)."""

    class Meta:
        table_name = TimePartitioned("tp_quiet.{period}", attribute="accessed_at", missing_periods="ignore",
                                     clock=CLOCK)

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


class HotLogShards(ShardMetadata):
    class Meta:
        table_name = "tp_hot_log_shards"


class HotLog(ShardedModel):
    """Dynamic sharding and weekly tables, with a datetime range key."""

    class Meta:
        table_name = TimePartitioned("tp_hot_log.{period}", attribute="at", period="week", clock=CLOCK)

    key = UnicodeAttribute(hash_key=True)
    at = UTCDateTimeAttribute(range_key=True)
    # Growths written to at once (the fleet protocol of fresh reads, stored with the table).
    shards = Sharding(DynamicShards(HotLogShards, initial=1, max_shards=8, fresh_reads=True))


def table_of(model: type[Any], period: str) -> str:
    return str(model.Meta.table_name.table_name(period))


def raw_table(model: type[Any], period: str) -> list[dict[str, Any]]:
    return raw_items(model.period_model(period))


def three_months(bind: Bind) -> None:
    bind(UserLog, PlainLog)  # creates February's table (the clock's month)
    UserLog.period_model("201601").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    UserLog.period_model("201603").create_table(billing_mode="PAY_PER_REQUEST", wait=True)


def test_writes_across_a_month_boundary_land_in_two_tables(dynamodb_models: Bind) -> None:
    three_months(dynamodb_models)
    before, after = epoch(2016, 2, 29, 23, 59), epoch(2016, 3, 1, 0, 0)
    UserLog(user_id="u1", accessed_at=before).save()
    UserLog(user_id="u1", accessed_at=after).save()

    february, march = raw_table(UserLog, "201602"), raw_table(UserLog, "201603")
    assert [item["accessed_at"]["N"] for item in february] == [str(before)]
    assert [item["accessed_at"]["N"] for item in march] == [str(after)]
    assert raw_table(UserLog, "201601") == []
    # Each stored under a shard of the logical key, as any sharded item.
    assert february[0]["user_id"]["S"].startswith("u1_")
    assert existing_periods(UserLog) == ["201601", "201602", "201603"]


def test_point_reads_and_writes_address_the_period_of_the_key(dynamodb_models: Bind) -> None:
    three_months(dynamodb_models)
    at = epoch(2016, 1, 15)
    item = UserLog(user_id="u2", accessed_at=at, page="/home")
    item.save()

    got = UserLog.get("u2", at)
    assert type(got) is UserLog
    assert got.page == "/home"
    got.update(actions=[UserLog.page.set("/cart")])
    assert raw_table(UserLog, "201601")[0]["page"] == {"S": "/cart"}
    item.refresh()
    assert item.page == "/cart"
    assert [found.accessed_at for found in UserLog.batch_get([("u2", at), ("u2", epoch(2016, 3, 2))])] == [at]

    got.delete()
    assert raw_table(UserLog, "201601") == []
    with pytest.raises(UserLog.DoesNotExist):
        UserLog.get("u2", at)
    with pytest.raises(UserLog.DoesNotExist):
        item.refresh()
    # A period without a table holds nothing: get and refresh say so, as for an absent item.
    with pytest.raises(UserLog.DoesNotExist):
        UserLog.get("u2", epoch(2015, 6, 1))


def test_a_changed_time_saves_a_new_item_in_the_new_period(dynamodb_models: Bind) -> None:
    """As PynamoDB writes an item whose key changed anew, keeping the stored one."""
    three_months(dynamodb_models)
    item = UserLog(user_id="u3", accessed_at=epoch(2016, 2, 10))
    item.save()
    item.accessed_at = epoch(2016, 3, 10)
    item.save()
    assert len(raw_table(UserLog, "201602")) == 1
    assert len(raw_table(UserLog, "201603")) == 1


def test_transactions_and_batch_writes_go_to_each_items_period(dynamodb_models: Bind) -> None:
    three_months(dynamodb_models)
    jan, feb, mar = epoch(2016, 1, 5), epoch(2016, 2, 5), epoch(2016, 3, 5)
    with UserLog.batch_write() as batch:
        for at in (jan, feb, mar):
            batch.save(UserLog(user_id="u4", accessed_at=at, page="batch"))
    assert [len(raw_table(UserLog, period)) for period in ("201601", "201602", "201603")] == [1, 1, 1]

    connection = UserLog.period_model("201602")._get_connection().connection
    with TransactWrite(connection=connection) as transaction:
        transaction.update(UserLog(user_id="u4", accessed_at=jan), actions=[UserLog.page.set("tx")])
        transaction.save(UserLog(user_id="u5", accessed_at=mar, page="tx"))
        transaction.delete(UserLog(user_id="u4", accessed_at=feb))
    assert raw_table(UserLog, "201601")[0]["page"] == {"S": "tx"}
    assert raw_table(UserLog, "201602") == []
    assert sorted(item["page"]["S"] for item in raw_table(UserLog, "201603")) == ["batch", "tx"]

    with TransactGet(connection=connection) as reads:
        future = reads.get(UserLog, "u5", mar)
    assert future.get().page == "tx"

    with UserLog.batch_write() as batch:
        batch.delete(UserLog(user_id="u4", accessed_at=jan))
    assert raw_table(UserLog, "201601") == []


def save_both(user_id: str, times: list[int]) -> None:
    for number, at in enumerate(times):
        UserLog(user_id=user_id, accessed_at=at, page=f"p{number}").save()
        PlainLog(user_id=user_id, accessed_at=at, page=f"p{number}").save()


MONTHS_OF_TIMES = [epoch(2016, 1, 31, 23, second) for second in range(0, 50, 7)] + \
    [epoch(2016, 2, day) for day in (1, 2, 15, 29)] + [epoch(2016, 3, day, 1) for day in range(1, 9)]


def test_a_query_over_three_months_returns_every_item_in_order(dynamodb_models: Bind) -> None:
    three_months(dynamodb_models)
    save_both("u6", MONTHS_OF_TIMES)
    for forward in (True, False):
        merged = [(item.accessed_at, item.page) for item in UserLog.query("u6", scan_index_forward=forward)]
        plain = [(item.accessed_at, item.page) for item in PlainLog.query("u6", scan_index_forward=forward)]
        assert merged == plain
        assert len(merged) == len(MONTHS_OF_TIMES)
    ranged = UserLog.accessed_at.between(epoch(2016, 1, 31, 23, 10), epoch(2016, 3, 3, 1))
    plain_ranged = PlainLog.accessed_at.between(epoch(2016, 1, 31, 23, 10), epoch(2016, 3, 3, 1))
    assert [item.accessed_at for item in UserLog.query("u6", ranged)] == \
        [item.accessed_at for item in PlainLog.query("u6", plain_ranged)]
    # December 2015 and April 2016 have no table: a range over them reads the other months (and
    # says that past December had none; April is yet to come).
    wider = UserLog.accessed_at.between(epoch(2015, 12, 1), epoch(2016, 4, 30))
    with pytest.warns(PeriodsMissingWarning, match="the table of period 201512 "):
        assert [item.accessed_at for item in UserLog.query("u6", wider, scan_index_forward=False)] == \
            sorted(MONTHS_OF_TIMES, reverse=True)
    with pytest.warns(PeriodsMissingWarning, match="the table of period 201512 "):
        assert UserLog.count("u6", wider) == len(MONTHS_OF_TIMES)
    assert UserLog.count("u6") == len(MONTHS_OF_TIMES)
    assert UserLog.count("u6", UserLog.accessed_at >= epoch(2016, 2, 2)) == 3 + 8
    assert UserLog.count("u6", limit=5) == 5
    assert sorted(item.accessed_at for item in UserLog.scan()) == sorted(MONTHS_OF_TIMES)
    # A scan resumes from its dict cursor across periods, each item once.
    scanned: list[int] = []
    cursor: Any = None
    while True:
        page = UserLog.scan(limit=4, last_evaluated_key=cursor)
        scanned.extend(item.accessed_at for item in page)
        cursor = page.last_evaluated_key
        if cursor is None:
            break
    assert sorted(scanned) == sorted(MONTHS_OF_TIMES)
    with pytest.raises(CursorError, match="no next_page_token"):
        _ = page.next_page_token


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("as_token", [False, True])
def test_a_query_over_three_months_resumes_exactly_from_its_cursor(
    dynamodb_models: Bind, forward: bool, as_token: bool,
) -> None:
    three_months(dynamodb_models)
    save_both("u7", MONTHS_OF_TIMES)
    expected = [item.accessed_at for item in PlainLog.query("u7", scan_index_forward=forward)]
    for page_size in (1, 3, 4, 8):
        read = [[item.accessed_at for item in items]
                for items, _ in page_by_page(UserLog.query, token=as_token, hash_key="u7",
                                             scan_index_forward=forward, limit=page_size)]
        assert all(0 < len(page) <= page_size for page in read[:-1])  # no cursor after an empty page
        assert len(read[-1]) <= page_size
        assert [at for page in read for at in page] == expected, page_size


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stops=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=8),
    forward=st.booleans(),
)
def test_property_any_sequence_of_limits_reads_each_item_once_in_order(
    dynamodb_models_module: Any, stops: list[int], forward: bool,
) -> None:
    """Resuming at any positions never loses, repeats or reorders an item."""
    if not getattr(test_property_any_sequence_of_limits_reads_each_item_once_in_order, "bound", False):
        dynamodb_models_module.bind(UserLog, PlainLog)
        UserLog.period_model("201601").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        UserLog.period_model("201603").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        save_both("u8", MONTHS_OF_TIMES)
        test_property_any_sequence_of_limits_reads_each_item_once_in_order.bound = True  # type: ignore[attr-defined]
    expected = [item.accessed_at for item in PlainLog.query("u8", scan_index_forward=forward)]
    seen: list[int] = []
    cursor: Any = None
    for limit in stops:
        result = UserLog.query("u8", scan_index_forward=forward, limit=limit, last_evaluated_key=cursor)
        seen.extend(item.accessed_at for item in result)
        cursor = result.last_evaluated_key
        if cursor is None:
            break
    if cursor is not None:
        seen.extend(item.accessed_at for item in UserLog.query("u8", scan_index_forward=forward,
                                                               last_evaluated_key=cursor))
    assert seen == expected


def test_a_write_to_a_period_without_a_table_is_refused_and_writes_nothing(dynamodb_models: Bind) -> None:
    dynamodb_models(UserLog)
    with pytest.raises(PeriodTableMissingError) as refused:
        UserLog(user_id="u9", accessed_at=epoch(2016, 4, 1)).save()
    message = str(refused.value)
    assert "UserLog.accessed_at" in message
    assert "201604" in message
    assert "tables rotate" in message
    assert existing_periods(UserLog) == ["201602"]
    with pytest.raises(PeriodTableMissingError), UserLog.batch_write() as batch:
        batch.save(UserLog(user_id="u9", accessed_at=epoch(2016, 5, 1)))
    assert existing_periods(UserLog) == ["201602"]
    assert raw_table(UserLog, "201602") == []


def test_missing_create_makes_the_table_of_the_period_on_the_fly(dynamodb_models: Bind) -> None:
    dynamodb_models(CreatingLog)
    CreatingLog(user_id="u10", accessed_at=epoch(2016, 2, 27, 5)).save()
    with CreatingLog.batch_write() as batch:
        batch.save(CreatingLog(user_id="u10", accessed_at=epoch(2016, 2, 28, 5)))
    assert existing_periods(CreatingLog) == ["20160226", "20160227", "20160228"]
    assert [item.accessed_at for item in CreatingLog.query("u10")] == [epoch(2016, 2, 27, 5), epoch(2016, 2, 28, 5)]
    description = raw_client(CreatingLog.period_model("20160227")).describe_table(
        TableName=table_of(CreatingLog, "20160227"))["Table"]
    assert description["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    # create_table() of a model whose Meta names no billing makes an on-demand table too.
    CLOCK.now = float(epoch(2016, 3, 5))
    try:
        CreatingLog.create_table(wait=True)
    finally:
        CLOCK.now = float(epoch(2016, 2, 26))
    description = raw_client(CreatingLog.period_model("20160305")).describe_table(
        TableName=table_of(CreatingLog, "20160305"))["Table"]
    assert description["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_ranges_wider_than_max_periods_are_refused_before_sending(dynamodb_models: Bind) -> None:
    dynamodb_models(UserLog)
    wide = UserLog.accessed_at.between(epoch(2010, 1, 1), epoch(2016, 2, 1))
    with pytest.raises(PeriodRangeError) as refused:
        list(UserLog.query("u11", wide))
    assert "its range spans more than 36 months, from 201001" in str(refused.value)
    assert "Narrow the range" in str(refused.value)
    with pytest.raises(PeriodRangeError):
        UserLog.count("u11", wide)
    with pytest.raises(PeriodRangeError):
        list(UserLog.query("u11", last_evaluated_key={"period": "2016-02", "cursor": None}))


def test_dynamic_sharding_and_weekly_tables_together(dynamodb_models: Bind) -> None:
    """One shard count per key across the weeks; a grown key's items merge over shards and weeks."""
    dynamodb_models(HotLog)
    HotLog.period_model("2016W09").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    monday = dt.datetime(2016, 2, 29, tzinfo=UTC)
    times = [monday - dt.timedelta(hours=hours) for hours in range(1, 6)] + \
        [monday + dt.timedelta(hours=hours) for hours in range(0, 5)]
    for at in times[:5]:
        HotLog(key="hot", at=at).save()
    HotLog.shards.grow("hot")
    assert HotLog.shards.grow("hot") == 4
    for at in times[5:]:
        HotLog(key="hot", at=at).save()
    assert len({item["key"]["S"] for item in raw_table(HotLog, "2016W09")}) > 1  # over the grown shards
    assert [item.at for item in HotLog.query("hot")] == sorted(times)
    assert [item.at for item in HotLog.query("hot", HotLog.at < monday)] == sorted(times)[:5]
    namespaces = {item["model"]["S"] for item in count_items(HotLogShards)}
    assert namespaces == {str(HotLog.Meta.table_name)}  # the template: one count for every week


def test_a_declaration_on_anything_but_a_time_range_key_is_refused() -> None:
    with pytest.raises(ShardingDefinitionError, match=r"Bad\.user_id.*range key"):
        class Bad(ShardedModel):
            class Meta:
                table_name = TimePartitioned("bad.{period}", attribute="user_id")

            user_id = UnicodeAttribute(hash_key=True)
            accessed_at = NumberAttribute(range_key=True)
            shards = Sharding(RandomShards(2))
    with pytest.raises(ShardingDefinitionError, match=r"Worse\.page.*NumberAttribute"):
        class Worse(ShardedModel):
            class Meta:
                table_name = TimePartitioned("worse.{period}", attribute="page")

            user_id = UnicodeAttribute(hash_key=True)
            page = UnicodeAttribute(range_key=True)
            shards = Sharding(RandomShards(2))
    with pytest.raises(ValueError, match=r"\{period\}"):
        TimePartitioned("no_placeholder", attribute="at")
    with pytest.raises(ValueError, match="retention"):
        TimePartitioned("log.{period}", attribute="at", retention=0)


def test_a_missing_metadata_table_is_an_error_not_an_empty_period(dynamodb_models: Bind) -> None:
    """Only the period's own missing table reads as empty: another missing table (the shard
    counts') fails the read, as it does on a model with one table."""
    dynamodb_models(HotLog)
    at = dt.datetime(2016, 2, 26, tzinfo=UTC)
    HotLog(key="cold", at=at).save()
    HotLog.shards.grow("cold")
    HotLog.shards.strategy.store.clear()  # type: ignore[attr-defined]  # forget the cached count
    HotLogShards.delete_table(wait=True)
    with pytest.raises(PynamoDBException) as failed:
        list(HotLog.query("cold"))
    assert not isinstance(failed.value, PeriodTableMissingError)
    assert "ResourceNotFoundException" in repr(failed.value) or "non-existent" in str(failed.value)
    assert raw_table(HotLog, "2016W08") != []  # the period's table is there all along


def test_lost_replies_neither_double_nor_lose_items(dynamodb_models: Bind) -> None:
    """A save whose replies are lost raises as PynamoDB's does; saving the same instance again
    stores the item once, in its period's table. A query whose page reply is lost once (botocore
    resends it) returns exactly what the plain table returns."""
    three_months(dynamodb_models)
    at = epoch(2016, 3, 3)
    sharded_puts, plain_puts = Faults(UserLog.period_model("201603"), "PutItem"), Faults(PlainLog, "PutItem")
    sharded_puts.plan, plain_puts.plan = ["lost"] * 10, ["lost"] * 10
    item, plain = UserLog(user_id="u12", accessed_at=at, page="a"), PlainLog(user_id="u12", accessed_at=at, page="a")
    for model_item in (item, plain):
        with pytest.raises(PutError):
            model_item.save()
    sharded_puts.plan.clear()
    plain_puts.plan.clear()
    item.save()
    plain.save()
    assert len(raw_table(UserLog, "201603")) == len(raw_items(PlainLog)) == 1

    save_both("u13", MONTHS_OF_TIMES)
    queries = Faults(UserLog.period_model("201602"), "Query")
    queries.plan = ["lost", "closed"]
    assert [found.accessed_at for found in UserLog.query("u13")] == \
        [found.accessed_at for found in PlainLog.query("u13")]
    assert queries.log[:2] == ["lost", "closed"]


class ByPage(GlobalSecondaryIndex["IndexedLog"]):
    class Meta:
        index_name = "by_page"
        projection = AllProjection()

    page = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class ByUser(GlobalSecondaryIndex["IndexedLog"]):
    class Meta:
        index_name = "by_user"
        projection = AllProjection()

    page = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute(range_key=True)


class IndexedLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("tp_indexed.{period}", attribute="accessed_at", clock=CLOCK)

    log_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    page = UnicodeAttribute()
    user_id = UnicodeAttribute()
    by_page = ByPage()
    by_user = ByUser()
    shards = Sharding(RandomShards(3))


def test_an_index_sorted_by_the_time_is_read_across_periods_and_another_is_refused(dynamodb_models: Bind) -> None:
    dynamodb_models(IndexedLog)
    IndexedLog.period_model("201603").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    times = [epoch(2016, 2, day) for day in (3, 20, 28)] + [epoch(2016, 3, day) for day in (1, 9)]
    for number, at in enumerate(times):
        IndexedLog(log_id=f"log{number}", accessed_at=at, page="/home", user_id=f"user{9 - number}").save()
    assert [item.accessed_at for item in IndexedLog.by_page.query("/home")] == times
    assert [item.accessed_at for item in IndexedLog.by_page.query("/home", scan_index_forward=False)] == times[::-1]
    march = IndexedLog.accessed_at >= epoch(2016, 3, 1)
    assert [item.log_id for item in IndexedLog.by_page.query("/home", march)] == ["log3", "log4"]
    with pytest.raises(PeriodRangeError, match="sorts by 'user_id'"):
        list(IndexedLog.by_user.query("/home"))
    by_user = IndexedLog.period_model("201602").by_user.query("/home")
    assert [item.user_id for item in by_user] == ["user7", "user8", "user9"]


# -- a period table being created (DynamoDB's CREATING state, played through a botocore hook) ---


@pytest.mark.parametrize("model", [CreatingLog, UserLog], ids=["missing=create", "missing=refuse"])
def test_a_write_waits_while_its_period_table_is_being_created(dynamodb_models: Bind, model: Any) -> None:
    """DynamoDB answers ResourceNotFoundException to items of a table it is still creating: a
    save and a batch write wait until the table is ACTIVE, then land once."""
    dynamodb_models(model)
    at = epoch(2016, 3, 1, 5)
    period = model.Meta.table_name.period_of(at)
    table = model.period_model(period)
    table.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    creation = TableCreation(table)

    creation.start(polls=3)
    model(user_id="u14", accessed_at=at).save()
    assert creation.refused == ["PutItem"]
    creation.start(polls=3)
    with model.batch_write() as batch:
        batch.save(model(user_id="u14", accessed_at=at + 1))
    assert creation.refused == ["PutItem", "BatchWriteItem"]
    creation.refuse_next()  # refused while creating, ACTIVE by the time the writer looks
    model(user_id="u14", accessed_at=at + 2).save()
    assert creation.refused == ["PutItem", "BatchWriteItem", "PutItem"]

    assert sorted(int(item["accessed_at"]["N"]) for item in raw_items(table)) == [at, at + 1, at + 2]
    assert [item.accessed_at for item in model.query("u14", model.accessed_at.between(at, at + 2))] == \
        [at, at + 1, at + 2]


def test_a_write_gives_up_on_a_table_that_stays_creating(dynamodb_models: Bind) -> None:
    """After creation_timeout the write raises, naming the table and the fix; nothing is written."""
    dynamodb_models(ImpatientLog)
    at = epoch(2016, 2, 27, 5)
    table = ImpatientLog.period_model("20160227")
    table.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    creation = TableCreation(table)
    creation.start()
    try:
        with pytest.raises(PeriodTableNotActiveError) as refused:
            ImpatientLog(user_id="u15", accessed_at=at).save()
    finally:
        creation.release()
    message = str(refused.value)
    assert f"{table.Meta.table_name!r} of period '20160227' is still CREATING after 0.3 s" in message
    assert "nothing was written" in message
    assert "tables rotate" in message
    assert raw_items(table) == []


def _save_in_threads(items: list[Any]) -> tuple[list[threading.Thread], dict[str, BaseException]]:
    failures: dict[str, BaseException] = {}

    def save(item: Any) -> None:
        try:
            item.save()
        except BaseException as error:  # reported by the test
            failures[item.user_id] = error

    threads = [threading.Thread(target=save, args=(item,)) for item in items]
    return threads, failures


def test_two_writers_creating_one_period_table_both_write_once(dynamodb_models: Bind) -> None:
    """Both writers find no table and create it at the same moment: one creates it, the other
    gets ResourceInUseException; both wait while it is CREATING, then each item lands once."""
    dynamodb_models(CreatingLog)
    at = epoch(2016, 2, 29, 5)
    table = CreatingLog.period_model("20160229")
    creation = TableCreation(table, after_create=True, barrier=threading.Barrier(2))
    threads, failures = _save_in_threads([CreatingLog(user_id=user, accessed_at=at) for user in ("a", "b")])
    for thread in threads:
        thread.start()
    with creation.changed:
        assert creation.changed.wait_for(lambda: len(creation.created) == 2, timeout=60)
    assert sorted(creation.created) == ["ResourceInUseException", "ok"]
    creation.release()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == {}
    assert sorted(item["user_id"]["S"].rsplit("_", 1)[0] for item in raw_items(table)) == ["a", "b"]


def test_a_writer_arriving_while_another_creates_the_table_waits(dynamodb_models: Bind) -> None:
    """The second writer's put is refused while the first writer's table is CREATING (the table
    exists, so it is not created again): it waits for ACTIVE and writes; each item lands once."""
    dynamodb_models(CreatingLog)
    at = epoch(2016, 2, 29, 6)
    table = CreatingLog.period_model("20160229")
    creation = TableCreation(table, after_create=True)
    (first, second), failures = _save_in_threads([CreatingLog(user_id=user, accessed_at=at) for user in ("a", "b")])
    first.start()
    with creation.changed:
        assert creation.changed.wait_for(lambda: creation.created == ["ok"], timeout=60)
    second.start()
    with creation.changed:
        assert creation.changed.wait_for(lambda: creation.refused == ["PutItem"], timeout=60)
    creation.release()
    for thread in (first, second):
        thread.join(timeout=60)
    assert failures == {}
    assert creation.created == ["ok"]
    assert sorted(item["user_id"]["S"].rsplit("_", 1)[0] for item in raw_items(table)) == ["a", "b"]


# -- reads of periods whose tables were archived and dropped ------------------------------------


def missing_warnings(caught: list[warnings.WarningMessage]) -> list[PeriodsMissingWarning]:
    return [found.message for found in caught if isinstance(found.message, PeriodsMissingWarning)]


def test_a_read_of_dropped_periods_warns_naming_them(dynamodb_models: Bind) -> None:
    """January's table is dropped (as a rotation past its retention does): a query or count whose
    range covers it, or the months before it, still returns what the other months hold and
    warns once, naming the periods and their tables; future periods and reads without a lower
    bound (which cover the tables that exist) say nothing."""
    three_months(dynamodb_models)
    times = [epoch(2016, 1, 20), epoch(2016, 2, 20), epoch(2016, 3, 2)]
    save_both("u16", times)
    UserLog.period_model("201601").delete_table(wait=True)
    kept = times[1:]

    october_on = UserLog.accessed_at.between(epoch(2015, 10, 1), epoch(2016, 3, 31))
    for forward in (True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = [item.accessed_at for item in UserLog.query("u16", october_on, scan_index_forward=forward)]
        assert found == (kept if forward else kept[::-1])
        (warned,) = missing_warnings(caught)
        assert warned.periods == ("201510", "201511", "201512", "201601")
        assert warned.tables == tuple(table_of(UserLog, period) for period in warned.periods)
        message = str(warned)
        assert message.startswith(
            f"UserLog.query: the tables of periods 201510 to 201601 (4 months, {table_of(UserLog, '201510')!r} "
            f"to {table_of(UserLog, '201601')!r}) do not exist, so this query read nothing there"
        )
        assert "archived and dropped" in message
        assert "missing_periods='ignore'" in message
        assert caught[0].filename == __file__  # points at the caller's line

    with pytest.warns(PeriodsMissingWarning) as counted:
        assert UserLog.count("u16", october_on) == 2
    assert [warned.periods for warned in missing_warnings(counted.list)] == [("201510", "201511", "201512", "201601")]

    # Open above: the months from the lower bound on, known from the table list.
    with pytest.warns(PeriodsMissingWarning) as opened:
        assert [item.accessed_at for item in UserLog.query("u16", UserLog.accessed_at >= epoch(2015, 12, 5))] == kept
    assert [warned.periods for warned in missing_warnings(opened.list)] == [("201512", "201601")]

    with warnings.catch_warnings():
        warnings.simplefilter("error", PeriodsMissingWarning)
        assert [item.accessed_at for item in UserLog.query("u16")] == kept
        assert [item.accessed_at for item in UserLog.query("u16", UserLog.accessed_at <= epoch(2016, 3, 31))] == kept
        february_to_may = UserLog.accessed_at.between(epoch(2016, 2, 1), epoch(2016, 5, 31))  # April, May: future
        assert [item.accessed_at for item in UserLog.query("u16", february_to_may)] == kept
        # A page that stops before the dropped months never reached them.
        assert [item.accessed_at for item in UserLog.query("u16", october_on, scan_index_forward=False,
                                                           limit=1)] == kept[-1:]
        assert [item.accessed_at for item in UserLog.query("u16", UserLog.accessed_at >= epoch(2015, 12, 5),
                                                           scan_index_forward=False, limit=1)] == kept[-1:]


def test_missing_periods_raise_refuses_before_sending_and_ignore_stays_silent(dynamodb_models: Bind) -> None:
    dynamodb_models(StrictLog, QuietLog)
    StrictLog.period_model("201512").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    StrictLog(user_id="u17", accessed_at=epoch(2015, 12, 24)).save()
    StrictLog(user_id="u17", accessed_at=epoch(2016, 2, 24)).save()
    queries = Faults(StrictLog.period_model("201512"), "Query")

    november_on = StrictLog.accessed_at.between(epoch(2015, 11, 1), epoch(2016, 2, 28))
    with pytest.raises(PeriodsMissingError) as refused:
        StrictLog.query("u17", november_on)
    assert refused.value.periods == ("201511", "201601")
    assert refused.value.tables == (table_of(StrictLog, "201511"), table_of(StrictLog, "201601"))
    assert "nothing was read" in str(refused.value)
    assert "periods-missing" in refused.value.docs_url
    with pytest.raises(PeriodsMissingError):
        StrictLog.count("u17", StrictLog.accessed_at >= epoch(2015, 11, 1))
    assert queries.log == []  # refused before any query was sent
    december_on = StrictLog.accessed_at.between(epoch(2015, 12, 1), epoch(2016, 2, 28))
    with pytest.raises(PeriodsMissingError, match="the table of period 201601 "):
        list(StrictLog.query("u17", december_on))
    # A query resumed past the missing month reads on.
    cursor = {"period": "201601", "cursor": None}
    assert [item.accessed_at for item in StrictLog.query("u17", december_on, last_evaluated_key=cursor)] == \
        [epoch(2016, 2, 24)]

    QuietLog(user_id="u17", accessed_at=epoch(2016, 2, 24)).save()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PeriodsMissingWarning)
        assert [item.accessed_at for item in QuietLog.query("u17", QuietLog.accessed_at.between(
            epoch(2015, 11, 1), epoch(2016, 2, 28)))] == [epoch(2016, 2, 24)]
        assert QuietLog.count("u17", QuietLog.accessed_at >= epoch(2015, 11, 1)) == 1
