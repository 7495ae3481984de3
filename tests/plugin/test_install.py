"""Installing from npm into an empty cache is atomic: two installers at once leave one whole install.

Two `python -m pynamodb_sharding.testing install` processes race on an empty cache; both
succeed and print the same directory, which holds the jar, its libraries and the compiled
loopback launcher, and no temporary directory is left behind (nor one abandoned earlier by
an install that was killed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def test_two_concurrent_installs_leave_one_complete_install(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    abandoned = tmp_path / "pynamodb-sharding" / ".installing-killed"  # by an install killed mid-way
    abandoned.mkdir(parents=True)
    two_hours_ago = time.time() - 7200
    os.utime(abandoned, (two_hours_ago, two_hours_ago))
    installers = [
        subprocess.Popen(
            [sys.executable, "-m", "pynamodb_sharding.testing", "install"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(2)
    ]
    outputs = [installer.communicate(timeout=300) for installer in installers]

    assert [installer.returncode for installer in installers] == [0, 0], outputs
    printed = {out.strip() for out, _ in outputs}
    root = tmp_path / "pynamodb-sharding"
    assert {str(root / "dynamodb-local-11.1.0")} == printed
    installed = root / "dynamodb-local-11.1.0"
    assert (installed / "DynamoDBLocal.jar").is_file()
    assert any((installed / "DynamoDBLocal_lib").glob("*.jar"))
    launchers = list((root / "launchers").glob("*/LoopbackDynamoDBLocal.class"))
    assert len(launchers) == 1
    leftovers = [p.name for p in root.iterdir() if p.name.startswith(".")]
    leftovers += [p.name for p in (root / "launchers").iterdir() if p.name.startswith(".")]
    assert leftovers == []
