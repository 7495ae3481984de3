"""``pynamodb-sharding protocol MODULE:Model`` shows and stores the fleet protocol (issue 40).

Proves: ``tables create`` stores the model's declared protocol in the metadata table it creates
(the default: cached reads), which the command shows (``--json`` too); ``--store`` a change is
stored under way (the safer of both meanwhile, which a process of the model follows); a setting
or ``--immediately`` given without ``--store`` is a usage error; a second change while the
first is under way fails with the error's message; a table that stores none (0.2's) says so
(``--json`` prints ``null``), and ``--store --immediately`` gives it one in force at once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .console import DYNAMIC_MODEL, ModelsModule, run_cli

PROTOCOL_ITEM = {"partition_key": {"S": "#protocol"}, "model": {"S": "#protocol"}}


@pytest.mark.usefixtures("user_credentials")
def test_show_and_store_the_fleet_protocol(project: ModelsModule, cli_env: dict[str, str]) -> None:
    project.append(DYNAMIC_MODEL)
    spec = project.spec("HotLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0

    shown = run_cli("protocol", spec, cwd=project.directory, env=cli_env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"{spec}: cached reads, cache_ttl 10 s, clock_skew 1 s, replication_lag 2 s"
    record = json.loads(run_cli("protocol", spec, "--json", cwd=project.directory, env=cli_env).stdout)
    assert record["current"] == {"cache_ttl": 10.0, "cached_reads": True, "clock_skew": 1.0, "replication_lag": 2.0}
    assert record["previous"] is None  # stored when the table was created: in force at once

    for option in (("--cache-ttl", "7"), ("--immediately",)):
        refused = run_cli("protocol", spec, *option, cwd=project.directory, env=cli_env)
        assert refused.returncode != 0
        assert "add --store" in refused.stderr

    stored = run_cli("protocol", spec, "--store", "--cache-ttl", "7", cwd=project.directory, env=cli_env)
    assert stored.returncode == 0, stored.stderr
    assert "cached reads, cache_ttl 7 s, clock_skew 1 s" in stored.stdout
    assert "changing: in force everywhere from" in stored.stdout
    record = json.loads(run_cli("protocol", spec, "--json", cwd=project.directory, env=cli_env).stdout)
    assert record["current"] == {"cache_ttl": 7.0, "cached_reads": True, "clock_skew": 1.0, "replication_lag": 2.0}
    assert record["previous"]["cache_ttl"] == 10.0

    again = run_cli("protocol", spec, "--store", "--fresh-reads", cwd=project.directory, env=cli_env)
    assert again.returncode != 0
    assert "is under way until epoch" in again.stderr

    models = project.load()
    in_force = models.HotLog.shards.strategy.protocol_in_force()
    assert in_force.stored
    assert (in_force.cached_reads, in_force.cache_ttl, in_force.delay) == (True, 7.0, 11.0)  # the safer of both


@pytest.mark.usefixtures("user_credentials")
def test_a_table_storing_none_gets_one(project: ModelsModule, cli_env: dict[str, str], dynamodb: Any) -> None:
    project.append(DYNAMIC_MODEL)
    spec = project.spec("HotLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    dynamodb.delete_item(TableName=project.table("audit_log_shards"), Key=PROTOCOL_ITEM)  # as 0.2 left it

    shown = run_cli("protocol", spec, cwd=project.directory, env=cli_env)
    assert shown.returncode == 0, shown.stderr
    assert "no fleet protocol stored" in shown.stdout
    assert run_cli("protocol", spec, "--json", cwd=project.directory, env=cli_env).stdout.strip() == "null"

    stored = run_cli("protocol", spec, "--store", "--immediately", cwd=project.directory, env=cli_env)
    assert stored.returncode == 0, stored.stderr
    assert "changing" not in stored.stdout  # no process runs yet: in force at once
    record = json.loads(run_cli("protocol", spec, "--json", cwd=project.directory, env=cli_env).stdout)
    assert record["current"]["cached_reads"] is True
    assert record["previous"] is None
