"""``pynamodb-sharding status MODULE:Model KEY`` reports a key's shards as they are in the table.

Items are written through the model in this process; the command, run through the installed
console script, must report the strategy, the count and exactly the items each physical key
holds (checked against where each saved item says it lives), and the read cost of a query.
"""

from __future__ import annotations

import collections
import re
from typing import Any

import pytest

from .console import DYNAMIC_MODEL, PROACTIVE_MODEL, ModelsModule, run_cli


def _shard_rows(stdout: str) -> dict[int, tuple[str, int, int]]:
    rows = {}
    for match in re.finditer(r"^\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)$", stdout, flags=re.MULTILINE):
        rows[int(match[1])] = (match[2], int(match[3]), int(match[4]))
    return rows


@pytest.mark.usefixtures("user_credentials")
def test_status_counts_the_items_of_every_shard(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """Per-shard item counts equal where the saved items landed; other keys are not counted."""
    spec = project.spec("AuditLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    hot = "/shared/firetvGen2.txt"
    landed: collections.Counter[int] = collections.Counter()
    for n in range(40):
        item = models.AuditLog(hot, accessed_at=n, user_id=f"u{n % 3}")
        item.save()
        landed[item.shards] += 1
    models.AuditLog("/other/file", accessed_at=1, user_id="u").save()

    result = run_cli("status", spec, hot, cwd=project.directory, env=cli_env)

    assert result.returncode == 0, result.stderr
    assert "strategy:       HashedShards(4)" in result.stdout
    assert "shard count:    4" in result.stdout
    expected = {shard: (f"{hot}_{shard}", landed[shard], 1) for shard in range(1, 5)}
    assert expected == _shard_rows(result.stdout)
    assert re.search(r"^\s+total\s+40\s+4$", result.stdout, flags=re.MULTILINE), result.stdout
    assert "full query:     4 requests (4 shards, 4 pages)" in result.stdout


def test_status_of_an_unwritten_key_shows_empty_shards(
    project: ModelsModule, cli_env: dict[str, str], dynamodb_local: Any
) -> None:
    """A key never written has every shard at zero, and the --endpoint override reaches it."""
    spec = project.spec("Elsewhere")
    options = ("--endpoint", dynamodb_local.endpoint, "--region", dynamodb_local.region)
    assert run_cli("tables", "create", spec, *options, cwd=project.directory, env=cli_env).returncode == 0
    result = run_cli("status", spec, "nobody", *options, cwd=project.directory, env=cli_env)
    assert result.returncode == 0, result.stderr
    assert {shard: (f"nobody_{shard}", 0, 1) for shard in (1, 2, 3)} == _shard_rows(result.stdout)


@pytest.mark.usefixtures("user_credentials")
def test_status_of_a_dynamic_key_shows_its_history(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """After a growth the count, both history entries and the metadata read are reported."""
    project.append(DYNAMIC_MODEL)
    spec = project.spec("HotLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    for n in range(5):
        models.HotLog("hot", accessed_at=n).save()
    assert models.HotLog.shards.grow("hot") == 2
    for n in range(5, 12):
        models.HotLog("hot", accessed_at=n).save()

    result = run_cli("status", spec, "hot", cwd=project.directory, env=cli_env)

    assert result.returncode == 0, result.stderr
    assert "strategy:       DynamicShards(AuditLogShards" in result.stdout
    assert "shard count:    2" in result.stdout
    assert re.search(r"^history:\s+1 from \d{4}-\d\d-\d\d [\d:]+ UTC, 2 from ", result.stdout, re.MULTILINE)
    rows = _shard_rows(result.stdout)
    assert sorted(rows) == [1, 2]
    assert sum(items for _, items, _ in rows.values()) == 12
    assert rows[1][1] >= 5  # everything before the growth went to shard 1
    assert "full query:     3 requests (2 shards, 2 pages + 1 metadata read)" in result.stdout


@pytest.mark.usefixtures("user_credentials")
def test_status_without_a_key_lists_keys_hottest_first(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """The heat report: every key with a metadata item, most shards first, as text and JSON."""
    import json

    project.append(DYNAMIC_MODEL)
    spec = project.spec("HotLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    for key in ("warm", "hot", "cold"):
        models.HotLog(key, accessed_at=1).save()
    models.HotLog.shards.grow("hot")
    models.HotLog.shards.grow("hot")  # 4 shards
    models.HotLog.shards.grow("warm")  # 2 shards

    result = run_cli("status", spec, cwd=project.directory, env=cli_env)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^table\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+-\s+-\s+\d{4}-", result.stdout, flags=re.MULTILINE)
    # "cold" never grew: it has no metadata item, so no row.
    assert rows == [("hot", "4", "4", "3"), ("warm", "2", "2", "2")]

    as_json = run_cli("status", spec, "--json", "--top", "2", cwd=project.directory, env=cli_env)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert [(row["key"], row["count"], [entry["count"] for entry in row["history"]]) for row in report] == [
        ("hot", 4, [1, 2, 4]), ("warm", 2, [1, 2]),
    ]

    one = json.loads(run_cli("status", spec, "hot", "--json", cwd=project.directory, env=cli_env).stdout)
    assert (one["shard_count"], one["items"], len(one["shards"])) == (4, 1, 4)


@pytest.mark.usefixtures("user_credentials")
def test_the_heat_report_shows_the_write_rate_and_the_headroom(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """Proactive growth: the rate the writers reported and the units/s left before the next
    growth (count x 0.5 x 100 - rate), hottest by rate first; a key's status shows its ceiling."""
    import json

    project.append(DYNAMIC_MODEL + PROACTIVE_MODEL)
    spec = project.spec("FastLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    namespace = models.FastLog.Meta.table_name
    store = models.FastLog.shards.strategy.store
    now = models.FastLog.shards.strategy.clock()
    for key in ("busy", "quiet"):
        models.FastLog(key, accessed_at=0).save()
        # A writer creates the item of a key it reports a rate for (a cold key has none).
        store.create(namespace, key, 1, now, owner="FastLog.shards")
    store.report_writes(namespace, "busy", 1200.0, now, 60.0, owner="FastLog.shards")  # 20 units/s
    store.report_writes(namespace, "quiet", 300.0, now, 60.0, owner="FastLog.shards")  # 5 units/s

    result = run_cli("status", spec, cwd=project.directory, env=cli_env)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^table\s+(\S+)\s+1\s+1\s+1\s+(\S+)\s+(\S+)\s+\d{4}-", result.stdout, flags=re.MULTILINE)
    assert rows == [("busy", "20.0", "30.0"), ("quiet", "5.0", "45.0")]
    report = json.loads(run_cli("status", spec, "--json", cwd=project.directory, env=cli_env).stdout)
    assert [(row["key"], row["write_rate"], row["headroom"]) for row in report] == [
        ("busy", 20.0, 30.0), ("quiet", 5.0, 45.0),
    ]

    one = run_cli("status", spec, "busy", cwd=project.directory, env=cli_env)
    assert "ceiling:        100 write units/s (the table reports no warm throughput)" in one.stdout


LEGACY_MODEL = """

class PlainSensor(Model):
    class Meta:
        table_name = "{prefix}_sensors"
        host = HOST

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class Sensor(ShardedModel):
    \"\"\"The same table adopted in place: bare keys are read until reshard moves them.\"\"\"

    class Meta:
        table_name = "{prefix}_sensors"
        host = HOST

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8), legacy_unsharded=True)
"""


@pytest.mark.usefixtures("user_credentials")
def test_status_of_a_legacy_key_shows_the_bare_key_apart(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """Under RandomShards(8) the bare key is not a ninth shard nor "shard -1": the shard rows
    are 1..8, and a separate line says how many items are still unsharded."""
    import json

    project.append(LEGACY_MODEL)
    spec = project.spec("Sensor")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    for n in range(5):
        models.PlainSensor("sensor", n).save()  # the table before adoption
    landed: collections.Counter[int] = collections.Counter()
    for n in range(5, 17):
        item = models.Sensor("sensor", n)
        item.save()
        landed[item.shards] += 1

    result = run_cli("status", spec, "sensor", cwd=project.directory, env=cli_env)

    assert result.returncode == 0, result.stderr
    assert "-1" not in result.stdout
    assert {shard: (f"sensor_{shard}", landed[shard], 1) for shard in range(1, 9)} == _shard_rows(result.stdout)
    assert re.search(r"^\s+total\s+12\s+8$", result.stdout, flags=re.MULTILINE), result.stdout
    assert ("unsharded (bare key): 5 items under 'sensor' (1 page; reads cover them until "
            "`pynamodb-sharding migrate reshard` moves them into shards)") in result.stdout
    assert "full query:     9 requests (8 shards and the bare key, 9 pages)" in result.stdout

    report = json.loads(run_cli("status", spec, "sensor", "--json", cwd=project.directory, env=cli_env).stdout)
    assert [shard["shard"] for shard in report["shards"]] == list(range(1, 9))
    assert report["unsharded"] == {"physical_key": "sensor", "items": 5, "pages": 1}
    assert (report["items"], report["query_requests"]) == (12, 9)


@pytest.mark.usefixtures("user_credentials")
def test_the_heat_report_puts_the_most_recent_change_first_among_equals(
    project: ModelsModule, cli_env: dict[str, str]
) -> None:
    """Keys of equal rate and equal count come most recent change first, as cli.rst says: a key
    shrunk from 4 to 2 (reads still cover 4) before another grew to 2 comes after it."""
    import json

    project.append(DYNAMIC_MODEL)
    spec = project.spec("HotLog")
    assert run_cli("tables", "create", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    for key in ("shrunk", "grown"):
        models.HotLog(key, accessed_at=1).save()
    models.HotLog.shards.grow("shrunk")
    models.HotLog.shards.grow("shrunk")
    models.HotLog.shards.shrink("shrunk", to=2)  # count 2, reads cover 4: the older change
    models.HotLog.shards.grow("grown")  # count 2: the most recent change

    report = json.loads(run_cli("status", spec, "--json", cwd=project.directory, env=cli_env).stdout)
    assert [(row["key"], row["count"], row["shards_read"]) for row in report] == [
        ("grown", 2, 2), ("shrunk", 2, 4),
    ]
    assert report[0]["last_change"] > report[1]["last_change"]
    text = run_cli("status", spec, cwd=project.directory, env=cli_env).stdout
    assert re.findall(r"^table\s+(\S+)\s+2\s+", text, flags=re.MULTILINE) == ["grown", "shrunk"]


#: A time-partitioned model: monthly tables, two shards per key.
PERIOD_MODEL = """

from pynamodb_sharding import TimePartitioned


class UserLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("{prefix}_user_log.{{period}}", attribute="accessed_at", period="month")
        host = HOST

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))
"""


@pytest.mark.usefixtures("user_credentials")
def test_status_of_a_time_partitioned_key_counts_one_period(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """``--period`` names the table the key is counted in; without it, the current period's.
    A period that is not one, or whose table is missing, exits 2 naming the fix."""
    import json
    import time

    project.append(PERIOD_MODEL)
    spec = project.spec("UserLog")
    assert run_cli("tables", "rotate", spec, cwd=project.directory, env=cli_env).returncode == 0
    models = project.load()
    models.UserLog.period_model("201602").create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    landed: collections.Counter[int] = collections.Counter()
    for second in range(5):
        item = models.UserLog("u1", accessed_at=1456473600 + second)  # 2016-02-26
        item.save()
        landed[item.shards] += 1
    models.UserLog("u1", accessed_at=int(time.time())).save()  # the current period
    models.UserLog("u2", accessed_at=1456473600).save()

    february = run_cli("status", spec, "u1", "--period", "201602", cwd=project.directory, env=cli_env)
    assert february.returncode == 0, february.stderr
    assert f"table '{project.table('user_log')}.201602'" in february.stdout
    assert {shard: ("u1_" + str(shard), landed[shard], 1) for shard in (1, 2)} == _shard_rows(february.stdout)

    current = json.loads(run_cli("status", spec, "u1", "--json", cwd=project.directory, env=cli_env).stdout)
    period = models.UserLog.Meta.table_name.current()
    assert current["table"].startswith(f"table '{project.table('user_log')}.{period}'")
    assert current["items"] == 1

    for bad, message in (("2016-02", "is not a month period"), ("201501", "does not exist")):
        refused = run_cli("status", spec, "u1", "--period", bad, cwd=project.directory, env=cli_env)
        assert refused.returncode == 2
        assert message in refused.stderr
        assert "Traceback" not in refused.stderr


#: Monthly tables of which rotation keeps the current one, the next and one past month.
ROTATED_MODEL = """

from pynamodb_sharding import TimePartitioned


class RotatedLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("{prefix}_rotated_log.{{period}}", attribute="accessed_at", period="month",
                                     ahead=1, retention=1)
        host = HOST

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))
"""


@pytest.mark.usefixtures("user_credentials")
def test_status_of_a_missing_period_says_why_it_is_missing(project: ModelsModule, cli_env: dict[str, str]) -> None:
    """The table of a period rotation dropped (older than the retention) is not one that rotate
    creates: the message says it was dropped; a period beyond ``ahead`` names ``--ahead``; a
    past period within the retention was deleted or never created."""
    project.append(ROTATED_MODEL)
    spec = project.spec("RotatedLog")
    models = project.load()
    models.RotatedLog.period_model("201602").create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    rotated = run_cli("tables", "rotate", spec, cwd=project.directory, env=cli_env)
    assert rotated.returncode == 0, rotated.stderr
    assert not models.RotatedLog.period_model("201602").exists()  # older than the retention: dropped
    declared = models.RotatedLog.Meta.table_name
    current = declared.current()

    def refused(period: str) -> str:
        result = run_cli("status", spec, "u1", "--period", period, cwd=project.directory, env=cli_env)
        assert (2, "") == (result.returncode, result.stdout), result.stdout + result.stderr
        assert 1 == result.stderr.count("\n"), result.stderr
        assert f"{project.table('rotated_log')}.{period}' at " in result.stderr
        assert "does not exist" in result.stderr
        return result.stderr

    dropped = refused("201602")
    assert "201602 is older than the 1 past months TimePartitioned(retention=1) keeps" in dropped
    assert "rotation dropped its table" in dropped
    assert "current and coming periods" not in dropped
    later = refused(declared.after(current, 3))
    assert f"pynamodb-sharding tables rotate {spec} --ahead 3" in later
    assert "TimePartitioned(ahead=1)" in later
    assert "deleted or never created" in refused(declared.after(current, -1))
