"""Where DynamoDB Local comes from: endpoint, then DYNAMODB_LOCAL_DIR, then the cache.

Lookups that start no server: the cache honours XDG_CACHE_HOME, a directory named by
DYNAMODB_LOCAL_DIR wins over the cache and must hold the jar, an endpoint given by
DYNAMODB_LOCAL_ENDPOINT is used as is, and one that does not answer is a clear error. The
command runs the loopback launcher, or, without javac, the plain jar with a warning.
"""

from __future__ import annotations

import os
import shlex
import socket
from pathlib import Path
from typing import Any

import pytest

from pynamodb_sharding.testing.local import (
    DIR_ENV,
    ENDPOINT_ENV,
    JAVA_OPTIONS,
    JAVA_OPTIONS_ENV,
    DynamoDBLocal,
    DynamoDBLocalError,
    Installation,
    ServerProcess,
    _dynamodb_client,
    cache_root,
    find_installation,
    java_options,
    running_dynamodb_local,
    server_command,
)


def fake_installation(directory: Path) -> Installation:
    (directory / "DynamoDBLocal_lib").mkdir(parents=True)
    (directory / "DynamoDBLocal.jar").write_bytes(b"not a real jar")
    return Installation(directory)


#: The JVM options the session's server was started with (read before clean_env unsets them).
SESSION_JAVA_OPTIONS = os.environ.get(JAVA_OPTIONS_ENV)
LAUNCHER_ENVS = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    monkeypatch.delenv(DIR_ENV, raising=False)
    for name in (JAVA_OPTIONS_ENV, *LAUNCHER_ENVS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_cache_honours_xdg_cache_home(tmp_path: Path) -> None:
    assert tmp_path / "cache" / "pynamodb-sharding" == cache_root()


def test_empty_cache_finds_nothing() -> None:
    assert find_installation() is None


def test_cached_installation_is_found(tmp_path: Path) -> None:
    cached = fake_installation(tmp_path / "cache" / "pynamodb-sharding" / "dynamodb-local-11.1.0")
    assert cached == find_installation()


def test_named_directory_wins_over_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_installation(tmp_path / "cache" / "pynamodb-sharding" / "dynamodb-local-11.1.0")
    named = fake_installation(tmp_path / "mine")
    monkeypatch.setenv(DIR_ENV, str(named.directory))
    assert named == find_installation()


def test_named_directory_without_the_jar_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    with pytest.raises(DynamoDBLocalError, match=r"does not hold DynamoDBLocal.jar .*point it at the directory"):
        find_installation()


def test_endpoint_is_used_without_starting_anything(
    dynamodb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENDPOINT_ENV, dynamodb_local.endpoint + "/")
    with running_dynamodb_local() as server:
        assert dynamodb_local.endpoint == server.endpoint
        assert server.pid is None


def test_endpoint_that_does_not_answer_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setenv(ENDPOINT_ENV, f"http://127.0.0.1:{port}")
    expected = r"does not answer ListTables .* unset DYNAMODB_LOCAL_ENDPOINT"
    with pytest.raises(DynamoDBLocalError, match=expected), running_dynamodb_local(timeout=1):
        pass


def test_server_command_runs_the_loopback_launcher_in_memory(cached_installation: Installation) -> None:
    command = server_command(cached_installation, "java", 4567)
    assert command[-5:] == ["LoopbackDynamoDBLocal", "-inMemory", "-port", "4567", "-disableTelemetry"]
    assert "-jar" not in command
    # The JVM's options come before the class it runs, where java reads them as its own.
    assert command[1:3] == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def test_java_options_come_from_the_environment_when_set(
        cached_installation: Installation, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, "-Xmx512m '-Dname=a b'")
    command = server_command(cached_installation, "java", 4567)
    assert command[1:3] == ["-Xmx512m", "-Dname=a b"]
    assert "-XX:TieredStopAtLevel=1" not in command

    monkeypatch.setenv(JAVA_OPTIONS_ENV, "")  # the JVM's own defaults
    assert server_command(cached_installation, "java", 4567)[1].startswith("-Djava.library.path=")


def test_java_options_that_are_not_shell_quoted_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, "-Dname='unclosed")
    with pytest.raises(DynamoDBLocalError, match=r"DYNAMODB_LOCAL_JAVA_OPTIONS=.* not a shell-quoted list"):
        java_options()


def test_a_collector_chosen_by_the_launchers_environment_is_left_to_it(
        cached_installation: Installation, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two collectors stop the JVM ("Multiple garbage collectors selected"): the default options
    leave theirs out when JAVA_TOOL_OPTIONS (or JDK_JAVA_OPTIONS, _JAVA_OPTIONS) chose one."""
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss1m -XX:+UseG1GC")
    assert java_options() == ["-XX:TieredStopAtLevel=1"]
    with ServerProcess.start(cached_installation, timeout=60) as process:
        assert _dynamodb_client(process.server).list_tables()["TableNames"] == []


def test_java_options_the_jvm_refuses_are_named_in_the_error(
        cached_installation: Installation, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, "-XX:+NoSuchOptionAnywhere")
    expected = r"exited with code 1 .*given '-XX:\+NoSuchOptionAnywhere', which DYNAMODB_LOCAL_JAVA_OPTIONS replaces"
    with pytest.raises(DynamoDBLocalError, match=expected):
        ServerProcess.start(cached_installation, timeout=60)


def test_the_session_server_runs_with_the_java_options(dynamodb_local: Any) -> None:
    """The session's server, which answers every other test, runs with the options in effect."""
    if dynamodb_local.pid is None:
        pytest.skip("the session uses a server it did not start (DYNAMODB_LOCAL_ENDPOINT)")
    expected = list(JAVA_OPTIONS) if SESSION_JAVA_OPTIONS is None else shlex.split(SESSION_JAVA_OPTIONS)
    command = Path(f"/proc/{dynamodb_local.pid}/cmdline").read_bytes().decode().split("\0")
    assert command[1:1 + len(expected)] == expected
