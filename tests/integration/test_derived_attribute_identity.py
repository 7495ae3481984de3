"""``HashedShards(attributes=("user_id",))``: the primary key names the item, not ``user_id``.

Proves: an instance built by hand whose ``user_id`` differs from the stored item's is the same
item, as in PynamoDB. Saving a new instance replaces (moves) the stored copy, with the version
check and the condition applied to it, and never leaves a second copy; ``refresh``, ``update``
and ``delete`` act on the stored copy wherever it is; a batch or transactional write that would
duplicate the key is refused before sending. A missing item without ``user_id`` behaves as
PynamoDB's (``TransactGet`` finds nothing, ``delete`` is a no-op). A plain ``Model`` runs the
same steps in each test as the reference, and the raw table is read with boto3.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import PutError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import HashedShards, ShardedModel, Sharding, ShardLocationError, ShardMoveError
from pynamodb_sharding.testing import record_requests
from tests.raw import put_raw, raw_items

Bind = Callable[..., Any]


class Session(ShardedModel):
    class Meta:
        table_name = "identity_session"
        max_pool_connections = 16

    tenant = UnicodeAttribute(hash_key=True)
    session_id = UnicodeAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(16, attributes=("user_id",)))


class PlainSession(Model):
    class Meta:
        table_name = "identity_session_plain"

    tenant = UnicodeAttribute(hash_key=True)
    session_id = UnicodeAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)


class VersionedSession(ShardedModel):
    class Meta:
        table_name = "identity_versioned"
        max_pool_connections = 16

    tenant = UnicodeAttribute(hash_key=True)
    session_id = UnicodeAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    version = VersionAttribute()
    shards = Sharding(HashedShards(16, attributes=("user_id",)))


class PlainVersionedSession(Model):
    class Meta:
        table_name = "identity_versioned_plain"

    tenant = UnicodeAttribute(hash_key=True)
    session_id = UnicodeAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    version = VersionAttribute()


def _copies(model: type[Model]) -> list[tuple[str, str, str | None, str | None]]:
    """``(physical tenant, session_id, user_id, note)`` of every stored item, sorted."""
    return sorted(
        (raw["tenant"]["S"], raw["session_id"]["S"], raw.get("user_id", {}).get("S"), raw.get("note", {}).get("S"))
        for raw in raw_items(model)
    )


def _shard_of(user_id: str) -> int:
    return Session.shards.write_shard(Session("acme", "s-1", user_id=user_id))


def _users(model: type[Model]) -> list[tuple[str | None, str | None]]:
    return [(item.user_id, item.note) for item in model.query("acme")]


def test_the_two_users_select_different_shards() -> None:
    """The tests below need alice and bob to select different shards."""
    assert len({_shard_of("alice"), _shard_of("bob"), _shard_of("dora")}) == 3


def test_new_instance_with_another_user_id_replaces_the_stored_item(dynamodb_models: Bind) -> None:
    dynamodb_models(Session, PlainSession)
    for model in (Session, PlainSession):
        model("acme", "s-1", user_id="alice", note="first").save()
        model("acme", "s-1", user_id="bob").save()  # overwrite by key, as PynamoDB does
    assert _users(PlainSession) == _users(Session) == [("bob", None)]
    assert _copies(Session) == [(f"acme_{_shard_of('bob')}", "s-1", "bob", None)]
    got = Session.get("acme", "s-1")
    assert (got.user_id, got.shards) == ("bob", _shard_of("bob"))


@pytest.mark.parametrize("how", ["version", "does_not_exist"])
def test_new_instance_checks_run_on_the_stored_copy(dynamodb_models: Bind, how: str) -> None:
    dynamodb_models(VersionedSession, PlainVersionedSession)
    outcome = {}
    for model in (VersionedSession, PlainVersionedSession):
        model("acme", "s-1", user_id="alice").save()
        condition = model.session_id.does_not_exist() if how == "does_not_exist" else None
        with pytest.raises(PutError) as raised:
            model("acme", "s-1", user_id="bob").save(condition=condition)
        outcome[model] = raised.value.cause_response_code
    assert outcome[VersionedSession] == outcome[PlainVersionedSession] == "ConditionalCheckFailedException"
    assert [(i.user_id, i.version) for i in VersionedSession.query("acme")] == [("alice", 1)]
    assert [copy[2] for copy in _copies(VersionedSession)] == ["alice"]


def test_built_instance_refresh_update_delete_act_on_the_stored_item(dynamodb_models: Bind) -> None:
    dynamodb_models(Session, PlainSession)
    seen: dict[type[Model], list[Any]] = {}
    for model in (Session, PlainSession):
        model("acme", "s-1", user_id="alice").save()
        built = model("acme", "s-1", user_id="bob")  # from request data: not the stored user_id
        built.refresh()
        refreshed = built.user_id
        model("acme", "s-1", user_id="bob").update(actions=[model.note.set("x")])
        after_update = _users(model)
        model("acme", "s-1", user_id="dora").delete()
        seen[model] = [refreshed, after_update, _users(model)]
    assert seen[Session] == seen[PlainSession] == ["alice", [("alice", "x")], []]
    assert raw_items(Session) == []


def test_refresh_with_the_stored_user_id_is_one_get_item(dynamodb_models: Bind) -> None:
    dynamodb_models(Session)
    Session("acme", "s-1", user_id="alice", note="n").save()
    built = Session("acme", "s-1", user_id="alice")
    with record_requests(Session) as recorder:
        built.refresh()
    assert (built.note, list(recorder.requests)) == ("n", ["GetItem"])
    wrong = Session("acme", "s-1", user_id="bob")
    with record_requests(Session) as recorder:
        wrong.refresh()  # a miss in bob's shard, then every shard of the key
    assert (wrong.user_id, list(recorder.requests)) == ("alice", ["GetItem", "BatchGetItem"])


def test_batch_and_transactional_writes_refuse_a_second_copy(dynamodb_models: Bind) -> None:
    dynamodb_models(Session)
    Session("acme", "s-1", user_id="alice").save()
    before = _copies(Session)
    with pytest.raises(ShardMoveError, match=r"stored in shard .*save\(\)"), Session.batch_write() as batch:
        batch.save(Session("acme", "s-1", user_id="bob"))
    connection = Session._get_connection().connection
    with pytest.raises(ShardMoveError, match=r"Session\.tenant"), TransactWrite(connection=connection) as transaction:
        transaction.save(Session("acme", "s-1", user_id="bob"))
    assert _copies(Session) == before
    # A batch write of a key stored nowhere, or with the stored user_id, is one put.
    with Session.batch_write() as batch:
        batch.save(Session("acme", "s-1", user_id="alice", note="again"))
        batch.save(Session("acme", "s-2", user_id="bob"))
    assert _users(Session) == [("alice", "again"), ("bob", None)]
    assert len(_copies(Session)) == 2


def test_missing_item_without_user_id_is_missing_as_in_pynamodb(dynamodb_models: Bind) -> None:
    dynamodb_models(Session, PlainSession)
    for model in (Session, PlainSession):
        model("acme", "s-1", user_id="alice").save()
        with TransactGet(connection=model._get_connection().connection) as transaction:
            future = transaction.get(model, "acme", "nope")
        with pytest.raises(model.DoesNotExist):
            future.get()
        model("acme", "nope").delete()  # a no-op
        with TransactGet(connection=model._get_connection().connection) as transaction:
            present = transaction.get(model, "acme", "s-1")
        assert present.get().user_id == "alice"
    assert [copy[1:] for copy in _copies(Session)] == [("s-1", "alice", None)]


def test_duplicated_key_names_the_attribute_and_the_copies(dynamodb_models: Bind) -> None:
    """Copies written by another program: get refuses to choose, and says how to repair."""
    dynamodb_models(Session)
    put_raw(Session, [
        {"tenant": {"S": f"acme_{_shard_of(user)}"}, "session_id": {"S": "s-1"}, "user_id": {"S": user}}
        for user in ("alice", "bob")
    ])
    with pytest.raises(ShardLocationError) as raised:
        Session.get("acme", "s-1")
    message = str(raised.value)
    assert "different user_id values" in message
    assert "Session.query" in message
    assert "not set" not in message


def _outcome(save: Callable[[], Any]) -> str:
    try:
        save()
    except PutError as error:
        return str(error.cause_response_code)
    return "saved"


def _alice_held_while_bob_creates(model: type[Model], condition: Any) -> list[str]:
    """Alice's create of ("acme", "s-1") is held once it looked for the key (a sharded model's
    lookup) while bob's create of the same key completes; their outcomes, sorted."""
    looked = threading.Event()
    go_on = threading.Event()
    outcomes: list[str] = []
    alice = threading.Thread(target=lambda: outcomes.append(
        _outcome(lambda: model("acme", "s-1", user_id="alice").save(condition=condition))))

    def hold(model: Any, **_: Any) -> None:
        if model.name == "BatchGetItem" and threading.current_thread() is alice:
            looked.set()
            assert go_on.wait(30)

    events = model._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb", hold)
    try:
        alice.start()
        if issubclass(model, ShardedModel):
            assert looked.wait(30)  # alice found nothing stored and waits
        else:
            alice.join(30)  # a plain table has no lookup: alice's put went through at once
        outcomes.append(_outcome(lambda: model("acme", "s-1", user_id="bob").save(condition=condition)))
    finally:
        go_on.set()
        alice.join(30)
        events.unregister("after-call.dynamodb", hold)
    return sorted(outcomes)


@pytest.mark.parametrize("how", ["version", "does_not_exist"])
def test_a_create_held_after_its_lookup_sees_a_copy_saved_meanwhile(dynamodb_models: Bind, how: str) -> None:
    """Alice's create looked for the key (nothing stored) and is held there while bob's create
    of the same key, with another user_id and so another shard, completes. On a plain table
    the second create fails its check; here too, and the table keeps bob's copy alone."""
    dynamodb_models(VersionedSession, PlainVersionedSession)
    outcome = {}
    for model in (VersionedSession, PlainVersionedSession):
        condition = model.session_id.does_not_exist() if how == "does_not_exist" else None
        outcome[model] = _alice_held_while_bob_creates(model, condition)
    assert outcome[VersionedSession] == outcome[PlainVersionedSession] == ["ConditionalCheckFailedException", "saved"]
    assert [copy[2] for copy in _copies(VersionedSession)] == ["bob"]
    assert [(i.user_id, i.version) for i in VersionedSession.query("acme")] == [("bob", 1)]


def test_a_move_that_finds_the_item_deleted_checks_the_other_shards_before_recreating(dynamodb_models: Bind) -> None:
    """Bob's create finds alice's copy and tries to move it (its condition fails there); held
    after that, the item is deleted; held after its next lookup (nothing stored), dora creates
    the key in her shard. Bob's save then recreates the key in his shard only if no other shard
    holds it: one create of the two succeeds, one copy stays."""
    dynamodb_models(Session)
    Session("acme", "s-1", user_id="alice").save()
    stops = {name: (threading.Event(), threading.Event()) for name in ("TransactWriteItems", "BatchGetItem")}
    lookups = []
    creator: list[threading.Thread] = []

    def hold(model: Any, **_: Any) -> None:
        if threading.current_thread() is not creator[0] or model.name not in stops:
            return
        if model.name == "BatchGetItem":
            lookups.append(1)
            if len(lookups) != 2:  # the first is save()'s own lookup; hold after the second
                return
        reached, release = stops[model.name]
        reached.set()
        assert release.wait(30)

    events = Session._get_connection().connection.client.meta.events
    events.register("after-call.dynamodb", hold)
    outcomes: list[str] = []
    absent = Session.session_id.does_not_exist()
    creator.append(threading.Thread(target=lambda: outcomes.append(
        _outcome(lambda: Session("acme", "s-1", user_id="bob").save(condition=absent)))))
    try:
        creator[0].start()
        assert stops["TransactWriteItems"][0].wait(30)  # the move failed its condition on alice's copy
        Session.get("acme", "s-1", consistent_read=True).delete()
        stops["TransactWriteItems"][1].set()
        assert stops["BatchGetItem"][0].wait(30)  # bob's save found nothing stored
        outcomes.append(_outcome(lambda: Session("acme", "s-1", user_id="dora").save(condition=absent)))
    finally:
        for _, release in stops.values():
            release.set()
        creator[0].join(30)
        events.unregister("after-call.dynamodb", hold)
    assert ["ConditionalCheckFailedException", "saved"] == sorted(outcomes)
    assert [copy[2] for copy in _copies(Session)] == ["dora"]
