"""Sphinx configuration; built in CI with ``sphinx-build -W --keep-going -b html docs docs/_build/html``."""

from __future__ import annotations

import sys
from pathlib import Path

# Build from a checkout without installing it first.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pynamodb_sharding

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
