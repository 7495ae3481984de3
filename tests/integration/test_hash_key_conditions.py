"""Conditions and filters on the sharded hash key mean what they mean on a plain table (DynamoDB Local).

Each test runs the same operations on a plain PynamoDB model (the reference) and on sharded
models with the same attributes, and expects the same outcome: the same conditional writes
succeed or fail with ``ConditionalCheckFailed``, the same items come back from filters. What
cannot be rewritten exactly is refused before any request is sent, and the table is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, PutError, QueryError, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Comparison, Condition, size
from pynamodb.expressions.operand import Path, Value
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    RandomShards,
    ShardConditionError,
    ShardedModel,
    Sharding,
    ShardMetadata,
)
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.raw import raw_items


class _ByUser(GlobalSecondaryIndex[Any]):
    """An index whose range key is the table's (sharded) hash-key attribute."""

    class Meta:
        index_name = "by_user"
        projection = AllProjection()

    user_id = UnicodeAttribute(hash_key=True)
    file_path = UnicodeAttribute(range_key=True)


class ByUserPlain(_ByUser):
    pass


class ByUserRandom(_ByUser):
    pass


class ByUserHashed(_ByUser):
    pass


class _ByTime(GlobalSecondaryIndex[Any]):
    """An index keyed by other attributes: the sharded attribute is an ordinary one there."""

    class Meta:
        index_name = "by_time"
        projection = AllProjection()

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class ByTimePlain(_ByTime):
    pass


class ByTimeRandom(_ByTime):
    pass


class ByTimeHashed(_ByTime):
    pass


class PlainLog(Model):
    class Meta:
        table_name = "cond_plain"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    by_user = ByUserPlain()
    by_time = ByTimePlain()


class RandomLog(ShardedModel):
    class Meta:
        table_name = "cond_random"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    by_user = ByUserRandom()
    by_time = ByTimeRandom()
    shards = Sharding(RandomShards(4))


class HashedLog(ShardedModel):
    class Meta:
        table_name = "cond_hashed"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    by_user = ByUserHashed()
    by_time = ByTimeHashed()
    shards = Sharding(HashedShards(4))


class DynamicLogShards(ShardMetadata):
    class Meta:
        table_name = "cond_dynamic_shards"


class DynamicLog(ShardedModel):
    class Meta:
        table_name = "cond_dynamic"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    # Growths written to at once (the fleet protocol of fresh reads, stored with the table).
    shards = Sharding(DynamicShards(DynamicLogShards, fresh_reads=True))


SHARDED = [RandomLog, HashedLog]

#: "/f_1" is a logical key that looks like a physical key of "/f": comparing logical values
#: with physical ones would confuse them.
KEYS = ["/f", "/f_1", "/fa", "/g"]

Build = Callable[[Any], Condition]

#: Conditions rewritten exactly, by name: each is a function of the model class.
REWRITTEN: dict[str, Build] = {
    "eq": lambda m: m.file_path == "/f",
    "eq other": lambda m: m.file_path == "/g",
    "eq lookalike": lambda m: m.file_path == "/f_1",
    "eq reversed": lambda m: Comparison("=", Value("/f"), Path(m.file_path)),
    "ne": lambda m: m.file_path != "/f",
    "ne other": lambda m: m.file_path != "/g",
    "in": lambda m: m.file_path.is_in("/g", "/f", "/nowhere"),
    "in others": lambda m: m.file_path.is_in("/g", "/nowhere"),
    "startswith": lambda m: m.file_path.startswith("/f"),
    "startswith other": lambda m: m.file_path.startswith("/g"),
    "or": lambda m: (m.file_path == "/g") | (m.file_path == "/f"),
    "not": lambda m: ~(m.file_path == "/f"),
    "and range": lambda m: (m.file_path == "/f") & (m.accessed_at >= 2),
    "not in and": lambda m: ~m.file_path.is_in("/g", "/fa") & (m.user_id == "u1"),
    "exists": lambda m: m.file_path.exists(),
    "does not exist": lambda m: m.file_path.does_not_exist(),
    "is type": lambda m: m.file_path.is_type(),
}

#: Conditions above that name keys of the ``by_time`` index.
USES_BY_TIME_KEYS = {"and range", "not in and"}

#: Conditions refused before sending.
REFUSED: dict[str, Build] = {
    "lt": lambda m: m.file_path < "/g",
    "between": lambda m: m.file_path.between("/a", "/z"),
    "contains": lambda m: m.file_path.contains("f"),
    "size": lambda m: size(m.file_path) > 2,
    "other path": lambda m: m.file_path == m.user_id,
    "other path reversed": lambda m: m.user_id == m.file_path,
    "ambiguous prefix": lambda m: m.file_path.startswith("/f_1"),
    "nested": lambda m: (m.file_path == "/f") & ~(m.file_path >= "/a"),
}


def _fill(model: Any) -> None:
    for key in KEYS:
        for at in (1, 2, 3):
            model(key, at, user_id=f"u{at % 2}").save()


def _rows(items: Any) -> list[tuple[str, int]]:
    return sorted((item.file_path, item.accessed_at) for item in items)


def _outcome(action: Callable[[], Any]) -> str:
    try:
        action()
    except (PutError, UpdateError, DeleteError) as error:
        if error.cause_response_code != "ConditionalCheckFailedException":
            raise
        return "ConditionalCheckFailed"
    return "ok"


class TestConditionsOnTheShardedKey:
    """Conditions on the sharded key compare logical keys: a save conditioned on its own key
    succeeds, and a scan with ``==`` or ``is_in`` finds that key's items (both wrong before)."""

    @pytest.mark.parametrize("model", SHARDED)
    def test_save_with_equality_on_own_key(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(model)
        item = model("/f", 1, user_id="a")
        item.save()
        item.user_id = "b"
        item.save(model.file_path == "/f")
        assert model.get("/f", 1).user_id == "b"

    @pytest.mark.parametrize("model", SHARDED)
    def test_scan_and_is_in(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(model)
        _fill(model)
        assert _rows(model.scan(model.file_path == "/f")) == [("/f", 1), ("/f", 2), ("/f", 3)]
        assert _rows(model.scan(model.file_path.is_in("/f_1"))) == [("/f_1", 1), ("/f_1", 2), ("/f_1", 3)]


class TestFilters:
    """scan, count and query filters return exactly what the plain model returns."""

    @pytest.mark.parametrize("model", SHARDED)
    def test_same_items_as_plain(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(PlainLog, model)
        _fill(PlainLog)
        _fill(model)
        for name, build in REWRITTEN.items():
            expected = _rows(PlainLog.scan(build(PlainLog)))
            assert _rows(model.scan(build(model))) == expected, name
            expected = _rows(PlainLog.scan(build(PlainLog), index_name="by_time"))
            assert _rows(model.scan(build(model), index_name="by_time")) == expected, name
            if name in USES_BY_TIME_KEYS:
                continue  # DynamoDB allows no filter on the queried index's keys
            expected = _rows(PlainLog.by_time.query("u1", filter_condition=build(PlainLog)))
            assert _rows(model.by_time.query("u1", filter_condition=build(model))) == expected, name
            expected_count = PlainLog.by_time.count("u1", filter_condition=build(PlainLog))
            assert model.by_time.count("u1", filter_condition=build(model)) == expected_count, name

    @pytest.mark.parametrize("model", SHARDED)
    def test_filter_on_a_key_of_the_query_fails_as_on_plain(self, dynamodb_models: BindModels, model: Any) -> None:
        """DynamoDB refuses a filter on a key of the table or index queried, for both models."""
        dynamodb_models(PlainLog, model)
        for m in (PlainLog, model):
            with pytest.raises(QueryError, match="non-primary key attributes"):
                list(m.query("/f", filter_condition=m.file_path == "/f"))

    def test_dynamic_shards_after_growth(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(PlainLog, DynamicLog)
        DynamicLog.shards.grow("/f")
        DynamicLog.shards.grow("/f")
        for model in (PlainLog, DynamicLog):
            for at in range(1, 13):
                model("/f" if at % 3 else "/f_1", at, user_id="u1").save()
        assert len({item["file_path"]["S"] for item in raw_items(DynamicLog)}) > 2
        for name, build in REWRITTEN.items():
            assert _rows(DynamicLog.scan(build(DynamicLog))) == _rows(PlainLog.scan(build(PlainLog))), name


class TestItemConditions:
    """save, update and delete with conditions succeed or fail exactly as on the plain model."""

    @staticmethod
    def _outcomes(model: Any) -> tuple[dict[tuple[str, str], str], list[tuple[str, int, str]]]:
        outcomes: dict[tuple[str, str], str] = {}
        for at, (name, build) in enumerate(REWRITTEN.items(), start=1):
            model("/f", at, user_id="a").save()
            model("/f", 100 + at, user_id="a").save()
            loaded = model.get("/f", at)
            loaded.user_id = "saved"
            condition = build(model)
            actions: dict[str, Callable[[], Any]] = {
                "save loaded": partial(loaded.save, condition),
                "update hand-built": partial(model("/f", at).update, [model.user_id.set("updated")], condition),
                "delete loaded": partial(model.get("/f", 100 + at).delete, condition),
                "save missing": partial(model("/h", at, user_id="new").save, condition),
                "update missing": partial(model("/k", at).update, [model.user_id.set("new")], condition),
                "delete missing": partial(model("/m", at).delete, condition),
            }
            for operation, action in actions.items():
                outcomes[name, operation] = _outcome(action)
        rows = sorted((item.file_path, item.accessed_at, item.user_id) for item in model.scan())
        return outcomes, rows

    @pytest.mark.parametrize("model", SHARDED)
    def test_same_outcomes_as_plain(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(PlainLog, model)
        expected, expected_rows = self._outcomes(PlainLog)
        assert expected["eq", "save loaded"] == "ok"  # the plain model's outcome, which the sharded ones must match
        assert expected["eq other", "save loaded"] == "ConditionalCheckFailed"
        actual, actual_rows = self._outcomes(model)
        assert actual == expected
        assert actual_rows == expected_rows

    def test_dynamic_shards(self, dynamodb_models: BindModels) -> None:
        dynamodb_models(PlainLog, DynamicLog)
        DynamicLog.shards.grow("/f")
        DynamicLog.shards.grow("/f")
        expected = self._outcomes(PlainLog)
        assert self._outcomes(DynamicLog) == expected

    @pytest.mark.parametrize("model", SHARDED)
    def test_transactions(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(PlainLog, model)
        results: dict[Any, list[str]] = {}
        rows: dict[Any, list[tuple[str, int, str]]] = {}
        for m in (PlainLog, model):
            connection = m._get_connection().connection
            m("/f", 1, user_id="a").save()
            m("/f", 2, user_id="a").save()
            outcome: list[str] = []
            for at, name in enumerate(("eq", "ne", "in others", "startswith", "eq reversed")):
                build = REWRITTEN[name]
                try:
                    with TransactWrite(connection=connection) as tx:
                        tx.condition_check(m, "/f", 1, condition=build(m))
                        tx.update(m("/f", 2), actions=[m.user_id.set(name)], condition=build(m))
                        tx.save(m("/n", at, user_id="tx"), condition=build(m) | m.file_path.does_not_exist())
                except TransactWriteError as error:
                    outcome.append(str(error.cause_response_code))
                else:
                    outcome.append("ok")
            results[m] = outcome
            rows[m] = sorted((item.file_path, item.accessed_at, item.user_id) for item in m.scan())
        assert results[PlainLog] == [
            "ok", "TransactionCanceledException", "TransactionCanceledException", "ok", "ok",
        ]
        assert results[model] == results[PlainLog]
        assert rows[model] == rows[PlainLog]


class TestRefused:
    """Conditions that cannot be rewritten exactly raise before anything is sent."""

    @pytest.mark.parametrize("model", SHARDED)
    def test_nothing_sent_and_table_unchanged(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(model)
        model("/f", 1, user_id="u1").save()
        before = raw_items(model)
        for name, build in REFUSED.items():
            hand_built = model("/f", 1)  # shard unknown: locating it would read
            loaded = model.get("/f", 1)
            condition = build(model)
            operations: list[Callable[[], Any]] = [
                partial(loaded.save, condition),
                partial(model("/new", 1, user_id="x").save, condition),
                partial(hand_built.update, [model.user_id.set("x")], condition),
                partial(hand_built.delete, condition),
                partial(model.scan, condition),
                partial(model.scan, condition, index_name="by_time"),
                partial(model.by_time.query, "u1", filter_condition=condition),
                partial(model.by_time.count, "u1", filter_condition=condition),
                partial(model.by_user.query, "u1", condition),
            ]
            for operation in operations:
                with record_requests(model) as sent, pytest.raises(ShardConditionError) as raised:
                    operation()
                assert sent.requests == {}, name
                assert f"{model.__name__}.file_path" in str(raised.value), name
            with (
                record_requests(model) as sent,
                pytest.raises(ShardConditionError),
                TransactWrite(connection=model._get_connection().connection) as tx,
            ):
                tx.condition_check(model, "/f", 1, condition=condition)
            assert sent.requests == {}, name
        assert raw_items(model) == before


class TestIndexRangeKey:
    """A GSI whose range key is the sharded attribute: startswith is exact, the rest is refused.

    Before, ``by_user.query("u1", file_path == "/f")`` silently returned nothing.
    """

    @pytest.mark.parametrize("model", SHARDED)
    def test_range_key_conditions(self, dynamodb_models: BindModels, model: Any) -> None:
        dynamodb_models(PlainLog, model)
        _fill(PlainLog)
        _fill(model)
        assert _rows(PlainLog.by_user.query("u1", PlainLog.file_path == "/f")) == [("/f", 1), ("/f", 3)]
        for build in (REWRITTEN["eq"], REWRITTEN["ne"], REWRITTEN["in"], REFUSED["lt"], REFUSED["ambiguous prefix"]):
            with record_requests(model) as sent, pytest.raises(ShardConditionError, match=r"key condition|startswith"):
                list(model.by_user.query("u1", build(model)))
            assert sent.requests == {}
            with pytest.raises(ShardConditionError):
                model.by_user.count("u1", build(model))
        for prefix in ("/f", "/fa", "/g", "/"):
            expected = _rows(PlainLog.by_user.query("u1", PlainLog.file_path.startswith(prefix)))
            assert _rows(model.by_user.query("u1", model.file_path.startswith(prefix))) == expected, prefix
