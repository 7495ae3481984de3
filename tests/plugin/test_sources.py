"""Where DynamoDB Local comes from: endpoint, then DYNAMODB_LOCAL_DIR, then the cache.

Lookups that start no server: the cache honours XDG_CACHE_HOME, a directory named by
DYNAMODB_LOCAL_DIR wins over the cache and must hold the jar, an endpoint given by
DYNAMODB_LOCAL_ENDPOINT is used as is, and one that does not answer is a clear error. The
command runs the loopback launcher, or, without javac, the plain jar with a warning.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pynamodb_sharding.testing.local import (
    DIR_ENV,
    ENDPOINT_ENV,
    JAVA_OPTIONS_ENV,
    DynamoDBLocal,
    DynamoDBLocalError,
    DynamoDBLocalWarning,
    Installation,
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


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    monkeypatch.delenv(DIR_ENV, raising=False)
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


def test_a_server_started_with_the_java_options_runs_them(dynamodb_local: Any) -> None:
    """The session's server, which answers every other test, runs with the options."""
    assert dynamodb_local.pid is not None, "needs the server the session starts: unset DYNAMODB_LOCAL_ENDPOINT"
    command = Path(f"/proc/{dynamodb_local.pid}/cmdline").read_bytes().split(b"\0")
    assert b"-XX:TieredStopAtLevel=1" in command


def test_without_javac_falls_back_to_the_jar_and_warns(
    cached_installation: Installation,
    monkeypatch: pytest.MonkeyPatch,
    path_with_only: Callable[..., str],
) -> None:
    # A fresh cache (autouse fixture) has no compiled launcher, and javac is not on PATH.
    monkeypatch.setenv(DIR_ENV, str(cached_installation.directory))
    monkeypatch.setenv("PATH", path_with_only("java"))
    installation = find_installation()
    assert installation is not None

    with pytest.warns(DynamoDBLocalWarning, match=r"no `javac` on PATH.*listens on every interface"):
        command = server_command(installation, "java", 4567)

    assert command[-6:] == ["-jar", str(installation.jar), "-inMemory", "-port", "4567", "-disableTelemetry"]
