"""Shard strategies: which shard a write goes to and which shards a read must cover.

A strategy answers four questions about a key, through small frozen views instead of a model
(:class:`ShardKey` for a logical key, :class:`ItemKey` for one item), so that a model, an index
and a migration ask them the same way through their
:class:`~pynamodb_sharding.ShardManager`:

* :meth:`ShardStrategy.shard_count`: how many shards new writes of a key spread over;
* :meth:`ShardStrategy.read_shards`: every shard a read of a key must cover;
* :meth:`ShardStrategy.write_shard`: the shard a new item goes to;
* :meth:`ShardStrategy.point_shards`: the shards that may hold one exact item.

A strategy whose count changes at run time also implements :class:`ResizableShardStrategy`
(``grow``, ``shrink``, ``history``, ``refresh``). The optional hooks listed in
:class:`ShardStrategy` have defaults. The fixed strategies here do no I/O;
:class:`~pynamodb_sharding.DynamicShards` keeps its count in a metadata table.
"""

from __future__ import annotations

import hashlib
import random as _random
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from pynamodb_sharding._exceptions import ShardingDefinitionError, ShardLocationError
from pynamodb_sharding._keys import MAX_SHARDS

if TYPE_CHECKING:
    from pynamodb.models import Model

__all__ = [
    "HashedShards",
    "HistoryEntry",
    "ItemKey",
    "KeySpace",
    "RandomShards",
    "RandomSource",
    "ResizableShardStrategy",
    "ShardKey",
    "ShardStrategy",
    "UnshardedKeys",
    "canonical_number",
    "md5_shard",
    "stored_bytes",
]


class RandomSource(Protocol):
    """What a strategy needs from a random generator (``random.Random`` fits)."""

    def randint(self, a: int, b: int) -> int: ...


@attrs.frozen(order=True)
class HistoryEntry:
    """One change of a key's shard count: ``count`` shards from ``at`` (epoch seconds) on."""

    at: float
    count: int


# -- what a strategy sees ----------------------------------------------------------------------


@attrs.frozen
class KeySpace:
    """One sharded key space: a model's hash-key attribute, as strategies see it.

    .. versionadded:: 0.1.0
    """

    #: The model's class name, for messages.
    model_name: str
    #: The Python name of the sharded attribute, for messages.
    attribute: str
    #: Keeps the keys of several models apart where they share storage (the table name).
    namespace: str
    #: The PynamoDB model whose requests use these keys (its connection, the sender of signals).
    model: type[Model] = attrs.field(eq=False, repr=False)

    @property
    def name(self) -> str:
        """``"Model.attribute"``, how messages name the key space."""
        return f"{self.model_name}.{self.attribute}"


@attrs.frozen
class ShardKey:
    """One logical key of a key space (``AuditLog.file_path == "/f"``).

    .. versionadded:: 0.1.0
    """

    space: KeySpace
    #: The logical key, a non-empty string.
    value: str


@attrs.frozen
class ItemKey:
    """A frozen view of one item: its logical key and the stored form of its attributes.

    .. versionadded:: 0.1.0
    """

    key: ShardKey
    #: The range key as DynamoDB stores it (see :func:`stored_bytes`), ``None`` when the model
    #: has no range key or the item does not set it.
    range_bytes: bytes | None
    #: The stored form of a named attribute, ``None`` when the item does not set it.
    attribute_bytes: Callable[[str], bytes | None] = attrs.field(eq=False, repr=False)
    #: The Python value of a named attribute, ``None`` when the item does not set it.
    attribute_value: Callable[[str], Any] = attrs.field(default=lambda name: None, eq=False, repr=False,
                                                        kw_only=True)
    #: The range key's Python value, ``None`` when the model has none or the item does not set it.
    range_value: Any = attrs.field(default=None, eq=False, repr=False, kw_only=True)

    def stored(self, name: str) -> bytes:
        """The stored form of attribute ``name``.

        Raises:
            ShardLocationError: the item does not set it, so a shard derived from it is unknown.
        """
        value = self.attribute_bytes(name)
        if value is None:
            space = self.key.space
            msg = (
                f"{space.model_name}.{name}: the shard of {space.model_name} is derived from {name!r}, "
                f"which is not set on this item; set it before writing or reading the item."
            )
            raise ShardLocationError(msg)
        return value

    def is_set(self, name: str) -> bool:
        """Whether the item sets attribute ``name``."""
        return self.attribute_bytes(name) is not None


# -- the protocols -------------------------------------------------------------------------------


@runtime_checkable
class ShardStrategy(Protocol):
    """What every strategy ``Sharding(...)`` accepts answers.

    Optional hooks, looked up with defaults by the :class:`~pynamodb_sharding.ShardManager`:

    * ``keeps_keys_unique: bool`` (``False``): one logical primary key always maps to one
      shard, so saving a new instance with a stored key replaces it;
    * ``derived_attributes() -> tuple[str, ...]`` (``()``): attributes besides the primary key
      the shard is computed from (an item whose value changes is moved by ``save()``);
    * ``write(item, send)`` (``send(write_shard(item))``): write a new item, where
      ``send(shard)`` performs the request; a strategy may retry on another shard;
    * ``companion_models() -> tuple[type[Model], ...]`` (``()``): tables needed beside the
      model's own;
    * ``validate(space, model)``: check at class definition that the model fits, raising
      :class:`~pynamodb_sharding.ShardingDefinitionError` (called for a model's own
      ``Sharding``);
    * ``bind_companions(space, model)``: make the companion models follow ``model``'s
      connection, at class definition (called for a sharded index's ``Sharding``, whose model
      is checked by the index; a model's own strategy does it in ``validate``);
    * ``describe() -> str`` (``repr``): one line for ``pynamodb-sharding status``;
    * ``shards_at(key, at, *, fresh) -> int``: the highest shard the key had used by epoch
      second ``at`` (reads and writes then stay within ``1..`` it for items written by then),
      which ``Sharding(written_at=...)`` needs to skip shards in queries.

    """

    #: The most shards this strategy ever uses for one key (sets the longest physical key).
    max_shards: int

    def shard_count(self, key: ShardKey) -> int:
        """The number of shards new writes of ``key`` spread over."""
        ...

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        """Every shard that may hold items of ``key``, ascending."""
        ...

    def write_shard(self, item: ItemKey) -> int:
        """The shard a new item goes to."""
        ...

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        """The shards that may hold this exact item, ascending."""
        ...


@runtime_checkable
class ResizableShardStrategy(ShardStrategy, Protocol):
    """A strategy whose shard count per key changes at run time.

    .. versionadded:: 0.1.0
    """

    def grow(self, key: ShardKey) -> int:
        """Raise the shard count of ``key`` now; returns the new count."""
        ...

    def shrink(self, key: ShardKey, to: int) -> int:
        """Lower the write shard count of ``key``; reads keep covering every count in effect."""
        ...

    def history(self, key: ShardKey) -> list[HistoryEntry]:
        """The recorded count changes of ``key``, oldest first."""
        ...

    def refresh(self, key: ShardKey) -> int:
        """Forget what this process cached about ``key``; returns the count read again."""
        ...


def _check_count(count: object, where: str, name: str = "shard count") -> int:
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
        msg = f"{where}: the {name} must be an int in 1..{MAX_SHARDS}, got {count!r}."
        raise ShardingDefinitionError(msg)
    return count


class RandomShards:
    """Each new item goes to a shard drawn uniformly from ``1..count``.

    Reads cover every shard. DynamoDB no longer enforces the uniqueness of a logical primary
    key across shards: use it for append-mostly data (logs, events), and :class:`HashedShards`
    when items are overwritten by key.

    Args:
        count: the number of shards, 1..:data:`~pynamodb_sharding._keys.MAX_SHARDS`.
        random: a source of randomness with ``randint(a, b)``; a private
            ``random.Random()`` by default (inject a seeded one in tests).
        previous_counts: larger counts this key space was written with before (after lowering
            ``count`` in code): reads cover those shards too, so nothing written there is
            hidden, until ``pynamodb-sharding migrate reshard`` has moved their items into
            ``1..count`` and the declaration drops them.

    """

    def __init__(self, count: int, *, random: RandomSource | None = None,
                 previous_counts: Sequence[int] = ()) -> None:
        self.count = _check_count(count, "RandomShards")
        self.previous_counts = tuple(
            _check_count(c, "RandomShards", "previous count") for c in previous_counts
        )
        self.max_shards = max((self.count, *self.previous_counts))
        self._random: RandomSource = random if random is not None else _random.Random()

    def __repr__(self) -> str:
        extra = f", previous_counts={self.previous_counts!r}" if self.previous_counts else ""
        return f"RandomShards({self.count}{extra})"

    def describe(self) -> str:
        return f"{self!r}: random shard per write, reads fan out over {self.max_shards} keys"

    def shard_count(self, key: ShardKey) -> int:
        return self.count

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return tuple(range(1, self.max_shards + 1))

    def write_shard(self, item: ItemKey) -> int:
        return self._random.randint(1, self.count)

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return self.read_shards(item.key)


def md5_shard(data: bytes, count: int) -> int:
    """The calculated shard of ``data``: ``int(md5(data).hexdigest(), 16) % count + 1``.

    For a string hash key ``pk`` and a string or integer range key ``sk`` the data is
    ``(pk + str(sk)).encode("utf-8")``, the layout of AWS's write-sharding example.
    """
    digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
    return int(digest, 16) % count + 1


class HashedShards:
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
        hash: computes the shard instead of md5, to declare a table sharded by hand: the shard
            is ``hash(value) % count`` plus the first shard number (``Sharding(first_shard=)``),
            where ``value`` is the Python value of the one attribute in ``attributes``, a tuple
            of the values of several, or, without ``attributes``, the logical hash key (a tuple
            ``(hash key, range key)`` when the model has a range key). ``hash=int`` with
            ``attributes=("item_id",)`` and ``first_shard=0`` is ``int(item_id) % count``.

    """

    keeps_keys_unique = True

    def __init__(
        self,
        count: int,
        attributes: Sequence[str] | None = None,
        *,
        previous_counts: Sequence[int] = (),
        hash: Callable[[Any], int] | None = None,
    ) -> None:
        given: object = hash  # checked at run time: hash=5 is an easy slip
        if given is not None and not callable(given):
            msg = f"HashedShards(hash=...): expected a function of the attribute's value, such as int, got {hash!r}."
            raise ShardingDefinitionError(msg)
        self.hash = hash
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
        extra += f", hash={getattr(self.hash, '__name__', self.hash)}" if self.hash is not None else ""
        return f"HashedShards({self.count}{extra})"

    def describe(self) -> str:
        basis = "+".join(self.attributes) if self.attributes else "primary key"
        function = getattr(self.hash, "__name__", "hash") if self.hash is not None else "md5"
        return f"{self!r}: shard = {function}({basis}) % {self.count} + first shard, point reads hit 1 key"

    def validate(self, space: KeySpace, model: type[Model]) -> None:
        known = model.get_attributes()
        for name in self.attributes or ():
            if name not in known:
                msg = (
                    f"{space.name}: HashedShards derives the shard from {name!r}, which is not an "
                    f"attribute of {space.model_name}; name one of {sorted(known)}."
                )
                raise ShardingDefinitionError(msg)
            if known[name].is_hash_key:
                msg = (
                    f"{space.name}: HashedShards cannot derive the shard from the hash key {name!r} "
                    f"alone (every item of a key would share one shard); omit attributes= to hash "
                    f"the primary key, or name other attributes."
                )
                raise ShardingDefinitionError(msg)
            if known[name].attr_type not in _HASHABLE_TYPES:
                msg = (
                    f"{space.name}: HashedShards derives the shard from {name!r}, a "
                    f"{type(known[name]).__name__} stored as {known[name].attr_type}; derive it from "
                    f"string, number or binary attributes, whose stored value is a single scalar."
                )
                raise ShardingDefinitionError(msg)

    def derived_attributes(self) -> tuple[str, ...]:
        return self.attributes or ()

    def shard_count(self, key: ShardKey) -> int:
        return self.count

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return tuple(range(1, self.max_shards + 1))

    def _basis(self, item: ItemKey) -> bytes:
        """The bytes the md5 is taken of: the primary key, or the named attributes joined."""
        if self.attributes is None:
            hash_key = item.key.value.encode("utf-8")
            return hash_key if item.range_bytes is None else hash_key + item.range_bytes
        return b"\x1f".join(item.stored(name) for name in self.attributes)

    def _hashed(self, item: ItemKey) -> int:
        """``hash(value)`` of the item (see ``hash`` in the class's arguments)."""
        function = self.hash
        assert function is not None
        if self.attributes is None:
            value: Any = item.key.value if item.range_bytes is None else (item.key.value, item.range_value)
        elif len(self.attributes) == 1:
            self._check_set(item)
            value = item.attribute_value(self.attributes[0])
        else:
            self._check_set(item)
            value = tuple(item.attribute_value(name) for name in self.attributes)
        space = item.key.space
        try:
            result = function(value)
        except Exception as error:  # any failure of the user's function: name its input
            if self.attributes is None:
                what = f"hash key {space.attribute!r}" + (" and range key" if item.range_bytes is not None else "")
                fix = "a hash function that accepts every key"
            else:
                names = " and ".join(repr(name) for name in self.attributes)
                what = f"attribute{'s' if len(self.attributes) > 1 else ''} {names}"
                fix = f"a hash function that accepts every value {names} can hold"
            function_name = getattr(function, "__name__", function)
            msg = (
                f"{space.name}: HashedShards(hash={function_name}) raised {type(error).__name__} "
                f"for the {what} of this {space.model_name} ({value!r}): {error}. Store a value "
                f"{function_name} accepts there, or declare {fix}. Nothing was sent."
            )
            raise ShardLocationError(msg) from error
        if isinstance(result, bool) or not isinstance(result, int):
            msg = (
                f"{space.name}: HashedShards(hash={getattr(function, '__name__', function)}) returned "
                f"{result!r} for {value!r}; the hash function must return an int. Nothing was sent."
            )
            raise ShardLocationError(msg)
        return result

    def _check_set(self, item: ItemKey) -> None:
        for name in self.attributes or ():
            item.stored(name)  # raises the error naming the unset attribute

    def _shard(self, item: ItemKey, count: int) -> int:
        if self.hash is not None:
            return self._hashed(item) % count + 1
        return md5_shard(self._basis(item), count)

    def write_shard(self, item: ItemKey) -> int:
        return self._shard(item, self.count)

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        if self.attributes is not None and not all(item.is_set(name) for name in self.attributes):
            return self.read_shards(item.key)
        return tuple(sorted({self._shard(item, count) for count in (self.count, *self.previous_counts)}))


class UnshardedKeys:
    """The table layout of a model that shards only a global secondary index: one shard, whose
    physical key is the logical key itself (see :class:`~pynamodb_sharding._keys.BareKeyCodec`).

    Not declared by users: a ``ShardedModel`` without a ``Sharding`` of its own whose index
    declares one gets it, so every read and write of its table addresses the keys a plain
    PynamoDB model addresses.

    .. versionadded:: 0.1.0
    """

    max_shards = 1
    keeps_keys_unique = True

    def __repr__(self) -> str:
        return "UnshardedKeys()"

    def describe(self) -> str:
        return "table keys stored as they are (only an index is sharded)"

    def shard_count(self, key: ShardKey) -> int:
        return 1

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return (1,)

    def write_shard(self, item: ItemKey) -> int:
        return 1

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return (1,)


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


def stored_bytes(attribute: Any, value: Any) -> bytes:
    """``value`` of ``attribute`` (a PynamoDB attribute) as DynamoDB stores it, as bytes to hash.

    Strings are their UTF-8 bytes, numbers their :func:`canonical_number` text, binary values
    their bytes: so an integer ``sk`` contributes ``str(sk)``, as the AWS example's formula does,
    and any two values PynamoDB stores identically (a naive and an aware UTC ``datetime``,
    ``5`` and ``5.0``, ``bytes`` and ``bytearray``) hash identically.

    Raises:
        ShardingDefinitionError: the stored form is not one string, number or binary value.
    """
    serialized = attribute.serialize(value)
    if attribute.attr_type == "N":
        return canonical_number(serialized).encode("ascii")
    if isinstance(serialized, str):
        return serialized.encode("utf-8")
    if isinstance(serialized, bytes | bytearray | memoryview):
        return bytes(serialized)
    msg = (
        f"{type(attribute).__name__} {getattr(attribute, 'attr_name', '')!r}: its stored form "
        f"{serialized!r} cannot be hashed; derive shards from string, number or binary attributes."
    )
    raise ShardingDefinitionError(msg)
