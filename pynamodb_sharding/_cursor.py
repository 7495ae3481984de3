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
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs

from pynamodb_sharding._exceptions import CursorError, ShardKeyError
from pynamodb_sharding._keys import LEGACY_SHARD, describe_shard

__all__ = [
    "CURSOR_VERSION",
    "TOKEN_TAG_BYTES",
    "TOKEN_VERSION",
    "CursorScope",
    "CursorSecret",
    "CursorState",
    "RawItem",
    "RawKey",
    "RawValue",
    "TokenCodec",
    "decode_cursor",
    "encode_cursor",
    "secret_keys",
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
    #: The shards whose start key is an entry the query returned (or skipped as a copy of one
    #: returned) where that is not implied by the key: a bare legacy entry of an index query,
    #: which a read may also have dropped as stale (see ``ShardMerge(resumes_after=...)``).
    returned: frozenset[int] = frozenset()
    #: The other items the query returned at the sort value it stopped at, ``(shard, key)``,
    #: where no start key stands for them: their copies behind the break are skipped (an index
    #: query while a job moves items, when items tie at that value).
    also_returned: tuple[tuple[int, RawKey], ...] = ()


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
    if state.returned:  # only then: every other cursor keeps its layout
        body["returned"] = sorted(state.returned)
    if state.also_returned:
        body["also_returned"] = [{"shard": shard, "start_key": _key_to_json(key)} for shard, key in state.also_returned]
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
        shard_name: str | None = None,
    ) -> None:
        self.scope = scope
        self.key_names = frozenset(key_names)
        self.hash_name = hash_name
        self.hash_value = hash_value
        self.shard_name = shard_name

    def fail(self, problem: str) -> CursorError:
        msg = (
            f"{self.scope.model}.query(last_evaluated_key=...): the cursor {problem}; "
            f"restart the query without last_evaluated_key (a cursor only resumes the query "
            f"that returned it, unedited)."
        )
        return CursorError(msg)

    def read(self, cursor: object) -> CursorState:
        if not isinstance(cursor, dict):
            hint = " (json.loads the stored text first)" if isinstance(cursor, bytes) else ""
            raise self.fail(f"is a {type(cursor).__name__}, not the dict a merged query returns{hint}")
        expected_fields = {
            "version", "model", "table", "key", "index", "forward", "positions", "checksum",
        }
        optional = {"returned", "also_returned"}
        if set(cursor) - optional != expected_fields:
            missing = sorted(expected_fields - set(cursor))
            extra = sorted(set(cursor) - expected_fields - optional)
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
        positions = self._positions(cursor["positions"])
        return CursorState(positions=positions, returned=self.returned_shards(cursor.get("returned", []), positions),
                           also_returned=self._also_returned(cursor.get("also_returned", [])))

    def _also_returned(self, value: object) -> tuple[tuple[int, RawKey], ...]:
        if not isinstance(value, list):
            raise self.fail("has a malformed list of items returned")
        found: list[tuple[int, RawKey]] = []
        for entry in value:
            if not isinstance(entry, dict) or set(entry) != {"shard", "start_key"}:
                raise self.fail(f"has a malformed item returned {entry!r}")
            shard = self._shard(entry["shard"])
            found.append((shard, self.start_key(shard, entry["start_key"])))
        return tuple(found)

    def returned_shards(self, value: object, positions: Mapping[int, RawKey]) -> frozenset[int]:
        if not isinstance(value, list):
            raise self.fail("has a malformed list of returned start keys")
        shards = [self._shard(shard) for shard in value]
        unknown = [shard for shard in shards if shard not in positions]
        if unknown or len(set(shards)) != len(shards):
            raise self.fail(f"marks start keys returned for shards {shards!r} it has no single position of")
        return frozenset(shards)

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
                raise self.fail(f"names {describe_shard(shard)} twice")
            positions[shard] = self.start_key(shard, entry["start_key"])
        return positions

    def start_key(self, shard: int, value: object) -> RawKey:
        if not isinstance(value, dict) or set(value) != self.key_names:
            raise self.fail(
                f"has a start key for {describe_shard(shard)} with attributes "
                f"{sorted(value) if isinstance(value, dict) else value!r}, expected {sorted(self.key_names)}"
            )
        key = {name: self._raw_value(shard, name, raw) for name, raw in value.items()}
        try:
            expected = self.hash_value(shard)
        except ShardKeyError:
            raise self.fail(f"names {describe_shard(shard)}, which this key cannot have") from None
        (actual,) = key[self.hash_name].values()
        if actual != expected:
            whose = "that key" if shard == LEGACY_SHARD else "that shard's key"
            raise self.fail(
                f"has a start key for {describe_shard(shard)} whose {self.hash_name} is {actual!r}, "
                f"not {whose} {expected!r}"
            )
        if self.shard_name is not None and key[self.shard_name] != {"N": str(shard)}:
            raise self.fail(
                f"has a start key for shard {shard} whose {self.shard_name} is "
                f"{key[self.shard_name]!r}, not that shard"
            )
        return key

    def _raw_value(self, shard: int, name: str, value: object) -> RawValue:
        if not isinstance(value, dict) or len(value) != 1:
            raise self.fail(f"has a malformed value {value!r} for {name} in {describe_shard(shard)}")
        ((kind, inner),) = value.items()
        if kind not in _KEY_TYPES or not isinstance(inner, str):
            raise self.fail(f"has a malformed value {value!r} for {name} in {describe_shard(shard)}")
        if kind == "B":
            try:
                return {"B": base64.b64decode(inner, validate=True)}
            except (binascii.Error, ValueError):
                raise self.fail(
                    f"has a binary value for {name} in {describe_shard(shard)} that is not base64"
                ) from None
        if kind == "N":
            try:
                Decimal(inner)
            except InvalidOperation:
                raise self.fail(f"has a number for {name} in {describe_shard(shard)} that is not a number") from None
        return {kind: inner}


def decode_cursor(
    cursor: object,
    scope: CursorScope,
    *,
    key_names: Sequence[str],
    hash_name: str,
    hash_value: Callable[[int], object],
    secrets: tuple[bytes, ...] = (),
    shard_name: str | None = None,
) -> CursorState:
    """Validate a cursor returned by a merged query and decode it for the same query's scope.

    Args:
        cursor: what the caller passed as ``last_evaluated_key``: the cursor dict (after a
            JSON round trip) or the page token (``next_page_token``, a ``str``).
        scope: the model, table, hash key, index and direction of the resuming query.
        key_names: the attribute names every start key must have (table keys, plus the index's).
        hash_name: the attribute queried by hash key (the table's, or the index's).
        hash_value: the value ``hash_name`` must hold in a shard's start key (its physical key);
            may raise :class:`ShardKeyError` for a shard the key cannot have.
        secrets: the HMAC keys a page token may be signed with (the model's
            ``cursor_secret``); empty for unsigned tokens.
        shard_name: the number attribute a ``layout="multi_attribute"`` index stores the shard
            in: a shard's start key must hold that shard's number there.

    Raises:
        CursorError: the cursor is not a dict, is truncated, edited, of another model, table,
            key, index or direction, or names shards or start keys that do not fit.
    """
    if isinstance(cursor, str):
        codec = TokenCodec(scope, tuple(key_names), hash_name, secrets, shard_name=shard_name)
        return codec.decode(cursor, hash_value)
    if secrets:
        msg = (
            f"{scope.model}.query(last_evaluated_key=...): this model signs its page tokens "
            f"(Sharding(cursor_secret=...)), so it resumes from next_page_token only, not from "
            f"an unsigned cursor dict; pass the query's next_page_token."
        )
        raise CursorError(msg)
    return _CursorReader(scope, key_names, hash_name, hash_value, shard_name).read(cursor)


# -- the compact token form ---------------------------------------------------------------------

#: Version byte of the token layout; a token of another version is refused, never misread.
TOKEN_VERSION = 1
#: Bytes of HMAC-SHA256 kept as a token's tag (96 bits).
TOKEN_TAG_BYTES = 12
# Without a secret the tag is keyed with this public constant: it detects edits, truncation and
# use with another query, but anyone can compute it (a checksum, not a signature).
_UNSIGNED_KEY = b"pynamodb-sharding token checksum"
_KIND_CODES = {"S": 1, "N": 2, "B": 3}
_CODE_KINDS = {code: kind for kind, code in _KIND_CODES.items()}

#: What a cursor secret may be given as: text, bytes, several (the first signs, every one is
#: accepted: rotation), or a callable returning one of those (read when a token is made or read).
CursorSecret = str | bytes | Sequence[str | bytes]


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _shared_prefix(first: bytes, second: bytes) -> int:
    shared = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        shared += 1
    return shared


class _TokenTruncatedError(Exception):
    """Raised inside the token parser; turned into a CursorError by the reader."""


class _Bytes:
    """A cursor over the bytes of a token body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def take(self, count: int) -> bytes:
        end = self.offset + count
        if end > len(self.data):
            raise _TokenTruncatedError
        chunk, self.offset = self.data[self.offset:end], end
        return chunk

    def varint(self) -> int:
        number, shift = 0, 0
        while True:
            (byte,) = self.take(1)
            number |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return number
            shift += 7
            if shift > 63:
                raise _TokenTruncatedError

    @property
    def done(self) -> bool:
        return self.offset == len(self.data)


def secret_keys(secret: CursorSecret | Callable[[], CursorSecret] | None) -> tuple[bytes, ...]:
    """The HMAC keys of a cursor secret setting, the signing one first (empty: unsigned)."""
    value = secret() if callable(secret) else secret
    if value is None:
        return ()
    msg = f"cursor_secret: expected a non-empty str or bytes, or a non-empty list of them, got {value!r}."
    given: object = value  # checked at run time: a secret read from settings may be anything
    values = [given] if isinstance(given, str | bytes) else given
    if not isinstance(values, list | tuple) or not values:
        raise CursorError(msg)
    keys: list[bytes] = []
    for item in values:
        if not isinstance(item, str | bytes) or not item:
            raise CursorError(msg)
        keys.append(item.encode("utf-8") if isinstance(item, str) else item)
    return tuple(keys)


@attrs.frozen
class TokenCodec:
    """Turns a merged query's state into its compact ``next_page_token`` and back.

    The token holds, per shard, the shard number and the values of the start key's attributes
    except the queried hash attribute (which the shard number and the query's key rebuild),
    each stored as the part that differs from the previous shard's value after their common
    prefix (the sort keys of one page are close). A 96-bit HMAC-SHA256 tag over the query's
    scope and the packed body follows, all base64url without padding. Neither the table, the
    model, nor the queried key is in it: they are bound through the tag, so a token is
    accepted only by the query it came from. With ``secrets`` the tag is a signature (the
    first secret signs, each one is accepted); without, it is keyed with a public constant and
    only detects edits and foreign use.

    .. versionadded:: 0.1.0
    """

    scope: CursorScope
    key_names: tuple[str, ...]
    hash_name: str
    secrets: tuple[bytes, ...] = ()
    #: A ``layout="multi_attribute"`` index's shard attribute: rebuilt from the shard number,
    #: never stored in the token.
    shard_name: str | None = attrs.field(default=None, kw_only=True)

    @property
    def _stored_names(self) -> tuple[str, ...]:
        rebuilt = (self.hash_name, self.shard_name)
        return tuple(sorted(name for name in self.key_names if name not in rebuilt))

    def _scope_bytes(self) -> bytes:
        scope = self.scope
        described = [
            TOKEN_VERSION, scope.model, scope.table, _value_to_json(scope.key), scope.index,
            scope.forward, sorted(self.key_names), self.hash_name,
        ]
        return json.dumps(described, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def _tag(self, key: bytes, body: bytes) -> bytes:
        mac = hmac.new(key, self._scope_bytes(), hashlib.sha256)
        mac.update(body)
        return mac.digest()[:TOKEN_TAG_BYTES]

    def encode(self, state: CursorState) -> str:
        """The token of ``state``: a URL-safe ``str`` of ``[A-Za-z0-9_-]``."""
        body = bytearray([TOKEN_VERSION])
        body += _varint(len(state.positions))
        names = self._stored_names
        previous = dict.fromkeys(names, b"")
        for shard in sorted(state.positions):
            self._pack(body, shard, state.positions[shard], previous)
        if state.returned or state.also_returned:  # a trailer only then: other tokens keep their layout
            body += _varint(len(state.returned))
            for shard in sorted(state.returned):
                body += _varint(shard + 1)
        if state.also_returned:
            body += _varint(len(state.also_returned))
            for shard, returned_key in state.also_returned:
                self._pack(body, shard, returned_key, previous)
        key = self.secrets[0] if self.secrets else _UNSIGNED_KEY
        packed = bytes(body) + self._tag(key, bytes(body))
        return base64.urlsafe_b64encode(packed).rstrip(b"=").decode("ascii")

    def _pack(self, body: bytearray, shard: int, start: RawKey, previous: dict[str, bytes]) -> None:
        body += _varint(shard + 1)  # the bare legacy key is shard -1
        for name in self._stored_names:
            ((kind, inner),) = start[name].items()
            if kind == "B":
                raw = bytes(inner) if isinstance(inner, bytes | bytearray) else base64.b64decode(inner)
            else:
                raw = str(inner).encode("utf-8")
            # Sort keys of one page are close (timestamps): store only what differs from the
            # previous shard's value, after the prefix they share.
            shared = _shared_prefix(previous[name], raw)
            previous[name] = raw
            body.append(_KIND_CODES[kind])
            body += _varint(shared)
            body += _varint(len(raw) - shared)
            body += raw[shared:]

    def _unpack(self, data: _Bytes, hash_value: Callable[[int], object], reader: _CursorReader,
                previous: dict[str, bytes]) -> tuple[int, RawKey]:
        shard = data.varint() - 1
        start: dict[str, Any] = {}
        for name in self._stored_names:
            (code,) = data.take(1)
            kind = _CODE_KINDS.get(code)
            if kind is None:
                raise reader.fail(f"has an unknown value type for {name} in {describe_shard(shard)}")
            shared = data.varint()
            if shared > len(previous[name]):
                raise reader.fail("is malformed")
            raw = previous[name][:shared] + data.take(data.varint())
            previous[name] = raw
            start[name] = {kind: raw if kind == "B" else raw.decode("utf-8")}
        start[self.hash_name] = self._hash_json(hash_value, shard, reader)
        if self.shard_name is not None:
            start[self.shard_name] = {"N": str(shard)}
        return shard, reader.start_key(shard, _key_to_json(start))

    def decode(self, token: str, hash_value: Callable[[int], object]) -> CursorState:
        """Validate an untrusted token against this query and decode it (no request is sent).

        Raises:
            CursorError: the token is malformed, truncated, edited, signed with another secret
                (or unsigned where a secret is required), or belongs to another query.
        """
        reader = _CursorReader(self.scope, self.key_names, self.hash_name, hash_value, self.shard_name)
        if token.lstrip().startswith("{"):
            raise reader.fail("is JSON text, not a page token (json.loads the stored cursor first)")
        try:
            packed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise reader.fail("is not a page token (not base64url text)") from None
        if len(packed) <= TOKEN_TAG_BYTES:
            raise reader.fail("is truncated (too short to be a page token)")
        body, tag = packed[:-TOKEN_TAG_BYTES], packed[-TOKEN_TAG_BYTES:]
        keys = self.secrets or (_UNSIGNED_KEY,)
        if not any(hmac.compare_digest(self._tag(key, body), tag) for key in keys):
            raise reader.fail(
                "fails its signature: it was edited or truncated, belongs to another query "
                "(key, index or direction), or was made with another cursor secret"
            )
        if body[0] != TOKEN_VERSION:
            raise reader.fail(f"has version {body[0]}, this library reads version {TOKEN_VERSION}")
        data = _Bytes(body[1:])
        positions: dict[int, RawKey] = {}
        previous = dict.fromkeys(self._stored_names, b"")
        also: list[tuple[int, RawKey]] = []
        try:
            for _ in range(data.varint()):
                shard, start = self._unpack(data, hash_value, reader, previous)
                if shard in positions:
                    raise reader.fail(f"names {describe_shard(shard)} twice")
                positions[shard] = start
            returned = [] if data.done else [data.varint() - 1 for _ in range(data.varint())]
            if not data.done:
                also = [self._unpack(data, hash_value, reader, previous) for _ in range(data.varint())]
            if not data.done:
                raise reader.fail("has bytes after its last shard position")
        except (_TokenTruncatedError, UnicodeDecodeError):
            raise reader.fail("is malformed") from None
        return CursorState(positions=positions, returned=reader.returned_shards(returned, positions),
                           also_returned=tuple(also))

    def _hash_json(self, hash_value: Callable[[int], object], shard: int, reader: _CursorReader) -> dict[str, Any]:
        # The queried attribute's value in the shard: rebuilt, never stored in the token.
        try:
            value = hash_value(shard)
        except ShardKeyError:
            raise reader.fail(f"names {describe_shard(shard)}, which this key cannot have") from None
        (kind,) = self.scope.key
        return {kind: value}

