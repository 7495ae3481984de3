"""Where DynamoDB Local is really installed and which DynamoDB Local processes run, for the plugin tests."""

from __future__ import annotations

from pathlib import Path

from pynamodb_sharding.testing.local import cache_root

__all__ = ["REAL_CACHE_HOME", "dynamodb_local_pids"]

# pytester points HOME at a temporary directory; the real cache is found before it does.
REAL_CACHE_HOME = str(cache_root().parent)


def dynamodb_local_pids() -> set[int]:
    """The process ids of every running DynamoDB Local (any command line naming DynamoDBLocal)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"DynamoDBLocal" in cmdline and b"java" in cmdline:
            pids.add(int(entry.name))
    return pids
