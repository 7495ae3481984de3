"""The ``pynamodb-sharding`` console script: runs :mod:`pynamodb_sharding._cli` when its extra is installed.

The command line needs ``click`` (``pip install 'pynamodb-sharding[cli]'``), the demo also
``rich`` and ``matplotlib`` (``[demo]``); the library itself needs none of them, so they are
extras. Without them, the command says in one line what to install.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

#: The modules the command line imports that the library does not.
CLI_MODULES = ("click",)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line, or exit with one line naming the extra to install."""
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
