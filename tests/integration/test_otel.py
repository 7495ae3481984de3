"""``pynamodb_sharding.contrib.otel``: metrics and spans, checked with the SDK's in-memory exporters.

Proves on DynamoDB Local: a merged query over 8 shards gives one ``pynamodb_sharding.query`` span
with 8 ``shard_request`` children parented to it (though they run on pool threads), a count
the same; the fan-out width and duration histograms record each read; a growth under the
partition-limit simulator adds one ``shard_count.changes`` per change and the throttle counter
counts by reason; no attribute holds a key value; after ``uninstrument`` nothing is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DynamicShards, HashedShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.contrib import otel
from pynamodb_sharding.testing.simulator import LoadClock, simulate_partition_limits

Bind = Callable[..., Any]
KEY = "/secret/user-42.txt"


class OtelShards(ShardMetadata):
    class Meta:
        table_name = "otel_shards"


class Traced(ShardedModel):
    class Meta:
        table_name = "otel_traced"
        max_pool_connections = 16

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8))


class Hot(ShardedModel):
    class Meta:
        table_name = "otel_hot"
        max_retry_attempts = 0
        max_pool_connections = 16

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    # Growths written to at once (the fleet protocol of fresh reads, stored when the table is
    # created): cached reads would have writers wait cache_ttl + clock_skew of the wall clock.
    shards = Sharding(DynamicShards(OtelShards, max_shards=4, cooldown=0, backoff=(0.01, 0.02),
                                    max_attempts=500, fresh_reads=True))


@pytest.fixture
def exported() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    otel.instrument(meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracer_provider)
    yield spans, reader
    otel.uninstrument()


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def test_a_merged_query_is_one_span_with_a_child_per_shard(
    dynamodb_models: Bind, exported: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    spans, reader = exported
    dynamodb_models(Traced)
    with Traced.batch_write() as batch:
        for at in range(40):
            batch.save(Traced(KEY, at))
    spans.clear()
    assert len(list(Traced.query(KEY))) == 40
    assert Traced.count(KEY) == 40
    finished = spans.get_finished_spans()
    for name in ("pynamodb_sharding.query", "pynamodb_sharding.count"):
        (parent,) = [span for span in finished if span.name == name]
        children = [span for span in finished if span.parent is not None
                    and span.parent.span_id == parent.context.span_id]
        assert sorted(child.attributes["pynamodb_sharding.shard"] for child in children) == list(range(1, 9))
        assert {child.name for child in children} == {"pynamodb_sharding.shard_request"}
        assert parent.attributes["pynamodb_sharding.shards"] == 8
        assert parent.attributes["pynamodb_sharding.model"] == "Traced"
    for span in finished:  # no key value is exported
        assert all(KEY not in str(value) for value in (span.attributes or {}).values())
    points = _points(reader)
    widths = points["pynamodb_sharding.fanout.width"]
    assert sum(point.count for point in widths) == 2
    assert max(point.max for point in widths) == 8
    assert sum(point.count for point in points["pynamodb_sharding.merged_read.duration"]) == 2


def test_growth_and_throttles_are_counted(
    dynamodb_models: Bind, exported: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    _, reader = exported
    dynamodb_models(Hot)
    # 60 saves a second of the simulator's clock, whatever the machine's speed: three times
    # what a partition takes, so the key is throttled and grows.
    clock = LoadClock(60)
    with simulate_partition_limits(Hot, write_units=20, clock=clock) as simulator:
        for at in range(150):
            clock.tick()
            Hot("/hot", at).save()
    count = Hot.shards.shard_count("/hot")
    assert count > 1
    points = _points(reader)
    changes = sum(point.value for point in points["pynamodb_sharding.shard_count.changes"])
    assert changes == len(Hot.shards.history("/hot")) - 1  # every change after the first count
    throttles = {dict(point.attributes)["pynamodb_sharding.reason"]: point.value
                 for point in points["pynamodb_sharding.throttles"]}
    assert throttles == {"TableWriteKeyRangeThroughputExceeded":
                         simulator.throttles_by_reason["TableWriteKeyRangeThroughputExceeded"]}
    assert max(point.max for point in points["pynamodb_sharding.shard_count"]) == count


def test_uninstrument_stops_recording(dynamodb_models: Bind) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    otel.instrument(tracer_provider=provider)
    otel.uninstrument()
    dynamodb_models(Traced)
    list(Traced.query(KEY))
    assert spans.get_finished_spans() == ()


class Adopted(ShardedModel):
    """A table adopted in place: its bare keys are read beside the shards."""

    class Meta:
        table_name = "otel_adopted"

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4), legacy_unsharded=True)


def test_the_bare_key_request_is_unsharded_not_shard_minus_one(
    dynamodb_models: Bind, exported: tuple[InMemorySpanExporter, InMemoryMetricReader],
) -> None:
    from tests.raw import put_raw

    spans, _ = exported
    dynamodb_models(Adopted)
    put_raw(Adopted, [{"file_path": {"S": KEY}, "at": {"N": str(at)}} for at in range(3)])
    Adopted(KEY, 10).save()
    spans.clear()
    assert Adopted.count(KEY) == 4
    children = [span for span in spans.get_finished_spans() if span.name == "pynamodb_sharding.shard_request"]
    assert sorted(child.attributes["pynamodb_sharding.shard"] for child in children
                  if "pynamodb_sharding.shard" in child.attributes) == [1, 2, 3, 4]
    assert [child.attributes.get("pynamodb_sharding.unsharded") for child in children
            if "pynamodb_sharding.shard" not in child.attributes] == [True]
