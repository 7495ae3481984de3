"""Adopting sharding in place: the unsharded items of a ``legacy_unsharded`` table.

A model declared ``Sharding(strategy, legacy_unsharded=True)`` writes to shards at once while
its table still holds items under bare logical keys (``sensor_2016``, no shard suffix). Its
reads cover the bare key too (see :doc:`adoption`). This module moves those items into shards
one by one (:func:`move_legacy_item`, what the migration runs for every legacy item) and finds
the bare keys that would be read wrongly (:func:`find_ambiguous_keys`,
:func:`check_legacy_keys`).
"""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from botocore.exceptions import BotoCoreError, ClientError

from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._exceptions import AmbiguousLegacyKeyError, LegacyMoveError, ShardingError, ShardLocationError
from pynamodb_sharding._host import botocore_client, unchanged_condition
from pynamodb_sharding._keys import LEGACY_SHARD, MAX_TRANSACTION_ITEMS, KeyCodec
from pynamodb_sharding._sizes import transaction_write_units

__all__ = [
    "SEPARATOR_CANDIDATES",
    "MoveCapacity",
    "MoveOutcome",
    "check_legacy_keys",
    "find_ambiguous_keys",
    "legacy_target_shard",
    "move_and_count",
    "move_legacy_item",
]

#: Separators :func:`check_legacy_keys` proposes, in order, when the model's is ambiguous.
SEPARATOR_CANDIDATES = ("#", "|", "~", "!", "::", "#~")

RawItem = dict[str, Any]


class MoveOutcome(enum.Enum):
    """What :func:`move_legacy_item` found and did.

    .. versionadded:: 0.1.0
    """

    #: The legacy item was put in its shard and deleted from its bare key, in one transaction.
    MOVED = "moved"
    #: The bare key no longer held the item and a shard does: a move (this one retried, or
    #: another process's) already happened.
    ALREADY_MOVED = "already_moved"
    #: A shard already held the item (written there by the application), which wins: the stale
    #: legacy copy was deleted.
    SHADOWED = "shadowed"
    #: Neither the bare key nor a shard holds the item: it was deleted.
    GONE = "gone"


@attrs.define
class MoveCapacity:
    """The capacity units the requests of legacy moves consumed, as DynamoDB reported them.

    Every request of a move asks for ``ReturnConsumedCapacity``; a request DynamoDB refused
    (a cancelled transaction, a failed condition) reports none. A moving transaction counts
    what DynamoDB bills for it (2 units a KB for the put and the delete, 2 for each shard
    checked) when the server reports less, as DynamoDB Local does.

    .. versionadded:: 0.1.0
    """

    #: Units of the writes: the moving transaction, the delete of a shadowed bare copy.
    write_units: float = 0.0
    #: Units of the reads: the bare key and the shards read again after a failed attempt.
    read_units: float = 0.0


def _units(reply: Mapping[str, Any]) -> float:
    capacity = reply.get("ConsumedCapacity") or []
    if isinstance(capacity, Mapping):
        capacity = [capacity]
    return float(sum(entry.get("CapacityUnits", 0.0) for entry in capacity))


def _require_legacy(model: type[Any]) -> KeyCodec:
    manager = shard_manager(model)
    if not manager.legacy_unsharded:
        msg = (
            f"{manager.codec.where}: move_legacy_item moves the bare legacy items of a table adopted "
            f"in place, but {model.__name__} is not declared legacy_unsharded; declare "
            f"Sharding(..., legacy_unsharded=True) while the table still holds unsharded items."
        )
        raise LegacyMoveError(msg)
    return manager.codec


def legacy_target_shard(model: type[Any], item: Any) -> int:
    """The shard a legacy item moves to, derived from its primary key alone.

    A strategy that computes shards (``HashedShards``) gives its own shard; a random or dynamic
    one gives ``md5(logical key + range key) % shard_count + first shard``, so a move retried or
    run again addresses the same physical key and overwrites nothing twice.

    .. versionadded:: 0.1.0
    """
    return shard_manager(model).legacy_target_shard(item)


def move_legacy_item(model: type[Any], raw_item_or_key: Any, *, max_attempts: int = 5) -> MoveOutcome:
    """Move one legacy item of ``model``'s table from its bare key into its shard, atomically.

    One TransactWriteItems puts the sharded copy (only if that physical key holds nothing, and,
    for a random or dynamic strategy, only if no other shard holds the primary key either) and
    deletes the bare-key item only if it is unchanged since it was read (every attribute as
    read, every other attribute of the model still missing). The attempts of one call share a
    request token, and the target shard is derived from the key (:func:`legacy_target_shard`),
    so a lost reply, a retry or a re-run never makes a second copy: whatever the outcome of a
    failed attempt, the state is read back and the move finished, skipped or retried.

    Args:
        model: a sharded model declared ``legacy_unsharded=True``.
        raw_item_or_key: a raw item as a scan returns it (DynamoDB JSON, bare hash key), or
            the primary key of one: the logical hash key, or ``(hash key, range key)``.
        max_attempts: how often an item changed under the move is read again and retried.

    Returns:
        What was found and done (:class:`MoveOutcome`).

    Raises:
        LegacyMoveError: the model is not ``legacy_unsharded``, or the item's key has a shard.
        botocore.exceptions.ClientError: DynamoDB kept refusing (after ``max_attempts``).

    .. versionadded:: 0.1.0
    """
    return move_and_count(model, raw_item_or_key, MoveCapacity(), max_attempts=max_attempts)


def move_and_count(model: type[Any], raw_item_or_key: Any, capacity: MoveCapacity, *,
                   max_attempts: int = 5) -> MoveOutcome:
    """:func:`move_legacy_item`, adding the capacity its requests consumed to ``capacity``
    (also of the requests sent before an error it raises): what a migration's report counts.

    .. versionadded:: 0.1.0
    """
    codec = _require_legacy(model)
    mover = _Mover(model, codec, capacity)
    raw = mover.raw_item(raw_item_or_key)
    last_error: Exception | None = None
    for _ in range(max(1, max_attempts)):
        if raw is None:
            return MoveOutcome.ALREADY_MOVED if mover.sharded_copy() else MoveOutcome.GONE
        try:
            mover.transact(raw)
            return MoveOutcome.MOVED
        except (ClientError, BotoCoreError) as exc:
            last_error = exc  # cancelled, or the reply was lost: look at what the table holds
        current = mover.read_bare()
        if current is None:
            if mover.sharded_copy():
                return MoveOutcome.ALREADY_MOVED
            return MoveOutcome.GONE
        if mover.sharded_copy():
            try:
                mover.delete_unchanged(current)
                return MoveOutcome.SHADOWED
            except (ClientError, BotoCoreError) as exc:
                last_error = exc
                current = mover.read_bare()
                if current is None:
                    return MoveOutcome.SHADOWED
        raw = current
    assert last_error is not None
    raise last_error


class _Mover:
    """The requests of one legacy item's move, through the model's own botocore client."""

    def __init__(self, model: type[Any], codec: KeyCodec, capacity: MoveCapacity) -> None:
        self.model = model
        self.codec = codec
        self.capacity = capacity
        self.client = botocore_client(model)
        self.table = model.Meta.table_name
        self.hash_name = shard_manager(model).hash_attribute.attr_name
        range_attr = shard_manager(model).range_attribute
        self.range_name = range_attr.attr_name if range_attr is not None else None
        self.range_attr = range_attr
        self.bare: RawItem | None = None  # the bare key, once known
        self.target: RawItem | None = None  # the target physical key, once known
        self.others: list[RawItem] = []  # other shards' keys of the same primary key
        self.checked_by_read: list[RawItem] = []  # those, when too many for one transaction
        # Part of every request token of this move: its attempts are one transaction to DynamoDB,
        # but a later move of an item written again with the same values is not (DynamoDB would
        # answer it with the earlier one's success for 10 minutes, moving nothing).
        self.nonce = uuid.uuid4().hex

    def raw_item(self, given: Any) -> RawItem | None:
        if isinstance(given, Mapping) and self.hash_name in given:
            raw = dict(given)
            value = raw[self.hash_name]
            stored = value.get("S") if isinstance(value, Mapping) else None
            self._check_bare(stored)
            self._keys(raw)
            return raw
        if self.range_name is not None:
            if isinstance(given, str) or not isinstance(given, tuple | list) or len(given) != 2:
                msg = (
                    f"{self.codec.where}: move_legacy_item needs a raw item or the key (hash key, "
                    f"range key) of {self.model.__name__}, got {given!r}."
                )
                raise LegacyMoveError(msg)
            hash_key, range_key = given
            assert self.range_attr is not None
            range_value = {self.range_attr.attr_type: self.range_attr.serialize(range_key)}
        else:
            hash_key, range_value = given, None
        self._check_bare(hash_key)
        key: RawItem = {self.hash_name: {"S": hash_key}}
        if range_value is not None and self.range_name is not None:
            key[self.range_name] = range_value
        self.bare = key
        found = self.read_bare()
        self._keys(found if found is not None else key)
        return found

    def _check_bare(self, stored: object) -> None:
        if not isinstance(stored, str) or not stored or self.codec.decode(stored)[1] != LEGACY_SHARD:
            msg = (
                f"{self.codec.where}: {stored!r} is not a bare legacy key of {self.model.__name__} "
                f"(it has a shard suffix, or is not a string); pass the items a scan returns "
                f"under bare keys (Model.shards.decode_stored(value)[1] is None)."
            )
            raise LegacyMoveError(msg)

    def _keys(self, raw: RawItem) -> None:
        """Work out the bare key, the target shard's key and the other shards' keys."""
        logical = raw[self.hash_name]["S"]
        range_raw = raw.get(self.range_name) if self.range_name else None
        self.bare = {self.hash_name: {"S": logical}}
        if self.range_name is not None:
            if range_raw is None:
                msg = f"{self.codec.where}: the raw item has no range key {self.range_name!r}."
                raise LegacyMoveError(msg)
            self.bare[self.range_name] = range_raw
        probe = self.model.from_raw_data(dict(raw))
        manager = shard_manager(self.model)
        try:
            target: int | None = legacy_target_shard(self.model, probe)
        except ShardLocationError:  # derived from an attribute of an item no longer stored
            target = None
        candidates = manager.point_shards(probe)
        if isinstance(manager.strategy, DynamicShards):
            # The key's count may grow while the move is under way, and a write under the grown
            # count put a copy above it: every shard the key can ever have is checked.
            candidates = tuple(range(manager.first_shard, manager.first_shard + manager.strategy.max_shards))

        def key_in(shard: int) -> RawItem:
            key = dict(self.bare or {})
            key[self.hash_name] = {"S": self.codec.encode(logical, shard)}
            return key

        self.target = key_in(target) if target is not None else None
        other_keys = [key_in(shard) for shard in candidates if shard != target]
        # Beyond one transaction's room, the other shards are checked by a read just before.
        self.others = other_keys if len(other_keys) <= MAX_TRANSACTION_ITEMS - 2 else []
        self.checked_by_read = [] if self.others else other_keys

    def read_bare(self) -> RawItem | None:
        reply = self.client.get_item(TableName=self.table, Key=self.bare, ConsistentRead=True,
                                     ReturnConsumedCapacity="TOTAL")
        self.capacity.read_units += _units(reply)
        item: RawItem | None = reply.get("Item")
        return item

    def sharded_copy(self) -> bool:
        keys = [key for key in (self.target, *self.others, *self.checked_by_read) if key is not None]
        for start in range(0, len(keys), 100):
            pending: dict[str, Any] | None = {self.table: {"Keys": keys[start:start + 100], "ConsistentRead": True}}
            while pending:
                reply = self.client.batch_get_item(RequestItems=pending, ReturnConsumedCapacity="TOTAL")
                self.capacity.read_units += _units(reply)
                if reply.get("Responses", {}).get(self.table):
                    return True
                pending = reply.get("UnprocessedKeys") or None
        return False

    def transact(self, raw: RawItem) -> None:
        if self.checked_by_read and self.sharded_copy():
            raise ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "copy in a shard"}},
                              "TransactWriteItems")
        assert self.target is not None
        sharded = {**raw, self.hash_name: self.target[self.hash_name]}
        absent = {"ConditionExpression": "attribute_not_exists(#h)", "ExpressionAttributeNames": {"#h": self.hash_name}}
        actions: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table, "Item": sharded, **absent}},
            {"Delete": {"TableName": self.table, "Key": self.bare, **self._unchanged(raw)}},
            *({"ConditionCheck": {"TableName": self.table, "Key": key, **absent}} for key in self.others),
        ]
        reply = self.client.transact_write_items(TransactItems=actions, ClientRequestToken=self._token(raw),
                                                 ReturnConsumedCapacity="TOTAL")
        # What DynamoDB bills (DynamoDB Local reports less), as a migration's dry run estimates.
        self.capacity.write_units += max(_units(reply), float(transaction_write_units([sharded, raw],
                                                                                     checks=len(self.others))))

    def delete_unchanged(self, raw: RawItem) -> None:
        reply = self.client.delete_item(TableName=self.table, Key=self.bare, ReturnConsumedCapacity="TOTAL",
                                        **self._unchanged(raw))
        self.capacity.write_units += _units(reply)

    def _unchanged(self, raw: RawItem) -> dict[str, Any]:
        """A condition that holds while the stored item has exactly ``raw``'s values."""
        keys = (self.hash_name,) if self.range_name is None else (self.hash_name, self.range_name)
        return unchanged_condition(self.model, raw, keys)

    def _token(self, raw: RawItem) -> str:
        """The same token for the attempts of this move of the item: DynamoDB applies a repeated
        request once."""
        text = json.dumps([self.table, raw, self.nonce], sort_keys=True, default=_json_default)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:36]


def _json_default(value: object) -> Any:
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return repr(value)


# -- keys that would be read wrongly ------------------------------------------------------------


def _stored_keys(model: type[Any], segment: int | None, total_segments: int | None) -> Iterator[str]:
    """Every distinct hash-key value stored in ``model``'s table (a consistent keys-only scan)."""
    client = botocore_client(model)
    hash_name = shard_manager(model).hash_attribute.attr_name
    kwargs: dict[str, Any] = {
        "TableName": model.Meta.table_name, "ConsistentRead": True,
        "ProjectionExpression": "#h", "ExpressionAttributeNames": {"#h": hash_name},
    }
    if segment is not None or total_segments is not None:
        kwargs.update(Segment=segment, TotalSegments=total_segments)
    seen: set[str] = set()
    for page in client.get_paginator("scan").paginate(**kwargs):
        for item in page["Items"]:
            value = item.get(hash_name, {}).get("S")
            if isinstance(value, str) and value not in seen:
                seen.add(value)
                yield value


def _reads_as_shard(codec: KeyCodec, value: str, highest: int) -> bool:
    """Whether ``value`` is what a shard up to ``highest`` of some key is stored as."""
    plain = KeyCodec(codec.model_name, codec.attribute, codec.separator, codec.first_shard)
    try:
        _, shard = plain.decode(value)
    except ShardingError:
        return False
    return shard <= highest


def find_ambiguous_keys(
    model: type[Any],
    *,
    values: Any = None,
    segment: int | None = None,
    total_segments: int | None = None,
) -> list[str]:
    """The bare legacy keys that also read as a physical key with ``model``'s separator.

    ``sensor_2016_3`` is the legacy item of ``sensor_2016_3``, and also what shard 3 of
    ``sensor_2016`` is stored as with the separator ``_``: reads of ``sensor_2016`` would return
    it as theirs. (``sensor_2016`` itself is not ambiguous under a strategy of fewer than 2,016
    shards: no read covers shard 2016 of ``sensor``.) Run it on the table before the model
    writes sharded items (the migration's dry run does), or pass the legacy keys as
    ``values``: once sharded items are stored, they read as physical keys too.

    Args:
        model: the sharded model (its separator and first shard number are what is checked).
        values: the hash-key values to check; default every value stored in the model's table
            (one consistent keys-only scan).
        segment: with ``total_segments``, check one segment of a parallel scan.
        total_segments: the segments of the parallel scan.

    Returns:
        The ambiguous values, in the order found.

    .. versionadded:: 0.1.0
    """
    manager = shard_manager(model)
    highest = manager.strategy.max_shards + manager.first_shard - 1
    source = values if values is not None else _stored_keys(model, segment, total_segments)
    return [value for value in source if _reads_as_shard(manager.codec, value, highest)]


def check_legacy_keys(model: type[Any], *, values: Any = None) -> None:
    """Refuse a table whose legacy keys a ``legacy_unsharded`` model would read wrongly.

    Reads cannot tell a legacy item stored under ``sensor_2016_3`` from shard 3 of
    ``sensor_2016``, so run this before declaring ``legacy_unsharded=True`` over a table (the
    migration's dry run and its jobs run it too).

    Args:
        model: the sharded model declared over the table.
        values: the legacy hash-key values; default every value stored in the table.

    Raises:
        AmbiguousLegacyKeyError: some keys are ambiguous; the message names a few, and a
            separator under which none is.

    .. versionadded:: 0.1.0
    """
    manager = shard_manager(model)
    stored = list(values) if values is not None else list(_stored_keys(model, None, None))
    ambiguous = find_ambiguous_keys(model, values=stored)
    if not ambiguous:
        return
    fix = "a separator that no legacy key contains followed by digits"
    for candidate in SEPARATOR_CANDIDATES:
        codec = KeyCodec(manager.codec.model_name, manager.codec.attribute, candidate, manager.first_shard)
        highest = manager.strategy.max_shards + manager.first_shard - 1
        if not any(_reads_as_shard(codec, value, highest) for value in stored):
            fix = f"Sharding(..., separator={candidate!r}), under which no legacy key reads as a shard"
            break
    examples = ", ".join(repr(value) for value in ambiguous[:5])
    more = f" and {len(ambiguous) - 5} more" if len(ambiguous) > 5 else ""
    msg = (
        f"{manager.codec.where}: the table holds legacy keys that read as physical keys with the "
        f"separator {manager.separator!r} ({examples}{more}): reads of the shorter key would return "
        f"those items as their own shards. Declare {fix}. Nothing was read as sharded."
    )
    raise AmbiguousLegacyKeyError(msg)

