"""Run a module or a command with some installed top-level modules made unimportable.

Usage: ``python run_as_hosted.py BLOCKED_JSON -m MODULE ARGS...`` or ``... -c CODE``. Used by
``hosted.build`` to run Sphinx as if only what Read the Docs installs were installed.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import runpy
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class Unavailable(importlib.abc.MetaPathFinder):
    """Refuses the modules of distributions the hosted build would not install."""

    def __init__(self, blocked: frozenset[str]) -> None:
        self.blocked = blocked

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name.partition(".")[0] in self.blocked:
            msg = f"No module named {name!r} (not installed by .readthedocs.yaml)"
            raise ModuleNotFoundError(msg, name=name)
        return None


def main(argv: list[str]) -> None:
    blocked = frozenset(json.loads(argv[0]))
    sys.meta_path.insert(0, Unavailable(blocked))
    # A library that asks whether an optional module is installed (yarl asks for pydantic) gets
    # None, as on Read the Docs, not the finder's error.
    find_spec = importlib.util.find_spec

    def hosted_find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        if name.partition(".")[0] in blocked:
            return None
        return find_spec(name, package)

    importlib.util.find_spec = hosted_find_spec
    if argv[1] == "-m":
        sys.argv = [argv[2], *argv[3:]]
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    elif argv[1] == "-c":
        exec(compile(argv[2], "<run_as_hosted>", "exec"), {"__name__": "__main__"})
    else:
        sys.exit(f"usage: {sys.argv[0]} BLOCKED_JSON (-m MODULE ARGS... | -c CODE)")


if __name__ == "__main__":
    main(sys.argv[1:])
