"""The merged-query cursor, without a server: JSON round trip, and every tampering refused.

A cursor is only accepted by the query that made it (model, table, key, index, direction), with
its content unedited; anything else raises ``CursorError`` naming the model and the fix.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._cursor import CursorScope, CursorState, cursor_or_none, decode_cursor, encode_cursor
from pynamodb_sharding._exceptions import CursorError, ShardingError
from tests.cursor_query import KEY_NAMES, SCOPE, physical, start_key


def decode(cursor: object, scope: CursorScope = SCOPE, key_names: tuple[str, ...] = KEY_NAMES) -> CursorState:
    return decode_cursor(cursor, scope, key_names=key_names, hash_name="file_path", hash_value=physical)


def a_cursor() -> dict[str, Any]:
    state = CursorState(positions={1: start_key(1), 3: start_key(3, "-2.5")})
    return encode_cursor(SCOPE, state)


class TestRoundTrip:
    """What ``encode_cursor`` makes, ``decode_cursor`` reads back after ``json`` round trips."""

    def test_round_trip(self) -> None:
        state = CursorState(positions={1: start_key(1), 3: start_key(3, "-2.5")})
        cursor = json.loads(json.dumps(encode_cursor(SCOPE, state)))
        assert state == decode(cursor)

    def test_returned_start_keys_round_trip(self) -> None:
        state = CursorState(positions={1: start_key(1), 3: start_key(3, "-2.5")}, returned=frozenset({3}))
        cursor = json.loads(json.dumps(encode_cursor(SCOPE, state)))
        assert cursor["returned"] == [3]
        assert state == decode(cursor)

    def test_items_returned_at_the_break_round_trip(self) -> None:
        state = CursorState(positions={1: start_key(1)}, also_returned=((3, start_key(3, "-2.5")),))
        cursor = json.loads(json.dumps(encode_cursor(SCOPE, state)))
        assert cursor["also_returned"] == [{"shard": 3, "start_key": {"file_path": {"S": physical(3)},
                                                                      "accessed_at": {"N": "-2.5"}}}]
        assert state == decode(cursor)

    @pytest.mark.parametrize("also", [{}, [{"shard": 3}], [{"shard": 3, "start_key": {"file_path": {"S": "x"}}}]])
    def test_a_malformed_list_of_items_returned_is_refused(self, also: object) -> None:
        cursor = a_cursor()
        cursor["also_returned"] = also
        with pytest.raises(CursorError, match=r"AuditLog\.query\(last_evaluated_key=\.\.\.\)"):
            decode(resigned(cursor))

    def test_a_cursor_without_returned_start_keys_has_no_such_field(self) -> None:
        """Cursors of every query but an adopted index's mid-move keep their layout."""
        assert "returned" not in a_cursor()
        assert decode(a_cursor()).returned == frozenset()

    @pytest.mark.parametrize("returned", [[2], [3, 3], "3", [True]])
    def test_a_malformed_returned_list_is_refused(self, returned: object) -> None:
        cursor = a_cursor()
        cursor["returned"] = returned
        cursor = resigned(cursor)
        with pytest.raises(CursorError, match=r"AuditLog\.query\(last_evaluated_key=\.\.\.\)"):
            decode(cursor)

    def test_names_the_query(self) -> None:
        cursor = a_cursor()
        assert (
            cursor["model"], cursor["table"], cursor["key"], cursor["index"], cursor["forward"],
        ) == ("AuditLog", "audit_log", {"S": "/shared/a.txt"}, None, True)

    @settings(max_examples=60, deadline=None)
    @given(
        st.dictionaries(
            st.integers(1, 64),
            st.one_of(
                st.builds(lambda n: {"N": str(n)}, st.integers(-(10**12), 10**12)),
                st.builds(lambda s: {"S": s}, st.text(max_size=20)),
                st.builds(lambda b: {"B": b}, st.binary(max_size=20)),
            ),
            max_size=8,
        ),
        st.booleans(),
        st.one_of(st.none(), st.just("by_user")),
    )
    def test_any_state_survives_json(
        self, sort_keys: dict[int, dict[str, Any]], forward: bool, index: str | None
    ) -> None:
        scope = CursorScope("AuditLog", "audit_log", {"S": "/shared/a.txt"}, index, forward)
        positions = {shard: {"file_path": {"S": physical(shard)}, "sk": value} for shard, value in sort_keys.items()}
        state = CursorState(positions=positions)
        text = json.dumps(encode_cursor(scope, state))
        decoded = decode_cursor(json.loads(text), scope, key_names=("file_path", "sk"), hash_name="file_path",
                                hash_value=physical)
        assert state == decoded

    def test_binary_keys_are_base64_text(self) -> None:
        state = CursorState(positions={1: {"file_path": {"S": physical(1)}, "sk": {"B": b"\x00\xff"}}})
        cursor = encode_cursor(SCOPE, state)
        assert cursor["positions"][0]["start_key"]["sk"] == {"B": "AP8="}
        assert state == decode_cursor(cursor, SCOPE, key_names=("file_path", "sk"), hash_name="file_path",
                                      hash_value=physical)


def edited(path: tuple[Any, ...], value: Any, *, rechecksum: bool = False) -> dict[str, Any]:
    cursor = a_cursor()
    target: Any = cursor
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    if rechecksum:
        cursor = resigned(cursor)
    return cursor


def resigned(cursor: dict[str, Any]) -> dict[str, Any]:
    """Recompute the checksum, as someone forging a cursor on purpose would."""
    from pynamodb_sharding._cursor import _checksum

    body = {k: v for k, v in cursor.items() if k != "checksum"}
    return {**body, "checksum": _checksum(body)}


class TestTampering:
    """Edited, truncated or foreign cursors raise ``CursorError``, never a wrong page."""

    @pytest.mark.parametrize(
        ("cursor", "fragment"),
        [
            pytest.param(edited(("positions", 0, "start_key", "accessed_at", "N"), "18"), "checksum",
                         id="edited-sort-key"),
            pytest.param(edited(("positions", 0, "shard"), 2), "checksum", id="edited-shard"),
            pytest.param(edited(("checksum",), "0" * 16), "checksum", id="bad-checksum"),
            pytest.param({k: v for k, v in a_cursor().items() if k != "positions"}, "truncated", id="missing-field"),
            pytest.param(edited(("positions",), a_cursor()["positions"][:1]), "checksum", id="truncated-positions"),
            pytest.param(edited(("model",), "OtherModel"), "checksum", id="other-model-edited"),
            pytest.param(edited(("model",), "OtherModel", rechecksum=True), "belongs to OtherModel",
                         id="other-model"),
            pytest.param(edited(("table",), "other_table", rechecksum=True), "belongs to", id="other-table"),
            pytest.param(edited(("key",), {"S": "/other"}, rechecksum=True), "hash key", id="other-key"),
            pytest.param(edited(("forward",), False, rechecksum=True), "other direction", id="other-direction"),
            pytest.param(edited(("index",), "by_user", rechecksum=True), "index", id="other-index"),
            pytest.param(edited(("version",), 99, rechecksum=True), "version", id="other-version"),
            pytest.param("not a cursor", "not a page token", id="a-string"),
            pytest.param(["positions"], "list", id="a-list"),
            pytest.param(42, "int", id="a-number"),
            pytest.param({}, "truncated", id="empty-dict"),
        ],
    )
    def test_refused(self, cursor: object, fragment: str) -> None:
        with pytest.raises(CursorError, match=fragment) as caught:
            decode(cursor)
        assert "AuditLog.query(last_evaluated_key=...)" in str(caught.value)
        assert "restart the query without last_evaluated_key" in str(caught.value)
        assert isinstance(caught.value, ShardingError)

    @pytest.mark.parametrize(
        ("path", "value", "fragment"),
        [
            pytest.param(("positions", 0, "shard"), 0, "cannot have", id="shard-zero"),
            pytest.param(("positions", 0, "shard"), -1, "cannot have", id="shard-legacy-without-legacy"),
            pytest.param(("positions", 0, "shard"), -2, "shards are ints >= 0", id="shard-negative"),
            pytest.param(("positions", 0, "shard"), True, "shards are ints >= 0", id="shard-bool"),
            pytest.param(("positions", 0, "shard"), "1", "shards are ints >= 0", id="shard-str"),
            pytest.param(("positions",), [a_cursor()["positions"][0]] * 2, "twice", id="duplicate-shard"),
            pytest.param(("positions", 0, "start_key", "file_path", "S"), physical(2), "not that shard's key",
                         id="other-shards-physical-key"),
            pytest.param(("positions", 0, "start_key", "file_path", "S"), "/shared/b.txt_1",
                         "not that shard's key", id="other-logical-key"),
            pytest.param(("positions", 0, "start_key", "accessed_at"), {"N": "x"}, "not a number",
                         id="not-a-number"),
            pytest.param(("positions", 0, "start_key", "accessed_at"), {"B": "!!"}, "base64", id="bad-base64"),
            pytest.param(("positions", 0, "start_key", "accessed_at"), {"SS": ["a"]}, "malformed",
                         id="non-key-type"),
            pytest.param(("positions", 0, "start_key"), {"file_path": {"S": physical(1)}}, "expected",
                         id="missing-key-attribute"),
            pytest.param(("positions", 0, "start_key"), None, "expected", id="null-start-key"),
            pytest.param(("positions", 0), {"shard": 1}, "malformed", id="malformed-position"),
            pytest.param(("positions",), {"1": {}}, "list", id="positions-not-a-list"),
            pytest.param(("positions", 0, "shard"), 20_000, "cannot have", id="impossible-shard"),
        ],
    )
    def test_structure_checked_even_with_a_valid_checksum(self, path: tuple[Any, ...], value: Any,
                                                          fragment: str) -> None:
        with pytest.raises(CursorError, match=fragment):
            decode(edited(path, value, rechecksum=True))

    def test_index_cursor_needs_the_index_keys(self) -> None:
        with pytest.raises(CursorError, match="expected"):
            decode(a_cursor(), key_names=(*KEY_NAMES, "user_id"))

    def test_decoding_does_not_modify_the_cursor(self) -> None:
        cursor = a_cursor()
        kept = copy.deepcopy(cursor)
        decode(cursor)
        assert kept == cursor


def test_an_empty_cursor_is_no_cursor_and_anything_else_is_kept_for_decoding() -> None:
    """PynamoDB reads from the first item when ``last_evaluated_key`` is false; the rest is
    decoded, and refused there if it is not a cursor."""
    assert [cursor_or_none(empty) for empty in ("", b"", {}, None)] == [None, None, None, None]
    kept: list[object] = ["x", {"key": 1}, 0, [], b"a"]
    assert all(cursor_or_none(value) is value for value in kept)
    with pytest.raises(CursorError):
        decode("x")
