"""Global tables: a growth made by another process a moment ago is never missed, in any region.

A writer in eu-west-1 grows a key (the change is made in us-east-1, the home region) while
eu-west-1's replica of the metadata item still shows the old count. Readers in eu-west-1 read
that replica's count, so the writer must not put items on shards the replica does not show yet.
Proves, with replication paused, on the raw item table of eu-west-1 and on a second eu-west-1
process's query (a plain model's query of the same items is the reference: it would return all
of them):

- the writer uses only the shards eu-west-1's replica shows until it shows the growth, and
  another eu-west-1 process returns every item at once;
- once the growth has replicated, writers use the new shards and readers in both regions
  return every item written in either region.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pynamodb_sharding.testing import DynamoDBLocal
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
    stored_count,
    table_prefix,
    write_items,
)


@pytest.fixture
def regions(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region, Region]]:
    """us-east-1 (home), a writer process in eu-west-1 and a reader process in eu-west-1, each
    caching counts as a long-running process does (``cache_ttl=60``)."""
    tables = table_prefix()
    home = {"home_region": HOME, "home_host": dynamodb_local.endpoint}
    cached = {"cache_ttl": 60.0}
    first = make_region(HOME, dynamodb_local.endpoint, tables, dynamic=cached, **home)
    writer = make_region(OTHER, second_server.endpoint, tables, dynamic=cached, **home)
    reader = make_region(OTHER, second_server.endpoint, tables, dynamic=cached, **home)
    create_tables(first, writer)
    yield first, writer, reader
    drop_tables(first, writer)


def shards_used(region: Region, key: str) -> set[str]:
    return {physical for physical, _ in raw_log(region) if physical.rsplit("_", 1)[0] == key}


def test_a_growth_made_at_home_is_used_here_once_this_replica_shows_it(
    regions: tuple[Region, Region, Region],
) -> None:
    home, writer, reader = regions
    with replicator(home, writer) as replication:
        assert writer.log.shards.grow("hot") == 2
        replication.settle()
        replication.pause()
        assert writer.log.shards.grow("hot") == 4  # made in us-east-1
        assert stored_count(writer, "hot") == 2  # eu-west-1's replica shows 2 still
        written = write_items(writer, "hot", 0.0, 40)
        assert shards_used(writer, "hot") <= {"hot_1", "hot_2"}
        assert fresh_query(reader, "hot") == written  # another eu-west-1 process: all 40
        replication.resume()
        replication.settle()
        assert stored_count(writer, "hot") == 4
        # A writer process that reads the count now spreads over all four shards.
        reader.log.shards.strategy.store.clear()
        more = write_items(reader, "hot", 100.0, 40)
        assert shards_used(writer, "hot") == {"hot_1", "hot_2", "hot_3", "hot_4"}
        replication.settle()
    for region in (reader, writer, home):
        assert fresh_query(region, "hot") == written + more
