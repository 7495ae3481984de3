"""Global tables: ``grow()`` and ``shrink()`` in a region whose replica lags decide on the home
region's count.

us-east-1 is the metadata model's home region, eu-west-1 the other; the Replicator between
them is paused so that eu-west-1's replica still shows an older count than the home holds.
Proves, on the raw metadata items of both regions:

- a ``grow()`` that loses its conditional change at home to a growth at least as large returns
  the count in effect at home and grows nothing more; one that loses to a smaller change (a
  shrink) grows from the home count;
- ``shrink()`` reads the count it changes at home: it succeeds at once (no "kept changing"),
  and the target it accepts is checked against the home count;
- a writer whose growth on a throttle loses at home to a growth made there learns the home
  count, and does not grow again while this region's replica does not show it yet;
- once replication resumes, both regions hold the same item and every item written is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._metadata import home_model
from pynamodb_sharding.testing import DynamoDBLocal
from tests.faults import Faults
from tests.regions import (
    HOME,
    OTHER,
    Region,
    create_tables,
    drop_tables,
    fresh_query,
    history,
    make_region,
    metadata_values,
    raw_log,
    replicator,
    stored_count,
    table_prefix,
    write_items,
)


@pytest.fixture
def regions(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region]]:
    """us-east-1 (the home region of the shard counts) and eu-west-1."""
    tables = table_prefix()
    home = {"home_region": HOME, "home_host": dynamodb_local.endpoint}
    first = make_region(HOME, dynamodb_local.endpoint, tables, **home)
    second = make_region(OTHER, second_server.endpoint, tables, **home)
    create_tables(first, second)
    yield first, second
    drop_tables(first, second)


class TestGrowAfterLosingAtHome:
    """A grow() whose change fails at home returns, or grows from, the home count."""

    def test_a_growth_at_least_as_large_at_home_is_returned(self, regions: tuple[Region, Region]) -> None:
        home, other = regions
        with replicator(home, other) as replication:
            assert home.log.shards.grow("hot") == 2
            replication.settle()
            replication.pause()
            assert home.log.shards.grow("hot") == 4
            assert stored_count(other, "hot") == 2  # eu-west-1's replica lags
            assert other.log.shards.grow("hot") == 4  # lost to 2 -> 4: the home count
            assert stored_count(home, "hot") == 4  # nothing grown twice
            assert history(home, "hot") == {1, 2, 4}
            replication.resume()
            replication.settle()
        assert metadata_values(other, "hot") == metadata_values(home, "hot")
        assert replication.overwritten == 0

    def test_a_smaller_change_at_home_is_grown_from(self, regions: tuple[Region, Region]) -> None:
        home, other = regions
        with replicator(home, other) as replication:
            home.log.shards.grow("hot")
            replication.settle()
            replication.pause()
            assert home.log.shards.shrink("hot", 1) == 1
            assert stored_count(other, "hot") == 2
            # eu-west-1 wanted 2 -> 4 and lost; the home holds 1, so it grows 1 -> 2.
            assert other.log.shards.grow("hot") == 2
            assert stored_count(home, "hot") == 2
            replication.resume()
            replication.settle()
        assert metadata_values(other, "hot") == metadata_values(home, "hot")
        assert history(other, "hot") == {1, 2}


class TestShrinkAtHome:
    """shrink() reads the count it changes at home and changes it there."""

    def test_shrink_succeeds_while_the_local_replica_lags(self, regions: tuple[Region, Region]) -> None:
        home, other = regions
        with replicator(home, other) as replication:
            home.log.shards.grow("hot")
            replication.settle()
            written = write_items(other, "hot", 0.0, 10)
            replication.pause()
            home.log.shards.grow("hot")  # 2 -> 4 at home
            assert stored_count(other, "hot") == 2
            # 3 is in 1..4, the count in effect: accepted although eu-west-1 still reads 2.
            assert other.log.shards.shrink("hot", 3) == 3
            assert other.log.shards.shrink("hot", 1) == 1
            assert stored_count(home, "hot") == 1
            assert history(home, "hot") == {1, 2, 3, 4}
            replication.resume()
            replication.settle()
        assert metadata_values(other, "hot") == metadata_values(home, "hot")
        assert fresh_query(other, "hot") == written
        assert fresh_query(home, "hot") == written


class TestThrottledGrowthAfterLosingAtHome:
    """A writer whose growth on a throttle loses at home works with the home count."""

    @pytest.fixture
    def lagging(self, dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region]]:
        tables = table_prefix()
        home = {"home_region": HOME, "home_host": dynamodb_local.endpoint}
        eager = {"cache_ttl": 60.0, "cooldown": 0.0, "backoff": (0.0, 0.0)}  # grows at every throttle
        first = make_region(HOME, dynamodb_local.endpoint, tables, dynamic=eager, **home)
        second = make_region(OTHER, second_server.endpoint, tables, dynamic=eager, **home)
        create_tables(first, second)
        yield first, second
        drop_tables(first, second)

    def test_the_home_count_is_learnt_and_not_grown_again(self, lagging: tuple[Region, Region]) -> None:
        home, other = lagging
        changes = requests_to(other.shards, "UpdateItem")
        with replicator(home, other) as replication:
            home.log.shards.grow("hot")
            replication.settle()
            other.log(key="hot", at=0.0).save()  # eu-west-1 caches count 2
            replication.pause()
            home.log.shards.grow("hot")  # 2 -> 4 at home
            Faults(other.log, "PutItem").plan = ["throttle", "throttle"]
            other.log(key="hot", at=1.0).save()
            # One conditional change sent home, lost to 2 -> 4: the writer learnt 4 there, and
            # the second throttle (on the two shards eu-west-1 shows) grew nothing more.
            assert changes == ["UpdateItem"]
            assert other.log.shards.shard_count("hot") == 4
            assert history(home, "hot") == {1, 2, 4}
            assert stored_count(home, "hot") == 4
            assert {physical for physical, _ in raw_log(other)} <= {"hot_1", "hot_2"}
            replication.resume()
            replication.settle()
        assert fresh_query(other, "hot") == [0.0, 1.0]
        assert fresh_query(home, "hot") == [0.0, 1.0]


def requests_to(metadata_model: type[Any], operation: str) -> list[str]:
    """Records every ``operation`` request sent to the home region of ``metadata_model``
    (through its patient and its best-effort clients)."""
    sent: list[str] = []

    def record(model: Any = None, params: Any = None, **_: Any) -> None:
        sent.append(operation)

    for retries in (True, False):
        client = botocore_client(home_model(metadata_model, retries=retries))
        client.meta.events.register(f"before-call.dynamodb.{operation}", record)
    return sent
