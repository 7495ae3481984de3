"""The README's python example runs against DynamoDB Local, like every docs example, and so does
the quick start after it on the same server (a new user runs one, then the other)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from .examples import DOCS, REPO, Block, Server, delete_tables, run_page, runnable_blocks

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


def _shards_always(shard: str) -> Block:
    """A first block that makes every ``RandomShards`` of the run pick shard ``shard`` ("a" or
    "b" of ``randint(a, b)``): which copy of an item a second save lands beside is then fixed."""
    source = f"import random\nrandom.Random.randint = lambda self, a, b: {shard}\n"
    return Block(path=REPO / "prelude.py", line=1, language="python", source=source)


def test_the_quick_start_runs_after_the_readme_on_one_server(dynamodb_local: Any, tmp_path: Path) -> None:
    """The README's example, then docs/quickstart.rst, in one database (one access key id): the
    quick start's counts are its own. Had they shared a table, key and time (as they did), the
    README's item, saved in shard 1 here, and the quick start's first one, in shard 10, would
    be two items of one key and the quick start's ``count == 100`` would find 101 (as nine
    runs in ten did with random shards)."""
    server = Server(endpoint=dynamodb_local.endpoint, region=dynamodb_local.region,
                    secret=dynamodb_local.aws_secret_access_key)
    access_key = "docs" + uuid.uuid4().hex
    for page in ("readme", "quickstart"):
        (tmp_path / page).mkdir()
    try:
        readme = run_page([_shards_always("a"), *readme_blocks()], server, tmp_path / "readme", access_key=access_key)
        assert readme.returncode == 0, readme.output
        quickstart = run_page([_shards_always("b"), *runnable_blocks(DOCS / "quickstart.rst")], server,
                              tmp_path / "quickstart", access_key=access_key)
        assert quickstart.returncode == 0, quickstart.output
    finally:
        delete_tables(server, access_key)
