"""Shard pages parsed quickly (``pynamodb_sharding._fastparse``) read every attribute type as
PynamoDB reads it from a plain table: binary sort keys (and cursors over them), binary values
nested in maps and lists, sets, booleans, nulls, numbers; and hooks on the client see
botocore's usual response. On botocore before 1.36 (no ``before-parse``), botocore's parser
reads the pages and the results are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import (
    BinaryAttribute,
    BinarySetAttribute,
    BooleanAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding import _fastparse as fastparse
from pynamodb_sharding import _query_plan as query_plan
from pynamodb_sharding.testing import record_requests
from tests.paging import pages

Bind = Callable[..., Any]


class Blob(MapAttribute[str, Any]):
    name = UnicodeAttribute()
    data = BinaryAttribute(legacy_encoding=False)
    parts = ListAttribute[bytes](of=BinaryAttribute, null=True)  # type: ignore[arg-type]


FIELDS = ("owner", "digest", "raw", "raws", "blob", "blobs", "size", "sizes", "tags", "flag", "note")


def define(base: type[Model], table: str) -> Any:
    """The same attributes on a sharded and on a plain model."""

    class Attachment(base):  # type: ignore[valid-type,misc]
        class Meta:
            table_name = table

        owner = UnicodeAttribute(hash_key=True)
        digest = BinaryAttribute(range_key=True, legacy_encoding=False)
        raw = BinaryAttribute(null=True, legacy_encoding=False)
        raws = BinarySetAttribute(null=True, legacy_encoding=False)
        blob = Blob(null=True)
        blobs = ListAttribute(of=Blob, null=True)
        size = NumberAttribute(null=True)
        sizes = NumberSetAttribute(null=True)
        tags = UnicodeSetAttribute(null=True)
        flag = BooleanAttribute(null=True)
        note = UnicodeAttribute(null=True)
        if base is ShardedModel:
            shards = Sharding(RandomShards(4))

    return Attachment


Attachment = define(ShardedModel, "fast_parse_attachment")
PlainAttachment = define(Model, "fast_parse_plain_attachment")


def fill(model: type[Model], count: int) -> None:
    for n in range(count):
        digest = bytes([n, 255 - n, 0])
        model(
            "ann", digest,
            raw=b"\x00" + digest if n % 2 else None,
            raws={digest, b"\xff"} if n % 3 else None,
            blob=Blob(name=f"b{n}", data=digest * 2, parts=[digest, b""] if n % 2 else None),
            blobs=[Blob(name="x", data=b"\x01")] if n % 4 == 0 else None,
            size=n * 1.5 if n % 5 else None,
            sizes={n, n + 0.25} if n % 2 else None,
            tags={"a", f"t{n}"} if n % 3 == 0 else None,
            flag=bool(n % 2),
            note=None if n % 2 else f"note {n}",
        ).save()


def values(item: Model) -> dict[str, Any]:
    found = {name: getattr(item, name) for name in FIELDS}
    for name in ("blob",):
        found[name] = found[name].as_dict() if found[name] is not None else None
    found["blobs"] = [blob.as_dict() for blob in found["blobs"]] if found["blobs"] is not None else None
    return found


@pytest.mark.parametrize("forward", [True, False], ids=["ascending", "descending"])
def test_every_attribute_type_reads_as_from_a_plain_table(
    dynamodb_models: Bind, forward: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    dynamodb_models(Attachment, PlainAttachment)
    fill(Attachment, 30)
    fill(PlainAttachment, 30)
    plain = [values(item) for item in PlainAttachment.query("ann", scan_index_forward=forward)]
    list(Attachment.query("ann", limit=1))  # the endpoint is learned from a first request through botocore
    decoded = []
    decode = fastparse.decode_binary_values
    monkeypatch.setattr(fastparse, "decode_binary_values", lambda value: decoded.append(1) or decode(value))
    merged = [values(item) for item in Attachment.query("ann", scan_index_forward=forward)]
    # The fast path parses the shards' pages itself, whatever botocore's version (before 1.36 it
    # emits no before-parse, and the pages botocore sends are read by its own parser).
    assert len(decoded) >= 30 * 3, "the shards' pages went through the quick parse"
    assert len(plain) == 30
    assert isinstance(plain[0]["digest"], bytes)
    assert merged == plain
    # Resumed page after page from the cursor, over binary sort keys: the same items, once each.
    resumed = [values(item) for item in pages(Attachment.query, hash_key="ann", scan_index_forward=forward, limit=7)]
    assert resumed == plain


def test_hooks_on_the_client_see_botocores_response(dynamodb_models: Bind) -> None:
    dynamodb_models(Attachment, PlainAttachment)
    fill(Attachment, 12)
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def after_call(parsed: dict[str, Any], **_: Any) -> None:
        with lock:
            seen.append(parsed)

    events = Attachment._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb.Query", after_call, unique_id="test-fast-parse-after-call")
    try:
        items = list(Attachment.query("ann", rate_limit=1000))  # rate_limit asks for ConsumedCapacity
    finally:
        events.unregister("after-call.dynamodb.Query", unique_id="test-fast-parse-after-call")
    assert len(items) == 12
    assert sum(len(parsed["Items"]) for parsed in seen) == 12
    for parsed in seen:
        assert parsed["ResponseMetadata"]["HTTPStatusCode"] == 200
        assert parsed["ConsumedCapacity"]["CapacityUnits"] >= 0  # 0.0 for an empty shard on DynamoDB Local
        for raw in parsed["Items"]:
            assert isinstance(raw["digest"]["B"], bytes)


class Reading(ShardedModel):
    class Meta:
        table_name = "fast_parse_reading"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class PlainReading(Model):
    class Meta:
        table_name = "fast_parse_plain_reading"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


def test_a_large_limit_reads_pages_no_larger_than_the_memory_bound(
    dynamodb_models: Bind, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A limit far above each shard's page of the memory bound (here 100 items a page, as 160
    # shards would have) must not ask each shard for its share of the limit in one page: that
    # held a whole 1 MB DynamoDB page per shard (236 MB for 200,000 items over 16 shards).
    dynamodb_models(Reading, PlainReading)
    for model in (Reading, PlainReading):
        with model.batch_write() as batch:
            for at in range(1200):
                batch.save(model("s1", at))
    monkeypatch.setattr(query_plan, "DEFAULT_BUFFERED_ITEMS", 800)  # 100 items a page over 4 shards
    with record_requests(Reading) as sent:
        merged = [item.at for item in Reading.query("s1", limit=1000)]
    assert merged == [item.at for item in PlainReading.query("s1", limit=1000)]
    limits = [body["Limit"] for body in sent.bodies("Query")]
    assert max(limits) == 100
    assert len(limits) >= 10
