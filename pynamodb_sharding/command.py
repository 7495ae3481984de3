"""The ``pynamodb-sharding`` console script: runs :mod:`pynamodb_sharding._cli` when its extra is installed.

The command line needs ``click`` (``pip install 'pynamodb-sharding[cli]'``), the demo also
``rich`` and ``matplotlib`` (``[demo]``); the library itself needs none of them, so they are
extras. Without them, the command says in one line what to install.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from importlib import metadata

__all__ = ["CLICK_FLOOR", "main"]

#: The modules the command line imports that the library does not.
CLI_MODULES = ("click",)

#: The oldest click the command line runs on: setup.cfg's ``[cli]`` extra declares the same
#: floor (``click>=8.1.3,<9``); click 7 lacks what it uses (``version_option(package_name=)``).
CLICK_FLOOR = (8, 1, 3)


def _old_click() -> str | None:
    """The installed click's version when it is below :data:`CLICK_FLOOR` (an application
    pinned to click 7, as Flask 1.x is), else ``None``; read from its metadata, never imported."""
    try:
        version = metadata.version("click")
    except metadata.PackageNotFoundError:
        return None
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    return version if numbers < CLICK_FLOOR else None


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line, or exit with one line naming the extra to install (or the click
    it needs)."""
    old = _old_click()
    if old is not None:
        floor = ".".join(str(part) for part in CLICK_FLOOR)
        sys.stderr.write(
            f"pynamodb-sharding: the command line needs click>={floor},<9, and this environment has "
            f"click {old} (Flask 1.x pins click<8); run the command from a virtualenv of its own with "
            f"pip install 'pynamodb-sharding[cli]' and your models' dependencies, or call the same "
            f"jobs from Python (pynamodb_sharding.migration), which needs no click.\n"
        )
        raise SystemExit(2)
    try:
        from pynamodb_sharding._cli import main as run
    except ModuleNotFoundError as missing:
        if missing.name not in CLI_MODULES:
            raise
        sys.stderr.write(
            f"pynamodb-sharding: the command line needs {missing.name}, which is not installed: "
            f"pip install 'pynamodb-sharding[cli]'\n"
        )
        raise SystemExit(2) from None
    run(argv)
