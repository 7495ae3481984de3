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
    assert expected == _tables(dynamodb, project.prefix)
    assert _billing_mode(dynamodb, project.table("audit_log_shards")) == "PAY_PER_REQUEST"

    kept = run_cli("tables", "delete", spec, "--keep-companions", cwd=project.directory, env=cli_env)
    assert kept.returncode == 0, kept.stderr
    assert {project.table("audit_log_shards")} == _tables(dynamodb, project.prefix)

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
