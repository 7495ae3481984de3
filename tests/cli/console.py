"""Run the installed ``pynamodb-sharding`` console script in a subprocess, as a user would."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

SCRIPT_NAME = "pynamodb-sharding"


def console_script() -> Path:
    """The console script pip installed beside this interpreter."""
    script = Path(sys.executable).parent / SCRIPT_NAME
    assert script.exists(), (
        f"{script} is missing: setup.cfg must declare the console script "
        f"`{SCRIPT_NAME} = pynamodb_sharding._cli:main` and the package must be (re)installed"
    )
    return script


def run_cli(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``pynamodb-sharding ARGS`` in ``cwd`` and capture its output."""
    return subprocess.run(
        [str(console_script()), *args],
        cwd=cwd,
        env=dict(env) if env is not None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def user_environment(server: Any) -> dict[str, str]:
    """The environment of a user whose credentials and region point at ``server``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "PYNAMODB_"))}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": server.aws_access_key_id,
            "AWS_SECRET_ACCESS_KEY": server.aws_secret_access_key,
            "AWS_DEFAULT_REGION": server.region,
        }
    )
    return env


@attrs.frozen
class ModelsModule:
    """A user's models module written into a temporary project directory."""

    directory: Path
    name: str
    prefix: str

    def spec(self, model: str) -> str:
        return f"{self.name}:{model}"

    def table(self, suffix: str) -> str:
        return f"{self.prefix}_{suffix}"

    def append(self, source: str) -> None:
        """Add models to the module (``{prefix}`` in ``source`` becomes the table prefix)."""
        path = self.directory / f"{self.name}.py"
        path.write_text(path.read_text(encoding="utf-8") + source.format(prefix=self.prefix), encoding="utf-8")

    def load(self) -> ModuleType:
        """The module as it is now, imported in this process (to write and read as the user's code)."""
        spec = importlib.util.spec_from_file_location(self.name, self.directory / f"{self.name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


MODELS_SOURCE = '''\
"""Models of a user project, as the CLI imports them."""

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._metadata import ShardMetadata

HOST = {host!r}
DEAD_HOST = "http://127.0.0.1:9"


class Plain(Model):
    class Meta:
        table_name = "{prefix}_plain"
        host = HOST

    key = UnicodeAttribute(hash_key=True)


class AuditLog(ShardedModel):
    class Meta:
        table_name = "{prefix}_audit_log"
        host = HOST

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    shards = Sharding(HashedShards(4))


class Provisioned(ShardedModel):
    class Meta:
        table_name = "{prefix}_provisioned"
        host = HOST
        read_capacity_units = 3
        write_capacity_units = 2

    file_path = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(2))


class Elsewhere(ShardedModel):
    """Meta names an endpoint where nothing listens: only --endpoint can make it work."""

    class Meta:
        table_name = "{prefix}_elsewhere"
        host = DEAD_HOST
        region = "eu-west-3"

    file_path = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(3))


class Regionless(ShardedModel):
    """No host and no region: AWS itself, in no region (what botocore refuses to guess)."""

    class Meta:
        table_name = "{prefix}_regionless"

    file_path = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(2))


class AuditLogShards(ShardMetadata):
    class Meta:
        table_name = "{prefix}_audit_log_shards"
        host = HOST
'''


#: A DynamicShards model whose metadata table is ``AuditLogShards``.
DYNAMIC_MODEL = """

from pynamodb_sharding._dynamic import DynamicShards


class HotLog(ShardedModel):
    class Meta:
        table_name = "{prefix}_hot_log"
        host = HOST

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(AuditLogShards))
"""


#: A DynamicShards model with proactive growth (append after DYNAMIC_MODEL).
PROACTIVE_MODEL = """

class FastLog(ShardedModel):
    class Meta:
        table_name = "{prefix}_fast_log"
        host = HOST

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(AuditLogShards, partition_write_units=100, target_utilization=0.5,
                                    rate_interval=60))
"""


def write_models_module(directory: Path, endpoint: str, extra: str = "") -> ModelsModule:
    """Write a models module with table names unique to this test; return how to name it."""
    prefix = f"cli{uuid.uuid4().hex[:12]}"
    name = f"project_models_{prefix}"
    source = MODELS_SOURCE.format(host=endpoint, prefix=prefix) + extra.format(prefix=prefix)
    (directory / f"{name}.py").write_text(source, encoding="utf-8")
    return ModelsModule(directory=directory, name=name, prefix=prefix)
