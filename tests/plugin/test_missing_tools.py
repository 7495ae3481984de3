"""Without `java` (or, for a first install, `npm`) the run fails with one clear message, never a skip.

Inner sessions run with a PATH stripped of the missing program; the test using
`dynamodb_local` must error (exit code 1, not a skip), the message must say what to
install, and no traceback from inside subprocess may reach the user.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

INNER = '''
def test_needs_the_server(dynamodb_local):
    assert dynamodb_local.endpoint
'''


def assert_clear_failure(result: pytest.RunResult, expected: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    assert expected in output
    assert "skipped" not in output
    assert "Traceback" not in output
    assert "subprocess.py" not in output


def test_missing_java_fails_with_what_to_install(
    inner_session: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, path_with_only: Callable[..., str]
) -> None:
    monkeypatch.setenv("PATH", path_with_only("node", "npm"))
    inner_session.makepyfile(test_inner=INNER)

    result = inner_session.runpytest_subprocess("-p", "no:cacheprovider")

    assert_clear_failure(result, "apt-get install openjdk-17-jdk-headless")


def test_missing_npm_on_first_install_fails_with_what_to_install(
    inner_session: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    path_with_only: Callable[..., str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", path_with_only("java", "javac"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    inner_session.makepyfile(test_inner=INNER)

    result = inner_session.runpytest_subprocess("-p", "no:cacheprovider")

    assert_clear_failure(result, "no `npm` was found on PATH: install Node.js")
    assert not (tmp_path / "empty-cache" / "pynamodb-sharding" / "dynamodb-local-11.1.0").exists()
