"""``count_by_shard`` counts each shard page by page, as a full merged query reads it (DynamoDB Local).

Each shard's page counts sum to the items that landed in it, the number of its pages is what a
merged query of the key with the same page size sends, and ``shards=`` restricts the count.
"""

from __future__ import annotations

import collections

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._fanout import count_by_shard
from pynamodb_sharding.testing.plugin import BindModels


class Visit(ShardedModel):
    class Meta:
        table_name = "fanout_visit"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(3))


@pytest.fixture
def landed(dynamodb_models: BindModels) -> collections.Counter[int]:
    """31 visits of one page (the shard each landed in), and one of another page."""
    dynamodb_models(Visit)
    shards: collections.Counter[int] = collections.Counter()
    for at in range(31):
        visit = Visit("/home", at)
        visit.save()
        shards[visit.shards] += 1
    Visit("/about", 1).save()
    return shards


def test_pages_sum_to_the_items_of_each_shard(landed: collections.Counter[int]) -> None:
    """With the default page size every shard here is one page holding what landed in it."""
    assert {shard: (landed[shard],) for shard in (1, 2, 3)} == count_by_shard(Visit, "/home")


def test_pages_follow_the_page_size(landed: collections.Counter[int]) -> None:
    """Pages of at most 4 items; a full last page is followed by an empty one, as DynamoDB pages."""
    counts = count_by_shard(Visit, "/home", page_size=4)
    for shard in (1, 2, 3):
        items = landed[shard]
        expected = (4,) * (items // 4) + (items % 4,)
        assert expected == counts[shard]


def test_pages_are_the_requests_of_a_merged_query(landed: collections.Counter[int]) -> None:
    """A merged query with the same page size sends exactly one request per counted page."""
    counts = count_by_shard(Visit, "/home", page_size=4)
    query = Visit.query("/home", page_size=4)
    assert 31 == len(list(query))
    assert sum(len(pages) for pages in counts.values()) == query.requests_sent


def test_shards_restricts_the_count(landed: collections.Counter[int]) -> None:
    """Only the shards asked for are counted; a key never written counts zero in one page."""
    assert {2: (landed[2],)} == count_by_shard(Visit, "/home", shards=[2])
    assert {1: (0,), 2: (0,), 3: (0,)} == count_by_shard(Visit, "/nowhere")
