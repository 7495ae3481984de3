"""Items built as PynamoDB builds them: patches made after the first read, through async reads,
time-partitioned models, sharded indexes, and subclasses defined after the base was read."""
from __future__ import annotations

from typing import Any
from unittest import mock

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import GlobalSecondaryIndex, KeysOnlyProjection
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding, TimePartitioned
from pynamodb_sharding._model import ShardedMetaModel
from tests.async_loop import Loop
from tests.integration.test_item_building_classes import pair
from tests.integration.test_item_building_patches import body_note, put_raw


def test_async_reads_after_a_default_patch(dynamodb_models: Any, loop: Loop) -> None:
    s, p = pair("B1", body_note)
    dynamodb_models(s, p)
    put_raw(s, p)

    async def aread() -> Any:
        return [i.note async for i in s.aquery("k")], (await s.aget("k", 1)).note
    assert loop.run(aread()) == (["orig", "orig"], "orig")
    with mock.patch.object(s.note, "default", "patched"), mock.patch.object(p.note, "default", "patched"):
        assert [i.note for i in p.query("k")] == ["patched", "patched"]
        assert loop.run(aread()) == (["patched", "patched"], "patched")


def test_time_partitioned_after_a_default_patch(dynamodb_models: Any) -> None:
    now = 1_456_444_800

    class SLog(ShardedModel):
        class Meta:
            table_name = TimePartitioned("building_log.{period}", attribute="at", period="month", clock=lambda: now)
        path = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        note = UnicodeAttribute(null=True, default="orig")
        shards = Sharding(RandomShards(4))

    dynamodb_models(SLog)
    item = SLog("p", now + 1)
    item.save()
    item.update(actions=[SLog.note.remove()])
    assert [i.note for i in SLog.query("p")] == ["orig"]
    with mock.patch.object(SLog.note, "default", "patched"):
        # what PynamoDB builds for the same stored item, without a note stored
        item = next(iter(SLog.query("p")))
        assert type(item) is SLog
        assert item.note == "patched"


def test_sharded_index_keys_only_after_a_default_patch(dynamodb_models: Any) -> None:
    class SByDay(GlobalSecondaryIndex["SIx"]):
        class Meta:
            index_name = "by_day"
            projection = KeysOnlyProjection()
        day = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        shards = Sharding(HashedShards(4, attributes=("pk",)))

    class SIx(ShardedModel):
        class Meta:
            table_name = "building_ix"
        pk = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        day = UnicodeAttribute()
        note = UnicodeAttribute(default="orig")
        by_day = SByDay()
        shards = Sharding(RandomShards(4))

    dynamodb_models(SIx)
    SIx("k", 1, day="d", note="stored").save()
    assert [i.note for i in SIx.by_day.query("d")] == ["orig"]  # keys only: the default
    with mock.patch.object(SIx.note, "default", "patched"):
        assert [i.note for i in SIx.by_day.query("d")] == ["patched"]


def test_subclass_defined_after_the_base_was_read_then_base_attribute_patched(dynamodb_models: Any) -> None:
    sb = ShardedMetaModel("SB5", (ShardedModel,), {"__module__": __name__, **body_note(),
                                                   "Meta": type("Meta", (), {"table_name": "building_b5"}),
                                                   "shards": Sharding(RandomShards(4))})
    pb = type(Model)("PB5", (Model,), {"__module__": __name__, **body_note(),
                                         "Meta": type("Meta", (), {"table_name": "building_pb5"})})
    dynamodb_models(sb, pb)
    put_raw(sb, pb)
    list(sb.query("k"))
    list(pb.query("k"))
    s, p = pair("B5", lambda: {"more": UnicodeAttribute(null=True)}, sharded_bases=(sb,), plain_bases=(pb,))
    dynamodb_models(s, p)
    put_raw(s, p)
    list(s.query("k"))
    list(p.query("k"))
    with mock.patch.object(sb.note, "default", "patched"), mock.patch.object(pb.note, "default", "patched"):
        assert [i.note for i in p.query("k")] == ["patched"] * 2
        assert [i.note for i in pb.query("k")] == ["patched"] * 2
        assert [i.note for i in sb.query("k")] == ["patched"] * 2
        assert [i.note for i in s.query("k")] == ["patched"] * 2
