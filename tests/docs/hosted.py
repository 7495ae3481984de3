"""Build the docs the way Read the Docs does from ``.readthedocs.yaml``.

Read the Docs installs the package with the extras the file names, then runs Sphinx from the
directory of ``conf.py`` (https://docs.readthedocs.io/en/stable/builds.html)::

    python -m sphinx -T -W --keep-going -b html -d _build/doctrees -D language=en . $READTHEDOCS_OUTPUT/html

(``-W --keep-going`` only with ``fail_on_warning: true``). :func:`build` runs that command,
in an interpreter where every installed distribution that those extras do not bring is
unimportable (``run_as_hosted.py``), so a page that needs a package Read the Docs would not
install fails here as it would there.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .examples import REPO

CONFIG = REPO / ".readthedocs.yaml"
RUN_AS_HOSTED = Path(__file__).with_name("run_as_hosted.py")
PROJECT = "pynamodb-sharding"
#: In every virtual environment, Read the Docs' included: never blocked.
BUILD_TOOLS = frozenset({"pip", "setuptools", "wheel"})


def config() -> Mapping[str, Any]:
    loaded: Mapping[str, Any] = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    return loaded


def installed_extras(settings: Mapping[str, Any]) -> list[str]:
    """The extras of this package that the file's ``python.install`` entries install."""
    extras: list[str] = []
    for entry in settings["python"]["install"]:
        if entry.get("method") == "pip" and entry.get("path") == ".":
            extras += entry.get("extra_requirements", [])
    return extras


def requirement_closure(root: str, extras: Iterable[str]) -> set[str]:
    """Canonical names of ``root`` with ``extras`` and of everything they require, transitively.

    Requirements whose distribution is not installed here are left out (an optional dependency
    of another platform); the environment Read the Docs builds is this one minus the rest.
    """
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(root, frozenset(extras))]
    while pending:
        name, wanted = pending.pop()
        key = (canonicalize_name(name), wanted)
        if key in seen:
            continue
        seen.add(key)
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.add(key[0])
        for line in distribution.requires or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in {"", *wanted}):
                pending.append((requirement.name, frozenset(requirement.extras)))
    return found


def blocked_modules(allowed: set[str]) -> list[str]:
    """Top-level modules installed here that only distributions outside ``allowed`` provide."""
    providers = importlib.metadata.packages_distributions()
    outside = {
        canonicalize_name(name)
        for names in providers.values()
        for name in names
        if canonicalize_name(name) not in allowed | BUILD_TOOLS
    }
    return sorted(
        module for module, names in providers.items()
        if all(canonicalize_name(name) in outside for name in names)
    )


def sphinx_arguments(settings: Mapping[str, Any], output: Path) -> list[str]:
    """Read the Docs' Sphinx command line for ``settings``, writing into ``output``."""
    sphinx = settings["sphinx"]
    warnings = ["-W", "--keep-going"] if sphinx.get("fail_on_warning") else []
    builder = sphinx.get("builder", "html")
    return ["-T", *warnings, "-b", builder, "-d", str(output / "doctrees"), "-D", "language=en", ".",
            str(output / builder)]


def build(output: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Build the docs as Read the Docs would into ``output``; returns the run and the HTML dir."""
    settings = config()
    allowed = requirement_closure(PROJECT, installed_extras(settings))
    source = REPO / Path(settings["sphinx"]["configuration"]).parent
    completed = subprocess.run(
        [sys.executable, str(RUN_AS_HOSTED), json.dumps(blocked_modules(allowed)), "-m", "sphinx",
         *sphinx_arguments(settings, output)],
        cwd=source, capture_output=True, text=True, timeout=900, check=False,
    )
    return completed, output / settings["sphinx"].get("builder", "html")
