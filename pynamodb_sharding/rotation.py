"""Rotation of a time-partitioned model's tables: create ahead, step down, archive, drop.

Seed 002's routine, run once a day (a cron job, a scheduled Lambda, a Kubernetes CronJob)::

    pynamodb-sharding tables rotate myapp.models:UserLog

or from Python, :func:`rotate`. For a model declared with
``TimePartitioned(..., ahead=1, retention=12, step_down=(1, 1), archive=export)`` one rotation

1. creates the tables of the current period and the ``ahead`` periods after it that are
   missing (with the model's companion tables), so writes at a period boundary find their table;
2. lowers the provisioned throughput of each past period's table (and its global secondary
   indexes) to ``step_down`` (on-demand tables are left as they are);
3. for each table older than the current period by more than ``retention`` periods: runs
   ``archive`` with the table (a :class:`~pynamodb_sharding.PeriodTable`), then drops
   it. An archive that raises keeps the table; the next rotation tries again.

Nothing newer than ``retention`` periods back is ever dropped, and never the current period or
a later one (``retention`` is at least 1). A dry run (``dry_run=True``, ``--dry-run``) reports
every step and changes nothing. Rotating twice does nothing the second time.

:func:`export_to_s3` is a ready ``archive``: DynamoDB's export of the table to S3, waited for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import attrs
from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import PynamoDBException

from pynamodb_sharding._exceptions import ArchiveError
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._partitioned import (
    billing_arguments,
    create_period_table,
    declaration,
    existing_periods,
    period_model,
)
from pynamodb_sharding._periods import PeriodTable

__all__ = ["Rotation", "RotationStep", "S3Export", "existing_periods", "export_to_s3", "rotate"]

logger = logging.getLogger(__name__)


@attrs.frozen
class RotationStep:
    """One thing a rotation does (or, in a dry run, would do) to one period's table.

    .. versionadded:: 0.1.0
    """

    #: ``"create"``, ``"step-down"``, ``"archive"`` or ``"drop"`` (or ``"scale"``, of
    #: :func:`pynamodb_sharding.capacity.scale`).
    action: str
    period: str
    table: str
    #: What the step changes, in words (``"on-demand"``, ``"read 100 -> 1, write 50 -> 1"``).
    detail: str
    #: Whether it was carried out (``False`` in a dry run and when it failed).
    done: bool = False
    #: Why it failed (an archive that raised; the table was kept), else ``None``.
    error: str | None = None

    def line(self, *, dry_run: bool) -> str:
        """The step as one line of the command's report."""
        verb = {"create": "create", "step-down": "step down", "archive": "archive", "drop": "drop",
                "scale": "scale"}[self.action]
        if self.error is not None:
            state = "FAILED"
        elif dry_run:
            state = "would"
        else:
            state = "done"
        tail = f" ({self.detail})" if self.detail else ""
        error = f": {self.error}" if self.error else ""
        return f"{state:<7}{verb:<10}{self.table}{tail}{error}"


@attrs.frozen
class Rotation:
    """What :func:`rotate` did.

    .. versionadded:: 0.1.0
    """

    model: type[Any] = attrs.field(repr=False)
    #: The current period the rotation worked from.
    current: str
    steps: tuple[RotationStep, ...]
    dry_run: bool

    @property
    def failed(self) -> tuple[RotationStep, ...]:
        """The steps that failed (their tables are kept)."""
        return tuple(step for step in self.steps if step.error is not None)

    def lines(self) -> list[str]:
        """The report, a line per step (``"nothing to do"`` when there is none)."""
        head = f"{self.model.__name__}: current period {self.current}" + (" (dry run: nothing changed)"
                                                                          if self.dry_run else "")
        return [head, *(step.line(dry_run=self.dry_run) for step in self.steps)] if self.steps else \
            [head, "nothing to do"]


def rotate(
    model: type[Any],
    *,
    now: float | None = None,
    ahead: int | None = None,
    dry_run: bool = False,
) -> Rotation:
    """Create the coming periods' tables, step down past ones, archive and drop expired ones.

    Args:
        model: a model declared with ``Meta.table_name = TimePartitioned(...)``.
        now: epoch seconds taken as now (default: the declaration's clock).
        ahead: periods after the current one to create (default: the declaration's ``ahead``).
        dry_run: report the steps without carrying out any.

    Returns:
        The steps, in order: creations, step-downs, then archive and drop per expired period.

    .. versionadded:: 0.1.0
    """
    declared = declaration(model)
    current = declared.current(now)
    ahead = declared.ahead if ahead is None else ahead
    if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
        msg = f"rotate({model.__name__}, ahead={ahead!r}): expected a whole number >= 0."
        raise ValueError(msg)
    existing = set(existing_periods(model))
    steps: list[RotationStep] = []

    for period in (declared.after(current, step) for step in range(ahead + 1)):
        if period in existing:
            continue
        table = period_model(model, period)
        billing = billing_arguments(model)
        detail = ("on-demand" if billing["billing_mode"] == "PAY_PER_REQUEST" else
                  f"provisioned {billing['read_capacity_units']} RCU / {billing['write_capacity_units']} WCU")
        if not dry_run:
            create_period_table(table)
        steps.append(RotationStep("create", period, table.Meta.table_name, detail, done=not dry_run))

    oldest_kept = None if declared.retention is None else declared.after(current, -declared.retention)
    for period in sorted(existing):
        if period >= current:
            continue
        table = period_model(model, period)
        name = table.Meta.table_name
        if oldest_kept is not None and period < oldest_kept:
            steps.extend(_expire(model, table, period, name, dry_run=dry_run))
        elif declared.step_down is not None:
            step = _step_down(table, period, name, declared.step_down, dry_run=dry_run)
            if step is not None:
                steps.append(step)
    for step in steps:
        logger.info("%s: %s", model.__name__, step.line(dry_run=dry_run))
    return Rotation(model=model, current=current, steps=tuple(steps), dry_run=dry_run)


def _step_down(
    table: type[Any], period: str, name: str, units: tuple[int, int], *, dry_run: bool,
) -> RotationStep | None:
    description = table.describe_table()
    if description.get("BillingModeSummary", {}).get("BillingMode") == "PAY_PER_REQUEST":
        return None  # on-demand: nothing provisioned to lower
    read, write = units
    changes: list[str] = []
    arguments: dict[str, Any] = {"TableName": name}
    throughput = description.get("ProvisionedThroughput", {})
    old_read, old_write = throughput.get("ReadCapacityUnits", 0), throughput.get("WriteCapacityUnits", 0)
    if not old_read and not old_write:
        return None  # DynamoDB Local reports no billing summary for on-demand tables, only zeros
    if (old_read, old_write) != (read, write):
        arguments["ProvisionedThroughput"] = {"ReadCapacityUnits": read, "WriteCapacityUnits": write}
        changes.append(f"read {old_read} -> {read}, write {old_write} -> {write}")
    updates = []
    for index in description.get("GlobalSecondaryIndexes", []):
        current = index.get("ProvisionedThroughput", {})
        index_units = (current.get("ReadCapacityUnits", 0), current.get("WriteCapacityUnits", 0))
        if index_units != (0, 0) and index_units != (read, write):
            updates.append({"Update": {"IndexName": index["IndexName"], "ProvisionedThroughput": {
                "ReadCapacityUnits": read, "WriteCapacityUnits": write}}})
            changes.append(f"index {index['IndexName']}: read {index_units[0]} -> {read}, "
                           f"write {index_units[1]} -> {write}")
    if updates:
        arguments["GlobalSecondaryIndexUpdates"] = updates
    if not changes:
        return None
    if not dry_run:
        botocore_client(table).update_table(**arguments)
    return RotationStep("step-down", period, name, "; ".join(changes), done=not dry_run)


def _expire(model: type[Any], table: type[Any], period: str, name: str, *, dry_run: bool) -> list[RotationStep]:
    declared = declaration(model)
    steps: list[RotationStep] = []
    if declared.archive is not None:
        start, end = declared.bounds(period)
        target = PeriodTable(model=table, period=period, table_name=name, start=start, end=end)
        archive_name = getattr(declared.archive, "__qualname__", None) or repr(declared.archive)
        if dry_run:
            steps.append(RotationStep("archive", period, name, f"with {archive_name}"))
        else:
            try:
                declared.archive(target)
            except Exception as error:  # the archive's own failure: keep the table, report it
                logger.exception("%s: archiving %s failed; the table is kept", model.__name__, name)
                reason = f"{type(error).__name__}: {error}; the table is kept"
                return [RotationStep("archive", period, name, f"with {archive_name}", error=reason)]
            steps.append(RotationStep("archive", period, name, f"with {archive_name}", done=True))
    detail = f"older than {declared.retention} {declared.period}s before the current one"
    if dry_run:
        steps.append(RotationStep("drop", period, name, detail))
        return steps
    try:
        table.delete_table(wait=False, shard_metadata=False)  # the counts are every period's
    except PynamoDBException as error:
        steps.append(RotationStep("drop", period, name, detail, error=f"{error}; the table is kept"))
        return steps
    steps.append(RotationStep("drop", period, name, detail, done=True))
    return steps


# -- the archive: DynamoDB's export to S3 ---------------------------------------------------------

#: ``ExportFormat`` values of ``ExportTableToPointInTime``.
EXPORT_FORMATS = ("DYNAMODB_JSON", "ION")


@attrs.frozen(repr=False)
class S3Export:
    """A rotation's ``archive``: export a period's table to S3 and wait until it is complete.

    Made by :func:`export_to_s3`; called by :func:`rotate` with the
    :class:`~pynamodb_sharding.PeriodTable` it is about to drop.

    .. versionadded:: 0.1.0
    """

    bucket: str
    prefix: str
    export_format: str
    bucket_owner: str | None
    kms_key_id: str | None
    enable_point_in_time_recovery: bool
    timeout: float
    poll_interval: float
    clock: Callable[[], float]
    sleep: Callable[[float], object]

    def __repr__(self) -> str:
        return f"export_to_s3({self.bucket!r}, prefix={self.prefix!r})"

    def __call__(self, table: PeriodTable) -> dict[str, Any]:
        """Export ``table`` to S3; returns DynamoDB's ``ExportDescription`` once ``COMPLETED``.

        Raises:
            ArchiveError: point-in-time recovery is off (and may not be enabled here), a request
                failed, the export ended ``FAILED``, or it was still running after ``timeout``.
        """
        client = botocore_client(table.model)
        name = table.table_name
        arn = self._call(client, "describe_table", name, TableName=name)["Table"]["TableArn"]
        self._ensure_point_in_time_recovery(client, name)
        arguments: dict[str, Any] = {
            "TableArn": arn, "S3Bucket": self.bucket, "ExportFormat": self.export_format,
            "S3Prefix": self.prefix.format(table=name, period=table.period),
        }
        if self.bucket_owner is not None:
            arguments["S3BucketOwner"] = self.bucket_owner
        if self.kms_key_id is not None:
            arguments["S3SseAlgorithm"] = "KMS"
            arguments["S3SseKmsKeyId"] = self.kms_key_id
        export = self._call(client, "export_table_to_point_in_time", name, **arguments)["ExportDescription"]
        export_arn = export["ExportArn"]
        logger.info("%s: export %s to s3://%s/%s started", name, export_arn, self.bucket, arguments["S3Prefix"])
        deadline = self.clock() + self.timeout
        while export.get("ExportStatus") == "IN_PROGRESS":
            left = deadline - self.clock()
            if left <= 0:
                msg = (
                    f"the export {export_arn} of table {name!r} to s3://{self.bucket}/{arguments['S3Prefix']} "
                    f"was still IN_PROGRESS after {self.timeout:g} s (export_to_s3(timeout=...)); the table "
                    f"is kept and the next rotation exports it again. Raise the timeout for large tables."
                )
                raise ArchiveError(msg)
            self.sleep(min(self.poll_interval, left))
            export = self._call(client, "describe_export", name, ExportArn=export_arn)["ExportDescription"]
        if export.get("ExportStatus") != "COMPLETED":
            reason = ": ".join(str(part) for part in (export.get("FailureCode"), export.get("FailureMessage")) if part)
            msg = (
                f"the export {export_arn} of table {name!r} to s3://{self.bucket}/{arguments['S3Prefix']} "
                f"ended {export.get('ExportStatus')}{f' ({reason})' if reason else ''}; the table is kept and "
                f"the next rotation exports it again."
            )
            raise ArchiveError(msg)
        logger.info("%s: export %s completed", name, export_arn)
        return dict(export)

    def _ensure_point_in_time_recovery(self, client: Any, name: str) -> None:
        backups = self._call(client, "describe_continuous_backups", name, TableName=name)
        recovery = backups.get("ContinuousBackupsDescription", {}).get("PointInTimeRecoveryDescription", {})
        if recovery.get("PointInTimeRecoveryStatus") == "ENABLED":
            return
        if not self.enable_point_in_time_recovery:
            msg = (
                f"table {name!r} has point-in-time recovery off, which an export to S3 needs, and "
                f"export_to_s3(enable_point_in_time_recovery=False) may not turn it on; nothing was exported "
                f"and the table is kept. Enable it on the table, or let the export enable it."
            )
            raise ArchiveError(msg)
        self._call(client, "update_continuous_backups", name, TableName=name,
                   PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        logger.info("%s: point-in-time recovery enabled for its export", name)

    @staticmethod
    def _call(client: Any, operation: str, table: str, **arguments: Any) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = getattr(client, operation)(**arguments)
        except (ClientError, BotoCoreError) as error:
            msg = f"{operation} for the export of table {table!r} failed: {error}; the table is kept."
            raise ArchiveError(msg, error) from error
        return answer


def export_to_s3(
    bucket: str,
    *,
    prefix: str = "{table}/",
    export_format: str = "DYNAMODB_JSON",
    bucket_owner: str | None = None,
    kms_key_id: str | None = None,
    enable_point_in_time_recovery: bool = True,
    timeout: float = 6 * 3600.0,
    poll_interval: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> S3Export:
    """An ``archive=`` for :class:`~pynamodb_sharding.TimePartitioned`: DynamoDB's export
    of the period's table to S3 (``ExportTableToPointInTime``), waited for.

    The export reads the table's point-in-time backup, not the table, so it consumes none of
    its capacity. Point-in-time recovery must be on: it is turned on when it is off
    (``UpdateContinuousBackups``), unless ``enable_point_in_time_recovery=False``. The call
    returns once ``DescribeExport`` says ``COMPLETED``; ``FAILED``, a failed request or
    ``timeout`` raise, so the rotation keeps the table and tries again next time (a new export:
    each writes under its own ``AWSDynamoDB/<export id>/`` in the prefix).

    Args:
        bucket: the S3 bucket (in any region; ``bucket_owner`` for another account's).
        prefix: the S3 key prefix, with ``{table}`` and ``{period}`` filled in
            (``"user_log/{period}/"``).
        export_format: ``"DYNAMODB_JSON"`` or ``"ION"``.
        bucket_owner: the account id owning ``bucket``, when it is not the table's.
        kms_key_id: encrypt the export with this KMS key (``S3SseAlgorithm="KMS"``); default: S3's keys.
        enable_point_in_time_recovery: turn point-in-time recovery on when it is off.
        timeout: the most seconds to wait for the export (large tables take hours).
        poll_interval: seconds between two ``DescribeExport`` requests.
        clock, sleep: monotonic seconds and the wait between polls; injectable for tests.

    Raises:
        ValueError: an argument is not one of the accepted values.

    .. versionadded:: 0.1.0
    """
    if not isinstance(bucket, str) or not bucket:
        msg = f"export_to_s3({bucket!r}): name the S3 bucket, e.g. export_to_s3('my-log-archive')."
        raise ValueError(msg)
    try:
        prefix.format(table="t", period="p")
    except (KeyError, IndexError, ValueError, AttributeError) as error:
        msg = (
            f"export_to_s3(prefix={prefix!r}): only {{table}} and {{period}} can be filled in ({error!r}); "
            f"e.g. prefix='user_log/{{period}}/'."
        )
        raise ValueError(msg) from None
    if export_format not in EXPORT_FORMATS:
        msg = f"export_to_s3(export_format={export_format!r}): expected one of {', '.join(map(repr, EXPORT_FORMATS))}."
        raise ValueError(msg)
    for label, value in (("timeout", timeout), ("poll_interval", poll_interval)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            msg = f"export_to_s3({label}={value!r}): expected a number of seconds > 0."
            raise ValueError(msg)
    return S3Export(
        bucket=bucket, prefix=prefix, export_format=export_format, bucket_owner=bucket_owner, kms_key_id=kms_key_id,
        enable_point_in_time_recovery=enable_point_in_time_recovery, timeout=float(timeout),
        poll_interval=float(poll_interval), clock=clock, sleep=sleep,
    )
