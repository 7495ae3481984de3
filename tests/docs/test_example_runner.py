"""The docs-example runner finds every block, refuses hidden code, and reports real failures.

Proves that ``tests/docs/test_examples.py`` can fail: a broken example fails with the .rst
line that broke, and the per-page database keeps pages from seeing each other's tables.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest

from .examples import Block, DocsConventionError, Server, extract_blocks, run_page

PAGE = """\
Title
=====

Some prose.

.. code-block:: python
   :caption: setup

   x = 1

   y = x + 1

.. code-block:: text

   $ not run

* a list item holding an example

  .. code-block:: python

     assert y == 2
"""


def test_extracts_blocks_with_language_caption_and_rst_line() -> None:
    """Each block keeps its language, caption, dedented source and first source line."""
    blocks = extract_blocks(Path("page.rst"), PAGE)
    expected = [
        Block(Path("page.rst"), 9, "python", "x = 1\n\ny = x + 1\n", "setup"),
        Block(Path("page.rst"), 15, "text", "$ not run\n"),
        Block(Path("page.rst"), 21, "python", "assert y == 2\n"),
    ]
    assert expected == blocks


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Example::\n\n   x = 1\n", "bare '::'"),
        ("   >>> 1 + 1\n   2\n", "doctest"),
        (".. code-block::\n\n   x = 1\n", "without a language"),
    ],
)
def test_refuses_code_that_would_escape_the_runner(text: str, problem: str) -> None:
    """Literal blocks, doctest paragraphs and language-less blocks are errors, not skipped."""
    with pytest.raises(DocsConventionError, match=problem):
        extract_blocks(Path("page.rst"), text)


def _server(dynamodb_local: Any) -> Server:
    return Server(dynamodb_local.endpoint, dynamodb_local.region, dynamodb_local.aws_secret_access_key)


def test_a_failing_example_fails_with_its_rst_line(dynamodb_local: Any, tmp_path: Path) -> None:
    """A block that raises makes the page fail, and the traceback names the .rst line."""
    page = tmp_path / "broken.rst"
    blocks = extract_blocks(page, "Broken\n======\n\n.. code-block:: python\n\n   x = 1\n   assert x == 2\n")
    result = run_page(blocks, _server(dynamodb_local), tmp_path)
    assert result.returncode == 1
    assert f'File "{page}", line 7' in result.output
    assert f"docs example failed: {page}:6" in result.output


MODEL_PAGE = """\
.. code-block:: python

   from pynamodb.attributes import UnicodeAttribute
   from pynamodb.models import Model

   class Note(Model):
       class Meta:
           table_name = "TABLE"
       key = UnicodeAttribute(hash_key=True)

   Note.create_table(wait=True, billing_mode="PAY_PER_REQUEST")

.. code-block:: python

   assert Note.count() == 0
   Note(key="a").save()
   assert [note.key for note in Note.scan()] == ["a"]
"""


def test_pages_share_a_namespace_and_get_their_own_database(dynamodb_local: Any, tmp_path: Path) -> None:
    """Blocks of a page share names, and a page does not see a table of the same name elsewhere."""
    table = f"note_{uuid.uuid4().hex}"
    client = boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_local.endpoint,
        region_name=dynamodb_local.region,
        aws_access_key_id=dynamodb_local.aws_access_key_id,
        aws_secret_access_key=dynamodb_local.aws_secret_access_key,
    )
    # Same name, other key schema, one item: the page fails if it sees this table.
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "other", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "other", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        client.put_item(TableName=table, Item={"other": {"S": "x"}})
        blocks = extract_blocks(tmp_path / "page.rst", MODEL_PAGE.replace("TABLE", table))
        result = run_page(blocks, _server(dynamodb_local), tmp_path)
    finally:
        client.delete_table(TableName=table)
    assert result.returncode == 0, result.output
    assert result.output.count("ok ") == 2
