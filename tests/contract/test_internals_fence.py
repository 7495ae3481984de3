"""Every PynamoDB and botocore private name the library relies on is used in ``_host`` only.

``pynamodb_sharding/_host.py`` lists each internal with why it is needed and the contract test
that pins it; everything else reaches them through ``_host``'s functions. This test reads every
module of the package (as text: nothing is run) and fails on a private name of PynamoDB's or
botocore's classes used anywhere else: an attribute (``model._hash_keyname``), a ``getattr`` of
one, or a ``from ... import _name``. Two uses are the host's contract itself and stay allowed:
the definition of an overridden hook (``def _get_save_args`` on the model) and the call of the
overridden original through ``super()``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import botocore.client
import pynamodb.attributes
import pynamodb.connection.base
import pynamodb.connection.table
import pynamodb.indexes
import pynamodb.models
import pynamodb.pagination
import pynamodb.transactions

import pynamodb_sharding

PACKAGE = Path(pynamodb_sharding.__file__).parent
HOST = PACKAGE / "_host.py"

_HOST_CLASSES = (
    pynamodb.models.Model, pynamodb.models.MetaModel, pynamodb.models.BatchWrite,
    pynamodb.indexes.Index, pynamodb.indexes.GlobalSecondaryIndex, pynamodb.attributes.Attribute,
    pynamodb.attributes.AttributeContainer, pynamodb.connection.table.TableConnection,
    pynamodb.connection.base.Connection, pynamodb.pagination.ResultIterator, pynamodb.pagination.PageIterator,
    pynamodb.transactions.Transaction, botocore.client.BaseClient,
)


def _host_privates() -> frozenset[str]:
    """The private names PynamoDB's and botocore's classes define (``_x``, not ``__x__``)."""
    names: set[str] = set()
    for cls in _HOST_CLASSES:
        for klass in cls.__mro__:
            if klass.__module__.split(".")[0] not in ("pynamodb", "botocore"):
                continue
            names.update(name for name in vars(klass) if name.startswith("_") and not name.startswith("__"))
    return frozenset(names)


PRIVATES = _host_privates()


def _own_attributes(tree: ast.AST) -> set[str]:
    """The names a module's classes define as their own: assigned on ``self``
    (``self._connection = ...``) or defined as methods (``def _connection(self)``)."""
    assigned = {target.attr for node in ast.walk(tree) if isinstance(node, ast.Assign | ast.AnnAssign)
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self"}
    methods = {member.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for member in node.body
               if isinstance(member, ast.FunctionDef)}
    return assigned | methods


def _uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _own_attributes(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATES:
            receiver = node.value
            if (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name)
                    and receiver.func.id == "super"):
                continue  # super()._hook(...): the overridden original, called by its override
            if isinstance(receiver, ast.Name) and receiver.id == "self" and node.attr in own:
                continue  # an attribute of the library's own class that happens to share the name
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in PRIVATES):
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            found.append(f"{where}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("pynamodb", "botocore"):
            found.extend(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: import {alias.name}"
                         for alias in node.names if alias.name.startswith("_"))
    return found


def test_the_host_list_is_not_empty() -> None:
    """The scan is not vacuous: the names it looks for include those _host is about."""
    assert {"_hash_keyname", "_get_connection", "_get_save_args", "_instantiate", "_make_api_call"} <= PRIVATES
    assert _uses(HOST)  # _host itself uses them: the scan finds such uses


def test_no_private_name_outside_host() -> None:
    uses = [use for path in sorted(PACKAGE.rglob("*.py")) if path != HOST for use in _uses(path)]
    assert [] == uses
