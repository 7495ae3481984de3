"""A merged query whose page request failed resumes on the next ``next()``, like PynamoDB's own.

One Query request of a logical query fails with an error botocore does not retry (the caller
sees ``QueryError``); the caller catches it and keeps iterating the same iterator. PynamoDB's
``ResultIterator`` re-sends the failed page and returns everything; the merged query must do
the same: every item exactly once, in order, ``last_evaluated_key`` ``None`` only at the end.
The failure is injected into the n-th Query request, so it hits a shard's first page, a
prefetched next page or a page fetched on demand, depending on ``n``.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels

ITEMS = 60


class Reading(ShardedModel):
    class Meta:
        table_name = "fanout_reading"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()
    shards = Sharding(RandomShards(4))


class PlainReading(Model):
    """The reference: the same data in an unsharded PynamoDB model."""

    class Meta:
        table_name = "fanout_plain_reading"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = NumberAttribute()


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class FailingQueries:
    """Answers the listed Query requests (1-based, counted per client) with a 400 error."""

    def __init__(self, fail: set[int]) -> None:
        self.fail = fail
        self.sent = 0
        self.failed = 0
        self.bodies: Counter[bytes] = Counter()  # each distinct request, with how often it was sent
        self._lock = threading.Lock()

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        with self._lock:
            self.sent += 1
            self.bodies[bytes(request.body)] += 1
            if self.sent not in self.fail:
                return None
            self.failed += 1
        # A ValidationException is not retried by botocore: the caller sees it at once.
        body = {"__type": "com.amazon.coral.validate#ValidationException", "message": "injected failure"}
        headers = {"x-amzn-requestid": "injected", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 400, headers, _Body(json.dumps(body).encode()))


@contextmanager
def failing_queries(model: type[Model], fail: set[int]) -> Iterator[FailingQueries]:
    hook = FailingQueries(fail)
    events = model._get_connection().connection.client.meta.events
    events.register_first("before-send.dynamodb.Query", hook, unique_id="test-failing-queries")
    try:
        yield hook
    finally:
        events.unregister("before-send.dynamodb.Query", unique_id="test-failing-queries")


def through_errors(results: Iterator[Any], max_errors: int = 5) -> tuple[list[Any], int]:
    """Everything ``results`` yields, read to the end as a caller that catches ``QueryError``
    and carries on would, and the number of errors caught."""
    got: list[Any] = []
    errors = 0
    while True:
        try:
            got.append(next(results))
        except StopIteration:
            return got, errors
        except QueryError:
            errors += 1
            if errors > max_errors:
                raise


def read_through_errors(results: Iterator[Any]) -> tuple[list[tuple[str, int]], int]:
    """Iterate to the end as a caller that catches ``QueryError`` and carries on would."""
    items, errors = through_errors(results)
    return [(item.sensor, int(item.at)) for item in items], errors


@pytest.fixture
def readings(dynamodb_models: BindModels) -> None:
    dynamodb_models(Reading, PlainReading)
    for model in (Reading, PlainReading):
        with model.batch_write() as batch:
            for at in range(ITEMS):
                batch.save(model("s", at, value=at))


@pytest.mark.parametrize("failing", [1, 3, 5, 7, 9, 12])
@pytest.mark.parametrize("forward", [True, False])
def test_iteration_resumes_after_a_failed_page(readings: None, failing: int, forward: bool) -> None:
    expected = [("s", at) for at in (range(ITEMS) if forward else range(ITEMS - 1, -1, -1))]
    outcomes = {}
    for model in (PlainReading, Reading):
        with failing_queries(model, {failing}) as hook:
            results = model.query("s", scan_index_forward=forward, page_size=4)
            got, errors = read_through_errors(results)
        assert hook.failed == 1, model
        assert results.last_evaluated_key is None, model
        outcomes[model.__name__] = (got, errors)
    assert outcomes["PlainReading"] == (expected, 1)
    assert outcomes["Reading"] == (expected, 1)


@pytest.mark.parametrize("failing", [1, 6, 10])
def test_cursor_after_an_error_resumes_exactly(readings: None, failing: int) -> None:
    """The cursor taken right after the error resumes after the last item handed out."""
    with failing_queries(Reading, {failing}):
        results = Reading.query("s", page_size=4)
        got: list[int] = []
        while True:
            try:
                got.append(int(next(results).at))
            except QueryError:
                break
        cursor = results.last_evaluated_key
        results.close()
    assert cursor is not None
    rest = [int(item.at) for item in Reading.query("s", last_evaluated_key=json.loads(json.dumps(cursor)))]
    assert got + rest == list(range(ITEMS))


@pytest.mark.parametrize("model", [PlainReading, Reading])
def test_a_persistent_error_raises_on_every_next(readings: None, model: type[Model]) -> None:
    """An error that does not go away is raised again by every ``next()``, never a silent end."""
    with failing_queries(model, set(range(5, 1000))) as hook:
        results = model.query("s", page_size=4)
        got: list[int] = []
        with pytest.raises(QueryError):
            while True:
                got.append(int(next(results).at))
        for _ in range(3):
            with pytest.raises(QueryError):
                next(results)
        assert results.last_evaluated_key is not None
    # Each of the 3 calls asked again for a failed page (which shard's page fails first depends
    # on which prefetches were in flight, so only the total of re-sent requests is fixed).
    assert sum(count - 1 for count in hook.bodies.values()) >= 3
    assert got == list(range(len(got)))


def read_pages_through_errors(model: type[Model], results: Any) -> tuple[list[int], int]:
    """Walk ``page_iter`` as a caller that catches ``QueryError`` and carries on would."""
    pages, errors = through_errors(results.page_iter)
    return [int(model.from_raw_data(raw).at) for page in pages for raw in page["Items"]], errors


@pytest.mark.parametrize("failing", [2, 6, 11])
def test_page_iteration_resumes_after_a_failed_page(readings: None, failing: int) -> None:
    """A page being gathered when a request failed keeps its items for the next call."""
    outcomes = {}
    for model in (PlainReading, Reading):
        with failing_queries(model, {failing}) as hook:
            outcomes[model.__name__] = read_pages_through_errors(model, model.query("s", page_size=4))
        assert hook.failed == 1, model
    assert outcomes["PlainReading"] == outcomes["Reading"] == (list(range(ITEMS)), 1)
