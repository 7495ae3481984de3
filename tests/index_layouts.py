"""The models of the sharded-index suite, one set per layout, and what each layout stores.

A sharded global index keeps its shard either in the value (``suffixed``: ``day = "20160226_3"``)
or in a number attribute of its own (``multi_attribute``: ``day = "20160226"``, ``day_shard = 3``,
the index's partition key being the pair). Each :class:`Layout` names its models and says, as
known values, what a raw index entry of a given day and shard holds, so one suite checks both.
``PlainLog`` (PynamoDB's own model, the same index unsharded) is the reference for every read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from tests.day_index import day_index

#: The index shards of users under ``HashedShards(8, attributes=("user_id",))`` (md5 of the id).
USER_SHARDS = {"u1": 5, "u2": 4}


class AuditLog(ShardedModel):
    """Suffixed layout: the index shard derived from the user."""

    class Meta:
        table_name = "gsi_audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = day_index(Sharding(HashedShards(8, attributes=("user_id",))), sort_key="accessed_at")
    shards = Sharding(RandomShards(4))


class RandomLog(ShardedModel):
    """Suffixed layout: a random index shard, chosen once per item; no retries (lost replies)."""

    class Meta:
        table_name = "gsi_random_log"
        max_retry_attempts = 0

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    note = UnicodeAttribute(null=True)
    # An index name unlike the attribute's: DynamoDB knows it as by_day_random, PynamoDB as by_day.
    by_day = day_index(Sharding(RandomShards(8)), name="by_day_random", sort_key="accessed_at")
    shards = Sharding(HashedShards(2))


class MultiLog(ShardedModel):
    """Multi-attribute layout: ``day`` as it is, the index shard in ``day_shard``."""

    class Meta:
        table_name = "gsi_multi_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = day_index(Sharding(HashedShards(8, attributes=("user_id",)), layout="multi_attribute"),
                       sort_key="accessed_at")
    shards = Sharding(RandomShards(4))


class RandomMultiLog(ShardedModel):
    """Multi-attribute layout: a random index shard in an attribute named by the index."""

    class Meta:
        table_name = "gsi_multi_random_log"
        max_retry_attempts = 0

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    note = UnicodeAttribute(null=True)
    by_day = day_index(Sharding(RandomShards(8), layout="multi_attribute", shard_attribute="day_part"),
                       sort_key="accessed_at")
    shards = Sharding(HashedShards(2))


class PlainLog(Model):
    """PynamoDB's own behaviour: the reference for every index read."""

    class Meta:
        table_name = "gsi_plain_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    day = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    by_day = day_index(sort_key="accessed_at")


@dataclass(frozen=True)
class Layout:
    """One layout of a sharded index: its models and where a raw entry keeps the index key."""

    name: str
    #: ``by_day`` sharded by ``HashedShards(8, attributes=("user_id",))``, like ``PlainLog``'s.
    log: Any
    #: ``by_day`` sharded by ``RandomShards(8)``; ``max_retry_attempts = 0``.
    random_log: Any
    #: The name DynamoDB knows ``random_log.by_day`` by.
    random_index: str
    #: The raw attributes that hold the index partition key, of ``log`` and of ``random_log``.
    log_partition: tuple[str, ...]
    random_partition: tuple[str, ...]
    #: What those attributes hold for a day and an index shard (known values, in that order).
    stored: Callable[[str, int], tuple[str, ...]]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def values(entry: dict[str, Any], attributes: tuple[str, ...]) -> tuple[str, ...]:
        """The raw values of ``attributes`` in an item or index entry (``S`` or ``N``)."""
        return tuple(next(iter(entry[name].values())) for name in attributes)

    def partition(self, entry: dict[str, Any]) -> tuple[str, ...]:
        """The index partition of a raw item or index entry of ``log``."""
        return self.values(entry, self.log_partition)

    def random_partition_of(self, entry: dict[str, Any]) -> tuple[str, ...]:
        """The index partition of a raw item or index entry of ``random_log``."""
        return self.values(entry, self.random_partition)


SUFFIXED = Layout(
    name="suffixed", log=AuditLog, random_log=RandomLog, random_index="by_day_random",
    log_partition=("day",), random_partition=("day",), stored=lambda day, shard: (f"{day}_{shard}",),
)
MULTI_ATTRIBUTE = Layout(
    name="multi_attribute", log=MultiLog, random_log=RandomMultiLog, random_index="by_day",
    log_partition=("day", "day_shard"), random_partition=("day", "day_part"),
    stored=lambda day, shard: (day, str(shard)),
)
LAYOUTS = (SUFFIXED, MULTI_ATTRIBUTE)


def write_both(log: Any, count: int, day: str = "20160226", users: int = 50) -> None:
    """``count`` items of one day in ``log`` and the same in ``PlainLog``; odd ones noted "odd"."""
    with log.batch_write() as sharded, PlainLog.batch_write() as plain:
        for n in range(count):
            values = {"user_id": f"u{n % users}", "day": day, "note": "odd" if n % 2 else "even"}
            sharded.save(log(f"/f/{n}", n, **values))
            plain.save(PlainLog(f"/f/{n}", n, **values))


def write_logs(log: Any) -> None:
    """The read tests' data: 120 items of 20160226, one of 20160227 (in ``log`` and ``PlainLog``)."""
    write_both(log, 120)
    with log.batch_write() as sharded, PlainLog.batch_write() as plain:
        sharded.save(log("/other", 5, user_id="u1", day="20160227"))
        plain.save(PlainLog("/other", 5, user_id="u1", day="20160227"))


def keys(items: list[Any]) -> list[tuple[str, int, str | None, str | None]]:
    return [(item.file_path, item.accessed_at, item.day, item.user_id) for item in items]
