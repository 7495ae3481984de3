"""``last_evaluated_key`` and ``next_page_token`` at the end of the data, as PynamoDB's.

PynamoDB's ``ResultIterator`` hands back DynamoDB's ``LastEvaluatedKey`` once a page is used
up, and DynamoDB gives one for a page that stopped on its ``Limit`` even on the key's last item:
``query(limit=5)`` over exactly 5 items has a cursor, and the page it resumes is empty. An
application's paginator is written against that. Proves, with a plain ``Model`` over the same
items as the reference on DynamoDB Local, that a merged query (table, sharded index,
time-partitioned) gives a cursor exactly where PynamoDB does and ``None`` exactly where it
does, page after page of an application's paginator, with fewer items than the limit, exactly
as many and more, with and without ``page_size``, in both directions, as a dict cursor and as
a page token; that a query stopped by its caller (no limit) agrees too; that page iteration
yields PynamoDB's trailing empty page; and, with a filter, where the documented difference
lies (a cursor, then one empty page) and that nothing is ever lost or repeated.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, TimePartitioned
from pynamodb_sharding.testing import record_requests
from tests.raw import raw_items

Bind = Callable[..., Any]
#: A page: the items returned (their ``seq``) and whether the query then had a cursor.
Page = tuple[list[int], bool]


class PlainByDay(GlobalSecondaryIndex["PlainEvent"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)


class PlainEvent(Model):
    """PynamoDB's own behaviour: the reference."""

    class Meta:
        table_name = "end_cursor_plain"

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    kind = NumberAttribute()
    day = UnicodeAttribute()
    by_day = PlainByDay()


class ByDay(GlobalSecondaryIndex["Event"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(3))


class Event(ShardedModel):
    class Meta:
        table_name = "end_cursor_sharded"

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    kind = NumberAttribute()
    day = UnicodeAttribute()
    by_day = ByDay()
    shards = Sharding(RandomShards(4))


FEBRUARY = int(dt.datetime(2016, 2, 1, tzinfo=dt.UTC).timestamp())
MARCH = int(dt.datetime(2016, 3, 1, tzinfo=dt.UTC).timestamp())
APRIL = int(dt.datetime(2016, 4, 1, tzinfo=dt.UTC).timestamp())


class PeriodLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("end_cursor_log.{period}", attribute="seq", period="month",
                                     clock=lambda: float(MARCH + 86_400))

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    kind = NumberAttribute()
    shards = Sharding(RandomShards(3))


class PlainPeriodLog(Model):
    """The reference for the periods: the same items in one plain table."""

    class Meta:
        table_name = "end_cursor_plain_log"

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    kind = NumberAttribute()


def fill(count: int) -> None:
    """``count`` items under stream ``"s"`` and day ``"d"``, in both models; kind = seq % 2."""
    for seq in range(count):
        PlainEvent("s", seq, kind=seq % 2, day="d").save()
        Event("s", seq, kind=seq % 2, day="d").save()
    stored = sorted(int(item["seq"]["N"]) for item in raw_items(Event))
    assert stored == list(range(count))  # each item once, in some shard


def paginate(query: Callable[[Any], Any], *, token: bool = False) -> list[Page]:
    """An application's paginator: ask for the next page with the last cursor until it is ``None``."""
    pages: list[Page] = []
    cursor: Any = None
    for _ in range(30):
        result = query(cursor)
        items = [item.seq for item in result]
        cursor = result.last_evaluated_key
        if isinstance(result.last_evaluated_key, dict) and hasattr(result, "next_page_token"):
            assert (result.next_page_token is None) == (cursor is None)
            if token:
                cursor = result.next_page_token
        pages.append((items, cursor is not None))
        if cursor is None:
            return pages
    raise AssertionError(f"the cursor never became None: {pages[:5]}")


CASES = [
    pytest.param(count, limit, page_size, id=f"{count}-items-limit-{limit}-page-size-{page_size}")
    for count in (3, 5, 8)
    for limit, page_size in ((5, None), (5, 2), (5, 5), (5, 7), (4, 2))
]


class TestTableQuery:
    """A merged query of the table pages exactly as a plain query of the same items."""

    def test_a_page_that_ends_on_the_last_item_has_a_cursor_and_the_next_page_is_empty(
        self, dynamodb_models: Bind,
    ) -> None:
        """The reported case: limit 5 over exactly 5 items. DynamoDB stops on its Limit and gives
        a LastEvaluatedKey; PynamoDB passes it on, and the page it resumes is empty."""
        dynamodb_models(PlainEvent, Event)
        fill(5)
        expected = [([0, 1, 2, 3, 4], True), ([], False)]
        assert expected == paginate(lambda cursor: PlainEvent.query("s", limit=5, last_evaluated_key=cursor))
        assert expected == paginate(lambda cursor: Event.query("s", limit=5, last_evaluated_key=cursor))
        assert expected == paginate(lambda cursor: Event.query("s", limit=5, last_evaluated_key=cursor),
                                    token=True)

    def test_a_short_last_page_has_no_cursor(self, dynamodb_models: Bind) -> None:
        """page_size 2 under limit 5 over 5 items: DynamoDB's third page holds one item and
        stops short of its Limit, so there is no cursor."""
        dynamodb_models(PlainEvent, Event)
        fill(5)
        expected = [([0, 1, 2, 3, 4], False)]
        assert expected == paginate(lambda cursor: PlainEvent.query("s", limit=5, page_size=2,
                                                                     last_evaluated_key=cursor))
        assert expected == paginate(lambda cursor: Event.query("s", limit=5, page_size=2, last_evaluated_key=cursor))

    @pytest.mark.parametrize(("count", "limit", "page_size"), CASES)
    def test_every_page_as_pynamodb(self, dynamodb_models: Bind, count: int, limit: int,
                                    page_size: int | None) -> None:
        dynamodb_models(PlainEvent, Event)
        fill(count)
        assert_pages_as_pynamodb(PlainEvent.query, Event.query, "s", count, limit=limit, page_size=page_size)

    @pytest.mark.parametrize("page_size", [None, 2, 3, 4, 5])
    def test_a_query_stopped_by_its_caller(self, dynamodb_models: Bind, page_size: int | None) -> None:
        """No limit: the caller takes every item but never asks for more. PynamoDB then has a
        cursor only if DynamoDB's last page stopped on its Limit (4 items, page_size 2 or 4)."""
        dynamodb_models(PlainEvent, Event)
        fill(4)
        answers = []
        for model in (PlainEvent, Event):
            result = model.query("s", page_size=page_size)
            assert [item.seq for item in itertools.islice(result, 4)] == [0, 1, 2, 3]
            answers.append(result.last_evaluated_key is not None)
            if result.last_evaluated_key is not None:
                assert list(model.query("s", page_size=page_size, last_evaluated_key=result.last_evaluated_key)) == []
        assert answers == [page_size in (2, 4)] * 2

    def test_a_query_stopped_by_its_caller_before_the_end(self, dynamodb_models: Bind) -> None:
        dynamodb_models(PlainEvent, Event)
        fill(6)
        for model in (PlainEvent, Event):
            result = model.query("s", page_size=4)
            assert [item.seq for item in itertools.islice(result, 5)] == [0, 1, 2, 3, 4]
            assert result.last_evaluated_key is not None
            assert [item.seq for item in model.query("s", last_evaluated_key=result.last_evaluated_key)] == [5]

    def test_knowing_whether_an_item_follows_reads_at_most_one_page_a_shard(self, dynamodb_models: Bind) -> None:
        """limit 5, page_size 2 over 5 items: the shards' last pages may have stopped on their
        Limit, so whether an item follows is asked of them; asking again sends nothing."""
        dynamodb_models(Event)
        for seq in range(5):
            Event("s", seq, kind=0, day="d").save()
        result = Event.query("s", limit=5, page_size=2)
        assert len(list(result)) == 5
        with record_requests(Event) as requests:
            assert result.last_evaluated_key is None
            assert result.next_page_token is None
            assert result.last_evaluated_key is None
        assert requests.requests.get("Query", 0) <= 4

    def test_page_iteration_yields_the_empty_page_dynamodb_does(self, dynamodb_models: Bind) -> None:
        """8 items, page_size 4: DynamoDB's second page stops on its Limit, so a third, empty
        page follows, without a LastEvaluatedKey."""
        dynamodb_models(PlainEvent, Event)
        fill(8)
        for model in (PlainEvent, Event):
            pages = list(model.query("s", page_size=4).page_iter)
            assert [page["Count"] for page in pages] == [4, 4, 0]
            assert ["LastEvaluatedKey" in page for page in pages] == [True, True, False]


class TestFilteredQuery:
    """With a filter the merge cannot see where DynamoDB's Limit cut the items it evaluated."""

    @pytest.mark.parametrize(("count", "limit", "page_size"), CASES)
    def test_never_none_where_pynamodb_has_a_cursor(self, dynamodb_models: Bind, count: int, limit: int,
                                                    page_size: int | None) -> None:
        """Where PynamoDB has a cursor the merged query has one; where PynamoDB has none the
        merged query has none or a cursor whose page is empty and ends; the items are the same."""
        dynamodb_models(PlainEvent, Event)
        fill(count)
        for forward in (True, False):
            def plain(cursor: Any, forward: bool = forward) -> Any:
                return PlainEvent.query("s", filter_condition=PlainEvent.kind == 0, limit=limit,
                                        page_size=page_size, scan_index_forward=forward, last_evaluated_key=cursor)

            def sharded(cursor: Any, forward: bool = forward) -> Any:
                return Event.query("s", filter_condition=Event.kind == 0, limit=limit, page_size=page_size,
                                   scan_index_forward=forward, last_evaluated_key=cursor)

            expected, got = paginate(plain), paginate(sharded)
            assert [items for items, _ in expected] == [items for items, _ in got][:len(expected)]
            assert sorted(seq for items, _ in got for seq in items) == list(range(0, count, 2))
            for (_, plain_cursor), (_, merged_cursor) in zip(expected, got, strict=False):
                assert merged_cursor or not plain_cursor
            if len(got) > len(expected):  # the documented difference: one more page, empty
                assert got[len(expected):] == [([], False)]
                assert expected[-1][1] is False

    def test_where_the_answers_differ(self, dynamodb_models: Bind) -> None:
        """7 items, kind 0 on 0, 2, 4, 6, limit 4: DynamoDB's second page evaluates 4, 5, 6
        and ends short of its Limit, so PynamoDB has no cursor. The merged query cannot know
        that page ended short, gives a cursor, and the page it resumes is empty."""
        dynamodb_models(PlainEvent, Event)
        fill(7)
        assert paginate(lambda cursor: PlainEvent.query("s", filter_condition=PlainEvent.kind == 0, limit=4,
                                                        last_evaluated_key=cursor)) == [([0, 2, 4, 6], False)]
        assert paginate(lambda cursor: Event.query("s", filter_condition=Event.kind == 0, limit=4,
                                                   last_evaluated_key=cursor)) == [([0, 2, 4, 6], True), ([], False)]

    def test_without_a_limit_or_page_size_the_answers_agree(self, dynamodb_models: Bind) -> None:
        """No Limit: DynamoDB only stops at 1 MB, so a plain query's cursor means an item follows."""
        dynamodb_models(PlainEvent, Event)
        fill(6)
        for model in (PlainEvent, Event):
            result = model.query("s", filter_condition=model.kind == 0)
            assert [item.seq for item in itertools.islice(result, 3)] == [0, 2, 4]
            assert result.last_evaluated_key is None


def assert_pages_as_pynamodb(plain: Callable[..., Any], sharded: Callable[..., Any], key: str, count: int,
                             **options: Any) -> None:
    """In either direction, resumed from its cursors and from its tokens, the sharded query of
    ``key`` (``count`` items) returns PynamoDB's pages: the same items, and a cursor after the
    same pages."""
    for forward, token in itertools.product((True, False), (False, True)):
        def page(query: Callable[..., Any], cursor: Any, forward: bool = forward) -> Any:
            return query(key, scan_index_forward=forward, last_evaluated_key=cursor, **options)

        expected = paginate(partial(page, plain))
        assert sorted(seq for items, _ in expected for seq in items) == list(range(count))
        assert expected == paginate(partial(page, sharded), token=token), (forward, token)


class TestIndexQuery:
    """A merged query of a sharded index pages as a plain query of a plain index."""

    @pytest.mark.parametrize(("count", "limit", "page_size"), CASES)
    def test_every_page_as_pynamodb(self, dynamodb_models: Bind, count: int, limit: int,
                                    page_size: int | None) -> None:
        dynamodb_models(PlainEvent, Event)
        fill(count)
        assert_pages_as_pynamodb(PlainEvent.by_day.query, Event.by_day.query, "d", count, limit=limit,
                                 page_size=page_size)


def fill_periods(bind: Bind, february: int, march: int) -> None:
    """Items in February's and March's tables (April's exists and is empty), and the same in
    one plain table."""
    bind(PeriodLog, PlainPeriodLog)
    for period in ("201602", "201604"):
        PeriodLog.period_model(period).create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    times = [FEBRUARY + n for n in range(february)] + [MARCH + n for n in range(march)]
    for seq in times:
        PeriodLog("s", seq, kind=0).save()
        PlainPeriodLog("s", seq, kind=0).save()


class TestTimePartitionedQuery:
    """A query over several periods' tables pages as a plain query of one table holding them all."""

    @pytest.mark.parametrize(("february", "march"), [(3, 2), (5, 0), (2, 3), (4, 4)])
    def test_every_page_as_pynamodb(self, dynamodb_models: Bind, february: int, march: int) -> None:
        fill_periods(dynamodb_models, february, march)
        for limit, page_size, forward, token in itertools.product(
            (5, 4), (None, 2, 3), (True, False), (False, True),
        ):
            def plain(cursor: Any, limit: int = limit, page_size: int | None = page_size,
                      forward: bool = forward) -> Any:
                return PlainPeriodLog.query("s", limit=limit, page_size=page_size, scan_index_forward=forward,
                                            last_evaluated_key=cursor)

            def sharded(cursor: Any, limit: int = limit, page_size: int | None = page_size,
                        forward: bool = forward) -> Any:
                return PeriodLog.query("s", limit=limit, page_size=page_size, scan_index_forward=forward,
                                       last_evaluated_key=cursor)

            expected = paginate(plain)
            assert sum(len(items) for items, _ in expected) == february + march
            got = paginate(sharded, token=token)
            assert [(len(items), cursor) for items, cursor in expected] == [
                (len(items), cursor) for items, cursor in got
            ], (limit, page_size, forward, token)
            assert [seq for items, _ in expected for seq in items] == [seq for items, _ in got for seq in items]


def test_resuming_from_each_cursor_returns_exactly_the_rest(dynamodb_models: Bind) -> None:
    """At every stopping point of every page size, what a resumed query returns is what
    follows in the plain query: nothing at the end."""
    dynamodb_models(PlainEvent, Event)
    fill(6)
    everything = [item.seq for item in PlainEvent.query("s")]

    def rest(model: type[Any], cursor: Any) -> Iterator[int]:
        return (item.seq for item in model.query("s", last_evaluated_key=cursor))

    for limit, page_size in itertools.product(range(1, 8), (None, 1, 2, 3, 6, 7)):
        for model in (PlainEvent, Event):
            result = model.query("s", limit=limit, page_size=page_size)
            taken = [item.seq for item in result]
            cursor = result.last_evaluated_key
            if cursor is None:
                assert taken == everything, (model, limit, page_size)
            else:
                assert taken + list(rest(model, cursor)) == everything, (model, limit, page_size)
