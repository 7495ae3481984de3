"""Contract tests: PynamoDB still routes every request through the hooks ShardedModel overrides.

If a PynamoDB release stops calling one of ``pynamodb_sharding._host.OVERRIDDEN_HOOKS`` on a
path (``update``, ``delete``, ``refresh``, ``BatchWrite``, transactions, ``from_raw_data``...),
one of these tests fails in CI (which also runs the newest PynamoDB the declared range allows).
The last tests prove the runtime guard fails closed: with a hook bypassed the way such a
release would, the request is refused before sending and the table is unchanged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import HostContractError, RandomShards, ShardedModel, Sharding, ShardingError
from pynamodb_sharding._host import BATCH_WRITE_GAVE_UP, OVERRIDDEN_HOOKS
from pynamodb_sharding.testing import record_requests, simulate_partition_limits
from pynamodb_sharding.throttling import ThrottleKind, classify
from tests.raw import raw_items


class Ledger(ShardedModel):
    class Meta:
        table_name = "contract_ledger"

    account = UnicodeAttribute(hash_key=True)
    entry = NumberAttribute(range_key=True)
    note = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


Bind = Callable[..., Any]


@pytest.fixture
def ledger(dynamodb_models: Bind) -> type[Ledger]:
    dynamodb_models(Ledger)
    for n in range(3):
        Ledger("acct", n, note="v1").save()
    return Ledger


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the calls of every overridden hook (and ``serialize``, the save path)."""
    counted: Counter[str] = Counter()
    for name in (*OVERRIDDEN_HOOKS, "serialize"):
        raw = ShardedModel.__dict__[name]
        if isinstance(raw, classmethod):
            original = raw.__func__

            def class_spy(cls: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
                counted[_name] += 1
                return _original(cls, *args, **kwargs)

            monkeypatch.setattr(Ledger, name, classmethod(class_spy))
        else:
            def spy(self: Any, *args: Any, _name: str = name, _original: Any = raw, **kwargs: Any) -> Any:
                counted[_name] += 1
                return _original(self, *args, **kwargs)

            monkeypatch.setattr(Ledger, name, spy)
    return counted


def _connection() -> Any:
    return Ledger._get_connection().connection


@pytest.mark.parametrize(
    "operation",
    ["update", "delete", "refresh", "transact_update", "transact_delete"],
)
def test_instance_requests_route_through_the_key_hook(
    ledger: type[Ledger], calls: Counter[str], operation: str,
) -> None:
    item = Ledger.get("acct", 1)
    calls.clear()
    if operation == "update":
        item.update(actions=[Ledger.note.set("v2")])
    elif operation == "delete":
        item.delete()
    elif operation == "refresh":
        item.refresh()
    elif operation == "transact_update":
        with TransactWrite(connection=_connection()) as tx:
            tx.update(item, actions=[Ledger.note.set("v2")])
    else:
        with TransactWrite(connection=_connection()) as tx:
            tx.delete(item)
    assert calls["_get_hash_range_key_serialized_values"] >= 1


def test_batch_delete_routes_through_the_item_key_hook(ledger: type[Ledger], calls: Counter[str]) -> None:
    items = list(Ledger.query("acct"))
    calls.clear()
    with Ledger.batch_write() as batch:
        for item in items:
            batch.delete(item)
    assert calls["_get_serialized_keys"] == len(items)
    assert [] == raw_items(Ledger)


@pytest.mark.parametrize("operation", ["save", "batch_save", "transact_save"])
def test_writes_of_new_items_route_through_serialize(
    ledger: type[Ledger], calls: Counter[str], operation: str,
) -> None:
    item = Ledger("acct", 10, note="new")
    if operation == "save":
        item.save()
    elif operation == "batch_save":
        with Ledger.batch_write() as batch:
            batch.save(item)
    else:
        with TransactWrite(connection=_connection()) as tx:
            tx.save(item)
    assert calls["serialize"] >= 1
    if operation != "batch_save":  # BatchWrite puts serialize() directly, without a condition
        assert calls["_get_save_args"] >= 1
    assert "acct" == Ledger.get("acct", 10).account


def test_items_read_back_route_through_instantiate(ledger: type[Ledger], calls: Counter[str]) -> None:
    raw = raw_items(Ledger)[0]
    paths: dict[str, Callable[[], list[Ledger]]] = {
        "from_raw_data": lambda: [Ledger.from_raw_data(raw)],
        "get": lambda: [Ledger.get("acct", 0)],
        "query": lambda: list(Ledger.query("acct")),
        "scan": lambda: list(Ledger.scan()),
        "batch_get": lambda: list(Ledger.batch_get([("acct", 0)])),
    }
    for name, read in paths.items():
        calls.clear()
        items = read()
        assert calls["_instantiate"] == len(items), name
        assert {"acct"} == {item.account for item in items}, name
    with TransactGet(connection=_connection()) as tx:
        future = tx.get(Ledger, "acct", 2)
    assert "acct" == future.get().account


def test_class_key_hook_refuses(ledger: type[Ledger]) -> None:
    """PynamoDB's class-level paths build keys with _serialize_keys: it raises, nothing is sent."""
    with record_requests(Ledger) as recorder:
        with pytest.raises(ShardingError, match="cannot be sent to DynamoDB without choosing a shard"):
            Model.get.__func__(Ledger, "acct", 1)  # type: ignore[attr-defined]
        with pytest.raises(ShardingError):
            Ledger._serialize_keys("acct", 1)
    assert {} == dict(recorder.requests)


class TestGuardFailsClosed:
    """With a hook bypassed as a changed PynamoDB would, the request is refused before sending."""

    def test_delete_without_the_key_hook(self, ledger: type[Ledger], monkeypatch: pytest.MonkeyPatch) -> None:
        item = Ledger.get("acct", 1)
        monkeypatch.setattr(Ledger, "_get_hash_range_key_serialized_values",
                            Model._get_hash_range_key_serialized_values)
        before = raw_items(Ledger)
        with record_requests(Ledger) as recorder, pytest.raises(HostContractError, match="no shard suffix"):
            item.delete()
        assert "DeleteItem" not in recorder.requests
        assert before == raw_items(Ledger)

    def test_batch_delete_without_the_item_key_hook(
        self, ledger: type[Ledger], monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        items = list(Ledger.query("acct"))
        monkeypatch.setattr(Ledger, "_get_serialized_keys", Model._get_serialized_keys)
        monkeypatch.setattr(Ledger, "_serialize_keys", classmethod(Model._serialize_keys.__func__))  # type: ignore[attr-defined]
        with pytest.raises(HostContractError), Ledger.batch_write() as batch:
            for item in items:
                batch.delete(item)
        assert 3 == len(raw_items(Ledger))

    def test_put_without_serialize(self, ledger: type[Ledger], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(Ledger, "serialize", Model.serialize)
        with pytest.raises(HostContractError, match=r"Ledger\.account.*PutItem"):
            Ledger("acct", 20).save()
        assert 3 == len(raw_items(Ledger))


def test_batch_write_gives_up_with_the_known_text(dynamodb_models: Bind) -> None:
    """PynamoDB's give-up error of a batch write still has the text throttling.classify knows."""
    dynamodb_models(Ledger)
    saved = Ledger.Meta.max_retry_attempts
    Ledger.Meta.max_retry_attempts = 1
    try:
        with (
            simulate_partition_limits(Ledger, write_units=1),
            pytest.raises(PutError) as raised,
            Ledger.batch_write() as batch,
        ):
            for n in range(25):
                item = Ledger("acct", n)
                item._pin_shard(1)  # one physical key, so the batch is throttled
                batch.save(item)
    finally:
        Ledger.Meta.max_retry_attempts = saved
    assert str(raised.value.msg).startswith(BATCH_WRITE_GAVE_UP)
    assert raised.value.cause is None
    assert ThrottleKind.KEY_RANGE is classify(raised.value).kind
