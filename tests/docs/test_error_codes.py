"""Every ``ShardingError`` has its own code, and every code a section of the built docs.

A message ends with ``{DOCS_URL}errors.html#<code>``. These tests prove that the codes of the
package's errors (the testing tools' included) are distinct, that ``docs/errors.rst`` has one
labelled section per code and documents no code that no longer exists, and that no module raises
the bare base class. That Sphinx turns each label into the ``id`` the URL points at is checked on
the site built as Read the Docs builds it (tests/docs/test_hosted_docs.py).
"""

from __future__ import annotations

import ast
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pynamodb_sharding
from pynamodb_sharding._exceptions import ShardingError, SortKeyTypeError, UnknownIndexError

from .examples import DOCS

PACKAGE = Path(pynamodb_sharding.__file__).parent

#: Modules still raising the bare base class until the strategy redesign lands; each entry goes
#: when its module switches to the subclasses defined for it in ``exceptions.py``.
BARE_RAISES_PENDING: frozenset[str] = frozenset()


def _subclasses(cls: type[ShardingError]) -> list[type[ShardingError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found.extend(_subclasses(sub))
    return found


def _package_errors() -> list[type[ShardingError]]:
    for module in pkgutil.walk_packages(pynamodb_sharding.__path__, "pynamodb_sharding."):
        importlib.import_module(module.name)
    return [cls for cls in _subclasses(ShardingError) if cls.__module__.startswith("pynamodb_sharding.")]


def _codes_in_package() -> set[str]:
    return {cls.code for cls in _package_errors()}


def _labels() -> set[str]:
    return set(re.findall(r"^\.\. _([\w-]+):$", (DOCS / "errors.rst").read_text(), flags=re.MULTILINE))


def test_every_error_code_has_a_section_and_every_section_a_code() -> None:
    """The explicit targets of errors.rst are exactly the codes of the package's errors."""
    assert _codes_in_package() == _labels()


def test_every_error_class_has_its_own_code() -> None:
    """Each public class defines ``code`` itself, and no two classes share one.

    A private subclass (``_PortTaken``, a retry signal) is its public parent to the user and
    keeps the parent's code.
    """
    errors = [cls for cls in _package_errors() if not cls.__name__.startswith("_")]
    assert [] == [cls.__name__ for cls in errors if "code" not in vars(cls)]
    assert len(errors) == len({cls.code for cls in errors})


def _bare_constructions(path: Path) -> list[int]:
    """Lines of ``path`` that call ``ShardingError(...)`` itself rather than a subclass."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "ShardingError")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "ShardingError")
        )
    ]


def test_no_module_raises_the_bare_base_class() -> None:
    """Every error the package builds is a subclass with its own code, never ``ShardingError(...)``."""
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _bare_constructions(path))
    }
    assert {} == {name: lines for name, lines in found.items() if name not in BARE_RAISES_PENDING}
    # A stale entry would let a module slip back to the base class unnoticed.
    assert set() == BARE_RAISES_PENDING - set(found)


def test_the_check_sees_a_bare_raise(tmp_path: Path) -> None:
    """The scan above finds both spellings, so an empty result means something."""
    module = tmp_path / "bare.py"
    module.write_text("raise ShardingError('x')\nraise exceptions.ShardingError('y')\n")
    assert [1, 2] == _bare_constructions(module)


class TestMessageURL:
    """A message ends with the URL of its code's section, under an overridable base URL."""

    def test_message_ends_with_the_section_url(self) -> None:
        error = UnknownIndexError("Log.query: the model has no index 'nope'.")
        expected = "Log.query: the model has no index 'nope'. (see https://pynamodb-sharding.readthedocs.io/en/latest/errors.html#unknown-index)"
        assert expected == str(error)

    def test_docs_url_names_the_code(self) -> None:
        expected = "https://pynamodb-sharding.readthedocs.io/en/latest/errors.html#sort-key-type"
        assert expected == SortKeyTypeError().docs_url

    def test_environment_variable_overrides_the_base_url(self) -> None:
        script = "from pynamodb_sharding import UnknownIndexError; print(UnknownIndexError('m'))"
        env = {**os.environ, "PYNAMODB_SHARDING_DOCS_URL": "https://docs.example.com/sharding/v0.1"}
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        assert "m (see https://docs.example.com/sharding/v0.1/errors.html#unknown-index)\n" == done.stdout
