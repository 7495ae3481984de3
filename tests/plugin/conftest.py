"""Fixtures for running the plugin in inner pytest sessions (pytester) and in subprocesses."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pynamodb_sharding.testing.local import DIR_ENV, ENDPOINT_ENV, Installation, install
from tests.plugin.local_servers import REAL_CACHE_HOME


@pytest.fixture(scope="session")
def cached_installation() -> Installation:
    """DynamoDB Local installed in the real per-user cache, so inner sessions start fast."""
    return install()


@pytest.fixture
def inner_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cached_installation: Installation
) -> pytest.Pytester:
    """A pytester whose inner sessions start their own DynamoDB Local from the real cache."""
    monkeypatch.delenv(ENDPOINT_ENV, raising=False)
    monkeypatch.delenv(DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", REAL_CACHE_HOME)
    return pytester


@pytest.fixture
def path_with_only(tmp_path: Path) -> Callable[..., str]:
    """Build a PATH holding only the named programs (symlinks to the real ones)."""

    def build(*programs: str) -> str:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        for program in programs:
            found = _which(program)
            assert found is not None, f"{program} must be installed for this test"
            (bin_dir / program).symlink_to(found)
        return str(bin_dir)

    return build


def _which(program: str) -> str | None:
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(directory) / program
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.resolve())
    return None
