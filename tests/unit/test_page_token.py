"""The compact page token (``TokenCodec``), without a server.

A token decodes to the state it was made from, only for the query that made it and only with
a secret it was signed with; any changed byte is refused. Sizes are known values for the
layouts the docs quote.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._cursor import CursorScope, CursorState, TokenCodec, secret_keys
from pynamodb_sharding._exceptions import CursorError, ShardKeyError
from tests.cursor_query import KEY_NAMES, SCOPE, physical, start_key


def codec(secrets: tuple[bytes, ...] = (), scope: CursorScope = SCOPE) -> TokenCodec:
    return TokenCodec(scope, KEY_NAMES, "file_path", secrets)


numbers = st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str)
states = st.dictionaries(st.integers(1, 64), numbers, max_size=64).flatmap(
    lambda positions: st.builds(
        lambda returned, also: CursorState(positions={shard: start_key(shard, at) for shard, at in positions.items()},
                                           returned=frozenset(returned),
                                           also_returned=tuple((shard, start_key(shard, at)) for shard, at in also)),
        st.sets(st.sampled_from(sorted(positions))) if positions else st.just(set()),
        st.lists(st.tuples(st.integers(1, 64), numbers), max_size=3),
    )
)


@settings(max_examples=100, deadline=None)
@given(state=states, signed=st.booleans())
def test_round_trip(state: CursorState, signed: bool) -> None:
    tokens = codec((b"secret",) if signed else ())
    token = tokens.encode(state)
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert tokens.decode(token, physical) == state


@settings(max_examples=100, deadline=None)
@given(state=states, data=st.data())
def test_any_changed_byte_is_refused(state: CursorState, data: st.DataObject) -> None:
    tokens = codec((b"secret",))
    packed = bytearray(base64.urlsafe_b64decode(tokens.encode(state) + "=="))
    index = data.draw(st.integers(0, len(packed) - 1))
    packed[index] ^= data.draw(st.integers(1, 255))
    spoiled = base64.urlsafe_b64encode(bytes(packed)).rstrip(b"=").decode()
    with pytest.raises(CursorError, match=r"AuditLog\.query"):
        tokens.decode(spoiled, physical)


def test_string_and_binary_sort_keys() -> None:
    names = ("pk", "sk", "lsi")
    tokens = TokenCodec(SCOPE, names, "pk")
    state = CursorState(positions={
        2: {"pk": {"S": physical(2)}, "sk": {"B": b"\x00\xff"}, "lsi": {"S": "ümlaut"}},
    })
    assert tokens.decode(tokens.encode(state), physical) == state


def test_sixteen_shards_with_ten_digit_timestamps() -> None:
    close = CursorState(positions={shard: start_key(shard, str(1_456_369_200 + shard)) for shard in range(1, 17)})
    # version + count + shard 1 (shard, type, prefix 0, length 10, 10 digits = 14 bytes) + 14
    # shards sharing 9 digits (shard, type, prefix, length, 1 digit = 5 bytes) + shard 10
    # sharing 8 (6 bytes) + 12 tag bytes = 104 bytes: 139 base64 characters.
    assert len(codec().encode(close)) == 139
    far = CursorState(positions={shard: start_key(shard, str(shard * 1_000_000_000 + 123_456_789)[-10:].rjust(10, "9"))
                                 for shard in range(1, 17)})
    # Nothing shared: 16 x 14 + 2 + 12 = 238 bytes, 318 characters, still under 400.
    assert len(codec().encode(far)) == 318


class TestRefused:
    """Tokens of another query, secret or shape are refused with the query's fix."""

    state = CursorState(positions={1: start_key(1, "5"), 3: start_key(3, "7")})

    @pytest.mark.parametrize(
        "other",
        [
            CursorScope("AuditLog", "audit_log", {"S": "/other"}, None, True),
            CursorScope("AuditLog", "audit_log", {"S": "/shared/a.txt"}, None, False),
            CursorScope("AuditLog", "audit_log", {"S": "/shared/a.txt"}, "by_user", True),
            CursorScope("AuditLog", "audit_log_v2", {"S": "/shared/a.txt"}, None, True),
            CursorScope("OtherLog", "audit_log", {"S": "/shared/a.txt"}, None, True),
        ],
    )
    def test_another_query(self, other: CursorScope) -> None:
        token = codec().encode(self.state)
        with pytest.raises(CursorError, match="belongs to another query"):
            codec(scope=other).decode(token, physical)

    def test_another_secret_or_unsigned(self) -> None:
        signed = codec((b"one",)).encode(self.state)
        with pytest.raises(CursorError, match="another cursor secret"):
            codec((b"two",)).decode(signed, physical)
        with pytest.raises(CursorError, match="another cursor secret"):
            codec((b"two",)).decode(codec().encode(self.state), physical)
        assert codec((b"two", b"one")).decode(signed, physical) == self.state
        # A model without a secret does not speak of a signature it does not check.
        with pytest.raises(CursorError, match=r"signed with a cursor secret \(this model has none\)") as refused:
            codec().decode(signed, physical)
        assert "fails its signature" not in str(refused.value)

    @pytest.mark.parametrize("token", ["", "A", "@@@@", "{\"version\": 1}"])
    def test_not_a_token(self, token: str) -> None:
        with pytest.raises(CursorError, match="restart the query"):
            codec().decode(token, physical)

    def test_a_shard_the_key_cannot_have(self) -> None:
        state = CursorState(positions={1: start_key(1, "5")})
        token = codec().encode(state)

        def narrow(shard: int) -> str:
            raise ShardKeyError("no shard")

        with pytest.raises(CursorError, match="cannot have"):
            codec().decode(token, narrow)


@pytest.mark.parametrize(
    ("secret", "keys"),
    [
        (None, ()),
        ("s", (b"s",)),
        (b"s", (b"s",)),
        (["new", b"old"], (b"new", b"old")),
        (lambda: "from settings", (b"from settings",)),
    ],
)
def test_secret_keys(secret: object, keys: tuple[bytes, ...]) -> None:
    assert secret_keys(secret) == keys  # type: ignore[arg-type]


@pytest.mark.parametrize("secret", ["", [], [""], 42, [42], lambda: ""])
def test_bad_secrets(secret: object) -> None:
    with pytest.raises(CursorError, match="cursor_secret"):
        secret_keys(secret)  # type: ignore[arg-type]


def test_returned_start_keys_add_a_trailer_only_when_there_are_some() -> None:
    """A token of a query that returned a bare entry at its page break says so in a trailer;
    every other token keeps its layout (tokens already handed out still decode)."""
    tokens = codec()
    positions = {1: start_key(1, "10"), 2: start_key(2, "11")}
    plain = tokens.encode(CursorState(positions=positions))
    marked = tokens.encode(CursorState(positions=positions, returned=frozenset({2})))
    assert len(base64.urlsafe_b64decode(marked + "==")) == len(base64.urlsafe_b64decode(plain + "==")) + 2
    assert tokens.decode(marked, physical).returned == {2}
    assert tokens.decode(plain, physical).returned == frozenset()


def test_a_returned_mark_of_a_shard_without_a_position_is_refused() -> None:
    tokens = codec()
    token = tokens.encode(CursorState(positions={1: start_key(1, "10")}, returned=frozenset({3})))
    with pytest.raises(CursorError, match=r"marks start keys returned for shards \[3\]"):
        tokens.decode(token, physical)


def test_items_returned_at_the_break_are_a_second_trailer() -> None:
    tokens = codec()
    positions = {1: start_key(1, "10")}
    state = CursorState(positions=positions, also_returned=((2, start_key(2, "10")),))
    decoded = tokens.decode(tokens.encode(state), physical)
    assert decoded == state
    assert decoded.returned == frozenset()
