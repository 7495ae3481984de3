"""``migrate copy`` into models with a sharded global index, and ``verify`` of indexes (issue 23,
point 8), on DynamoDB Local.

Proves: a copy from a plain table writes each item's index entry the way the target's
``save()`` writes it (suffixed, or its ``day_shard`` set; a random index strategy's shard
derived from the item, so a re-run writes the same items byte for byte), so ``get``, queries
of the table and queries of the index find every copied item; a copy between two index layouts
decodes and re-encodes the entries; ``verify`` compares what a user reads, and names the index
whose entries differ (an entry stored without its index shard, which no query finds).
"""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding.migration import CheckpointStore, CopyJob, JobOptions, copy, verify
from pynamodb_sharding.testing.plugin import BindModels
from tests.day_index import day_index
from tests.raw import raw_client, raw_items

DAYS = ("20160226", "20160227")


class LogAttributes:
    """The attributes of the source and of every target, declared once (PynamoDB collects a
    model's inherited attributes, from a mixin too)."""

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute(null=True)
    user_id = UnicodeAttribute(null=True)


class Logs(LogAttributes, Model):
    """The plain source table."""

    class Meta:
        table_name = "mig_idx_source"


class HashedIndexLogs(LogAttributes, ShardedModel):
    class Meta:
        table_name = "mig_idx_hashed"

    by_day = day_index(Sharding(HashedShards(8, attributes=("user_id",))))
    shards = Sharding(RandomShards(4))


class RandomIndexLogs(LogAttributes, ShardedModel):
    """Shards only its index, at random."""

    class Meta:
        table_name = "mig_idx_random"

    by_day = day_index(Sharding(RandomShards(8)))


class MultiIndexLogs(LogAttributes, ShardedModel):
    class Meta:
        table_name = "mig_idx_multi"

    by_day = day_index(Sharding(RandomShards(4), layout="multi_attribute"))
    shards = Sharding(HashedShards(2))


TARGETS = {"hashed suffixed": HashedIndexLogs, "random suffixed, index only": RandomIndexLogs,
           "random multi_attribute": MultiIndexLogs}


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    return JobOptions(total_segments=3, page_size=50, checkpoint_table=checkpoint_table)



def fill() -> None:
    with Logs.batch_write() as batch:
        for n in range(150):
            batch.save(Logs(f"/f/{n % 5}", n, day=DAYS[n % 3 == 0], user_id=f"u{n % 11}"))
        batch.save(Logs("/no-day", 1, user_id="u1"))


def by_key(model: type[Model]) -> dict[tuple[str, str], dict[str, Any]]:
    """Raw items of the table by (logical hash key, range key): the table's own shard left out."""
    found = {}
    for item in raw_items(model):
        stored = item["file_path"]["S"]
        logical = stored if model is RandomIndexLogs else stored.rpartition("_")[0]  # index-only: bare keys
        found[(logical, item["at"]["N"])] = item
    return found


def index_value(model: type[Model], item: dict[str, Any]) -> tuple[str, int]:
    """(logical day, index shard) of a raw item, decoded here, not by the library."""
    if model is MultiIndexLogs:
        return item["day"]["S"], int(item["day_shard"]["N"])
    logical, _, shard = item["day"]["S"].rpartition("_")
    return logical, int(shard)


@pytest.mark.parametrize("target", list(TARGETS.values()), ids=list(TARGETS))
class TestCopyIntoAShardedIndex:

    def test_index_entries_written_as_save_writes_them(self, dynamodb_models: BindModels, options: JobOptions,
                                                       target: Any) -> None:
        dynamodb_models(Logs, target)
        fill()
        report = copy(Logs, target, options)
        assert (report.tally.written, report.complete) == (151, True)
        copied = by_key(target)
        assert len(copied) == 151
        shards = set()
        for (key, at), item in copied.items():
            if key == "/no-day":
                assert "day" not in item
                assert "day_shard" not in item
                continue
            day, shard = index_value(target, item)
            assert day == DAYS[int(at) % 3 == 0]
            shards.add(shard)
        assert shards <= set(range(1, 9 if target is not MultiIndexLogs else 5))
        assert len(shards) >= 4  # spread over the index's shards
        # Reads find every copied item, with its logical day (before: ShardKeyError).
        assert target.get("/f/3", 3).day == DAYS[1]
        assert [i.at for i in target.query("/f/1")] == list(range(1, 150, 5))
        assert [i.at for i in target.by_day.query(DAYS[1])] == list(range(0, 150, 3))
        assert [i.at for i in target.by_day.query(DAYS[0], scan_index_forward=False, limit=4)] == [149, 148, 146, 145]
        assert target.by_day.count(DAYS[0]) == 100
        # save() of a copied item keeps its entry where it is: the copy wrote what save() writes.
        for item in target.by_day.query(DAYS[0], limit=20):
            item.save()
        assert by_key(target) == copied
        assert verify(Logs, target).ok
        # A re-run from scratch (checkpoints forgotten) writes the same items, byte for byte.
        CheckpointStore(raw_client(Logs), options.checkpoint_table).reset(
            CopyJob(Logs, target).job_id(options.total_segments), options.total_segments)
        assert copy(Logs, target, options).tally.written == 151
        assert by_key(target) == copied

    def test_verify_names_the_index_whose_entries_differ(self, dynamodb_models: BindModels, options: JobOptions,
                                                         target: Any) -> None:
        dynamodb_models(Logs, target)
        fill()
        copy(Logs, target, options)
        stored = next(item for (key, at), item in by_key(target).items() if (key, at) == ("/f/2", "7"))
        broken = dict(stored)
        if target is MultiIndexLogs:
            del broken["day_shard"]  # out of the index: no query of the day finds it
        else:
            broken["day"] = {"S": DAYS[0]}  # no index shard: what the copy used to write
        raw_client(target).put_item(TableName=target.Meta.table_name, Item=broken)
        report = verify(Logs, target)
        assert not report.ok
        assert report.differences == ()  # the item itself reads the same
        assert [(d.index, d.value, d.source_count, d.target_count) for d in report.index_differences] == [
            ("by_day", DAYS[0], 100, 99)]
        assert "index:      index 'by_day', value '20160226': 100 items in the source, 99 in the target" in list(
            report.lines())
        if target is not MultiIndexLogs:  # every read of the item fails on the undecodable value
            assert len(report.undecodable) == 1
            assert "index 'by_day'" in report.undecodable[0]


def test_copy_between_two_index_layouts(dynamodb_models: BindModels, options: JobOptions) -> None:
    """Suffixed entries are decoded and re-encoded for a multi-attribute target."""
    dynamodb_models(Logs, HashedIndexLogs, MultiIndexLogs)
    fill()
    copy(Logs, HashedIndexLogs, options)
    report = copy(HashedIndexLogs, MultiIndexLogs, options)
    assert report.tally.written == 151
    assert all(item["day"]["S"] in DAYS and 1 <= int(item["day_shard"]["N"]) <= 4
               for item in raw_items(MultiIndexLogs) if "day" in item)
    assert [i.at for i in MultiIndexLogs.by_day.query(DAYS[1])] == list(range(0, 150, 3))
    assert verify(HashedIndexLogs, MultiIndexLogs).ok
    assert verify(Logs, MultiIndexLogs).ok
