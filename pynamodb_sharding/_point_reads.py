"""Point reads of items whose shard is unknown: one batched read of every candidate key.

A random or dynamic strategy can put a logical primary key on any of a key's shards, so
``get``, ``batch_get``, and ``update``/``delete``/``refresh`` of an item built by hand read
every candidate physical key in one consistent ``BatchGetItem`` (:func:`read_physical`) and
act on the shard that holds it (:func:`locate`). Two shards holding the same logical key is an
ambiguity that is refused, never guessed.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs
from pynamodb.constants import ITEM, ITEMS, KEYS, RESPONSES, UNPROCESSED_KEYS
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.operand import Path, Value
from pynamodb.models import Model

from pynamodb_sharding._conditions import Usage, check_item_condition, rewrite_condition
from pynamodb_sharding._descriptor import ShardManager, shard_manager
from pynamodb_sharding._exceptions import LegacyItemError, ShardKeyError, ShardLocationError
from pynamodb_sharding._host import (
    discriminator_class,
    index_hash_attribute,
    index_range_attribute,
    indexes,
    table_connection,
    without_key_guard,
)
from pynamodb_sharding._indexes import sharded_index, sharded_indexes_of
from pynamodb_sharding._item import forget, known, logical_key, move_refused, moved_from, physical_key, pin, state
from pynamodb_sharding._item import range_value as range_of
from pynamodb_sharding._keys import LEGACY_SHARD
from pynamodb_sharding._periods import template_of
from pynamodb_sharding._pool import fanout_submit
from pynamodb_sharding._replicas import failing_over, read_copies, spread

__all__ = [
    "BARE_KEY_SAMPLE",
    "BATCH_GET_LIMIT",
    "IndexEntries",
    "adopt_stored",
    "batch_get",
    "batch_key",
    "candidate_shards",
    "derived_attributes_set",
    "derives_from_other_attributes",
    "get",
    "index_entries",
    "key_item",
    "leaves_out_keys",
    "locate",
    "locate_for_write",
    "mark_partial",
    "operation_kwargs",
    "read_physical",
    "refresh",
    "with_key_attributes",
    "without_stale_bare_copies",
]

_M = TypeVar("_M", bound=Model)

#: DynamoDB's limit on keys in one BatchGetItem request.
BATCH_GET_LIMIT = 100
#: How many keys the first miss of a model samples from its table (see :func:`refuse_bare_copies`).
BARE_KEY_SAMPLE = 25


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
    model: type[Any],
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
    manager = shard_manager(model)
    codec = manager.codec
    hash_attr = manager.hash_attribute
    range_attr = manager.range_attribute
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
    projection = with_key_attributes(attributes_to_get, manager.key_names)
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
    model: type[Any], keys: Sequence[dict[str, Any]], *, consistent_read: bool | None,
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


@attrs.frozen
class IndexEntries:
    """What an index query reads of an item, to tell a stale bare entry from one whose item a
    job moved into a shard while the query ran (see :func:`without_stale_bare_copies`)."""

    #: The stored names of the index's hash and range keys.
    hash_name: str
    range_name: str | None
    #: The stored index hash value's logical value (without its index shard).
    logical_hash: Callable[[dict[str, Any]], Any]
    #: Every key attribute of an entry: the table's and the index's (its place in the query).
    key_names: tuple[str, ...]
    #: What the query returns of an item (``None``: every attribute).
    projection: list[Any] | None
    #: Whether an entry's values decide whether the query returns it (a filter): an entry then
    #: stands for its moved item only with the same values, as the read can see them.
    compare_values: bool
    #: A filter with ``attributes_to_get``: the entry does not hold every value the filter reads.
    values_unseen: bool

    def current(self, entry: dict[str, Any], copy: dict[str, Any]) -> dict[str, Any] | None:
        """The bare ``entry`` with the values of its item's shard ``copy``, when the copy's own
        entry has the same place in the query (same index keys) and would be returned the same
        way; else ``None`` (the bare entry is stale: the item is filed elsewhere)."""
        if self.place(entry) != self.place(copy):
            return None
        kept = {**copy, **{name: entry[name] for name in self.key_names if name in entry}}
        if self.compare_values and (self.values_unseen or kept != entry):
            return None  # whether the item as it is now passes the filter is not known here
        return kept

    def place(self, item: dict[str, Any]) -> tuple[Any, Any]:
        stored = item.get(self.hash_name)
        logical = self.logical_hash(stored) if stored is not None else None
        return logical, item.get(self.range_name) if self.range_name is not None else None


def index_entries(model: type[Any], index_name: str, key_names: Sequence[str], attributes_to_get: Any,
                  *, filtered: bool) -> IndexEntries:
    """How a query of ``model``'s index ``index_name`` reads items (see :class:`IndexEntries`)."""
    index = indexes(model)[index_name]
    hash_name = index_hash_attribute(index).attr_name
    range_attribute = index_range_attribute(index)
    range_name = range_attribute.attr_name if range_attribute is not None else None
    sharded = sharded_index(model, index_name)
    codec = sharded.manager.codec if sharded is not None and sharded.shard_attr_name is None else None

    def logical_hash(stored: dict[str, Any]) -> Any:
        text = stored.get("S")
        if codec is None or not isinstance(text, str):
            return tuple(stored.items())
        try:
            return codec.decode(text)[0]
        except ShardKeyError:  # a bare value of an index it does not adopt: compared as stored
            return text

    projection = with_key_attributes(attributes_to_get, key_names)
    if projection is None:
        kind = index.Meta.projection.projection_type
        if kind == "KEYS_ONLY":
            projection = list(key_names)
        elif kind == "INCLUDE":
            projection = list(key_names) + [name for name in index.Meta.projection.non_key_attributes
                                            if name not in key_names]
    return IndexEntries(hash_name=hash_name, range_name=range_name, logical_hash=logical_hash,
                        key_names=tuple(key_names), projection=projection, compare_values=filtered,
                        values_unseen=filtered and attributes_to_get is not None)


def without_stale_bare_copies(
    model: type[Any], items: list[dict[str, Any]], *, consistent_read: bool | None,
    index: IndexEntries | None = None,
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

    An index query (``index``) reads the shard copies as it reads the index, and keeps a bare
    entry whose copy has the same place in the index (its index keys), with the copy's values:
    a job may have moved the item after the index page was read, and the copy's own entry,
    written after that, may lie behind the part of the index this query reads. The merge
    returns the item once when it meets both entries (``ShardMerge(copies=...)``).
    """
    manager = shard_manager(model)
    codec = manager.codec
    hash_name = manager.hash_attribute.attr_name
    range_attr = manager.range_attribute
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
    current: dict[int, dict[str, Any]] = {}
    projection = names if index is None else index.projection
    for raw in _batch_read(model, keys, consistent_read=consistent_read, projection=projection):
        logical = codec.decode(raw[hash_name]["S"])[0]
        identity = (logical, *(tuple(raw[range_name].items()) if range_name else ()))
        for position in bare.get(identity, ()):
            kept = index.current(items[position], raw) if index is not None else None
            if kept is not None:
                current[position] = kept
            else:
                shadowed.add(position)
    return [current.get(position, item) for position, item in enumerate(items)
            if position in current or position not in shadowed]


def _without_shadowed(
    model: type[Any], found: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """Drop the legacy copies of items also found in a shard: the sharded copy wins (it is the
    one a migration or a write put there after the legacy item was last written)."""
    codec = shard_manager(model).codec
    names = shard_manager(model).key_names

    def identity(raw: dict[str, Any]) -> tuple[Any, ...]:
        logical = codec.decode(raw[names[0]]["S"])[0]
        return (logical, *(tuple(raw[name].items()) for name in names[1:]))

    in_shards = {identity(raw) for shard, raw in found if shard != LEGACY_SHARD}
    return [(shard, raw) for shard, raw in found if shard != LEGACY_SHARD or identity(raw) not in in_shards]


def locate(
    item: Any,
    candidates: Sequence[int],
    *,
    consistent_read: bool = True,
    attributes_to_get: Sequence[str] | None = None,
) -> tuple[int | None, dict[str, Any] | None]:
    """Find the shard holding ``item`` with one batched read of every candidate key (an
    eventually consistent read of a model with read replicas: one read of each candidate, in
    parallel, spread over the table and its replicas).

    Returns ``(shard, raw item)``, or ``(None, None)`` when no candidate holds it.

    Raises:
        ShardLocationError: several shards hold the same logical primary key.
    """
    model = type(item)
    manager = shard_manager(model)
    logical = logical_key(item, manager)
    range_value = range_of(item, manager)
    triples = [(logical, shard, range_value) for shard in candidates]
    # Not while a job may move the item between candidates: its old and new places are then
    # read on one copy, as a merged query reads them (see _fanout._ReadFirst).
    spread_over_copies = (read_copies(model, consistent_read=consistent_read, index_name=None) is not None
                          and (range_value is not None or manager.range_attribute is None)
                          and not manager.moving_out(logical, tuple(candidates)))
    if spread_over_copies:
        found = _read_on_copies(model, triples, with_key_attributes(attributes_to_get, manager.key_names))
    else:
        found = read_physical(model, triples, consistent_read=consistent_read, attributes_to_get=attributes_to_get)
    if len(found) > 1:
        shards = ", ".join(str(shard) for shard, _ in found)
        keys = set(manager.key_attributes)
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
        elif manager.unique_keys:
            why = (
                f"(saved before Sharding(..., unique_keys=True) was declared), so which copy is "
                f"meant is ambiguous; read the copies with {model.__name__}.query and delete the "
                f"extra ones: saves under unique_keys=True keep one copy a key."
            )
        else:
            why = (
                f"(random and dynamic strategies do not keep logical keys unique: an unconditional "
                f"save() of a new instance adds a copy), so which copy is meant is ambiguous; read the "
                f"copies with {model.__name__}.query and delete the extra ones, and declare "
                f"Sharding(..., unique_keys=True), under which save() replaces the stored copy as "
                f"PynamoDB's does, or use HashedShards where items are overwritten by key."
            )
        msg = (
            f"{manager.codec.where}: the item {logical!r} with range key {range_value!r} exists in "
            f"shards {shards} {why}"
        )
        raise ShardLocationError(msg)
    if not found:
        return None, None
    return found[0]


# -- one item whose shard is unknown --------------------------------------------------------------


def derives_from_other_attributes(manager: ShardManager[Any]) -> bool:
    """Whether the strategy computes shards from attributes outside the primary key."""
    keys = set(manager.key_attributes)
    return any(name not in keys for name in manager.derived_attributes)


def derived_attributes_set(item: Any, manager: ShardManager[Any]) -> bool:
    values = item.attribute_values
    return all(values.get(name) is not None for name in manager.derived_attributes)


def candidate_shards(item: Any, manager: ShardManager[Any]) -> tuple[int, ...]:
    """The shards that may hold ``item``'s primary key, its shard being unknown.

    Where the shard is derived from attributes outside the primary key
    (``HashedShards(attributes=("user_id",))``), an instance built by hand may carry another
    ``user_id`` than the stored item, so every shard of the key is a candidate, as in a ``get``
    by key: the key is what names the item, as in PynamoDB.
    """
    if derives_from_other_attributes(manager):
        return manager.read_targets(logical_key(item, manager))
    return manager.point_targets(item)


def locate_for_write(item: Any) -> int:
    """The shard an update, delete or refresh of ``item`` addresses (pinned)."""
    manager = shard_manager(type(item))
    shard = known(item, manager)
    if shard is not None:
        return shard
    if moved_from(item, manager) is not None:
        raise move_refused(item, manager, "updated, deleted or refreshed")
    candidates = candidate_shards(item, manager)
    if len(candidates) == 1:
        pin(item, manager, candidates[0])
        state(item).sole_candidate = True
        return candidates[0]
    found, _ = locate(item, candidates)
    if found is None:
        # Not stored anywhere: the request acts on a missing item, exactly as PynamoDB's would
        # (an update creates it, a delete is a no-op, a condition sees no item).
        manager.check_writable(logical_key(item, manager))
        if derived_attributes_set(item, manager):
            chosen = manager.write_shard(item)
        else:  # no user_id to compute a shard from: every candidate is equally empty
            chosen = next(candidate for candidate in candidates if candidate != LEGACY_SHARD)
        pin(item, manager, chosen)
        state(item).located_absent = True
        return chosen
    return pin(item, manager, found)


def key_item(model: type[_M], hash_key: Any, range_key: Any = None) -> _M:
    """An unsaved instance of ``model`` holding only the primary key (what strategies hash)."""
    manager = shard_manager(model)
    values: dict[str, Any] = {manager.key_attributes[0]: hash_key}
    if manager.range_name is not None and range_key is not None:
        values[manager.range_name] = range_key
    return model(_user_instantiated=False, **values)


def mark_partial(item: _M) -> _M:
    """Mark ``item`` as read with a projection that left out a key attribute (see writes)."""
    state(item).partial = True
    return item


def adopt_stored(item: Any, raw: Mapping[str, Any] | None = None) -> None:
    """Replace the physical hash key just deserialized (from ``raw``) by its logical key, pin
    the item to its shard, and give each sharded index entry its logical value."""
    manager = shard_manager(type(item))
    values = item.attribute_values
    for index in sharded_indexes_of(type(item)).values():
        index.adopt(item, raw)
    physical = values.get(manager.attribute)
    if physical is None:  # projected away
        return
    values[manager.attribute], shard = manager.codec.decode(physical)
    held = state(item)
    held.shard = shard
    # pin() inlined: this runs for every item read back.
    held.basis = tuple(map(values.get, manager.basis_names))
    held.unconfirmed_create = held.located_absent = held.sole_candidate = False


def get(model: type[_M], hash_key: Any, range_key: Any, consistent_read: bool,
        attributes_to_get: Sequence[str] | None) -> _M:
    """Read one item: one GetItem when its shard is computable, else one batched read.

    Raises:
        DoesNotExist: no shard holds the item (the model's own ``DoesNotExist``).
    """
    manager = shard_manager(model)
    probe = key_item(model, hash_key, range_key)
    candidates = candidate_shards(probe, manager)
    if len(candidates) == 1:
        raw = _get_one(model, physical_key(probe, manager, candidates[0]), manager.serialize_range(range_key),
                       consistent_read, with_key_attributes(attributes_to_get, manager.key_names))
    else:
        _, raw = locate(probe, candidates, consistent_read=consistent_read, attributes_to_get=attributes_to_get)
    if not raw:
        refuse_bare_copies(model, "get", [(logical_key(probe, manager), range_key)], consistent_read=consistent_read)
        raise model.DoesNotExist()
    found: _M = model.from_raw_data(raw)
    return mark_partial(found) if leaves_out_keys(attributes_to_get, manager.key_names) else found


def _read_on_copies(model: type[Any], keys: Sequence[tuple[str, int, Any]],
                    projection: Sequence[Any] | None) -> list[tuple[int, dict[str, Any]]]:
    """Eventually consistent reads of ``(logical key, shard, range key)`` triples spread over the
    model's read replicas: one request each, in parallel (a BatchGetItem reads the table only;
    it costs the same read units). Returns ``(shard, raw item)`` of those found, by shard."""
    manager = shard_manager(model)
    sent = [(shard, fanout_submit(_get_one, model, manager.codec.encode(logical, shard),
                                  manager.serialize_range(range_key), False, projection))
            for logical, shard, range_key in keys]
    try:
        found = [(shard, future.result()) for shard, future in sent]
    finally:
        for _, future in sent:
            future.cancel()
    return sorted(((shard, raw) for shard, raw in found if raw), key=lambda pair: pair[0])


def _get_one(model: type[Any], hash_value: Any, range_value: Any, consistent_read: bool,
             projection: Sequence[Any] | None) -> dict[str, Any] | None:
    """The raw item at one physical key: a GetItem of the table, or, spread over the model's read
    replicas (:mod:`~pynamodb_sharding._replicas`), a one-item Query of a replica."""
    connection = table_connection(model)
    copies = read_copies(model, consistent_read=consistent_read, index_name=None)

    def send_to(copy: str | None, fail_over: bool) -> dict[str, Any] | None:
        with failing_over(fail_over):
            if copy is None:
                data = connection.get_item(hash_value, range_key=range_value, consistent_read=consistent_read,
                                           attributes_to_get=projection)
                found: dict[str, Any] | None = data.get(ITEM) if data else None
                return found
            attribute = shard_manager(model).range_attribute
            condition = None if attribute is None else (
                Path([attribute.attr_name]) == Value({attribute.attr_type: range_value}))
            page = connection.query(hash_value, range_key_condition=condition, index_name=copy,
                                    attributes_to_get=projection)
            items = page.get(ITEMS) or []
            return items[0] if items else None

    return send_to(None, False) if copies is None else spread(copies, send_to)


def batch_key(model: type[Any], given: Any) -> tuple[Any, Any]:
    """``(hash key, range key)`` of one key given to ``batch_get``, refused as PynamoDB refuses it."""
    if shard_manager(model).range_name is None:
        return given, None
    if isinstance(given, str):
        msg = f"Invalid key value {given!r}: expected non-str iterable with exactly 2 elements (hash key, range key)"
        raise ValueError(msg)
    try:
        hash_key, range_key = given
    except (TypeError, ValueError):
        msg = f"Invalid key value {given!r}: expected iterable with exactly 2 elements (hash key, range key)"
        raise ValueError(msg) from None
    return hash_key, range_key


def batch_get(model: type[_M], keys: Iterable[Any], consistent_read: bool | None,
              attributes_to_get: Sequence[str] | None) -> Iterator[_M]:
    """BatchGetItem over every candidate shard of every requested key.

    Yields each stored item found (a logical key stored in two shards yields both copies).
    """
    manager = shard_manager(model)
    triples: list[tuple[str, int, Any]] = []
    seen: set[tuple[Any, Any]] = set()
    for given in keys:
        hash_key, range_key = batch_key(model, given)
        probe = key_item(model, hash_key, range_key)
        # Any key sequence PynamoDB accepts (tuples, lists): one request per distinct key.
        identity = (logical_key(probe, manager), manager.serialize_range(range_key))
        if identity in seen:
            continue
        seen.add(identity)
        triples.extend((identity[0], shard, range_key) for shard in candidate_shards(probe, manager))
    partial = leaves_out_keys(attributes_to_get, manager.key_names)
    read = read_physical(model, triples, consistent_read=consistent_read, attributes_to_get=attributes_to_get)
    if _may_hold_bare_keys(model):  # were keys not found stored under their bare key?
        range_attribute = manager.range_attribute
        found_keys = {(manager.codec.decode(raw[manager.hash_attribute.attr_name]["S"])[0],
                       raw[range_attribute.attr_name][range_attribute.attr_type] if range_attribute else None)
                      for _, raw in read}
        missing = {(logical, manager.serialize_range(range_key)): (logical, range_key)
                   for logical, _, range_key in triples}
        refuse_bare_copies(model, "batch_get", [key for identity, key in missing.items() if identity not in found_keys],
                           consistent_read=consistent_read)
    for _, raw in read:
        found: _M = model.from_raw_data(raw)
        yield mark_partial(found) if partial else found


def refresh(item: Any, consistent_read: bool) -> None:
    """PynamoDB's ``refresh`` of ``item``, from the shard it is stored in (found when unknown).

    Raises:
        DoesNotExist: no shard holds it (the model's own ``DoesNotExist``).
    """
    model = type(item)
    manager = shard_manager(model)
    shard = known(item, manager)
    if shard is not None and manager.misplaced(item, shard):
        forget(item)  # a job may have moved it since: look again
    if known(item, manager) is None:
        if moved_from(item, manager) is not None:
            raise move_refused(item, manager, "refreshed")
        if derives_from_other_attributes(manager) and derived_attributes_set(item, manager):
            # One GetItem where this instance's user_id puts the item; the key is stored once, so
            # a hit is the item. A miss looks in every shard of the key.
            pin(item, manager, manager.write_shard(item))
            try:
                return _refresh_from(item, manager, consistent_read)
            except model.DoesNotExist:
                forget(item)
        candidates = candidate_shards(item, manager)
        if len(candidates) > 1:
            _, raw = locate(item, candidates)
            if raw is None:
                raise model.DoesNotExist("This item does not exist in the table.")
            item.deserialize(raw)
            return None
        pin(item, manager, candidates[0])
    return _refresh_from(item, manager, consistent_read)


def _refresh_from(item: Any, manager: ShardManager[Any], consistent_read: bool) -> None:
    """PynamoDB's ``refresh`` from the item's pinned shard."""
    model = type(item)
    shard = known(item, manager)
    assert shard is not None
    data = table_connection(model).get_item(physical_key(item, manager, shard),
                                            range_key=manager.serialize_range(range_of(item, manager)),
                                            consistent_read=consistent_read)
    raw = data.get(ITEM) if data else None
    if raw is None:
        raise model.DoesNotExist("This item does not exist in the table.")
    stored_cls = discriminator_class(item, raw)
    if stored_cls and stored_cls != model:
        msg = f"Cannot refresh this item from the returned class: {stored_cls.__name__}"
        raise ValueError(msg)
    item.deserialize(raw)


def operation_kwargs(model: type[Any], hash_key: Any, range_key: Any, condition: Any) -> dict[str, Any]:
    """Request arguments for one item (``TransactGet.get``, ``TransactWrite.condition_check``)."""
    manager = shard_manager(model)
    probe = key_item(model, hash_key, range_key)
    check_item_condition(model, condition)  # before locating the item reads
    shard = locate_for_write(probe)
    result: dict[str, Any] = table_connection(model).get_operation_kwargs(
        hash_key=physical_key(probe, manager, shard),
        range_key=manager.serialize_range(range_key),
        condition=rewrite_condition(model, condition, Usage.ITEM, lambda: shard),
    )
    return result


# -- items an unported application stored under their bare key ------------------------------------


# What a process knows of a model's table (per table name), for :func:`refuse_bare_copies`:
# nothing yet; a sample being read (by the first miss: the others meanwhile read their bare
# keys, and do not sample too); a sample showed shard keys only (misses are not checked again);
# bare keys were seen (every miss is checked).
_UNKNOWN, _SAMPLING, _SHARDED_ONLY, _HOLDS_BARE = range(4)
_bare_key_watch: weakref.WeakKeyDictionary[type[Any], dict[str, int]] = weakref.WeakKeyDictionary()
_bare_key_lock = threading.Lock()


def _watched(model: type[Any]) -> int:
    with _bare_key_lock:
        return _bare_key_watch.get(model, {}).get(model.Meta.table_name, _UNKNOWN)


def _watch(model: type[Any], state: int, *, only_from: int | None = None) -> bool:
    """Set what is known of the model's table (only if it was ``only_from``); whether it was set."""
    with _bare_key_lock:
        states = _bare_key_watch.setdefault(model, {})
        if only_from is not None and states.get(model.Meta.table_name, _UNKNOWN) != only_from:
            return False
        states[model.Meta.table_name] = state
        return True


def refuse_bare_copies(model: type[Any], operation: str, keys: Sequence[tuple[str, Any]], *,
                       consistent_read: bool | None) -> None:
    """Raise :class:`LegacyItemError` when an item a read did not find in its shards is stored
    under its bare logical key: the table was filled by the application before it was ported,
    and the model is not declared ``legacy_unsharded``, so the read would answer that the item
    does not exist.

    Cheap where it matters: a read that finds its item costs nothing more, and so do the misses
    of a table known to hold no bare key. A process's first miss on a model (per table) reads the
    bare keys of the items missed (keys only) and samples :data:`BARE_KEY_SAMPLE` keys of the
    table with one Scan; a sample of sharded keys only settles it, and later misses send nothing
    more. Where the sample shows bare keys (an unported table, or another model's items in a
    shared table), every miss reads its bare key: one more read per miss, exact answers. Misses
    while the first one samples read their bare keys and do not sample too.
    """
    if not keys or not _may_hold_bare_keys(model):
        return
    manager = shard_manager(model)
    hash_attribute, range_attribute = manager.hash_attribute, manager.range_attribute
    requests = []
    for logical, range_key in keys:
        request = {hash_attribute.attr_name: {"S": logical}}
        if range_attribute is not None:
            request[range_attribute.attr_name] = {range_attribute.attr_type: range_attribute.serialize(range_key)}
        requests.append(request)
    projection = list(manager.key_names)
    with without_key_guard():  # bare keys, on purpose
        if len(keys) == 1:  # a get: one GetItem, as the read was
            data = table_connection(model).get_item(
                keys[0][0], range_key=manager.serialize_range(keys[0][1]), consistent_read=bool(consistent_read),
                attributes_to_get=projection)
            bare = [data[ITEM]] if data and data.get(ITEM) else []
        else:
            bare = _batch_read(model, requests, consistent_read=consistent_read, projection=projection)
    if not bare and _watch(model, _SAMPLING, only_from=_UNKNOWN):  # the first miss: sample the table
        settled = _UNKNOWN
        try:
            settled = _SHARDED_ONLY if _sample_is_sharded(model) else _HOLDS_BARE
        finally:  # a sample cancelled or failed otherwise: the next miss samples again
            _watch(model, settled)
    if bare:
        _watch(model, _HOLDS_BARE)
        stored = bare[0][hash_attribute.attr_name]["S"]
        declared = template_of(model)  # a period model's: the time-partitioned model the user declared
        name = declared.__name__
        where = f" with range key {keys[0][1]!r}" if range_attribute is not None and len(keys) == 1 else ""
        msg = (
            f"{manager.codec.where}: {name}.{operation} found no item {stored!r}{where} in its shards, "
            f"and the table holds it under its bare key {stored!r}, without a shard suffix: an item "
            f"written before {name} was sharded. {name} is not declared legacy_unsharded, so its reads "
            f"do not look there. Declare Sharding(..., legacy_unsharded=True) to read the table's bare "
            f"items, then move them into shards with `pynamodb-sharding migrate reshard "
            f"{declared.__module__}:{declared.__qualname__}` (see the adoption guide)."
        )
        raise LegacyItemError(msg)


def _may_hold_bare_keys(model: type[Any]) -> bool:
    """Whether a miss of ``model`` is checked: its bare keys are not read anyway
    (``legacy_unsharded``, a model sharding only an index), nor known to be absent."""
    manager = shard_manager(model)
    return not manager.legacy_unsharded and not manager.index_only and _watched(model) != _SHARDED_ONLY


def _sample_is_sharded(model: type[Any]) -> bool:
    """Whether a sample of the table's hash keys (one Scan, keys only) holds only physical keys.
    A sample that cannot be read counts as not: the misses are then checked one by one."""
    manager = shard_manager(model)
    name = manager.hash_attribute.attr_name
    try:
        page = table_connection(model).scan(limit=BARE_KEY_SAMPLE, attributes_to_get=[name])
    except PynamoDBException:
        return False
    for raw in page.get(ITEMS) or ():
        try:
            manager.codec.decode(raw.get(name, {}).get("S"))
        except ShardKeyError:
            return False
    return True
