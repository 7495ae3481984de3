"""The README's python example runs against DynamoDB Local, like every docs example."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .examples import REPO, Block, Server, run_page

_FENCE = re.compile(r"^```python\n(?P<source>.*?)^```", re.MULTILINE | re.DOTALL)


def readme_blocks() -> list[Block]:
    path = REPO / "README.md"
    text = path.read_text(encoding="utf-8")
    return [
        Block(path=path, line=text[: match.start("source")].count("\n") + 1, language="python",
              source=match.group("source"))
        for match in _FENCE.finditer(text)
    ]


def test_readme_example_runs(dynamodb_local: Any, tmp_path: Path) -> None:
    blocks = readme_blocks()
    assert blocks, "the README shows a python example"
    server = Server(endpoint=dynamodb_local.endpoint, region=dynamodb_local.region,
                    secret=dynamodb_local.aws_secret_access_key)
    result = run_page(blocks, server, tmp_path)
    assert result.returncode == 0, result.output
    assert result.output.count(f"ok {REPO / 'README.md'}:") == len(blocks), result.output
