"""Global tables: seed 003's write modes for item writes, on two DynamoDB Local servers.

us-east-1 (the home region of the shard counts) and eu-west-1, with the Replicator between
them paused where a test needs a lag. Proves, on the raw item tables of both regions:

- **write to one region** (``Meta.write_region``): a conditional update made in eu-west-1 on
  an item it read from its lagging replica is checked in us-east-1, against the latest data,
  and fails there as it would on one table (a plain model's second update is the reference);
  without ``write_region`` (the negative control) both regions' updates succeed and
  replication keeps only one. Saves, batches and transactions (``write_connection``) land in
  us-east-1; with ``local_inserts`` an unconditional insert stays in eu-west-1 and every other
  write goes to us-east-1;
- **write to your region** (``Meta.item_home``): every write of an item goes to the region it
  names, spread over the shard count *that* region's replica shows, so its readers there find
  every item at once; an item without a home is refused before anything is written;
- declarations that cannot be followed are refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import (
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
    WriteRegionError,
    write_connection,
)
from pynamodb_sharding.testing import DynamoDBLocal
from tests.regions import (
    HOME,
    KEY_ID,
    OTHER,
    SECRET,
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


def two_regions(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal, **log_meta: Any) -> tuple[Region, Region]:
    tables = table_prefix()
    home = {"home_region": HOME, "home_host": dynamodb_local.endpoint}
    hosts = {"region_hosts": {HOME: dynamodb_local.endpoint, OTHER: second_server.endpoint}}
    first = make_region(HOME, dynamodb_local.endpoint, tables, log_meta={**hosts, **log_meta}, **home)
    second = make_region(OTHER, second_server.endpoint, tables, log_meta={**hosts, **log_meta}, **home)
    create_tables(first, second)
    return first, second


@pytest.fixture
def one_region(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region]]:
    """Both regions write to us-east-1."""
    regions = two_regions(dynamodb_local, second_server, write_region=HOME)
    yield regions
    drop_tables(*regions)


@pytest.fixture
def any_region(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region]]:
    """No write mode declared: each region writes to its own replica (the negative control)."""
    regions = two_regions(dynamodb_local, second_server)
    yield regions
    drop_tables(*regions)


def notes(region: Region) -> dict[float, str | None]:
    items = region.client().scan(TableName=region.log.Meta.table_name, ConsistentRead=True)["Items"]
    return {float(item["at"]["N"]): item.get("note", {}).get("S") for item in items}


def plain_second_update_fails(endpoint: str) -> str | None:
    """The reference: on one table, the second of two updates conditioned on the same old
    value fails; returns its error code."""
    table = f"plain_{uuid.uuid4().hex[:8]}"
    plain = type("PlainLog", (Model,), {
        "Meta": type("Meta", (), {"table_name": table, "host": endpoint, "region": HOME,
                                  "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET}),
        "__module__": __name__, "key": UnicodeAttribute(hash_key=True), "at": NumberAttribute(range_key=True),
        "note": UnicodeAttribute(null=True),
    })
    plain.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    try:
        plain(key="k", at=1.0, note="draft").save()
        first, second = plain.get("k", 1.0), plain.get("k", 1.0)
        first.update(actions=[plain.note.set("us")], condition=plain.note == "draft")
        try:
            second.update(actions=[plain.note.set("eu")], condition=plain.note == "draft")
        except UpdateError as exc:
            return exc.cause_response_code
        return None
    finally:
        plain.delete_table()


class TestWriteToOneRegion:
    """Meta.write_region: conditional writes are checked where the latest data is."""

    @staticmethod
    def update_in_both_regions(first: Region, second: Region) -> tuple[tuple[Any, Any], int, str | None]:
        """us-east-1 and eu-west-1 each update the item from "draft", replication paused; the
        raw notes of both regions before replication resumes, the overwrites, and eu-west-1's
        error code."""
        with replicator(first, second) as replication:
            first.log(key="k", at=1.0, note="draft").save()
            replication.settle()
            replication.pause()
            us = first.log.get("k", 1.0)
            eu = second.log.get("k", 1.0)  # read from eu-west-1's replica
            us.update(actions=[first.log.note.set("us")], condition=first.log.note == "draft")
            code = None
            try:
                eu.update(actions=[second.log.note.set("eu")], condition=second.log.note == "draft")
            except UpdateError as exc:
                code = exc.cause_response_code
            raw = (notes(first), notes(second))
            replication.resume()
            replication.settle()
        return raw, replication.overwritten, code

    def test_a_conditional_update_is_checked_in_the_write_region(
        self, one_region: tuple[Region, Region], dynamodb_local: DynamoDBLocal,
    ) -> None:
        first, second = one_region
        raw, overwritten, code = self.update_in_both_regions(first, second)
        assert code == plain_second_update_fails(dynamodb_local.endpoint) == "ConditionalCheckFailedException"
        assert raw == ({1.0: "us"}, {1.0: "draft"})  # nothing written in eu-west-1
        assert overwritten == 0
        assert notes(first) == notes(second) == {1.0: "us"}

    def test_without_a_write_region_both_updates_succeed_and_one_is_lost(
        self, any_region: tuple[Region, Region],
    ) -> None:
        first, second = any_region
        raw, overwritten, code = self.update_in_both_regions(first, second)
        assert code is None  # eu-west-1's condition held in its own replica
        assert raw == ({1.0: "us"}, {1.0: "eu"})
        assert overwritten == 1  # last writer wins: one region's update is gone
        assert notes(first) == notes(second)

    def test_saves_batches_and_transactions_land_in_the_write_region(self, one_region: tuple[Region, Region]) -> None:
        first, second = one_region
        log = second.log  # an eu-west-1 process
        log(key="k", at=1.0).save()
        with log.batch_write() as batch:
            for at in (2.0, 3.0):
                batch.save(log(key="k", at=at))
        with TransactWrite(connection=write_connection(log)) as transaction:
            transaction.save(log(key="k", at=4.0), condition=log.key.does_not_exist())
        assert [at for _, at in raw_log(first)] == [1.0, 2.0, 3.0, 4.0]
        assert raw_log(second) == []  # nothing in eu-west-1 until replication
        assert sorted(float(item.at) for item in first.log.query("k")) == [1.0, 2.0, 3.0, 4.0]
        first.log.get("k", 4.0).delete()
        assert [at for _, at in raw_log(first)] == [1.0, 2.0, 3.0]

    def test_local_inserts_stay_here_and_every_other_write_goes_there(
        self, dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal,
    ) -> None:
        first, second = two_regions(dynamodb_local, second_server, write_region=HOME, local_inserts=True)
        try:
            log = second.log
            log(key="k", at=1.0, note="new").save()  # an insert: eu-west-1
            log(key="k", at=2.0).save(condition=log.key.does_not_exist())  # conditional: us-east-1
            assert raw_log(second) == [("k_1", 1.0)]
            assert [at for _, at in raw_log(first)] == [2.0]
            item = log.get("k", 1.0)
            item.note = "read, then saved"  # an overwrite of a stored item: us-east-1
            item.save()
            assert notes(first) == {1.0: "read, then saved", 2.0: None}
            assert notes(second) == {1.0: "new"}
        finally:
            drop_tables(first, second)

    def test_a_write_spreads_over_the_count_the_write_region_shows(self, one_region: tuple[Region, Region]) -> None:
        """eu-west-1's replica of the metadata lags (2 shards; us-east-1 holds 4): its writes,
        sent to us-east-1, spread over the 4 shards readers there read."""
        first, second = one_region
        with replicator(first, second) as replication:
            first.log.shards.grow("hot")
            replication.settle()
            replication.pause()
            first.log.shards.grow("hot")
            assert (stored_count(first, "hot"), stored_count(second, "hot")) == (4, 2)
            written = write_items(second, "hot", 0.0, 40)
            assert {physical for physical, _ in raw_log(first)} == {"hot_1", "hot_2", "hot_3", "hot_4"}
            assert fresh_query(first, "hot") == written
            replication.resume()
            replication.settle()
        assert fresh_query(second, "hot") == written


class TestWriteToYourRegion:
    """Meta.item_home: each item's writes go to the region it names."""

    @pytest.fixture
    def homed(self, dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Region, Region]]:
        regions = two_regions(dynamodb_local, second_server, item_home=lambda item: item.place)
        yield regions
        drop_tables(*regions)

    def test_every_write_of_an_item_goes_to_its_home(self, homed: tuple[Region, Region]) -> None:
        first, second = homed
        log = first.log  # a us-east-1 process
        log(key="k", at=1.0, place=OTHER).save()
        log(key="k", at=2.0, place=HOME).save()
        assert raw_log(second) == [("k_1", 1.0)]
        assert raw_log(first) == [("k_1", 2.0)]
        stored = second.log.get("k", 1.0)  # read in its home region
        stored.update(actions=[second.log.note.set("updated")], condition=second.log.note.does_not_exist())
        assert notes(second) == {1.0: "updated"}
        assert notes(first) == {2.0: None}

    def test_items_spread_over_the_count_their_home_region_shows(self, homed: tuple[Region, Region]) -> None:
        """us-east-1 holds 4 shards, eu-west-1's replica 2: items homed in eu-west-1, written by
        a us-east-1 process, use shards 1-2 only, so an eu-west-1 reader finds every one."""
        first, second = homed
        with replicator(first, second) as replication:
            first.log.shards.grow("hot")
            replication.settle()
            replication.pause()
            first.log.shards.grow("hot")
            assert (stored_count(first, "hot"), stored_count(second, "hot")) == (4, 2)
            written = [float(at) for at in range(40)]
            for at in written:
                first.log(key="hot", at=at, place=OTHER).save()
            assert {physical for physical, _ in raw_log(second)} <= {"hot_1", "hot_2"}
            assert raw_log(first) == []
            assert fresh_query(second, "hot") == written
            replication.resume()
            replication.settle()
        assert fresh_query(first, "hot") == written

    def test_an_item_without_a_home_is_refused_before_writing(self, homed: tuple[Region, Region]) -> None:
        first, second = homed
        with pytest.raises(WriteRegionError, match=r"Log_us-east-1\.Meta\.item_home gave None") as refused:
            first.log(key="k", at=1.0).save()
        assert "home region" in str(refused.value)
        assert raw_log(first) == raw_log(second) == []


@pytest.mark.parametrize(("meta", "message"), [
    ({"write_region": HOME, "item_home": lambda item: HOME}, "declares both write_region"),
    ({"write_region": ""}, "name the region that takes the writes"),
    ({"item_home": "eu-west-1"}, "give a function of the item"),
    ({"local_inserts": True}, "without write_region"),
    ({"write_region": HOME, "local_inserts": "yes"}, "expected True or False"),
    ({"write_region": HOME, "region_hosts": ["us-east-1"]}, "expected a mapping of region names"),
])
def test_write_modes_that_cannot_be_followed_are_refused(meta: dict[str, Any], message: str) -> None:
    with pytest.raises(ShardingDefinitionError, match=r"BadLog\.Meta") as refused:
        type("BadLog", (ShardedModel,), {
            "Meta": type("Meta", (), {"table_name": "bad_log", **meta}), "__module__": __name__,
            "key": UnicodeAttribute(hash_key=True), "shards": Sharding(RandomShards(2)),
        })
    assert message in str(refused.value)
