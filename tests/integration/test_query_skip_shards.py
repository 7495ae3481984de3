"""``Sharding(DynamicShards(...), written_at="accessed_at")``: queries skip shards added later.

Proves (DynamoDB Local, a simulated clock): a query whose range on the write-time range key
ends before a growth (minus the margin) queries only the shards in use then (1 request after
a 1 -> 64 growth, not 64), and returns exactly what a query of every shard returns; ``count``
skips the same way; a writer whose item's write time is older than its shard (a clock behind,
a retry long after the item was built) puts it in a shard in use at that time, so no query can
skip it, whatever the skew; without the declaration nothing is skipped. A hypothesis property
mixes growths, skewed write times and query ranges and checks every range against the raw table.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute

from pynamodb_sharding import (
    DynamicShards,
    HashedShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
    ShardMetadata,
)
from pynamodb_sharding.testing import record_requests
from tests.clock import Clock
from tests.raw import raw_items

Bind = Callable[..., Any]
MARGIN = 60.0
T0 = 1_456_444_800.0  # 2016-02-26


CLOCK = Clock(T0)


class SkipShards(ShardMetadata):
    class Meta:
        table_name = "skip_shards"


class Access(ShardedModel):
    class Meta:
        table_name = "skip_access"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(SkipShards, max_shards=64, cooldown=0, clock=CLOCK),
                      written_at="accessed_at", written_at_margin=MARGIN)


class AccessAll(ShardedModel):
    """The same table without the declaration: the reference that queries every shard."""

    class Meta:
        table_name = "skip_access"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(SkipShards, max_shards=64, cooldown=0, clock=CLOCK))


class StampedAccess(ShardedModel):
    class Meta:
        table_name = "skip_stamped"
        max_pool_connections = 64

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = UTCDateTimeAttribute(range_key=True)
    shards = Sharding(DynamicShards(SkipShards, max_shards=8, cooldown=0, clock=CLOCK),
                      written_at="accessed_at", written_at_margin=MARGIN)


@pytest.fixture
def grown(dynamodb_models: Bind) -> list[int]:
    """Key "/hot": 20 items before a 1 -> 64 growth at T0 + 1000, 200 items after it."""
    dynamodb_models(Access, AccessAll)
    CLOCK.now = T0
    stamps = [int(T0) + n for n in range(20)]
    for stamp in stamps:
        Access("/hot", stamp).save()
    CLOCK.now = T0 + 1000
    while Access.shards.shard_count("/hot") < 64:
        Access.shards.grow("/hot")
    after = [int(T0) + 1000 + n for n in range(200)]
    with Access.batch_write() as batch:
        for stamp in after:
            batch.save(Access("/hot", stamp))
    return stamps + after


def _queries(sent: Any) -> int:
    return len(sent.bodies("Query"))


def test_a_query_of_data_older_than_the_growth_sends_one_request(grown: list[int]) -> None:
    old = int(T0) + 1000 - MARGIN - 1
    with record_requests(Access) as sent:
        got = [item.accessed_at for item in Access.query("/hot", Access.accessed_at < old)]
    assert got == [stamp for stamp in grown if stamp < old]
    assert _queries(sent) == 1
    with record_requests(AccessAll) as sent:
        everything = [item.accessed_at for item in AccessAll.query("/hot", AccessAll.accessed_at < old)]
    assert (everything, _queries(sent)) == (got, 64)


@pytest.mark.parametrize("condition", [
    lambda m: m.accessed_at <= int(T0) + 1000 - MARGIN - 1,
    lambda m: m.accessed_at == int(T0) + 5,
    lambda m: m.accessed_at.between(int(T0) + 3, int(T0) + 900),
])
def test_upper_bounds_skip(grown: list[int], condition: Callable[[Any], Any]) -> None:
    with record_requests(Access) as sent:
        got = [item.accessed_at for item in Access.query("/hot", condition(Access))]
    assert got == [item.accessed_at for item in AccessAll.query("/hot", condition(AccessAll))]
    assert _queries(sent) == 1
    assert Access.count("/hot", condition(Access)) == len(got)


@pytest.mark.parametrize("condition", [
    None,
    lambda m: m.accessed_at > int(T0),
    lambda m: m.accessed_at < int(T0) + 1000,  # within the margin of the growth: not skipped
    lambda m: m.accessed_at.between(int(T0), int(T0) + 1100),
])
def test_ranges_reaching_the_growth_read_every_shard(grown: list[int], condition: Any) -> None:
    args = () if condition is None else (condition(Access),)
    with record_requests(Access) as sent:
        got = [item.accessed_at for item in Access.query("/hot", *args, scan_index_forward=False)]
    reference = () if condition is None else (condition(AccessAll),)
    assert got == [item.accessed_at for item in AccessAll.query("/hot", *reference, scan_index_forward=False)]
    assert _queries(sent) >= 64


def test_an_item_older_than_its_shard_goes_to_a_shard_in_use_then(grown: list[int]) -> None:
    """A writer's clock 10 minutes behind: the stamp predates the growth by more than the margin."""
    behind = int(T0) + 1000 - 600
    for n in range(30):
        Access("/hot", behind + n / 100).save()
    stored = [raw for raw in raw_items(Access) if float(raw["accessed_at"]["N"]) >= behind
              and float(raw["accessed_at"]["N"]) < behind + 1]
    assert len(stored) == 30
    assert {raw["file_path"]["S"] for raw in stored} == {"/hot_1"}  # the one shard in use then
    got = [item.accessed_at for item in Access.query("/hot", Access.accessed_at < behind + 1)]
    assert len(got) == 50


def test_datetime_range_keys(dynamodb_models: Bind) -> None:
    dynamodb_models(StampedAccess)
    CLOCK.now = T0
    start = datetime.datetime.fromtimestamp(T0, datetime.UTC)
    for n in range(5):
        StampedAccess("/d", start + datetime.timedelta(seconds=n)).save()
    CLOCK.now = T0 + 3600
    StampedAccess.shards.grow("/d")
    StampedAccess.shards.grow("/d")
    with record_requests(StampedAccess) as sent:
        got = list(StampedAccess.query("/d", StampedAccess.accessed_at < start + datetime.timedelta(minutes=30)))
    assert (len(got), _queries(sent)) == (5, 1)
    naive = (start + datetime.timedelta(minutes=30)).replace(tzinfo=None)  # stored as UTC, as PynamoDB does
    assert StampedAccess.count("/d", StampedAccess.accessed_at < naive) == 5


class TestProperty:
    keys = itertools.count()

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        growths=st.lists(st.integers(0, 3000), min_size=1, max_size=3),
        writes=st.lists(st.tuples(st.integers(0, 4000), st.integers(-400, 400)), min_size=1, max_size=25),
        bounds=st.lists(st.integers(-100, 4500), min_size=1, max_size=4),
    )
    def test_skipping_never_loses_an_item(
        self, dynamodb_models: Bind, growths: list[int], writes: list[tuple[int, int]], bounds: list[int],
    ) -> None:
        """Writes at true times with clocks off by up to 400 s (over the 60 s margin), growths
        in between; every query range returns what a query of every shard returns."""
        if next(self.keys) == 0:
            dynamodb_models(Access, AccessAll)
        key = f"/k{next(self.keys)}"
        events = sorted([(at, "grow", 0) for at in growths] + [(at, "write", skew) for at, skew in writes])
        written = []
        for n, (at, kind, skew) in enumerate(events):
            CLOCK.now = T0 + at
            if kind == "grow":
                Access.shards.grow(key)
            else:
                stamp = int(T0) + at + skew + n / 1000  # unique
                Access(key, stamp).save()
                written.append(stamp)
        for bound in bounds:
            limit = int(T0) + bound
            got = [item.accessed_at for item in Access.query(key, Access.accessed_at <= limit)]
            assert got == sorted(stamp for stamp in written if stamp <= limit)
            assert Access.count(key, Access.accessed_at <= limit) == len(got)


def _metadata() -> type[ShardMetadata]:
    """A metadata model of its own: a declaration test must not bind SkipShards' connection."""
    meta = type("Meta", (), {"table_name": "skip_definition_shards"})
    return type("DefinitionShards", (ShardMetadata,), {"Meta": meta})


class TestDefinition:
    def test_written_at_must_be_the_range_key(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="must name Wrong's range key"):
            class Wrong(ShardedModel):
                class Meta:
                    table_name = "wrong"

                pk = UnicodeAttribute(hash_key=True)
                at = NumberAttribute(range_key=True)
                other = NumberAttribute()
                shards = Sharding(DynamicShards(_metadata()), written_at="other")

    def test_written_at_must_be_a_time(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="NumberAttribute of epoch seconds"):
            class Text(ShardedModel):
                class Meta:
                    table_name = "text"

                pk = UnicodeAttribute(hash_key=True)
                at = UnicodeAttribute(range_key=True)
                shards = Sharding(DynamicShards(_metadata()), written_at="at")

    def test_fixed_strategies_have_nothing_to_skip(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="use DynamicShards, or drop written_at"):
            class Fixed(ShardedModel):
                class Meta:
                    table_name = "fixed"

                pk = UnicodeAttribute(hash_key=True)
                at = NumberAttribute(range_key=True)
                shards = Sharding(HashedShards(4), written_at="at")

    def test_bad_options(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="'s' or 'ms'"):
            Sharding(HashedShards(4), written_at="at", written_at_unit="h")  # type: ignore[arg-type]
        with pytest.raises(ShardingDefinitionError, match="seconds >= 0"):
            Sharding(HashedShards(4), written_at="at", written_at_margin=-1)
