"""How a logical query maps onto DynamoDB queries: the streams to read, their keys, their sizes.

Planning sends nothing: :func:`plan_query` turns a model, a logical key and an index into one
stream per shard (the physical key or index partition each queries, the first reads of what a
job may be moving items out of) and the cursor's scope; the sizing functions say how many items
each shard request asks for and how many run at once.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.indexes import GlobalSecondaryIndex

from pynamodb_sharding._cursor import CursorScope, RawItem, RawKey, cursor_or_none
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._exceptions import ConsistentIndexReadError, ShardKeyError, UnknownIndexError
from pynamodb_sharding._host import discriminator_attribute, index_hash_attribute, indexes, table_connection
from pynamodb_sharding._indexes import backfill_pending, sharded_index
from pynamodb_sharding._keys import FIRST_READ, LEGACY_SHARD
from pynamodb_sharding._merge import SHARE_SLACK, CopyFlag, sort_value

__all__ = [
    "DEFAULT_BUFFERED_ITEMS",
    "MAX_DEFAULT_WORKERS",
    "ONE_ROUND_TRIP_MISS",
    "SHARE_MIN_PER_SHARD",
    "IndexPartition",
    "QueryPlan",
    "QuerySpec",
    "admits",
    "closed_end",
    "condition_from",
    "copies_of_moving_items",
    "default_page_size",
    "default_workers",
    "first_share",
    "is_sharded_index",
    "one_round_trip_share",
    "plan_query",
    "range_end",
    "with_class_filter",
]

@attrs.frozen(kw_only=True)
class QuerySpec:
    """What a caller asked of one query: ``Model.query``'s arguments, built once where the
    caller gave them and passed whole to the routes and the fan-out (by name only, so
    ``limit`` and ``page_size``, both ``int | None``, cannot be swapped)."""

    hash_key: Any
    range_key_condition: Condition | None = None
    filter_condition: Condition | None = None
    consistent_read: bool = False
    index_name: str | None = None
    scan_index_forward: bool | None = None
    limit: int | None = None
    last_evaluated_key: Any = attrs.field(default=None, converter=cursor_or_none)
    attributes_to_get: Iterable[str] | None = None
    page_size: int | None = None
    rate_limit: float | None = None

    def arguments(self) -> dict[str, Any]:
        """The spec as ``Model.query``'s keyword arguments."""
        return {field.name: getattr(self, field.name) for field in attrs.fields(QuerySpec)}


#: Threads a merged query uses at most when the model does not say (``Sharding(max_workers=)``).
MAX_DEFAULT_WORKERS = 32

#: Items a merged query of up to 160 shards holds at most, over all shards, when neither
#: ``page_size`` nor a smaller ``limit`` is given: each shard's page and its prefetched next
#: page. DynamoDB's own 1 MB pages parse to several MB of Python objects each, which over 16
#: shards would be hundreds of MB; this bound keeps a merged query's memory near a plain
#: query's. Above 160 shards the floor of 100 items a page wins (see :func:`default_page_size`).
DEFAULT_BUFFERED_ITEMS = 32_000


#: With ``Sharding(page_reads="fewest_items")``: below this many items per shard of a
#: ``limit``, a shard read again is asked for at least its first share, not a share of the few
#: items still wanted (which would cost a round trip after another).
SHARE_MIN_PER_SHARD = 5
#: ``page_reads="one_round_trip"``: the chance that some shard of a page needs a second request.
ONE_ROUND_TRIP_MISS = 0.05


@functools.lru_cache(maxsize=1024)
def one_round_trip_share(limit: int, shards: int) -> int:
    """Items to ask each of ``shards`` shards for, so that a page of ``limit`` items of randomly
    spread data needs a second request to some shard with a chance of at most
    :data:`ONE_ROUND_TRIP_MISS`.

    A shard is read again when it holds at least as many of the page's first ``limit - 1``
    items as it was asked for; that count is binomial (``limit - 1`` items, ``1 / shards``
    each). The share is the smallest count whose upper tail is at most the miss chance divided
    by the shards (the union bound), never more than ``limit``.
    """
    shards = max(1, shards)
    if shards == 1 or limit <= 1:
        return max(1, limit)
    n, p = limit - 1, 1.0 / shards
    bound = ONE_ROUND_TRIP_MISS / shards
    tail, pmf = 1.0, (1.0 - p) ** n  # P(X >= 0) and P(X = 0)
    if pmf < 1e-200:  # thousands of items a shard: the normal approximation, exact enough
        spread = math.sqrt(n * p * (1.0 - p))
        z = statistics.NormalDist().inv_cdf(1.0 - bound)
        return min(limit, math.ceil(n * p + z * spread + 0.5))
    for k in range(n + 1):
        tail -= pmf  # now P(X >= k + 1)
        if tail <= bound:
            return min(limit, k + 1)
        pmf *= (n - k) / (k + 1) * p / (1.0 - p)
    return limit


def first_share(limit: int, shards: int, page_reads: str = "one_round_trip") -> tuple[float, int]:
    """The ``(share_slack, share_extra)`` of a merged query of ``limit`` items over ``shards``:
    the merge first asks each shard for ``ceil(share_slack x limit / shards) + share_extra``.

    ``"one_round_trip"``: :func:`one_round_trip_share`. ``"fewest_items"``: 1.5 x each shard's
    share, so that a page reads about ``1.5 x limit + shards`` items.
    """
    if page_reads == "fewest_items":
        return SHARE_SLACK, 0
    lean = -(-int(SHARE_SLACK * limit) // max(1, shards))
    return SHARE_SLACK, one_round_trip_share(limit, shards) - lean


def default_page_size(shard_count: int, limit: int | None) -> int:
    """Each shard's ``Limit`` when the caller gives no ``page_size``: ``limit``, capped for memory.

    The cap keeps the pages a merged query holds, one current and one prefetched per shard,
    within :data:`DEFAULT_BUFFERED_ITEMS` items in all (16,000 items a page for 1 shard, 1,000
    for 16, 100 for 160), but never takes a page below 100 items, so that many shards still
    read efficiently. Above 160 shards that floor wins and the pages held grow with the shard
    count, 200 items per shard: 32,200 items at 161 shards, 200,000 at 1,000.

    Args:
        shard_count: the shards the query reads.
        limit: the caller's ``limit`` (merged items wanted), or ``None``.

    Returns:
        The ``Limit`` of each shard's request: at least 1, never more than ``limit``.
    """
    bound = max(100, DEFAULT_BUFFERED_ITEMS // (2 * max(1, shard_count)))
    return bound if limit is None else min(limit, bound)


def default_workers(model: type[Any], shard_count: int) -> int:
    """Threads of a merged query: ``Sharding(max_workers=)``, else ``min(32, shard_count)``."""
    configured = shard_manager(model).max_workers
    workers = configured if configured is not None else min(MAX_DEFAULT_WORKERS, shard_count)
    return max(1, min(workers, shard_count))



def range_end(model: type[Any], condition: Condition | None, index_name: str | None) -> Any:
    """The largest value of the range key that a table query's key ``condition`` admits, as
    stored (``"1456444800"``, a datetime's text), when the model declares ``written_at`` and the
    condition bounds it from above (``<``, ``<=``, ``=``, ``between``); else ``None``."""
    written = shard_manager(model).written_at
    if written is None or condition is None or index_name is not None:
        return None
    name = model.get_attributes()[written.attribute].attr_name
    operands = condition.values
    path = operands[0] if operands else None
    if getattr(path, "path", None) != [name]:
        return None
    if condition.operator in ("<", "<=", "=") and len(operands) == 2:
        bound = operands[1]
    elif condition.operator == "BETWEEN" and len(operands) == 3:
        bound = operands[2]
    else:
        return None
    value = getattr(bound, "value", None)  # a Value operand: {"N": "..."} or {"S": "..."}
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((_, stored),) = value.items()
    return stored


def closed_end(condition: Condition | None, forward: bool) -> Mapping[str, Any] | None:
    """The last value a table query's key ``condition`` admits in the reading direction, when it
    is a bound the condition includes (``=``; ``<=`` or ``BETWEEN``'s upper bound read forward,
    ``>=`` or its lower bound read backward); else ``None``.

    A shard whose resume key sits on that value has nothing left, and DynamoDB refuses the
    request ("The provided starting key does not match the range key predicate"), so
    :class:`ShardQuery` does not send it. Only for table queries: their sort key is unique
    within a partition.
    """
    if condition is None:
        return None
    operands = condition.values
    if condition.operator == "BETWEEN" and len(operands) == 3:
        bound = operands[2] if forward else operands[1]
    elif condition.operator in ("=", "<=" if forward else ">=") and len(operands) == 2:
        bound = operands[1]
    else:
        return None
    value = getattr(bound, "value", None)
    return value if isinstance(value, dict) and len(value) == 1 else None



@attrs.frozen
class IndexPartition:
    """One partition of a ``layout="multi_attribute"`` index: the queried value, and the
    equality on the shard attribute that completes the index's partition key."""

    value: str
    condition: Condition


@attrs.frozen
class QueryPlan:
    """How one logical query maps onto DynamoDB queries."""

    scope: CursorScope
    hash_name: str  # the attribute the key condition names (the table's or the index's)
    hash_values: Mapping[int, Any]  # shard -> the value its requests query
    key_names: tuple[str, ...]
    sort_name: str | None
    hash_value: Callable[[int], object]
    #: The number attribute a multi-attribute index stores the shard in (start keys hold it).
    shard_name: str | None = None
    #: The streams read before every other one, whose items yield to copies in the others: what
    #: items may be moving out of (a bare legacy key or value, shards a job empties).
    first_reads: frozenset[int] = frozenset()


def plan_query(
    model: type[Any],
    hash_key: Any,
    shards: Sequence[int] | None,
    index_name: str | None,
    consistent_read: bool,
    forward: bool,
    *,
    until: Any = None,
) -> QueryPlan:
    """``shards`` defaults to every shard ``read_shards`` names for a sharded table or index;
    with ``until`` (the end of a table query's range on a ``written_at`` range key), without
    the shards first used after it."""
    given = shards
    if shards is None and until is not None and index_name is None:
        shards = shard_manager(model).read_shards_until(hash_key, until)
    elif shards is None and (index_name is None or is_sharded_index(model, index_name)):
        shards = shard_manager(model).read_targets(hash_key)  # with the bare legacy key, if any
    shards = shards or ()
    meta = table_connection(model).get_meta_table()
    table_hash = meta.hash_keyname
    table = model.Meta.table_name
    hash_name = table_hash
    sort_name = meta.range_keyname
    if index_name is not None:
        index = indexes(model).get(index_name)
        if index is None:
            msg = (
                f"{model.__name__}.query: the model has no index {index_name!r}; "
                f"use one of {sorted(indexes(model))} or index_name=None."
            )
            raise UnknownIndexError(msg)
        if consistent_read and isinstance(index, GlobalSecondaryIndex):
            msg = (
                f"{model.__name__}.{type(index).__name__}({index_name!r}): global secondary indexes "
                f"do not support strongly consistent reads; pass consistent_read=False, or query "
                f"the table itself for a consistent read."
            )
            raise ConsistentIndexReadError(msg)
        hash_name = meta.get_index_hash_keyname(index_name)
        sort_name = meta.get_index_range_keyname(index_name)  # type: ignore[no-untyped-call]
    key_names = tuple(meta.get_key_names(index_name))  # type: ignore[no-untyped-call]
    index = sharded_index(model, index_name)
    if index is not None:
        # A sharded global index: one query per index shard of the logical value.
        index_manager = index.manager
        shard_name = index.shard_attr_name
        if shard_name is not None and index_manager.legacy_unsharded:
            raise backfill_pending(model, index)
        # With the bare value too while the index may hold bare entries (legacy_unsharded).
        index_shards = given if given is not None else index_manager.read_targets(hash_key)
        scope = CursorScope(model.__name__, table, {"S": hash_key}, index_name, forward)
        if shard_name is not None:
            def partition(shard: int) -> IndexPartition:
                index_manager.physical_key(hash_key, shard)  # refuses a shard the value cannot have
                number = Path([shard_name]) == Value({"N": str(shard)})
                return IndexPartition(hash_key, number)

            def logical_value(shard: int) -> object:
                index_manager.physical_key(hash_key, shard)
                return hash_key

            partitions = {shard: partition(shard) for shard in index_shards}
            return QueryPlan(scope, hash_name, partitions, (*key_names, shard_name), sort_name,
                              logical_value, shard_name)
        values = {shard: index_manager.physical_key(hash_key, shard) for shard in index_shards}
        return QueryPlan(scope, hash_name, values, key_names, sort_name,
                          lambda shard: index_manager.physical_key(hash_key, shard),
                          first_reads=frozenset(shard for shard in values if shard == LEGACY_SHARD))
    if hash_name != table_hash:
        # An index keyed by another attribute is not sharded: one plain query, labelled shard 1.
        attribute = index_hash_attribute(indexes(model)[index_name or ""])
        value = attribute.serialize(hash_key)
        scope = CursorScope(model.__name__, table, {attribute.attr_type: value}, index_name, forward)

        def plain_value(shard: int) -> object:
            if shard != 1:
                msg = f"{model.__name__}: an unsharded index query has one stream, not shard {shard}."
                raise ShardKeyError(msg)
            return value

        return QueryPlan(scope, hash_name, {1: value}, key_names, sort_name, plain_value)
    manager = shard_manager(model)
    hash_values = {shard: manager.physical_key(hash_key, shard) for shard in shards}
    first_reads: set[int] = set()
    if given is None:
        # A job may be moving items out of some shards (the bare key, shards above the count,
        # an older layout's): they are read first, so an item moved while the query runs is
        # seen there or in its new shard, never in neither; a shard the current layout writes
        # too is read twice, as a first-read stream of its own.
        moving = manager.moving_out(hash_key, tuple(shards))
        if moving:
            current = set(manager.read_shards(hash_key)) - set(moving) if not manager.keeps_keys_unique else set(
                range(manager.first_shard, manager.first_shard + manager.shard_count(hash_key)))
            for shard in moving:
                if shard in current:
                    hash_values[FIRST_READ + shard] = hash_values[shard]
                    first_reads.add(FIRST_READ + shard)
                else:
                    first_reads.add(shard)
    scope = CursorScope(model.__name__, table, {"S": hash_key}, index_name, forward)

    def table_value(shard: int) -> object:
        if shard >= FIRST_READ and shard in first_reads:
            return manager.physical_key(hash_key, shard - FIRST_READ)
        return manager.physical_key(hash_key, shard)

    return QueryPlan(scope, hash_name, hash_values, key_names, sort_name, table_value,
                      first_reads=frozenset(first_reads))


def copies_of_moving_items(
    model: type[Any], index_name: str | None, table_hash: str, table_sort: str | None,
) -> tuple[Callable[[RawItem], tuple[Any, CopyFlag]], Callable[[RawKey], bool]] | None:
    """For an index query while table items may be moving: what makes two entries copies of
    one item, and whether a start key may be resumed after (``ShardMerge(copies=...,
    resumes_after=...)``); else ``None``.

    A job moves a table item by putting its new copy and deleting the old one in one
    transaction, but a query sees a transaction's writes one by one (read-committed), and an
    index follows its table a moment later: an index query may find both copies, under two
    physical keys of one logical key. Of two entries of one logical primary key at one index
    sort value, the second is then not returned when one of them is a bare legacy item (the
    table is being adopted: ``legacy_unsharded``), when the strategy keeps logical keys
    unique (a second item of one logical key can only be a copy), or when one of them is in a
    shard a job moves items out of (above a random or dynamic key's lowered count), as a table
    query's first reads treat them.
    A bare start key is resumed after only when the cursor says the query returned it
    (``CursorState.returned``): a read may have dropped it as a stale copy before the merge
    (see ``without_stale_bare_copies``), and then its copy is the item.
    """
    if index_name is None:
        return None
    manager = shard_manager(model)
    unique = manager.keeps_keys_unique
    codec = manager.codec

    def decoded(item: RawKey) -> tuple[str, int] | None:
        try:
            return codec.decode(item[table_hash].get("S"))
        except (ShardKeyError, KeyError):  # not this model's key
            return None

    def copies(item: RawItem) -> tuple[Any, CopyFlag]:
        sort = sort_value(item[table_sort]) if table_sort is not None else b""
        key = decoded(item)
        if key is None:  # only equal physical keys are one item
            return (item[table_hash].get("S"), sort), False
        logical, shard = key
        if unique or shard == LEGACY_SHARD:
            return (logical, sort), True
        # Random and dynamic layouts: a copy only in a shard a job moves items out of (above a
        # lowered count), told only when two entries of one identity meet (it reads the count).
        return (logical, sort), lambda: bool(manager.moving_out(logical, (shard,)))

    def resumes_after(start: RawKey) -> bool:
        key = decoded(start)
        return key is not None and key[1] != LEGACY_SHARD

    return copies, resumes_after


def with_class_filter(model: type[Any], filter_condition: Condition | None) -> Condition | None:
    # As PynamoDB's Model.query: a polymorphic model only reads items of its own classes.
    discriminator = discriminator_attribute(model)
    if discriminator:
        filter_condition &= discriminator.is_in(*discriminator.get_registered_subclasses(model))
    return filter_condition



def is_sharded_index(model: type[Any], index_name: str) -> bool:
    index = indexes(model).get(index_name)
    if index is None:
        return True  # _plan reports the unknown index
    meta = table_connection(model).get_meta_table()
    return bool(meta.get_index_hash_keyname(index_name) == meta.hash_keyname)



#: The longest sort key DynamoDB stores, in bytes: every string with a given prefix sorts at or
#: below the prefix padded to it with the highest characters.
_MAX_SORT_KEY_BYTES = 1024
# The highest character of each UTF-8 length (1 to 4 bytes).
_HIGHEST = {1: "\x7f", 2: "\u07ff", 3: "\uffff", 4: "\U0010ffff"}


def _highest_with_prefix(prefix: Mapping[str, Any]) -> dict[str, Any]:
    """The highest sort key that begins with ``prefix`` (an ``S`` or ``B`` value): the prefix
    padded to DynamoDB's longest sort key with the highest characters (bytes)."""
    ((kind, inner),) = prefix.items()
    if kind == "B":
        raw = bytes(inner) if isinstance(inner, bytes | bytearray) else inner.encode()
        return {"B": raw + b"\xff" * max(0, _MAX_SORT_KEY_BYTES - len(raw))}
    text = str(inner)
    left = max(0, _MAX_SORT_KEY_BYTES - len(text.encode("utf-8")))
    tail = _HIGHEST[4] * (left // 4) + (_HIGHEST[left % 4] if left % 4 else "")
    return {"S": text + tail}


def condition_from(
    condition: Condition | None, name: str, value: Mapping[str, Any], forward: bool,
) -> tuple[Condition, Callable[[RawItem], bool] | None]:
    """The key condition of a stream that a resumed index query starts at a position's sort key
    ``value``, included: ``condition`` (the query's own, on the sort key ``name``) from ``value``
    on in the reading direction, and a check of each item read that is ``None`` when the
    condition admits exactly what it should, else keeps only what ``condition`` admits (a
    strict bound read as an inclusive one: DynamoDB's key conditions have one clause).

    ``value`` is the sort key of an item the query returned, so ``condition`` admits it.
    """
    path = Path([name])
    at = Value(dict(value))
    operator = condition.operator if condition is not None else None
    operands: list[Any] = ([getattr(operand, "value", None) for operand in condition.values[1:]]
                           if condition is not None else [])
    if condition is None or (operator in (">", ">=") if forward else operator in ("<", "<=")):
        return (path >= at if forward else path <= at), None
    if operator == "=":
        return condition, None
    if operator == "BETWEEN":
        return (path.between(at, Value(operands[1])) if forward else path.between(Value(operands[0]), at)), None
    if operator == "begins_with":
        prefix = operands[0]
        if forward:
            return path.between(at, Value(_highest_with_prefix(prefix))), None
        return path.between(Value(prefix), at), None
    # A bound on the other side: between the position and it, a strict one dropped by the check.
    (bound,) = operands
    bounded = path.between(at, Value(bound)) if forward else path.between(Value(bound), at)
    if operator in ("<=", ">="):
        return bounded, None
    excluded = sort_value(bound)
    return bounded, lambda item: sort_value(item[name]) != excluded


def admits(condition: Condition | None, value: Mapping[str, Any]) -> bool:
    """Whether a key ``condition`` on the sort key admits ``value`` (a raw key value); ``True``
    for a condition it cannot judge (DynamoDB does)."""
    if condition is None:
        return True
    operands: list[Any] = [getattr(operand, "value", None) for operand in condition.values[1:]]
    if not all(isinstance(operand, dict) and len(operand) == 1 for operand in operands):
        return True
    if any(set(operand) != set(value) for operand in operands):
        return False  # another type: DynamoDB refuses such a start key
    have: Any = sort_value(value)
    bounds: list[Any] = [sort_value(operand) for operand in operands]
    operator = condition.operator
    if operator == "BETWEEN":
        return bool(bounds[0] <= have <= bounds[1])
    if operator == "begins_with":
        return bool(have[:len(bounds[0])] == bounds[0])
    comparisons: dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: bool(a == b), "<": lambda a, b: bool(a < b), "<=": lambda a, b: bool(a <= b),
        ">": lambda a, b: bool(a > b), ">=": lambda a, b: bool(a >= b),
    }
    compare = comparisons.get(operator)
    return True if compare is None else compare(have, bounds[0])
