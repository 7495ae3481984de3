"""The async methods come with the ``[async]`` extra, and nothing else loads it.

``import pynamodb_sharding``, the models, queries and writes of the sync path load neither
greenlet nor httptools; the first async call does. Without the extra installed, an async call
raises an ``ImportError`` that names the extra to install.
"""

from __future__ import annotations

import subprocess
import sys

ASYNC = ("httptools", "greenlet", "pynamodb_sharding._async_transport", "pynamodb_sharding._async_http",
         "pynamodb_sharding._async_results")


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)


def test_the_sync_path_loads_nothing_async() -> None:
    script = (
        "import sys\n"
        "from pynamodb.attributes import NumberAttribute, UnicodeAttribute\n"
        "from pynamodb_sharding import RandomShards, ShardedModel, Sharding\n"
        "import pynamodb_sharding.testing, pynamodb_sharding.testing.latency\n"
        "class Log(ShardedModel):\n"
        "    class Meta:\n"
        "        table_name = 'log'\n"
        "    path = UnicodeAttribute(hash_key=True)\n"
        "    at = NumberAttribute(range_key=True)\n"
        "    shards = Sharding(RandomShards(4))\n"
        "Log.aquery  # the attribute, not a call\n"
        f"print(sorted(name for name in {ASYNC!r} if name in sys.modules))\n"
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_an_async_call_without_the_extra_names_it() -> None:
    script = (
        "import sys\n"
        "sys.modules['httptools'] = None  # as if not installed\n"
        "from pynamodb.attributes import NumberAttribute, UnicodeAttribute\n"
        "from pynamodb_sharding import RandomShards, ShardedModel, Sharding\n"
        "class Log(ShardedModel):\n"
        "    class Meta:\n"
        "        table_name = 'log'\n"
        "    path = UnicodeAttribute(hash_key=True)\n"
        "    at = NumberAttribute(range_key=True)\n"
        "    shards = Sharding(RandomShards(4))\n"
        "Log.aquery('/a')\n"
    )
    done = _run(script)
    assert done.returncode == 1
    assert "ImportError: pynamodb_sharding's async methods (aquery, aget, asave, aupdate...) need " \
           "greenlet and httptools, and httptools is not installed: pip install 'pynamodb-sharding[async]'." \
           in done.stderr
