"""Global tables: a growth is written to only once every region's replica can show it.

DynamoDB replicates each item on its own: items written on a new shard may reach another region
before the count that covers that shard, and a read there would miss items its replica holds.
With a home region, ``DynamicShards`` writes a growth's new shards only ``replication_lag +
clock_skew`` seconds after it (after ``cache_ttl`` too with cached reads). Proved here on two
DynamoDB Local servers with a Replicator between them and a clock moved by hand (the race
itself, with the items arriving before the count, is simulated in ``test_fleet.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pynamodb_sharding.testing import DynamoDBLocal
from tests.clock import Clock
from tests.regions import (
    HOME,
    OTHER,
    Region,
    create_tables,
    drop_tables,
    fresh_query,
    make_region,
    raw_log,
    replicator,
    table_prefix,
    write_items,
)


@pytest.fixture
def clock() -> Clock:
    return Clock(1_800_000_000.0)


@pytest.fixture
def regions(
    dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal, clock: Clock,
) -> Iterator[tuple[Region, Region]]:
    tables = table_prefix()
    home = {"home_region": HOME, "home_host": dynamodb_local.endpoint}
    dynamic = {"clock": clock, "replication_lag": 2.0, "clock_skew": 1.0}
    first = make_region(HOME, dynamodb_local.endpoint, tables, dynamic=dynamic, **home)
    second = make_region(OTHER, second_server.endpoint, tables, dynamic=dynamic, **home)
    create_tables(first, second)
    yield first, second
    drop_tables(first, second)


def test_a_growth_is_written_to_once_every_replica_can_show_it(regions: tuple[Region, Region], clock: Clock) -> None:
    home, other = regions
    assert home.log.shards.strategy.activation_delay == 3.0  # replication_lag + clock_skew
    with replicator(home, other) as replication:
        assert home.log.shards.grow("hot") == 2
        first = write_items(home, "hot", 0.0, 20)
        assert {physical for physical, _ in raw_log(home)} == {"hot_1"}  # not yet: 0 s after the growth

        clock.now += 2.9
        first += write_items(home, "hot", 100.0, 20)
        assert {physical for physical, _ in raw_log(home)} == {"hot_1"}

        clock.now += 0.2  # 3.1 s after it: every replica shows the count by now
        later = write_items(home, "hot", 200.0, 40)
        assert {physical for physical, _ in raw_log(home)} == {"hot_1", "hot_2"}
        replication.settle()
    assert fresh_query(other, "hot") == sorted(first + later)
    assert fresh_query(home, "hot") == sorted(first + later)


def test_the_option_is_checked(regions: tuple[Region, Region]) -> None:
    from pynamodb_sharding import DynamicShards, ShardingDefinitionError

    home, _ = regions
    with pytest.raises(ShardingDefinitionError, match=r"replication_lag must be a non-negative \(finite\) number"):
        DynamicShards(home.shards, replication_lag=-1)
