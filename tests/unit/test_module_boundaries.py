"""The pure modules stay pure: the cursor and the merge import nothing from PynamoDB or botocore.

They work on raw items in botocore's shape, so they can be tested, reused (indexes,
migrations) and reasoned about without a model or a connection.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pynamodb_sharding

PACKAGE = Path(pynamodb_sharding.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", ["merge.py", "cursor.py", "keys.py"])
def test_pure_module_imports_no_host_library(module: str) -> None:
    imported = _imported_modules(PACKAGE / module)
    assert not {name for name in imported if name.split(".")[0] in {"pynamodb", "botocore", "boto3"}}, imported
