"""Sharded global secondary indexes, what only the suffixed layout does (DynamoDB Local).

The suffixed layout stores the index's attribute as ``<day>_<shard>``: a query of one day asks
for one physical value per index shard, a condition comparing the attribute with a value is
rewritten to physical values exactly or refused before sending (an order comparison has no
exact rewrite), and ``first_shard=0`` numbers the values from 0. What every layout does is in
``test_sharded_index.py``.
"""

from __future__ import annotations

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import DerivedAttributeUpdateError, HashedShards, ShardConditionError, ShardedModel, Sharding
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.day_index import day_index
from tests.index_layouts import AuditLog
from tests.raw import index_items, raw_items


@pytest.fixture
def bound(dynamodb_models: BindModels) -> None:
    dynamodb_models(AuditLog)


def test_queries_one_physical_value_per_index_shard(bound: None) -> None:
    AuditLog("/other", 5, user_id="u1", day="20160227").save()
    with record_requests(AuditLog) as sent:
        assert [i.file_path for i in AuditLog.by_day.query("20160227")] == ["/other"]
    values = sorted(body["ExpressionAttributeValues"][":0"]["S"] for body in sent.bodies("Query"))
    assert values == [f"20160227_{shard}" for shard in range(1, 9)]


def test_update_copying_the_index_value_refused_before_sending(bound: None) -> None:
    """The stored value is the physical one: a copy of it into another attribute would be too."""
    item = AuditLog("/u", 1, user_id="u1", day="20160226")
    item.save()
    with record_requests(AuditLog) as sent, pytest.raises(DerivedAttributeUpdateError, match="save"):
        item.update(actions=[AuditLog.note.set(AuditLog.day)])
    assert sent.requests == {}
    assert [i.user_id for i in AuditLog.by_day.query("20160226")] == ["u1"]


class TestInexactConditions:
    """A comparison with no exact rewrite to physical values is refused before sending."""

    def test_inexact_comparison_refused_before_sending(self, bound: None) -> None:
        with record_requests(AuditLog) as sent, pytest.raises(ShardConditionError, match=r"AuditLog\.day"):
            list(AuditLog.scan(AuditLog.day > "2016"))
        with pytest.raises(ShardConditionError, match=r"AuditLog\.day"):
            AuditLog("/x", 1, user_id="u", day="d").save(condition=AuditLog.day < "e")
        assert sent.requests == {}

    def test_refusals_name_the_index_and_its_query(self, bound: None) -> None:
        """Not "the sharded hash key" and ``AuditLog.query``: the index and ``AuditLog.by_day.query``."""
        with record_requests(AuditLog) as sent:
            with pytest.raises(ShardConditionError, match=r"uses < on the sharded hash key of index 'by_day', which "
                               r"DynamoDB stores as '<value>_<shard>' in the index"):
                AuditLog("/x", 1, user_id="u", day="d").save(condition=AuditLog.day < "e")
            days = [f"201602{n:02}" for n in range(13)]  # 8 index shards each: 104 values
            with pytest.raises(ShardConditionError, match=r"IN of 104 physical keys, .* or query each value with "
                               r"AuditLog\.by_day\.query\."):
                list(AuditLog.query("/x", filter_condition=AuditLog.day.is_in(*days)))
        assert sent.requests == {}
        assert raw_items(AuditLog) == []


class ZeroLog(ShardedModel):
    class Meta:
        table_name = "gsi_zero_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    by_day = day_index(Sharding(HashedShards(4), first_shard=0), sort_key="accessed_at")
    shards = Sharding(HashedShards(2))


def test_first_shard_zero_on_an_index(dynamodb_models: BindModels) -> None:
    """An index declared with first_shard=0 stores day_0 .. day_3 and reads them all back."""
    dynamodb_models(ZeroLog)
    with ZeroLog.batch_write() as batch:
        for n in range(40):
            batch.save(ZeroLog(f"/z/{n}", n, day="20160226"))
    values = {entry["day"]["S"] for entry in index_items(ZeroLog)}
    assert values == {f"20160226_{shard}" for shard in range(4)}
    assert ZeroLog.by_day.shards.read_shards("20160226") == (0, 1, 2, 3)
    assert [i.accessed_at for i in ZeroLog.by_day.query("20160226")] == list(range(40))
    assert {i.day for i in ZeroLog.scan()} == {"20160226"}
