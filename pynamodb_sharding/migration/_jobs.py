"""What each migration job does to one stored item: copy it, move it, or leave it.

A job looks at one raw item (as the scan returned it, physical key included) and answers with
a :class:`Put` (copy into another table), a :class:`Move` (to another shard of the same table),
a :class:`Rewrite` (its index entry set in place) or ``None`` (already where the model's
current layout puts it). The engine (:mod:`pynamodb_sharding.migration._engine`) does the I/O;
jobs only decide, so a re-run decides the same way.

Exactly once rests on two choices made here:

* a copy into a strategy whose shard is random (``RandomShards``, ``DynamicShards``) derives
  the item's shard from its *source* key (an md5 of the source's stored hash key and range
  key), so copying the same item again overwrites the first copy instead of adding a second;
* a move is one transaction: a conditional put of the new copy and a conditional delete of the
  old one, so a kill between never leaves two copies or none;
* a rewrite of an index entry is one UpdateItem conditional on the item still holding the
  value the job read, so it applies once and never over a write of the application.

A copy writes what the target's ``save()`` would write, index entries included: the value of
each sharded index of the target is stored sharded (suffixed, or its shard attribute set), the
shard derived from the item (a random or dynamic index strategy: an md5 of the index value and
the item's key), so a re-run writes the same thing.
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Iterable, Mapping
from typing import Any, cast

import attrs
from cachetools import LRUCache
from pynamodb.attributes import Attribute
from pynamodb.models import Model

from pynamodb_sharding._descriptor import ShardManager, is_sharded, shard_manager
from pynamodb_sharding._exceptions import MigrationError, ShardKeyError, ShardLocationError
from pynamodb_sharding._host import (
    discriminator_attribute,
    hash_keyname,
    index_hash_attribute,
    index_range_attribute,
    indexes,
    range_keyname,
)
from pynamodb_sharding._indexes import ShardedIndex, check_index_agreement, sharded_index, sharded_indexes_of
from pynamodb_sharding._keys import LEGACY_SHARD
from pynamodb_sharding._metadata import ShardCountStore
from pynamodb_sharding._sizes import item_write_units
from pynamodb_sharding._strategies import md5_shard, stored_bytes

__all__ = [
    "CompactJob",
    "CopyJob",
    "Job",
    "KeyLayout",
    "Move",
    "Put",
    "ReindexJob",
    "ReshardJob",
    "Rewrite",
    "StoredItem",
    "Wait",
]

#: An item as the DynamoDB client returns it: ``{"name": {"S": "value"}, ...}``.
StoredItem = dict[str, Any]


@attrs.frozen
class Put:
    """Write ``item`` (physical key already in it) into the target table; re-writing is harmless."""

    item: StoredItem
    logical_key: str


@attrs.frozen
class Move:
    """Move ``item`` from ``old_key`` to the first free physical key of ``new_hash_keys``.

    Each attempt is one transaction: put the new copy if its key is free, delete the old one
    if it is unchanged.
    """

    old_key: StoredItem
    item: StoredItem
    logical_key: str
    new_hash_keys: tuple[str, ...]
    #: A bare legacy item (a ``legacy_unsharded`` model): moved by
    #: :func:`pynamodb_sharding.legacy.move_legacy_item`, which also settles a copy the
    #: application already wrote to a shard.
    legacy: bool = False


@attrs.frozen
class Wait:
    """Leave the item where it is for now: its key's shard count changed less than the metadata
    cache TTL ago, so a writer may still write under the old count; a later run moves it."""

    logical_key: str


@attrs.frozen
class Rewrite:
    """Set the entry of one item in a sharded index, in place: one UpdateItem that sets
    ``values`` only while the item still holds ``expected`` under ``attribute`` (what the job
    read) and none of ``absent``, so a write of the application meanwhile wins.
    """

    key: StoredItem
    #: The stored name of the index's attribute, and the value the job read there.
    attribute: str
    expected: Any
    #: Stored names -> the values to set (the suffixed value, or the shard attribute).
    values: StoredItem
    #: Stored names that must not exist (the shard attribute a backfill sets).
    absent: tuple[str, ...]
    #: The index value, for reports.
    logical_key: str
    #: What the update costs: the item's size in write units.
    units: int = 1


Action = Put | Move | Rewrite | Wait


def _sharded(model: type[Model]) -> bool:
    return is_sharded(model)


@attrs.frozen
class KeyLayout:
    """How one model stores its primary key: attribute names and how a stored hash key decodes."""

    model: type[Model]
    hash_name: str
    range_name: str | None
    manager: ShardManager[Any] | None

    @classmethod
    def of(cls, model: type[Model]) -> KeyLayout:
        hash_attr = hash_keyname(model)
        if hash_attr is None:
            msg = f"{model.__name__} has no hash key; name a model class with a Meta.table_name and a hash key."
            raise MigrationError(msg)
        attributes = model.get_attributes()
        range_attr = range_keyname(model)
        return cls(
            model=model,
            hash_name=attributes[hash_attr].attr_name,
            range_name=attributes[range_attr].attr_name if range_attr else None,
            manager=shard_manager(model) if _sharded(model) else None,
        )

    @property
    def table(self) -> str:
        return str(self.model.Meta.table_name)

    @property
    def name(self) -> str:
        return self.model.__name__

    def decode(self, stored: str) -> tuple[str, int | None]:
        """``(logical key, shard)`` of a stored hash key; shard ``None``: a bare (unsharded) key.

        Raises:
            ShardKeyError: a sharded model's stored key is not one of its physical keys.
        """
        if self.manager is None:
            return stored, None
        return self.manager.decode_stored(stored)

    def fingerprint(self) -> str:
        """A short digest of where this layout puts items: its strategy and counts, separator,
        first shard, legacy flag and sharded indexes (the identity of the jobs moving to it)."""
        manager = self.manager
        if manager is None:
            described = "unsharded"
        else:
            indexes: dict[str, Any] = sharded_indexes_of(self.model)
            described = repr((
                repr(manager.strategy), manager.separator, manager.first_shard, manager.legacy_unsharded,
                sorted((name, repr(index.manager.strategy), index.manager.separator, index.shard_attr_name)
                       for name, index in indexes.items()),
            ))
        return hashlib.sha256(described.encode("utf-8")).hexdigest()[:10]

    def key_of(self, item: Mapping[str, Any]) -> StoredItem:
        key = {self.hash_name: item[self.hash_name]}
        if self.range_name is not None:
            key[self.range_name] = item[self.range_name]
        return key

    def item_view(self, logical: str, item: Mapping[str, Any]) -> Any:
        """An object with the Python values a strategy reads (hash key, range key, derived
        attributes), as :meth:`ShardManager.item_key` reads them from a model instance."""
        assert self.manager is not None
        attributes = self.model.get_attributes()
        names = [name for name in (range_keyname(self.model), *self.manager.derived_attributes) if name]
        values: dict[str, Any] = {self.manager.attribute: logical}
        for name in names:
            attribute: Attribute[Any] = attributes[name]
            raw = item.get(attribute.attr_name)
            values[name] = None if raw is None else attribute.deserialize(attribute.get_value(raw))
        return types.SimpleNamespace(**values)

    @property
    def indexes(self) -> dict[str, ShardedIndex]:
        """The model's sharded global secondary indexes by name."""
        found: dict[str, ShardedIndex] = sharded_indexes_of(self.model)
        return found

    def values_view(self, item: Mapping[str, Any], names: Any, given: Mapping[str, Any]) -> Any:
        """An object with the Python values of the model's attributes ``names`` read from the raw
        ``item`` (``given`` ones as given), as a model instance holds them."""
        attributes = self.model.get_attributes()
        values: dict[str, Any] = dict(given)
        for name in names:
            if name in values or name not in attributes:
                continue
            attribute: Attribute[Any] = attributes[name]
            raw = item.get(attribute.attr_name)
            values[name] = None if raw is None else attribute.deserialize(attribute.get_value(raw))
        return types.SimpleNamespace(**values)

    def logical_index_entries(self, item: Mapping[str, Any]) -> StoredItem:
        """``item`` with the value of each sharded index as a user reads it: a suffixed value
        decoded, a shard attribute left out. A value the index cannot decode stays as it is."""
        logical = dict(item)
        for index in self.indexes.values():
            if index.shard_attr_name is not None:
                logical.pop(index.shard_attr_name, None)
                continue
            stored = logical.get(index.attr_name)
            text = stored.get("S") if isinstance(stored, Mapping) else None
            if text is None:
                continue
            try:
                logical[index.attr_name] = {"S": index.manager.codec.decode(text)[0]}
            except ShardKeyError:
                continue
        return logical

    def range_bytes(self, item: Mapping[str, Any]) -> bytes:
        range_attr = range_keyname(self.model)
        if range_attr is None:
            return b""
        attribute = self.model.get_attributes()[range_attr]
        return stored_bytes(attribute, attribute.deserialize(attribute.get_value(item[attribute.attr_name])))


def _check_same_keys(source: KeyLayout, target: KeyLayout) -> None:
    if (source.hash_name, source.range_name) != (target.hash_name, target.range_name):
        msg = (
            f"{source.name} stores its key as ({source.hash_name!r}, {source.range_name!r}) but "
            f"{target.name} as ({target.hash_name!r}, {target.range_name!r}); a copy keeps every stored "
            f"attribute as it is, so declare the target's hash and range keys with the same attr_name."
        )
        raise MigrationError(msg)


def index_shard(layout: KeyLayout, index: ShardedIndex, value: str, item: Mapping[str, Any],
                logical_key: str) -> int:
    """The index shard a job gives ``item`` (raw, with the logical ``value`` of the index and the
    logical table key ``logical_key``): a hashed strategy's own, else an md5 of the value and the
    item's key within the value's current count, so a re-run gives the same shard."""
    manager = index.manager
    names = [name for name in (range_keyname(layout.model), *manager.derived_attributes) if name]
    view = layout.values_view(item, names, {index.attribute: value,
                                            hash_keyname(layout.model) or "": logical_key})
    try:
        return manager.legacy_target_shard(cast(Any, view))
    except ShardLocationError:  # derived from an attribute the item does not set: any shard is read
        basis = value.encode("utf-8") + b"\x1f" + logical_key.encode("utf-8") + b"\x1f" + layout.range_bytes(item)
        return md5_shard(basis, manager.shard_count(value)) + manager.first_shard - 1


def _with_index_entries(target: KeyLayout, item: StoredItem, logical_key: str) -> StoredItem:
    """``item`` (index values logical) with each sharded index of ``target`` stored the way the
    target's ``save()`` stores it."""
    for index in target.indexes.values():
        stored = item.get(index.attr_name)
        value = stored.get("S") if isinstance(stored, Mapping) else None
        if value is None:  # not in the index
            if index.shard_attr_name is not None:
                item.pop(index.shard_attr_name, None)
            continue
        shard = index_shard(target, index, value, item, logical_key)
        if index.shard_attr_name is None:
            item[index.attr_name] = {"S": index.manager.codec.encode(value, shard)}
        else:
            item[index.shard_attr_name] = {"N": str(shard)}
    return item


def _target_hash_keys(target: KeyLayout, logical: str, item: Mapping[str, Any], source_hash: str,
                      source_range: bytes) -> tuple[str, ...]:
    """The physical keys an item of ``logical`` goes to in ``target``, best first.

    One key when the target's strategy computes the shard (``HashedShards``); otherwise every
    shard of the key's current count, starting at one derived from the item's source key, so a
    re-run picks the same shard.
    """
    manager = target.manager
    if manager is None:
        return (logical,)
    if manager.keeps_keys_unique:
        shard = manager.write_shard(cast(Any, target.item_view(logical, item)))
        return (manager.physical_key(logical, shard),)
    shards = manager.spread_from(logical, source_hash, source_range)
    return tuple(manager.physical_key(logical, shard) for shard in shards)


class Job:
    """One migration job: its models, its identity in the checkpoint table, its per-item plan."""

    kind = "job"
    source: KeyLayout
    target: KeyLayout

    @property
    def models(self) -> tuple[type[Model], ...]:
        """The models whose connections a worker process must rebuild after a fork."""
        from pynamodb_sharding._model import with_companions

        return tuple(with_companions(dict.fromkeys([self.source.model, self.target.model])))

    def job_id(self, total_segments: int) -> str:
        """The job's key in the checkpoint table: the same job over the same tables, moving to the
        same layout, resumes; a job to another layout (a second reshard, 16 -> 32 after 4 -> 16)
        is another job with checkpoints of its own."""
        tables = f"{self.source.table}->{self.target.table}"
        return f"{self.kind}:{tables}/{total_segments}/{self.target.fingerprint()}"

    def plan(self, item: StoredItem) -> Action | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.kind} {self.source.name} ({self.source.table}) -> {self.target.name} ({self.target.table})"


class CopyJob(Job):
    """Copy every item of ``source``'s table into ``target``'s table, re-keyed for ``target``.

    The source may be unsharded or sharded in any way; items are decoded to their logical key
    and written where ``target``'s strategy puts them. The source is never changed.
    """

    kind = "copy"

    def __init__(self, source: type[Model], target: type[Model]) -> None:
        self.source = KeyLayout.of(source)
        self.target = KeyLayout.of(target)
        _check_same_keys(self.source, self.target)
        if self.source.table == self.target.table:
            msg = (
                f"copy {source.__name__} -> {target.__name__}: both use table {self.source.table!r}; "
                f"to re-shard a table in place, run `migrate reshard` (or `compact`) on the model instead."
            )
            raise MigrationError(msg)

    def plan(self, item: StoredItem) -> Put:
        stored = item[self.source.hash_name]["S"]
        logical, _ = self.source.decode(stored)
        keys = _target_hash_keys(self.target, logical, item, stored, self.source.range_bytes(item))
        copied = {**self.source.logical_index_entries(item), self.target.hash_name: {"S": keys[0]}}
        return Put(item=_with_index_entries(self.target, copied, logical), logical_key=logical)


class ReshardJob(Job):
    """Move the items of a sharded model's table that are not where its current layout puts them.

    Misplaced means: a bare legacy key (a model declaring ``legacy_unsharded``); a shard other
    than the computed one (``HashedShards`` after a count change, whose ``previous_counts``
    can be dropped once this job has run); a shard above the key's current count
    (``RandomShards`` or ``DynamicShards`` after the count was lowered).

    A table several models share (a single-table design): the job moves the items the model
    owns, those whose table hash key starts with ``key_prefix`` and, for a model with a PynamoDB
    ``DiscriminatorAttribute``, whose discriminator names the model or a subclass. Without
    either, the job is refused when another model class of this process stores items in the
    table (its bare keys would read as the model's legacy keys, and be moved).
    """

    kind = "reshard"

    def __init__(self, model: type[Model], *, key_prefix: str | None = None) -> None:
        if not _sharded(model):
            msg = (
                f"{model.__name__} is not a sharded model: {self.kind} moves items between the shards "
                f"of a ShardedModel's table; to copy a plain model's table into a sharded one, run "
                f"`migrate copy SOURCE TARGET`."
            )
            raise MigrationError(msg)
        if key_prefix is not None and (not isinstance(key_prefix, str) or not key_prefix):
            msg = f"{self.kind} {model.__name__}: key_prefix must be a non-empty str, got {key_prefix!r}."
            raise MigrationError(msg)
        self.key_prefix = key_prefix
        self.discriminator = _discriminator_values(model)
        if key_prefix is None and self.discriminator is None:
            _refuse_other_models(model, self.kind)
        #: Items of other models the job left where they are (single-table designs), by key.
        self.foreign: dict[str, int] = {}
        self.source = self.target = KeyLayout.of(model)
        #: When each key's count last changed, read once per key (see _count_changed).
        self._changes: LRUCache[str, float | None] = LRUCache(maxsize=10_000)

    def job_id(self, total_segments: int) -> str:
        scope = "" if self.key_prefix is None else "@" + hashlib.sha256(self.key_prefix.encode()).hexdigest()[:10]
        return f"{super().job_id(total_segments)}{scope}"

    def describe(self) -> str:
        scope = ""
        if self.key_prefix is not None:
            scope += f" keys {self.key_prefix!r}*"
        if self.discriminator is not None:
            scope += f" {self.discriminator[0]} in {sorted(self.discriminator[1])}"
        return f"{super().describe()}{scope}"

    def owns(self, item: Mapping[str, Any], logical_key: str) -> bool:
        """Whether ``item`` (raw), of logical hash key ``logical_key``, is this job's model's."""
        if self.key_prefix is not None and not logical_key.startswith(self.key_prefix):
            return False
        if self.discriminator is not None:
            name, accepted = self.discriminator
            stored = item.get(name)
            found = next(iter(stored.values()), None) if isinstance(stored, Mapping) and stored else None
            if found not in accepted:
                return False
        return True

    def plan(self, item: StoredItem) -> Move | Wait | None:
        layout = self.target
        manager = layout.manager
        assert manager is not None
        stored = item[layout.hash_name]["S"]
        logical, shard = layout.decode(stored)
        if not self.owns(item, logical):
            self.foreign[logical] = self.foreign.get(logical, 0) + 1
            return None  # another model's item: left as it is
        if shard is not None:
            if manager.keeps_keys_unique:
                wanted = manager.write_shard(cast(Any, layout.item_view(logical, item)))
                if shard == wanted:
                    return None
            else:
                changed = self._count_changed(logical)  # reads the count afresh, once per key
                if shard < manager.first_shard + manager.shard_count(logical):
                    return None
                if changed is not None and changed < self._ttl():
                    # A writer may still write this shard from its cached count: moving its
                    # items now could race a put the move cannot see. Every process knows the
                    # new count once the change is older than the cache TTL (plus clock skew).
                    return Wait(logical)
        keys = _target_hash_keys(layout, logical, item, stored, layout.range_bytes(item))
        return Move(
            old_key=layout.key_of(item),
            item={**item, layout.hash_name: {"S": keys[0]}},
            logical_key=logical,
            new_hash_keys=keys,
            legacy=shard is None,
        )


    def _count_changed(self, logical: str) -> float | None:
        """Seconds since ``logical``'s shard count last changed (read from the metadata table once
        per key per job, which also refreshes the count this process uses), ``None`` for a
        strategy without a count table."""
        manager = self.target.manager
        assert manager is not None
        strategy: Any = manager.strategy
        store = getattr(strategy, "store", None)
        if not isinstance(store, ShardCountStore):
            return None
        if logical in self._changes:
            changed_at = self._changes[logical]
        else:
            namespace = strategy.namespace if strategy.namespace is not None else manager.space.namespace
            state = store.load(namespace, logical, owner=manager.space.name)
            changed_at = None if state is None else state.last_updated
            settle = getattr(strategy, "settle_hints", None)
            if state is not None and settle is not None and settle(namespace, logical, state):
                # Hot-key hints showed writers another count until now: they may write with it
                # for one cache TTL more.
                changed_at = float(strategy.clock())
            self._changes[logical] = changed_at
        return None if changed_at is None else float(strategy.clock()) - changed_at

    def _ttl(self) -> float:
        """Seconds after a count change (or a republish of the hot-key hints) before no writer
        uses the old count: the metadata cache TTL, plus the clocks' difference (``clock_skew``:
        the change's time is the changing process's clock, this job's is its own)."""
        manager = self.target.manager
        assert manager is not None
        settle = getattr(manager.strategy, "settle_seconds", None)
        if callable(settle):  # the fleet protocol's: what every process of the table follows
            return float(settle())
        store = getattr(manager.strategy, "store", None)
        if not isinstance(store, ShardCountStore) or store.ttl <= 0:
            return 0.0  # no cache: every write reads the count
        return float(store.ttl) + float(getattr(manager.strategy, "clock_skew", 0.0))


class CompactJob(ReshardJob):
    """:class:`ReshardJob`, then trim each key's shard-count history to its current count.

    Trimming (done by :func:`pynamodb_sharding.migration._engine.run` once every segment is
    done) is what makes reads stop covering the shards above the count; a key is trimmed only
    when none of those shards holds an item any more.
    """

    kind = "compact"


class ReindexJob(Job):
    """Rewrite the entries of one sharded global secondary index that are not stored sharded.

    An index adopted in place (``Sharding(..., legacy_unsharded=True)`` on the index) holds bare
    values written by plain models or other tools: the suffixed layout's ``20160226`` becomes
    ``20160226_3``; the multi-attribute layout's items get their shard attribute
    (``day_shard``), which puts them in the index. Each rewrite is an UpdateItem conditional on
    the item still holding the value read, so it applies once, and an application write
    meanwhile wins. The item's key and every other attribute are left as they are.

    Only the model's own entries are rewritten (single-table designs keep several models'
    items in one table and one index): those whose index value is one of ``values``, whose
    table hash key starts with ``key_prefix``, and, for a model with a PynamoDB
    ``DiscriminatorAttribute``, whose discriminator names the model or a subclass. Without
    ``values``, ``key_prefix`` or a discriminator, the job is refused when another model class
    of this process stores items with the index's attribute in the same table (a plain class
    with exactly the model's attributes is the model before adoption, not another model).
    """

    kind = "reindex"

    def __init__(self, model: type[Model], index_name: str, *, values: Iterable[str] | None = None,
                 key_prefix: str | None = None) -> None:
        index = sharded_index(model, index_name)
        if index is None:
            known = sorted(sharded_indexes_of(model))
            msg = (
                f"{model.__name__} has no sharded index {index_name!r}: reindex rewrites the entries of "
                f"a GlobalSecondaryIndex that declares Sharding(...); name one of {known}."
            )
            raise MigrationError(msg)
        if index.shard_attr_name is None and not index.manager.legacy_unsharded:
            msg = (
                f"{model.__name__}.{index.attribute}: the index {index_name!r} is not declared "
                f"legacy_unsharded, so its bare values cannot be told from sharded ones; declare "
                f"Sharding(..., legacy_unsharded=True) on the index while it holds bare values (reads "
                f"then cover them too), run reindex, then remove the flag."
            )
            raise MigrationError(msg)
        check_index_agreement(model)
        self.index = index
        self.source = self.target = KeyLayout.of(model)
        self.values = None if values is None else frozenset(_checked_values(model, index_name, values))
        if key_prefix is not None and (not isinstance(key_prefix, str) or not key_prefix):
            msg = f"reindex {model.__name__} {index_name}: key_prefix must be a non-empty str, got {key_prefix!r}."
            raise MigrationError(msg)
        self.key_prefix = key_prefix
        self.discriminator = _discriminator_values(model)
        if self.values is None and key_prefix is None and self.discriminator is None:
            _refuse_shared_table(model, index)
        #: The stored names the index's entries hold; ``None``: every attribute (``AllProjection``).
        self._projected = _projected_names(model, index_name)
        #: Entries of the index this job leaves to other models, by logical value (in the
        #: items planned so far): what a dry run reports beside the rewrites.
        self.foreign: dict[str, int] = {}

    def job_id(self, total_segments: int) -> str:
        scope = ""
        if self.values is not None or self.key_prefix is not None:
            scoped = repr((sorted(self.values or ()), self.key_prefix))
            scope = "@" + hashlib.sha256(scoped.encode("utf-8")).hexdigest()[:10]
        return f"{super().job_id(total_segments)}#{self.index.index_name}{scope}"

    def describe(self) -> str:
        scope = ""
        if self.values is not None:
            scope += f" values {sorted(self.values)}"
        if self.key_prefix is not None:
            scope += f" keys {self.key_prefix!r}*"
        if self.discriminator is not None:
            scope += f" {self.discriminator[0]} in {sorted(self.discriminator[1])}"
        return f"{self.kind} {self.source.name} ({self.source.table}) index {self.index.index_name!r}{scope}"

    def owns(self, item: Mapping[str, Any], logical_value: str, logical_key: str) -> bool:
        """Whether ``item`` (raw), whose index value is ``logical_value``, is this job's model's."""
        if self.values is not None and logical_value not in self.values:
            return False
        if self.key_prefix is not None and not logical_key.startswith(self.key_prefix):
            return False
        if self.discriminator is not None:
            name, accepted = self.discriminator
            stored = item.get(name)
            found = next(iter(stored.values()), None) if isinstance(stored, Mapping) and stored else None
            if found not in accepted:
                return False
        return True

    def plan(self, item: StoredItem) -> Rewrite | None:

        index, layout = self.index, self.source
        stored = item.get(index.attr_name)
        value = stored.get("S") if isinstance(stored, Mapping) else None
        if value is None:
            return None  # not in the index
        if index.shard_attr_name is None:
            logical, shard = index.manager.codec.decode(value)
            if shard != LEGACY_SHARD:
                return None  # stored sharded already
            absent: tuple[str, ...] = ()
        else:
            if index.shard_attr_name in item:
                return None  # its shard attribute is set already
            logical, absent = value, (index.shard_attr_name,)
        logical_key, _ = layout.decode(item[layout.hash_name]["S"])
        if not self.owns(item, logical, logical_key):
            self.foreign[logical] = self.foreign.get(logical, 0) + 1
            return None  # another model's entry: left as it is
        shard = index_shard(layout, index, logical, item, logical_key)
        if index.shard_attr_name is None:
            values = {index.attr_name: {"S": index.manager.codec.encode(logical, shard)}}
        else:
            values = {index.shard_attr_name: {"N": str(shard)}}
        rewritten = {**item, **values}
        # The update writes the table item, and the index: its old entry deleted and the new one
        # put (a suffixed value), or the new one put (an item the shard attribute puts in it).
        index_writes = 1 if index.shard_attr_name is not None else 2
        units = item_write_units(rewritten) + index_writes * item_write_units(self._index_entry(rewritten))
        return Rewrite(key=layout.key_of(item), attribute=index.attr_name, expected=stored, values=values,
                       absent=absent, logical_key=logical, units=units)

    def _index_entry(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """What the index stores of ``item``: as its projection says (every attribute, the keys,
        or the keys and the attributes it includes)."""
        if self._projected is None:
            return dict(item)
        return {name: value for name, value in item.items() if name in self._projected}


def _checked_values(model: type[Model], index_name: str, values: Iterable[str]) -> list[str]:
    given: object = values
    if isinstance(given, str):
        msg = (f"reindex {model.__name__} {index_name}: values must be a list of index values, got the "
               f"str {given!r}; pass [{given!r}].")
        raise MigrationError(msg)
    found = list(values)
    if not found or not all(isinstance(value, str) and value for value in found):
        msg = f"reindex {model.__name__} {index_name}: values must be non-empty strs, got {found!r}."
        raise MigrationError(msg)
    return found


def _discriminator_values(model: type[Model]) -> tuple[str, frozenset[Any]] | None:
    """``(stored name, stored values)`` of the discriminator of ``model`` and its subclasses
    (PynamoDB's ``DiscriminatorAttribute``), ``None`` for a model without one or whose class
    has no value of its own (the root of a hierarchy: every item of the table is its)."""
    attribute = discriminator_attribute(model)
    if attribute is None:
        return None
    accepted: set[Any] = set()
    pending: list[type[Any]] = [model]
    while pending:
        klass = pending.pop()
        value = attribute.get_discriminator(klass)
        if value is None and klass is model:
            return None
        if value is not None:
            accepted.add(attribute.serialize(klass))
        pending.extend(klass.__subclasses__())
    return attribute.attr_name, frozenset(accepted)


def _table_identity(model: type[Any]) -> tuple[Any, ...]:
    meta = getattr(model, "Meta", None)
    return (getattr(meta, "table_name", None), getattr(meta, "host", None), getattr(meta, "region", None))


def _refuse_shared_table(model: type[Model], index: ShardedIndex) -> None:
    """Refuse an unscoped reindex when another model class of this process stores items with the
    index's attribute in ``model``'s table: the job would rewrite that model's values too."""
    identity = _table_identity(model)
    related = {*model.__mro__, *_subclasses(model)}
    stored = _stored_names(model)
    # A sharded model declaring this index is not at risk (one index, one sharding: see
    # check_index_agreement): only the models that store the attribute bare. A plain class
    # storing exactly the model's attributes is the model as the application declared it
    # before adopting the index (its items are the model's), not another model.
    others = sorted({other.__name__ for other in _subclasses(Model)
                     if other not in related and _table_identity(other) == identity
                     and sharded_index(other, index.index_name) is None
                     and index.attr_name in _stored_names(other) and _stored_names(other) != stored})
    if not others:
        return
    msg = (
        f"reindex {model.__name__} {index.index_name}: the table {identity[0]!r} also holds items of "
        f"{', '.join(others)}, which store {index.attr_name!r} too, and this job would rewrite their "
        f"index values as {model.__name__}'s (their queries of the bare values would then miss them). "
        f"Name what is {model.__name__}'s: values=[...] (`--values V`, once per index value), "
        f"key_prefix=... (`--key-prefix P`, its table keys' prefix), or a DiscriminatorAttribute on the "
        f"models; nothing was written."
    )
    raise MigrationError(msg)


def _refuse_other_models(model: type[Model], kind: str) -> None:
    """Refuse an unscoped reshard or compaction when another model class of this process stores
    items in ``model``'s table: their keys would read as ``model``'s (a bare key as a legacy key
    to move), and the job would move them."""
    identity = _table_identity(model)
    related = {*model.__mro__, *_subclasses(model)}
    stored = _stored_names(model)
    # A plain class storing exactly the model's attributes is the model as the application
    # declared it before sharding it (its items are the model's), not another model.
    others = sorted({other.__name__ for other in _subclasses(Model)
                     if other not in related and _table_identity(other) == identity
                     and _stored_names(other) != stored})
    if not others:
        return
    msg = (
        f"{kind} {model.__name__}: the table {identity[0]!r} also holds items of {', '.join(others)}, "
        f"whose keys this job would read as {model.__name__}'s and move (a bare key as a legacy key): "
        f"name what is {model.__name__}'s: key_prefix=... (`--key-prefix P`, its table keys' prefix), "
        f"or a DiscriminatorAttribute on the models; nothing was written."
    )
    raise MigrationError(msg)


def _projected_names(model: type[Model], index_name: str) -> frozenset[str] | None:
    """The stored names an index's entries hold (its keys, the table's keys and the attributes
    its projection includes); ``None`` for ``AllProjection``."""
    declared = indexes(model).get(index_name)
    projection = getattr(getattr(declared, "Meta", None), "projection", None)
    if projection is None or getattr(projection, "projection_type", "ALL") == "ALL":
        return None
    names = {attribute.attr_name for attribute in model.get_attributes().values()
             if attribute.is_hash_key or attribute.is_range_key}
    names.add(index_hash_attribute(declared).attr_name)
    ranged = index_range_attribute(declared)
    if ranged is not None:
        names.add(ranged.attr_name)
    names.update(getattr(projection, "non_key_attributes", None) or ())
    return frozenset(names)


def _stored_names(model: type[Any]) -> frozenset[str]:
    return frozenset(attribute.attr_name for attribute in model.get_attributes().values())


def _subclasses(model: type[Any]) -> list[type[Any]]:
    found: list[type[Any]] = []
    pending = list(model.__subclasses__())
    while pending:
        klass = pending.pop()
        if klass not in found:
            found.append(klass)
            pending.extend(klass.__subclasses__())
    return found
