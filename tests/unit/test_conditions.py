"""Rewritten hash-key conditions select exactly what the logical conditions select (no server).

A small evaluator of DynamoDB's condition semantics (for the operators that are rewritten)
checks that a condition on logical keys and its rewrite on physical keys agree for every
stored key and shard, and for a missing item; what cannot be rewritten is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.expressions.condition import (
    And,
    BeginsWith,
    Comparison,
    Condition,
    Exists,
    In,
    Not,
    NotExists,
    Or,
    size,
)
from pynamodb.expressions.operand import Path, Value
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import RandomShards, ShardConditionError, ShardedModel, Sharding
from pynamodb_sharding._conditions import MAX_IN_OPERANDS, Usage, prefix_ambiguity, rewrite_condition
from pynamodb_sharding._keys import encode


class Log(ShardedModel):
    class Meta:
        table_name = "unit_conditions"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(12))  # shards 1 and 10..12 share a first digit


class HashLog(ShardedModel):
    class Meta:
        table_name = "unit_conditions_hash"

    file_path = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(3), separator="#")


# -- a model of DynamoDB's evaluation, for the operators that are rewritten --------------------


def _operand(operand: Any, item: dict[str, str] | None) -> Any:
    if isinstance(operand, Path):
        return None if item is None else item.get(operand.path[0])
    assert isinstance(operand, Value)
    return operand.value.get("S", operand.value)


def evaluate(condition: Condition, item: dict[str, str] | None) -> bool:
    """What DynamoDB answers for ``condition`` on ``item`` (``None``: no such item)."""
    values = condition.values
    if isinstance(condition, And):
        return evaluate(values[0], item) and evaluate(values[1], item)
    if isinstance(condition, Or):
        return evaluate(values[0], item) or evaluate(values[1], item)
    if isinstance(condition, Not):
        return not evaluate(values[0], item)
    actual = _operand(values[0], item)
    if isinstance(condition, Exists):
        return actual is not None
    if isinstance(condition, NotExists):
        return actual is None
    if isinstance(condition, In):
        return actual is not None and actual in [_operand(v, item) for v in values[1:]]
    if isinstance(condition, BeginsWith):
        prefix = _operand(values[1], item)
        return isinstance(actual, str) and isinstance(prefix, str) and actual.startswith(prefix)
    assert isinstance(condition, Comparison)
    other = _operand(values[1], item)
    if condition.operator == "=":
        return actual is not None and actual == other
    assert condition.operator == "<>"
    return actual != other  # DynamoDB: a missing attribute is <> any value


# -- conditions on logical keys -----------------------------------------------------------------

PATH = Path(Log.file_path)
key_texts = st.text(alphabet="/f_1#0", min_size=1, max_size=4)
values = st.text(alphabet="/f_1#0", min_size=0, max_size=4).map(lambda text: Value({"S": text}))

leaves = st.one_of(
    values.map(lambda value: Comparison("=", PATH, value)),  # type: ignore[no-untyped-call]
    values.map(lambda value: Comparison("<>", PATH, value)),  # type: ignore[no-untyped-call]
    values.map(lambda value: Comparison("=", value, PATH)),  # type: ignore[no-untyped-call]
    st.lists(values, min_size=1, max_size=3).map(lambda vs: In(PATH, *vs)),  # type: ignore[no-untyped-call]
    values.map(lambda value: BeginsWith(PATH, value)),  # type: ignore[no-untyped-call]
    st.just(Exists(PATH)),  # type: ignore[no-untyped-call]
    st.just(NotExists(PATH)),  # type: ignore[no-untyped-call]
)
conditions = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda pair: And(*pair)),
        st.tuples(inner, inner).map(lambda pair: Or(*pair)),
        inner.map(Not),
    ),
    max_leaves=4,
)


def _rewrite(condition: Condition, usage: Usage, shard: int = 1) -> Condition | None:
    try:
        return rewrite_condition(Log, condition, usage, lambda: shard)
    except ShardConditionError as error:
        if "startswith" not in str(error):  # only ambiguous prefixes are refused here
            raise
        return None


class TestRewriteIsExact:
    """The rewrite on physical keys selects exactly what the condition selects on logical keys."""

    @given(condition=conditions, key=key_texts, shard=st.integers(min_value=1, max_value=12))
    def test_filter(self, condition: Condition, key: str, shard: int) -> None:
        rewritten = _rewrite(condition, Usage.FILTER)
        if rewritten is not None:
            expected = evaluate(condition, {"file_path": key})
            assert expected == evaluate(rewritten, {"file_path": encode(key, shard)})

    @given(condition=conditions, key=key_texts, shard=st.integers(min_value=1, max_value=12))
    def test_item(self, condition: Condition, key: str, shard: int) -> None:
        rewritten = _rewrite(condition, Usage.ITEM, shard)
        if rewritten is not None:
            assert evaluate(condition, {"file_path": key}) == evaluate(rewritten, {"file_path": encode(key, shard)})
            assert evaluate(condition, None) == evaluate(rewritten, None)  # a missing item

    @given(prefix=key_texts, key=key_texts, shard=st.integers(min_value=1, max_value=12))
    def test_unambiguous_prefix_passes_unchanged(self, prefix: str, key: str, shard: int) -> None:
        if prefix_ambiguity(prefix, "_") is None:
            assert key.startswith(prefix) == encode(key, shard).startswith(prefix)


class TestKnownRewrites:
    """Known rewrites, spelled out."""

    def test_item_equality_uses_the_addressed_shard(self) -> None:
        rewritten = rewrite_condition(Log, Log.file_path == "/f", Usage.ITEM, lambda: 3)
        assert repr(rewritten) == "file_path = {'S': '/f_3'}"

    def test_item_keeps_not_equal(self) -> None:
        rewritten = rewrite_condition(Log, Log.file_path != "/f", Usage.ITEM, lambda: 3)
        assert repr(rewritten) == "file_path <> {'S': '/f_3'}"

    def test_filter_equality_lists_every_shard(self) -> None:
        rewritten = rewrite_condition(HashLog, HashLog.file_path == "/f", Usage.FILTER)
        assert repr(rewritten) == "file_path IN ({'S': '/f#1'}, {'S': '/f#2'}, {'S': '/f#3'})"

    def test_filter_not_equal_and_is_in(self) -> None:
        condition = (HashLog.file_path != "/f") & HashLog.file_path.is_in("/g", "/f_1")
        rewritten = rewrite_condition(HashLog, condition, Usage.FILTER)
        assert repr(rewritten) == (
            "((NOT file_path IN ({'S': '/f#1'}, {'S': '/f#2'}, {'S': '/f#3'})) AND file_path IN "
            "({'S': '/g#1'}, {'S': '/g#2'}, {'S': '/g#3'}, {'S': '/f_1#1'}, {'S': '/f_1#2'}, {'S': '/f_1#3'}))"
        )

    def test_a_value_no_shard_may_hold(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A strategy that reads no shard for a key: nothing equals it, everything differs."""
        monkeypatch.setattr(RandomShards, "read_shards", lambda self, key: ())
        for condition in (Log.file_path == "/f", Log.file_path != "/f", Log.file_path.is_in("/f", "/g")):
            rewritten = rewrite_condition(Log, condition, Usage.FILTER)
            assert rewritten is not None
            for key, shard in (("/f", 1), ("/g", 2)):
                assert evaluate(rewritten, {"file_path": encode(key, shard)}) is (condition.operator == "<>")

    def test_untouched_conditions_are_the_same_object(self) -> None:
        condition = (Log.user_id == "a") & Log.file_path.exists() & Log.file_path.startswith("/f")
        assert rewrite_condition(Log, condition, Usage.FILTER) is condition

    def test_shard_is_not_asked_when_not_needed(self) -> None:
        def no_shard() -> int:
            raise AssertionError("the shard was asked for")

        condition = Log.file_path.does_not_exist() | (Log.user_id == "a")
        assert rewrite_condition(Log, condition, Usage.ITEM, no_shard) is condition

    @pytest.mark.parametrize(
        ("prefix", "separator", "ambiguous"),
        [
            ("/f", "_", None),
            ("/shared/my_dir/", "_", None),  # the separator inside a prefix is fine
            ("/f_", "_", "/f"),
            ("/f_1", "_", "/f"),
            ("/f_12", "_", "/f"),
            ("/f_1x", "_", None),
            ("/f::", "::", "/f"),
            ("/f:", "::", "/f"),
            ("_", "_", None),  # a key is never empty
        ],
    )
    def test_prefix_ambiguity(self, prefix: str, separator: str, ambiguous: str | None) -> None:
        assert prefix_ambiguity(prefix, separator) == ambiguous


class TestRefused:
    """Everything that cannot be rewritten exactly raises, naming Model.attribute and the fix."""

    @pytest.mark.parametrize(
        "condition",
        [
            Log.file_path < "/g",
            Log.file_path >= "/g",
            Log.file_path.between("/a", "/z"),
            Log.file_path.contains("f"),
            size(Log.file_path) == 3,
            Log.file_path == Log.user_id,
            Log.user_id == Log.file_path,
            Log.user_id.is_in(Log.file_path),
            Log.file_path.startswith("/f_1"),
            (Log.user_id == "a") | ~(Log.file_path > "/a"),
            Path("file_path") < "/g",  # the attribute named by its path
        ],
    )
    @pytest.mark.parametrize("usage", [Usage.ITEM, Usage.FILTER, Usage.KEY])
    def test_refused(self, condition: Condition, usage: Usage) -> None:
        with pytest.raises(ShardConditionError, match=r"^Log\.file_path: the .*; .*/errors\.html#condition\)$"):
            rewrite_condition(Log, condition, usage, lambda: 1)

    @pytest.mark.parametrize("condition", [Log.file_path == "/f", Log.file_path.is_in("/f"), ~(Log.file_path == "/f")])
    def test_key_conditions_cannot_list_shards(self, condition: Condition) -> None:
        with pytest.raises(ShardConditionError, match="range_key_condition"):
            rewrite_condition(Log, condition, Usage.KEY)

    def test_key_condition_prefix_passes(self) -> None:
        condition = Log.file_path.startswith("/f")
        assert rewrite_condition(Log, condition, Usage.KEY) is condition

    def test_filter_over_in_limit(self) -> None:
        keys = [f"/k{i}" for i in range(MAX_IN_OPERANDS // 12 + 1)]  # 12 shards each: over 100
        with pytest.raises(ShardConditionError, match=r"IN of 108 physical keys, over DynamoDB's limit of 100"):
            rewrite_condition(Log, Log.file_path.is_in(*keys), Usage.FILTER)
        rewrite_condition(Log, Log.file_path.is_in(*keys[:-1]), Usage.FILTER)  # 96: fine


class ByDay(GlobalSecondaryIndex["DayLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8))


class DayLog(ShardedModel):
    class Meta:
        table_name = "unit_conditions_day"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute(null=True)
    by_day = ByDay()
    shards = Sharding(RandomShards(2))


class TestRefusedOnAShardedIndex:
    """A refusal about a sharded index's attribute names the index and its query, not the table's
    hash key and ``Model.query``."""

    def test_an_inexact_comparison(self) -> None:
        with pytest.raises(ShardConditionError) as raised:
            rewrite_condition(DayLog, DayLog.day > "2016", Usage.FILTER)
        assert str(raised.value).startswith(
            "DayLog.day: the filter_condition `day > {'S': '2016'}` uses > on the sharded hash key of index "
            "'by_day', which DynamoDB stores as '<value>_<shard>' in the index, so it cannot be sent as written; "
            "compare DayLog.day with values using ==, !=, is_in or startswith, which are rewritten to the values "
            "the index stores, or test the logical values in Python after reading."
        )

    def test_too_many_values_advise_the_index_query(self) -> None:
        days = [f"201602{n:02}" for n in range(13)]  # 8 shards each: 104 values
        with pytest.raises(ShardConditionError) as raised:
            rewrite_condition(DayLog, DayLog.day.is_in(*days), Usage.FILTER)
        message = str(raised.value)
        assert "on the sharded hash key of index 'by_day'" in message
        assert message.endswith(
            "listing every shard each value may be stored in makes it IN of 104 physical keys, over DynamoDB's "
            "limit of 100; compare with fewer values at a time, or query each value with DayLog.by_day.query. "
            "(see https://pynamodb-sharding.readthedocs.io/en/latest/errors.html#condition)"
        )

    def test_the_table_key_keeps_its_words(self) -> None:
        keys = [f"/k{i}" for i in range(51)]  # 2 shards each: 102 values
        with pytest.raises(ShardConditionError) as raised:
            rewrite_condition(DayLog, DayLog.file_path.is_in(*keys), Usage.FILTER)
        message = str(raised.value)
        assert "on the sharded hash key, which DynamoDB stores as a physical key ('<key>_<shard>')" in message
        assert "or query each value with DayLog.query." in message
