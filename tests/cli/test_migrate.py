"""``pynamodb-sharding migrate ...`` run as a user runs it, killed with SIGKILL and resumed.

Proves: a copy of 5,000 items on 5 hot keys into ``RandomShards``, ``HashedShards`` and
``DynamicShards`` models, killed (SIGKILL, the whole process group) at several random points
and re-run each time, ends with every item exactly once under the right logical key, checked
on the raw table with boto3; ``migrate verify`` exits 0 on identical tables and 1 naming the
differing key; ``--dry-run`` prints the plan and writes nothing; ``--json`` prints progress
lines and a report; the checkpoint table is named in ``--help``.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import time
from types import ModuleType
from typing import Any

import pytest

from .console import ModelsModule, console_script, run_cli

KEYS = [f"sensor-{n}" for n in range(5)]
PER_KEY = 1000

MIGRATION_MODELS = """

from pynamodb_sharding._dynamic import DynamicShards


class Readings(Model):
    class Meta:
        table_name = "{prefix}_readings"
        host = HOST

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()


class ShardedReadings(ShardedModel):  # the keys of every sharded layout, declared once: no table
    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()


class RandomReadings(ShardedReadings):
    class Meta:
        table_name = "{prefix}_random_readings"
        host = HOST

    shards = Sharding(RandomShards(8))


class HashedReadings(ShardedReadings):
    class Meta:
        table_name = "{prefix}_hashed_readings"
        host = HOST

    shards = Sharding(HashedShards(8))


class Hashed16Readings(ShardedReadings):  # HashedReadings' table after its count went from 8 to 16
    class Meta:
        table_name = "{prefix}_hashed_readings"
        host = HOST
        max_pool_connections = 16

    shards = Sharding(HashedShards(16, previous_counts=(8,)))


class DynamicReadings(ShardedReadings):
    class Meta:
        table_name = "{prefix}_dynamic_readings"
        host = HOST

    shards = Sharding(DynamicShards(AuditLogShards, max_shards=8))
"""


@pytest.fixture
def models(project: ModelsModule, user_credentials: None) -> ModuleType:
    """The project's models imported here, with the command's credentials; their tables created."""
    project.append(MIGRATION_MODELS)
    module = project.load()
    for model in (module.Readings, module.RandomReadings, module.HashedReadings, module.AuditLogShards,
                  module.DynamicReadings):
        model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    return module


def _put(dynamodb: Any, table: str, items: list[dict[str, Any]]) -> None:
    """Write raw items, 25 per BatchWriteItem."""
    for begin in range(0, len(items), 25):
        pending: dict[str, Any] = {table: [{"PutRequest": {"Item": item}} for item in items[begin:begin + 25]]}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def _fill(dynamodb: Any, table: str) -> None:
    _put(dynamodb, table, [{"sensor": {"S": key}, "at": {"N": str(n)}, "value": {"S": f"{key}/{n}"}}
                           for key in KEYS for n in range(PER_KEY)])


def _raw(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        items.extend(page["Items"])
    return items


def _count(dynamodb: Any, table: str) -> int:
    total = 0
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT"):
        total += page["Count"]
    return int(total)


def _logical(items: list[dict[str, Any]]) -> collections.Counter[tuple[str, int, str]]:
    found: collections.Counter[tuple[str, int, str]] = collections.Counter()
    for item in items:
        logical, _, shard = item["sensor"]["S"].rpartition("_")
        assert 1 <= int(shard) <= 8, item["sensor"]
        found[(logical, int(item["at"]["N"]), item["value"]["S"])] += 1
    return found


def _start(project: ModelsModule, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(console_script()), *args], cwd=project.directory, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


@pytest.mark.parametrize("target", ["RandomReadings", "HashedReadings", "DynamicReadings"])
def test_copy_killed_at_random_points_writes_every_item_once(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, models: ModuleType, target: str
) -> None:
    source_table, target_table = models.Readings.Meta.table_name, getattr(models, target).Meta.table_name
    _fill(dynamodb, source_table)
    if target == "DynamicReadings":  # hot keys already grown: the copy spreads them over 4 shards
        for key in KEYS:
            models.DynamicReadings(key, -1, value="seed").save()
            models.DynamicReadings.shards.grow(key)
            models.DynamicReadings.shards.grow(key)
            models.DynamicReadings(key, -1).delete()
    args = ("migrate", "copy", project.spec("Readings"), project.spec(target), "--workers", "2",
            "--total-segments", "4", "--page-size", "100", "--rate", "2500", "--json",
            "--checkpoint-table", project.table("checkpoints"))
    # Kill once the target holds a random number of items (rising: each run resumes the last).
    thresholds = sorted(random.Random(target).sample(range(300, 4700), 3))
    partial = []
    for threshold in thresholds:
        process = _start(project, cli_env, *args)
        deadline = time.monotonic() + 120
        while _count(dynamodb, target_table) < threshold and process.poll() is None:
            assert time.monotonic() < deadline, "the copy made no progress"
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)  # the command and its worker processes
        process.communicate(timeout=30)
        partial.append(_count(dynamodb, target_table))
    finished = run_cli(*args, cwd=project.directory, env=cli_env, timeout=300)
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    assert report["event"] == "report"
    assert (report["complete"], report["segments_done"]) == (True, 4)
    assert any(0 < count < len(KEYS) * PER_KEY for count in partial), partial  # killed mid-copy

    stored = _raw(dynamodb, target_table)
    expected = collections.Counter((key, n, f"{key}/{n}") for key in KEYS for n in range(PER_KEY))
    assert len(stored) == len(KEYS) * PER_KEY
    assert _logical(stored) == expected
    if target == "DynamicReadings":
        assert {item["sensor"]["S"] for item in stored} == {f"{key}_{s}" for key in KEYS for s in range(1, 5)}

    verified = run_cli("migrate", "verify", project.spec("Readings"), project.spec(target),
                       cwd=project.directory, env=cli_env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "identical" in verified.stdout


REINDEX_MODELS = """

from pynamodb.indexes import AllProjection, GlobalSecondaryIndex


class PlainDaysByDay(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class PlainDays(Model):
    class Meta:
        table_name = "{prefix}_days"
        host = HOST

    event_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    at = NumberAttribute()
    by_day = PlainDaysByDay()


class AdoptedByDay(GlobalSecondaryIndex):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


class AdoptedDays(ShardedModel):
    Meta = PlainDays.Meta

    event_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    at = NumberAttribute()
    by_day = AdoptedByDay()
"""

DAYS_ITEMS = 3000


@pytest.fixture
def day_models(project: ModelsModule, user_credentials: None) -> ModuleType:
    """A table with a plain index filled with bare days, and the model adopting that index."""
    project.append(REINDEX_MODELS)
    module = project.load()
    module.PlainDays.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    return module


def _fill_days(dynamodb: Any, table: str) -> None:
    _put(dynamodb, table, [{"event_id": {"S": f"e{n:05d}"}, "day": {"S": "20160226"}, "at": {"N": str(n)}}
                           for n in range(DAYS_ITEMS)])


def _rewritten(dynamodb: Any, table: str) -> int:
    total = 0
    for page in dynamodb.get_paginator("scan").paginate(
            TableName=table, Select="COUNT", FilterExpression="contains(#d, :sep)",
            ExpressionAttributeNames={"#d": "day"}, ExpressionAttributeValues={":sep": {"S": "_"}}):
        total += page["Count"]
    return int(total)


#: A second model of the days table, still plain: its entries are not AdoptedDays'.
TICKET_MODEL = """

class PlainTicketDays(Model):
    Meta = PlainDays.Meta

    event_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    at = NumberAttribute()
    subject = UnicodeAttribute(null=True)
    by_day = PlainDaysByDay()
"""


def test_reindex_of_one_model_of_a_shared_table(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, day_models: ModuleType
) -> None:
    """Another model's bare entries share the index: the unscoped job is refused and names it;
    the dry run of ``--values`` lists the entries per value; the job rewrites only those."""
    project.append(TICKET_MODEL)
    table = day_models.PlainDays.Meta.table_name
    _put(dynamodb, table, [{"event_id": {"S": f"e{n:02d}"}, "day": {"S": "20160226"}, "at": {"N": str(n)}}
                           for n in range(30)])
    _put(dynamodb, table, [{"event_id": {"S": f"t{n:02d}"}, "day": {"S": "tickets"}, "at": {"N": str(n)}}
                           for n in range(10)])
    common = ("--checkpoint-table", project.table("checkpoints"))
    refused = run_cli("migrate", "reindex", project.spec("AdoptedDays"), "by_day", *common,
                      cwd=project.directory, env=cli_env)
    assert refused.returncode != 0
    assert "PlainTicketDays" in refused.stderr
    assert "--values" in refused.stderr
    assert _rewritten(dynamodb, table) == 0
    planned = run_cli("migrate", "reindex", project.spec("AdoptedDays"), "by_day", "--values", "20160226",
                      "--dry-run", *common, cwd=project.directory, env=cli_env)
    assert planned.returncode == 0, planned.stderr
    assert "value:      '20160226': 30 entries rewritten" in planned.stdout
    assert "value:      'tickets': 0 entries rewritten, 10 left as they are (other models')" in planned.stdout
    done = run_cli("migrate", "reindex", project.spec("AdoptedDays"), "by_day", "--values", "20160226", *common,
                   cwd=project.directory, env=cli_env)
    assert done.returncode == 0, done.stderr
    days = collections.Counter(item["day"]["S"].rpartition("_")[0] or item["day"]["S"]
                               for item in _raw(dynamodb, table))
    assert days == {"20160226": 30, "tickets": 10}
    assert _rewritten(dynamodb, table) == 30


def test_reindex_killed_at_random_points_rewrites_every_entry_once(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, day_models: ModuleType
) -> None:
    """``migrate reindex`` of 3,000 bare index values, killed (SIGKILL, the whole process group)
    three times mid-job and re-run: every value ends suffixed exactly once, nothing else changes."""
    table = day_models.PlainDays.Meta.table_name
    _fill_days(dynamodb, table)
    planned = run_cli("migrate", "reindex", project.spec("AdoptedDays"), "by_day", "--dry-run",
                      "--checkpoint-table", project.table("checkpoints"), cwd=project.directory, env=cli_env)
    assert planned.returncode == 0, planned.stderr
    assert f"writes:     {DAYS_ITEMS} index entries rewritten in place" in planned.stdout
    assert _rewritten(dynamodb, table) == 0
    args = ("migrate", "reindex", project.spec("AdoptedDays"), "by_day", "--workers", "2", "--total-segments", "4",
            "--page-size", "100", "--rate", "1500", "--json", "--checkpoint-table", project.table("checkpoints"))
    thresholds = sorted(random.Random("reindex").sample(range(200, DAYS_ITEMS - 300), 3))
    partial = []
    for threshold in thresholds:
        process = _start(project, cli_env, *args)
        deadline = time.monotonic() + 120
        while _rewritten(dynamodb, table) < threshold and process.poll() is None:
            assert time.monotonic() < deadline, "the reindex made no progress"
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
        partial.append(_rewritten(dynamodb, table))
    finished = run_cli(*args, cwd=project.directory, env=cli_env, timeout=300)
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    assert (report["event"], report["complete"], report["segments_done"]) == ("report", True, 4)
    assert any(0 < count < DAYS_ITEMS for count in partial), partial  # killed mid-job

    stored = _raw(dynamodb, table)
    assert len(stored) == DAYS_ITEMS
    assert sorted((item["event_id"]["S"], item["at"]["N"]) for item in stored) == [
        (f"e{n:05d}", str(n)) for n in range(DAYS_ITEMS)]
    suffixes = collections.Counter(item["day"]["S"].removeprefix("20160226_") for item in stored)
    assert set(suffixes) == {str(shard) for shard in range(1, 9)}  # one suffix each, in 1..8
    assert all(set(item) == {"event_id", "day", "at"} for item in stored)
    listed = [item.at for item in day_models.AdoptedDays.by_day.query("20160226")]
    assert listed == list(range(DAYS_ITEMS))


def test_verify_exits_1_and_names_the_differing_key(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, models: ModuleType
) -> None:
    source_table = models.Readings.Meta.table_name
    dynamodb.put_item(TableName=source_table, Item={"sensor": {"S": "a"}, "at": {"N": "1"}, "value": {"S": "x"}})
    dynamodb.put_item(TableName=source_table, Item={"sensor": {"S": "b"}, "at": {"N": "1"}, "value": {"S": "y"}})
    copied = run_cli("migrate", "copy", project.spec("Readings"), project.spec("HashedReadings"),
                     "--checkpoint-table", project.table("checkpoints"), cwd=project.directory, env=cli_env)
    assert copied.returncode == 0, copied.stderr
    assert "read 2, written 2" in copied.stdout
    dynamodb.put_item(TableName=source_table, Item={"sensor": {"S": "b"}, "at": {"N": "2"}, "value": {"S": "z"}})
    verified = run_cli("migrate", "verify", project.spec("Readings"), project.spec("HashedReadings"), "--json",
                       cwd=project.directory, env=cli_env)
    assert verified.returncode == 1
    result = json.loads(verified.stdout)
    assert result["differences"] == [{"key": "b", "source_count": 2, "target_count": 1}]


def test_dry_run_prints_the_plan_and_writes_nothing(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, models: ModuleType
) -> None:
    _fill(dynamodb, models.Readings.Meta.table_name)
    planned = run_cli("migrate", "copy", project.spec("Readings"), project.spec("RandomReadings"), "--dry-run",
                      "--checkpoint-table", project.table("checkpoints"), cwd=project.directory, env=cli_env)
    assert planned.returncode == 0, planned.stderr
    assert "dry run:" in planned.stdout
    assert "table:      5000 items" in planned.stdout  # DescribeTable
    assert "estimate:   5000 items" in planned.stdout
    assert "writes:     5000 copies, 0 moves" in planned.stdout  # every sampled item is copied
    assert "deletes:    nothing" in planned.stdout
    assert _raw(dynamodb, models.RandomReadings.Meta.table_name) == []
    assert project.table("checkpoints") not in dynamodb.list_tables()["TableNames"]


def test_help_names_the_checkpoint_table(project: ModelsModule, cli_env: dict[str, str]) -> None:
    shown = run_cli("migrate", "--help", cwd=project.directory, env=cli_env)
    assert shown.returncode == 0
    assert "pynamodb_sharding_migrations" in shown.stdout
    for command in ("copy", "reshard", "compact", "reindex", "verify"):
        assert command in shown.stdout


def test_reshard_of_a_plain_model_is_refused(project: ModelsModule, cli_env: dict[str, str],
                                             models: ModuleType) -> None:
    refused = run_cli("migrate", "reshard", project.spec("Readings"), cwd=project.directory, env=cli_env)
    assert refused.returncode == 2
    assert "is not a sharded model" in refused.stderr


def test_segments_run_one_by_one_as_a_scheduler_would(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, models: ModuleType
) -> None:
    """Four ``--segment I --total-segments 4`` runs (a Kubernetes indexed Job) copy everything once;
    ``--json`` prints progress lines, then the report, whose segments count what the table says."""
    source_table, target_table = models.Readings.Meta.table_name, models.HashedReadings.Meta.table_name
    _put(dynamodb, source_table,
         [{"sensor": {"S": f"k{n % 3}"}, "at": {"N": str(n)}, "value": {"S": str(n)}} for n in range(300)])
    done = []
    for segment in range(4):
        ran = run_cli("migrate", "copy", project.spec("Readings"), project.spec("HashedReadings"),
                      "--segment", str(segment), "--total-segments", "4", "--page-size", "40", "--json",
                      "--checkpoint-table", project.table("checkpoints"), cwd=project.directory, env=cli_env)
        assert ran.returncode == 0, ran.stderr
        events = [json.loads(line) for line in ran.stdout.splitlines()]
        assert {event["event"] for event in events[:-1]} == {"progress"}
        assert events[-1]["event"] == "report"
        done.append(events[-1]["segments_done"])
    assert done == [1, 2, 3, 4]
    assert len(_raw(dynamodb, target_table)) == 300
    verified = run_cli("migrate", "verify", project.spec("Readings"), project.spec("HashedReadings"),
                       cwd=project.directory, env=cli_env)
    assert verified.returncode == 0, verified.stdout


def test_reshard_dry_run_then_run(project: ModelsModule, cli_env: dict[str, str], dynamodb: Any,
                                  models: ModuleType) -> None:
    """``reshard`` after 8 -> 16: the dry run plans moves and deletes and writes nothing; the run
    puts every item on its 16-shard md5 key."""
    for n in range(200):
        models.HashedReadings(KEYS[n % 5], n, value=str(n)).save()
    table = models.HashedReadings.Meta.table_name
    before = sorted(item["sensor"]["S"] + "/" + item["at"]["N"] for item in _raw(dynamodb, table))
    common = ("--checkpoint-table", project.table("checkpoints"))
    planned = run_cli("migrate", "reshard", project.spec("Hashed16Readings"), "--dry-run", *common,
                      cwd=project.directory, env=cli_env)
    assert planned.returncode == 0, planned.stderr
    assert "0 copies" in planned.stdout
    assert "old copies, each in the transaction that puts its new copy" in planned.stdout
    assert sorted(item["sensor"]["S"] + "/" + item["at"]["N"] for item in _raw(dynamodb, table)) == before
    ran = run_cli("migrate", "reshard", project.spec("Hashed16Readings"), "--workers", "2", *common,
                  cwd=project.directory, env=cli_env)
    assert ran.returncode == 0, ran.stderr
    stored = _raw(dynamodb, table)
    assert len(stored) == 200
    from pynamodb_sharding._strategies import md5_shard

    for item in stored:
        logical, _, shard = item["sensor"]["S"].rpartition("_")
        assert int(shard) == md5_shard(f"{logical}{item['at']['N']}".encode(), 16)
