"""A merged query reads the shard count and shard 1's first page at the same time (DynamoDB Local).

Proves: with fresh reads (``fresh_reads=True``, and the fleet protocol of fresh reads its table
stores) the metadata ``GetItem`` of a merged query is in flight while shard 1's ``Query`` is
(checked by holding the ``GetItem`` until the ``Query`` is sent: the control without overlap
would wait in vain); a key this process read before costs one
``GetItem`` and one ``Query`` per shard, never one more, and its early pages are used only
when the count read is the version they were sent for (a compaction that moves items into a
shard after its early page and trims the history before the count is read is not missed); the
shards read are the ones the metadata read returned, so items another process wrote to shards
it added a moment ago are returned (raw check that they are in other shards); the results equal
a plain ``Model``'s over the same items in both directions, with limits and resumed cursors;
a process following a stored protocol of cached reads sends nothing early while its count is
cached, and once it expired queries (and counts) the shards it last read while the count is
read again; a query with a cursor sends nothing early.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata, store_fleet_protocol
from pynamodb_sharding.testing import record_requests
from tests.paging import page_by_page
from tests.raw import raw_items

KEY = "/shared/firetvGen2.txt"


class EarlyShards(ShardMetadata):
    class Meta:
        table_name = "early_shards"


class EarlyLog(ShardedModel):
    class Meta:
        table_name = "early_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    # Reads fresh; the metadata table it creates stores the fleet protocol of fresh reads, so
    # growths are written to at once.
    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=3600, fresh_reads=True))


class OtherProcessLog(EarlyLog):
    """Another process: the same tables, its own cache."""

    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=3600, fresh_reads=True))


class CachedLog(EarlyLog):
    """Follows the table's protocol: where it stores cached reads, no request to find the
    shards, nothing sent early."""

    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=3600))


class PlainLog(Model):
    class Meta:
        table_name = "early_plain_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


def _metadata_waits_for_the_query(model: type[Model]) -> tuple[list[bool], Callable[[], None]]:
    """Hold every metadata ``GetItem`` until a ``Query`` of ``model`` was sent (5 s at most);
    returns, per ``GetItem``, whether the ``Query`` was in flight, and an unhook."""
    query_sent = threading.Event()
    overlapped: list[bool] = []

    def on_query(**_: Any) -> None:
        query_sent.set()

    def on_get(**_: Any) -> None:
        overlapped.append(query_sent.wait(5.0))

    data = model._get_connection().connection.client.meta.events
    meta = EarlyShards._get_connection().connection.client.meta.events
    data.register("before-send.dynamodb.Query", on_query)
    meta.register("before-send.dynamodb.GetItem", on_get)

    def unhook() -> None:
        data.unregister("before-send.dynamodb.Query", on_query)
        meta.unregister("before-send.dynamodb.GetItem", on_get)

    return overlapped, unhook


def test_the_count_is_read_while_shard_1_is_queried(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(EarlyLog)
    EarlyLog(KEY, 1).save()
    EarlyLog.shards.strategy.protocol_in_force()  # read once per process per 300 s
    with record_requests(EarlyLog) as first:
        assert [item.accessed_at for item in EarlyLog.query(KEY)] == [1]
    # This process never read the key: its count first, then its shard (nothing to check an
    # early page against; see test_a_compaction_while_the_count_is_read_is_not_missed).
    assert first.requests == {"GetItem": 1, "Query": 1}
    overlapped, unhook = _metadata_waits_for_the_query(EarlyLog)
    try:
        with record_requests(EarlyLog) as sent:
            items = [item.accessed_at for item in EarlyLog.query(KEY)]
    finally:
        unhook()
    assert items == [1]
    assert overlapped == [True]
    assert sent.requests == {"GetItem": 1, "Query": 1}  # a key read before: one round trip


def test_with_cached_reads_nothing_is_sent_early(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(EarlyLog)
    store_fleet_protocol(EarlyLog, cached_reads=True, immediately=True)  # before any process runs
    EarlyLog(KEY, 1).save()
    EarlyLog.shards.grow(KEY)
    assert [item.accessed_at for item in CachedLog.query(KEY)] == [1]
    with record_requests(CachedLog) as sent:
        assert [item.accessed_at for item in CachedLog.query(KEY)] == [1]
    assert sent.requests == {"Query": 2}


def test_a_growth_made_elsewhere_a_moment_ago_is_read(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(EarlyLog)
    EarlyLog(KEY, 0).save()
    assert [item.accessed_at for item in EarlyLog.query(KEY)] == [0]  # this process saw 1 shard
    OtherProcessLog.shards.grow(KEY)
    OtherProcessLog.shards.grow(KEY)  # 4 shards, grown by the other process
    for at in range(1, 60):
        OtherProcessLog(KEY, at).save()
    physical = {item["file_path"]["S"] for item in raw_items(EarlyLog)}
    assert len(physical) > 2  # the other process's items are in shards this one never read

    with record_requests(EarlyLog) as sent:
        items = [item.accessed_at for item in EarlyLog.query(KEY)]
    assert items == list(range(60))
    # Shard 1's early page is dropped (the count changed since this process read it: it is read
    # again with the others), then a key whose count stays the same is read in one round trip.
    assert sent.requests == {"GetItem": 1, "Query": 5}
    with record_requests(EarlyLog) as again:
        assert [item.accessed_at for item in EarlyLog.query(KEY)] == list(range(60))
    assert again.requests == {"GetItem": 1, "Query": 4}


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("limit", [None, 1, 7, 25])
def test_the_results_are_a_plain_models(dynamodb_models: Callable[..., Any], forward: bool, limit: int | None) -> None:
    dynamodb_models(EarlyLog, PlainLog)
    EarlyLog(KEY, 0).save()
    EarlyLog.shards.grow(KEY)
    EarlyLog.shards.grow(KEY)
    for at in range(1, 40):
        EarlyLog(KEY, at).save()
        PlainLog(KEY, at).save()
    PlainLog(KEY, 0).save()

    def pages(model: type[Model]) -> list[list[int]]:
        read = page_by_page(model.query, hash_key=KEY, scan_index_forward=forward, limit=limit)
        return [[int(item.accessed_at) for item in items] for items, _ in read]

    merged, plain = pages(EarlyLog), pages(PlainLog)
    assert [at for page in merged for at in page] == [at for page in plain for at in page]
    assert [at for page in merged for at in page] == sorted(range(40), reverse=not forward)
    if limit is not None:
        assert all(len(page) <= limit for page in merged)


def test_early_pages_of_shards_no_longer_read_are_dropped(dynamodb_models: Callable[..., Any]) -> None:
    """This process last saw 4 shards and queries them early; the count read says 2 (the key
    was compacted elsewhere): what shards 3 and 4 hold is not returned, as a plain read of
    shards 1 and 2 would not return it."""
    dynamodb_models(EarlyLog)
    for at in range(20):
        EarlyLog(KEY, at).save()
    EarlyLog.shards.grow(KEY)
    EarlyLog.shards.grow(KEY)
    assert len(list(EarlyLog.query(KEY))) == 20  # cached: 4 shards
    item = EarlyShards.get(KEY, EarlyLog.Meta.table_name)
    stamp = item.last_updated + 1
    item.number_of_shards = 2
    item.shard_history = {"0:1", f"{stamp}:2"}
    item.last_updated = stamp
    item.save()  # what compact leaves: reads cover shards 1 and 2 only
    stray = EarlyLog.shards.physical_key(KEY, 3)
    client = EarlyLog._get_connection().connection.client
    client.put_item(TableName=EarlyLog.Meta.table_name,
                    Item={"file_path": {"S": stray}, "accessed_at": {"N": "99"}})
    with record_requests(EarlyLog) as sent:
        items = [int(item.accessed_at) for item in EarlyLog.query(KEY)]
    assert sent.requests == {"GetItem": 1, "Query": 6}  # 4 sent early, dropped; shards 1 and 2 read again
    assert 99 not in items
    assert EarlyLog.shards.read_shards(KEY) == (1, 2)
    assert items == sorted(items)


class EagerShards(ShardMetadata):
    class Meta:
        table_name = "early_eager_shards"


class EagerLog(ShardedModel):
    """Fresh reads, no count cached (its table stores that protocol): every query reads the
    count, with its early pages; a compaction may trim a shrink at once."""

    class Meta:
        table_name = "early_eager_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(EagerShards, max_shards=8, cache_ttl=0, clock_skew=0, fresh_reads=True))


class CompactingLog(EagerLog):
    """Another process, running ``migrate compact`` (its own cache)."""

    shards = Sharding(DynamicShards(EagerShards, max_shards=8, cache_ttl=0, clock_skew=0, fresh_reads=True))


def _read_over_4_shards(dynamodb_models: Callable[..., Any]) -> None:
    """40 items of KEY over 4 shards (and in a plain model), counted once: this process last
    read the key over 4 shards."""
    dynamodb_models(EagerLog, PlainLog)
    EagerLog.shards.grow(KEY)
    EagerLog.shards.grow(KEY)  # 4 shards
    for at in range(40):
        EagerLog(KEY, at).save()
        PlainLog(KEY, at).save()
    assert EagerLog.count(KEY) == 40


@pytest.mark.parametrize("read", ["query", "count"])
def test_a_compaction_while_the_count_is_read_is_not_missed(dynamodb_models: Callable[..., Any], read: str) -> None:
    """Found by an adversarial trial: the 4 early pages of a key this process read over 4 shards
    are answered, then another process shrinks the key to 1, moves 31 items down to shard 1 and
    trims the history, then the count is read (held until then): shard 1's early page, read
    before the moves, must not stand for shard 1. All 40 items, as a plain model holds them."""
    from pynamodb_sharding.migration import compact

    _read_over_4_shards(dynamodb_models)
    CompactingLog.shards.shrink(KEY, to=1)
    answered = threading.Semaphore(0)
    held: list[bool] = []
    reports: list[Any] = []

    def on_query_answered(**_: Any) -> None:
        answered.release()

    def on_get(**_: Any) -> None:
        if not held:
            held.append(all(answered.acquire(timeout=5.0) for _ in range(4)))  # the early pages
            reports.append(compact(CompactingLog, key_prefix=KEY))

    data = EagerLog._get_connection().connection.client.meta.events
    meta = EagerShards._get_connection().connection.client.meta.events
    data.register("after-call.dynamodb.Query", on_query_answered)
    meta.register("before-send.dynamodb.GetItem", on_get)
    try:
        found = (len(list(EagerLog.query(KEY))) if read == "query" else EagerLog.count(KEY))
    finally:
        data.unregister("after-call.dynamodb.Query", on_query_answered)
        meta.unregister("before-send.dynamodb.GetItem", on_get)
    assert reports
    assert reports[0].complete
    assert EagerLog.shards.read_shards(KEY) == (1,)
    assert found == PlainLog.count(KEY) == 40


class Timer:
    """The shard-count cache's clock of :class:`ExpiringLog`, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


TIMER = Timer()


class ExpiringLog(EarlyLog):
    """Another process following a stored protocol of cached reads, whose cached counts this
    test lets expire."""

    shards = Sharding(DynamicShards(EarlyShards, max_shards=8, cache_ttl=10, timer=TIMER))


def _put_in_shards(shards: range, ats: range) -> None:
    client = EarlyLog._get_connection().connection.client
    for at in ats:
        shard = shards[at % len(shards)]
        physical = EarlyLog.shards.physical_key(KEY, shard)
        client.put_item(TableName=EarlyLog.Meta.table_name,
                        Item={"file_path": {"S": physical}, "accessed_at": {"N": str(at)}})


def _with_the_count_read_held(read: Callable[[], Any]) -> tuple[bool, dict[str, int], Any]:
    """Run ``read`` holding the metadata ``GetItem`` until four ``Query`` requests were sent (5 s
    at most): whether they were, the requests sent, and what ``read`` returned."""
    queries = threading.Semaphore(0)
    held: list[bool] = []

    def on_query(**_: Any) -> None:
        queries.release()

    def on_get(**_: Any) -> None:
        held.append(all(queries.acquire(timeout=5.0) for _ in range(4)))

    data = ExpiringLog._get_connection().connection.client.meta.events
    meta = EarlyShards._get_connection().connection.client.meta.events
    data.register("before-send.dynamodb.Query", on_query)
    meta.register("before-send.dynamodb.GetItem", on_get)
    try:
        with record_requests(ExpiringLog) as sent:
            result = read()
    finally:
        data.unregister("before-send.dynamodb.Query", on_query)
        meta.unregister("before-send.dynamodb.GetItem", on_get)
    return held == [True], sent.requests, result


@pytest.mark.parametrize("read", ["query", "count"])
def test_with_cached_reads_an_expired_count_is_read_while_its_shards_are_read(
        dynamodb_models: Callable[..., Any], read: str) -> None:
    """A key read less often than once per ``cache_ttl`` reads its metadata item each time: the
    shards this process last read (4) are queried (or counted) while it is read (the
    ``GetItem`` is held until the four ``Query`` requests are sent: sent after it, they never
    would be). When another process grew the key meanwhile, those early requests are dropped
    and every shard of the grown count is read. The items are a plain model's."""
    dynamodb_models(EarlyLog, PlainLog)
    store_fleet_protocol(EarlyLog, cached_reads=True, immediately=True)  # before any process runs
    EarlyLog.shards.grow(KEY)
    EarlyLog.shards.grow(KEY)  # 4 shards
    _put_in_shards(range(1, 5), range(40))
    for at in range(40):
        PlainLog(KEY, at).save()
    ExpiringLog.shards.strategy.protocol_in_force()  # read once per process per 300 s

    def found() -> Any:
        if read == "count":
            return ExpiringLog.count(KEY)
        return [int(item.accessed_at) for item in ExpiringLog.query(KEY)]

    def plain() -> Any:
        return PlainLog.count(KEY) if read == "count" else [int(item.accessed_at) for item in PlainLog.query(KEY)]

    assert found() == plain()
    with record_requests(ExpiringLog) as sent:
        assert found() == plain()
    assert sent.requests == {"Query": 4}  # cached: no request to find the shards

    TIMER.now += 11  # the cached count expired; it did not change
    overlapped, requests, result = _with_the_count_read_held(found)
    assert overlapped
    assert requests == {"GetItem": 1, "Query": 4}  # one round trip
    assert result == plain()

    TIMER.now += 11  # expired again; meanwhile another process grew the key to 8
    EarlyLog.shards.grow(KEY)
    _put_in_shards(range(5, 9), range(40, 60))
    for at in range(40, 60):
        PlainLog(KEY, at).save()
    overlapped, requests, result = _with_the_count_read_held(found)
    assert overlapped
    assert requests == {"GetItem": 1, "Query": 12}  # 4 sent early, dropped; 8 read
    assert result == plain()
    assert result == (60 if read == "count" else list(range(60)))
    TIMER.now += 11
    assert ExpiringLog.count(KEY, limit=7) == 7  # limit caps the total (docs/query.rst; PynamoDB's: a page size)
    TIMER.now += 11
    assert ExpiringLog.count(KEY, EarlyLog.accessed_at >= 50) == PlainLog.count(KEY, PlainLog.accessed_at >= 50) == 10


def test_a_count_read_answered_late_in_another_thread_does_not_validate_early_pages(
        dynamodb_models: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by an adversarial trial: thread B's count read (the version this process had seen)
    is answered, and B is held before it remembers it; thread A sends its early pages, another
    process shrinks the key and compacts it while A's count is read (a new version), then B
    remembers its older version before A checks its pages. The version A checks against must
    not go back: A's early pages are dropped and A returns all 40 items, as B does."""
    from pynamodb_sharding.migration import compact

    _read_over_4_shards(dynamodb_models)
    store = EagerLog.shards.strategy.store
    main = threading.current_thread()
    other: dict[str, threading.Thread] = {}
    b_answered, b_release, b_remembered, a_checked, a_started = (threading.Event() for _ in range(5))
    a_queries = threading.Semaphore(0)
    held: list[bool] = []
    reports: list[Any] = []

    def on_get_answered(**_: Any) -> None:  # B's count read answered; B is held here
        if threading.current_thread() is other.get("b") and not b_answered.is_set():
            b_answered.set()
            b_release.wait(20)

    def on_query_answered(**_: Any) -> None:
        if a_started.is_set():
            a_queries.release()

    def on_get_sent(**_: Any) -> None:  # A's count read: once its 4 early pages are answered
        if threading.current_thread() is main and a_started.is_set() and not held:
            held.append(all(a_queries.acquire(timeout=5.0) for _ in range(4)))
            CompactingLog.shards.shrink(KEY, to=1)
            reports.append(compact(CompactingLog, key_prefix=KEY))

    strategy_type, store_type = type(EagerLog.shards.strategy), type(store)
    check, remember = strategy_type.early_pages_valid, store_type.remember

    def checked(self: Any, shard_key: Any, version: Any) -> bool:
        if threading.current_thread() is main and reports:
            b_release.set()  # B goes on, remembers its older version, then waits for A's check
            b_remembered.wait(10)
        try:
            return check(self, shard_key, version)
        finally:
            if threading.current_thread() is main and reports:
                a_checked.set()

    def remembered(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = remember(self, *args, **kwargs)
        if threading.current_thread() is other.get("b") and b_release.is_set() and not b_remembered.is_set():
            b_remembered.set()
            a_checked.wait(10)
        return state

    monkeypatch.setattr(strategy_type, "early_pages_valid", checked)
    monkeypatch.setattr(store_type, "remember", remembered)
    data = EagerLog._get_connection().connection.client.meta.events
    meta = EagerShards._get_connection().connection.client.meta.events
    data.register("after-call.dynamodb.Query", on_query_answered)
    meta.register("after-call.dynamodb.GetItem", on_get_answered)
    meta.register("before-send.dynamodb.GetItem", on_get_sent)
    b_found: list[int] = []
    try:
        b = threading.Thread(target=lambda: b_found.append(len(list(EagerLog.query(KEY)))))
        other["b"] = b
        b.start()
        assert b_answered.wait(10)
        a_started.set()
        found = len(list(EagerLog.query(KEY)))  # thread A
        b.join(20)
    finally:
        data.unregister("after-call.dynamodb.Query", on_query_answered)
        meta.unregister("after-call.dynamodb.GetItem", on_get_answered)
        meta.unregister("before-send.dynamodb.GetItem", on_get_sent)
        b_release.set()
        a_checked.set()
    assert held == [True]
    assert reports[0].complete
    assert b_remembered.is_set()  # the older version was remembered before A's check
    assert EagerLog.shards.read_shards(KEY) == (1,)
    assert b_found == [40]
    assert found == PlainLog.count(KEY) == 40
