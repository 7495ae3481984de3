"""The README's two commands install what they need: ``make demo`` the ``[demo]`` extra only,
saying what it does before each slow step; ``make test`` the test and docs extras.

Read from ``make -n`` (what make would run) for a virtual environment that does not exist yet,
as on a fresh clone: nothing is installed here.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent



def planned(target: str, venv: Path) -> list[str]:
    """The command lines ``make TARGET`` would run with ``VENV=venv``."""
    # Run from `make test` itself, make's variables would make this one a sub-make, which
    # prints the directories it enters and leaves: ask for the plan of a make run by hand.
    env = {name: value for name, value in os.environ.items() if name not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}
    done = subprocess.run(["make", "--no-print-directory", "-n", target, f"VENV={venv}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def test_make_demo_installs_the_demo_extra_and_says_so_first(tmp_path: Path) -> None:
    lines = planned("demo", tmp_path / "venv")
    installs = [line for line in lines if "pip install" in line and not line.startswith("echo")]
    assert 1 == len(installs), lines
    assert "-e '.[demo]'" in installs[0]
    assert not any("test" in re.findall(r"\.\[([\w,]+)\]", line)[0] for line in installs)
    for slow in ("-m venv", "pip install"):
        index = next(n for n, line in enumerate(lines) if slow in line and not line.startswith("echo"))
        assert lines[index - 1].startswith('echo "==> '), (slow, lines[index - 1])
    assert lines[-1].endswith("pynamodb-sharding demo")


def test_make_test_installs_the_test_and_docs_extras(tmp_path: Path) -> None:
    lines = planned("test", tmp_path / "venv")
    assert any("pip install" in line and "-e '.[test,docs]'" in line for line in lines), lines
    assert "-m pytest" in lines[-1]
