"""No DynamoDB Local outlives an interrupted session: Ctrl-C and even `kill -9` of pytest.

Ctrl-C (SIGINT) interrupts pytest, which tears the session fixture down; `kill -9` runs no
Python code at all, so the watchdog process started beside the server stops it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugin.local_servers import dynamodb_local_pids

RECORD_THEN = '''
import os, pathlib, signal, time

def test_records_then_{how}(dynamodb_local):
    assert dynamodb_local.pid in {{int(p.name) for p in pathlib.Path("/proc").iterdir() if p.name.isdigit()}}
    pathlib.Path("server.pid").write_text(str(dynamodb_local.pid))
    {action}
'''


def wait_until_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid in dynamodb_local_pids():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.usefixtures("sigint_delivered")
def test_ctrl_c_stops_the_server(inner_session: pytest.Pytester) -> None:
    inner_session.makepyfile(
        test_inner=RECORD_THEN.format(how="interrupts", action="os.kill(os.getpid(), signal.SIGINT); time.sleep(30)")
    )
    result = inner_session.runpytest_subprocess("-p", "no:cacheprovider")

    assert result.ret == pytest.ExitCode.INTERRUPTED
    pid = int(Path(inner_session.path, "server.pid").read_text())
    assert pid not in dynamodb_local_pids()


def test_kill_9_of_pytest_stops_the_server(inner_session: pytest.Pytester) -> None:
    inner_session.makepyfile(test_inner=RECORD_THEN.format(how="sleeps", action="time.sleep(120)"))
    pid_file = Path(inner_session.path, "server.pid")
    inner = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=inner_session.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert inner.poll() is None, "the inner session ended before its server started"
            assert time.monotonic() < deadline, "the inner session did not start its server in 60 s"
            time.sleep(0.1)
        pid = int(pid_file.read_text())
        assert pid in dynamodb_local_pids()
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.wait()

    assert wait_until_gone(pid, timeout=20), f"DynamoDB Local (pid {pid}) survived its pytest"
