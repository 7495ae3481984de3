"""The Spark adapter in local mode: one Spark task per segment, against DynamoDB Local.

Proves: ``run_on_spark`` copies every item once (raw boto3 scan), with Spark bound to
127.0.0.1, its tasks importing the models by ``module:Class`` and applying the connection
overrides of their ``ModelSpec``; the checkpoints are the command line's, so running the job
again finds every segment done.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from pynamodb_sharding.migration import JobOptions
from pynamodb_sharding.migration.spark import JobSpec, ModelSpec, run_on_spark
from tests.migration_models import SparkRandomReadings, SparkReadings
from tests.raw import put_raw, raw_items

ROOT = Path(__file__).resolve().parents[2]


def _spec(model: Any) -> ModelSpec:
    meta = model.Meta
    return ModelSpec(f"tests.migration_models:{model.__name__}", table_name=meta.table_name, host=meta.host,
                     region=meta.region, aws_access_key_id=meta.aws_access_key_id,
                     aws_secret_access_key=meta.aws_secret_access_key)


def test_copy_on_spark_local_mode(dynamodb_models: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb_models(SparkReadings, SparkRandomReadings)
    put_raw(SparkReadings, [{"sensor": {"S": f"s{k}"}, "at": {"N": str(n)}, "value": {"S": f"{k}/{n}"}}
                            for k in range(3) for n in range(100)])
    # Spark's Python workers import tests.migration_models from the repository root.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    # SparkContext installs a SIGINT handler that it leaves behind when stopped (it then fails
    # on the stopped context and raises KeyboardInterrupt wherever the signal lands): the
    # worker's own handler is put back after the test.
    previous_sigint = signal.getsignal(signal.SIGINT)
    spark = (SparkSession.builder.master("local[2]").appName("pynamodb-sharding-migration-test")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").getOrCreate())
    spec = JobSpec("copy", (_spec(SparkReadings), _spec(SparkRandomReadings)))
    options = JobOptions(total_segments=4, page_size=50, checkpoint_table=f"spark_checkpoints_{uuid.uuid4().hex[:8]}")
    try:
        report = run_on_spark(spark, spec, options)
        again = run_on_spark(spark, spec, options)
    finally:
        spark.stop()
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
        from tests.raw import raw_client

        raw_client(SparkReadings).delete_table(TableName=options.checkpoint_table)
    assert (report.tally.read, report.tally.written, report.complete) == (300, 300, True)
    # Run again after it finished: a new pass, which overwrites the same keys (no second copy).
    assert (again.tally.read, again.tally.written, again.complete) == (300, 300, True)
    stored = collections.Counter()
    for item in raw_items(SparkRandomReadings):
        logical, _, shard = item["sensor"]["S"].rpartition("_")
        assert 1 <= int(shard) <= 8
        stored[(logical, int(item["at"]["N"]))] += 1
    assert stored == collections.Counter((f"s{k}", n) for k in range(3) for n in range(100))
