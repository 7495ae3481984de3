"""How a merged query runs against DynamoDB Local: requests, pass-through arguments, errors, threads.

``limit`` sends no page beyond one look-ahead per shard; ``page_size``, ``consistent_read``,
``filter_condition`` and ``attributes_to_get`` reach every shard's request; ``rate_limit`` paces
the logical query as a whole; a shard's error reaches the consumer as PynamoDB's ``QueryError``
on every ``next()``; a partly read query leaks no thread; too small a connection pool is warned
about once.
"""

from __future__ import annotations

import gc
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding import _query_plan as query_plan
from pynamodb_sharding._exceptions import ShardingDefinitionError
from pynamodb_sharding._fanout import FanoutPoolWarning
from pynamodb_sharding._merged_results import MergedResultIterator
from pynamodb_sharding._pool import fanout_threads
from pynamodb_sharding._strategies import ItemKey, ShardKey
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels


class MetricBase(ShardedModel):
    """The attributes of ``fanout_metric``, for each way of reading it (an abstract base)."""

    name = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    unit = UnicodeAttribute(null=True)


class Metric(MetricBase):
    class Meta:
        table_name = "fanout_metric"

    shards = Sharding(RandomShards(4))


class EveryFourth:
    """Four shards; item ``at`` goes to shard ``at % 4 + 1``: data spread exactly evenly, so
    how much a merged page reads does not depend on where random writes happened to land."""

    max_shards = 4

    def shard_count(self, key: ShardKey) -> int:
        return 4

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    def write_shard(self, item: ItemKey) -> int:
        return int(item.range_value) % 4 + 1

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return (int(item.range_value) % 4 + 1,)


class EvenMetric(ShardedModel):
    class Meta:
        table_name = "fanout_even_metric"

    name = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(EveryFourth())


class LeanEvenMetric(ShardedModel):
    """The same table, read with ``page_reads="fewest_items"``."""

    class Meta:
        table_name = "fanout_even_metric"

    name = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(EveryFourth(), page_reads="fewest_items")


class LeanMetric(MetricBase):
    """``fanout_metric`` read with ``page_reads="fewest_items"``."""

    class Meta:
        table_name = "fanout_metric"

    shards = Sharding(RandomShards(4), page_reads="fewest_items")


class Flag(ShardedModel):
    """No range key: a merged query returns shard by shard."""

    class Meta:
        table_name = "fanout_flag"

    name = UnicodeAttribute(hash_key=True)
    on = NumberAttribute()
    shards = Sharding(RandomShards(5))


class Tight(ShardedModel):
    """More shards than botocore connections."""

    class Meta:
        table_name = "fanout_tight"
        max_pool_connections = 2

    name = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(6))


@contextmanager
def sent_queries(model: type[Model]) -> Iterator[list[dict[str, Any]]]:
    """The bodies of the Query requests the model's client sends (filled when the block ends)."""
    bodies: list[dict[str, Any]] = []
    with record_requests(model) as sent:
        yield bodies
    bodies.extend(sent.bodies("Query"))


@pytest.fixture
def metrics(dynamodb_models: BindModels) -> None:
    dynamodb_models(Metric, LeanMetric)
    with Metric.batch_write() as batch:
        for at in range(200):
            batch.save(Metric("cpu", at, value=at % 10, unit="%" if at % 2 else None))


def wait_for_threads(count: int) -> int:
    """Threads alive, not counting the shared fan-out pool's, once they are back to ``count`` or
    fewer (a thread an earlier test left may end meanwhile: fewer is no leak either)."""
    deadline = time.monotonic() + 10
    while other_threads() > count and time.monotonic() < deadline:
        time.sleep(0.02)
    return other_threads()


def pool_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("pynamodb-sharding-fanout")]


def other_threads() -> int:
    return threading.active_count() - len(pool_threads())


def test_nothing_is_sent_before_iteration(metrics: None) -> None:
    with sent_queries(Metric) as bodies:
        results = Metric.query("cpu")
        assert results.last_evaluated_key is None
        results.close()
    assert bodies == []
    assert isinstance(results, MergedResultIterator)


def test_limit_fetches_at_most_one_page_ahead_per_shard(metrics: None) -> None:
    with sent_queries(Metric) as bodies:
        got = list(Metric.query("cpu", limit=12, page_size=5))
    assert [m.at for m in got] == list(range(12))
    assert all(body["Limit"] == 5 for body in bodies)
    per_shard: dict[str, int] = {}
    for body in bodies:
        key = body["ExpressionAttributeValues"][":0"]["S"]
        per_shard[key] = per_shard.get(key, 0) + 1
    assert len(per_shard) == 4
    # 12 items spread over 4 shards need at most 2 pages of 5 from any shard (one when a
    # shard gives fewer than 5), and prefetch asks for at most one page more.
    assert all(n <= 3 for n in per_shard.values()), per_shard


@pytest.mark.parametrize("limit", [20, 50, 120])
def test_fewest_items_reads_about_each_shards_share(dynamodb_models: BindModels, limit: int) -> None:
    """``page_reads="fewest_items"``: each shard is first asked for 1.5 x its share and read
    again only when the merge needs its next item: on evenly spread data the items read stay
    within 1.5 x limit + shards (a plain query reads exactly the limit), not limit x shards."""
    dynamodb_models(EvenMetric, LeanEvenMetric)
    with EvenMetric.batch_write() as batch:
        for at in range(200):
            batch.save(EvenMetric("cpu", at))
    with sent_queries(LeanEvenMetric) as bodies:
        results = LeanEvenMetric.query("cpu", limit=limit)
        got = [int(m.at) for m in results]
    assert got == list(range(limit))
    assert {body["Limit"] for body in bodies[:4]} == {-(-int(1.5 * limit) // 4)}
    assert results.page_iter.total_scanned_count <= 1.5 * limit + 4


@pytest.mark.parametrize("limit", [5, 12, 20, 50, 120])
def test_one_round_trip_by_default(dynamodb_models: BindModels, limit: int) -> None:
    """By default each shard is first asked for enough that a page rarely needs a second
    request (``query_plan.one_round_trip_share``): on evenly spread data, exactly one per shard."""
    dynamodb_models(EvenMetric)
    with EvenMetric.batch_write() as batch:
        for at in range(200):
            batch.save(EvenMetric("cpu", at))
    with sent_queries(EvenMetric) as bodies:
        results = EvenMetric.query("cpu", limit=limit)
        got = [int(m.at) for m in results]
    assert got == list(range(limit))
    assert len(bodies) == 4
    assert {body["Limit"] for body in bodies} == {query_plan.one_round_trip_share(limit, 4)}
    assert query_plan.one_round_trip_share(limit, 4) < limit or limit < 8  # far below the limit per shard


@pytest.mark.parametrize("model", [Metric, LeanMetric], ids=["one_round_trip", "fewest_items"])
@pytest.mark.parametrize("limit", [3, 12, 20, 50, 120])
def test_a_limit_over_randomly_spread_data(metrics: None, model: type[ShardedModel], limit: int) -> None:
    """Where random writes put more of the first items in one shard, that shard is read again:
    the page stays exact, in order, and reads fewer items than asking every shard for the
    whole limit would."""
    with sent_queries(model) as bodies:
        results = model.query("cpu", limit=limit)
        got = [int(m.at) for m in results]
    assert got == list(range(limit))
    assert all(body["Limit"] <= limit for body in bodies)
    assert results.page_iter.total_scanned_count < limit * 4 or limit < 8


def test_page_reads_must_be_one_of_two(dynamodb_models: BindModels) -> None:
    with pytest.raises(ShardingDefinitionError, match=r"Sharding\(page_reads=...\).*one_round_trip.*fewest_items"):
        Sharding(RandomShards(4), page_reads="fast")  # type: ignore[arg-type]


def test_arguments_reach_every_shard(metrics: None) -> None:
    with sent_queries(Metric) as bodies:
        got = list(Metric.query("cpu", Metric.at < 100, filter_condition=Metric.value >= 5,
                                consistent_read=True, attributes_to_get=["value"]))
    assert sorted(m.at for m in got) == [at for at in range(100) if at % 10 >= 5]
    assert [m.at for m in got] == sorted(m.at for m in got)
    assert all(m.unit is None for m in got)  # not projected
    assert all(m.name == "cpu" and m.value >= 5 for m in got)
    assert len({body["ExpressionAttributeValues"][":0"]["S"] for body in bodies}) == 4
    assert all(body.get("ConsistentRead") is True and "FilterExpression" in body for body in bodies)


def test_descending_with_total_count(metrics: None) -> None:
    results = Metric.query("cpu", scan_index_forward=False, page_size=7)
    got = [m.at for m in results]
    assert got == list(range(199, -1, -1))
    assert results.total_count == 200
    assert results.last_evaluated_key is None


def test_rate_limit_paces_the_whole_query(metrics: None) -> None:
    with sent_queries(Metric) as bodies:
        start = time.monotonic()
        got = list(Metric.query("cpu", page_size=10, rate_limit=40))
        elapsed = time.monotonic() - start
    assert len(got) == 200
    assert all(body["ReturnConsumedCapacity"] == "TOTAL" for body in bodies)
    # Each page of an eventually consistent query consumes at least 0.5 units. One limiter
    # shared by the 4 shards sleeps for every page's units except those of the first and the
    # last request of each shard (in flight before or after any pause): about 0.2 s here.
    # Four separate limiters would each pause for a quarter of that.
    assert len(bodies) >= 20
    assert elapsed >= (len(bodies) - 2 * 4) * 0.5 / 40


def test_a_shards_error_reaches_the_consumer(metrics: None) -> None:
    before = other_threads()
    # DynamoDB refuses a filter on a key attribute: every shard's request fails on the server.
    results = Metric.query("cpu", filter_condition=Metric.at > 3)
    with pytest.raises(QueryError) as caught:
        next(results)
    assert isinstance(caught.value.cause, ClientError)
    assert caught.value.cause_response_code == "ValidationException"
    with pytest.raises(QueryError):  # raised again, never a silent end
        list(results)
    results.close()
    assert list(results) == []
    assert wait_for_threads(before) <= before


def test_partly_read_query_leaks_no_thread(metrics: None) -> None:
    """Queries closed or dropped half-read start no thread of their own: the shared pool's stay
    within its size, however many queries ran."""
    before = other_threads()
    for _ in range(10):
        with Metric.query("cpu", page_size=5) as results:
            assert next(results).at == 0
            assert pool_threads()
        abandoned = Metric.query("cpu", page_size=5)
        next(abandoned)
        del abandoned
    # Once, not per query: late in a test worker the heap is large and a full collection slow.
    gc.collect()
    assert wait_for_threads(before) <= before
    assert 0 < len(pool_threads()) <= fanout_threads()


def test_resumed_cursor_mid_page(metrics: None) -> None:
    first = Metric.query("cpu", page_size=50)
    got = [next(first).at for _ in range(33)]
    cursor = first.last_evaluated_key
    first.close()
    got += [m.at for m in Metric.query("cpu", last_evaluated_key=cursor)]
    assert got == list(range(200))


def test_model_without_range_key_returns_shard_by_shard(dynamodb_models: BindModels) -> None:
    dynamodb_models(Flag)
    for on in range(12):
        Flag("f", on=on).save()  # random shards: one item per shard survives (same logical key)
    forward = [(f.shards, f.on) for f in Flag.query("f")]
    backward = [(f.shards, f.on) for f in Flag.query("f", scan_index_forward=False)]
    assert [s for s, _ in forward] == sorted(s for s, _ in forward)
    assert len({s for s, _ in forward}) == len(forward)
    assert backward == list(reversed(forward))


def test_small_connection_pool_is_warned_about_once(dynamodb_models: BindModels) -> None:
    dynamodb_models(Tight)
    for at in range(12):
        Tight("t", at).save()
    with pytest.warns(FanoutPoolWarning, match=r"Tight: .*6 threads.*max_pool_connections is 2"):
        assert len(list(Tight.query("t"))) == 12
    with warnings_recorded() as recorded:
        assert len(list(Tight.query("t"))) == 12
        assert Tight.count("t") == 12
    assert not [w for w in recorded if issubclass(w.category, FanoutPoolWarning)]


@contextmanager
def warnings_recorded() -> Iterator[list[Any]]:
    import warnings

    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        yield recorded


def test_a_filtered_query_asks_every_shard_for_the_limit(metrics: None) -> None:
    """With a filter, Limit counts items evaluated: small shares would multiply round trips."""
    with sent_queries(Metric) as bodies:
        got = list(Metric.query("cpu", filter_condition=Metric.value >= 5, limit=40))
    assert len(got) == 40
    assert {body["Limit"] for body in bodies} == {40}


class SpreadLog(ShardedModel):
    """Randomly spread items, the spread made repeatable by a seeded generator."""

    class Meta:
        table_name = "fanout_spread_log"

    name = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(10, random=random.Random(7)), page_reads="fewest_items")


def test_fewest_items_reads_at_most_one_and_a_half_pages_and_a_shard_each_on_random_spreads(
    dynamodb_models: BindModels,
) -> None:
    """``page_reads="fewest_items"`` on randomly spread keys: first pages of 20 items over 10
    shards read about 1.5 x 20 + 10 = 40 items on average (39 to 40 for the spreads measured; a
    page's own figure depends on its spread, 36 to 42 here), where each shard asked for the
    whole limit would read 200."""
    dynamodb_models(SpreadLog)
    with SpreadLog.batch_write() as batch:
        for key in range(20):
            for at in range(300):
                batch.save(SpreadLog(f"key-{key}", at))
    read = []
    for key in range(20):
        results = SpreadLog.query(f"key-{key}", limit=20)
        assert list(range(20)) == [int(item.at) for item in results]
        read.append(results.page_iter.total_scanned_count)
    assert sum(read) / len(read) <= 1.05 * (1.5 * 20 + 10), read
    assert max(read) <= 48, read
