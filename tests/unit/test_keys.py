"""Physical keys decode back to exactly the logical key and shard they were built from."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding._exceptions import ShardingDefinitionError, ShardKeyError
from pynamodb_sharding._keys import LEGACY_SHARD, MAX_PARTITION_KEY_BYTES, KeyCodec, decode, encode, validate_separator
from tests.strategies import logical_keys, separators, shards, tricky_logical_keys


class TestRoundTrip:
    """decode(encode(k, s)) == (k, s) for every non-empty key, valid shard and separator."""

    @given(key=st.one_of(logical_keys, tricky_logical_keys), shard=shards)
    def test_default_separator(self, key: str, shard: int) -> None:
        assert (key, shard) == decode(encode(key, shard))

    @given(key=st.one_of(logical_keys, tricky_logical_keys), shard=shards, separator=separators)
    def test_any_valid_separator(self, key: str, shard: int, separator: str) -> None:
        validate_separator(separator, "test")
        assert (key, shard) == decode(encode(key, shard, separator), separator)

    def test_suffix_is_always_present(self) -> None:
        assert encode("/shared/firetvGen2.txt", 3) == "/shared/firetvGen2.txt_3"
        assert decode("a_1_2") == ("a_1", 2)


class TestDecodeRefusesNonPhysicalKeys:
    """A value that was not written through a sharded model is refused, not misread."""

    @pytest.mark.parametrize("value", ["plain", "x_", "_3", "x_0", "x_03", "x_-1", "x_3a", "x_\u0663"])
    def test_refused(self, value: str) -> None:
        with pytest.raises(ShardKeyError, match="not a physical key"):
            decode(value)


class TestCodecLimits:
    """The codec refuses keys DynamoDB would refuse, before anything is sent."""

    codec = KeyCodec("AuditLog", "file_path")

    def test_over_2048_bytes_is_refused_naming_model_and_attribute(self) -> None:
        key = "é" * 1023  # 2,046 bytes; the suffix "_1" makes 2,048: allowed
        assert len(self.codec.encode(key, 1).encode()) == MAX_PARTITION_KEY_BYTES
        with pytest.raises(ShardKeyError, match=r"AuditLog\.file_path.*2049 bytes"):
            self.codec.encode(key, 10)

    @pytest.mark.parametrize("value", [None, 3, b"bytes", ""])
    def test_wrong_type_or_empty(self, value: object) -> None:
        with pytest.raises(ShardKeyError, match=r"AuditLog\.file_path"):
            self.codec.encode(value, 1)

    @pytest.mark.parametrize("shard", [0, -1, True, 1.0, 10_001])
    def test_shard_out_of_range(self, shard: object) -> None:
        with pytest.raises(ShardKeyError, match="out of range"):
            self.codec.encode("k", shard)  # type: ignore[arg-type]


class TestSeparatorValidation:
    """Separators that would make decoding ambiguous are refused."""

    @pytest.mark.parametrize("separator", ["", "1", "a1", " ", "\n", 5, None])
    def test_refused(self, separator: object) -> None:
        with pytest.raises(ShardingDefinitionError):
            validate_separator(separator, "Sharding(separator=...)")

    @pytest.mark.parametrize("separator", ["_", "#", "::", "-shard-"])
    def test_accepted(self, separator: str) -> None:
        assert separator == validate_separator(separator, "x")


class TestLegacyCodec:
    """A ``legacy_unsharded`` codec reads a suffix above every shard its layout can have as part
    of a bare legacy key, and a suffix the layout can have as that shard."""

    codec = KeyCodec("Sensor", "sensor", "_", 1, legacy=True, highest_shard=8)

    def test_known_values(self) -> None:
        assert ("sensor_2016", LEGACY_SHARD) == self.codec.decode("sensor_2016")
        assert ("sensor_9", LEGACY_SHARD) == self.codec.decode("sensor_9")
        assert ("sensor", 8) == self.codec.decode("sensor_8")
        assert ("sensor", 1) == self.codec.decode("sensor_1")
        assert ("sensor_0", LEGACY_SHARD) == self.codec.decode("sensor_0")
        assert ("sensor", LEGACY_SHARD) == self.codec.decode("sensor")

    def test_without_legacy_the_bound_does_not_apply(self) -> None:
        plain = KeyCodec("Sensor", "sensor", "_", 1, highest_shard=8)
        assert ("sensor", 2016) == plain.decode("sensor_2016")

    @given(key=st.one_of(logical_keys, tricky_logical_keys), number=st.integers(9, 10**6))
    def test_above_the_highest_shard_is_bare(self, key: str, number: int) -> None:
        value = f"{key}_{number}"
        assert (value, LEGACY_SHARD) == self.codec.decode(value)

    @given(key=st.one_of(logical_keys, tricky_logical_keys), shard=st.integers(1, 8))
    def test_a_shard_the_layout_can_have_round_trips(self, key: str, shard: int) -> None:
        assert (key, shard) == self.codec.decode(self.codec.encode(key, shard))


def test_decoding_a_key_again_answers_the_same_and_a_bad_key_is_refused_each_time() -> None:
    codec = KeyCodec("Feed", "path", separator="#", legacy=True, highest_shard=8)
    for round_ in range(2):  # the second round answers from what the codec kept
        assert codec.decode("a#3") == ("a", 3), round_
        assert codec.decode("a#9") == ("a#9", LEGACY_SHARD), round_  # above the layout: a bare key
        assert codec.decode("plain") == ("plain", LEGACY_SHARD), round_
    strict = KeyCodec("Feed", "path", separator="#")
    for _ in range(2):
        with pytest.raises(ShardKeyError, match="is not a physical key"):
            strict.decode("plain")
    many = [f"key-{number}#{number % 7 + 1}" for number in range(10_000)]  # more than it keeps
    assert [strict.decode(key) for key in many] == [(f"key-{n}", n % 7 + 1) for n in range(10_000)]
    assert strict == KeyCodec("Feed", "path", separator="#")  # what it kept is not part of the codec's value
