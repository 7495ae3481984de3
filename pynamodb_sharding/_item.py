"""The shard an item lives in: what a sharded model's instance remembers of where it is stored.

An item read back, or written, is *pinned* to the physical shard it came from or went to, so
that saving, updating or deleting it again addresses that same physical key. The pin holds
only while what the shard depends on is unchanged (the primary key, and the attributes the
strategy derives the shard from): an item whose key changed is a new item, and one whose
derived attribute changed must move. A sharded index's entry is pinned the same way, per index.

All of it is one :class:`ItemShard` per instance, reached with :func:`state`; the functions
below are the rules, and take the item and its class's layout (:class:`ItemLayout`, which the
class's :class:`~pynamodb_sharding.ShardManager` is).

The :class:`ItemShard` is kept in a slot ``ShardedModel`` declares (:data:`SLOT`), not in the
instance's ``__dict__``: what reads an object's ``__dict__`` (``vars()``, FastAPI's
``jsonable_encoder``, ``copy`` keeps slots too) sees what it sees of a plain PynamoDB item.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from pynamodb_sharding._exceptions import ShardMoveError
from pynamodb_sharding._keys import KeyCodec, describe_shard

__all__ = [
    "SLOT",
    "ItemLayout",
    "ItemShard",
    "ShardedItem",
    "basis",
    "forget",
    "forget_index",
    "index_pin",
    "known",
    "logical_key",
    "move_refused",
    "moved_from",
    "physical_key",
    "pin",
    "pin_index",
    "range_value",
    "same_basis",
    "state",
]

#: The instance attribute holding an item's :class:`ItemShard`: a slot of ``ShardedModel``
#: (``__slots__ = (SLOT,)``), so that it is not in the item's ``__dict__``.
SLOT = "_item_shard"


class ItemLayout(Protocol):
    """What the rules read of a model's layout (its :class:`ShardManager` answers all of it)."""

    @property
    def attribute(self) -> str:
        """The Python name of the sharded hash-key attribute."""

    @property
    def range_name(self) -> str | None:
        """The Python name of the range key, ``None`` without one."""

    @property
    def key_attributes(self) -> tuple[str, ...]:
        """The Python names of the hash and range keys."""

    @property
    def derived_attributes(self) -> tuple[str, ...]:
        """The attributes besides the primary key the shard is computed from."""

    @property
    def basis_names(self) -> tuple[str, ...]:
        """What the shard depends on: the keys, then the derived attributes."""

    @property
    def codec(self) -> KeyCodec:
        """The model's key codec."""


class ShardedItem(Protocol):
    """What these rules read of an item: PynamoDB's attribute values and their declarations."""

    attribute_values: dict[str, Any]

    @classmethod
    def get_attributes(cls) -> dict[str, Any]: ...


@attrs.define(slots=True)
class ItemShard:
    """Where one item is stored, as far as this process knows.

    .. versionadded:: 0.1.0
    """

    #: The shard the item was last written to or read from; ``None`` until then.
    shard: int | None = None
    #: What the shard depended on when it was pinned (see :func:`basis`).
    basis: tuple[Any, ...] | None = None
    #: Index name -> (logical value, index shard) the item was read from or written to.
    index_pins: dict[str, tuple[str, int]] | None = None
    #: Read with a projection that left out a key attribute (fetched anyway, for decoding and
    #: merging): a full put of it is refused, as PynamoDB refuses it.
    partial: bool = False
    #: A save of it as a new item, with a condition or a version check that other shards must
    #: not hold the key, failed so that it may not have been applied (a lost reply): the next
    #: save checks the other shards again (see ``_writes.save``).
    unconfirmed_create: bool = False
    #: Pinned to a newly chosen shard because a lookup found it in no shard (an ``update`` of it
    #: creates it there): the update checks that no other shard holds the key meanwhile.
    located_absent: bool = False
    #: Pinned by a batch or transactional put that goes over a bare legacy copy of its key
    #: (no shard held a copy when it was built): the put will shadow that copy.
    over_bare: bool = False
    #: Pinned to the only shard its key can be in (no lookup was needed).
    sole_candidate: bool = False


def state(item: object) -> ItemShard:
    """The item's :class:`ItemShard` (an empty one the first time it is asked for)."""
    found: ItemShard | None = getattr(item, SLOT, None)
    if found is None:
        found = ItemShard()
        setattr(item, SLOT, found)
    return found


def basis(item: ShardedItem, manager: ItemLayout) -> tuple[Any, ...]:
    """The values the item's shard depends on: hash key, range key, derived attributes.

    The first entries are the primary key: while they are unchanged the item is the same item
    (a change of a derived attribute moves it); a changed primary key makes a new item. Python
    values are kept as they are (cheap on every item read back) and compared by what DynamoDB
    would store when they differ (:func:`same_basis`).
    """
    return tuple(map(item.attribute_values.get, manager.basis_names))


def same_basis(item: ShardedItem, manager: ItemLayout, pinned: tuple[Any, ...], current: tuple[Any, ...],
               *, key_only: bool = False) -> bool:
    """Whether two bases would be stored identically (only the primary key if ``key_only``)."""
    names = manager.basis_names
    if key_only:
        size = len(manager.key_attributes)
        names, pinned, current = names[:size], pinned[:size], current[:size]
    if pinned == current:
        return True
    attributes = item.get_attributes()
    for name, old, new in zip(names, pinned, current, strict=True):
        if old is new or old == new:
            continue
        if old is None or new is None:
            return False
        try:  # e.g. a naive and an aware UTC datetime: different objects, one stored value
            if attributes[name].serialize(old) != attributes[name].serialize(new):
                return False
        except (TypeError, ValueError, AttributeError):
            return False
    return True


def pin(item: ShardedItem, manager: ItemLayout, shard: int) -> int:
    """Record that the item, as it is now, lives in ``shard``; returns ``shard``."""
    held = state(item)
    held.shard = shard
    held.basis = basis(item, manager)
    held.unconfirmed_create = held.located_absent = held.sole_candidate = False
    return shard


def forget(item: object) -> None:
    """Forget where the item lives (it is not stored, or nothing can be known)."""
    held = state(item)
    held.shard = None
    held.basis = None
    held.unconfirmed_create = held.located_absent = held.sole_candidate = False


def known(item: ShardedItem, manager: ItemLayout) -> int | None:
    """The shard the item lives in, or ``None`` when unknown or no longer valid.

    A shard read back or written is valid only while every attribute it depends on is
    unchanged: an item whose key was changed is a new item and goes where its strategy says,
    never to the shard the old key was read from.
    """
    held = state(item)
    if held.shard is None or held.basis is None:
        return None
    return held.shard if same_basis(item, manager, held.basis, basis(item, manager)) else None


def moved_from(item: ShardedItem, manager: ItemLayout) -> int | None:
    """The shard of the stored copy when only attributes the shard is derived from changed.

    The primary key is unchanged, so this is the same item, stored in a shard its new values
    no longer select: saving it moves it.
    """
    held = state(item)
    if held.shard is None or held.basis is None:
        return None
    current = basis(item, manager)
    if same_basis(item, manager, held.basis, current, key_only=True) and not same_basis(
            item, manager, held.basis, current):
        return held.shard
    return None


def pin_index(item: object, index_name: str, value: str, shard: int) -> None:
    """Record that the item's entry in ``index_name`` is ``value`` in ``shard``."""
    held = state(item)
    if held.index_pins is None:
        held.index_pins = {}
    held.index_pins[index_name] = (value, shard)


def forget_index(item: object, index_name: str) -> None:
    held = state(item)
    if held.index_pins is not None:
        held.index_pins.pop(index_name, None)


def index_pin(item: object, index_name: str) -> tuple[str, int] | None:
    """``(logical value, index shard)`` of the item's entry in ``index_name``, if pinned."""
    pins = state(item).index_pins
    return pins.get(index_name) if pins is not None else None


def logical_key(item: object, manager: ItemLayout) -> str:
    """The item's logical hash key, validated."""
    return manager.codec.check_logical(getattr(item, manager.attribute))


def range_value(item: object, manager: ItemLayout) -> Any:
    """The item's range key value (``None`` without one)."""
    return getattr(item, manager.range_name) if manager.range_name else None


def physical_key(item: object, manager: ItemLayout, shard: int) -> str:
    """The physical hash key of the item in ``shard``."""
    return manager.codec.encode(getattr(item, manager.attribute), shard)


def move_refused(item: object, manager: ItemLayout, action: str) -> ShardMoveError:
    """The error of a request that cannot address an item whose derived attribute changed."""
    derived = ", ".join(manager.derived_attributes)
    shard = state(item).shard
    where = describe_shard(shard) if shard is not None else "its shard"
    msg = (
        f"{manager.codec.where}: this item was read from {where}, but its {derived} changed since, "
        f"which selects another shard, so it cannot be {action} where it is stored; call save() on "
        f"it, which moves it to its new shard in one transaction."
    )
    return ShardMoveError(msg)
