"""The library's fork handlers: one registry (pynamodb_sharding/_forks.py), run as os.fork runs them."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pynamodb_sharding
from pynamodb_sharding._forks import at_fork, registered

PACKAGE = Path(pynamodb_sharding.__file__).parent


def test_no_module_registers_fork_handlers_of_its_own() -> None:
    """Every handler goes through at_fork (which also skips platforms that do not fork)."""
    direct = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_forks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "register_at_fork":
                direct.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert direct == []


def test_the_library_s_handlers_are_registered() -> None:
    # The modules that keep locks, connections or per-process state (the package loads them
    # lazily: each registers when it is imported).
    stateful = ["_pool", "_metadata", "_fanout", "_wire", "_partitioned", "_write_rate", "_attempts", "_dynamic",
                "_hedging", "_merge", "_shard_requests"]
    for name in stateful:
        importlib.import_module(f"pynamodb_sharding.{name}")
    modules = {getattr(handler, "__module__", None) for entry in registered() for handler in entry if handler}
    assert {f"pynamodb_sharding.{name}" for name in stateful} <= modules


def test_handlers_run_in_the_parent_and_the_child_of_a_fork() -> None:
    seen: list[str] = []
    child_ran: list[bool] = []
    at_fork(before=lambda: seen.append("before"), after_in_parent=lambda: seen.append("after in parent"),
            after_in_child=lambda: child_ran.append(True))
    pid = os.fork()
    if pid == 0:  # the child: tell the parent whether its handler ran
        os._exit(0 if child_ran == [True] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert seen == ["before", "after in parent"]
    assert child_ran == []  # not in the parent


def test_a_registration_without_a_handler_is_refused() -> None:
    with pytest.raises(TypeError, match="needs a handler"):
        at_fork()


def test_the_package_imports_where_processes_do_not_fork() -> None:
    """On Windows ``os`` has neither ``fork`` nor ``register_at_fork``: every module imports and a
    sharded model is declared (four modules called ``os.register_at_fork`` unguarded and failed)."""
    code = """
import os
del os.register_at_fork, os.fork
import importlib, pkgutil
import pynamodb_sharding
for module in pkgutil.walk_packages(pynamodb_sharding.__path__, "pynamodb_sharding."):
    if not module.name.startswith(("pynamodb_sharding.contrib", "pynamodb_sharding.demo")):
        importlib.import_module(module.name)
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb_sharding import DynamicShards, ShardedModel, ShardMetadata, Sharding

class Counts(ShardMetadata):
    class Meta:
        table_name = "counts"

class Log(ShardedModel):
    class Meta:
        table_name = "log"
    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(Counts))

print(Log.shards.strategy.__class__.__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "DynamicShards"), done.stderr
