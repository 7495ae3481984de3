"""What each migration job does to one stored item: copy it, move it, or leave it.

A job looks at one raw item (as the scan returned it, physical key included) and answers with
a :class:`Put` (copy into another table), a :class:`Move` (to another shard of the same table)
or ``None`` (already where the model's current layout puts it). The engine
(:mod:`pynamodb_sharding.migration.engine`) does the I/O; jobs only decide, so a re-run decides
the same way.

Exactly once rests on two choices made here:

* a copy into a strategy whose shard is random (``RandomShards``, ``DynamicShards``) derives
  the item's shard from its *source* key (an md5 of the source's stored hash key and range
  key), so copying the same item again overwrites the first copy instead of adding a second;
* a move is one transaction: a conditional put of the new copy and a conditional delete of the
  old one, so a kill between never leaves two copies or none.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, cast

import attrs
from pynamodb.attributes import Attribute
from pynamodb.models import Model

from pynamodb_sharding._host import hash_keyname, range_keyname
from pynamodb_sharding.descriptor import ShardManager, shard_manager
from pynamodb_sharding.exceptions import MigrationError
from pynamodb_sharding.strategies import stored_bytes

__all__ = [
    "CompactJob",
    "CopyJob",
    "Job",
    "KeyLayout",
    "Move",
    "Put",
    "ReshardJob",
    "StoredItem",
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


Action = Put | Move


def _sharded(model: type[Model]) -> bool:
    return getattr(model, "_sharding_attr", None) is not None


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
    spread = manager.spread_from(logical, source_hash, source_range)
    return tuple(manager.physical_key(logical, shard) for shard in spread)


class Job:
    """One migration job: its models, its identity in the checkpoint table, its per-item plan."""

    kind = "job"
    source: KeyLayout
    target: KeyLayout

    @property
    def models(self) -> tuple[type[Model], ...]:
        """The models whose connections a worker process must rebuild after a fork."""
        from pynamodb_sharding.model import with_companions

        return tuple(with_companions(dict.fromkeys([self.source.model, self.target.model])))

    def job_id(self, total_segments: int) -> str:
        """The job's key in the checkpoint table: the same job over the same tables resumes."""
        return f"{self.kind}:{self.source.table}->{self.target.table}/{total_segments}"

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
        return Put(item={**item, self.target.hash_name: {"S": keys[0]}}, logical_key=logical)


class ReshardJob(Job):
    """Move the items of a sharded model's table that are not where its current layout puts them.

    Misplaced means: a bare legacy key (a model declaring ``legacy_unsharded``); a shard other
    than the computed one (``HashedShards`` after a count change, whose ``previous_counts``
    can be dropped once this job has run); a shard above the key's current count
    (``RandomShards`` or ``DynamicShards`` after the count was lowered).
    """

    kind = "reshard"

    def __init__(self, model: type[Model]) -> None:
        if not _sharded(model):
            msg = (
                f"{model.__name__} is not a sharded model: {self.kind} moves items between the shards "
                f"of a ShardedModel's table; to copy a plain model's table into a sharded one, run "
                f"`migrate copy SOURCE TARGET`."
            )
            raise MigrationError(msg)
        self.source = self.target = KeyLayout.of(model)

    def plan(self, item: StoredItem) -> Move | None:
        layout = self.target
        manager = layout.manager
        assert manager is not None
        stored = item[layout.hash_name]["S"]
        logical, shard = layout.decode(stored)
        if shard is not None:
            if manager.keeps_keys_unique:
                wanted = manager.write_shard(cast(Any, layout.item_view(logical, item)))
                if shard == wanted:
                    return None
            elif shard < manager.first_shard + manager.shard_count(logical):
                return None
        keys = _target_hash_keys(layout, logical, item, stored, layout.range_bytes(item))
        return Move(
            old_key=layout.key_of(item),
            item={**item, layout.hash_name: {"S": keys[0]}},
            logical_key=logical,
            new_hash_keys=keys,
            legacy=shard is None,
        )


class CompactJob(ReshardJob):
    """:class:`ReshardJob`, then trim each key's shard-count history to its current count.

    Trimming (done by :func:`pynamodb_sharding.migration.engine.run` once every segment is
    done) is what makes reads stop covering the shards above the count; a key is trimmed only
    when none of those shards holds an item any more.
    """

    kind = "compact"
