"""``pynamodb-sharding tables create|delete`` manage a model's table and its companions.

Through the installed console script against DynamoDB Local: on-demand billing by default,
the Meta's provisioned capacity when it sets one, ``--dry-run`` touches nothing, and
``--endpoint``/``--region`` override the model's Meta.
"""

from __future__ import annotations

from typing import Any

from .console import DYNAMIC_MODEL, ModelsModule, run_cli


def _tables(dynamodb: Any, prefix: str) -> set[str]:
    names: set[str] = set()
    for page in dynamodb.get_paginator("list_tables").paginate():
        names.update(name for name in page["TableNames"] if name.startswith(prefix))
    return names


def _billing_mode(dynamodb: Any, table: str) -> str:
    description = dynamodb.describe_table(TableName=table)["Table"]
    return str(description.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED"))


def test_create_makes_an_on_demand_table_and_is_idempotent(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any
) -> None:
    """The table is created active and on-demand; a second run reports it exists."""
    spec = project.spec("AuditLog")
    table = project.table("audit_log")
    first = run_cli("tables", "create", spec, cwd=project.directory, env=cli_env)
    assert first.returncode == 0, first.stderr
    assert f"created  table '{table}'" in first.stdout
    assert "on-demand" in first.stdout
    assert dynamodb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"
    assert _billing_mode(dynamodb, table) == "PAY_PER_REQUEST"

    second = run_cli("tables", "create", spec, cwd=project.directory, env=cli_env)
    assert second.returncode == 0, second.stderr
    assert f"exists   table '{table}'" in second.stdout


def test_create_keeps_provisioned_capacity_from_meta(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any
) -> None:
    """A Meta with capacity units gets a provisioned table with exactly those units."""
    result = run_cli("tables", "create", project.spec("Provisioned"), cwd=project.directory, env=cli_env)
    assert result.returncode == 0, result.stderr
    assert "provisioned 3 RCU / 2 WCU" in result.stdout
    throughput = dynamodb.describe_table(TableName=project.table("provisioned"))["Table"]["ProvisionedThroughput"]
    assert (throughput["ReadCapacityUnits"], throughput["WriteCapacityUnits"]) == (3, 2)


def test_create_and_delete_include_the_metadata_table(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any
) -> None:
    """A DynamicShards model's metadata table is created with it and deleted with it."""
    project.append(DYNAMIC_MODEL)
    spec = project.spec("HotLog")
    expected = {project.table("hot_log"), project.table("audit_log_shards")}

    dry = run_cli("tables", "create", spec, "--dry-run", cwd=project.directory, env=cli_env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("would create") == 2
    assert set() == _tables(dynamodb, project.prefix)

    created = run_cli("tables", "create", spec, cwd=project.directory, env=cli_env)
    assert created.returncode == 0, created.stderr
    assert created.stdout.count("created") == 2
    # The metadata table it created stores the model's declared fleet protocol.
    protocol_lines = [line for line in created.stdout.splitlines() if line.startswith("protocol ")]
    assert len(protocol_lines) == 1
    assert protocol_lines[0].startswith(f"protocol table '{project.table('audit_log_shards')}' at ")
    assert protocol_lines[0].endswith(": cached reads, cache_ttl 10 s, clock_skew 1 s, replication_lag 2 s")
    assert expected == _tables(dynamodb, project.prefix)
    assert _billing_mode(dynamodb, project.table("audit_log_shards")) == "PAY_PER_REQUEST"

    # A grown key's count, and another model's: the first outlives the table unless asked.
    for namespace in (project.table("hot_log"), "another_table"):
        dynamodb.put_item(TableName=project.table("audit_log_shards"), Item={
            "partition_key": {"S": "/hot"}, "model": {"S": namespace}, "number_of_shards": {"N": "4"},
            "last_updated": {"N": "1700000000"}, "shard_history": {"SS": ["1700000000:4"]}})
    kept = run_cli("tables", "delete", spec, "--keep-companions", cwd=project.directory, env=cli_env)
    assert kept.returncode == 0, kept.stderr
    assert {project.table("audit_log_shards")} == _tables(dynamodb, project.prefix)
    assert f"kept     the shard counts of HotLog ({project.table('hot_log')})" in kept.stdout
    assert "--delete-shard-counts deletes them" in kept.stdout
    cleaned = run_cli("tables", "delete", spec, "--keep-companions", "--delete-shard-counts",
                      cwd=project.directory, env=cli_env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert "deleted  1 shard count item(s) of HotLog" in cleaned.stdout
    left = dynamodb.scan(TableName=project.table("audit_log_shards"), ConsistentRead=True)["Items"]
    # The other model's count, and the table's fleet protocol record (no model's: it stays).
    assert ["#protocol", "another_table"] == sorted(item["model"]["S"] for item in left)

    deleted = run_cli("tables", "delete", spec, cwd=project.directory, env=cli_env)
    assert deleted.returncode == 0, deleted.stderr
    assert f"missing  table '{project.table('hot_log')}'" in deleted.stdout
    assert set() == _tables(dynamodb, project.prefix)


def test_delete_dry_run_deletes_nothing(project: ModelsModule, cli_env: dict[str, str], dynamodb: Any) -> None:
    """``--dry-run`` names the table it would delete and leaves it in place."""
    spec = project.spec("AuditLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    dry = run_cli("tables", "delete", spec, "--dry-run", cwd=project.directory, env=cli_env)
    assert dry.returncode == 0, dry.stderr
    assert f"would delete table '{project.table('audit_log')}'" in dry.stdout
    assert {project.table("audit_log")} == _tables(dynamodb, project.prefix)


def test_endpoint_and_region_options_override_meta(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any, dynamodb_local: Any
) -> None:
    """A model whose Meta names a dead endpoint and another region is created where asked."""
    spec = project.spec("Elsewhere")
    options = ("--endpoint", dynamodb_local.endpoint, "--region", dynamodb_local.region)
    result = run_cli("tables", "create", spec, *options, cwd=project.directory, env=cli_env)
    assert result.returncode == 0, result.stderr
    assert f"at {dynamodb_local.endpoint}" in result.stdout
    assert {project.table("elsewhere")} == _tables(dynamodb, project.prefix)


#: A time-partitioned model: monthly tables, 2 ahead, 1 past month kept, archived to a file.
PERIOD_MODEL = """

import json
from pathlib import Path

from pynamodb_sharding import TimePartitioned


def archive_to_file(table):
    with open(Path(__file__).with_name("archived.jsonl"), "a", encoding="utf-8") as out:
        out.write(json.dumps({{"period": table.period, "items": table.model.count(None)}}) + "\\n")


class UserLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("{prefix}_user_log.{{period}}", attribute="accessed_at", period="month",
                                     ahead=2, retention=1, archive=archive_to_file)
        host = HOST

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))
"""


def test_rotate_creates_ahead_archives_and_drops_and_its_dry_run_changes_nothing(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any
) -> None:
    project.append(PERIOD_MODEL)
    spec = project.spec("UserLog")
    table = project.table("user_log")
    first = run_cli("tables", "rotate", spec, "--now", "2016-01-20T00:00:00+00:00", cwd=project.directory, env=cli_env)
    assert first.returncode == 0, first.stderr
    assert {f"{table}.201601", f"{table}.201602", f"{table}.201603"} == _tables(dynamodb, project.prefix)
    assert first.stdout.count("done   create") == 3, first.stdout

    dry = run_cli("tables", "rotate", spec, "--now", "2016-04-02T00:00:00", "--dry-run",
                  cwd=project.directory, env=cli_env)
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stdout
    assert f"would  create    {table}.201606" in dry.stdout
    assert f"would  drop      {table}.201601" in dry.stdout
    assert f"would  drop      {table}.201602" in dry.stdout
    assert f"drop      {table}.201603" not in dry.stdout  # the previous month is kept (retention=1)
    assert {f"{table}.201601", f"{table}.201602", f"{table}.201603"} == _tables(dynamodb, project.prefix)
    assert not (project.directory / "archived.jsonl").exists()

    done = run_cli("tables", "rotate", spec, "--now", "2016-04-02T00:00:00", cwd=project.directory, env=cli_env)
    assert done.returncode == 0, done.stderr
    assert {f"{table}.{month}" for month in ("201603", "201604", "201605", "201606")} == \
        _tables(dynamodb, project.prefix)
    archived = (project.directory / "archived.jsonl").read_text(encoding="utf-8").splitlines()
    assert [line.split('"period": ')[1][:8] for line in archived] == ['"201601"', '"201602"']


def test_rotate_refuses_a_model_that_is_not_time_partitioned(
    project: ModelsModule, cli_env: dict[str, str]
) -> None:
    result = run_cli("tables", "rotate", project.spec("AuditLog"), cwd=project.directory, env=cli_env)
    assert result.returncode != 0
    assert "is not time-partitioned" in result.stderr
    assert "TimePartitioned(" in result.stderr


#: A time-partitioned model whose monthly tables follow a schedule (UTC), and a load function.
SCALED_MODEL = """

from pynamodb_sharding.capacity import TableLoad
from pynamodb_sharding._schedule import Schedule


def busy(table):
    return TableLoad(read=1.0, write=35.0)  # needs 50 write units at 70 %


class ScaledLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("{prefix}_scaled_log.{{period}}", attribute="accessed_at", period="month",
                                     capacity=Schedule({{"00:00-08:00": (2, 3), "08:00-24:00": (20, 10)}}))
        host = HOST
        read_capacity_units = 5
        write_capacity_units = 5

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))
"""


def _capacity(dynamodb: Any, table: str) -> tuple[int, int]:
    units = dynamodb.describe_table(TableName=table)["Table"]["ProvisionedThroughput"]
    return units["ReadCapacityUnits"], units["WriteCapacityUnits"]


def test_scale_sets_the_schedules_capacity_once_and_its_dry_run_changes_nothing(
    project: ModelsModule, cli_env: dict[str, str], dynamodb: Any
) -> None:
    project.append(PERIOD_MODEL + SCALED_MODEL)
    spec = project.spec("ScaledLog")
    table = f"{project.table('scaled_log')}.201602"
    morning = "2016-02-26T09:00:00+00:00"
    assert run_cli("tables", "rotate", spec, "--now", morning, cwd=project.directory, env=cli_env).returncode == 0
    assert _capacity(dynamodb, table) == (5, 5)

    dry = run_cli("tables", "scale", spec, "--now", morning, "--dry-run", cwd=project.directory, env=cli_env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "ScaledLog: current period 201602, 08:00-24:00 UTC: 20 RCU / 10 WCU (dry run: nothing changed)",
        "load:  not measured (no load source): the schedule alone",
        f"would  scale     {table} (read 5 -> 20, write 5 -> 10)",
    ]
    assert _capacity(dynamodb, table) == (5, 5)

    done = run_cli("tables", "scale", spec, "--now", morning, cwd=project.directory, env=cli_env)
    assert done.returncode == 0, done.stderr
    assert f"done   scale     {table} (read 5 -> 20, write 5 -> 10)" in done.stdout
    assert _capacity(dynamodb, table) == (20, 10)
    again = run_cli("tables", "scale", spec, "--now", morning, cwd=project.directory, env=cli_env)
    assert again.stdout.splitlines()[-1] == f"nothing to do: {table} is at its capacity"

    night = run_cli("tables", "scale", spec, "--now", "2016-02-26T03:00:00+00:00", "--load",
                    f"{project.name}:busy", cwd=project.directory, env=cli_env)
    assert night.returncode == 0, night.stderr
    assert "load:  read 1.0 units/s, write 35.0 units/s" in night.stdout
    assert _capacity(dynamodb, table) == (2, 50)  # the night's 2 reads; 35 / 0.7 writes

    plain = run_cli("tables", "scale", project.spec("UserLog"), cwd=project.directory, env=cli_env)
    assert plain.returncode == 2
    assert "declares no capacity schedule" in plain.stderr
    bad_load = run_cli("tables", "scale", spec, "--load", f"{project.name}:nothing", cwd=project.directory,
                       env=cli_env)
    assert bad_load.returncode == 2
    assert "has no function 'nothing'" in bad_load.stderr


REPLICATED_MODEL = """

class AuditLogWithReplicas(ShardedModel):
    class Meta:
        table_name = "{prefix}_audit_log"
        host = HOST

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    shards = Sharding(HashedShards(4), read_replicas=2)
"""


def test_add_replicas_to_an_existing_table(project: ModelsModule, cli_env: dict[str, str], dynamodb: Any) -> None:
    """``tables add-replicas`` adds the declared replicas to a table created without them, waits
    until they are ACTIVE, and reports a complete table after; ``--dry-run`` sends nothing."""
    project.append(REPLICATED_MODEL)
    table = project.table("audit_log")
    created = run_cli("tables", "create", project.spec("AuditLog"), cwd=project.directory, env=cli_env)
    assert created.returncode == 0, created.stderr
    spec = project.spec("AuditLogWithReplicas")

    dry = run_cli("tables", "add-replicas", spec, "--dry-run", cwd=project.directory, env=cli_env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [f"would add read-replica-{n} to table '{table}' at {cli_host(project)}"
                                       for n in (1, 2)]
    assert "GlobalSecondaryIndexes" not in dynamodb.describe_table(TableName=table)["Table"]

    added = run_cli("tables", "add-replicas", spec, "--poll", "0.1", cwd=project.directory, env=cli_env)
    assert added.returncode == 0, added.stderr
    assert [line.split(" to ")[0] for line in added.stdout.splitlines()] == [
        "added    read-replica-1", "added    read-replica-2"]
    indexes = dynamodb.describe_table(TableName=table)["Table"]["GlobalSecondaryIndexes"]
    assert {index["IndexName"]: index["IndexStatus"] for index in indexes} == {
        "read-replica-1": "ACTIVE", "read-replica-2": "ACTIVE"}

    again = run_cli("tables", "add-replicas", spec, cwd=project.directory, env=cli_env)
    assert again.returncode == 0, again.stderr
    assert "has its 2 read replica(s)" in again.stdout


def test_add_replicas_of_a_model_without_them_is_refused(project: ModelsModule, cli_env: dict[str, str]) -> None:
    result = run_cli("tables", "add-replicas", project.spec("AuditLog"), cwd=project.directory, env=cli_env)
    assert result.returncode != 0
    assert "declares no read replicas; add read_replicas=N to its Sharding(...)" in result.stderr


def cli_host(project: ModelsModule) -> str:
    return str(project.load().HOST)
