"""Extract the code examples of the reStructuredText docs and run them against DynamoDB Local.

The convention every page in ``docs/`` follows (see ``docs/testing.rst``):

* ``.. code-block:: python`` is an example that runs. The python blocks of one page run in
  order, in one fresh interpreter, sharing one namespace, as if they were one script: a page
  may define its models in its first block and use them in the next.
* A python block whose ``:caption:`` is a pytest file name (``test_*.py``) is a test module:
  it is written to that file and run with pytest (the plugin loads from its entry point).
* Anything that is not meant to run uses another language: ``text``, ``console``, ``ini``...
  Bare ``::`` literal blocks and ``>>>`` doctest paragraphs are refused, so nothing that looks
  like code escapes the runner.
* Examples create their own tables (``Model.create_table(...)``) without a host in ``Meta``:
  the runner points PynamoDB's settings file (``PYNAMODB_CONFIG``) at the test server and
  gives each page its own access key id, which DynamoDB Local treats as a separate database,
  so pages never see each other's tables and may use plain names like ``"audit_log"``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import boto3

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
RUN_BLOCKS = Path(__file__).with_name("run_blocks.py")

#: Languages of blocks that are shown, not run.
SHOWN_LANGUAGES = frozenset({"text", "console", "shell", "bash", "ini", "toml", "json", "cfg", "none"})

_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\.\s+(?P<name>code-block|code|sourcecode)::\s*(?P<lang>\S*)\s*$")
_OPTION = re.compile(r"^\s*:(?P<name>[\w-]+):\s*(?P<value>.*)$")
_LITERAL_MARKER = re.compile(r"::\s*$")
_TEST_FILE = re.compile(r"^test_\w+\.py$")


class DocsConventionError(Exception):
    """A page breaks the examples convention (a block that would escape the runner)."""


@attrs.frozen
class Block:
    """One code example: where it is in the docs and its source, dedented."""

    path: Path
    line: int  # 1-based line of the first source line in the .rst file
    language: str
    source: str
    caption: str | None = None

    @property
    def location(self) -> str:
        return f"{self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path}:{self.line}"

    @property
    def is_test_module(self) -> bool:
        return self.caption is not None and _TEST_FILE.match(self.caption) is not None


def extract_blocks(path: Path, text: str | None = None) -> list[Block]:
    """Every ``code-block`` of one .rst page, in order.

    Raises:
        DocsConventionError: a code block has no language, or the page holds a bare ``::``
            literal block or a ``>>>`` doctest paragraph.
    """
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        match = _DIRECTIVE.match(line)
        if match is None:
            _check_plain_line(path, index, line)
            index += 1
            continue
        if not match["lang"]:
            msg = f"{path}:{index + 1}: code block without a language; use 'python' (runs) or 'text'"
            raise DocsConventionError(msg)
        indent = len(match["indent"])
        index += 1
        caption = None
        while index < len(lines) and (option := _OPTION.match(lines[index])) is not None:
            if option["name"] == "caption":
                caption = option["value"].strip()
            index += 1
        body_start = index
        while index < len(lines) and (not lines[index].strip() or _indent(lines[index]) > indent):
            index += 1
        body = lines[body_start:index]
        while body and not body[-1].strip():
            body.pop()
        first = next((n for n, text_line in enumerate(body) if text_line.strip()), len(body))
        content = body[first:]
        margin = min((_indent(text_line) for text_line in content if text_line.strip()), default=0)
        source = "\n".join(text_line[margin:] for text_line in content) + "\n"
        blocks.append(
            Block(
                path=path,
                line=body_start + first + 1,
                language=match["lang"],
                source=source,
                caption=caption,
            )
        )
    return blocks


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _check_plain_line(path: Path, index: int, line: str) -> None:
    stripped = line.strip()
    if stripped.startswith(">>>"):
        msg = f"{path}:{index + 1}: doctest paragraph; write a '.. code-block:: python' example instead"
        raise DocsConventionError(msg)
    if stripped.startswith(".."):
        return
    if _LITERAL_MARKER.search(line):
        msg = (
            f"{path}:{index + 1}: bare '::' literal block; use '.. code-block:: python' (runs) "
            f"or '.. code-block:: text'"
        )
        raise DocsConventionError(msg)


def pages() -> list[Path]:
    """The .rst pages of the docs, sorted."""
    return sorted(DOCS.glob("*.rst"))


def runnable_blocks(path: Path) -> list[Block]:
    """The blocks of ``path`` that the runner executes; fails on unknown languages."""
    blocks = extract_blocks(path)
    for block in blocks:
        if block.language != "python" and block.language not in SHOWN_LANGUAGES:
            msg = f"{block.location}: unknown code-block language {block.language!r}"
            raise DocsConventionError(msg)
    return [block for block in blocks if block.language == "python"]


@attrs.frozen
class Server:
    """Where the examples send their requests."""

    endpoint: str
    region: str
    secret: str


@attrs.frozen
class PageRun:
    """The outcome of running one page's examples."""

    returncode: int
    output: str


def run_page(blocks: list[Block], server: Server, workdir: Path, timeout: float = 300.0, *,
             access_key: str | None = None) -> PageRun:
    """Run ``blocks`` in order in one fresh interpreter against ``server``.

    Each page gets an access key id of its own (a separate DynamoDB Local database) and every
    table the page created is deleted afterwards; given an ``access_key``, the page runs in
    that database and its tables are left for the caller to delete (:func:`delete_tables`).
    """
    shared = access_key is not None
    access_key = access_key or "docs" + uuid.uuid4().hex
    settings = workdir / "pynamodb_settings.py"
    settings.write_text(f"host = {server.endpoint!r}\nregion = {server.region!r}\n", encoding="utf-8")
    spec = workdir / "blocks.json"
    spec.write_text(
        json.dumps(
            [
                {
                    "path": str(block.path),
                    "line": block.line,
                    "source": block.source,
                    "test_module": block.caption if block.is_test_module else None,
                }
                for block in blocks
            ]
        ),
        encoding="utf-8",
    )
    env = _environment(server, access_key, settings)
    try:
        completed = subprocess.run(
            [sys.executable, str(RUN_BLOCKS), str(spec)],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    finally:
        if not shared:
            delete_tables(server, access_key)
    return PageRun(returncode=completed.returncode, output=completed.stdout + completed.stderr)


def _environment(server: Server, access_key: str, settings: Path) -> Mapping[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "PYNAMODB_", "PYTEST_"))
    }
    pythonpath = [str(REPO), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update(
        {
            "PYNAMODB_CONFIG": str(settings),
            "AWS_ACCESS_KEY_ID": access_key,
            "AWS_SECRET_ACCESS_KEY": server.secret,
            "AWS_DEFAULT_REGION": server.region,
            "DYNAMODB_LOCAL_ENDPOINT": server.endpoint,
            "PYTHONPATH": os.pathsep.join(pythonpath),
        }
    )
    return env


def delete_tables(server: Server, access_key: str) -> None:
    """Delete every table of the database of ``access_key``."""
    client = boto3.client(
        "dynamodb",
        endpoint_url=server.endpoint,
        region_name=server.region,
        aws_access_key_id=access_key,
        aws_secret_access_key=server.secret,
    )
    for name in _table_names(client):
        client.delete_table(TableName=name)


def _table_names(client: object) -> Iterator[str]:
    kwargs: dict[str, str] = {}
    while True:
        page = client.list_tables(**kwargs)  # type: ignore[attr-defined]
        yield from page.get("TableNames", [])
        if "LastEvaluatedTableName" not in page:
            return
        kwargs = {"ExclusiveStartTableName": page["LastEvaluatedTableName"]}
