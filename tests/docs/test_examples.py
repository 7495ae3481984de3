"""Every ``.. code-block:: python`` example in ``docs/`` runs against DynamoDB Local.

The blocks of a page run in order in a fresh interpreter with its own database on the test
server (see ``tests/docs/examples.py`` for the convention), so a docs example that no longer
matches the library fails here instead of rotting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .examples import DOCS, DocsConventionError, Server, pages, run_page, runnable_blocks


def _pages_with_examples() -> list[Path]:
    found = []
    for page in pages():
        try:
            has_examples = bool(runnable_blocks(page))
        except DocsConventionError:
            has_examples = True  # let the test report the broken page
        if has_examples:
            found.append(page)
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_page_follows_the_examples_convention(page: Path) -> None:
    """No code hides from the runner: blocks name a known language, no ``::`` or ``>>>``."""
    blocks = runnable_blocks(page)
    assert all(block.source.strip() for block in blocks), f"{page.name} has an empty python block"


def test_the_docs_have_runnable_examples() -> None:
    """The runner is not vacuous: the pages users start from carry examples that run."""
    with_examples = {page.name for page in _pages_with_examples()}
    assert {"quickstart.rst", "concepts.rst", "testing.rst"} <= with_examples
    assert (DOCS / "index.rst").exists()


@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda page: page.name)
def test_page_examples_run(page: Path, dynamodb_local: Any, tmp_path: Path) -> None:
    """The python blocks of ``page`` run in order without error against DynamoDB Local."""
    blocks = runnable_blocks(page)
    server = Server(
        endpoint=dynamodb_local.endpoint,
        region=dynamodb_local.region,
        secret=dynamodb_local.aws_secret_access_key,
    )
    result = run_page(blocks, server, tmp_path)
    assert result.returncode == 0, result.output
    assert result.output.count(f"ok {DOCS}/") == len(blocks), result.output
