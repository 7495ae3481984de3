"""A shard holding 3 MB (several 1 MB DynamoDB pages) is read whole by a merged query.

The AWS write-sharding sample ignores ``LastEvaluatedKey`` and silently drops everything after
a shard's first megabyte; the merged query follows every shard's pages (DynamoDB Local).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import boto3
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels

BLOB = 100_000  # bytes of payload per item: 32 items make 3.2 MB in one shard


class Upload(ShardedModel):
    class Meta:
        table_name = "fanout_upload"

    bucket = UnicodeAttribute(hash_key=True)
    part = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()
    shards = Sharding(RandomShards(4))


def put_raw(model: type[ShardedModel], items: list[dict[str, Any]]) -> None:
    meta = model.Meta
    client = boto3.client("dynamodb", endpoint_url=meta.host, region_name=meta.region,
                          aws_access_key_id=meta.aws_access_key_id,
                          aws_secret_access_key=meta.aws_secret_access_key)
    for begin in range(0, len(items), 10):
        pending: dict[str, Any] = {meta.table_name: [{"PutRequest": {"Item": item}}
                                                     for item in items[begin:begin + 10]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def test_three_megabyte_shard_is_read_whole(dynamodb_models: BindModels) -> None:
    dynamodb_models(Upload)
    key = f"bucket-{uuid.uuid4().hex[:6]}"
    big = [{"bucket": {"S": f"{key}_2"}, "part": {"N": str(part)}, "payload": {"S": "x" * BLOB}}
           for part in range(0, 64, 2)]
    small = [{"bucket": {"S": f"{key}_{shard}"}, "part": {"N": str(part)}, "payload": {"S": "y"}}
             for shard, part in ((1, 1), (3, 3), (4, 63), (1, 99))]
    put_raw(Upload, big + small)
    assert len(big) * BLOB > 3_000_000

    results = Upload.query(key)
    parts = [(int(item.part), item.shards, len(item.payload)) for item in results]

    expected = sorted([(p, 2, BLOB) for p in range(0, 64, 2)] + [(1, 1, 1), (3, 3, 1), (63, 4, 1), (99, 1, 1)])
    assert parts == expected
    assert results.last_evaluated_key is None
    # DynamoDB stops a page once it has read 1 MB: shard 2 takes at least three pages, plus one
    # request for each other shard.
    assert results.requests_sent >= 3 + 3
    assert Counter(shard for _, shard, _ in parts)[2] == 32
