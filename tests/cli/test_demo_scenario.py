"""The demo's scenario runs without a terminal and without the demo's extras, and checks itself.

In a fresh interpreter where ``rich``, ``matplotlib``, ``click`` and the test tools cannot be
imported (only the library's own dependencies can), a short
:func:`~pynamodb_sharding.demo.run_scenario` against the test session's DynamoDB Local must
read back every acknowledged write exactly once and in order in both phases, and the dynamic
key must grow past one shard (in the samples and in the metadata table's history) while the
unsharded key stays at one; the history's times count from the start of the dynamic phase.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

#: The extras' and the test tools' modules (as in test_extras.py): none may be needed.
BLOCKED = ("rich", "matplotlib", "click", "pytest", "hypothesis", "boto3")

SCRIPT = f"""
import json, sys
for name in {BLOCKED!r}:
    sys.modules[name] = None  # importing it now raises ImportError

from pynamodb_sharding.demo import DemoConfig, run_scenario

result = run_scenario(DemoConfig(duration=4, writers=8, limit=20, max_shards=4))
print(json.dumps({{
    "passed": result.passed,
    "history": [count for _, count in result.history],
    "history_at": [at for at, _ in result.history],
    "phases": {{
        phase.name: {{
            "acknowledged": phase.acknowledged,
            "checked": phase.check.acknowledged,
            "read": phase.check.read,
            "missing": phase.check.missing,
            "duplicates": phase.check.duplicates,
            "unexpected": phase.check.unexpected,
            "in_order": phase.check.in_order,
            "shards": [sample.shards for sample in phase.samples],
            "final_shards": phase.final_shards,
            "items_per_shard": sorted(phase.items_per_shard),
        }}
        for phase in result.phases
    }},
}}))
"""


def _run_scenario(endpoint: str) -> dict[str, Any]:
    env = {**os.environ, "DYNAMODB_LOCAL_ENDPOINT": endpoint}
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert 0 == process.returncode, process.stderr
    result: dict[str, Any] = json.loads(process.stdout)
    return result


def test_scenario_runs_without_the_extras_and_checks_itself(dynamodb_local: Any) -> None:
    """Both phases read back exactly once and in order; only the dynamic key grows."""
    result = _run_scenario(dynamodb_local.endpoint)
    assert result["passed"]
    unsharded, dynamic = result["phases"]["unsharded"], result["phases"]["dynamic"]
    for phase in (unsharded, dynamic):
        assert phase["acknowledged"] > 0
        assert phase["acknowledged"] == phase["checked"]
        assert phase["read"] >= phase["acknowledged"]
        assert (0, 0, 0, True) == (phase["missing"], phase["duplicates"], phase["unexpected"], phase["in_order"])
    assert {1} == set(unsharded["shards"])
    assert 1 == unsharded["final_shards"]
    assert [0] == unsharded["items_per_shard"]
    assert 1 == dynamic["shards"][0]
    assert dynamic["final_shards"] > 1
    assert dynamic["shards"] == sorted(dynamic["shards"])
    assert 1 == result["history"][0]
    # Seconds since the dynamic phase started (2 s long): the count before it at 0, each growth
    # within the phase (give or take a write still in flight as it ended), not epoch seconds.
    assert 0.0 == result["history_at"][0]
    assert result["history_at"] == sorted(result["history_at"])
    assert all(0.0 < at < 2.0 + 10.0 for at in result["history_at"][1:]), result["history_at"]
    assert dynamic["final_shards"] == result["history"][-1]
    assert len(dynamic["items_per_shard"]) > 1
