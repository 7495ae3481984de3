"""Strategies pick shards as documented: uniform random, the md5 layout, attribute-derived.

Expected shards are fixed values, computed once with ``hashlib.md5`` over the bytes named in
each test (``int(md5(data).hexdigest(), 16) % n + 1``), not re-derived here.
"""

from __future__ import annotations

import random
from collections import Counter

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._strategies import md5_shard


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
    """HashedShards is the md5 layout of AWS's write-sharding example, so data written by it is found."""

    def test_known_values(self) -> None:
        assert 1 == md5_shard(b"/shared/firetvGen2.txt1456369200", 10)
        assert 4 == md5_shard(b"k", 5)
        assert 6 == md5_shard(b"/f1", 8)
        assert 2 == md5_shard(b"/f1", 4)

    def test_item_shard_uses_pk_and_range_key(self) -> None:
        item = Ranged("/shared/firetvGen2.txt", 1456369200)
        assert 1 == Ranged.shards.write_shard(item)  # md5(b"/shared/firetvGen2.txt1456369200")
        assert (1,) == Ranged.shards.point_shards(item)

    def test_integral_float_range_key_hashes_like_the_int_read_back(self) -> None:
        assert 1 == Ranged.shards.write_shard(Ranged("/f", 5.0))  # md5(b"/f5") % 10 + 1
        assert 1 == Ranged.shards.write_shard(Ranged("/f", 5))

    def test_hash_only_model_uses_the_hash_key(self) -> None:
        assert 4 == HashOnly.shards.write_shard(HashOnly("k"))  # md5(b"k") % 5 + 1

    def test_derived_from_attribute(self) -> None:
        item = ByUser("20160226", "e1", user_id="u42")
        assert 5 == ByUser.shards.write_shard(item)  # md5(b"u42") % 7 + 1
        # a point read without the attribute must look everywhere
        assert tuple(range(1, 8)) == ByUser.shards.point_shards(ByUser("20160226", "e1"))

    def test_previous_counts_widen_reads(self) -> None:
        strategy = HashedShards(8, previous_counts=(4,))
        assert tuple(range(1, 9)) == strategy.read_shards(Ranged.shards.key("/f"))
        # md5(b"/f1"): shard 6 of 8 now, shard 2 of 4 before
        assert (2, 6) == strategy.point_shards(Ranged.shards.item_key(Ranged("/f", 1)))


class TestRandomShards:
    """RandomShards draws uniformly from 1..n with an injectable source."""

    def test_injected_source_is_used(self) -> None:
        strategy = RandomShards(8, random=random.Random(7))
        again = RandomShards(8, random=random.Random(7))
        item = Ranged.shards.item_key(Ranged("/f", 1))
        assert [strategy.write_shard(item) for _ in range(50)] == [again.write_shard(item) for _ in range(50)]

    def test_uniform_over_all_shards(self) -> None:
        strategy = RandomShards(8, random=random.Random(1))
        item = Ranged.shards.item_key(Ranged("/f", 1))
        counts = Counter(strategy.write_shard(item) for _ in range(8000))
        assert set(counts) == set(range(1, 9))
        assert all(850 <= n <= 1150 for n in counts.values()), counts
