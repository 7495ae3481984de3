"""A ShardedModel that shards only its hot global index (issue 23, point 7), on DynamoDB Local.

``Sharding(...)`` declared on a ``GlobalSecondaryIndex`` class and not on the model keeps the
table's keys exactly as they are: a plain PynamoDB ``Model`` over the same table (the
application's other code) and the index-only model read each other's items, every operation
on the table sends what the plain model sends (one GetItem for ``get``, one Query for a query,
the same stored keys, conditions, versions, batches, transactions, scans and counts), while the
index's entries are stored sharded (suffixed, or beside a ``day_shard`` attribute) and a query
of the index merges its shards in either direction. A plain model with a plain index on a table
of its own is the reference for index reads.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import DeleteError, PutError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.day_index import day_index
from tests.paging import page_by_page, pages
from tests.raw import index_items, raw_items


class ItemAttributes:
    """The table's attributes, declared once for every model of it (PynamoDB collects a model's
    inherited attributes, from a mixin too)."""

    item_id = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    day = UnicodeAttribute(null=True)
    at = NumberAttribute(null=True)
    payload = UnicodeAttribute(null=True)
    version = VersionAttribute()


class SuffixedMeta:
    table_name = "io_suffixed"


class Item(ItemAttributes, ShardedModel):
    """Shards only its index: no Sharding on the model."""

    Meta = SuffixedMeta
    # The plain model keeps writing bare days meanwhile: the index reads them too.
    by_day = day_index(Sharding(HashedShards(4), legacy_unsharded=True))


class PlainItem(ItemAttributes, Model):
    """The application's plain model of the same table (it shares ``Item``'s Meta, so the test
    binding gives both one table)."""

    Meta = SuffixedMeta


class MultiMeta:
    table_name = "io_multi"


class MultiItem(ItemAttributes, ShardedModel):
    Meta = MultiMeta
    by_day = day_index(Sharding(RandomShards(4), layout="multi_attribute"))


class PlainMultiItem(ItemAttributes, Model):
    Meta = MultiMeta


class RefItem(ItemAttributes, Model):
    """PynamoDB's own behaviour with a plain index, on a table of its own: the index reference."""

    class Meta:
        table_name = "io_reference"

    by_day = day_index()


PAIRS = {"suffixed": (Item, PlainItem), "multi_attribute": (MultiItem, PlainMultiItem)}


@pytest.fixture(params=sorted(PAIRS))
def pair(request: pytest.FixtureRequest, dynamodb_models: BindModels) -> tuple[Any, Any]:
    """The index-only model and the plain model, bound to one table."""
    sharded, plain = PAIRS[request.param]
    dynamodb_models(sharded, plain)
    assert sharded.Meta.table_name == plain.Meta.table_name
    return sharded, plain


def stored(model: type[Model]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every raw item of the table by its stored (hash key, range key)."""
    return {(item["item_id"]["S"], item["sk"]["S"]): item for item in raw_items(model)}


def values(item: Any) -> tuple[Any, ...]:
    return (item.item_id, item.sk, item.day, item.at, item.payload, item.version)


class TestSameTableAsAPlainModel:
    """Written by each model and read by the other: the same stored keys, the same items."""

    def test_written_by_each_read_by_the_other(self, pair: tuple[Any, Any]) -> None:
        sharded, plain = pair
        sharded("s_1", "a", day="20160226", at=1, payload="by sharded").save()
        plain("p_1", "a", day="20160226", at=2, payload="by plain").save()
        raw = stored(plain)
        assert sorted(raw) == [("p_1", "a"), ("s_1", "a")]  # keys exactly as given: no suffix
        assert values(sharded.get("p_1", "a")) == ("p_1", "a", "20160226", 2, "by plain", 1)
        assert values(sharded.get("s_1", "a")) == ("s_1", "a", "20160226", 1, "by sharded", 1)
        from_plain = plain.get("s_1", "a")
        assert (from_plain.item_id, from_plain.payload, from_plain.version) == ("s_1", "by sharded", 1)
        # Each model updates the other's item in place: still one item per key.
        item = sharded.get("p_1", "a")
        item.payload = "changed by sharded"
        item.save()
        other = plain.get("s_1", "a")
        other.payload = "changed by plain"
        other.save()
        raw = stored(plain)
        assert sorted(raw) == [("p_1", "a"), ("s_1", "a")]
        assert raw[("p_1", "a")]["payload"]["S"] == "changed by sharded"
        assert raw[("s_1", "a")]["payload"]["S"] == "changed by plain"
        assert [values(i) for i in sharded.query("p_1")] == [("p_1", "a", "20160226", 2, "changed by sharded", 2)]

    def test_one_request_per_point_read_and_per_query(self, pair: tuple[Any, Any]) -> None:
        sharded, plain = pair
        for n in range(5):
            plain("k", f"r{n}", payload=str(n)).save()
        with record_requests(sharded) as sent:
            sharded.get("k", "r1")
        assert sent.requests == {"GetItem": 1}
        assert sent.bodies("GetItem")[0]["Key"] == {"item_id": {"S": "k"}, "sk": {"S": "r1"}}
        with record_requests(sharded) as sent:
            assert [i.sk for i in sharded.query("k", sharded.sk >= "r2")] == ["r2", "r3", "r4"]
        assert sent.requests == {"Query": 1}
        assert sent.bodies("Query")[0]["ExpressionAttributeValues"][":0"] == {"S": "k"}
        item = sharded("k", "r0")
        with record_requests(sharded) as sent:
            item.refresh()
        assert sent.requests == {"GetItem": 1}
        assert item.payload == "0"

    def test_query_count_and_cursors_are_pynamodbs(self, pair: tuple[Any, Any]) -> None:
        sharded, plain = pair
        for n in range(9):
            plain("k", f"r{n}", payload="odd" if n % 2 else "even").save()
        for forward in (True, False):
            read_s, read_p = (page_by_page(model.query, hash_key="k", filter_condition=model.payload == "even", limit=2,
                                           scan_index_forward=forward) for model in (sharded, plain))
            # Page for page, DynamoDB's own key as the cursor, as PynamoDB returns it.
            assert [[i.sk for i in items] for items, _ in read_s] == [[i.sk for i in items] for items, _ in read_p]
            assert [page.last_evaluated_key for _, page in read_s] == [page.last_evaluated_key for _, page in read_p]
            got = [i.sk for items, _ in read_s for i in items]
            assert got == sorted(["r0", "r2", "r4", "r6", "r8"], reverse=not forward)
        # A plain model's cursor resumes the index-only model's query, and the other way round.
        first = plain.query("k", limit=4)
        list(first)
        assert [i.sk for i in sharded.query("k", last_evaluated_key=first.last_evaluated_key)] == [
            "r4", "r5", "r6", "r7", "r8"]
        assert sharded.count("k") == plain.count("k") == 9
        assert sharded.count("k", sharded.sk < "r3", filter_condition=sharded.payload == "odd") == 1

    def test_conditions_and_versions(self, pair: tuple[Any, Any]) -> None:
        sharded, plain = pair
        plain("c", "1", payload="x").save()
        for model in (sharded, plain):  # the same outcome, whichever model sends it
            with pytest.raises(PutError, match="ConditionalCheckFailed"):
                model("c", "1", payload="y").save(model.item_id.does_not_exist())
            stale = model.get("c", "1")
            fresh = model.get("c", "1")
            fresh.payload = f"fresh by {model.__name__}"
            fresh.save(model.item_id == "c")
            stale.payload = "stale"
            with pytest.raises(PutError, match="ConditionalCheckFailed"):
                stale.save()  # its version is behind
            with pytest.raises(UpdateError, match="ConditionalCheckFailed"):
                fresh.update(actions=[model.payload.set("no")], condition=model.item_id != "c")
            fresh.update(actions=[model.payload.set(f"updated by {model.__name__}")],
                         condition=model.item_id.is_in("c", "d"))
        item = stored(plain)[("c", "1")]
        assert (item["payload"]["S"], item["version"]["N"]) == (f"updated by {plain.__name__}", "5")
        doomed = sharded.get("c", "1")
        with pytest.raises(DeleteError, match="ConditionalCheckFailed"):
            doomed.delete(sharded.payload == "other")
        doomed.delete(sharded.item_id.startswith("c"))
        assert stored(plain) == {}

    def test_batches_transactions_scan_and_count(self, pair: tuple[Any, Any]) -> None:
        sharded, plain = pair
        with sharded.batch_write() as batch:
            for n in range(30):
                batch.save(sharded(f"b_{n % 3}", f"{n:02d}", payload=str(n)))
        with plain.batch_write() as batch:
            for n in range(30, 40):
                batch.save(plain(f"b_{n % 3}", f"{n:02d}", payload=str(n)))
        with sharded.batch_write() as batch:
            batch.delete(sharded("b_0", "00"))
            batch.delete(plain_written := sharded("b_1", "31"))
        assert plain_written.item_id == "b_1"
        keys = [(f"b_{n % 3}", f"{n:02d}") for n in range(40)]
        assert sorted(stored(plain)) == sorted(set(keys) - {("b_0", "00"), ("b_1", "31")})
        got = sorted((i.item_id, i.sk, i.payload) for i in sharded.batch_get(keys))
        expected = sorted((i.item_id, i.sk, i.payload) for i in plain.batch_get(keys))
        assert got == expected
        assert len(got) == 38

        connection = sharded._get_connection().connection
        with TransactWrite(connection=connection) as transaction:
            transaction.save(sharded("t", "1", payload="new"))
            transaction.update(sharded("b_2", "02"), actions=[sharded.payload.set("in a transaction")])
            transaction.delete(sharded("b_2", "05"))
            transaction.condition_check(sharded, "b_1", "01", condition=sharded.payload == "1")
        with TransactGet(connection=connection) as reads:
            read_t = reads.get(sharded, "t", "1")
            read_b = reads.get(sharded, "b_2", "02")
        assert (read_t.get().payload, read_b.get().payload) == ("new", "in a transaction")
        raw = stored(plain)
        assert raw[("t", "1")]["payload"]["S"] == "new"
        assert ("b_2", "05") not in raw

        scanned = sorted((i.item_id, i.sk, i.payload) for i in sharded.scan())
        assert scanned == sorted((i.item_id, i.sk, i.payload) for i in plain.scan())
        assert len(scanned) == 38
        assert [i.sk for i in sharded.scan(sharded.item_id == "t")] == ["1"]
        assert sharded.count("b_1") == plain.count("b_1") == 12
        assert sharded.count("b_1", filter_condition=sharded.payload.startswith("3")) == 2  # 34, 37
        assert plain.count("b_1", filter_condition=plain.payload.startswith("3")) == 2


class TestShardedIndex:
    """The index entries are stored sharded; a query of the index is merged over its shards."""

    def test_entries_stored_sharded_and_queries_merged(self, pair: tuple[Any, Any],
                                                       dynamodb_models: BindModels) -> None:
        sharded, _ = pair
        dynamodb_models(RefItem)
        with sharded.batch_write() as batch, RefItem.batch_write() as reference:
            for n in range(60):
                fields = {"day": "20160226" if n % 5 else "20160227", "at": 1000 + n, "payload": str(n % 3)}
                batch.save(sharded(f"f_{n % 7}", f"{n:03d}", **fields))
                reference.save(RefItem(f"f_{n % 7}", f"{n:03d}", **fields))
        entries = index_items(sharded)
        assert len(entries) == 60
        if sharded is Item:
            shards = {entry["day"]["S"].rpartition("_")[2] for entry in entries}
            assert shards == {"1", "2", "3", "4"}
            assert {entry["day"]["S"].rpartition("_")[0] for entry in entries} == {"20160226", "20160227"}
        else:
            assert {entry["day"]["S"] for entry in entries} == {"20160226", "20160227"}
            assert {entry["day_shard"]["N"] for entry in entries} == {"1", "2", "3", "4"}
        for forward in (True, False):
            for limit in (1, 7, 50):
                got = pages(partial(sharded.by_day.query, "20160226", scan_index_forward=forward), limit=limit)
                expected = pages(partial(RefItem.by_day.query, "20160226", scan_index_forward=forward), limit=limit)
                assert [values(i) for i in got] == [values(i) for i in expected]
                assert len(got) == 48
        filtered = list(sharded.by_day.query("20160226", sharded.at.between(1010, 1030),
                                             filter_condition=sharded.payload == "1"))
        assert [i.at for i in filtered] == [i.at for i in RefItem.by_day.query(
            "20160226", RefItem.at.between(1010, 1030), filter_condition=RefItem.payload == "1")]
        assert sharded.by_day.count("20160227") == RefItem.by_day.count("20160227") == 12
        assert {i.day for i in sharded.scan()} == {"20160226", "20160227"}  # the logical values
