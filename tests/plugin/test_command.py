"""`python -m pynamodb_sharding.testing serve|roundtrip` do real work and clean up after themselves.

`serve` prints an endpoint that answers DynamoDB API calls and, on Ctrl-C, stops its server
and exits 0; `roundtrip` writes and reads back items through a plain model (here against the
session's server, through DYNAMODB_LOCAL_ENDPOINT) and deletes its table.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile

import pytest

from pynamodb_sharding.testing import DynamoDBLocal
from pynamodb_sharding.testing.local import ENDPOINT_ENV, Installation, _dynamodb_client
from tests.plugin.local_servers import REAL_CACHE_HOME, dynamodb_local_pids


@pytest.mark.usefixtures("sigint_delivered")
def test_serve_prints_a_working_endpoint_and_stops_on_ctrl_c(cached_installation: Installation) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": REAL_CACHE_HOME}
    env.pop(ENDPOINT_ENV, None)
    serving = subprocess.Popen(
        [sys.executable, "-m", "pynamodb_sharding.testing", "serve"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert serving.stdout is not None
        banner = serving.stdout.readline()
        export = serving.stdout.readline().strip()
        assert export.startswith(f"export {ENDPOINT_ENV}=http://127.0.0.1:"), banner + export
        endpoint = export.split("=", 1)[1]
        # Then everything else an app needs, as shell lines: region and DynamoDB Local's credentials.
        exports = dict(serving.stdout.readline().strip().removeprefix("export ").split("=", 1) for _ in range(3))
        assert exports == {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "fakeMyKeyId",
                           "AWS_SECRET_ACCESS_KEY": "fakeSecretAccessKey"}
        # Then how an application reaches it: those lines, pasted, bring a plain model there.
        hints = [serving.stdout.readline().rstrip("\n") for _ in range(5)]
        assert all(line.startswith("#") for line in hints), hints
        pasted = [line.removeprefix("#").strip() for line in hints if line.startswith("#   ")]
        assert pasted[0].startswith("printf 'host = ")
        assert pasted[1].startswith("export PYNAMODB_CONFIG=")
        _check_pasted_settings(pasted, exports)
        pid = int(banner.split("(pid ")[1].split(")")[0])
        assert pid in dynamodb_local_pids()
        assert "TableNames" in _dynamodb_client(DynamoDBLocal(endpoint=endpoint)).list_tables()
    finally:
        serving.send_signal(signal.SIGINT)
        out, err = serving.communicate(timeout=30)

    assert serving.returncode == 0, err
    assert "DynamoDB Local stopped." in out
    assert pid not in dynamodb_local_pids()


def _check_pasted_settings(pasted: list[str], exports: dict[str, str]) -> None:
    """Run the pasted lines in a shell, then a plain PynamoDB model that names no host: it must
    reach the server (no network here: AWS would fail to connect)."""
    with tempfile.TemporaryDirectory() as folder:
        script = "; ".join([*pasted, f"{shlex.quote(sys.executable)} -c {shlex.quote(_PLAIN_MODEL)}"])
        env = {**os.environ, **exports}
        env.pop("PYNAMODB_CONFIG", None)
        done = subprocess.run(["sh", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "exists: False"


_PLAIN_MODEL = """
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

class Plain(Model):
    class Meta:
        table_name = "pasted_settings_check"
    key = UnicodeAttribute(hash_key=True)

print("exists:", Plain.exists())
"""


def test_roundtrip_writes_and_reads_back(dynamodb_local: DynamoDBLocal) -> None:
    env = {**os.environ, ENDPOINT_ENV: dynamodb_local.endpoint}
    done = subprocess.run(
        [sys.executable, "-m", "pynamodb_sharding.testing", "roundtrip", "--items", "30"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "read back all 30 items, newest first: [29, 28, 27] ... [2, 1, 0]" in done.stdout
    table = done.stdout.split("created table ")[1].split()[0]
    assert table not in _dynamodb_client(dynamodb_local).list_tables(Limit=100)["TableNames"]
