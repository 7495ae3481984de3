"""``pynamodb-sharding local install|serve`` install and run the real DynamoDB Local.

``serve`` is run as a user would: the endpoint it prints answers real API calls, Ctrl-C
stops it, and its Java process is gone afterwards. Without Java on PATH, or on a port another
server holds, it fails in one line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import boto3
import pytest

from .console import console_script, run_cli


def test_install_prints_a_directory_holding_the_server(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """The printed directory holds DynamoDBLocal.jar and its native libraries."""
    result = run_cli("local", "install", cwd=tmp_path, env=cli_env, timeout=600)
    assert result.returncode == 0, result.stderr
    match = re.fullmatch(r"DynamoDB Local installed in (\S+)\n", result.stdout)
    assert match is not None, result.stdout
    directory = Path(match[1])
    assert (directory / "DynamoDBLocal.jar").is_file()
    assert (directory / "DynamoDBLocal_lib").is_dir()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.usefixtures("sigint_delivered")
def test_serve_answers_and_stops_on_ctrl_c(tmp_path: Path, cli_env: dict[str, str], dynamodb_local: Any) -> None:
    """The printed endpoint serves ListTables; SIGINT stops the command and its Java process."""
    env = {name: value for name, value in cli_env.items() if name != "DYNAMODB_LOCAL_ENDPOINT"}
    process = subprocess.Popen(
        [str(console_script()), "local", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.search(r"running at (http://127\.0\.0\.1:\d+) \(pid (\d+)\)", first)
        assert match is not None, first + process.stderr.read() if process.stderr else first
        endpoint, java_pid = match[1], int(match[2])
        client = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name=dynamodb_local.region,
            aws_access_key_id=dynamodb_local.aws_access_key_id,
            aws_secret_access_key=dynamodb_local.aws_secret_access_key,
        )
        assert client.list_tables()["TableNames"] == []
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "stopped" in out
    deadline = time.monotonic() + 10
    while _pid_alive(java_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _pid_alive(java_pid)


def test_serve_without_java_is_one_line(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """No ``java`` on PATH: exit code 2 and one line saying what to install."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = run_cli("local", "serve", cwd=tmp_path, env={**cli_env, "PATH": str(empty)})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "openjdk-17-jdk-headless" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["cli", "module"])
def test_serve_on_a_port_in_use_fails_in_one_line_and_prints_no_endpoint(
        command: str, tmp_path: Path, cli_env: dict[str, str], dynamodb_local: Any) -> None:
    """``--port`` naming the port of a server already running (the test session's DynamoDB
    Local, which would answer in its place): exit code 2, one line naming the port, and neither
    the "running at" line nor the export lines someone would paste; no Java process left."""
    env = {name: value for name, value in cli_env.items() if name != "DYNAMODB_LOCAL_ENDPOINT"}
    port = urllib.parse.urlsplit(dynamodb_local.endpoint).port
    assert port is not None
    arguments = ["local", "serve", "--port", str(port)]
    if command == "cli":
        result = run_cli(*arguments, cwd=tmp_path, env=env, timeout=120)
    else:
        result = subprocess.run([sys.executable, "-m", "pynamodb_sharding.testing", *arguments[1:]], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=120, check=False)
    assert (2, "") == (result.returncode, result.stdout), result.stdout + result.stderr
    assert 1 == result.stderr.count("\n"), result.stderr
    assert f"error: port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "--port" in result.stderr
    assert "Traceback" not in result.stderr
