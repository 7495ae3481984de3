"""The cursor of a merged query: where every shard resumes, as one JSON-serialisable value.

A merged query's ``last_evaluated_key`` names, per shard, the key of the last item returned
from it. :func:`encode_cursor` builds it (plain JSON types, binary keys in base64, a checksum
over the content); :func:`decode_cursor` validates an untrusted copy against the query that
resumes from it and refuses an edited, truncated or foreign one with a
:class:`~pynamodb_sharding.CursorError`. No PynamoDB import: values are in botocore's shape.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs

from pynamodb_sharding.exceptions import CursorError, ShardKeyError

__all__ = [
    "CURSOR_VERSION",
    "CursorScope",
    "CursorState",
    "RawItem",
    "RawKey",
    "RawValue",
    "decode_cursor",
    "encode_cursor",
]

#: A DynamoDB attribute value in botocore's shape: ``{"S": "a"}``, ``{"N": "1"}``, ``{"B": b"x"}``.
RawValue = dict[str, Any]
#: An item as DynamoDB returns it.
RawItem = dict[str, RawValue]
#: A primary key (plus index keys for an index query) in ``ExclusiveStartKey`` shape.
RawKey = dict[str, RawValue]

#: Version of the cursor layout; a cursor of another version is refused, never misread.
CURSOR_VERSION = 1

_CHECKSUM_HEX_DIGITS = 16
_KEY_TYPES = frozenset({"S", "N", "B"})


@attrs.frozen
class CursorScope:
    """What a cursor belongs to; a cursor is only accepted by a query of the same scope.

    ``key`` is the queried hash-key value in raw form (``{"S": "logical key"}`` for a fan-out).
    """

    model: str
    table: str
    key: RawValue
    index: str | None
    forward: bool


@attrs.frozen
class CursorState:
    """A decoded cursor: where each shard resumes (right after its start key).

    A shard it does not name is read from its start (a shard added after the cursor was
    made, or one that had returned nothing).
    """

    positions: Mapping[int, RawKey] = attrs.field(factory=dict)


def _value_to_json(value: Mapping[str, Any]) -> dict[str, str]:
    (kind, inner), *_ = value.items()
    if kind == "B":
        raw = inner if isinstance(inner, bytes | bytearray) else base64.b64decode(inner)
        return {"B": base64.b64encode(raw).decode("ascii")}
    return {str(kind): str(inner)}


def _key_to_json(key: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    return {name: _value_to_json(value) for name, value in key.items()}


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_CHECKSUM_HEX_DIGITS]


def encode_cursor(scope: CursorScope, state: CursorState) -> dict[str, Any]:
    """Build the JSON-serialisable cursor of ``state`` for queries of ``scope``.

    The cursor holds plain JSON types only (binary key values are base64) and a checksum over
    its content, so that :func:`decode_cursor` refuses an edited or truncated copy. The
    checksum detects accidents and misuse, not forgery: it is not a secret signature.
    """
    body: dict[str, Any] = {
        "version": CURSOR_VERSION,
        "model": scope.model,
        "table": scope.table,
        "key": _value_to_json(scope.key),
        "index": scope.index,
        "forward": scope.forward,
        "positions": [
            {"shard": shard, "start_key": _key_to_json(state.positions[shard])}
            for shard in sorted(state.positions)
        ],
    }
    body["checksum"] = _checksum(body)
    return body


class _CursorReader:
    """Validates an untrusted cursor value against the scope of the query resuming from it."""

    def __init__(
        self,
        scope: CursorScope,
        key_names: Sequence[str],
        hash_name: str,
        hash_value: Callable[[int], object],
    ) -> None:
        self.scope = scope
        self.key_names = frozenset(key_names)
        self.hash_name = hash_name
        self.hash_value = hash_value

    def fail(self, problem: str) -> CursorError:
        msg = (
            f"{self.scope.model}.query(last_evaluated_key=...): the cursor {problem}; "
            f"restart the query without last_evaluated_key (a cursor only resumes the query "
            f"that returned it, unedited)."
        )
        return CursorError(msg)

    def read(self, cursor: object) -> CursorState:
        if not isinstance(cursor, dict):
            hint = " (json.loads the stored text first)" if isinstance(cursor, str | bytes) else ""
            raise self.fail(f"is a {type(cursor).__name__}, not the dict a merged query returns{hint}")
        expected_fields = {
            "version", "model", "table", "key", "index", "forward", "positions", "checksum",
        }
        if set(cursor) != expected_fields:
            missing = sorted(expected_fields - set(cursor))
            extra = sorted(set(cursor) - expected_fields)
            raise self.fail(
                f"is truncated or not a merged-query cursor (missing {missing}, unexpected {extra})"
            )
        if cursor["version"] != CURSOR_VERSION:
            raise self.fail(f"has version {cursor['version']!r}, this library reads version {CURSOR_VERSION}")
        body = {name: value for name, value in cursor.items() if name != "checksum"}
        try:
            checksum = _checksum(body)
        except (TypeError, ValueError):
            raise self.fail("holds values that are not JSON") from None
        if cursor["checksum"] != checksum:
            raise self.fail("fails its checksum: it was edited, truncated or corrupted")
        scope = self.scope
        if (cursor["model"], cursor["table"]) != (scope.model, scope.table):
            raise self.fail(
                f"belongs to {cursor['model']} (table {cursor['table']!r}), not to "
                f"{scope.model} (table {scope.table!r})"
            )
        if cursor["key"] != _value_to_json(scope.key):
            raise self.fail(f"belongs to the hash key {cursor['key']!r}, not {_value_to_json(scope.key)!r}")
        if cursor["index"] != scope.index:
            raise self.fail(f"belongs to a query of index {cursor['index']!r}, not {scope.index!r}")
        if cursor["forward"] is not scope.forward:
            raise self.fail(
                "was made by a query in the other direction (scan_index_forward differs)"
            )
        return CursorState(positions=self._positions(cursor["positions"]))

    def _shard(self, value: object) -> int:
        # 0 is a shard of Sharding(first_shard=0), -1 the bare key of legacy_unsharded models:
        # whether this key can have the shard is hash_value's to say.
        if isinstance(value, bool) or not isinstance(value, int) or value < -1:
            raise self.fail(f"names shard {value!r}; shards are ints >= 0")
        return value

    def _positions(self, value: object) -> dict[int, RawKey]:
        if not isinstance(value, list):
            raise self.fail("has no list of shard positions")
        positions: dict[int, RawKey] = {}
        for entry in value:
            if not isinstance(entry, dict) or set(entry) != {"shard", "start_key"}:
                raise self.fail(f"has a malformed shard position {entry!r}")
            shard = self._shard(entry["shard"])
            if shard in positions:
                raise self.fail(f"names shard {shard} twice")
            positions[shard] = self._start_key(shard, entry["start_key"])
        return positions

    def _start_key(self, shard: int, value: object) -> RawKey:
        if not isinstance(value, dict) or set(value) != self.key_names:
            raise self.fail(
                f"has a start key for shard {shard} with attributes "
                f"{sorted(value) if isinstance(value, dict) else value!r}, expected {sorted(self.key_names)}"
            )
        key = {name: self._raw_value(shard, name, raw) for name, raw in value.items()}
        try:
            expected = self.hash_value(shard)
        except ShardKeyError:
            raise self.fail(f"names shard {shard}, which this key cannot have") from None
        (actual,) = key[self.hash_name].values()
        if actual != expected:
            raise self.fail(
                f"has a start key for shard {shard} whose {self.hash_name} is {actual!r}, "
                f"not that shard's key {expected!r}"
            )
        return key

    def _raw_value(self, shard: int, name: str, value: object) -> RawValue:
        if not isinstance(value, dict) or len(value) != 1:
            raise self.fail(f"has a malformed value {value!r} for {name} in shard {shard}")
        ((kind, inner),) = value.items()
        if kind not in _KEY_TYPES or not isinstance(inner, str):
            raise self.fail(f"has a malformed value {value!r} for {name} in shard {shard}")
        if kind == "B":
            try:
                return {"B": base64.b64decode(inner, validate=True)}
            except (binascii.Error, ValueError):
                raise self.fail(
                    f"has a binary value for {name} in shard {shard} that is not base64"
                ) from None
        if kind == "N":
            try:
                Decimal(inner)
            except InvalidOperation:
                raise self.fail(f"has a number for {name} in shard {shard} that is not a number") from None
        return {kind: inner}


def decode_cursor(
    cursor: object,
    scope: CursorScope,
    *,
    key_names: Sequence[str],
    hash_name: str,
    hash_value: Callable[[int], object],
) -> CursorState:
    """Validate a cursor returned by a merged query and decode it for the same query's scope.

    Args:
        cursor: what the caller passed as ``last_evaluated_key`` (after a JSON round trip).
        scope: the model, table, hash key, index and direction of the resuming query.
        key_names: the attribute names every start key must have (table keys, plus the index's).
        hash_name: the attribute queried by hash key (the table's, or the index's).
        hash_value: the value ``hash_name`` must hold in a shard's start key (its physical key);
            may raise :class:`ShardKeyError` for a shard the key cannot have.

    Raises:
        CursorError: the cursor is not a dict, is truncated, edited, of another model, table,
            key, index or direction, or names shards or start keys that do not fit.
    """
    return _CursorReader(scope, key_names, hash_name, hash_value).read(cursor)
