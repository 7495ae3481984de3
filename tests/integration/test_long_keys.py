"""Keys near DynamoDB's 2,048-byte partition-key limit.

Proves: a write of a key whose physical key in the strategy's highest shard would exceed the
limit is refused before sending, whatever shard the write would have drawn (nothing is
written); a key that fits every shard is written and read; reads of a key written before this
rule (to low shards only) skip the shards that cannot exist instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, ShardKeyError
from pynamodb_sharding.testing import record_requests
from tests.raw import put_raw, raw_items


class Blob(ShardedModel):
    class Meta:
        table_name = "long_keys"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(10))


#: "_9" fits, "_10" does not: 2,046 + 2 = 2,048 bytes, 2,046 + 3 = 2,049.
TOO_LONG = "k" * 2046
#: Fits every shard: 2,045 + 3 = 2,048 bytes in shard 10.
LONGEST = "k" * 2045


def test_write_refused_for_every_draw(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Blob)
    with record_requests(Blob) as recorder:
        for n in range(30):  # each draw of 1..10 is refused, not only shard 10
            with pytest.raises(ShardKeyError, match=r"Blob\.pk.*shard 10.*at most 2045 bytes"):
                Blob(TOO_LONG, n).save()
        with pytest.raises(ShardKeyError), Blob.batch_write() as batch:
            batch.save(Blob(TOO_LONG, 99))
    assert "PutItem" not in recorder.requests
    assert "BatchWriteItem" not in recorder.requests
    assert [] == raw_items(Blob)


def test_key_that_fits_every_shard(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Blob)
    for n in range(20):
        Blob(LONGEST, n).save()
    assert list(range(20)) == [item.sk for item in Blob.query(LONGEST)]
    assert 20 == Blob.count(LONGEST)


def test_reads_skip_shards_that_cannot_exist(dynamodb_models: Callable[..., Any]) -> None:
    """Items an older version wrote to shards 1..9 of a too-long key stay readable."""
    dynamodb_models(Blob)
    put_raw(Blob, [{"pk": {"S": f"{TOO_LONG}_{n}"}, "sk": {"N": str(n)}} for n in range(1, 10)])
    assert tuple(range(1, 10)) == Blob.shards.read_shards(TOO_LONG)
    assert list(range(1, 10)) == [item.sk for item in Blob.query(TOO_LONG)]
    assert 9 == Blob.count(TOO_LONG)
    assert 3 == Blob.get(TOO_LONG, 3).sk
    assert [4] == [item.sk for item in Blob.batch_get([(TOO_LONG, 4)])]
    Blob.get(TOO_LONG, 5).delete()
    assert 8 == Blob.count(TOO_LONG)


def test_key_too_long_for_any_shard(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Blob)
    with pytest.raises(ShardKeyError, match="2,048-byte"):
        list(Blob.query("k" * 2047))
