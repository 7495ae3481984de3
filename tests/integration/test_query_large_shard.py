"""A shard holding 3 MB (several 1 MB DynamoDB pages) is read whole by a merged query.

The AWS write-sharding sample ignores ``LastEvaluatedKey`` and silently drops everything after
a shard's first megabyte; the merged query follows every shard's pages (DynamoDB Local).
"""

from __future__ import annotations

import uuid
from collections import Counter

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels
from tests.raw import put_raw

BLOB = 100_000  # bytes of payload per item: 32 items make 3.2 MB in one shard


class Upload(ShardedModel):
    class Meta:
        table_name = "fanout_upload"

    bucket = UnicodeAttribute(hash_key=True)
    part = NumberAttribute(range_key=True)
    payload = UnicodeAttribute()
    shards = Sharding(RandomShards(4))


def test_three_megabyte_shard_is_read_whole(dynamodb_models: BindModels) -> None:
    dynamodb_models(Upload)
    key = f"bucket-{uuid.uuid4().hex[:6]}"
    big = [{"bucket": {"S": f"{key}_2"}, "part": {"N": str(part)}, "payload": {"S": "x" * BLOB}}
           for part in range(0, 64, 2)]
    small = [{"bucket": {"S": f"{key}_{shard}"}, "part": {"N": str(part)}, "payload": {"S": "y"}}
             for shard, part in ((1, 1), (3, 3), (4, 63), (1, 99))]
    put_raw(Upload, big + small, batch=10)
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
