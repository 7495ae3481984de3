"""Public names re-exported by a package and loaded on first use (PEP 562).

The front door and ``pynamodb_sharding.testing`` name their public names and the module that
defines each; importing the package loads none of those modules (nor PynamoDB, nor botocore)
until a name is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, modules: Mapping[str, tuple[str, ...]], names: list[str], namespace: dict[str, Any],
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``: each name of ``modules`` (module -> names)
    is imported from ``package.<module>`` when first asked for, then kept in ``namespace``
    (the package's globals), so later uses do not come back here."""
    exports = {name: module for module, names_of in modules.items() for name in names_of}

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
