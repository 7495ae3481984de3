"""Import the benchmarks' scripts and shared modules (not a package) for the tests.

``benchmarks/`` is the scripts' own directory on ``sys.path`` when they run, so they import
``charts`` and ``report`` by those names; the tests put it on ``sys.path`` the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
RUN_ALL = BENCHMARKS / "run_all.py"
RESULTS = BENCHMARKS / "RESULTS.md"

if str(BENCHMARKS) not in sys.path:
    sys.path.append(str(BENCHMARKS))


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_run_all", RUN_ALL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def charts() -> ModuleType:
    """``benchmarks/charts.py``."""
    return importlib.import_module("charts")
