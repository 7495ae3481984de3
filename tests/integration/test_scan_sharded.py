"""``scan`` of a sharded model yields logical keys, and its segments partition the items (DynamoDB Local)."""

from __future__ import annotations

from collections import Counter

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels


class Post(ShardedModel):
    class Meta:
        table_name = "fanout_post"

    author = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(5))


def test_scan_yields_logical_keys_and_segments_partition(dynamodb_models: BindModels) -> None:
    dynamodb_models(Post)
    with Post.batch_write() as batch:
        for author in ("ann", "ben", "cy"):
            for at in range(40):
                batch.save(Post(author, at))
    everything = [(p.author, p.at, p.shards) for p in Post.scan(page_size=17)]
    assert Counter(author for author, _, _ in everything) == Counter({"ann": 40, "ben": 40, "cy": 40})
    assert {shard for _, _, shard in everything} == {1, 2, 3, 4, 5}

    segments = [[(p.author, p.at, p.shards) for p in Post.scan(segment=s, total_segments=4)] for s in range(4)]
    combined = [item for segment in segments for item in segment]
    assert sorted(combined) == sorted(everything)
    assert len(set(combined)) == len(combined) == 120
    assert sum(1 for segment in segments if segment) >= 2


def test_scan_filter_and_limit(dynamodb_models: BindModels) -> None:
    dynamodb_models(Post)
    for at in range(30):
        Post("dee", at).save()
    assert sorted(p.at for p in Post.scan(Post.at >= 25)) == [25, 26, 27, 28, 29]
    assert len(list(Post.scan(limit=7))) == 7
