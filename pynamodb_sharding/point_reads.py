"""Point reads of items whose shard is unknown: one batched read of every candidate key.

A random or dynamic strategy can put a logical primary key on any of a key's shards, so
``get``, ``batch_get``, and ``update``/``delete``/``refresh`` of an item built by hand read
every candidate physical key in one consistent ``BatchGetItem`` (:func:`read_physical`) and
act on the shard that holds it (:func:`locate`). Two shards holding the same logical key is an
ambiguity that is refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pynamodb.constants import KEYS, RESPONSES, UNPROCESSED_KEYS

from pynamodb_sharding._host import table_connection
from pynamodb_sharding.descriptor import shard_manager
from pynamodb_sharding.exceptions import ShardLocationError
from pynamodb_sharding.keys import LEGACY_SHARD

if TYPE_CHECKING:
    from pynamodb_sharding.model import ShardedModel

__all__ = [
    "BATCH_GET_LIMIT",
    "leaves_out_keys",
    "locate",
    "read_physical",
    "with_key_attributes",
    "without_stale_bare_copies",
]

#: DynamoDB's limit on keys in one BatchGetItem request.
BATCH_GET_LIMIT = 100


def with_key_attributes(attributes_to_get: Iterable[Any] | None, key_names: Sequence[str]) -> list[Any] | None:
    """A projection that also fetches ``key_names``: decoding an item, merging pages and building
    a cursor need its keys. ``None`` (or an empty projection) fetches every attribute.

    Entries may be attribute names or PynamoDB attributes/paths (anything with ``attr_name``).
    """
    if attributes_to_get is None:
        return None
    requested = list(attributes_to_get)
    if not requested:
        return None
    names = {getattr(entry, "attr_name", entry) for entry in requested}
    return requested + [name for name in key_names if name not in names]


def leaves_out_keys(attributes_to_get: Iterable[Any] | None, key_names: Sequence[str]) -> bool:
    """Whether a projection the caller asked for leaves out a key attribute, which
    :func:`with_key_attributes` then adds: the items read are partial, their keys only ours."""
    if attributes_to_get is None:
        return False
    names = {getattr(entry, "attr_name", entry) for entry in attributes_to_get}
    return bool(names) and any(name not in names for name in key_names)


def read_physical(
    model: type[ShardedModel],
    keys: Sequence[tuple[str, int, Any]],
    *,
    consistent_read: bool | None,
    attributes_to_get: Sequence[str] | None,
) -> list[tuple[int, dict[str, Any]]]:
    """BatchGetItem of ``(logical key, shard, range key)`` triples; returns ``(shard, raw item)``
    of those found, by shard.

    Raises:
        ShardLocationError: the model has a range key and a triple does not give it.
    """
    codec = shard_manager(model).codec
    hash_attr = model._hash_attr()
    range_attr = model._range_attr()
    requests: list[dict[str, Any]] = []
    for logical, shard, range_key in keys:
        request = {hash_attr.attr_name: {"S": codec.encode(logical, shard)}}
        if range_attr is not None:
            if range_key is None:
                msg = (
                    f"{model.__name__}.{range_attr.attr_name}: the range key is required to read "
                    f"one item of {logical!r}; pass it, or use {model.__name__}.query."
                )
                raise ShardLocationError(msg)
            request[range_attr.attr_name] = {range_attr.attr_type: range_attr.serialize(range_key)}
        requests.append(request)
    projection = with_key_attributes(attributes_to_get, model._key_names())
    found: list[tuple[int, dict[str, Any]]] = []
    # Bare legacy keys are read before any shard: an item a migration moves meanwhile is then
    # seen in one of the two places (see _shadowed for the one kept when seen in both).
    legacy = [request for (_, shard, _), request in zip(keys, requests, strict=True) if shard == LEGACY_SHARD]
    sharded = [request for (_, shard, _), request in zip(keys, requests, strict=True) if shard != LEGACY_SHARD]
    for group in (legacy, sharded):
        for raw in _batch_read(model, group, consistent_read=consistent_read, projection=projection):
            _, shard = codec.decode(raw[hash_attr.attr_name]["S"])
            found.append((shard, raw))
    if legacy:
        found = _without_shadowed(model, found)
    found.sort(key=lambda pair: pair[0])
    return found


def _batch_read(
    model: type[ShardedModel], keys: Sequence[dict[str, Any]], *, consistent_read: bool | None,
    projection: Sequence[Any] | None,
) -> list[dict[str, Any]]:
    """The items stored under raw ``keys``, read with BatchGetItem (unprocessed keys read again)."""
    table = model.Meta.table_name
    found: list[dict[str, Any]] = []
    for start in range(0, len(keys), BATCH_GET_LIMIT):
        pending: list[dict[str, Any]] | None = list(keys[start:start + BATCH_GET_LIMIT])
        while pending:
            data = table_connection(model).batch_get_item(
                pending,  # type: ignore[arg-type]  # pynamodb annotates keys as Sequence[str]
                consistent_read=consistent_read, attributes_to_get=projection,
            )
            found.extend(data.get(RESPONSES, {}).get(table, []))
            pending = data.get(UNPROCESSED_KEYS, {}).get(table, {}).get(KEYS)
    return found


def without_stale_bare_copies(
    model: type[ShardedModel], items: list[dict[str, Any]], *, consistent_read: bool | None,
) -> list[dict[str, Any]]:
    """``items`` without the bare legacy copies of items that a shard also holds.

    A ``legacy_unsharded`` item read from its bare key and then written by a batch or a
    transaction gets a copy in the shard a migration would move it to, and the bare copy stays
    until the migration deletes it. A merged query without a filter sees both and keeps the
    sharded copy; a filter, an index query or a scan may see only the stale bare copy (the
    sharded copy fails the filter, is filed under another index value, or is in another
    segment). So every bare item of such a read is looked up in the shards of its key, keys
    only, with the read's consistency, and dropped when a shard holds it: the sharded copy is
    the item as it is now. Reads without bare items send nothing more.
    """
    manager = shard_manager(model)
    codec = manager.codec
    hash_name = model._hash_attr().attr_name
    range_attr = model._range_attr()
    range_name = range_attr.attr_name if range_attr is not None else None
    bare: dict[tuple[Any, ...], list[int]] = {}
    keys: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        stored = item.get(hash_name, {}).get("S")
        if not isinstance(stored, str) or (range_name is not None and range_name not in item):
            continue
        logical, shard = codec.decode(stored)
        if shard != LEGACY_SHARD:
            continue
        identity = (logical, *(tuple(item[range_name].items()) if range_name else ()))
        if identity not in bare:
            for candidate in manager.read_shards(logical):
                key = {hash_name: {"S": codec.encode(logical, candidate)}}
                if range_name is not None:
                    key[range_name] = item[range_name]
                keys.append(key)
        bare.setdefault(identity, []).append(position)
    if not keys:
        return items
    names = [name for name in (hash_name, range_name) if name is not None]
    shadowed: set[int] = set()
    for raw in _batch_read(model, keys, consistent_read=consistent_read, projection=names):
        logical = codec.decode(raw[hash_name]["S"])[0]
        identity = (logical, *(tuple(raw[range_name].items()) if range_name else ()))
        shadowed.update(bare.get(identity, ()))
    return [item for position, item in enumerate(items) if position not in shadowed]


def _without_shadowed(
    model: type[ShardedModel], found: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """Drop the legacy copies of items also found in a shard: the sharded copy wins (it is the
    one a migration or a write put there after the legacy item was last written)."""
    codec = shard_manager(model).codec
    names = model._key_names()

    def identity(raw: dict[str, Any]) -> tuple[Any, ...]:
        logical = codec.decode(raw[names[0]]["S"])[0]
        return (logical, *(tuple(raw[name].items()) for name in names[1:]))

    in_shards = {identity(raw) for shard, raw in found if shard != LEGACY_SHARD}
    return [(shard, raw) for shard, raw in found if shard != LEGACY_SHARD or identity(raw) not in in_shards]


def locate(
    item: ShardedModel,
    candidates: Sequence[int],
    *,
    consistent_read: bool = True,
    attributes_to_get: Sequence[str] | None = None,
) -> tuple[int | None, dict[str, Any] | None]:
    """Find the shard holding ``item`` with one batched read of every candidate key.

    Returns ``(shard, raw item)``, or ``(None, None)`` when no candidate holds it.

    Raises:
        ShardLocationError: several shards hold the same logical primary key.
    """
    model = type(item)
    logical = item.logical_hash_key()
    range_value = item._range_value()
    found = read_physical(
        model,
        [(logical, shard, range_value) for shard in candidates],
        consistent_read=consistent_read,
        attributes_to_get=attributes_to_get,
    )
    if len(found) > 1:
        shards = ", ".join(str(shard) for shard, _ in found)
        manager = shard_manager(model)
        keys = {model._hash_keyname, model._range_keyname}
        derived = [name for name in manager.derived_attributes if name not in keys]
        if manager.keeps_keys_unique and derived:
            names = ", ".join(derived)
            why = (
                f"(it was saved with different {names} values by concurrent writers or by a version "
                f"that did not look for a stored copy first), so which copy is meant is ambiguous; "
                f"read the copies with {model.__name__}.query, keep the one whose {names} selects "
                f"the shard it is in ({model.__name__}.shards.write_shard(copy) == copy.shards) and "
                f"delete the others."
            )
        elif manager.keeps_keys_unique:
            why = (
                f"(it was written under two layouts of {manager.strategy!r}, e.g. before this version "
                f"replaced the old copy on save), so which copy is meant is ambiguous; read the "
                f"copies with {model.__name__}.query, keep the one in shard "
                f"{manager.write_shard(item)} and delete the others."
            )
        else:
            why = (
                f"(random and dynamic strategies do not keep logical keys unique), so which copy "
                f"is meant is ambiguous; read the copies with {model.__name__}.query and delete the "
                f"extra ones, and use HashedShards where items are overwritten by key."
            )
        msg = (
            f"{manager.codec.where}: the item {logical!r} with range key {range_value!r} exists in "
            f"shards {shards} {why}"
        )
        raise ShardLocationError(msg)
    if not found:
        return None, None
    return found[0]
