"""HashedShards hashes what DynamoDB stores, not ``str()`` of the Python value.

Proves: values PynamoDB stores identically (``5``/``5.0``, ``10**30``/``1e30``, ``bytes``/
``bytearray``, a naive and an aware UTC ``datetime``) get the same shard; strings and
integers keep the AWS example's layout ``md5(pk + str(sk)) % n + 1`` (known values below,
computed once with ``hashlib``); attributes that are not one scalar are refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import BinaryAttribute, ListAttribute, NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute

from pynamodb_sharding import HashedShards, ShardedModel, Sharding, ShardingDefinitionError
from pynamodb_sharding._strategies import canonical_number


class ByNumber(ShardedModel):
    class Meta:
        table_name = "by_number"

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(10))


class ByBytes(ShardedModel):
    class Meta:
        table_name = "by_bytes"

    pk = UnicodeAttribute(hash_key=True)
    sk = BinaryAttribute(range_key=True, legacy_encoding=False)
    shards = Sharding(HashedShards(10))


class ByTime(ShardedModel):
    class Meta:
        table_name = "by_time"

    pk = UnicodeAttribute(hash_key=True)
    sk = UTCDateTimeAttribute(range_key=True)
    shards = Sharding(HashedShards(10))


def _shard(model: type[ShardedModel], sk: object) -> int:
    return model.shards.write_shard(model("/f", sk))


class TestKnownShards:
    """Fixed md5 results (hashlib.md5 of the bytes named in each case, % 10 + 1)."""

    def test_integer_keeps_the_string_formula(self) -> None:
        assert 1 == _shard(ByNumber, 5)  # md5(b"/f5")

    def test_integral_float_is_the_integer(self) -> None:
        assert 1 == _shard(ByNumber, 5.0)

    def test_big_number_as_stored(self) -> None:
        assert 10 == _shard(ByNumber, 10**30)  # md5(b"/f1000000000000000000000000000000")
        assert 10 == _shard(ByNumber, 1e30)

    def test_small_float_in_plain_notation(self) -> None:
        assert 9 == _shard(ByNumber, 1e-7)  # md5(b"/f0.0000001"), not str(1e-07)
        assert 8 == _shard(ByNumber, 1.5)  # md5(b"/f1.5")

    def test_bytes_and_bytearray_hash_their_bytes(self) -> None:
        assert 8 == _shard(ByBytes, b"\x00\xff")  # md5(b"/f\x00\xff")
        assert 8 == _shard(ByBytes, bytearray(b"\x00\xff"))

    def test_naive_and_aware_datetime_agree(self) -> None:
        aware = datetime(2016, 2, 26, 12, tzinfo=UTC)
        assert 4 == _shard(ByTime, aware)  # md5(b"/f2016-02-26T12:00:00.000000+0000")
        assert 4 == _shard(ByTime, aware.replace(tzinfo=None))


class TestCanonicalNumber:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [("5", "5"), ("5.0", "5"), ("-0", "0"), ("1e+30", "1" + "0" * 30), ("1.50", "1.5"),
         ("1e-07", "0.0000001"), ("-2.5E+1", "-25")],
    )
    def test_known_values(self, text: str, expected: str) -> None:
        assert expected == canonical_number(text)

    @given(st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(lambda d: abs(d) < Decimal("1e40")))
    def test_equal_numbers_have_one_text(self, number: Decimal) -> None:
        """Any two spellings of one number (as DynamoDB normalises them) give the same text."""
        assert canonical_number(str(number)) == canonical_number(format(number, "E"))
        assert Decimal(canonical_number(str(number))) == number


def test_attribute_that_is_not_a_scalar_is_refused() -> None:
    with pytest.raises(ShardingDefinitionError, match=r"Tagged\.pk: .*'tags'.*string, number or binary"):
        class Tagged(ShardedModel):
            class Meta:
                table_name = "tagged"

            pk = UnicodeAttribute(hash_key=True)
            tags = ListAttribute[str](null=True)
            shards = Sharding(HashedShards(4, attributes=("tags",)))
