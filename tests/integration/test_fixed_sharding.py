"""Fixed-count sharding against DynamoDB Local: spread, the md5 layout, and every PynamoDB operation.

Users only ever see the logical key; the physical keys in the table carry the shard suffix.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import PutError, TransactWriteError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding, ShardingError, ShardKeyError
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.raw import raw_items


class AuditLog(ShardedModel):
    class Meta:
        table_name = "audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(8))


class Document(ShardedModel):
    class Meta:
        table_name = "document"

    path = UnicodeAttribute(hash_key=True)
    revision = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    version = VersionAttribute()
    shards = Sharding(HashedShards(10))


class Account(Model):
    """A plain PynamoDB model, to mix with sharded ones in transactions."""

    class Meta:
        table_name = "account"

    account_id = UnicodeAttribute(hash_key=True)
    balance = NumberAttribute(default=0)


class TestRandomSpread:
    """4,000 saves to one logical key spread evenly over 8 physical keys; reads see the logical key."""

    def test_spread_and_logical_keys(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog)
        hot = "/shared/firetvGen2.txt"

        def save(i: int) -> None:
            AuditLog(hot, i, user_id=f"u{i % 7}").save()

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(save, range(4000)))

        physical = Counter(item["file_path"]["S"] for item in raw_items(AuditLog))
        assert set(physical) == {f"{hot}_{shard}" for shard in range(1, 9)}
        assert all(350 <= n <= 650 for n in physical.values()), physical
        scanned = list(AuditLog.scan())
        assert len(scanned) == 4000
        assert {item.file_path for item in scanned} == {hot}
        assert Counter(item.shards for item in scanned) == Counter(
            {AuditLog.shards.decode(key)[1]: n for key, n in physical.items()}
        )


class TestHashedLayout:
    """HashedShards writes where ``md5(pk + sk) % n + 1`` says and reads one key with one request."""

    def test_physical_key_is_the_md5_shard_and_get_is_one_request(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Document)
        for revision in range(30):
            Document("/docs/readme", revision, body="x").save()
        for item in raw_items(Document):
            revision = item["revision"]["N"]
            shard = int(hashlib.md5(("/docs/readme" + revision).encode()).hexdigest(), 16) % 10 + 1
            assert item["path"]["S"] == f"/docs/readme_{shard}"
        with record_requests(Document) as sent:
            doc = Document.get("/docs/readme", 17)
        assert sent.requests == {"GetItem": 1}
        assert (doc.path, doc.revision, doc.body) == ("/docs/readme", 17, "x")


class TestRoundTrips:
    """Every PynamoDB operation works on the logical key and hits the item's physical key."""

    def test_save_get_update_refresh_delete(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog)
        item = AuditLog("/f", 1, user_id="alice")
        item.save()
        shard = item.shards
        assert shard in range(1, 9)
        assert item.file_path == "/f"

        loaded = AuditLog.get("/f", 1)
        assert (loaded.file_path, loaded.user_id, loaded.shards) == ("/f", "alice", shard)
        loaded.update(actions=[AuditLog.user_id.set("bob")])
        assert (loaded.file_path, loaded.user_id) == ("/f", "bob")
        loaded.user_id = "carol"
        loaded.save()  # a known item stays on its shard: still one copy
        assert [(i["file_path"]["S"], i["user_id"]["S"]) for i in raw_items(AuditLog)] == [
            (f"/f_{shard}", "carol")
        ]

        item.refresh()
        assert item.user_id == "carol"
        item.delete()
        assert raw_items(AuditLog) == []
        with pytest.raises(AuditLog.DoesNotExist):
            AuditLog.get("/f", 1)

    def test_random_get_reads_all_candidates_in_one_batch(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog)
        AuditLog("/f", 1, user_id="a").save()
        with record_requests(AuditLog) as sent:
            assert AuditLog.get("/f", 1).user_id == "a"
        assert sent.requests == {"BatchGetItem": 1}

    def test_hand_built_item_is_located_with_one_batched_read(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog)
        AuditLog("/f", 1, user_id="a").save()
        stranger = AuditLog("/f", 1)  # shard unknown
        with record_requests(AuditLog) as sent:
            stranger.update(actions=[AuditLog.user_id.set("b")])
        assert sent.requests == {"BatchGetItem": 1, "UpdateItem": 1}
        assert [i["user_id"]["S"] for i in raw_items(AuditLog)] == ["b"]
        AuditLog("/f", 1).delete()
        assert raw_items(AuditLog) == []

    def test_duplicate_logical_key_is_refused_for_changes(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog)
        AuditLog("/f", 1, user_id="a").save()
        while True:  # random shards do not keep logical keys unique: make a second copy
            copy = AuditLog("/f", 1, user_id="b")
            copy.save()
            if len(raw_items(AuditLog)) == 2:
                break
            copy.delete()
            AuditLog("/f", 1, user_id="a").save()
        before = sorted(i["user_id"]["S"] for i in raw_items(AuditLog))
        duplicate = r"AuditLog\.file_path: the item '/f' with range key 1 exists in shards"
        with pytest.raises(ShardingError, match=duplicate):
            AuditLog("/f", 1).update(actions=[AuditLog.user_id.set("c")])
        with pytest.raises(ShardingError, match="exists in shards"):
            AuditLog.get("/f", 1)
        assert before == sorted(i["user_id"]["S"] for i in raw_items(AuditLog))

    def test_batch_get_and_batch_write(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog, Document)
        with AuditLog.batch_write() as batch:
            for i in range(60):
                batch.save(AuditLog("/b", i, user_id=str(i)))
        with Document.batch_write() as batch:
            for i in range(30):
                batch.save(Document("/d", i))
        got = sorted(
            (i.file_path, i.accessed_at) for i in AuditLog.batch_get([("/b", i) for i in range(0, 60, 2)])
        )
        assert got == [("/b", i) for i in range(0, 60, 2)]
        assert len(list(Document.batch_get([("/d", i) for i in range(30)]))) == 30
        items = list(AuditLog.scan())
        with AuditLog.batch_write() as batch:
            for item in items:
                batch.delete(item)
        assert raw_items(AuditLog) == []

    def test_conditional_save_failure_writes_nothing(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Document)
        Document("/c", 1, body="first").save()
        with pytest.raises(PutError) as info:
            Document("/c", 1, body="second").save(condition=Document.path.does_not_exist())
        assert info.value.cause_response_code == "ConditionalCheckFailedException"
        assert Document.get("/c", 1).body == "first"

    def test_version_conflict(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Document)
        Document("/v", 1, body="a").save()
        first, second = Document.get("/v", 1), Document.get("/v", 1)
        first.body = "b"
        first.save()
        assert first.version == 2
        second.body = "c"
        with pytest.raises(PutError):
            second.save()
        with pytest.raises(UpdateError):
            second.update(actions=[Document.body.set("d")])
        assert Document.get("/v", 1).body == "b"

    def test_transactions_mix_sharded_and_plain(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog, Document, Account)
        Account("acc", balance=10).save()
        Document("/t", 1, body="old").save()
        doc = Document.get("/t", 1)
        connection = Account._get_connection().connection
        with TransactWrite(connection=connection) as tx:
            tx.save(AuditLog("/t", 1, user_id="tx"))
            tx.update(doc, actions=[Document.body.set("new")])
            tx.update(Account("acc"), actions=[Account.balance.add(5)])
            tx.condition_check(Document, "/t", 2, condition=Document.path.does_not_exist())
        assert Document.get("/t", 1).body == "new"
        assert Account.get("acc").balance == 15
        assert AuditLog.get("/t", 1).user_id == "tx"

        with TransactGet(connection=connection) as get:
            log_future = get.get(AuditLog, "/t", 1)
            doc_future = get.get(Document, "/t", 1)
            account_future = get.get(Account, "acc")
        assert (log_future.get().file_path, log_future.get().user_id) == ("/t", "tx")
        assert doc_future.get().body == "new"
        assert account_future.get().balance == 15

        with pytest.raises(TransactWriteError), TransactWrite(connection=connection) as tx:
            tx.delete(AuditLog.get("/t", 1))
            tx.condition_check(Document, "/t", 1, condition=Document.body == "old")
        assert AuditLog.get("/t", 1).user_id == "tx"  # nothing half-way
        with TransactWrite(connection=connection) as tx:
            tx.delete(AuditLog.get("/t", 1))
        assert raw_items(AuditLog) == []

    def test_serialize_round_trip(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Document)
        item = Document("/s", 3, body="b")
        raw = item.serialize()
        assert raw["path"]["S"] == f"/s_{item.shards}"
        again = Document.from_raw_data(raw)
        assert (again.path, again.revision, again.body, again.shards) == ("/s", 3, "b", item.shards)


class TestBadInput:
    """Bad keys are refused before anything is sent; nothing is written."""

    def test_bad_keys_write_nothing(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(AuditLog)
        with record_requests(AuditLog) as sent:
            with pytest.raises(ShardKeyError, match=r"AuditLog\.file_path.*2,048-byte"):
                AuditLog("x" * 2047, 1).save()
            with pytest.raises(ShardKeyError, match=r"AuditLog\.file_path: the hash key must be a str"):
                AuditLog(None, 1).save()
            with pytest.raises(ShardKeyError, match="empty"):
                AuditLog.get("", 1)
        assert sent.requests == {}
        assert raw_items(AuditLog) == []

    def test_hashed_by_attribute_without_it_writes_nothing(self, dynamodb_models: BindModels) -> None:
        class Event(ShardedModel):
            class Meta:
                table_name = "event"

            date = UnicodeAttribute(hash_key=True)
            event_id = UnicodeAttribute(range_key=True)
            user_id = UnicodeAttribute(null=True)
            shards = Sharding(HashedShards(7, attributes=("user_id",)))

        dynamodb_models(Event)
        with pytest.raises(ShardingError, match=r"Event\.user_id: .*not set on this item"):
            Event("20160226", "e1").save()
        assert raw_items(Event) == []
        Event("20160226", "e1", user_id="u1").save()
        assert Event.get("20160226", "e1").user_id == "u1"  # no user id known: batched read

    def test_raw_logical_key_path_is_refused(self) -> None:
        with pytest.raises(ShardingError, match="without choosing a shard"):
            AuditLog._serialize_keys("/f", 1)


class Renamed(ShardedModel):
    """The hash key is stored under another name in DynamoDB."""

    class Meta:
        table_name = "renamed"

    file_path = UnicodeAttribute(hash_key=True, attr_name="pk")
    accessed_at = NumberAttribute(range_key=True, attr_name="sk")
    note = UnicodeAttribute(null=True, attr_name="n")
    shards = Sharding(RandomShards(3))


class TestRenamedHashKey:
    """A hash key with its own ``attr_name`` is encoded and decoded under that name."""

    def test_round_trip(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(Renamed)
        Renamed("/r", 1).save()
        (raw,) = raw_items(Renamed)
        assert raw["pk"]["S"].startswith("/r_")
        loaded = Renamed.get("/r", 1)
        assert ("/r", int(raw["pk"]["S"].rsplit("_", 1)[1])) == (loaded.file_path, loaded.shards)
        assert ["/r"] == [item.file_path for item in Renamed.query("/r")]
        loaded.update(actions=[Renamed.note.set("x")])
        assert ("/r", "x") == (loaded.file_path, loaded.note)
