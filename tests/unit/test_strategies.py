"""Strategies pick shards as documented: uniform random, seed 000's md5 formula, attribute-derived."""

from __future__ import annotations

import hashlib
import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding.strategies import seed_000_shard


def seed_000(pk: str, sk: str, n: int) -> int:
    """Seed 000's calculated method, written out as the article does."""
    return int(hashlib.md5((pk + sk).encode()).hexdigest(), 16) % n + 1


class Ranged(ShardedModel):
    class Meta:
        table_name = "ranged"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(10))


class ByUser(ShardedModel):
    class Meta:
        table_name = "by_user"

    date = UnicodeAttribute(hash_key=True)
    event_id = UnicodeAttribute(range_key=True)
    user_id = UnicodeAttribute(null=True)
    shards = Sharding(HashedShards(7, attributes=("user_id",)))


class HashOnly(ShardedModel):
    class Meta:
        table_name = "hash_only"

    key = UnicodeAttribute(hash_key=True)
    shards = Sharding(HashedShards(5))


class TestHashedShards:
    """HashedShards is seed 000's formula, so data written by it is found."""

    @given(pk=st.text(min_size=1), sk=st.integers(min_value=0, max_value=2**40), n=st.integers(1, 64))
    def test_matches_seed_000(self, pk: str, sk: int, n: int) -> None:
        assert seed_000(pk, str(sk), n) == seed_000_shard(pk, str(sk), n)

    def test_item_shard_uses_pk_and_range_key(self) -> None:
        item = Ranged("/shared/firetvGen2.txt", 1456369200)
        expected = seed_000("/shared/firetvGen2.txt", "1456369200", 10)
        assert expected == Ranged.shards.strategy.write_shard(Ranged, item)
        assert (expected,) == Ranged.shards.strategy.point_shards(Ranged, item.file_path, item)

    def test_integral_float_range_key_hashes_like_the_int_read_back(self) -> None:
        assert Ranged.shards.strategy.write_shard(Ranged, Ranged("/f", 5.0)) == seed_000("/f", "5", 10)

    def test_hash_only_model_uses_the_hash_key(self) -> None:
        assert seed_000("k", "", 5) == HashOnly.shards.strategy.write_shard(HashOnly, HashOnly("k"))

    def test_derived_from_attribute(self) -> None:
        item = ByUser("20160226", "e1", user_id="u42")
        assert seed_000("", "u42", 7) == ByUser.shards.strategy.write_shard(ByUser, item)
        # a point read without the attribute must look everywhere
        assert tuple(range(1, 8)) == ByUser.shards.strategy.point_shards(
            ByUser, "20160226", ByUser("20160226", "e1")
        )

    def test_previous_counts_widen_reads(self) -> None:
        strategy = HashedShards(8, previous_counts=(4,))
        assert tuple(range(1, 9)) == strategy.read_shards(Ranged, "/f")
        item = Ranged("/f", 3)
        assert tuple(sorted({seed_000("/f", "3", 8), seed_000("/f", "3", 4)})) == strategy.point_shards(
            Ranged, "/f", item
        )


class TestRandomShards:
    """RandomShards draws uniformly from 1..n with an injectable source."""

    def test_injected_source_is_used(self) -> None:
        strategy = RandomShards(8, random=random.Random(7))
        again = RandomShards(8, random=random.Random(7))
        item = Ranged("/f", 1)
        assert [strategy.write_shard(Ranged, item) for _ in range(50)] == [
            again.write_shard(Ranged, item) for _ in range(50)
        ]

    def test_uniform_over_all_shards(self) -> None:
        strategy = RandomShards(8, random=random.Random(1))
        counts = Counter(strategy.write_shard(Ranged, Ranged("/f", 1)) for _ in range(8000))
        assert set(counts) == set(range(1, 9))
        assert all(850 <= n <= 1150 for n in counts.values()), counts
