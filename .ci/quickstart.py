"""Run by `make check-lean` with the venv that holds only the built wheel (no extras).

Runs the README's quick start as a new user would after `pip install pynamodb-sharding`: starts
DynamoDB Local with the package's own launcher (`pynamodb_sharding.testing.local`), points
PynamoDB at it through a settings file (as docs/quickstart.rst says), runs the README's python
example in a fresh interpreter outside the checkout (so it imports the installed wheel, not the
source tree), checks what it prints, and stops the server by its process id.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pynamodb_sharding
from pynamodb_sharding.testing.local import ServerProcess, find_installation, install, require_java

README = Path(__file__).resolve().parent.parent / "README.md"
#: What the README's example prints: the one item it saved, under its logical key.
EXPECTED = "/shared/firetvGen2.txt 1456369200\n"

_FENCE = re.compile(r"^```python\n(?P<source>.*?)^```", re.MULTILINE | re.DOTALL)


def readme_example() -> str:
    blocks = _FENCE.findall(README.read_text(encoding="utf-8"))
    if len(blocks) != 1:
        sys.exit(f"{README} has {len(blocks)} python examples; .ci/quickstart.py runs exactly one")
    return str(blocks[0])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main() -> int:
    installed = Path(pynamodb_sharding.__file__).resolve()
    if "site-packages" not in installed.parts:
        sys.exit(f"pynamodb_sharding is imported from {installed}, not from an installed wheel")
    print(f"pynamodb-sharding {pynamodb_sharding.__version__} from {installed.parent}")
    source = readme_example()
    process = ServerProcess.start(find_installation() or install(), java=require_java())
    server = process.server
    assert server.pid is not None  # started here, so its process id is known
    try:
        with tempfile.TemporaryDirectory(prefix="quickstart-") as scratch:
            workdir = Path(scratch)
            settings = workdir / "pynamodb_settings.py"
            settings.write_text(f"host = {server.endpoint!r}\nregion = {server.region!r}\n", encoding="utf-8")
            (workdir / "quickstart.py").write_text(source, encoding="utf-8")
            env = {
                **{name: value for name, value in os.environ.items()
                   if not name.startswith(("AWS_", "PYNAMODB_", "PYTHON"))},
                "PYNAMODB_CONFIG": str(settings),
                "AWS_ACCESS_KEY_ID": server.aws_access_key_id,
                "AWS_SECRET_ACCESS_KEY": server.aws_secret_access_key,
                "AWS_DEFAULT_REGION": server.region,
            }
            done = subprocess.run(
                [sys.executable, "quickstart.py"], cwd=workdir, env=env, capture_output=True, text=True,
                timeout=300, check=False,
            )
    finally:
        process.stop()
    if pid_alive(server.pid):
        sys.exit(f"DynamoDB Local (pid {server.pid}) still runs after stop()")
    print(done.stdout + done.stderr, end="")
    if done.returncode != 0:
        sys.exit(f"the README's example exited with code {done.returncode}")
    if done.stdout != EXPECTED:
        sys.exit(f"the README's example printed {done.stdout!r}, expected {EXPECTED!r}: "
                 f"update EXPECTED in .ci/quickstart.py if the README changed on purpose")
    print(f"README quick start on DynamoDB Local (pid {server.pid}, stopped) with the wheel alone: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
