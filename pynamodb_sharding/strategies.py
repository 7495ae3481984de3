"""Shard strategies: which shard a write goes to and which shards a read must cover.

The fixed strategies do no I/O. :class:`~pynamodb_sharding.dynamic.DynamicShards` keeps its
count in a metadata table and lives in its own module.
"""

from __future__ import annotations

import hashlib
import random as _random
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

from pynamodb_sharding.exceptions import ShardingDefinitionError, ShardingError, ShardLocationError
from pynamodb_sharding.keys import MAX_SHARDS

if TYPE_CHECKING:
    from pynamodb.models import Model

    from pynamodb_sharding.model import ShardedModel

__all__ = [
    "HashedShards",
    "HistoryEntry",
    "RandomShards",
    "RandomSource",
    "ShardStrategy",
    "canonical_number",
    "md5_shard",
    "stored_bytes",
]

_R = TypeVar("_R")


class RandomSource(Protocol):
    """What a strategy needs from a random generator (``random.Random`` fits)."""

    def randint(self, a: int, b: int) -> int: ...


@attrs.frozen(order=True)
class HistoryEntry:
    """One change of a key's shard count: ``count`` shards from ``at`` (epoch seconds) on."""

    at: float
    count: int


def _check_count(count: object, where: str, name: str = "shard count") -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
        msg = f"{where}: the {name} must be an int in 1..{MAX_SHARDS}, got {count!r}."
        raise ShardingDefinitionError(msg)
    return count


class ShardStrategy:
    """Base class of the strategies ``Sharding(...)`` accepts.

    Every method takes the model class so that one strategy object can serve a model and its
    subclasses. Subclasses override :meth:`shard_count`, :meth:`read_shards` and
    :meth:`write_shard`; :meth:`write` is the hook a strategy uses to retry a write elsewhere.
    """

    #: The most shards this strategy will ever use for one key.
    max_shards: int = 1
    #: Whether one logical primary key always maps to one shard (so saving a new instance
    #: with the key of a stored item replaces it, as on an unsharded table).
    keeps_keys_unique: bool = False

    def validate(self, model: type[ShardedModel], attribute: str) -> None:
        """Check, when the model class is defined, that this strategy fits the model.

        Raises:
            ShardingDefinitionError: the model cannot use this strategy as configured.
        """

    def shard_count(self, model: type[ShardedModel], key: str) -> int:
        """The number of shards new writes of ``key`` spread over."""
        raise NotImplementedError

    def read_shards(self, model: type[ShardedModel], key: str) -> tuple[int, ...]:
        """Every shard that may hold items of ``key``, ascending."""
        return tuple(range(1, self.shard_count(model, key) + 1))

    def write_shard(self, model: type[ShardedModel], item: ShardedModel) -> int:
        """The shard a new item goes to."""
        raise NotImplementedError

    def point_shards(self, model: type[ShardedModel], key: str, item: ShardedModel) -> tuple[int, ...]:
        """The shards that may hold this exact item (its hash and range key are set)."""
        return self.read_shards(model, key)

    def derived_attributes(self) -> tuple[str, ...]:
        """Attributes other than the primary key that an item's shard is computed from."""
        return ()

    def write(self, model: type[ShardedModel], item: ShardedModel, send: Callable[[int], _R]) -> _R:
        """Write a new item: ``send(shard)`` performs the request on that shard's physical key."""
        return send(self.write_shard(model, item))

    def companion_models(self) -> tuple[type[Model], ...]:
        """Models whose tables must exist beside the sharded model's own."""
        return ()

    def describe(self) -> str:
        """A one-line human description (the CLI's ``status`` prints it)."""
        return repr(self)

    def grow(self, model: type[ShardedModel], key: str) -> int:
        """Raise the shard count of ``key``; only dynamic strategies can."""
        raise self._fixed_count_error(model, "grow")

    def shrink(self, model: type[ShardedModel], key: str, to: int) -> int:
        """Lower the write shard count of ``key``; only dynamic strategies can."""
        raise self._fixed_count_error(model, "shrink")

    def history(self, model: type[ShardedModel], key: str) -> list[HistoryEntry]:
        """The shard-count changes of ``key``; a fixed strategy has one entry at time 0."""
        return [HistoryEntry(at=0.0, count=self.shard_count(model, key))]

    def _fixed_count_error(self, model: type[Any], action: str) -> ShardingError:
        msg = (
            f"{model.__name__}: {type(self).__name__} has a fixed shard count that cannot {action} "
            f"at run time; change the count in the model's Sharding(...) declaration, or use "
            f"DynamicShards for counts that change with load."
        )
        return ShardingError(msg)


class RandomShards(ShardStrategy):
    """Each new item goes to a shard drawn uniformly from ``1..count``.

    Reads cover every shard. DynamoDB no longer enforces the uniqueness of a logical primary
    key across shards: use it for append-mostly data (logs, events), and :class:`HashedShards`
    when items are overwritten by key.

    Args:
        count: the number of shards, 1..:data:`~pynamodb_sharding.keys.MAX_SHARDS`.
        random: a source of randomness with ``randint(a, b)``; a private
            ``random.Random()`` by default (inject a seeded one in tests).
    """

    def __init__(self, count: int, *, random: RandomSource | None = None) -> None:
        self.count = _check_count(count, "RandomShards")
        self.max_shards = self.count
        self._random: RandomSource = random if random is not None else _random.Random()

    def __repr__(self) -> str:
        return f"RandomShards({self.count})"

    def describe(self) -> str:
        return f"RandomShards({self.count}): random shard per write, reads fan out over {self.count} keys"

    def shard_count(self, model: type[ShardedModel], key: str) -> int:
        return self.count

    def write_shard(self, model: type[ShardedModel], item: ShardedModel) -> int:
        return self._random.randint(1, self.count)


def md5_shard(data: bytes, count: int) -> int:
    """The calculated shard of ``data``: ``int(md5(data).hexdigest(), 16) % count + 1``.

    For a string hash key ``pk`` and a string or integer range key ``sk`` the data is
    ``(pk + str(sk)).encode("utf-8")``, the layout of AWS's write-sharding example.
    """
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
    return int(digest, 16) % count + 1


class HashedShards(ShardStrategy):
    """The shard is computed from the item, so a point read costs one key.

    By default the shard is ``md5(logical_pk + range_key) % count + 1`` over the hash key and
    the range key as DynamoDB stores it (see :func:`stored_bytes`; for a string or integer
    range key this is ``md5(pk + str(sk))``, the layout of AWS's write-sharding example); the
    hash key alone without a range key. With ``attributes=("user_id",)`` it is computed from
    those attributes instead (their stored values joined), which lets a query by the hash key
    and one of those attributes read a single shard; a loaded item whose ``user_id`` changes
    is moved by ``save()``.

    One logical primary key maps to one shard, so saving a new instance with an existing key
    replaces the stored item, as on an unsharded table (during a layout change, wherever the
    key was stored).

    Args:
        count: the number of shards.
        attributes: string, number or binary attribute names the shard is derived from;
            default the primary key.
        previous_counts: counts this key space was written with before (after changing
            ``count`` in code): reads cover those layouts too until a migration moves the data.
    """

    keeps_keys_unique = True

    def __init__(
        self,
        count: int,
        attributes: Sequence[str] | None = None,
        *,
        previous_counts: Sequence[int] = (),
    ) -> None:
        self.count = _check_count(count, "HashedShards")
        self.previous_counts = tuple(
            _check_count(c, "HashedShards", "previous count") for c in previous_counts
        )
        self.max_shards = max((self.count, *self.previous_counts))
        if attributes is not None and (isinstance(attributes, str) or not attributes):
            msg = (
                f"HashedShards: attributes must be a non-empty sequence of attribute names, got "
                f"{attributes!r}; write attributes=('user_id',) for one attribute."
            )
            raise ShardingDefinitionError(msg)
        self.attributes = tuple(attributes) if attributes is not None else None

    def __repr__(self) -> str:
        extra = f", attributes={self.attributes!r}" if self.attributes else ""
        extra += f", previous_counts={self.previous_counts!r}" if self.previous_counts else ""
        return f"HashedShards({self.count}{extra})"

    def describe(self) -> str:
        basis = "+".join(self.attributes) if self.attributes else "primary key"
        return f"{self!r}: shard = md5({basis}) % {self.count} + 1, point reads hit 1 key"

    def validate(self, model: type[ShardedModel], attribute: str) -> None:
        known = model.get_attributes()
        for name in self.attributes or ():
            if name not in known:
                msg = (
                    f"{model.__name__}.{attribute}: HashedShards derives the shard from {name!r}, "
                    f"which is not an attribute of {model.__name__}; name one of {sorted(known)}."
                )
                raise ShardingDefinitionError(msg)
            if known[name].is_hash_key:
                msg = (
                    f"{model.__name__}.{attribute}: HashedShards cannot derive the shard from the "
                    f"hash key {name!r} alone (every item of a key would share one shard); "
                    f"omit attributes= to hash the primary key, or name other attributes."
                )
                raise ShardingDefinitionError(msg)
            if known[name].attr_type not in _HASHABLE_TYPES:
                msg = (
                    f"{model.__name__}.{attribute}: HashedShards derives the shard from {name!r}, a "
                    f"{type(known[name]).__name__} stored as {known[name].attr_type}; derive it from "
                    f"string, number or binary attributes, whose stored value is a single scalar."
                )
                raise ShardingDefinitionError(msg)

    def derived_attributes(self) -> tuple[str, ...]:
        return self.attributes or ()

    def shard_count(self, model: type[ShardedModel], key: str) -> int:
        return self.count

    def read_shards(self, model: type[ShardedModel], key: str) -> tuple[int, ...]:
        return tuple(range(1, self.max_shards + 1))

    def _basis(self, model: type[ShardedModel], item: ShardedModel) -> bytes:
        """The bytes the md5 is taken of: the primary key, or the named attributes joined."""
        if self.attributes is None:
            hash_key = item.logical_hash_key().encode("utf-8")
            range_name = model._range_keyname
            if range_name is None:
                return hash_key
            return hash_key + stored_bytes(model, item, range_name)
        return b"\x1f".join(stored_bytes(model, item, name) for name in self.attributes)

    def write_shard(self, model: type[ShardedModel], item: ShardedModel) -> int:
        return md5_shard(self._basis(model, item), self.count)

    def point_shards(self, model: type[ShardedModel], key: str, item: ShardedModel) -> tuple[int, ...]:
        if self.attributes is not None and any(getattr(item, name) is None for name in self.attributes):
            return self.read_shards(model, key)
        basis = self._basis(model, item)
        shards = {md5_shard(basis, count) for count in (self.count, *self.previous_counts)}
        return tuple(sorted(shards))


#: Attribute types whose stored value is one scalar that can be hashed: string, number, binary.
_HASHABLE_TYPES = frozenset({"S", "N", "B"})


def canonical_number(text: str) -> str:
    """The number DynamoDB stores for the ``N`` value ``text``, as text.

    DynamoDB keeps numbers normalised (``"5.0"``, ``"5"`` and ``"5E+0"`` are one value), so two
    values it stores identically must hash identically: integral values print as integers
    (``"1e+30"`` -> ``"1000000000000000000000000000000"``), others in plain decimal notation
    without trailing zeros (``"1.50"`` -> ``"1.5"``, ``"1e-07"`` -> ``"0.0000001"``).
    """
    plain = format(Decimal(text), "f")  # exact: no rounding to the context's precision
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    return "0" if plain == "-0" else plain


def stored_bytes(model: type[ShardedModel], item: ShardedModel, name: str) -> bytes:
    """The value of attribute ``name`` as DynamoDB stores it, as bytes to hash.

    Strings are their UTF-8 bytes, numbers their :func:`canonical_number` text, binary values
    their bytes: so an integer ``sk`` contributes ``str(sk)``, as the AWS example's formula does,
    and any two values PynamoDB stores identically (a naive and an aware UTC ``datetime``,
    ``5`` and ``5.0``, ``bytes`` and ``bytearray``) land in the same shard.

    Raises:
        ShardLocationError: the attribute is not set, so the shard cannot be computed.
    """
    value = getattr(item, name)
    if value is None:
        msg = (
            f"{model.__name__}.{name}: HashedShards derives the shard from {name!r}, which is not "
            f"set on this item; set it before writing or reading the item."
        )
        raise ShardLocationError(msg)
    attribute = model.get_attributes()[name]
    serialized = attribute.serialize(value)
    kind = attribute.attr_type
    if kind == "N":
        return canonical_number(serialized).encode("ascii")
    if isinstance(serialized, str):
        return serialized.encode("utf-8")
    if isinstance(serialized, bytes | bytearray | memoryview):
        return bytes(serialized)
    msg = (
        f"{model.__name__}.{name}: HashedShards cannot hash the stored form {serialized!r} of "
        f"{type(attribute).__name__}; derive the shard from string, number or binary attributes."
    )
    raise ShardingDefinitionError(msg)
