"""Read replicas (``Sharding(read_replicas=N)``) against DynamoDB Local.

Proves: ``create_table`` creates ``read-replica-1..N``, keyed on the table's own keys, projecting
everything; queries, counts, pages, cursors and ``get`` return what a plain PynamoDB ``Model``
returns whichever copy serves each request, and a cursor taken on one copy resumes on another;
a consistent read (and an index query) sends no request to a replica; a read key-range throttle
of one copy moves the request to another at once (one throttled request, no botocore retry);
under the partition-limit simulator, a key read at twice one partition's read limit by 8
threads throttles the plain sharded model while the model with 2 replicas has at most 2 %
throttled requests, no failed query and every answer right; a read of a replica the table
lacks raises ``IndexNotReadyError`` naming the fix, and ``add_read_replicas`` adds the replicas
to a live table and waits for their backfill; time-partitioned tables have them per period;
a ``legacy_unsharded`` key (items moving) is read from the table only.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError, TableDoesNotExist
from pynamodb.models import Model

from pynamodb_sharding import _replicas as replicas
from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._exceptions import IndexNotReadyError, ShardingDefinitionError, ShardLocationError
from pynamodb_sharding._fanout import merged_query
from pynamodb_sharding._host import reset_connection
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._periods import TimePartitioned
from pynamodb_sharding._query_plan import QuerySpec
from pynamodb_sharding._replicas import ReadCopies, add_read_replicas
from pynamodb_sharding._strategies import HashedShards, RandomShards
from pynamodb_sharding.testing.simulator import LoadClock, simulate_partition_limits
from tests.faults import error_response
from tests.raw import raw_client

BindModels = Callable[..., dict[type[Model], str]]
REPLICAS = ("read-replica-1", "read-replica-2")


class Feed(ShardedModel):
    class Meta:
        table_name = "replica_feed"
        max_retry_attempts = 1

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(3), read_replicas=2)


class HashedFeed(ShardedModel):
    class Meta:
        table_name = "replica_hashed_feed"
        max_retry_attempts = 1

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(HashedShards(4, attributes=["posted_at"]), read_replicas=2)


class PlainFeed(Model):
    """The reference: what PynamoDB returns for the same items."""

    class Meta:
        table_name = "replica_plain_feed"

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()


def fill(*models: type[Model], key: str = "news", count: int = 12) -> None:
    for model in models:
        for n in range(count):
            model(key, n, body=f"post {n}").save()


def rows(items: Any) -> list[tuple[str, int, str]]:
    return [(item.feed_id, int(item.posted_at), item.body) for item in items]


@contextmanager
def sent_queries(model: type[Model]) -> Iterator[list[str | None]]:
    """The ``IndexName`` (``None``: the table) of every Query and GetItem the model sends."""
    sent: list[str | None] = []
    lock = threading.Lock()

    def record(params: Any = None, **_: Any) -> None:
        with lock:
            sent.append(params.get("IndexName"))

    events = model._get_connection().connection.client.meta.events
    for operation in ("Query", "GetItem"):  # botocore keeps one event per unique_id
        events.register(f"provide-client-params.dynamodb.{operation}", record, unique_id=f"test-sent-{operation}")
    try:
        yield sent
    finally:
        for operation in ("Query", "GetItem"):
            events.unregister(f"provide-client-params.dynamodb.{operation}", unique_id=f"test-sent-{operation}")


@contextmanager
def copies_in_turn(model: type[Model], starts: list[int]) -> Iterator[None]:
    """Each request of ``model`` starts at the next copy of ``starts`` (0: the table)."""
    turn = iter(starts)
    previous = replicas._copies.get(model)
    replicas._copies[model] = ReadCopies(model.__name__, REPLICAS, choose=lambda _: next(turn))
    try:
        yield
    finally:
        if previous is None:
            replicas._copies.pop(model, None)
        else:
            replicas._copies[model] = previous


class TestCreateTable:
    """``create_table`` creates one replica per declared count, keyed and projected as the table."""

    def test_replicas_are_global_indexes_keyed_like_the_table(self, dynamodb_models: BindModels) -> None:
        tables = dynamodb_models(Feed)
        described = raw_client(Feed).describe_table(TableName=tables[Feed])["Table"]
        found = {index["IndexName"]: index for index in described["GlobalSecondaryIndexes"]}
        assert sorted(found) == list(REPLICAS)
        for index in found.values():
            assert sorted((key["AttributeName"], key["KeyType"]) for key in index["KeySchema"]) == [
                ("feed_id", "HASH"), ("posted_at", "RANGE")]
            assert index["Projection"] == {"ProjectionType": "ALL"}
            assert index["IndexStatus"] == "ACTIVE"


class TestSameAnswers:
    """Whichever copy serves each request, the answers are a plain Model's."""

    def test_query_pages_count_and_get_match_a_plain_model(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Feed, PlainFeed)
        fill(Feed, PlainFeed)
        with sent_queries(Feed) as sent:
            for _ in range(3):
                assert rows(Feed.query("news")) == rows(PlainFeed.query("news"))
                assert rows(Feed.query("news", PlainFeed.posted_at.between(3, 8), scan_index_forward=False)) == rows(
                    PlainFeed.query("news", PlainFeed.posted_at.between(3, 8), scan_index_forward=False))
                assert Feed.count("news", PlainFeed.posted_at >= 5) == PlainFeed.count("news", PlainFeed.posted_at >= 5)
                assert rows(Feed.query("news", limit=5, page_size=2)) == rows(
                    PlainFeed.query("news", limit=5, page_size=2))
        assert set(sent) == {None, *REPLICAS}  # every copy served some of them

    def test_cursor_taken_on_one_copy_resumes_on_another(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Feed, PlainFeed)
        fill(Feed, PlainFeed)
        expected = rows(PlainFeed.query("news"))
        with sent_queries(Feed) as sent, copies_in_turn(Feed, [0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 0, 0]):
            first = Feed.query("news", limit=4)
            head = rows(first)
            cursor = first.last_evaluated_key
            second = Feed.query("news", limit=4, last_evaluated_key=cursor)
            middle = rows(second)
            third = Feed.query("news", last_evaluated_key=second.next_page_token)
            tail = rows(third)
        assert head + middle + tail == expected
        assert sent[:3] == [None, None, None]
        assert sent[3:6] == [REPLICAS[0]] * 3
        assert set(sent[6:]) <= {REPLICAS[1], None}
        assert isinstance(cursor, dict)
        assert "IndexName" not in str(cursor)
        assert "read-replica" not in str(cursor)

    def test_get_is_a_one_item_query_of_a_replica(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(HashedFeed, PlainFeed)
        fill(HashedFeed, PlainFeed)
        with sent_queries(HashedFeed) as sent, copies_in_turn(HashedFeed, [0, 1, 2]):
            found = [HashedFeed.get("news", n) for n in (2, 5, 7)]
            with pytest.raises(HashedFeed.DoesNotExist), copies_in_turn(HashedFeed, [1]):
                HashedFeed.get("news", 99)
        assert rows(found) == [(p.feed_id, int(p.posted_at), p.body) for p in (PlainFeed.get("news", n)
                                                                                   for n in (2, 5, 7))]
        # ... and the process's first miss of the model reads the bare key on the table (see
        # errors.rst#legacy-item: is the item stored there by an unported application?).
        assert sent == [None, *REPLICAS, REPLICAS[0], None]


class TestGetOfUnknownShard:
    """A ``RandomShards`` item's shard is unknown: ``get`` reads each candidate shard with one
    request spread over the copies (not one BatchGetItem, which only the table answers), and
    still refuses a logical key stored in two shards."""

    def test_each_candidate_read_on_the_copies(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Feed, PlainFeed)
        fill(Feed, PlainFeed)
        with sent_queries(Feed) as sent:
            found = [Feed.get("news", n) for n in range(12)]
            with pytest.raises(Feed.DoesNotExist):
                Feed.get("news", 99)
        assert rows(found) == rows(PlainFeed.get("news", n) for n in range(12))
        # One request per candidate shard (RandomShards(3)), no batch; and the process's first miss
        # of the model reads the bare key on the table (errors.rst#legacy-item).
        assert len(sent) == 3 * 13 + 1
        assert sent[-1] is None
        assert set(sent) == {None, *REPLICAS}

    def test_a_key_in_two_shards_is_refused(self, dynamodb_models: BindModels) -> None:
        tables = dynamodb_models(Feed)
        client = raw_client(Feed)
        for shard in (1, 3):
            client.put_item(TableName=tables[Feed], Item={
                "feed_id": {"S": f"news_{shard}"}, "posted_at": {"N": "5"}, "body": {"S": f"copy {shard}"}})
        with pytest.raises(ShardLocationError, match=r"exists in shards 1, 3"):
            Feed.get("news", 5)


class TestTableOnly:
    """A consistent read goes to the table only: replicas are eventually consistent."""

    def test_consistent_reads_send_no_index_name(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Feed, HashedFeed)
        fill(Feed, HashedFeed)
        with sent_queries(Feed) as sent, sent_queries(HashedFeed) as hashed_sent:
            for _ in range(5):
                assert len(list(Feed.query("news", consistent_read=True))) == 12
                assert Feed.count("news", consistent_read=True) == 12
                assert HashedFeed.get("news", 3, consistent_read=True).body == "post 3"
        assert sent
        assert hashed_sent
        assert set(sent) == {None}
        assert set(hashed_sent) == {None}


class Throttles:
    """Answers the Query requests of chosen copies with a read key-range throttle."""

    def __init__(self, table: str, hot: set[str | None]) -> None:
        self.table = table
        self.hot = hot
        self.log: list[tuple[str | None, bool]] = []

    def before_send(self, request: Any, **_: Any) -> Any:
        import json

        if request.headers["X-Amz-Target"].decode().split(".")[-1] != "Query":
            return None
        copy = json.loads(request.body).get("IndexName")
        throttled = copy in self.hot
        self.log.append((copy, throttled))
        if not throttled:
            return None
        resource = f"arn:aws:dynamodb:us-east-1:000000000000:table/{self.table}"
        reason = "TableReadKeyRangeThroughputExceeded"
        if copy is not None:
            resource += f"/index/{copy}"
            reason = "IndexReadKeyRangeThroughputExceeded"
        return error_response(request.url, 400, "ProvisionedThroughputExceededException",
                              "Throughput exceeds the current capacity for one or more of your partitions.",
                              ThrottlingReasons=[{"reason": reason, "resource": resource}])


class TestFailover:
    """A copy's read key-range throttle sends the request to the next copy at once."""

    @pytest.mark.parametrize("hot", [{None}, {None, REPLICAS[0]}])
    def test_throttled_copy_is_left_for_the_next(self, dynamodb_models: BindModels, hot: set[str | None]) -> None:
        tables = dynamodb_models(HashedFeed, PlainFeed)
        fill(HashedFeed, PlainFeed)
        throttles = Throttles(tables[HashedFeed], hot)
        events = HashedFeed._get_connection().connection.client.meta.events
        events.register_first("before-send.dynamodb", throttles.before_send, unique_id="test-replica-throttles")
        try:
            with copies_in_turn(HashedFeed, [0] * 4):
                found = rows(HashedFeed.query("news", HashedFeed.posted_at == 3))
        finally:
            events.unregister("before-send.dynamodb", unique_id="test-replica-throttles")
        assert found == rows(PlainFeed.query("news", PlainFeed.posted_at == 3))
        # Each of the 4 shards' requests asked each hot copy once (no botocore retry), then the
        # next copy answered.
        answered_by = REPLICAS[len(hot) - 1]
        expected = {**{(copy, True): 4 for copy in hot}, (answered_by, False): 4}
        assert Counter(throttles.log) == expected

    def test_every_copy_hot_backs_off_on_the_last_and_raises(self, dynamodb_models: BindModels) -> None:
        tables = dynamodb_models(HashedFeed)
        throttles = Throttles(tables[HashedFeed], {None, *REPLICAS})
        events = HashedFeed._get_connection().connection.client.meta.events
        events.register_first("before-send.dynamodb", throttles.before_send, unique_id="test-replica-throttles")
        try:
            with copies_in_turn(HashedFeed, [0]), pytest.raises(QueryError):
                list(merged_query(HashedFeed, QuerySpec(hash_key="news"), shards=[1]))  # one shard: one request
        finally:
            events.unregister("before-send.dynamodb", unique_id="test-replica-throttles")
        # The table and replica 1 once each; replica 2 with botocore's retry (max_retry_attempts=1).
        assert throttles.log == [(None, True), (REPLICAS[0], True), (REPLICAS[1], True), (REPLICAS[1], True)]


class HotFeed(ShardedModel):
    class Meta:
        table_name = "replica_hot_feed"
        max_retry_attempts = 1
        max_pool_connections = 32

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(2), read_replicas=2)


class ColdFeed(ShardedModel):
    class Meta:
        table_name = "replica_cold_feed"
        max_retry_attempts = 0
        max_pool_connections = 32

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(2))




#: Read units per second of one partition (each copy's partitions alike).
PARTITION_READ_UNITS = 10.0
#: A query reads each shard once, an eventually consistent request costs half a unit: 40
#: queries a second are 20 units a second on each shard partition, twice its limit.
QUERIES_PER_SECOND = 4 * PARTITION_READ_UNITS
QUERIES = 320


def hammer(model: type[Model], clock: LoadClock, expected: list[tuple[str, int, str]]) -> tuple[int, list[str]]:
    """8 threads, ``QUERIES`` queries of one key; returns (queries answered right, failures)."""
    right = 0
    failures: list[str] = []
    lock = threading.Lock()
    todo = iter(range(QUERIES))

    def reader() -> None:
        nonlocal right
        while True:
            with lock:
                if next(todo, None) is None:
                    return
            clock.tick()
            try:
                answer = rows(model.query("hot"))
            except Exception as error:  # a QueryError, or any other error: counted, never a lost thread
                with lock:
                    failures.append(repr(error))
                continue
            with lock:
                if answer == expected:
                    right += 1
                else:
                    failures.append(f"wrong answer: {answer}")

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return right, failures


class TestHotKey:
    """A key read at twice a partition's read limit: the table alone throttles, 1 + 2 copies do not."""

    def test_two_replicas_serve_what_one_table_cannot(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(HotFeed, ColdFeed, PlainFeed)
        fill(HotFeed, ColdFeed, PlainFeed, key="hot", count=6)
        expected = rows(PlainFeed.query("hot"))

        clock = LoadClock(QUERIES_PER_SECOND, start=100.0)
        with simulate_partition_limits(ColdFeed, read_units=PARTITION_READ_UNITS, write_units=None,
                                       clock=clock) as cold:
            cold_right, cold_failures = hammer(ColdFeed, clock, expected)
        cold_throttled = sum(cold.throttles.values()) / cold.requests["Query"]
        assert cold_throttled > 0.2
        assert cold_failures
        assert cold_right + len(cold_failures) == QUERIES

        clock = LoadClock(QUERIES_PER_SECOND, start=100.0)
        with simulate_partition_limits(HotFeed, read_units=PARTITION_READ_UNITS, write_units=None,
                                       index_read_units=PARTITION_READ_UNITS, clock=clock) as hot:
            hot_right, hot_failures = hammer(HotFeed, clock, expected)
        assert hot_failures == []
        assert hot_right == QUERIES
        assert sum(hot.throttles.values()) <= 0.02 * hot.requests["Query"]
        copies = {table.split("/index/")[-1] if "/index/" in table else None for table, _ in hot.read_units}
        assert copies == {None, *REPLICAS}


class LiveTable(Model):
    """The table as the application created it, before it declared read replicas."""

    class Meta:
        table_name = "replica_live_feed"

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()


class LiveFeed(ShardedModel):
    Meta = LiveTable.Meta  # binding LiveTable points this class at the same test table

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(3), read_replicas=2)


class TestAddToLiveTable:
    """``add_read_replicas`` creates the missing replicas of an existing table and waits for
    their backfill; the queries they then serve return every item written before."""

    def test_replicas_added_to_a_live_table_serve_its_items(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(LiveTable, PlainFeed)
        reset_connection(LiveFeed)  # built again from the bound Meta
        fill(LiveFeed, PlainFeed)
        table = LiveTable.Meta.table_name
        assert "GlobalSecondaryIndexes" not in raw_client(LiveFeed).describe_table(TableName=table)["Table"]
        # Deployed before the replicas exist: a read of one says what to do.
        with copies_in_turn(LiveFeed, [1] * 3), pytest.raises(
                IndexNotReadyError, match=r"LiveFeed: DynamoDB refused to read its read replica 'read-replica-1' "
                                          r"\(.*\): the table does not have it yet.*add_read_replicas\(LiveFeed\)"):
            list(LiveFeed.query("news"))
        assert add_read_replicas(LiveFeed, poll_seconds=0.05) == list(REPLICAS)
        described = raw_client(LiveFeed).describe_table(TableName=table)["Table"]
        assert {index["IndexName"]: index["IndexStatus"] for index in described["GlobalSecondaryIndexes"]} == {
            name: "ACTIVE" for name in REPLICAS}
        assert add_read_replicas(LiveFeed) == []  # nothing missing: nothing sent
        expected = rows(PlainFeed.query("news"))
        for start in (1, 2):
            with copies_in_turn(LiveFeed, [start] * 3):
                assert rows(LiveFeed.query("news")) == expected

    def test_a_missing_table_is_pynamodbs_table_does_not_exist(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(LiveTable)
        LiveTable.delete_table()
        reset_connection(LiveFeed)
        with pytest.raises(TableDoesNotExist):
            add_read_replicas(LiveFeed)

    def test_a_model_without_replicas_is_refused(self, dynamodb_models: BindModels) -> None:
        with pytest.raises(ShardingDefinitionError, match=r"ColdFeed: declares no read replicas"):
            add_read_replicas(ColdFeed)


class MonthClock:
    def __call__(self) -> float:
        return 1456444800.0  # 2016-02-26


class MonthlyFeed(ShardedModel):
    class Meta:
        table_name = TimePartitioned("replica_monthly_feed.{period}", attribute="posted_at", period="month",
                                     clock=MonthClock())

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(2), read_replicas=1)


class TestTimePartitioned:
    """Each period's table has the replicas; a query over two periods spreads over their copies."""

    def test_periods_have_replicas_and_queries_use_them(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(MonthlyFeed, PlainFeed)  # February's table (the clock's month)
        MonthlyFeed.period_model("201603").create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        days = [1456444800 + n * 86400 for n in range(8)]  # Feb 26 .. Mar 4
        for at in days:
            MonthlyFeed("news", at, body=f"at {at}").save()
            PlainFeed("news", at, body=f"at {at}").save()
        for period in ("201602", "201603"):
            model = MonthlyFeed.period_model(period)
            described = raw_client(model).describe_table(TableName=model.Meta.table_name)["Table"]
            assert [index["IndexName"] for index in described["GlobalSecondaryIndexes"]] == [REPLICAS[0]]
        condition = MonthlyFeed.posted_at.between(days[0], days[-1])
        with sent_queries(MonthlyFeed.period_model("201602")) as sent:
            for _ in range(4):
                assert rows(MonthlyFeed.query("news", condition)) == rows(
                    PlainFeed.query("news", PlainFeed.posted_at.between(days[0], days[-1])))
        assert set(sent) == {None, REPLICAS[0]}


class AdoptingFeed(ShardedModel):
    class Meta:
        table_name = "replica_adopting_feed"

    feed_id = UnicodeAttribute(hash_key=True)
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(2), legacy_unsharded=True, read_replicas=1)


class TestLegacyUnsharded:
    """A table adopting sharding in place: bare items move into shards while queries run, so a
    key's queries read the table only (each place once, the old before the new), and return
    each item once."""

    def test_bare_and_sharded_items_read_from_the_table(self, dynamodb_models: BindModels) -> None:
        tables = dynamodb_models(AdoptingFeed, PlainFeed)
        client = raw_client(AdoptingFeed)
        for n in range(4):  # written before sharding: bare keys
            client.put_item(TableName=tables[AdoptingFeed],
                            Item={"feed_id": {"S": "news"}, "posted_at": {"N": str(n)}, "body": {"S": f"post {n}"}})
        for n in range(4, 8):
            AdoptingFeed("news", n, body=f"post {n}").save()
        fill(PlainFeed, count=8)
        with sent_queries(AdoptingFeed) as sent:
            assert rows(AdoptingFeed.query("news")) == rows(PlainFeed.query("news"))
            assert AdoptingFeed.count("news") == 8
            assert [AdoptingFeed.get("news", n).body for n in (1, 6)] == ["post 1", "post 6"]
        assert sent
        assert set(sent) == {None}
