"""The cursor of a merged query: a position in the merged order, as one JSON-serialisable value.

A merged query's ``last_evaluated_key`` is a :class:`MergePosition`: the sort key of the last
item returned and what broke its tie (the table keys of the items returned at that sort key,
where items can share it). A resumed query applies it to every stream it reads, so where items
live by then (moved by a reshard, a compaction, a reindex or an adoption) does not matter.
:func:`encode_cursor` builds the dict (plain JSON types, binary keys in base64, a checksum over
the content), :class:`TokenCodec` the compact page token; :func:`decode_cursor` validates an
untrusted copy against the query that resumes from it and refuses an edited, truncated or
foreign one with a :class:`~pynamodb_sharding.CursorError`. It also reads the cursors of
earlier versions (one position per shard, version 1) and the ``last_evaluated_key`` plain
PynamoDB gives for the same logical key (a position in the merged order too). No PynamoDB
import: values are in botocore's shape.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Context, Decimal, InvalidOperation
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
    "MergePosition",
    "RawItem",
    "RawKey",
    "RawValue",
    "Tie",
    "TokenCodec",
    "cursor_or_none",
    "decode_cursor",
    "encode_cursor",
    "item_digest",
    "secret_keys",
]

#: A DynamoDB attribute value in botocore's shape: ``{"S": "a"}``, ``{"N": "1"}``, ``{"B": b"x"}``.
RawValue = dict[str, Any]
#: An item as DynamoDB returns it.
RawItem = dict[str, RawValue]
#: A primary key (plus index keys for an index query) in ``ExclusiveStartKey`` shape.
RawKey = dict[str, RawValue]

#: Version of the cursor layout written; a cursor of an unknown version is refused, never misread.
#: Version 1 (one position per shard) is still read.
CURSOR_VERSION = 2
#: The most tie keys a cursor carries (:attr:`MergePosition.ties`); beyond, the streams' own
#: positions at that sort key are added (:attr:`CursorState.positions`).
MAX_TIES = 32

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
class Tie:
    """An item returned at a position's sort value: its table key as stored (physical), and
    whether it stands for every other copy of its logical key there (it was in a place a job
    moves items out of, or the layout keeps logical keys unique), so that a copy read there
    after a move is the same item, not a second copy of a duplicated key.

    ``digest``: on a layout that may hold two items of one key, :func:`item_digest` of the
    item, so that a resumed query takes only an identical item for its copy once the item left
    its place (``None`` in cursors made before it was kept)."""

    key: RawKey
    copy: bool = True
    digest: bytes | None = None


@attrs.frozen
class MergePosition:
    """A place in a merged query's order: right after the last item returned.

    The merged order is the sort key's; items of one sort key are ordered by stream. A resumed
    query starts every stream it reads at ``value``, included, and skips the items ``ties``
    names there (and their copies), so items moved from one stream to another between two pages
    are neither repeated nor skipped.
    """

    #: The sort-key value of the last item returned (``{"N": "5"}``); ``None`` for a query
    #: without a sort key.
    value: RawValue | None
    #: The items returned at ``value``, the last one returned last: what breaks the tie.
    ties: tuple[Tie, ...] = ()
    #: Whether ``ties`` names every item returned at ``value`` (else the latest
    #: :data:`MAX_TIES`, and the cursor's positions say where each stream stopped at it).
    complete: bool = True


@attrs.frozen
class CursorState:
    """A decoded cursor: the position in the merged order (``after``), and where some streams
    resume exactly (right after their start key).

    With ``after``, a stream it does not name starts at that position; a version 1 cursor has
    no ``after`` and a stream it does not name is read from its start (one added after the
    cursor was made, or one that had returned nothing).
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
    #: The position in the merged order (version 2); ``None``: a version 1 cursor, or a query's
    #: start.
    after: MergePosition | None = None


def _value_to_json(value: Mapping[str, Any]) -> dict[str, str]:
    (kind, inner), *_ = value.items()
    if kind == "B":
        raw = inner if isinstance(inner, bytes | bytearray) else base64.b64decode(inner)
        return {"B": base64.b64encode(raw).decode("ascii")}
    return {str(kind): str(inner)}


#: The bytes of :func:`item_digest` a cursor keeps.
DIGEST_BYTES = 8


def _canonical(value: Mapping[str, Any]) -> Any:
    """An attribute value in a form equal for two values DynamoDB holds equal: numbers by value,
    sets unordered, binary as base64, maps and lists recursively."""
    ((kind, inner),) = value.items()
    if kind == "N":
        return ["N", _number(inner)]
    if kind == "NS":
        return ["NS", sorted(_number(number) for number in inner)]
    if kind in ("B", "BS"):
        members = [inner] if kind == "B" else list(inner)
        encoded = sorted(_value_to_json({"B": member})["B"] for member in members)
        return [kind, encoded[0] if kind == "B" else encoded]
    if kind == "SS":
        return ["SS", sorted(inner)]
    if kind == "M":
        return ["M", {name: _canonical(member) for name, member in inner.items()}]
    if kind == "L":
        return ["L", [_canonical(member) for member in inner]]
    return [kind, inner]  # S, BOOL, NULL


#: More digits than DynamoDB keeps (38): normalising a number never rounds it.
_NUMBER_CONTEXT = Context(prec=80)


def _number(text: str) -> str:
    try:
        return str(Decimal(text).normalize(_NUMBER_CONTEXT))
    except InvalidOperation:
        return text


def item_digest(item: Mapping[str, Mapping[str, Any]], left_out: str) -> bytes:
    """A digest of an item's attributes but ``left_out`` (the stored hash key, which a move
    rewrites): equal for an item and its copy in another shard, and for nothing else but an
    identical item."""
    canonical = {name: _canonical(value) for name, value in item.items() if name != left_out}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).digest()[:DIGEST_BYTES]


def _key_to_json(key: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    return {name: _value_to_json(value) for name, value in key.items()}


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_CHECKSUM_HEX_DIGITS]


def encode_cursor(scope: CursorScope, state: CursorState) -> dict[str, Any]:
    """Build the JSON-serialisable cursor of ``state`` for queries of ``scope``.

    The cursor holds plain JSON types only (binary key values are base64) and a checksum over
    its content, so that :func:`decode_cursor` refuses an edited or truncated copy. The
    checksum detects accidents and misuse, not forgery: it is not a secret signature. A state
    without a merged position (a version 1 cursor handed back unchanged) keeps version 1's layout.
    """
    after = state.after
    body: dict[str, Any] = {
        "version": CURSOR_VERSION if after is not None else 1,
        "model": scope.model,
        "table": scope.table,
        "key": _value_to_json(scope.key),
        "index": scope.index,
        "forward": scope.forward,
    }
    if after is not None:
        body["after"] = {
            "value": None if after.value is None else _value_to_json(after.value),
            "ties": [_tie_to_json(tie) for tie in after.ties],
            "complete": after.complete,
        }
    body["positions"] = [
        {"shard": shard, "start_key": _key_to_json(state.positions[shard])} for shard in sorted(state.positions)
    ]
    if state.returned:  # version 1 only, and only then: every other cursor keeps its layout
        body["returned"] = sorted(state.returned)
    if state.also_returned:
        body["also_returned"] = [{"shard": shard, "start_key": _key_to_json(key)} for shard, key in state.also_returned]
    body["checksum"] = _checksum(body)
    return body


def _tie_to_json(tie: Tie) -> dict[str, Any]:
    value: dict[str, Any] = {"key": _key_to_json(tie.key), "copy": tie.copy}
    if tie.digest is not None:
        value["digest"] = base64.b64encode(tie.digest).decode("ascii")
    return value


class _CursorReader:
    """Validates an untrusted cursor value against the scope of the query resuming from it."""

    def __init__(
        self,
        scope: CursorScope,
        key_names: Sequence[str],
        hash_name: str,
        hash_value: Callable[[int], object],
        shard_name: str | None = None,
        *,
        sort_name: str | None = None,
        tie_names: Sequence[str] = (),
    ) -> None:
        self.scope = scope
        self.key_names = frozenset(key_names)
        self.hash_name = hash_name
        self.hash_value = hash_value
        self.shard_name = shard_name
        self.sort_name = sort_name
        self.tie_names = frozenset(tie_names)

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
        if "version" not in cursor and "checksum" not in cursor:
            plain = self.plain(cursor)
            if plain is not None:
                return plain
        version = cursor.get("version")
        expected_fields = {"version", "model", "table", "key", "index", "forward", "positions", "checksum"}
        optional = {"returned", "also_returned"} if version == 1 else set()
        if version == CURSOR_VERSION:
            expected_fields.add("after")
        if set(cursor) - optional != expected_fields:
            missing = sorted(expected_fields - set(cursor))
            extra = sorted(set(cursor) - expected_fields - optional)
            raise self.fail(
                f"is truncated or not a merged-query cursor (missing {missing}, unexpected {extra})"
            )
        if version not in (1, CURSOR_VERSION):
            raise self.fail(f"has version {version!r}, this library reads versions 1 and {CURSOR_VERSION}")
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
        if version == CURSOR_VERSION:
            return CursorState(positions=positions, after=self.after(cursor["after"]))
        return CursorState(positions=positions, returned=self.returned_shards(cursor.get("returned", []), positions),
                           also_returned=self._also_returned(cursor.get("also_returned", [])))

    def plain(self, cursor: dict[Any, Any]) -> CursorState | None:
        """The position of a ``last_evaluated_key`` that plain PynamoDB gave for the same logical
        key (before the model was sharded), or ``None`` when ``cursor`` is not one.

        It names one item (its table key, plus the index keys for an index query) under the
        logical key itself: a position in the merged order, like a cursor of this library's.
        """
        names = self.key_names - ({self.shard_name} if self.shard_name is not None else set())
        if set(cursor) != names or not all(isinstance(value, dict) and len(value) == 1 for value in cursor.values()):
            return None
        if cursor[self.hash_name] != _value_to_json(self.scope.key):
            raise self.fail(
                f"is a key of {self.hash_name} {cursor[self.hash_name]!r}, not of the key queried "
                f"{_value_to_json(self.scope.key)!r}"
            )
        key = {name: self._raw_value(None, name, value) for name, value in cursor.items()}
        value = key[self.sort_name] if self.sort_name is not None else None
        ties = (Tie({name: key[name] for name in self.tie_names}),) if self.tie_names else ()
        return CursorState(after=MergePosition(value, ties))

    def after(self, value: object) -> MergePosition:
        if not isinstance(value, dict) or set(value) != {"value", "ties", "complete"}:
            raise self.fail(f"has a malformed position {value!r}")
        raw, ties, complete = value["value"], value["ties"], value["complete"]
        if not isinstance(complete, bool) or not isinstance(ties, list) or len(ties) > MAX_TIES:
            raise self.fail(f"has a malformed position {value!r}")
        if (raw is None) != (self.sort_name is None):
            raise self.fail("has a position that does not fit the query's sort key")
        sort_value = None if raw is None else self._raw_value(None, self.sort_name or "", raw)
        return MergePosition(sort_value, tuple(self.tie(tie) for tie in ties), complete)

    def position_value(self, value: RawValue) -> RawValue:
        """A sort-key value a page token carries, checked as a cursor dict's is."""
        return self._raw_value(None, self.sort_name or "", _value_to_json(value))

    def tie(self, value: object) -> Tie:
        if (not isinstance(value, dict) or set(value) - {"digest"} != {"key", "copy"}
                or not isinstance(value["copy"], bool)):
            raise self.fail(f"has a malformed tie {value!r}")
        digest = None
        if "digest" in value:
            try:
                digest = base64.b64decode(value["digest"], validate=True) if isinstance(value["digest"], str) else b""
            except (binascii.Error, ValueError):
                digest = b""
            if len(digest) != DIGEST_BYTES:
                raise self.fail(f"has a malformed tie {value!r}")
        return Tie(self.tie_key(value["key"]), value["copy"], digest)

    def tie_key(self, value: object) -> RawKey:
        if not isinstance(value, dict) or set(value) != self.tie_names:
            raise self.fail(
                f"has a tie key with attributes {sorted(value) if isinstance(value, dict) else value!r}, "
                f"expected {sorted(self.tie_names)}"
            )
        return {name: self._raw_value(None, name, raw) for name, raw in value.items()}

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

    def _raw_value(self, shard: int | None, name: str, value: object) -> RawValue:
        where = "its position" if shard is None else describe_shard(shard)
        if not isinstance(value, dict) or len(value) != 1:
            raise self.fail(f"has a malformed value {value!r} for {name} in {where}")
        ((kind, inner),) = value.items()
        if kind not in _KEY_TYPES or not isinstance(inner, str):
            raise self.fail(f"has a malformed value {value!r} for {name} in {where}")
        if kind == "B":
            try:
                return {"B": base64.b64decode(inner, validate=True)}
            except (binascii.Error, ValueError):
                raise self.fail(
                    f"has a binary value for {name} in {where} that is not base64"
                ) from None
        if kind == "N":
            try:
                Decimal(inner)
            except InvalidOperation:
                raise self.fail(f"has a number for {name} in {where} that is not a number") from None
        return {kind: inner}


def cursor_or_none(cursor: Any) -> Any:
    """``None`` for an empty cursor (``""``, ``b""``, ``{}``), else ``cursor``: PynamoDB reads from
    the first item when ``last_evaluated_key`` is false (a web handler's ``?page=`` left empty)."""
    if isinstance(cursor, (str, bytes, dict)) and not cursor:
        return None
    return cursor


def decode_cursor(
    cursor: object,
    scope: CursorScope,
    *,
    key_names: Sequence[str],
    hash_name: str,
    hash_value: Callable[[int], object],
    secrets: tuple[bytes, ...] = (),
    shard_name: str | None = None,
    sort_name: str | None = None,
    tie_names: Sequence[str] = (),
) -> CursorState:
    """Validate a cursor returned by a merged query and decode it for the same query's scope.

    Reads this version's cursors and page tokens, version 1's, and the ``last_evaluated_key``
    plain PynamoDB gives for the same logical key (an unsigned dict: refused by a model that
    signs its tokens).

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
        sort_name: the sort-key attribute of the merged order (the index's for an index
            query), ``None`` without one.
        tie_names: the attributes of a tie key: the table's key.

    Raises:
        CursorError: the cursor is not a dict, is truncated, edited, of another model, table,
            key, index or direction, or names shards or start keys that do not fit.
    """
    if isinstance(cursor, str):
        codec = TokenCodec(scope, tuple(key_names), hash_name, secrets, shard_name=shard_name,
                           sort_name=sort_name, tie_names=tuple(tie_names))
        return codec.decode(cursor, hash_value)
    if secrets:
        msg = (
            f"{scope.model}.query(last_evaluated_key=...): this model signs its page tokens "
            f"(Sharding(cursor_secret=...)), so it resumes from next_page_token only, not from "
            f"an unsigned cursor dict; pass the query's next_page_token."
        )
        raise CursorError(msg)
    return _CursorReader(scope, key_names, hash_name, hash_value, shard_name, sort_name=sort_name,
                         tie_names=tie_names).read(cursor)


# -- the compact token form ---------------------------------------------------------------------

#: Version byte of the token layout written; a token of an unknown version is refused, never
#: misread. Version 1 (one position per shard) is still read.
TOKEN_VERSION = 2
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


_HAS_VALUE = 1
_COMPLETE = 2
_TIE_COPY = 1
_TIE_SHARD = 2
_TIE_DIGEST = 4


def _pack_values(body: bytearray, names: Sequence[str], key: Mapping[str, Any], previous: dict[str, bytes]) -> None:
    """Append the values of ``names`` in ``key``, each as the part that differs from the previous
    value of its name after the prefix they share (sort keys of one page are close)."""
    for name in names:
        ((kind, inner),) = key[name].items()
        if kind == "B":
            raw = bytes(inner) if isinstance(inner, bytes | bytearray) else base64.b64decode(inner)
        else:
            raw = str(inner).encode("utf-8")
        shared = _shared_prefix(previous[name], raw)
        previous[name] = raw
        body.append(_KIND_CODES[kind])
        body += _varint(shared)
        body += _varint(len(raw) - shared)
        body += raw[shared:]


def _unpack_values(data: _Bytes, names: Sequence[str], previous: dict[str, bytes], reader: _CursorReader,
                   where: str) -> dict[str, Any]:
    """The values :func:`_pack_values` appended, in botocore's shape (binary values as bytes)."""
    values: dict[str, Any] = {}
    for name in names:
        (code,) = data.take(1)
        kind = _CODE_KINDS.get(code)
        if kind is None:
            raise reader.fail(f"has an unknown value type for {name} in {where}")
        shared = data.varint()
        if shared > len(previous[name]):
            raise reader.fail("is malformed")
        raw = previous[name][:shared] + data.take(data.varint())
        previous[name] = raw
        values[name] = {kind: raw if kind == "B" else raw.decode("utf-8")}
    return values


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

    The token holds the merged position: the sort key of the last item returned and the table
    keys that broke its tie (index queries), then the streams' own positions where the cursor
    needs them (each a shard number and its start key's attributes except the queried hash
    attribute, which the shard number and the query's key rebuild). Each value is stored as the
    part that differs from the previous one of its attribute after their common prefix. A
    96-bit HMAC-SHA256 tag over the query's scope and the packed body follows, all base64url
    without padding. Neither the table, the model, nor the queried key is in it: they are bound
    through the tag, so a token is accepted only by the query it came from. With ``secrets`` the
    tag is a signature (the first secret signs, each one is accepted); without, it is keyed with
    a public constant and only detects edits and foreign use. Tokens of version 1 (one position
    per shard) are read too.

    .. versionadded:: 0.1.0
    """

    scope: CursorScope
    key_names: tuple[str, ...]
    hash_name: str
    secrets: tuple[bytes, ...] = ()
    #: A ``layout="multi_attribute"`` index's shard attribute: rebuilt from the shard number,
    #: never stored in the token.
    shard_name: str | None = attrs.field(default=None, kw_only=True)
    #: The sort-key attribute of the merged order; ``None`` without one.
    sort_name: str | None = attrs.field(default=None, kw_only=True)
    #: The attributes of a tie key (the table's key).
    tie_names: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    #: The shard of a tie's hash value when it is a physical key of the queried key (a table
    #: query), else ``None``: the token stores the shard number and rebuilds the value, so that
    #: it never holds the key.
    tie_shard: Callable[[RawValue], int | None] | None = attrs.field(default=None, kw_only=True)

    def _tie_stored(self, rebuilt_hash: bool) -> tuple[str, ...]:
        """The tie attributes a token stores: not the sort key (the position's value) nor a hash
        value the shard number rebuilds."""
        left_out = {self.sort_name, self.hash_name if rebuilt_hash else None}
        return tuple(sorted(name for name in self.tie_names if name not in left_out))

    @property
    def _stored_names(self) -> tuple[str, ...]:
        rebuilt = (self.hash_name, self.shard_name)
        return tuple(sorted(name for name in self.key_names if name not in rebuilt))

    def _scope_bytes(self, version: int) -> bytes:
        scope = self.scope
        described = [
            version, scope.model, scope.table, _value_to_json(scope.key), scope.index,
            scope.forward, sorted(self.key_names), self.hash_name,
        ]
        return json.dumps(described, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def _tag(self, key: bytes, body: bytes) -> bytes:
        mac = hmac.new(key, self._scope_bytes(body[0]), hashlib.sha256)
        mac.update(body)
        return mac.digest()[:TOKEN_TAG_BYTES]

    def encode(self, state: CursorState) -> str:
        """The token of ``state``: a URL-safe ``str`` of ``[A-Za-z0-9_-]``."""
        after = state.after
        if after is None:
            body = self._version_1(state)
        else:
            body = bytearray([TOKEN_VERSION])
            flags = _HAS_VALUE if after.value is not None else 0
            body.append(flags | (_COMPLETE if after.complete else 0))
            if after.value is not None:
                _pack_values(body, ("value",), {"value": after.value}, {"value": b""})
            body += _varint(len(after.ties))
            previous_tie = dict.fromkeys(self.tie_names, b"")
            for tie in after.ties:
                shard = (self.tie_shard(tie.key[self.hash_name])
                         if self.tie_shard is not None and self.hash_name in tie.key else None)
                body.append((_TIE_COPY if tie.copy else 0) | (_TIE_SHARD if shard is not None else 0)
                            | (_TIE_DIGEST if tie.digest is not None else 0))
                if shard is not None:
                    body += _varint(shard + 1)
                _pack_values(body, self._tie_stored(shard is not None), tie.key, previous_tie)
                if tie.digest is not None:
                    body += tie.digest
            body += _varint(len(state.positions))
            previous = dict.fromkeys(self._stored_names, b"")
            for shard in sorted(state.positions):
                self._pack(body, shard, state.positions[shard], previous)
        key = self.secrets[0] if self.secrets else _UNSIGNED_KEY
        packed = bytes(body) + self._tag(key, bytes(body))
        return base64.urlsafe_b64encode(packed).rstrip(b"=").decode("ascii")

    def _version_1(self, state: CursorState) -> bytearray:
        """A version 1 token: a cursor of an earlier release handed back before any item."""
        body = bytearray([1])
        body += _varint(len(state.positions))
        previous = dict.fromkeys(self._stored_names, b"")
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
        return body

    def _pack(self, body: bytearray, shard: int, start: RawKey, previous: dict[str, bytes]) -> None:
        body += _varint(shard + 1)  # the bare legacy key is shard -1
        _pack_values(body, self._stored_names, start, previous)

    def _unpack(self, data: _Bytes, hash_value: Callable[[int], object], reader: _CursorReader,
                previous: dict[str, bytes]) -> tuple[int, RawKey]:
        shard = data.varint() - 1
        start = _unpack_values(data, self._stored_names, previous, reader, describe_shard(shard))
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
        reader = _CursorReader(self.scope, self.key_names, self.hash_name, hash_value, self.shard_name,
                               sort_name=self.sort_name, tie_names=self.tie_names)
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
            if not self.secrets:  # its check covers its query, not a secret of the application's
                raise reader.fail(
                    "belongs to another query (another key, index or direction), was edited or "
                    "truncated, or was signed with a cursor secret (this model has none)"
                )
            raise reader.fail(
                "fails its signature: it was edited or truncated, belongs to another query "
                "(key, index or direction), or was made with another cursor secret"
            )
        if body[0] not in (1, TOKEN_VERSION):
            raise reader.fail(f"has version {body[0]}, this library reads versions 1 and {TOKEN_VERSION}")
        data = _Bytes(body[1:])
        try:
            state = self._read_version_1(data, hash_value, reader) if body[0] == 1 else self._read(data, hash_value,
                                                                                                 reader)
            if not data.done:
                raise reader.fail("has bytes after its last shard position")
        except (_TokenTruncatedError, UnicodeDecodeError):
            raise reader.fail("is malformed") from None
        return state

    def _positions(self, data: _Bytes, hash_value: Callable[[int], object], reader: _CursorReader,
                   previous: dict[str, bytes]) -> dict[int, RawKey]:
        positions: dict[int, RawKey] = {}
        for _ in range(data.varint()):
            shard, start = self._unpack(data, hash_value, reader, previous)
            if shard in positions:
                raise reader.fail(f"names {describe_shard(shard)} twice")
            positions[shard] = start
        return positions

    def _read(self, data: _Bytes, hash_value: Callable[[int], object], reader: _CursorReader) -> CursorState:
        (flags,) = data.take(1)
        if flags & ~(_HAS_VALUE | _COMPLETE):
            raise reader.fail("is malformed")
        value = None
        if flags & _HAS_VALUE:
            value = _unpack_values(data, ("value",), {"value": b""}, reader, "its position")["value"]
        if (value is None) != (self.sort_name is None):
            raise reader.fail("has a position that does not fit the query's sort key")
        previous_tie = dict.fromkeys(self.tie_names, b"")
        count = data.varint()
        if count > MAX_TIES:
            raise reader.fail("is malformed")
        ties: list[Tie] = []
        for _ in range(count):
            (tie_flags,) = data.take(1)
            if tie_flags & ~(_TIE_COPY | _TIE_SHARD | _TIE_DIGEST):
                raise reader.fail("is malformed")
            rebuilt = bool(tie_flags & _TIE_SHARD)
            values = {}
            if rebuilt:
                values[self.hash_name] = self._hash_json(hash_value, data.varint() - 1, reader)
            values.update(_unpack_values(data, self._tie_stored(rebuilt), previous_tie, reader, "its position"))
            if self.sort_name in self.tie_names and value is not None:
                values[self.sort_name] = value
            digest = bytes(data.take(DIGEST_BYTES)) if tie_flags & _TIE_DIGEST else None
            ties.append(Tie(reader.tie_key(_key_to_json(values)), bool(tie_flags & _TIE_COPY), digest))
        positions = self._positions(data, hash_value, reader, dict.fromkeys(self._stored_names, b""))
        after = MergePosition(None if value is None else reader.position_value(value), tuple(ties),
                              bool(flags & _COMPLETE))
        return CursorState(positions=positions, after=after)

    def _read_version_1(self, data: _Bytes, hash_value: Callable[[int], object],
                        reader: _CursorReader) -> CursorState:
        previous = dict.fromkeys(self._stored_names, b"")
        positions = self._positions(data, hash_value, reader, previous)
        returned = [] if data.done else [data.varint() - 1 for _ in range(data.varint())]
        also: list[tuple[int, RawKey]] = []
        if not data.done:
            also = [self._unpack(data, hash_value, reader, previous) for _ in range(data.varint())]
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

