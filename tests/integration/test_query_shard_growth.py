"""A shard added between two pages of a resumed merged query: no item lost or repeated.

The cursor names the shards it has seen; a shard in ``read_shards(key)`` at resume time that
the cursor does not mention is read from its start (DynamoDB Local).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.plugin import BindModels


class Reading(ShardedModel):
    class Meta:
        table_name = "fanout_reading"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(3))


@pytest.fixture
def strategy(dynamodb_models: BindModels) -> Iterator[RandomShards]:
    dynamodb_models(Reading)
    strategy = Reading.shards.strategy
    assert isinstance(strategy, RandomShards)
    saved = strategy.count, strategy.max_shards
    yield strategy
    strategy.count, strategy.max_shards = saved


def test_shard_added_between_pages(strategy: RandomShards) -> None:
    for at in range(30):
        Reading("hot", at).save()
    first = Reading.query("hot", limit=10)
    got = [int(item.at) for item in first]
    cursor = json.loads(json.dumps(first.last_evaluated_key))
    assert got == list(range(10))
    assert {p["shard"] for p in cursor["positions"]} <= {1, 2, 3}

    strategy.count = strategy.max_shards = 5  # the key grows to 5 shards
    for at in range(30, 60):
        Reading("hot", at).save()
    assert Reading.shards.read_shards("hot") == (1, 2, 3, 4, 5)
    assert {item.shards for item in Reading.query("hot")} == {1, 2, 3, 4, 5}

    while cursor is not None:
        page = Reading.query("hot", limit=7, last_evaluated_key=cursor)
        got.extend(int(item.at) for item in page)
        cursor = page.last_evaluated_key
        cursor = json.loads(json.dumps(cursor)) if cursor is not None else None

    assert Counter(got) == Counter(range(60))


def test_items_added_to_known_shards_after_the_cursor_are_read(strategy: RandomShards) -> None:
    for at in range(0, 20, 2):
        Reading("k", at).save()
    first = Reading.query("k", limit=3)
    got = [int(item.at) for item in first]
    cursor = first.last_evaluated_key
    for at in range(1, 20, 2):
        Reading("k", at).save()
    rest = list(Reading.query("k", last_evaluated_key=cursor))
    got.extend(int(item.at) for item in rest)
    # Items written behind a shard's position are not re-read (the cursor is past them);
    # everything written ahead is read once.
    assert got[:3] == [0, 2, 4]
    assert Counter(got)[4] == 1
    assert set(range(5, 20)) <= set(got)
    assert len(got) == len(set(got))


class Chooser:
    """A random source whose next shard the test sets."""

    shard = 1

    def randint(self, low: int, high: int) -> int:
        return self.shard


CHOOSER = Chooser()


class Pinned(ShardedModel):
    class Meta:
        table_name = "fanout_pinned"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2, random=CHOOSER))


def test_a_shard_read_to_its_end_still_sees_later_items_ahead(dynamodb_models: BindModels) -> None:
    """Shard 1 is read to its end on the first page; an item written to it later, ahead of the
    cursor, comes back on resumption (the cursor keeps shard 1's position, not 'done')."""
    dynamodb_models(Pinned)
    CHOOSER.shard = 1
    Pinned("k", 1).save()
    CHOOSER.shard = 2
    for at in range(2, 7):
        Pinned("k", at).save()
    first = Pinned.query("k", limit=3)
    assert [1, 2, 3] == [int(item.at) for item in first]
    cursor = json.loads(json.dumps(first.last_evaluated_key))

    CHOOSER.shard = 1
    Pinned("k", 7).save()
    rest = Pinned.query("k", last_evaluated_key=cursor)
    assert [(4, 2), (5, 2), (6, 2), (7, 1)] == [(int(item.at), item.shards) for item in rest]
    assert rest.last_evaluated_key is None
