"""Physical <-> logical partition-key encoding.

A physical key is ``logical + separator + shard``: always suffixed, so decoding splits on the
*last* separator and is unambiguous even when the logical key contains the separator.
"""

from __future__ import annotations

import attrs

from pynamodb_sharding._exceptions import ShardingDefinitionError, ShardKeyError

__all__ = [
    "DEFAULT_SEPARATOR",
    "FIRST_READ",
    "LEGACY_SHARD",
    "MAX_PARTITION_KEY_BYTES",
    "MAX_SHARDS",
    "MAX_TRANSACTION_ITEMS",
    "BareKeyCodec",
    "KeyCodec",
    "decode",
    "describe_shard",
    "encode",
    "validate_separator",
]

DEFAULT_SEPARATOR = "_"

#: DynamoDB's limit on a partition key value, in UTF-8 bytes.
MAX_PARTITION_KEY_BYTES = 2048

#: DynamoDB's limit on the actions of one TransactWriteItems request.
MAX_TRANSACTION_ITEMS = 100

#: The largest shard count a strategy accepts. Far beyond any useful fan-out (a point read of
#: a random-sharded key costs one key per shard), small enough to keep suffixes short.
MAX_SHARDS = 10_000

#: The shard number the codec of a ``Sharding(legacy_unsharded=True)`` model gives a bare
#: legacy key (a stored value without a shard suffix); never a real shard.
LEGACY_SHARD = -1


#: What a merged query adds to a shard's number to name the stream that reads it a first time,
#: before every other shard, because a job may be moving items out of it into shards that the
#: query reads afterwards (a shard of an older ``HashedShards`` layout that the current layout
#: has too). Above every shard number (:data:`MAX_SHARDS`).
FIRST_READ = 100_000


def describe_shard(shard: int) -> str:
    """How messages name a shard: ``"shard 3"``, and ``"the unsharded (bare) key"`` for
    :data:`LEGACY_SHARD`, a number users never see."""
    if shard == LEGACY_SHARD:
        return "the unsharded (bare) key"
    if shard >= FIRST_READ:
        return f"shard {shard - FIRST_READ} (read first)"
    return f"shard {shard}"


def validate_separator(separator: object, where: str) -> str:
    """Return ``separator`` if decoding by its last occurrence is unambiguous.

    Raises:
        ShardingDefinitionError: the separator is empty, not a string, or contains a digit
            (a digit would run into the shard number) or a character DynamoDB keys cannot hold.
    """
    if not isinstance(separator, str) or not separator:
        msg = f"{where}: the separator must be a non-empty string, got {separator!r}; use e.g. '_' or '#'."
        raise ShardingDefinitionError(msg)
    if any(ch.isdigit() for ch in separator):
        msg = (
            f"{where}: the separator {separator!r} contains a digit, which would run into the shard "
            f"number and make physical keys ambiguous; use a separator without digits such as '_' or '#'."
        )
        raise ShardingDefinitionError(msg)
    if any(ch.isspace() or not ch.isprintable() for ch in separator):
        msg = (
            f"{where}: the separator {separator!r} contains whitespace or a control character; "
            f"use a printable separator such as '_' or '#'."
        )
        raise ShardingDefinitionError(msg)
    return separator


def encode(logical_key: str, shard: int, separator: str = DEFAULT_SEPARATOR) -> str:
    """Return the physical key of ``logical_key`` in ``shard`` (no validation)."""
    return f"{logical_key}{separator}{shard}"


def _split(physical_key: str, separator: str, first_shard: int = 1) -> tuple[str, int] | None:
    logical, sep, suffix = physical_key.rpartition(separator)
    if not (sep and logical and suffix.isdecimal() and suffix.isascii()):
        return None
    if suffix[0] != "0":
        return logical, int(suffix)
    if suffix == "0" and first_shard == 0:
        return logical, 0
    return None  # a leading zero: no shard is encoded so, and keys must decode one way


def _not_physical(physical_key: str, separator: str, first_shard: int = 1) -> str:
    return (
        f"{physical_key!r} is not a physical key: it must end with {separator!r} and a shard "
        f"number >= {first_shard}; it was not written through a ShardedModel with this separator."
    )


def decode(physical_key: str, separator: str = DEFAULT_SEPARATOR) -> tuple[str, int]:
    """Split a physical key into ``(logical_key, shard)``.

    Raises:
        ShardKeyError: the value has no separator followed by a shard number.
    """
    split = _split(physical_key, separator)
    if split is None:
        raise ShardKeyError(_not_physical(physical_key, separator))
    return split


#: How many decoded physical keys a codec keeps (:meth:`KeyCodec.decode`).
_DECODED_KEPT = 4096


@attrs.frozen
class KeyCodec:
    """Encodes and decodes the physical keys of one model's hash-key attribute.

    ``model_name`` and ``attribute`` only serve the error messages. Shards are numbered from
    ``first_shard`` (0 or 1). With ``legacy`` (``Sharding(legacy_unsharded=True)``) a stored
    value without a shard suffix is a bare legacy key: it decodes to :data:`LEGACY_SHARD`, and
    encoding :data:`LEGACY_SHARD` gives the logical key itself. So is a value whose suffix is
    above ``highest_shard``, the highest shard the layout can have: a plain model's
    ``sensor_2016`` is that legacy key, not shard 2016 of ``sensor``.
    """

    model_name: str
    attribute: str
    separator: str = DEFAULT_SEPARATOR
    first_shard: int = 1
    legacy: bool = False
    #: The highest shard number the layout can have (its strategy's ``max_shards``, shifted by
    #: ``first_shard``); ``None``: any shard up to :attr:`last_shard`.
    highest_shard: int | None = None
    #: Physical keys decoded lately: a read decodes the same few keys (one a shard) for every
    #: item it returns. Emptied when it holds :data:`_DECODED_KEPT`.
    _decoded: dict[str, tuple[str, int]] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    @property
    def last_shard(self) -> int:
        """The highest shard number a key can have."""
        return MAX_SHARDS - 1 + self.first_shard

    @property
    def where(self) -> str:
        return f"{self.model_name}.{self.attribute}"

    def check_logical(self, logical_key: object) -> str:
        """Return ``logical_key`` if it can be sharded, else raise :class:`ShardKeyError`."""
        if not isinstance(logical_key, str):
            msg = (
                f"{self.where}: the hash key must be a str, got {type(logical_key).__name__} "
                f"{logical_key!r}; pass the logical key as a string."
            )
            raise ShardKeyError(msg)
        if not logical_key:
            msg = f"{self.where}: the hash key is empty; DynamoDB keys need at least one character."
            raise ShardKeyError(msg)
        return logical_key

    def encode(self, logical_key: object, shard: int) -> str:
        """Return the physical key, refusing keys over DynamoDB's 2,048-byte limit.

        Raises:
            ShardKeyError: wrong type, empty, shard out of range, or too long once suffixed.
        """
        key = self.check_logical(logical_key)
        if shard == LEGACY_SHARD and self.legacy and not isinstance(shard, bool):
            physical = key
        elif isinstance(shard, bool) or not isinstance(shard, int) or not self.first_shard <= shard <= self.last_shard:
            msg = (
                f"{self.where}: shard {shard!r} is out of range; shards are numbered "
                f"{self.first_shard}..{self.last_shard}."
            )
            raise ShardKeyError(msg)
        else:
            physical = encode(key, shard, self.separator)
        size = len(physical.encode("utf-8"))
        if size > MAX_PARTITION_KEY_BYTES:
            budget = MAX_PARTITION_KEY_BYTES - len(f"{self.separator}{MAX_SHARDS}".encode())
            msg = (
                f"{self.where}: the physical key would be {size} bytes, over DynamoDB's "
                f"{MAX_PARTITION_KEY_BYTES:,}-byte partition-key limit; keep logical keys under "
                f"{budget} bytes (UTF-8) so that the shard suffix fits."
            )
            raise ShardKeyError(msg)
        return physical

    def encode_unchecked(self, logical_key: str, shard: int) -> str:
        """The physical key, without checking type, range or length."""
        if shard == LEGACY_SHARD and self.legacy:
            return logical_key
        return encode(logical_key, shard, self.separator)

    def fits(self, logical_key: str, shard: int) -> bool:
        """Whether the physical key of ``logical_key`` in ``shard`` is within DynamoDB's limit."""
        return len(logical_key.encode("utf-8")) <= self.max_logical_bytes(shard)

    def max_logical_bytes(self, shard: int) -> int:
        """The longest logical key (UTF-8 bytes) whose physical key in ``shard`` fits the limit."""
        if shard == LEGACY_SHARD and self.legacy:
            return MAX_PARTITION_KEY_BYTES
        return MAX_PARTITION_KEY_BYTES - len(f"{self.separator}{shard}".encode())

    def decode(self, physical_key: object) -> tuple[str, int]:
        """Return ``(logical_key, shard)`` of a physical key read from the table.

        A value without a shard suffix decodes to ``(value, LEGACY_SHARD)`` when the codec
        reads legacy keys.

        Raises:
            ShardKeyError: the value is not a physical key of this model.
        """
        decoded = self._decoded.get(physical_key) if isinstance(physical_key, str) else None
        if decoded is not None:
            return decoded
        if not isinstance(physical_key, str):
            msg = f"{self.where}: expected a physical key string, got {type(physical_key).__name__}."
            raise ShardKeyError(msg)
        split = _split(physical_key, self.separator, self.first_shard)
        highest = self.last_shard if self.highest_shard is None or not self.legacy else self.highest_shard
        if split is None or split[1] > highest:
            if self.legacy and physical_key:
                split = physical_key, LEGACY_SHARD
            else:
                msg = f"{self.where}: {_not_physical(physical_key, self.separator, self.first_shard)}"
                raise ShardKeyError(msg)
        if len(self._decoded) >= _DECODED_KEPT:
            self._decoded.clear()
        self._decoded[physical_key] = split
        return split


@attrs.frozen
class BareKeyCodec(KeyCodec):
    """The codec of a table whose hash key a model does not shard (it shards only a global
    secondary index): the table has one shard, and its physical key *is* the logical key.

    Every value read back decodes to ``(value, first_shard)``, and ``first_shard`` encodes to
    the value itself, so the model's reads and writes address exactly the keys a plain PynamoDB
    model over the same table addresses.
    """

    @property
    def last_shard(self) -> int:
        return self.first_shard

    def encode(self, logical_key: object, shard: int) -> str:
        """Return ``logical_key`` itself, the only physical key it has.

        Raises:
            ShardKeyError: wrong type, empty, a shard other than the one, or over 2,048 bytes.
        """
        key = self.check_logical(logical_key)
        if isinstance(shard, bool) or shard != self.first_shard:
            msg = (
                f"{self.where}: the table's keys are not sharded (the model shards only an index), "
                f"so its one shard is {self.first_shard}, not {shard!r}."
            )
            raise ShardKeyError(msg)
        size = len(key.encode("utf-8"))
        if size > MAX_PARTITION_KEY_BYTES:
            msg = (
                f"{self.where}: the key is {size} bytes, over DynamoDB's {MAX_PARTITION_KEY_BYTES:,}-byte "
                f"partition-key limit; keep keys within {MAX_PARTITION_KEY_BYTES:,} bytes (UTF-8)."
            )
            raise ShardKeyError(msg)
        return key

    def encode_unchecked(self, logical_key: str, shard: int) -> str:
        return logical_key

    def max_logical_bytes(self, shard: int) -> int:
        return MAX_PARTITION_KEY_BYTES

    def decode(self, physical_key: object) -> tuple[str, int]:
        """Return ``(physical_key, first_shard)``: a stored key is the logical key.

        Raises:
            ShardKeyError: the value is not a string.
        """
        if not isinstance(physical_key, str):
            msg = f"{self.where}: expected a key string, got {type(physical_key).__name__}."
            raise ShardKeyError(msg)
        return physical_key, self.first_shard
