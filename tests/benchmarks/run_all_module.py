"""Import ``benchmarks/run_all.py`` (a script, not a package module) for the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RUN_ALL = Path(__file__).resolve().parents[2] / "benchmarks" / "run_all.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_run_all", RUN_ALL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
