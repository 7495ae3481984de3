"""A loaded item whose key, or an attribute its shard is derived from, changes.

Proves: changing the hash or range key of a loaded item and saving it writes a new item where
the strategy puts the new key (readable by get/query of the new key), and leaves the old item,
exactly as a plain PynamoDB model does; changing an attribute ``HashedShards(attributes=...)``
derives the shard from moves the item (one transaction: no second copy, version and condition
checked on the stored copy); ``update`` of such an attribute, and ``delete``/``refresh``/batch
writes of an item whose derived attribute changed, are refused before sending.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import PutError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingError,
    ShardMetadata,
)
from pynamodb_sharding._strategies import md5_shard
from pynamodb_sharding.testing import record_requests
from tests.raw import put_raw, raw_items

Bind = Callable[..., Any]


class KeyChangeShards(ShardMetadata):
    class Meta:
        table_name = "key_change_shards"


class RandomLog(ShardedModel):
    class Meta:
        table_name = "key_change_random"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(8))


class HashedLog(ShardedModel):
    class Meta:
        table_name = "key_change_hashed"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(8))


class DynamicLog(ShardedModel):
    class Meta:
        table_name = "key_change_dynamic"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    shards = Sharding(DynamicShards(KeyChangeShards, max_shards=8))


class PlainLog(Model):
    """The reference: PynamoDB on an unsharded table."""

    class Meta:
        table_name = "key_change_plain"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)


class ByUser(ShardedModel):
    class Meta:
        table_name = "key_change_by_user"
        max_pool_connections = 16

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    body = UnicodeAttribute(null=True)
    version = VersionAttribute()
    shards = Sharding(HashedShards(16, attributes=("user_id",)))


def _stored(model: type[Model]) -> list[tuple[str, str]]:
    """``(physical hash key, range key)`` of every stored item, sorted."""
    return sorted((raw["pk"]["S"], raw["sk"]["N"]) for raw in raw_items(model))


def _logical(model: type[ShardedModel], stored: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted((model.shards.logical_key(pk), sk) for pk, sk in stored)


@pytest.mark.parametrize("model", [RandomLog, HashedLog, DynamicLog], ids=lambda m: m.__name__)
@pytest.mark.parametrize("change", ["hash key", "range key"])
def test_changed_key_saves_a_new_item_where_its_key_is_read(
    dynamodb_models: Bind, model: type[ShardedModel], change: str,
) -> None:
    dynamodb_models(model, PlainLog)
    if model is DynamicLog:
        model.shards.grow("hot")
        model.shards.grow("hot")
        model.shards.grow("hot")  # "hot" has 8 shards, "cold" has 1
    for cls in (model, PlainLog):
        for n in range(12):
            cls("hot", n, body="original").save()
    for cls in (model, PlainLog):
        item = next(iter(cls.query("hot", cls.sk == 7)))
        if change == "hash key":
            item.pk = "cold"
        else:
            item.sk = 700
        item.body = "changed"
        item.save()

    new_key = ("cold", 7) if change == "hash key" else ("hot", 700)
    got = model.get(*new_key)
    assert ("changed", new_key) == (got.body, (got.pk, got.sk))
    assert got.shards in model.shards.read_shards(new_key[0])
    assert [new_key] == [(i.pk, i.sk) for i in model.query(new_key[0], model.sk == new_key[1])]
    # The old item stays, as it does in PynamoDB: both tables hold the same logical items.
    plain = sorted((raw["pk"]["S"], raw["sk"]["N"]) for raw in raw_items(PlainLog))
    assert plain == _logical(model, _stored(model))
    assert "original" == model.get("hot", 7).body


def test_new_item_written_after_key_change_goes_to_the_hashed_shard(dynamodb_models: Bind) -> None:
    """With HashedShards, the new key's copy is in the shard ``get`` of the new key reads."""
    dynamodb_models(HashedLog)
    HashedLog("a", 1).save()
    item = HashedLog.get("a", 1)
    item.pk = "b"
    item.save()
    expected = HashedLog.shards.write_shard(HashedLog("b", 1))
    assert ("b_" + str(expected), "1") in _stored(HashedLog)
    assert "b" == HashedLog.get("b", 1).pk


class TestDerivedAttributeChange:
    """HashedShards(attributes=("user_id",)): a changed user_id moves the item, never copies it."""

    def test_save_moves_the_item(self, dynamodb_models: Bind) -> None:
        dynamodb_models(ByUser)
        ByUser("k", 1, user_id="alice", body="v1").save()
        item = ByUser.get("k", 1)
        old_shard = item.shards
        item.user_id = "bob"
        assert item.shards is None  # the remembered shard no longer holds for these values
        item.body = "v2"
        with record_requests(ByUser) as recorder:
            item.save()
        assert ["TransactWriteItems"] == list(recorder.requests)
        stored = _stored(ByUser)
        assert 1 == len(stored)
        new_shard = ByUser.shards.decode(stored[0][0])[1]
        assert new_shard != old_shard
        assert new_shard == item.shards
        got = ByUser.get("k", 1)
        assert ("bob", "v2", 2) == (got.user_id, got.body, got.version)
        assert [("k", 1)] == [(i.pk, i.sk) for i in ByUser.query("k")]

    def test_stale_version_refused_like_plain_pynamodb(self, dynamodb_models: Bind) -> None:
        dynamodb_models(ByUser)
        ByUser("k", 1, user_id="alice", body="v1").save()
        stale = ByUser.get("k", 1)
        fresh = ByUser.get("k", 1)
        fresh.body = "other writer"
        fresh.save()
        stale.user_id = "bob"
        with pytest.raises(PutError) as raised:
            stale.save()
        assert "ConditionalCheckFailedException" == raised.value.cause_response_code
        assert [("other writer", "alice")] == [(i.body, i.user_id) for i in ByUser.query("k")]
        assert 1 == len(raw_items(ByUser))
        stale.user_id = "alice"  # back to the values it was read with: its shard holds again
        assert stale.shards is not None

    def test_condition_applies_to_the_stored_copy(self, dynamodb_models: Bind) -> None:
        dynamodb_models(ByUser)
        ByUser("k", 1, user_id="alice", body="v1").save()
        item = ByUser.get("k", 1)
        item.user_id = "bob"
        with pytest.raises(PutError):
            item.save(condition=ByUser.body == "not v1")
        assert [("alice", "v1")] == [(i.user_id, i.body) for i in ByUser.query("k")]
        item.save(condition=ByUser.body == "v1")
        assert [("bob", "v1")] == [(i.user_id, i.body) for i in ByUser.query("k")]

    def test_update_of_a_derived_attribute_is_refused_before_sending(self, dynamodb_models: Bind) -> None:
        dynamodb_models(ByUser)
        ByUser("k", 1, user_id="alice").save()
        item = ByUser.get("k", 1)
        with record_requests(ByUser) as recorder, pytest.raises(ShardingError) as raised:
            item.update(actions=[ByUser.user_id.set("bob")])
        assert {} == dict(recorder.requests)
        assert "ByUser.user_id" in str(raised.value)
        assert "save()" in str(raised.value)
        assert [("k", 1, "alice")] == [(i.pk, i.sk, i.user_id) for i in ByUser.query("k")]
        item.update(actions=[ByUser.body.set("other attributes update in place")])
        assert "other attributes update in place" == ByUser.get("k", 1).body

    @pytest.mark.parametrize("action", ["delete", "refresh", "batch"])
    def test_in_place_requests_refused_after_a_derived_change(self, dynamodb_models: Bind, action: str) -> None:
        dynamodb_models(ByUser)
        ByUser("k", 1, user_id="alice").save()
        item = ByUser.get("k", 1)
        item.user_id = "bob"
        with record_requests(ByUser) as recorder, pytest.raises(ShardingError, match="save"):
            if action == "delete":
                item.delete()
            elif action == "refresh":
                item.refresh()
            else:
                with ByUser.batch_write() as batch:
                    batch.save(item)
        assert "TransactWriteItems" not in recorder.requests
        assert [("k", 1, "alice")] == [(i.pk, i.sk, i.user_id) for i in ByUser.query("k")]


class LayoutLog(ShardedModel):
    """Written with 4 shards first, now declared with 16 (reads cover both layouts)."""

    class Meta:
        table_name = "layout_log"
        max_pool_connections = 16

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(16, previous_counts=(4,)))


def _old_shard(n: int) -> int:
    """Where ``("k", n)`` was written under the 4-shard layout: md5("k" + str(n)) % 4 + 1."""
    return md5_shard(f"k{n}".encode(), 4)


def _new_shard(n: int) -> int:
    return md5_shard(f"k{n}".encode(), 16)


class TestLayoutChange:
    """Overwriting by key during a 4 -> 16 layout change replaces the old copy, never duplicates it."""

    def _moved_keys(self) -> list[int]:
        """Range keys whose shard differs between the two layouts."""
        return [n for n in range(40) if _old_shard(n) != _new_shard(n)]

    @pytest.mark.parametrize("write", ["save", "batch", "transaction", "cached dict"])
    def test_new_instance_replaces_the_old_layout_copy(self, dynamodb_models: Bind, write: str) -> None:
        dynamodb_models(LayoutLog)
        put_raw(LayoutLog, [
            {"pk": {"S": f"k_{_old_shard(n)}"}, "sk": {"N": str(n)}, "body": {"S": "old"}} for n in range(40)
        ])
        moved = self._moved_keys()
        assert len(moved) > 20  # most keys change shard between the layouts
        fresh = [LayoutLog("k", n, body="new") for n in range(40)]  # fresh instances: overwrite by key
        if write == "save":
            for item in fresh:
                item.save()
        elif write == "batch":
            with LayoutLog.batch_write() as batch:
                for item in fresh:
                    batch.save(item)
        elif write == "transaction":
            for begin in range(0, 40, 10):
                with TransactWrite(connection=LayoutLog._get_connection().connection) as tx:
                    for item in fresh[begin:begin + 10]:
                        tx.save(item)
        else:
            for item in fresh:
                LayoutLog.from_raw_data(json.loads(json.dumps(item.to_dynamodb_dict()))).save()
        # Each key replaced once, never a second copy: save() (and batch_write, which sends these
        # through save()) moves it to the current layout in one transaction; a transaction's put
        # replaces it where it is stored, required to be still there (a reshard may move it).
        shard = _old_shard if write == "transaction" else _new_shard
        assert sorted((f"k_{shard(n)}", str(n)) for n in range(40)) == _stored(LayoutLog)
        for n in moved:
            assert "new" == LayoutLog.get("k", n).body  # no ShardLocationError: one copy
        assert ["new"] * 40 == [item.body for item in LayoutLog.query("k")]

    def test_keys_not_stored_yet_go_to_the_current_layout(self, dynamodb_models: Bind) -> None:
        dynamodb_models(LayoutLog)
        for n in range(10):
            LayoutLog("k", n).save()
        assert sorted((f"k_{_new_shard(n)}", str(n)) for n in range(10)) == _stored(LayoutLog)

    def test_duplicate_error_gives_layout_advice(self, dynamodb_models: Bind) -> None:
        """Two copies left by an older version: the error says which copy to keep."""
        dynamodb_models(LayoutLog)
        n = self._moved_keys()[0]
        old, new = _old_shard(n), _new_shard(n)
        put_raw(LayoutLog, [{"pk": {"S": f"k_{shard}"}, "sk": {"N": str(n)}} for shard in (old, new)])
        with pytest.raises(ShardingError) as raised:
            LayoutLog.get("k", n)
        message = str(raised.value)
        assert f"keep the one in shard {new}" in message
        assert "use HashedShards" not in message


def test_same_key_in_another_python_form_is_not_a_change(dynamodb_models: Bind) -> None:
    """``7`` -> ``7.0`` (or a naive -> aware UTC datetime) is stored identically: the item stays put."""
    dynamodb_models(RandomLog)
    RandomLog("k", 7, body="v1").save()
    item = RandomLog.get("k", 7)
    shard = item.shards
    item.sk = 7.0
    assert shard == item.shards
    item.body = "v2"
    item.save()
    assert [("k_" + str(shard), "7")] == _stored(RandomLog)
    assert ["v2"] == [i.body for i in RandomLog.query("k")]
