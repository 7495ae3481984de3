"""The package's public names load when first used, and the pytest plugin's import stays light.

``pynamodb_sharding`` and ``pynamodb_sharding.testing`` re-export their public names through a
module ``__getattr__``: importing either package (which every import of the pytest plugin does)
loads neither PynamoDB nor botocore, urllib3 or ssl, so a test suite's own
``gevent.monkey.patch_all()`` comes first. These tests pin that, and that every public name is
still importable exactly as before, from both packages, and is what type checkers see.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pynamodb_sharding
import pynamodb_sharding.testing

#: What an import must not load before a gevent suite's patch_all() (and what would make it slow).
HEAVY = ("pynamodb", "botocore", "boto3", "urllib3", "requests", "ssl", "attrs", "cachetools")

PACKAGES = [pynamodb_sharding, pynamodb_sharding.testing]


def _loaded_by(statement: str) -> list[str]:
    script = f"import sys\n{statement}\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    return [name for name in HEAVY if name in loaded]


@pytest.mark.parametrize(
    "statement",
    ["import pynamodb_sharding.testing.plugin", "import pynamodb_sharding", "import pynamodb_sharding.testing"],
)
def test_importing_the_plugin_loads_nothing_heavy(statement: str) -> None:
    assert [] == _loaded_by(statement)


def test_a_public_name_loads_what_it_needs() -> None:
    """The reference: the names themselves still bring PynamoDB and botocore in."""
    assert {"pynamodb", "botocore"} <= set(_loaded_by("from pynamodb_sharding import ShardedModel"))


def _type_checking_imports(package: ModuleType) -> dict[str, str]:
    """``name -> module`` of the imports under ``if TYPE_CHECKING:`` in the package's ``__init__``."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                assert statement.module is not None
                for alias in statement.names:
                    found[alias.name] = statement.module
    return found


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_every_public_name_is_what_type_checkers_see(package: ModuleType) -> None:
    """``__all__``, the lazy table and the ``TYPE_CHECKING`` imports name the same objects."""
    declared = _type_checking_imports(package)
    public = set(package.__all__) - {"__version__"}
    assert public == set(declared)
    assert sorted(package.__all__) == package.__all__
    for name, module in declared.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_star_import_binds_every_public_name(package: ModuleType) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {package.__name__} import *", namespace)
    assert set(package.__all__) <= set(namespace)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_an_unknown_name_is_an_attribute_error(package: ModuleType) -> None:
    with pytest.raises(AttributeError, match=f"module '{package.__name__}' has no attribute 'Shardedmodel'"):
        package.Shardedmodel  # noqa: B018
    assert not hasattr(package, "Shardedmodel")


@pytest.mark.parametrize("package", PACKAGES, ids=lambda package: package.__name__)
def test_dir_lists_the_public_names(package: ModuleType) -> None:
    assert set(package.__all__) <= set(dir(package))


def test_submodules_still_import_through_the_package() -> None:
    """``from pynamodb_sharding import model`` is a submodule import, not a public name."""
    from pynamodb_sharding import _model as model
    from pynamodb_sharding.testing import local

    assert model.__name__ == "pynamodb_sharding._model"
    assert local.__name__ == "pynamodb_sharding.testing.local"
