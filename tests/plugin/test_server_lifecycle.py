"""The `dynamodb_local` fixture starts one loopback-only server per session and stops it after.

Two tests of one inner session record what they see: the same endpoint and pid, exactly one
DynamoDB Local process started by that session, listening on 127.0.0.1 only. After the
session no process with that pid is left.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugin.local_servers import dynamodb_local_pids

INNER = '''
import json, os, pathlib

def loopback_listeners(port):
    """Local addresses of the sockets listening on `port` (hex, as in /proc/net/tcp*)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                found.append(address)
    return found

def children_running_dynamodb_local():
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"DynamoDBLocal" in cmdline:
            pids.append(int(entry.name))
    return pids

def record(name, server):
    port = int(server.endpoint.rsplit(":", 1)[1])
    pathlib.Path(name).write_text(json.dumps({
        "endpoint": server.endpoint,
        "pid": server.pid,
        "children": children_running_dynamodb_local(),
        "listeners": loopback_listeners(port),
    }))

def test_first(dynamodb_local):
    record("first.json", dynamodb_local)

def test_second(dynamodb_local):
    record("second.json", dynamodb_local)
'''

# 127.0.0.1 as /proc/net/tcp and /proc/net/tcp6 (IPv4-mapped) spell it.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


def test_one_loopback_server_per_session_and_none_left_after(inner_session: pytest.Pytester) -> None:
    inner_session.makepyfile(test_inner=INNER)
    result = inner_session.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    first = json.loads(Path(inner_session.path, "first.json").read_text())
    second = json.loads(Path(inner_session.path, "second.json").read_text())

    # One server for the whole session.
    assert first["endpoint"] == second["endpoint"]
    assert first["pid"] == second["pid"]
    assert [first["pid"]] == first["children"] == second["children"]

    # Bound to the loopback interface only.
    assert first["endpoint"].startswith("http://127.0.0.1:")
    assert first["listeners"], "nothing listened on the server's port"
    assert set(first["listeners"]) <= LOOPBACK

    # Stopped with the session.
    assert first["pid"] not in dynamodb_local_pids()
    assert not Path(f"/proc/{first['pid']}").exists()
