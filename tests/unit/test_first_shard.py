"""Shard numbering from 0 (``Sharding(first_shard=0)``) and ``HashedShards(hash=...)``.

Proves: the codec encodes and decodes shard 0 and refuses what no layout writes (``x.00``,
shards past the last); the manager shifts every strategy's answer by the first shard number;
``HashedShards(hash=int)`` puts ``item_id`` where ``int(item_id) % N`` (+ the first shard) says.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding, ShardingDefinitionError, shard_manager
from pynamodb_sharding._exceptions import ShardKeyError, ShardLocationError
from pynamodb_sharding._keys import LEGACY_SHARD, KeyCodec


class ZeroBased(ShardedModel):
    class Meta:
        table_name = "zero_based"

    date = UnicodeAttribute(hash_key=True)
    item_id = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4, attributes=("item_id",), hash=int), separator=".", first_shard=0)


class OneBased(ShardedModel):
    class Meta:
        table_name = "one_based"

    date = UnicodeAttribute(hash_key=True)
    item_id = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4, attributes=("item_id",), hash=int), separator=".")


class Pair(ShardedModel):
    class Meta:
        table_name = "pair"

    date = UnicodeAttribute(hash_key=True)
    item_id = NumberAttribute(range_key=True)
    region = UnicodeAttribute()
    shards = Sharding(HashedShards(10, attributes=("item_id", "region"), hash=lambda pair: pair[0] + len(pair[1])),
                      first_shard=0)


class RandomZero(ShardedModel):
    class Meta:
        table_name = "random_zero"

    date = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(3), first_shard=0)


class TestCodec:
    def test_zero_based_keys(self) -> None:
        codec = KeyCodec("M", "k", ".", 0)
        assert "2014-07-09.0" == codec.encode("2014-07-09", 0)
        assert ("2014-07-09", 0) == codec.decode("2014-07-09.0")
        assert ("2014-07-09", 9999) == codec.decode("2014-07-09.9999")

    @pytest.mark.parametrize("value", ["x.00", "x.01", "x.", "x.10000", ".3"])
    def test_zero_based_refuses(self, value: str) -> None:
        with pytest.raises(ShardKeyError, match="shard number >= 0"):
            KeyCodec("M", "k", ".", 0).decode(value)

    def test_one_based_refuses_shard_zero(self) -> None:
        with pytest.raises(ShardKeyError, match="shard number >= 1"):
            KeyCodec("M", "k", ".").decode("x.0")
        with pytest.raises(ShardKeyError, match=r"numbered 1\.\.10000"):
            KeyCodec("M", "k", ".").encode("x", 0)
        with pytest.raises(ShardKeyError, match=r"numbered 0\.\.9999"):
            KeyCodec("M", "k", ".", 0).encode("x", 10_000)

    @given(st.text(min_size=1, max_size=20), st.integers(0, 9999), st.sampled_from([".", "_", "#"]))
    def test_round_trip(self, key: str, shard: int, separator: str) -> None:
        codec = KeyCodec("M", "k", separator, 0)
        assert (key, shard) == codec.decode(codec.encode(key, shard))


class TestLegacyCodec:
    """A legacy_unsharded codec reads a value without a shard suffix as a bare legacy key."""

    def test_bare_keys(self) -> None:
        codec = KeyCodec("M", "k", "_", 1, legacy=True)
        assert ("sensor", LEGACY_SHARD) == codec.decode("sensor")
        assert ("sensor_0", LEGACY_SHARD) == codec.decode("sensor_0")  # no shard 0 when numbered from 1
        assert ("sensor", 3) == codec.decode("sensor_3")
        assert "sensor" == codec.encode("sensor", LEGACY_SHARD)

    def test_without_legacy_a_bare_key_is_refused(self) -> None:
        codec = KeyCodec("M", "k")
        with pytest.raises(ShardKeyError, match="not a physical key"):
            codec.decode("sensor")
        with pytest.raises(ShardKeyError, match="out of range"):
            codec.encode("sensor", LEGACY_SHARD)

    def test_decode_stored(self) -> None:
        class Legacy(ShardedModel):
            class Meta:
                table_name = "legacy"

            date = UnicodeAttribute(hash_key=True)
            shards = Sharding(RandomShards(3), legacy_unsharded=True)

        manager = shard_manager(Legacy)
        assert manager.legacy_unsharded
        assert ("d", None) == manager.decode_stored("d")
        assert ("d", 2) == manager.decode_stored("d_2")
        assert (LEGACY_SHARD, 1, 2, 3) == manager.read_targets("d")
        assert (1, 2, 3) == manager.read_shards("d")
        assert not shard_manager(RandomZero).legacy_unsharded

    @pytest.mark.parametrize("flag", [1, "yes", None])
    def test_flag_is_a_bool(self, flag: object) -> None:
        with pytest.raises(ShardingDefinitionError, match="legacy_unsharded"):
            Sharding(RandomShards(3), legacy_unsharded=flag)  # type: ignore[arg-type]

    def test_repr(self) -> None:
        assert "Sharding(RandomShards(3), separator='.', first_shard=0, legacy_unsharded=True)" == repr(
            Sharding(RandomShards(3), separator=".", first_shard=0, legacy_unsharded=True))


class TestManager:
    def test_hash_int_zero_based(self) -> None:
        manager = shard_manager(ZeroBased)
        assert [1, 2, 3, 0, 1] == [manager.write_shard(ZeroBased("d", n)) for n in (5, 6, 7, 8, 9)]
        assert (3,) == manager.point_shards(ZeroBased("d", 7))
        assert (0, 1, 2, 3) == manager.read_shards("d")
        assert "d.3" == manager.physical_key("d", 3)

    def test_hash_int_one_based(self) -> None:
        manager = shard_manager(OneBased)
        assert [2, 3, 4, 1] == [manager.write_shard(OneBased("d", n)) for n in (5, 6, 7, 8)]
        assert (1, 2, 3, 4) == manager.read_shards("d")

    def test_hash_receives_a_tuple_of_several_attributes(self) -> None:
        assert 9 == shard_manager(Pair).write_shard(Pair("d", 12, region="eu-west"))  # (12 + 7) % 10

    def test_random_numbers_from_zero(self) -> None:
        manager = shard_manager(RandomZero)
        assert (0, 1, 2) == manager.read_shards("d")
        assert {0, 1, 2} == {manager.write_shard(RandomZero("d")) for _ in range(200)}

    def test_default_md5_formula_unchanged_by_first_shard(self) -> None:
        class Md5Zero(ShardedModel):
            class Meta:
                table_name = "md5_zero"

            date = UnicodeAttribute(hash_key=True)
            item_id = NumberAttribute(range_key=True)
            shards = Sharding(HashedShards(10), first_shard=0)

        class Md5One(ShardedModel):
            class Meta:
                table_name = "md5_one"

            date = UnicodeAttribute(hash_key=True)
            item_id = NumberAttribute(range_key=True)
            shards = Sharding(HashedShards(10))

        # md5("d17") % 10 + 1 is 10: the 0-based layout puts the item one lower.
        assert 10 == shard_manager(Md5One).write_shard(Md5One("d", 17))
        assert 9 == shard_manager(Md5Zero).write_shard(Md5Zero("d", 17))


class TestDeclaration:
    @pytest.mark.parametrize("first", [2, -1, True, "0"])
    def test_first_shard_is_zero_or_one(self, first: object) -> None:
        with pytest.raises(ShardingDefinitionError, match="first_shard"):
            Sharding(RandomShards(3), first_shard=first)  # type: ignore[arg-type]

    def test_hash_must_be_callable(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="hash="):
            HashedShards(3, hash=5)  # type: ignore[arg-type]

    def test_hash_must_return_an_int(self) -> None:
        class Bad(ShardedModel):
            class Meta:
                table_name = "bad"

            date = UnicodeAttribute(hash_key=True)
            item_id = NumberAttribute(range_key=True)
            shards = Sharding(HashedShards(3, attributes=("item_id",), hash=str))  # type: ignore[arg-type]

        with pytest.raises(ShardLocationError, match=r"must return an int"):
            shard_manager(Bad).write_shard(Bad("d", 1))


class TestHashFunctionThatRaises:
    """A hash function that raises on a value: the message names what it was given and the fix."""

    def test_over_the_primary_key(self) -> None:
        def digits(key: tuple[str, int]) -> int:
            return int(key[0])

        class ByKey(ShardedModel):
            class Meta:
                table_name = "by_key"

            date = UnicodeAttribute(hash_key=True)
            item_id = NumberAttribute(range_key=True)
            shards = Sharding(HashedShards(3, hash=digits))

        assert 2 == shard_manager(ByKey).write_shard(ByKey("7", 1))  # 7 % 3 + 1
        with pytest.raises(ShardLocationError) as raised:
            shard_manager(ByKey).write_shard(ByKey("2024-01-15", 1))
        assert str(raised.value).startswith(
            "ByKey.date: HashedShards(hash=digits) raised ValueError for the hash key 'date' and range key "
            "of this ByKey (('2024-01-15', 1)): invalid literal for int() with base 10: '2024-01-15'. Store a "
            "value digits accepts there, or declare a hash function that accepts every key. Nothing was sent."
        )

    def test_over_several_attributes(self) -> None:
        class Pairs(ShardedModel):
            class Meta:
                table_name = "pairs"

            date = UnicodeAttribute(hash_key=True)
            item_id = NumberAttribute(range_key=True)
            user = UnicodeAttribute()
            shards = Sharding(HashedShards(3, attributes=("item_id", "user"), hash=sum))

        with pytest.raises(ShardLocationError, match=r"^Pairs\.date: HashedShards\(hash=sum\) raised TypeError "
                           r"for the attributes 'item_id' and 'user' of this Pairs \(\(1, 'u'\)\): .*accepts "
                           r"every value 'item_id' and 'user' can hold\. Nothing was sent\."):
            shard_manager(Pairs).write_shard(Pairs("d", 1, user="u"))
