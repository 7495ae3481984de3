"""Physical <-> logical partition-key encoding.

A physical key is ``logical + separator + shard``: always suffixed, so decoding splits on the
*last* separator and is unambiguous even when the logical key contains the separator.
"""

from __future__ import annotations

import attrs

from pynamodb_sharding.exceptions import ShardingDefinitionError, ShardKeyError

__all__ = [
    "DEFAULT_SEPARATOR",
    "MAX_PARTITION_KEY_BYTES",
    "MAX_SHARDS",
    "KeyCodec",
    "decode",
    "encode",
    "validate_separator",
]

DEFAULT_SEPARATOR = "_"

#: DynamoDB's limit on a partition key value, in UTF-8 bytes.
MAX_PARTITION_KEY_BYTES = 2048

#: The largest shard count a strategy accepts. Far beyond any useful fan-out (a point read of
#: a random-sharded key costs one key per shard), small enough to keep suffixes short.
MAX_SHARDS = 10_000


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


def _split(physical_key: str, separator: str) -> tuple[str, int] | None:
    logical, sep, suffix = physical_key.rpartition(separator)
    if sep and logical and suffix.isdecimal() and suffix.isascii() and suffix[0] != "0":
        return logical, int(suffix)
    return None


def _not_physical(physical_key: str, separator: str) -> str:
    return (
        f"{physical_key!r} is not a physical key: it must end with {separator!r} and a shard "
        f"number >= 1; it was not written through a ShardedModel with this separator."
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


@attrs.frozen
class KeyCodec:
    """Encodes and decodes the physical keys of one model's hash-key attribute.

    ``model_name`` and ``attribute`` only serve the error messages.
    """

    model_name: str
    attribute: str
    separator: str = DEFAULT_SEPARATOR

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
        if isinstance(shard, bool) or not isinstance(shard, int) or not 1 <= shard <= MAX_SHARDS:
            msg = f"{self.where}: shard {shard!r} is out of range; shards are numbered 1..{MAX_SHARDS}."
            raise ShardKeyError(msg)
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
        return encode(logical_key, shard, self.separator)

    def fits(self, logical_key: str, shard: int) -> bool:
        """Whether the physical key of ``logical_key`` in ``shard`` is within DynamoDB's limit."""
        return len(logical_key.encode("utf-8")) <= self.max_logical_bytes(shard)

    def max_logical_bytes(self, shard: int) -> int:
        """The longest logical key (UTF-8 bytes) whose physical key in ``shard`` fits the limit."""
        return MAX_PARTITION_KEY_BYTES - len(f"{self.separator}{shard}".encode())

    def decode(self, physical_key: object) -> tuple[str, int]:
        """Return ``(logical_key, shard)`` of a physical key read from the table.

        Raises:
            ShardKeyError: the value is not a physical key of this model.
        """
        if not isinstance(physical_key, str):
            msg = f"{self.where}: expected a physical key string, got {type(physical_key).__name__}."
            raise ShardKeyError(msg)
        split = _split(physical_key, self.separator)
        if split is None:
            msg = f"{self.where}: {_not_physical(physical_key, self.separator)}"
            raise ShardKeyError(msg)
        return split
