"""Every ``ShardingError`` code has its section in ``docs/errors.rst``.

Messages end with ``(see docs/errors.rst#<code>)``; this proves each such link lands on a
section, for every subclass in the package (including the testing tools), and that the page
documents no code that no longer exists.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import pynamodb_sharding
from pynamodb_sharding.exceptions import ShardingError

from .examples import DOCS


def _subclasses(cls: type[ShardingError]) -> list[type[ShardingError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found.extend(_subclasses(sub))
    return found


def _codes_in_package() -> set[str]:
    for module in pkgutil.walk_packages(pynamodb_sharding.__path__, "pynamodb_sharding."):
        importlib.import_module(module.name)
    return {
        cls.code
        for cls in _subclasses(ShardingError)
        if cls.__module__.startswith("pynamodb_sharding.") and "code" in vars(cls)
    }


def test_every_error_code_has_a_section_and_every_section_a_code() -> None:
    """The explicit targets of errors.rst are exactly the codes of the package's errors."""
    targets = set(re.findall(r"^\.\. _([\w-]+):$", (DOCS / "errors.rst").read_text(), flags=re.MULTILINE))
    assert _codes_in_package() == targets
