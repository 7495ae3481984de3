"""Code written against PynamoDB's ``ResultIterator.page_iter`` works unchanged on a merged query.

Each function below uses only what PynamoDB's ``ResultIterator`` and ``PageIterator`` offer
(raw pages, ``last_evaluated_key``, ``total_scanned_count``, ``key_names``, ``page_size``) and
is applied to a plain PynamoDB model's query and to a sharded model's merged query of the same
data; the results must agree. The one intended difference, the cursor's shape, is checked
through what code does with a cursor: pass it back to ``query``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels

ITEMS = 50


class Gauge(ShardedModel):
    class Meta:
        table_name = "fanout_gauge"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(RandomShards(4))


class PlainGauge(Model):
    class Meta:
        table_name = "fanout_plain_gauge"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()


MODELS = [pytest.param(PlainGauge, id="plain"), pytest.param(Gauge, id="merged")]


@pytest.fixture
def gauges(dynamodb_models: BindModels) -> None:
    dynamodb_models(Gauge, PlainGauge)
    for model in (Gauge, PlainGauge):
        with model.batch_write() as batch:
            for at in range(ITEMS):
                batch.save(model("g", at, value=at % 5))


# -- functions written against PynamoDB's ResultIterator ---------------------------------------


def read_by_pages(model: type[Model], results: Any) -> dict[str, Any]:
    """Walk the raw pages, deserialise each item, and report what the iterator counted."""
    items: list[tuple[str, int]] = []
    sizes: list[int] = []
    scanned = 0
    for page in results.page_iter:
        assert page["Count"] == len(page["Items"])
        scanned += page["ScannedCount"]
        sizes.append(len(page["Items"]))
        items.extend((item.sensor, int(item.at)) for item in map(model.from_raw_data, page["Items"]))
    return {
        "items": items,
        "largest_page": max(sizes),
        "scanned_in_pages": scanned,
        "total_scanned_count": results.page_iter.total_scanned_count,
        "last_evaluated_key": results.page_iter.last_evaluated_key,
    }


def describe_midway(results: Any, read: int) -> dict[str, Any]:
    """What a progress report reads from a partly consumed iterator."""
    got = [int(next(results).at) for _ in range(read)]
    return {
        "got": got,
        "key_names": sorted(results.page_iter.key_names),
        "page_size": results.page_iter.page_size,
        "more": results.last_evaluated_key is not None and results.page_iter.last_evaluated_key is not None,
    }


def first_page_then_resume(model: type[Model], page_size: int) -> list[int]:
    """Show one page, keep its ``page_iter.last_evaluated_key``, resume from it later."""
    results = model.query("g", page_size=page_size)
    page = next(results.page_iter)
    first = [int(model.from_raw_data(raw).at) for raw in page["Items"]]
    cursor = results.page_iter.last_evaluated_key
    assert cursor == page.get("LastEvaluatedKey")
    rest = [int(item.at) for item in model.query("g", page_size=page_size, last_evaluated_key=cursor)]
    return first + rest


def consumed_units(results: Any) -> float:
    """Capacity units of a rate-limited query, summed from its pages."""
    return sum(page.get("ConsumedCapacity", {}).get("CapacityUnits", 0) for page in results.page_iter)


# -- the same function, both kinds of query ------------------------------------------------------


def test_pages_read_the_same(gauges: None) -> None:
    outcomes = {
        model.__name__: read_by_pages(model, model.query("g", filter_condition=model.value < 2, page_size=6))
        for model in (PlainGauge, Gauge)
    }
    expected_items = [("g", at) for at in range(ITEMS) if at % 5 < 2]
    for name, outcome in outcomes.items():
        assert outcome["items"] == expected_items, name
        assert outcome["largest_page"] <= 6, name
        assert outcome["total_scanned_count"] == ITEMS, name  # filtered items are scanned too
        assert outcome["scanned_in_pages"] == ITEMS, name
        assert outcome["last_evaluated_key"] is None, name


def test_a_partly_read_iterator_describes_itself_the_same(gauges: None) -> None:
    plain = describe_midway(PlainGauge.query("g", page_size=8), read=5)
    merged = describe_midway(Gauge.query("g", page_size=8), read=5)
    assert plain == merged == {"got": [0, 1, 2, 3, 4], "key_names": ["at", "sensor"], "page_size": 8, "more": True}


@pytest.mark.parametrize(("kwargs", "expected"), [({}, None), ({"limit": 9}, 9), ({"page_size": 4, "limit": 9}, 4)])
def test_page_size_reads_as_in_pynamodb(gauges: None, kwargs: dict[str, Any], expected: int | None) -> None:
    for model in (PlainGauge, Gauge):
        results = model.query("g", **kwargs)
        assert results.page_iter.page_size == expected, model.__name__


@pytest.mark.parametrize("model", MODELS)
def test_setting_page_size_sets_the_requests_limit(gauges: None, model: type[Model]) -> None:
    with record_requests(model) as sent:
        results = model.query("g")
        results.page_iter.page_size = 7
        assert [int(item.at) for item in results] == list(range(ITEMS))
    limits = {body.get("Limit") for body in sent.bodies("Query")}
    assert limits == {7}


@pytest.mark.parametrize("model", MODELS)
def test_a_page_cursor_resumes(gauges: None, model: type[Model]) -> None:
    assert first_page_then_resume(model, page_size=7) == list(range(ITEMS))


@pytest.mark.parametrize("model", MODELS)
def test_rate_limited_pages_carry_consumed_capacity(gauges: None, model: type[Model]) -> None:
    results = model.query("g", page_size=10, rate_limit=1000)
    assert consumed_units(results) > 0
    assert results.page_iter.last_evaluated_key is None


def test_pages_and_items_share_one_stream(gauges: None) -> None:
    """What the pages return, the item iterator does not return again (as in PynamoDB)."""
    for model in (PlainGauge, Gauge):
        results = model.query("g", page_size=10)
        page = next(results.page_iter)
        rest = [int(item.at) for item in results]
        assert [int(model.from_raw_data(raw).at) for raw in page["Items"]] + rest == list(range(ITEMS))


def test_no_page_after_close(gauges: None) -> None:
    results = Gauge.query("g", page_size=10)
    assert next(results.page_iter)["Count"] == 10
    results.close()
    assert list(results.page_iter) == []
