"""An empty cursor (``last_evaluated_key=""`` or ``{}``) starts a read from its first item, as
PynamoDB's does (DynamoDB Local).

PynamoDB sends no start key when ``last_evaluated_key`` is false, so a web handler that passes
``?page=`` left empty (``""``) reads the first page. A plain ``Model`` doing the same read in the
same test is the reference, for merged queries (sync and async, the table and a sharded index,
a time-partitioned table) and scans; a truncated token is still refused (found by a new user's
trial: ``?page=`` was refused as a truncated cursor).
"""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import CursorError, RandomShards, ShardedModel, Sharding, TimePartitioned
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop, collect
from tests.day_index import day_index

NOW = 1_456_444_800  # 2016-02-26, in the February 2016 period
EMPTY: list[Any] = ["", {}]


class PlainFeed(Model):
    class Meta:
        table_name = "empty_cursor_plain"

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = day_index()


class Feed(ShardedModel):
    class Meta:
        table_name = "empty_cursor_feed"

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    shards = Sharding(RandomShards(4))
    by_day = day_index(Sharding(RandomShards(4)))


class PeriodFeed(ShardedModel):
    class Meta:
        table_name = TimePartitioned("empty_cursor_period.{period}", attribute="at", period="month",
                                     clock=lambda: NOW)

    feed = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    shards = Sharding(RandomShards(4))


@pytest.fixture
def feeds(dynamodb_models: BindModels) -> list[type[Model]]:
    models: list[type[Model]] = [PlainFeed, Feed, PeriodFeed]
    dynamodb_models(*models)
    for model in models:
        with model.batch_write() as batch:
            for n in range(12):
                batch.save(model("home", NOW + n, day="20160226"))
    return models


@pytest.mark.parametrize("empty", EMPTY, ids=["empty-str", "empty-dict"])
def test_an_empty_cursor_reads_from_the_first_item_as_plain_pynamodb(
        feeds: list[type[Model]], empty: Any, loop: Loop) -> None:
    plain, *sharded = feeds
    first_page = [NOW + 11, NOW + 10, NOW + 9, NOW + 8, NOW + 7]
    expected = [item.at for item in plain.query("home", scan_index_forward=False, limit=5, last_evaluated_key=empty)]
    assert expected == first_page
    assert sorted(item.at for item in plain.scan(last_evaluated_key=empty)) == [NOW + n for n in range(12)]
    assert [item.at for item in plain.by_day.query("20160226", limit=5, last_evaluated_key=empty)] == \
        [NOW + n for n in range(5)]
    for model in sharded:
        result = model.query("home", scan_index_forward=False, limit=5, last_evaluated_key=empty)
        assert [item.at for item in result] == first_page, model.__name__
        resumed = [item.at for item in model.query("home", scan_index_forward=False,
                                                   last_evaluated_key=result.next_page_token)]
        assert resumed == [NOW + n for n in range(6, -1, -1)], model.__name__
        items, cursor, token = loop.run(collect(model.aquery("home", scan_index_forward=False, limit=5,
                                                              last_evaluated_key=empty)))
        assert [item.at for item in items] == first_page, model.__name__
        assert (cursor, token) == (result.last_evaluated_key, result.next_page_token)
        assert sorted(item.at for item in model.scan(last_evaluated_key=empty)) == [NOW + n for n in range(12)]
        scanned = loop.run(model.ascan(last_evaluated_key=empty))
        assert sorted(item.at for item in scanned) == [NOW + n for n in range(12)]
    index_page = [item.at for item in Feed.by_day.query("20160226", limit=5, last_evaluated_key=empty)]
    assert index_page == [NOW + n for n in range(5)]


def test_a_truncated_token_is_still_refused(feeds: list[type[Model]]) -> None:
    result = Feed.query("home", limit=5)
    assert len(list(result)) == 5
    token = result.next_page_token
    assert token
    with pytest.raises(CursorError, match="truncated"):
        list(Feed.query("home", last_evaluated_key=token[:3]))
