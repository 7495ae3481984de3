"""Conditions and filters on the sharded hash-key attribute, rewritten to physical keys.

DynamoDB evaluates a condition against what is stored, the physical key
(``logical + separator + shard``), while users write it with the logical key. A comparison
with a value that can be rewritten exactly is rewritten; any other use of the attribute is
refused before a request is sent, so a condition never silently means something else:

* one item whose shard is known (``save``, ``update``, ``delete``, transactions): ``==``,
  ``!=`` and ``is_in`` compare with the value's physical key in that shard;
* items whose shard is unknown (filters of ``scan`` and ``query``): ``==`` becomes ``IN`` of
  every physical key the value may be stored under, ``!=`` its negation, ``is_in`` the union;
* ``startswith`` passes unchanged where no physical key can begin with the prefix unless its
  logical key does; ``exists()``, ``does_not_exist()`` and ``is_type()`` pass unchanged;
* key conditions (the range key of an index whose range key is the sharded attribute) cannot
  use ``IN``: only ``startswith`` passes there, any other use of the attribute is refused.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from pynamodb.expressions.condition import (
    And,
    BeginsWith,
    Comparison,
    Condition,
    Exists,
    In,
    IsType,
    Not,
    NotExists,
    Or,
)
from pynamodb.expressions.operand import Path, Value
from pynamodb.indexes import Index

from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._exceptions import ShardConditionError
from pynamodb_sharding._indexes import ShardedIndex, sharded_indexes_of

__all__ = [
    "MAX_IN_OPERANDS",
    "Usage",
    "check_item_condition",
    "prefix_ambiguity",
    "rewrite_condition",
]

#: DynamoDB's limit on the values of one ``IN`` comparison.
MAX_IN_OPERANDS = 100

_OPERATORS = {
    "=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "BETWEEN": "between",
    "IN": "is_in", "begins_with": "startswith", "contains": "contains",
}


class Usage(enum.Enum):
    """Where a condition is sent, which decides what the sharded attribute holds there."""

    #: A condition on one item whose physical key (so its shard) the request addresses.
    ITEM = "condition"
    #: A filter over items whose shards are unknown.
    FILTER = "filter_condition"
    #: A key condition (``range_key_condition``), which cannot use ``IN``.
    KEY = "range_key_condition"


def prefix_ambiguity(prefix: str, separator: str) -> str | None:
    """The logical key whose physical keys may begin with ``prefix`` although it does not.

    A physical key ``k + separator + shard`` begins with ``prefix`` exactly when ``k`` does,
    unless ``prefix`` is ``k`` followed by a non-empty start of ``separator + shard``. Returns
    the shortest such ``k``, or ``None`` when ``begins_with`` on the physical key is exact.
    """
    for cut in range(1, len(prefix)):
        tail = prefix[cut:]
        digits = tail[len(separator):]
        if separator.startswith(tail) or (
            tail.startswith(separator) and digits.isdecimal() and digits.isascii()
        ):
            return prefix[:cut]
    return None


def _comparison(operator: str, path: Path, value: Value) -> Condition:
    return Comparison(operator, path, value)  # type: ignore[no-untyped-call]  # untyped in PynamoDB


def _in(path: Path, values: list[Value]) -> Condition:
    return In(path, *values)  # type: ignore[no-untyped-call]  # untyped in PynamoDB


class _Rewriter:
    """One walk of a condition tree: refuses, or rebuilds the parts that name the attribute."""

    def __init__(
        self,
        model: type[Any],
        usage: Usage,
        shard: Callable[[], int] | None,
        *,
        validate_only: bool = False,
        index: ShardedIndex | None = None,
    ) -> None:
        manager = shard_manager(model) if index is None else index.manager
        self.model = model
        self.usage = usage
        self.shard = shard
        self.validate_only = validate_only  # refuse what must be refused, rewrite nothing
        self.item_shard: int | None = None
        self.manager = manager
        self.separator = manager.separator
        self.attr_name = manager.hash_attribute.attr_name if index is None else index.attr_name
        self.where = f"{model.__name__}.{manager.attribute}"
        if index is None:
            self.what = "the sharded hash key"
            self.stored_as = f"a physical key ('<key>{self.separator}<shard>')"
            self.query = f"{model.__name__}.query"
            self.stored_values = "physical keys"
            self.logical_values = "logical keys"
        else:
            self.what = f"the sharded hash key of index {index.index_name!r}"
            self.stored_as = f"'<value>{self.separator}<shard>' in the index"
            self.query = _index_query(model, index.index_name)
            self.stored_values = "the values the index stores"
            self.logical_values = "logical values"

    # -- finding the attribute -----------------------------------------------------------------

    def names_attribute(self, operand: object) -> bool:
        return isinstance(operand, Path) and operand.path == [self.attr_name]

    def mentions(self, node: object) -> bool:
        """Whether the condition or operand reads the sharded attribute anywhere.

        Any operand that wraps others (``size(path)``, and whatever PynamoDB adds later) is
        searched, so an unknown use of the attribute is refused rather than sent.
        """
        if self.names_attribute(node):
            return True
        if isinstance(node, Path | Value):
            return False
        inner = getattr(node, "values", None)
        return isinstance(inner, tuple) and any(self.mentions(value) for value in inner)

    # -- refusing ------------------------------------------------------------------------------

    def refuse(self, condition: Condition, fix: str) -> ShardConditionError:
        operator = _OPERATORS.get(condition.operator, condition.operator)
        msg = (
            f"{self.where}: the {self.usage.value} `{condition!r}` uses {operator} on {self.what}, "
            f"which DynamoDB stores as {self.stored_as}, so it cannot be sent as written; {fix}"
        )
        return ShardConditionError(msg)

    def refuse_other(self, condition: Condition) -> ShardConditionError:
        if self.usage is Usage.KEY:
            return self.refuse(
                condition,
                f"a key condition cannot list every shard's physical key (DynamoDB allows no IN "
                f"there, nor a filter on an index key); use only startswith on {self.where} in "
                f"range_key_condition, or query without it and compare item.{self.manager.attribute} "
                f"in Python.",
            )
        return self.refuse(
            condition,
            f"compare {self.where} with values using ==, !=, is_in or startswith, which are "
            f"rewritten to {self.stored_values}, or test the {self.logical_values} in Python after reading.",
        )

    # -- the walk ------------------------------------------------------------------------------

    def visit(self, condition: Condition) -> Condition:
        if isinstance(condition, And | Or):
            first, second = condition.values
            new_first, new_second = self.visit(first), self.visit(second)
            if new_first is first and new_second is second:
                return condition
            return type(condition)(new_first, new_second)
        if isinstance(condition, Not):
            (inner,) = condition.values
            new_inner = self.visit(inner)
            return condition if new_inner is inner else Not(new_inner)
        if not self.mentions(condition):
            return condition
        values = condition.values
        if self.usage is Usage.KEY:
            # A key condition cannot use IN or NOT; only an exact prefix passes as it is.
            if isinstance(condition, BeginsWith) and self.names_attribute(values[0]) and isinstance(values[1], Value):
                return self.begins_with(condition, values[1])
            raise self.refuse_other(condition)
        if isinstance(condition, Exists | NotExists | IsType) and self.names_attribute(values[0]):
            return condition  # existence and type are the same for logical and physical keys
        if isinstance(condition, Comparison) and condition.operator in ("=", "<>"):
            lhs, rhs = values
            if self.names_attribute(lhs) and isinstance(rhs, Value):
                return self.compare(condition, lhs, rhs)
            if self.names_attribute(rhs) and isinstance(lhs, Value):
                return self.compare(condition, rhs, lhs)
        if isinstance(condition, In) and self.names_attribute(values[0]) and all(
            isinstance(value, Value) for value in values[1:]
        ):
            return self.is_in(condition, values[0], values[1:])
        if isinstance(condition, BeginsWith) and self.names_attribute(values[0]) and isinstance(values[1], Value):
            return self.begins_with(condition, values[1])
        raise self.refuse_other(condition)

    # -- the rewrites --------------------------------------------------------------------------

    @staticmethod
    def logical(value: Value) -> str | None:
        """The logical key a value names; ``None`` for one no key can equal (kept as it is)."""
        serialized: dict[str, Any] = value.value
        text = serialized.get("S")
        return text if isinstance(text, str) and text else None

    def physical_values(self, condition: Condition, values: tuple[Value, ...]) -> list[Value]:
        """The values to compare the stored attribute with, in place of logical ``values``."""
        result: list[Value] = []
        seen: set[str] = set()
        for value in values:
            key = self.logical(value)
            if key is None:
                result.append(value)  # not a string key: compares the same with any stored key
                continue
            if self.validate_only:
                continue
            if self.shard is not None:
                if self.item_shard is None:
                    self.item_shard = self.shard()
                shards: tuple[int, ...] = (self.item_shard,)
            else:
                shards = self.manager.read_targets(key)
            for shard in shards:
                # Not codec.encode: a key over DynamoDB's length limit is just never stored.
                physical = self.manager.codec.encode_unchecked(key, shard)
                if physical not in seen:
                    seen.add(physical)
                    result.append(Value({"S": physical}))
        if len(result) > MAX_IN_OPERANDS and self.shard is None:
            raise self.refuse(
                condition,
                f"listing every shard each value may be stored in makes it IN of {len(result)} "
                f"physical keys, over DynamoDB's limit of {MAX_IN_OPERANDS}; compare with fewer "
                f"values at a time, or query each value with {self.query}.",
            )
        return result

    def compare(self, condition: Condition, path: Path, value: Value) -> Condition:
        if self.validate_only or self.logical(value) is None:
            return condition
        physical = self.physical_values(condition, (value,))
        if not physical:  # no shard may hold the value (a strategy reading none): nothing equals it
            nothing = NotExists(path)  # type: ignore[no-untyped-call]  # untyped in PynamoDB
            return nothing if condition.operator == "=" else Not(nothing)
        matches = _comparison("=", path, physical[0]) if len(physical) == 1 else _in(path, physical)
        if condition.operator == "=":
            return matches
        if self.shard is not None:  # one value: keep <>, which treats a missing item as DynamoDB does
            return _comparison("<>", path, physical[0])
        return Not(matches)  # a filter only sees stored items, which always have the key

    def is_in(self, condition: Condition, path: Path, values: tuple[Value, ...]) -> Condition:
        if self.validate_only:
            return condition
        physical = self.physical_values(condition, values)
        if values and not physical:  # no shard may hold any of the values: nothing is in them
            nothing: Condition = NotExists(path)  # type: ignore[no-untyped-call]  # untyped in PynamoDB
            return nothing
        return _in(path, physical)

    def begins_with(self, condition: Condition, prefix: Value) -> Condition:
        text = prefix.value.get("S")
        if not isinstance(text, str):
            return condition  # a binary prefix never matches a string key, logical or physical
        key = prefix_ambiguity(text, self.separator)
        if key is None:
            return condition
        raise self.refuse(
            condition,
            f"the physical keys of {key!r} begin with {text!r} too, although {key!r} does not; "
            f"use a prefix that does not end in {self.separator!r} (optionally followed by digits), "
            f"or test the logical keys in Python after reading.",
        )


def rewrite_condition(
    model: type[Any],
    condition: Condition | None,
    usage: Usage,
    shard: Callable[[], int] | None = None,
) -> Condition | None:
    """Rewrite ``condition`` so that it means on physical keys what it means on logical keys.

    Args:
        model: the sharded model whose hash-key attribute the condition may name.
        condition: the user's condition (``None`` passes through).
        usage: where the condition is sent.
        shard: for :attr:`Usage.ITEM`, returns the shard of the item the request addresses;
            called only when a comparison needs it.

    Returns:
        The condition to send: the same object when it does not compare the attribute.

    Raises:
        ShardConditionError: the condition uses the attribute in a way that cannot be
            rewritten exactly; raised before ``shard`` is called or anything is sent.
    """
    if condition is None:
        return None
    if usage is Usage.ITEM and shard is None:
        msg = "rewrite_condition(usage=Usage.ITEM) needs the item's shard"
        raise TypeError(msg)
    if usage is not Usage.ITEM:
        shard = None
    sharded = _suffixed_indexes(model)
    table = not shard_manager(model).index_only  # a model that shards only an index stores its keys as they are
    # Refuse before any request: finding the item's shard may read, a filter's shards too.
    if table:
        _Rewriter(model, usage, None, validate_only=True).visit(condition)
    for index in sharded:
        _Rewriter(model, usage, None, validate_only=True, index=index).visit(condition)
    rewritten = _Rewriter(model, usage, shard).visit(condition) if table else condition
    for index in sharded:
        # An item's index shard is not what its request addresses: compare with every
        # physical value the logical one may be stored under, exactly as a filter does.
        rewritten = _Rewriter(model, usage, None, index=index).visit(rewritten)
    return rewritten


def check_item_condition(model: type[Any], condition: Condition | None) -> None:
    """Raise :class:`ShardConditionError` now if ``condition`` would be refused for one item.

    For the writes whose strategy reads or locates before the shard is known.
    """
    if condition is not None:
        if not shard_manager(model).index_only:
            _Rewriter(model, Usage.ITEM, None, validate_only=True).visit(condition)
        for index in _suffixed_indexes(model):
            _Rewriter(model, Usage.ITEM, None, validate_only=True, index=index).visit(condition)


def _index_query(model: type[Any], index_name: str) -> str:
    """How the user queries the index: ``AuditLog.by_day.query`` (the attribute the index is
    declared as), else ``AuditLog.query(..., index_name='by_day')``."""
    for owner in model.__mro__:
        for name, value in vars(owner).items():
            if isinstance(value, Index) and getattr(value.Meta, "index_name", None) == index_name:
                return f"{model.__name__}.{name}.query"
    return f"{model.__name__}.query(..., index_name={index_name!r})"


def _suffixed_indexes(model: type[Any]) -> tuple[ShardedIndex, ...]:
    """The sharded indexes whose attribute is stored suffixed: conditions on it need rewriting
    (a ``layout="multi_attribute"`` index stores the value as it is)."""
    return tuple(index for index in sharded_indexes_of(model).values() if index.shard_attr_name is None)
