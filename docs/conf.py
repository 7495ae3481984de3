"""Sphinx configuration; built in CI with ``sphinx-build -W --keep-going -b html docs docs/_build/html``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

# Build from a checkout without installing it first.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pynamodb_sharding

_logger = logging.getLogger(__name__)

project = "pynamodb-sharding"
author = "pynamodb-sharding contributors"
copyright = "the pynamodb-sharding contributors"
release = pynamodb_sharding.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build"]
nitpicky = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

myst_heading_anchors = 2

html_theme = "furo"
html_title = f"pynamodb-sharding {release}"


def _check_error_anchors(app: Sphinx, exception: Exception | None) -> None:
    """Fail the build when errors.html lacks the anchor an error message's URL points at."""
    page = Path(app.outdir) / "errors.html"
    if exception is not None or app.builder.format != "html" or not page.exists():
        return
    ids = set(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))
    codes = {cls.code for cls in _error_classes(pynamodb_sharding.ShardingError)}
    if missing := sorted(codes - ids):
        _logger.warning("errors.html has no anchor for the error codes %s; give each a section in errors.rst", missing)


def _error_classes(cls: type[pynamodb_sharding.ShardingError]) -> list[type[pynamodb_sharding.ShardingError]]:
    return [cls, *(found for sub in cls.__subclasses__() for found in _error_classes(sub))]


def setup(app: Sphinx) -> None:
    import pynamodb_sharding.testing.local  # noqa: F401  (defines DynamoDBLocalError, a code of its own)

    app.connect("build-finished", _check_error_anchors)
