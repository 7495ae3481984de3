"""Run one docs page's examples in order, in this interpreter (started by ``examples.run_page``).

Usage: ``python run_blocks.py BLOCKS.json``. Each python block is compiled with its .rst file
name and line numbers, so a traceback points at the docs line that failed. A block captioned
with a pytest file name is written to that file and run with pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any


def main(spec: Path) -> int:
    from pynamodb_sharding.testing import shared_botocore_data

    blocks: list[dict[str, Any]] = json.loads(spec.read_text(encoding="utf-8"))
    with shared_botocore_data():  # as under the pytest plugin: each page binds many models
        return _run(blocks)


def _run(blocks: list[dict[str, Any]]) -> int:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for block in blocks:
        where = f"{block['path']}:{block['line']}"
        if block["test_module"]:
            if not _run_test_module(block["test_module"], block["source"], where):
                return 1
            continue
        # Pad with blank lines so line numbers in tracebacks are the .rst file's.
        padded = "\n" * (block["line"] - 1) + block["source"]
        try:
            exec(compile(padded, block["path"], "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            print(f"docs example failed: {where}", file=sys.stderr)
            return 1
        print(f"ok {where}")
    return 0


def _run_test_module(name: str, source: str, where: str) -> bool:
    Path(name).write_text(source, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
        capture_output=True,
        text=True,
        check=False,
    )
    print(completed.stdout + completed.stderr)
    # Exit code 5 is "no tests collected": an example test module must test something.
    if completed.returncode != 0:
        failure = f"docs example test module failed (pytest exit {completed.returncode}): {where}"
        print(failure, file=sys.stderr)
        return False
    print(f"ok {where} (pytest)")
    return True


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
