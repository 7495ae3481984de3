"""Adopting a populated hot index with ``layout="multi_attribute"`` (issue 23, point 6).

An existing global index's key schema cannot change, so the path is: declare a new index
``(day, day_shard)`` with ``legacy_unsharded=True`` beside the old plain one, create it with
``UpdateTable``, backfill ``day_shard`` with ``migrate reindex``, drop the flag and query the new
index, drop the old one. Proves on DynamoDB Local: while the backfill is pending, a query of the
new index is refused before anything is sent (``IndexNotReadyError`` naming the index and the
job); writes through the model set ``day_shard`` at once; the backfill sets it on every item
that has a ``day`` once, and nothing else; afterwards the new index returns what the old plain
index returns, both directions, resumed from every page; and the half-built states (index
missing, not ACTIVE, keyed without the shard attribute) raise ``IndexNotReadyError`` saying
what to do, not DynamoDB's ``ValidationException``.
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, IndexNotReadyError, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._host import reset_connection
from pynamodb_sharding.migration import JobOptions, reindex
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.day_index import day_index
from tests.paging import pages
from tests.raw import raw_client, raw_items

DAY = "20160226"


class VisitAttributes:
    """The table's attributes, declared once for every model of it (PynamoDB collects a model's
    inherited attributes, from a mixin too)."""

    visit_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute(null=True)
    at = NumberAttribute(null=True)
    user_id = UnicodeAttribute(null=True)


class PlainVisit(VisitAttributes, Model):
    """The application before: its plain index ``by_day``."""

    class Meta:
        table_name = "adopt_multi_visits"

    by_day = day_index()


class Visit(VisitAttributes, ShardedModel):
    """Step 1: the new index declared beside the old one, its backfill pending."""

    Meta = PlainVisit.Meta
    by_day = day_index()
    by_day_sharded = day_index(Sharding(HashedShards(4, attributes=("user_id",)), layout="multi_attribute",
                                        legacy_unsharded=True), name="by_day_sharded")


class VisitDone(VisitAttributes, ShardedModel):
    """Step 4: the backfill done, the flag removed."""

    Meta = PlainVisit.Meta
    by_day = day_index()
    by_day_sharded = day_index(Sharding(HashedShards(4, attributes=("user_id",)), layout="multi_attribute"),
                               name="by_day_sharded")


class Misdeclared(VisitAttributes, ShardedModel):
    Meta = PlainVisit.Meta
    # The old index's name: its key schema has no day_shard.
    by_day = day_index(Sharding(RandomShards(4), layout="multi_attribute"))


SHARDED_INDEX = {
    "IndexName": "by_day_sharded",
    "KeySchema": [{"AttributeName": "day", "KeyType": "HASH"}, {"AttributeName": "day_shard", "KeyType": "HASH"},
                  {"AttributeName": "at", "KeyType": "RANGE"}],
    "Projection": {"ProjectionType": "ALL"},
}


def create_new_index(model: type[Model]) -> None:
    """Step 2, as the docs show it: UpdateTable creates the index, with its shard attribute."""
    client = raw_client(model)
    client.update_table(
        TableName=model.Meta.table_name,
        AttributeDefinitions=[{"AttributeName": "day", "AttributeType": "S"},
                              {"AttributeName": "day_shard", "AttributeType": "N"},
                              {"AttributeName": "at", "AttributeType": "N"}],
        GlobalSecondaryIndexUpdates=[{"Create": SHARDED_INDEX}],
    )
    for _ in range(300):  # DynamoDB (Local too) builds the index in the background
        indexes = client.describe_table(TableName=model.Meta.table_name)["Table"]["GlobalSecondaryIndexes"]
        if {index["IndexName"]: index["IndexStatus"] for index in indexes}["by_day_sharded"] == "ACTIVE":
            return
        time.sleep(0.1)
    raise AssertionError("the new index never became ACTIVE")


@pytest.fixture
def visits(dynamodb_models: BindModels) -> None:
    dynamodb_models(PlainVisit)  # the table as the application created it: the old index only
    # The other classes share PlainVisit's Meta, so binding PlainVisit points them at the test table
    # too. Binding them would create the new index with the table (they declare it), and refuse
    # Misdeclared, rightly: its index is declared over 'by_day' on purpose, unlike the table's.
    # Their connections are dropped so that each is built from the bound Meta.
    for model in (Visit, VisitDone, Misdeclared):
        reset_connection(model)
    with PlainVisit.batch_write() as batch:
        for n in range(120):
            batch.save(PlainVisit(f"v{n:03d}", day=DAY if n % 4 else "20160227", at=1000 + n, user_id=f"u{n % 9}"))
    PlainVisit("no-day", user_id="u1").save()


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    return JobOptions(total_segments=2, page_size=30, checkpoint_table=checkpoint_table)



def fields(item: Any) -> tuple[Any, ...]:
    return (item.visit_id, item.day, item.at, item.user_id)


class TestThePath:
    """New index, backfill, switch: every step on a populated table."""

    def test_new_index_backfilled_then_queried(self, visits: None, options: JobOptions) -> None:
        # Step 1: the backfill is pending, so a query would miss the old items: refused.
        with record_requests(Visit) as sent, pytest.raises(IndexNotReadyError) as refused:
            list(Visit.by_day_sharded.query(DAY))
        assert sent.requests == {}
        message = str(refused.value)
        assert "Visit.day: the index 'by_day_sharded'" in message
        assert "migrate reindex MODULE:Visit by_day_sharded" in message
        assert "legacy_unsharded" in message
        with pytest.raises(IndexNotReadyError):
            Visit.by_day_sharded.count(DAY)
        assert isinstance(refused.value, QueryError)  # PynamoDB's error for a refused query too
        # Writes set day_shard at once; reads of the old index and the table go on.
        Visit("new", day=DAY, at=5000, user_id="u2").save()
        item = Visit.get("v001")
        item.user_id = "u3"
        item.save()
        raw = {entry["visit_id"]["S"]: entry for entry in raw_items(Visit)}
        assert 1 <= int(raw["new"]["day_shard"]["N"]) <= 4
        assert raw["new"]["day"] == {"S": DAY}
        assert "day_shard" in raw["v001"]
        assert "day_shard" not in raw["v002"]
        assert [v.at for v in Visit.by_day.query(DAY, limit=3)] == [1001, 1002, 1003]

        # Step 2: create the index; step 3: backfill day_shard.
        create_new_index(Visit)
        before = {key: entry for key, entry in raw.items()}
        report = reindex(Visit, "by_day_sharded", options)
        assert (report.tally.written, report.complete) == (119, True)  # 122 items: 2 set, 1 without day
        after = {entry["visit_id"]["S"]: entry for entry in raw_items(Visit)}
        assert after.keys() == before.keys()
        for key, entry in after.items():
            if "day" not in entry:
                assert entry == before[key]
                continue
            assert {**entry, "day_shard": None} == {**before[key], "day_shard": None}
            assert 1 <= int(entry["day_shard"]["N"]) <= 4
            if key in ("new", "v001"):
                assert entry["day_shard"] == before[key]["day_shard"]  # set by the model: kept

        # Step 4: the flag removed, the new index answers what the old one answers.
        for day in (DAY, "20160227"):
            for forward in (True, False):
                for limit in (1, 7, None):
                    got = pages(partial(VisitDone.by_day_sharded.query, day, scan_index_forward=forward), limit=limit)
                    expected = list(VisitDone.by_day.query(day, scan_index_forward=forward))
                    assert list(map(fields, got)) == list(map(fields, expected))
        assert VisitDone.by_day_sharded.count(DAY) == VisitDone.by_day.count(DAY) == 91


class TestHalfBuiltStates:
    """Queries DynamoDB cannot answer yet say why, not DynamoDB's ValidationException."""

    def test_index_not_created_yet(self, visits: None) -> None:
        with pytest.raises(IndexNotReadyError) as refused:
            list(VisitDone.by_day_sharded.query(DAY))
        message = str(refused.value)
        assert "has no index 'by_day_sharded' yet" in message
        assert "[day HASH, day_shard HASH, at RANGE]" in message
        assert refused.value.cause_response_code == "ValidationException"

    def test_index_not_active(self, visits: None) -> None:
        create_new_index(VisitDone)
        client = VisitDone._get_connection().connection.client

        def building(parsed: dict[str, Any], **_: Any) -> None:  # DynamoDB Local builds at once
            for index in parsed.get("Table", {}).get("GlobalSecondaryIndexes", []):
                if index["IndexName"] == "by_day_sharded":
                    index["IndexStatus"] = "CREATING"

        def backfilling(request: Any, **_: Any) -> Any:
            from tests.faults import error_response

            if json.loads(request.body).get("IndexName") != "by_day_sharded":
                return None
            return error_response(request.url, 400, "ValidationException",
                                  "Cannot read from backfilling global secondary index: by_day_sharded")

        client.meta.events.register("after-call.dynamodb.DescribeTable", building, unique_id="building")
        client.meta.events.register_first("before-send.dynamodb.Query", backfilling, unique_id="backfilling")
        try:
            with pytest.raises(IndexNotReadyError, match=r"'by_day_sharded' is CREATING .*ACTIVE"):
                list(VisitDone.by_day_sharded.query(DAY))
        finally:
            client.meta.events.unregister("after-call.dynamodb.DescribeTable", unique_id="building")
            client.meta.events.unregister("before-send.dynamodb.Query", unique_id="backfilling")

    def test_index_keyed_without_the_shard_attribute(self, visits: None) -> None:
        with pytest.raises(IndexNotReadyError) as refused:
            list(Misdeclared.by_day.query(DAY))
        message = str(refused.value)
        assert "keyed on [day HASH, at RANGE], without 'day_shard'" in message
        assert "key schema cannot change" in message
