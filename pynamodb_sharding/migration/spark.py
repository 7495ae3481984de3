"""Run a migration job on Apache Spark (AWS Glue, EMR, Databricks): one Spark task per segment.

Spark only schedules: each task runs :func:`~pynamodb_sharding.migration._engine.run_segment`
for one parallel-scan segment, with the same checkpoints as the command line, so a failed or
re-run Spark job resumes, and the same job can be finished from the command line. Models are
named by :class:`ModelSpec` (``"module:Class"`` plus optional connection overrides), which the
tasks import on the executors; the package and the models' module must be installed there
(``--additional-python-modules`` on Glue). Needs ``pyspark`` (``pip install
'pynamodb-sharding[spark]'``) only where the job is submitted from; executors need nothing but
this package.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import importlib
import time
from typing import Any, Literal

import attrs
from pynamodb.models import Model

from pynamodb_sharding._exceptions import MigrationError
from pynamodb_sharding._host import botocore_client, reset_connection
from pynamodb_sharding.migration._checkpoints import CheckpointStore
from pynamodb_sharding.migration._engine import JobOptions, RateLimiter, current_pass, run_segment
from pynamodb_sharding.migration._jobs import CompactJob, CopyJob, Job, ReshardJob
from pynamodb_sharding.migration._progress import MigrationReport, Tally

__all__ = ["JobSpec", "ModelSpec", "run_on_spark"]

_OVERRIDES = ("table_name", "host", "region", "aws_access_key_id", "aws_secret_access_key")


@attrs.frozen
class ModelSpec:
    """A model class named so that Spark executors can import it: ``"module:Class"``.

    The optional fields override the class's ``Meta`` on the executors (and the driver), e.g.
    a table name per environment; credentials are best left to the executors' IAM role.
    """

    path: str
    table_name: str | None = None
    host: str | None = None
    region: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: str | None = None

    def load(self) -> type[Model]:
        """Import the class and apply the overrides to its ``Meta``.

        Raises:
            MigrationError: the path is not ``module:Class`` or does not name a model class.
        """
        module_name, _, attribute = self.path.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError, ValueError) as error:
            msg = f"ModelSpec({self.path!r}): cannot import it ({error}); name a model as 'package.module:Class'."
            raise MigrationError(msg) from error
        if not (isinstance(target, type) and issubclass(target, Model)):
            msg = f"ModelSpec({self.path!r}) is {target!r}, not a PynamoDB model class."
            raise MigrationError(msg)
        changed = False
        for name in _OVERRIDES:
            value = getattr(self, name)
            if value is not None and getattr(target.Meta, name, None) != value:
                setattr(target.Meta, name, value)
                changed = True
        if changed:
            reset_connection(target)
        return target


@attrs.frozen
class JobSpec:
    """A job as Spark tasks rebuild it: its kind and its models (source then target for a copy)."""

    kind: Literal["copy", "reshard", "compact"]
    models: tuple[ModelSpec, ...]

    def build(self) -> Job:
        """The job, with its models imported and configured."""
        loaded = [spec.load() for spec in self.models]
        if self.kind == "copy" and len(loaded) == 2:
            return CopyJob(loaded[0], loaded[1])
        if self.kind in ("reshard", "compact") and len(loaded) == 1:
            return (CompactJob if self.kind == "compact" else ReshardJob)(loaded[0])
        msg = (f"JobSpec({self.kind!r}) got {len(loaded)} models; a copy takes (source, target), "
               f"reshard and compact take one model.")
        raise MigrationError(msg)


def _task(spec: JobSpec, options: JobOptions, rate: float | None, segment: int, pass_key: str) -> dict[str, Any]:
    job = spec.build()
    store = CheckpointStore(botocore_client(job.source.model), options.checkpoint_table)
    tally = run_segment(job, segment, options.total_segments, store, options=options, limiter=RateLimiter(rate),
                        pass_key=pass_key)
    return attrs.asdict(tally)


def run_on_spark(spark: Any, spec: JobSpec, options: JobOptions | None = None) -> MigrationReport:
    """Run every segment of the job not done yet as a Spark task; return the job's report.

    Args:
        spark: a ``SparkSession`` or ``SparkContext`` (a Glue job's ``glueContext.spark_session``).
        spec: the job.
        options: ``total_segments`` (the number of Spark tasks), ``rate`` (split evenly
            between the tasks running at once, ``defaultParallelism``), ``checkpoint_table``;
            ``workers`` and ``segment`` are Spark's business and ignored.
    """
    options = options or JobOptions()
    context = getattr(spark, "sparkContext", spark)
    started = time.monotonic()
    job = spec.build()  # on the driver too: checks the spec and creates the checkpoint table
    store = CheckpointStore(botocore_client(job.source.model), options.checkpoint_table)
    store.ensure_table()
    total = options.total_segments
    job_id = current_pass(job, options, store, new_when_done=True)
    pending = [c.segment for c in store.load_all(job_id, total) if not c.done]
    running = max(1, min(len(pending) or 1, int(context.defaultParallelism)))
    rate = options.rate / running if options.rate is not None else None
    tally = Tally()
    if pending:
        results = (context.parallelize(pending, len(pending))
                   .map(lambda segment: _task(spec, options, rate, segment, job_id))
                   .collect())
        for result in results:
            tally.add(Tally(**result))
    done = sum(1 for c in store.load_all(job_id, total) if c.done)
    report = MigrationReport(job=job.describe(), tally=tally, duration=time.monotonic() - started,
                             segments_done=done, total_segments=total)
    if done == total and isinstance(job, CompactJob):
        from pynamodb_sharding.migration._compaction import trim_histories

        report.notes.extend(trim_histories(job))
    return report

