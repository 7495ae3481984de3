"""The async methods return what the sync methods return, on DynamoDB Local, for every strategy.

Each test writes the same items, then reads them page by page with the sync ``query`` and with
``aquery``: same items, same order, same ``last_evaluated_key`` and ``next_page_token`` after
every page, and a cursor of either resumes the other. ``acount`` and ``aget`` answer as
``count`` and ``get``. A hypothesis property does the same over random data, limits, page sizes,
directions and filters, alternating sync and async pages.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

import pytest
from botocore.httpsession import URLLib3Session
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardMetadata,
    TimePartitioned,
)
from pynamodb_sharding._pool import pause
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop, collect
from tests.day_index import day_index
from tests.paging import apage_by_page, page_by_page
from tests.raw import put_raw

NOW = 1_456_444_800  # 2016-02-26, in the February 2016 period


class RandomLog(ShardedModel):
    class Meta:
        table_name = "async_random_log"
        max_pool_connections = 16

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    day = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


class HashedLog(ShardedModel):
    class Meta:
        table_name = "async_hashed_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(4, attributes=("at",)))


class DynamicLogShards(ShardMetadata):
    class Meta:
        table_name = "async_dynamic_log_shards"


class DynamicLog(ShardedModel):
    class Meta:
        table_name = "async_dynamic_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    shards = Sharding(DynamicShards(DynamicLogShards, max_shards=8))


class LegacyLog(ShardedModel):
    class Meta:
        table_name = "async_legacy_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class PeriodLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("async_period_log.{period}", attribute="at", period="month",
                                     clock=lambda: NOW)

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


class IndexedLog(ShardedModel):
    class Meta:
        table_name = "async_indexed_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user = UnicodeAttribute(null=True)
    day = UnicodeAttribute()
    shards = Sharding(RandomShards(2))
    by_day = day_index(Sharding(RandomShards(4)))


def sync_pages(query: Any, limit: int, **kwargs: Any) -> list[tuple[list[int], Any, Any]]:
    """Every page of ``query`` read with the sync method, with each page's cursor and token."""
    return [([item.at for item in items], page.last_evaluated_key, page.next_page_token)
            for items, page in page_by_page(query, token=True, limit=limit, **kwargs)]


def async_pages(loop: Loop, aquery: Any, limit: int, **kwargs: Any) -> list[tuple[list[int], Any, Any]]:
    """The same with the async method."""
    return [([item.at for item in items], page.last_evaluated_key, page.next_page_token)
            for items, page in loop.run(apage_by_page(aquery, token=True, limit=limit, **kwargs))]


def write_items(model: type[ShardedModel], key: str, count: int) -> None:
    for n in range(count):
        model(key, NOW + n * 7 % 41, user="ab"[n % 2], **({"day": "20160226"} if "day" in model._attributes else {}))\
            .save()


STRATEGIES = [RandomLog, HashedLog, DynamicLog, LegacyLog, PeriodLog]


@pytest.mark.parametrize("model", STRATEGIES, ids=lambda model: model.__name__)
def test_pages_cursors_and_tokens_are_the_sync_ones(model: type[ShardedModel], dynamodb_models: BindModels,
                                                      loop: Loop) -> None:
    dynamodb_models(model)
    if model is PeriodLog:
        model.create_table(wait=True)
    write_items(model, "/hot", 23)
    if model is LegacyLog:  # items still under the bare legacy key are read too
        put_raw(model, [{"path": {"S": "/hot"}, "at": {"N": str(NOW + 100 + n)}} for n in range(3)])
    for forward in (True, False):
        expected = sync_pages(model.query, 5, hash_key="/hot", scan_index_forward=forward)
        assert expected == async_pages(loop, model.aquery, 5, hash_key="/hot", scan_index_forward=forward)
        assert len({at for items, _, _ in expected for at in items}) == (26 if model is LegacyLog else 23)
    assert model.count("/hot") == loop.run(model.acount("/hot"))
    assert model.count("/hot", filter_condition=model.user == "a") == loop.run(
        model.acount("/hot", filter_condition=model.user == "a"))
    stored = model.get("/hot", NOW + 7)
    fetched = loop.run(model.aget("/hot", NOW + 7))
    assert (stored.at, stored.user, stored.shards) == (fetched.at, fetched.user, fetched.shards)


def test_a_sharded_index_reads_through_its_shards(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(IndexedLog)
    write_items(IndexedLog, "/hot", 19)
    expected = sync_pages(IndexedLog.by_day.query, 4, hash_key="20160226")
    assert expected == async_pages(loop, IndexedLog.by_day.aquery, 4, hash_key="20160226")
    assert sum(len(items) for items, _, _ in expected) == 19
    assert loop.run(IndexedLog.by_day.acount("20160226")) == 19 == IndexedLog.by_day.count("20160226")


def test_a_cursor_of_either_resumes_the_other(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(RandomLog)
    write_items(RandomLog, "/mixed", 30)
    expected = [at for items, _, _ in sync_pages(RandomLog.query, 4, hash_key="/mixed") for at in items]
    seen: list[int] = []
    cursor: Any = None
    for page in range(40):
        if page % 2:
            items, _, token = loop.run(collect(RandomLog.aquery("/mixed", limit=4, last_evaluated_key=cursor)))
            seen.extend(item.at for item in items)
            cursor = token
        else:
            result = RandomLog.query("/mixed", limit=4, last_evaluated_key=cursor)
            seen.extend(item.at for item in result)
            cursor = result.last_evaluated_key  # the dict cursor, JSON round-tripped
            cursor = None if cursor is None else json.loads(json.dumps(cursor))
        if cursor is None:
            break
    assert expected == seen
    assert len(set(seen)) == 30


def test_requests_go_from_the_loop_thread_over_its_connections(dynamodb_models: BindModels, loop: Loop,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """No thread per request, and no request through botocore's own (blocking) HTTP session."""
    dynamodb_models(DynamicLog)
    write_items(DynamicLog, "/threads", 12)
    blocking_sends: list[Any] = []
    own_send = URLLib3Session.send
    monkeypatch.setattr(URLLib3Session, "send",
                        lambda self, request: (blocking_sends.append(request), own_send(self, request))[1])
    senders = set()
    client = DynamicLog._get_connection().connection.client
    client.meta.events.register("before-send.dynamodb", lambda **_: senders.add(threading.current_thread()))
    before = threading.active_count()

    async def reads_and_writes() -> int:
        await DynamicLog("/threads", NOW + 500, user="c").asave()
        items = [item async for item in DynamicLog.aquery("/threads", page_size=2)]
        (await DynamicLog.aget("/threads", NOW + 500)).user = "d"
        await items[0].adelete()
        return await DynamicLog.acount("/threads")

    assert loop.run(reads_and_writes()) == 12
    assert [] == blocking_sends
    assert {threading.main_thread()} == senders
    assert before == threading.active_count()
    assert DynamicLog.count("/threads") == 12
    assert blocking_sends  # the reference: a sync call uses botocore's own session


def sync_each(result: Any) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """The items of a sync result, with its cursor and page token after each item (where a reader
    may stop) and once the iteration ended."""
    cursors = []
    items = []
    for item in result:
        items.append(item)
        cursors.append((result.last_evaluated_key, result.next_page_token))
    cursors.append((result.last_evaluated_key, result.next_page_token))
    return items, cursors


async def async_each(result: Any) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """:func:`sync_each` of an async result."""
    cursors = []
    items = []
    async for item in result:
        items.append(item)
        cursors.append((result.last_evaluated_key, result.next_page_token))
    cursors.append((result.last_evaluated_key, result.next_page_token))
    return items, cursors


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stamps=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 60), st.sampled_from("abc")), max_size=30),
    limit=st.integers(1, 9),
    page_size=st.one_of(st.none(), st.integers(1, 6)),
    forward=st.booleans(),
    filtered=st.booleans(),
    async_first=st.booleans(),
)
# The cases where the sync cursor reads ahead (and the async one did not, before it read ahead in
# __anext__): shard 2 holds one item, shard 1 two, and its page of page_size=2 stops on its Limit
# with a LastEvaluatedKey; after the third item nothing is held, so whether one follows is known
# only by reading shard 1's next page (empty): the sync cursor is None there. With limit=5 the
# reader may stop before the limit and before a next() found the end; with limit=3 the limit falls
# exactly on the last item of the data.
@example(stamps=[(2, 0, "a"), (1, 1, "a"), (1, 2, "a")], limit=5, page_size=2, forward=True, filtered=False,
         async_first=True)
@example(stamps=[(2, 0, "a"), (1, 1, "a"), (1, 2, "a")], limit=3, page_size=2, forward=True, filtered=False,
         async_first=True)
@example(stamps=[(2, 9, "b"), (1, 8, "a"), (1, 7, "a")], limit=5, page_size=2, forward=False, filtered=False,
         async_first=True)
def test_async_and_sync_pages_are_interchangeable(
    dynamodb_models_module: Any, loop: Loop, stamps: list[tuple[int, int, str]], limit: int,
    page_size: int | None, forward: bool, filtered: bool, async_first: bool,
) -> None:
    """Random items over 4 shards (a sort value may repeat across shards), read page by page
    with a limit, resuming after every page, alternating async and sync pages: the pages, and
    the cursor and page token after each item (where a reader may stop) and at the end of each
    page, are those of an all-sync read."""
    dynamodb_models_module.bind(RandomLog)
    key = f"/p{uuid.uuid4().hex[:8]}"
    put_raw(RandomLog, [{"path": {"S": f"{key}_{shard}"}, "at": {"N": str(at)}, "user": {"S": user}}
                        for shard, at, user in {(shard, at): (shard, at, user)
                                                for shard, at, user in stamps}.values()])
    options: dict[str, Any] = {"scan_index_forward": forward, "page_size": page_size}
    if filtered:
        options["filter_condition"] = RandomLog.user != "c"
    expected = []
    cursor: Any = None
    while True:
        items, cursors = sync_each(RandomLog.query(key, limit=limit, last_evaluated_key=cursor, **options))
        expected.append(([item.at for item in items], cursors))
        cursor = cursors[-1][1]
        if cursor is None:
            break
    pages = []
    cursor = None
    for page in range(len(expected)):
        if (page % 2 == 0) == async_first:
            items, cursors = loop.run(async_each(RandomLog.aquery(key, limit=limit, last_evaluated_key=cursor,
                                                                  **options)))
        else:
            items, cursors = sync_each(RandomLog.query(key, limit=limit, last_evaluated_key=cursor, **options))
        pages.append(([item.at for item in items], cursors))
        last_key, token = cursors[-1]
        cursor = token if page % 3 else (None if last_key is None else json.loads(json.dumps(last_key)))
    assert expected == pages


def test_a_read_ahead_cancelled_keeps_the_item_and_the_cursor_before_it(dynamodb_models: BindModels,
                                                                        loop: Loop) -> None:
    """The read-ahead ``__anext__`` does for the cursor (after the third item here: shard 1's page
    stopped on its Limit) is cancelled by a timeout: the item it held back is not lost, the
    cursor stays before it, and resuming the cursor returns it."""
    dynamodb_models(RandomLog)
    key = "/cancelled"
    put_raw(RandomLog, [{"path": {"S": f"{key}_{shard}"}, "at": {"N": str(at)}}
                        for shard, at in ((2, 0), (1, 1), (1, 2))])
    sync = RandomLog.query(key, limit=5, page_size=2)
    assert [next(sync).at, next(sync).at] == [0, 1]
    expected_cursor = (sync.last_evaluated_key, sync.next_page_token)

    def slow_next_pages(request: Any, **_: Any) -> None:
        if b"ExclusiveStartKey" in (request.body or b""):  # shard 1's next page: the read-ahead's
            pause(5.0)

    async def read() -> tuple[list[int], Any, Any]:
        result = RandomLog.aquery(key, limit=5, page_size=2)
        seen = [(await result.__anext__()).at, (await result.__anext__()).at]
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(result.__anext__(), 0.5)
        return seen, result.last_evaluated_key, result.next_page_token

    events = RandomLog._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", slow_next_pages, unique_id="test-slow-next-pages")
    try:
        seen, cursor, token = loop.run(read())
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="test-slow-next-pages")
    assert seen == [0, 1]
    assert (cursor, token) == expected_cursor
    assert [item.at for item in RandomLog.query(key, last_evaluated_key=token)] == [2]


def test_a_limit_pages_items_encode_no_cursor_until_it_is_asked_for(dynamodb_models: BindModels, loop: Loop,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The last item of an ``aquery`` page of ``limit`` items, and the end after it, read nothing
    ahead, so they keep no cursor in case a read-ahead is cancelled (encoding it was most of the
    time they took): the cursor is encoded when asked for, as the sync result's is, and is the
    sync result's."""
    from pynamodb_sharding._async_results import AsyncMergedResult

    dynamodb_models(RandomLog)
    key = "/limit-page"
    put_raw(RandomLog, [{"path": {"S": f"{key}_{1 + at % 4}"}, "at": {"N": str(at)}} for at in range(40)])
    sync = RandomLog.query(key, limit=5)
    expected = ([item.at for item in sync], sync.last_evaluated_key, sync.next_page_token)
    kept: list[object] = []
    cursors = AsyncMergedResult._cursors

    def counted(self: AsyncMergedResult[Any]) -> Any:
        kept.append(self)
        return cursors(self)

    monkeypatch.setattr(AsyncMergedResult, "_cursors", counted)

    async def read() -> tuple[list[int], Any, Any, int]:
        result = RandomLog.aquery(key, limit=5)
        items = [(await result.__anext__()).at for _ in range(4)]
        before = len(kept)
        items.append((await result.__anext__()).at)
        with pytest.raises(StopAsyncIteration):
            await result.__anext__()
        return items, result.last_evaluated_key, result.next_page_token, len(kept) - before

    items, cursor, token, encoded_at_the_end = loop.run(read())
    assert encoded_at_the_end == 0
    assert (items, cursor, token) == expected
    assert items == [0, 1, 2, 3, 4]


class IndexOnlyLog(ShardedModel):
    """Shards only its index."""

    class Meta:
        table_name = "async_index_only_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = day_index(Sharding(RandomShards(2)))


def test_a_resumed_index_page_ends_with_the_sync_cursor(dynamodb_models: BindModels, loop: Loop) -> None:
    """Found by an adversarial trial: a page resumed inside a run of equal index sort values
    skips the entries its cursor returned; when those are all that follow the last item in the
    merge's batch, the read-ahead the sync cursor does must be done by ``aquery`` too, or it
    gives a cursor where the sync result says the end (the next page is read for nothing)."""
    dynamodb_models(IndexOnlyLog)
    # index shard 2 ("d_2") holds three entries of sort value 5
    put_raw(IndexOnlyLog, [{"path": {"S": f"p{n}"}, "at": {"N": "5"}, "day": {"S": "d_2"}} for n in range(3)])
    first = IndexOnlyLog.by_day.query("d", limit=2)
    assert len(list(first)) == 2
    token = first.next_page_token
    # meanwhile an entry of sort value 5 arrives in index shard 1 (it sorts before shard 2's)
    put_raw(IndexOnlyLog, [{"path": {"S": "new"}, "at": {"N": "5"}, "day": {"S": "d_1"}}])

    sync = IndexOnlyLog.by_day.query("d", limit=2, page_size=3, last_evaluated_key=token)
    sync_items = [item.path for item in sync]

    def next_pages_slow(request: Any, **_: Any) -> None:  # a shard's next page: 0.3 s away
        if b"ExclusiveStartKey" in (request.body or b""):
            pause(0.3)

    async def read() -> tuple[list[str], Any]:
        result = IndexOnlyLog.by_day.aquery("d", limit=2, page_size=3, last_evaluated_key=token)
        return [item.path async for item in result], result.next_page_token

    events = IndexOnlyLog._get_connection().connection.client.meta.events
    events.register("before-send.dynamodb.Query", next_pages_slow, unique_id="next-pages-slow")
    try:
        async_items, async_token = loop.run(read())
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="next-pages-slow")
    assert async_items == sync_items
    assert len(sync_items) == 2
    assert sync.next_page_token is None  # sync: the end (it read shard 2's next page: empty)
    assert async_token == sync.next_page_token
