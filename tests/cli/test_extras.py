"""The library imports lean; the command line says which extra it needs when it is missing.

Proves, in fresh interpreters: ``import pynamodb_sharding`` loads none of the command line's,
the demo's or the test tools' dependencies; the ``pynamodb-sharding`` entry point without
``click`` exits 2 with one line naming ``pynamodb-sharding[cli]``, and the demo without
``rich`` or ``matplotlib`` one naming ``[demo]``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

TOOLING = ("click", "rich", "matplotlib", "pytest", "hypothesis", "boto3")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_import_loads_no_tooling() -> None:
    result = _python(
        "import sys, pynamodb_sharding, pynamodb_sharding._model, pynamodb_sharding._fanout\n"
        f"print(sorted(m for m in {TOOLING!r} if m in sys.modules))"
    )
    assert 0 == result.returncode, result.stderr
    assert "[]" == result.stdout.strip()


def test_command_without_its_extra_says_what_to_install() -> None:
    result = _python(
        "import sys; sys.modules['click'] = None\n"
        "from pynamodb_sharding.command import main\n"
        "main(['--help'])"
    )
    assert 2 == result.returncode
    assert "" == result.stdout
    lines = result.stderr.strip().splitlines()
    assert 1 == len(lines), result.stderr
    assert "needs click" in lines[0]
    assert "pip install 'pynamodb-sharding[cli]'" in lines[0]


@pytest.mark.parametrize("missing", ["rich", "matplotlib"])
def test_demo_without_its_extra_says_what_to_install(missing: str) -> None:
    result = _python(
        f"import sys; sys.modules[{missing!r}] = None\n"
        "from pynamodb_sharding.command import main\n"
        "main(['demo'])"
    )
    assert 2 == result.returncode
    lines = result.stderr.strip().splitlines()
    assert 1 == len(lines), result.stderr
    assert missing in lines[0]
    assert "pip install 'pynamodb-sharding[demo]'" in lines[0]


def test_command_with_its_extra_runs() -> None:
    result = _python("from pynamodb_sharding.command import main\nmain(['--help'])")
    assert 0 == result.returncode, result.stderr
    assert "demo" in result.stdout
