"""The cursor as a position in the merged order, without a server.

Proves: a position (the last sort key returned and the items that broke its tie) survives the
cursor dict and the page token, the token never holding the queried key; cursors and tokens of
the release before (one position per shard, version 1, literal values made by that release)
still decode to what they said; a ``last_evaluated_key`` plain PynamoDB gave for the same
logical key is read as a position; and the key condition a resumed stream reads with starts at
the position's sort key, within the query's own condition (known conditions, and a property
over random conditions and values against a direct check).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pynamodb.expressions.operand import Path

from pynamodb_sharding._cursor import (
    DIGEST_BYTES,
    MAX_TIES,
    CursorScope,
    CursorState,
    MergePosition,
    Tie,
    TokenCodec,
    decode_cursor,
    encode_cursor,
)
from pynamodb_sharding._exceptions import CursorError
from pynamodb_sharding._query_plan import admits, condition_from
from tests.cursor_query import KEY_NAMES, SCOPE, physical, start_key

INDEX_SCOPE = CursorScope("AuditLog", "audit_log", {"S": "20160226"}, "by_day", False)
INDEX_NAMES = ("day", "accessed_at", "file_path")


def index_shard(shard: int) -> str:
    return f"20160226_{shard}"


def table_tie_shard(value: dict[str, Any]) -> int | None:
    prefix = "/shared/a.txt_"
    text = value.get("S", "")
    return int(text[len(prefix):]) if text.startswith(prefix) else None


def table_codec(secrets: tuple[bytes, ...] = ()) -> TokenCodec:
    return TokenCodec(SCOPE, KEY_NAMES, "file_path", secrets, sort_name="accessed_at", tie_names=KEY_NAMES,
                      tie_shard=table_tie_shard)


def decode_table(cursor: object) -> CursorState:
    return decode_cursor(cursor, SCOPE, key_names=KEY_NAMES, hash_name="file_path", hash_value=physical,
                         sort_name="accessed_at", tie_names=KEY_NAMES)


numbers = st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
digests = st.one_of(st.none(), st.binary(min_size=DIGEST_BYTES, max_size=DIGEST_BYTES))
table_positions = st.builds(
    lambda at, shards, copy, complete: MergePosition(
        {"N": at}, tuple(Tie(start_key(shard, at), copy, digest) for shard, digest in shards), complete),
    numbers, st.lists(st.tuples(st.integers(1, 64), digests), min_size=1, max_size=MAX_TIES,
                      unique_by=lambda tie: tie[0]),
    st.booleans(), st.booleans(),
)


class TestTablePositions:
    @settings(max_examples=100, deadline=None)
    @given(after=table_positions, signed=st.booleans())
    def test_the_token_round_trips_and_never_holds_the_key(self, after: MergePosition, signed: bool) -> None:
        tokens = table_codec((b"secret",) if signed else ())
        state = CursorState(after=after)
        token = tokens.encode(state)
        assert tokens.decode(token, physical) == state
        import base64

        assert b"/shared/a.txt" not in base64.urlsafe_b64decode(token + "==")

    @settings(max_examples=50, deadline=None)
    @given(after=table_positions)
    def test_the_dict_round_trips_through_json(self, after: MergePosition) -> None:
        state = CursorState(after=after)
        assert decode_table(json.loads(json.dumps(encode_cursor(SCOPE, state)))) == state

    def test_a_tie_s_digest_is_in_the_dict_only_when_it_has_one(self) -> None:
        plain = encode_cursor(SCOPE, CursorState(after=MergePosition({"N": "1"}, (Tie(start_key(1, "1")),))))
        assert set(plain["after"]["ties"][0]) == {"key", "copy"}  # the layout of cursors without one
        kept = encode_cursor(SCOPE, CursorState(after=MergePosition({"N": "1"}, (Tie(start_key(1, "1"), False,
                                                                                      b"\x01" * 8),))))
        assert kept["after"]["ties"][0]["digest"] == "AQEBAQEBAQE="
        assert decode_table(kept).after == MergePosition({"N": "1"}, (Tie(start_key(1, "1"), False, b"\x01" * 8),))

    @pytest.mark.parametrize("digest", ["AQEB", "not base64!", 17, None])
    def test_a_malformed_digest_is_refused(self, digest: object) -> None:
        cursor = encode_cursor(SCOPE, CursorState(after=MergePosition({"N": "1"}, (Tie(start_key(1, "1"), False,
                                                                                       b"\x01" * 8),))))
        cursor["after"]["ties"][0]["digest"] = digest
        from pynamodb_sharding._cursor import _checksum

        cursor["checksum"] = _checksum({name: value for name, value in cursor.items() if name != "checksum"})
        with pytest.raises(CursorError, match="malformed tie"):
            decode_table(cursor)

    def test_a_digest_adds_its_eight_bytes_to_the_token(self) -> None:
        tokens = table_codec()
        tie = Tie(start_key(3, "1456369249"), False)
        without = tokens.encode(CursorState(after=MergePosition({"N": "1456369249"}, (tie,))))
        with_digest = tokens.encode(CursorState(after=MergePosition(
            {"N": "1456369249"}, (Tie(tie.key, False, b"\x07" * 8),))))
        import base64

        assert len(base64.urlsafe_b64decode(with_digest + "==")) == len(base64.urlsafe_b64decode(without + "==")) + 8

    def test_a_position_of_one_item_is_a_short_token(self) -> None:
        """A 16-shard page's token: the sort key once and the shard of the item returned."""
        state = CursorState(after=MergePosition({"N": "1456369249"}, (Tie(start_key(2, "1456369249"), False),)))
        assert len(table_codec().encode(state)) < 50

    def test_more_ties_than_a_cursor_holds_are_refused(self) -> None:
        after = MergePosition({"N": "1"}, tuple(Tie(start_key(shard, "1")) for shard in range(1, MAX_TIES + 2)))
        cursor = json.loads(json.dumps(encode_cursor(SCOPE, CursorState(after=after))))
        with pytest.raises(CursorError, match="malformed position"):
            decode_table(cursor)

    def test_a_tie_with_other_attributes_is_refused(self) -> None:
        cursor = encode_cursor(SCOPE, CursorState(after=MergePosition({"N": "1"}, (Tie(start_key(1, "1")),))))
        cursor["after"]["ties"][0]["key"]["note"] = {"S": "x"}
        from pynamodb_sharding._cursor import _checksum

        cursor["checksum"] = _checksum({name: value for name, value in cursor.items() if name != "checksum"})
        with pytest.raises(CursorError, match="tie key with attributes"):
            decode_table(cursor)


class TestEarlierReleases:
    """Literal cursors and tokens made by the release before this one (commit babab71)."""

    TABLE_CURSOR: ClassVar[dict[str, Any]] = {
        "checksum": "ebda2b771b5bf39f", "forward": True, "index": None, "key": {"S": "/shared/a.txt"},
        "model": "AuditLog",
        "positions": [
            {"shard": 1, "start_key": {"accessed_at": {"N": "1456369207"}, "file_path": {"S": "/shared/a.txt_1"}}},
            {"shard": 3, "start_key": {"accessed_at": {"N": "1456369209"}, "file_path": {"S": "/shared/a.txt_3"}}},
        ],
        "table": "audit_log", "version": 1,
    }
    TABLE_TOKEN = "AQICAgAKMTQ1NjM2OTIwNwQCCQE559S83Nrl0-RUgO01"
    INDEX_CURSOR: ClassVar[dict[str, Any]] = {
        "also_returned": [{"shard": 1, "start_key": {"accessed_at": {"N": "7"}, "day": {"S": "20160226_1"},
                                                     "file_path": {"S": "/b_4"}}}],
        "checksum": "2b06c47b112bd68c", "forward": False, "index": "by_day", "key": {"S": "20160226"},
        "model": "AuditLog",
        "positions": [{"shard": 2, "start_key": {"accessed_at": {"N": "7"}, "day": {"S": "20160226_2"},
                                                 "file_path": {"S": "/a_1"}}}],
        "returned": [2], "table": "audit_log", "version": 1,
    }
    INDEX_TOKEN = "AQEDAgABNwEABC9hXzEBAwECAgEAAQEDYl80Q3H9Xdv-orZDPuK5"

    TABLE_STATE = CursorState(positions={1: start_key(1, "1456369207"), 3: start_key(3, "1456369209")})
    INDEX_STATE = CursorState(
        positions={2: {"day": {"S": "20160226_2"}, "accessed_at": {"N": "7"}, "file_path": {"S": "/a_1"}}},
        returned=frozenset({2}),
        also_returned=((1, {"day": {"S": "20160226_1"}, "accessed_at": {"N": "7"}, "file_path": {"S": "/b_4"}}),))

    def test_a_table_cursor_and_token(self) -> None:
        assert decode_table(self.TABLE_CURSOR) == self.TABLE_STATE
        assert decode_table(self.TABLE_TOKEN) == self.TABLE_STATE

    @pytest.mark.parametrize("cursor", [INDEX_CURSOR, INDEX_TOKEN], ids=["dict", "token"])
    def test_an_index_cursor_and_token(self, cursor: object) -> None:
        state = decode_cursor(cursor, INDEX_SCOPE, key_names=INDEX_NAMES, hash_name="day", hash_value=index_shard,
                              sort_name="accessed_at", tie_names=("file_path",))
        assert state == self.INDEX_STATE

    def test_a_state_without_a_position_is_written_as_that_release_wrote_it(self) -> None:
        """A cursor handed back before any item keeps the layout it came in."""
        assert encode_cursor(SCOPE, self.TABLE_STATE) == self.TABLE_CURSOR
        assert TokenCodec(SCOPE, KEY_NAMES, "file_path").encode(self.TABLE_STATE) == self.TABLE_TOKEN


class TestPlainPynamoDBCursors:
    """``last_evaluated_key`` of a plain PynamoDB query of the same logical key."""

    def test_a_table_key_is_a_position(self) -> None:
        key = {"file_path": {"S": "/shared/a.txt"}, "accessed_at": {"N": "42"}}
        assert decode_table(json.loads(json.dumps(key))) == CursorState(after=MergePosition({"N": "42"}, (Tie(key),)))

    def test_an_index_key_is_a_position_whose_tie_is_the_table_key(self) -> None:
        key = {"day": {"S": "20160226"}, "accessed_at": {"N": "7"}, "file_path": {"S": "/a"}}
        state = decode_cursor(key, INDEX_SCOPE, key_names=INDEX_NAMES, hash_name="day", hash_value=index_shard,
                              sort_name="accessed_at", tie_names=("file_path",))
        assert state == CursorState(after=MergePosition({"N": "7"}, (Tie({"file_path": {"S": "/a"}}),)))

    def test_a_key_of_another_logical_key_is_refused(self) -> None:
        with pytest.raises(CursorError, match="not of the key queried"):
            decode_table({"file_path": {"S": "/shared/b.txt"}, "accessed_at": {"N": "42"}})

    def test_a_physical_key_is_refused(self) -> None:
        with pytest.raises(CursorError, match="not of the key queried"):
            decode_table({"file_path": {"S": physical(3)}, "accessed_at": {"N": "42"}})

    def test_a_model_that_signs_its_tokens_refuses_it(self) -> None:
        with pytest.raises(CursorError, match="next_page_token only"):
            decode_cursor({"file_path": {"S": "/shared/a.txt"}, "accessed_at": {"N": "42"}}, SCOPE,
                          key_names=KEY_NAMES, hash_name="file_path", hash_value=physical, secrets=(b"s",),
                          sort_name="accessed_at", tie_names=KEY_NAMES)


def rendered(condition: Any) -> str:
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    text = condition.serialize(names, values)
    for name, placeholder in names.items():
        text = text.replace(placeholder, name)
    for placeholder, value in values.items():
        text = text.replace(placeholder, next(iter(value.values())))
    return str(text)


class TestConditionFromAPosition:
    """A stream resumed at a position's sort key ``v`` reads from ``v`` on, within the query's
    own key condition; a strict bound read as an inclusive one leaves the bound to a check."""

    AT = Path(["at"])
    V: ClassVar[dict[str, str]] = {"N": "5"}

    @pytest.mark.parametrize(("condition", "forward", "expected", "dropped"), [
        (None, True, "at >= 5", None),
        (None, False, "at <= 5", None),
        (AT > 1, True, "at >= 5", None),
        (AT <= 9, True, "at BETWEEN 5 AND 9", None),
        (AT < 9, True, "at BETWEEN 5 AND 9", "9"),
        (AT.between(1, 9), True, "at BETWEEN 5 AND 9", None),
        (AT.between(1, 9), False, "at BETWEEN 1 AND 5", None),
        (AT >= 1, False, "at BETWEEN 1 AND 5", None),
        (AT > 1, False, "at BETWEEN 1 AND 5", "1"),
        (AT == 5, True, "at = 5", None),
    ])
    def test_known_conditions(self, condition: Any, forward: bool, expected: str, dropped: str | None) -> None:
        resumed, keep = condition_from(condition, "at", self.V, forward)
        assert expected == rendered(resumed)
        if dropped is None:
            assert keep is None
        else:
            assert keep is not None
            assert not keep({"at": {"N": dropped}})
            assert keep({"at": {"N": "5"}})

    def test_a_prefix_read_forward_ends_at_the_highest_key_with_that_prefix(self) -> None:
        resumed, keep = condition_from(Path(["sk"]).startswith("ab"), "sk", {"S": "abc"}, True)
        assert keep is None
        upper = resumed.values[2].value["S"]
        assert upper.startswith("ab")
        assert len(upper.encode("utf-8")) == 1024
        for longest in ("ab" + "\U0010ffff" * 255, "ab\U0010ffff", "ab" + "z" * 1022):
            assert longest.encode("utf-8") <= upper.encode("utf-8")

    def test_a_prefix_read_backward_starts_at_the_prefix(self) -> None:
        resumed, _ = condition_from(Path(["sk"]).startswith("ab"), "sk", {"S": "abc"}, False)
        assert "sk BETWEEN ab AND abc" == rendered(resumed)

    @settings(max_examples=300, deadline=None)
    @given(lower=st.integers(-5, 5), upper=st.integers(-5, 5), value=st.integers(-8, 8),
           operator=st.sampled_from(["<", "<=", ">", ">=", "=", "between"]), forward=st.booleans(),
           item=st.integers(-8, 8))
    def test_the_resumed_condition_admits_what_the_query_admits_from_the_position_on(
        self, lower: int, upper: int, value: int, operator: str, forward: bool, item: int,
    ) -> None:
        at = self.AT
        conditions = {"<": at < lower, "<=": at <= lower, ">": at > lower, ">=": at >= lower, "=": at == lower,
                      "between": at.between(min(lower, upper), max(lower, upper))}
        condition = conditions[operator]
        position = {"N": str(value)}
        if not admits(condition, position):
            return  # a position the query never returned: refused by DynamoDB instead
        resumed, keep = condition_from(condition, "at", position, forward)
        raw = {"at": {"N": str(item)}}
        reads = admits(resumed, raw["at"]) and (keep is None or keep(raw))
        ahead = item >= value if forward else item <= value
        assert reads == (admits(condition, raw["at"]) and ahead)

    @pytest.mark.parametrize(("condition", "value", "expected"), [
        (None, {"N": "3"}, True), (AT > 3, {"N": "3"}, False), (AT >= 3, {"N": "3"}, True),
        (AT.between(1, 3), {"N": "3"}, True), (AT == 2, {"N": "3"}, False), (AT < 3, {"S": "a"}, False),
        (Path(["sk"]).startswith("ab"), {"S": "abc"}, True), (Path(["sk"]).startswith("ab"), {"S": "b"}, False),
    ])
    def test_admits(self, condition: Any, value: dict[str, str], expected: bool) -> None:
        assert expected == admits(condition, value)


