"""Global tables: moving the home region of the shard counts (``home.move_home``).

us-east-1 is the declared home region (``Meta.home_region``), eu-west-1 the other, with the
Replicator between them. Proves, on the raw metadata and item tables of both regions:

- writers in both regions grow existing and new keys while the home moves from us-east-1 to
  eu-west-1: no metadata item is changed in both regions (nothing overwritten), every count a
  writer was given is in the history both regions hold, and readers in both regions return
  every item written;
- after the move every item and the home record name eu-west-1, and a change made from
  us-east-1 is made in eu-west-1's replica;
- a change that a process with an old view sends to the old home after the move fails there
  (the fence) and changes nothing;
- a second call finishes nothing twice; a move to a third region while one is under way is
  refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pynamodb_sharding import HomeHandoverError, move_home
from pynamodb_sharding._metadata import HOME_RECORD_KEY
from pynamodb_sharding.testing import DynamoDBLocal
from tests.regions import (
    HOME,
    OTHER,
    Region,
    create_tables,
    drop_tables,
    fresh_query,
    history,
    make_region,
    metadata_item,
    replicator,
    stored_count,
    table_prefix,
)


@pytest.fixture
def regions(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region]]:
    tables = table_prefix()
    hosts = {HOME: dynamodb_local.endpoint, OTHER: second_server.endpoint}
    home = {"home_region": HOME, "home_host": dynamodb_local.endpoint, "region_hosts": hosts,
            "home_retry_seconds": 60}
    first = make_region(HOME, dynamodb_local.endpoint, tables, **home)
    second = make_region(OTHER, second_server.endpoint, tables, **home)
    create_tables(first, second)
    yield first, second
    drop_tables(first, second)


def raw_metadata(region: Region) -> list[dict[str, Any]]:
    """The metadata items but the fleet protocol record (a table-wide record, not stamped)."""
    pages = region.client().get_paginator("scan").paginate(TableName=region.shards.Meta.table_name,
                                                           ConsistentRead=True)
    return [item for page in pages for item in page["Items"] if item["partition_key"]["S"] != "#protocol"]


def record(region: Region) -> dict[str, Any]:
    item = region.client().get_item(TableName=region.shards.Meta.table_name, ConsistentRead=True, Key={
        "partition_key": {"S": HOME_RECORD_KEY[0]}, "model": {"S": HOME_RECORD_KEY[1]}})["Item"]
    return {name: value.get("S") for name, value in item.items()}


def test_growth_in_both_regions_while_the_home_moves_is_never_lost(regions: tuple[Region, Region]) -> None:
    first, second = regions
    grown: list[tuple[str, int]] = []
    written: dict[str, list[float]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    moved = threading.Event()
    started = threading.Barrier(3)
    during: list[str] = []

    def writer(region: Region, offset: float) -> None:
        try:
            step = 0
            after = 0
            while step < 2 or not moved.is_set() or step < after + 3:
                if step == 2:
                    started.wait()  # the move starts once both writers are under way
                if not moved.is_set():
                    after = step + 1
                    during.append(region.name)
                key = ("old-a", "old-b", f"new-{region.name}-{step}")[step % 3]
                count = region.log.shards.grow(key)
                at = offset + step
                region.log(key=key, at=at).save()
                with lock:
                    grown.append((key, count))
                    written.setdefault(key, []).append(at)
                step += 1
        except BaseException as error:  # reported by the test
            errors.append(error)

    with replicator(first, second) as replication:
        for key in ("old-a", "old-b"):
            first.log.shards.grow(key)
        replication.settle()
        threads = [threading.Thread(target=writer, args=(region, offset))
                   for region, offset in ((first, 0.0), (second, 10_000.0))]
        for thread in threads:
            thread.start()
        started.wait()
        move = move_home(first.shards, to=OTHER, poll=0.05)
        moved.set()
        for thread in threads:
            thread.join()
        replication.settle()
    assert errors == []
    assert {HOME, OTHER} <= set(during[4:])  # both regions grew while the home moved
    assert (move.old, move.new) == (HOME, OTHER)
    assert replication.overwritten == 0  # no metadata item was changed in two regions
    for key, count in grown:
        assert count in history(first, key)
        assert history(first, key) == history(second, key)
    for key, times in written.items():
        assert fresh_query(first, key) == sorted(times)
        assert fresh_query(second, key) == sorted(times)
    for region in (first, second):
        assert record(region)["home"] == OTHER
        assert "moving_to" not in record(region)
        homes = {item["home"]["S"] for item in raw_metadata(region)}
        assert homes == {OTHER}


def test_after_the_move_changes_are_made_in_the_new_home(regions: tuple[Region, Region]) -> None:
    first, second = regions
    with replicator(first, second) as replication:
        first.log.shards.grow("k")
        replication.settle()
        store = first.log.shards.strategy.store
        stale = store.load(first.log.Meta.table_name, "k", owner="Log.key")  # read before the move
        move = move_home(first.shards, to=OTHER, poll=0.05)
        assert (move.stamped, move.items) == (1, 1)
        replication.settle()
        replication.pause()
        # A process that still thinks us-east-1 is the home: its change fails there.
        assert store.change(first.log.Meta.table_name, "k", stale, 8, 1.0, owner="Log.key") is None
        assert stored_count(first, "k") == 2
        # A process of us-east-1 reading the item now changes it in eu-west-1.
        assert first.log.shards.grow("k") == 4
        assert (stored_count(first, "k"), stored_count(second, "k")) == (2, 4)
        # New keys are created in eu-west-1 too.
        assert first.log.shards.grow("fresh") == 2
        assert metadata_item(first, "fresh") is None
        assert metadata_item(second, "fresh") is not None
        replication.resume()
        replication.settle()
    assert history(first, "k") == history(second, "k") == {1, 2, 4}
    assert move_home(first.shards, to=OTHER) == type(move)(old=OTHER, new=OTHER, stamped=0, items=0)


def test_a_move_to_a_third_region_while_one_is_under_way_is_refused(regions: tuple[Region, Region]) -> None:
    first, second = regions
    first.log.shards.grow("k")  # no replication: eu-west-1 never shows the stamped item
    with pytest.raises(HomeHandoverError, match="has not received 1 stamped items"):
        move_home(first.shards, to=OTHER, timeout=0.0)
    assert record(first) == {"partition_key": "#home", "model": "#home", "home": HOME, "moving_to": OTHER}
    with pytest.raises(HomeHandoverError, match="moving from 'us-east-1' to 'eu-west-1' already"):
        move_home(first.shards, to="ap-northeast-1")
    # Meanwhile no region takes a change of the stamped item, nor creates a new key's item.
    first.shards.Meta.home_retry_seconds = 0.3
    with pytest.raises(HomeHandoverError, match="is moving"):
        first.log.shards.shrink("k", 1)
    with pytest.raises(HomeHandoverError, match="is moving"):
        first.log.shards.grow("other")
    assert stored_count(first, "k") == 2
    assert metadata_item(first, "other") is None
    assert metadata_item(second, "k") is None
