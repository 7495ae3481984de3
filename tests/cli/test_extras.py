"""The library imports lean; the command line says which extra it needs when it is missing.

Proves, in fresh interpreters: ``import pynamodb_sharding`` loads none of the command line's,
the demo's or the test tools' dependencies; the ``pynamodb-sharding`` entry point without
``click`` exits 2 with one line naming ``pynamodb-sharding[cli]``, with click 7 one naming the
click it needs, and the demo without ``rich`` or ``matplotlib`` one naming ``[demo]``.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

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


def test_command_with_click_7_says_which_click_it_needs(tmp_path: Path) -> None:
    """An application pinned to click 7 (Flask 1.x): the command exits 2 with one line naming the
    click it needs, before importing click (whose click 7 would fail with ``TypeError: ...
    'package_name'``). A stand-in click 7.1.2 (its metadata, and a package that fails if
    imported) shadows the installed one."""
    dist = tmp_path / "click-7.1.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: click\nVersion: 7.1.2\n", encoding="utf-8")
    (tmp_path / "click").mkdir()
    (tmp_path / "click" / "__init__.py").write_text("raise AssertionError('click 7 was imported')\n",
                                                    encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", "from pynamodb_sharding.command import main\nmain(['--help'])"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])},
    )
    assert 2 == result.returncode
    assert "" == result.stdout
    lines = result.stderr.strip().splitlines()
    assert 1 == len(lines), result.stderr
    assert "needs click>=8.1.3,<9" in lines[0]
    assert "click 7.1.2" in lines[0]
    assert "pynamodb_sharding.migration" in lines[0]


def test_the_click_floor_is_the_one_setup_cfg_declares() -> None:
    from pynamodb_sharding.command import CLICK_FLOOR

    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parents[2] / "setup.cfg", encoding="utf-8")
    floor = ".".join(str(part) for part in CLICK_FLOOR)
    for extra in ("cli", "demo"):
        assert f"click>={floor},<9" in config["options.extras_require"][extra].split()
