"""The models the library derives at run time (one per period of a time-partitioned table, one
per region of a global metadata table) share botocore's parsed data files: a new process that
writes to five daily tables reads DynamoDB's service model from disk at most twice (the
declared model's own session, and the one the period models share), not once per period
(about 200 ms of CPU each). Run in a fresh process, without the test plugin (which shares the
data of every session itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from pynamodb_sharding.testing import DynamoDBLocal

CHILD = Path(__file__).parent.parent / "botocore_data_child.py"


def test_period_models_read_botocores_data_once(dynamodb_local: DynamoDBLocal) -> None:
    env = {**os.environ, "ENDPOINT": dynamodb_local.endpoint, "KEY_ID": dynamodb_local.aws_access_key_id,
           "SECRET": dynamodb_local.aws_secret_access_key, "TABLE": f"daily_{uuid.uuid4().hex[:8]}",
           "PYTHONPATH": str(CHILD.parent.parent)}
    done = subprocess.run([sys.executable, str(CHILD)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert 5 == result["items"]
    assert 1 <= result["service_model_reads"] <= 2, result
