"""``rotate()`` of a time-partitioned model's tables on DynamoDB Local, with an injected clock.

Proves: a rotation creates the current and ``ahead`` periods' tables (provisioned as the
model's ``Meta`` says), lowers past provisioned tables (and their indexes) to ``step_down``,
archives then drops the tables past ``retention`` and nothing newer; the archive step is given
the whole table (its items read back equal what was written); an archive that raises keeps
its table and the next rotation retries it; a dry run reports the same steps and changes
nothing; a second rotation does nothing; the current and previous periods are never dropped.
``export_to_s3`` enables point-in-time recovery, exports, waits for ``COMPLETED`` and keeps the
table on ``FAILED`` or a timeout (DynamoDB Local has none of those APIs: a botocore stub answers
exactly them).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import ArchiveError, PeriodTable, RandomShards, ShardedModel, Sharding, TimePartitioned
from pynamodb_sharding._partitioned import existing_periods
from pynamodb_sharding.rotation import export_to_s3, rotate
from tests.clock import Clock
from tests.raw import provisioned_throughput, raw_client, raw_items

Bind = Callable[..., Any]
UTC = dt.UTC


def epoch(year: int, month: int, day: int = 1, hour: int = 0) -> float:
    return dt.datetime(year, month, day, hour, tzinfo=UTC).timestamp()


CLOCK = Clock(epoch(2015, 10, 5))


class Archive:
    """Records each archived period with the items its table held; fails for ``failing``."""

    def __init__(self) -> None:
        self.archived: dict[str, list[tuple[str, int]]] = {}
        self.failing: set[str] = set()

    def __call__(self, table: PeriodTable) -> None:
        if table.period in self.failing:
            msg = f"the export of {table.table_name} failed"
            raise RuntimeError(msg)
        self.archived[table.period] = sorted((item.user_id, int(item.accessed_at)) for item in table.model.scan())


ARCHIVE = Archive()


class ByPage(GlobalSecondaryIndex["RotLog"]):
    class Meta:
        index_name = "by_page"
        projection = AllProjection()
        read_capacity_units = 40
        write_capacity_units = 30

    page = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)


class RotLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned("rot_log.{period}", attribute="accessed_at", period="month", ahead=2,
                                     retention=2, step_down=(1, 1), archive=ARCHIVE, clock=CLOCK)
        read_capacity_units = 50
        write_capacity_units = 20

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    page = UnicodeAttribute(default="/")
    by_page = ByPage()
    shards = Sharding(RandomShards(2))


def throughput(model: type[Any], period: str) -> tuple[int, int, tuple[int, int]]:
    """A period's table's capacity units, and its index's."""
    return provisioned_throughput(model.period_model(period))


@pytest.fixture
def rot_log(dynamodb_models: Bind) -> type[RotLog]:
    """October 2015's table (made by the binding), then a rotation on 5 October: November and December."""
    CLOCK.now = epoch(2015, 10, 5)
    ARCHIVE.archived.clear()
    ARCHIVE.failing.clear()
    dynamodb_models(RotLog)
    first = rotate(RotLog)
    assert [(step.action, step.period) for step in first.steps] == [("create", "201511"), ("create", "201512")]
    for month in (10, 11, 12):
        for user in ("a", "b"):
            RotLog(user_id=user, accessed_at=epoch(2015, month, 3)).save()
    return RotLog


def test_rotation_creates_ahead_steps_down_archives_and_drops(rot_log: type[RotLog]) -> None:
    assert existing_periods(rot_log) == ["201510", "201511", "201512"]
    assert throughput(rot_log, "201512") == (50, 20, (40, 30))  # provisioned as Meta says

    CLOCK.now = epoch(2016, 2, 10)
    dry = rotate(rot_log, dry_run=True)
    plan = [(step.action, step.period) for step in dry.steps]
    assert plan == [("create", "201602"), ("create", "201603"), ("create", "201604"),
                    ("archive", "201510"), ("drop", "201510"), ("archive", "201511"), ("drop", "201511"),
                    ("step-down", "201512")]
    assert not any(step.done for step in dry.steps)
    assert "would" in "\n".join(dry.lines())
    # The dry run changed nothing.
    assert existing_periods(rot_log) == ["201510", "201511", "201512"]
    assert throughput(rot_log, "201512") == (50, 20, (40, 30))
    assert ARCHIVE.archived == {}

    done = rotate(rot_log)
    assert [(step.action, step.period) for step in done.steps] == plan
    assert all(step.done for step in done.steps)
    assert not done.failed
    assert existing_periods(rot_log) == ["201512", "201602", "201603", "201604"]
    assert throughput(rot_log, "201512") == (1, 1, (1, 1))
    assert throughput(rot_log, "201603") == (50, 20, (40, 30))
    # Each dropped table was archived whole first.
    assert ARCHIVE.archived == {"201510": [("a", int(epoch(2015, 10, 3))), ("b", int(epoch(2015, 10, 3)))],
                                "201511": [("a", int(epoch(2015, 11, 3))), ("b", int(epoch(2015, 11, 3)))]}
    # December is kept and still read.
    assert [int(item.accessed_at) for item in rot_log.query("a")] == [int(epoch(2015, 12, 3))]

    again = rotate(rot_log)
    assert again.steps == ()
    assert again.lines()[-1] == "nothing to do"


def test_a_failed_archive_keeps_its_table_until_a_later_rotation_succeeds(rot_log: type[RotLog]) -> None:
    ARCHIVE.failing.add("201510")
    result = rotate(rot_log, now=epoch(2016, 2, 10))
    assert [(step.action, step.period) for step in result.failed] == [("archive", "201510")]
    assert "the export of rot_log" in (result.failed[0].error or "")
    assert "FAILED" in "\n".join(result.lines())
    assert existing_periods(rot_log) == ["201510", "201512", "201602", "201603", "201604"]
    assert "201510" not in ARCHIVE.archived

    ARCHIVE.failing.clear()
    retried = rotate(rot_log, now=epoch(2016, 2, 10))
    assert [(step.action, step.period) for step in retried.steps] == [("archive", "201510"), ("drop", "201510")]
    assert existing_periods(rot_log) == ["201512", "201602", "201603", "201604"]


@pytest.mark.parametrize("now", [epoch(2015, 12, 1), epoch(2015, 12, 31, 23), epoch(2016, 1, 1)])
def test_retention_never_drops_the_current_or_a_kept_period(rot_log: type[RotLog], now: float) -> None:
    """retention=2: at any time of December or 1 January, October is the oldest that can go."""
    current = rot_log.Meta.table_name.current(now)
    result = rotate(rot_log, now=now)
    dropped = {step.period for step in result.steps if step.action == "drop"}
    kept = set(existing_periods(rot_log))
    assert current in kept
    assert all(period < rot_log.Meta.table_name.after(current, -2) for period in dropped)
    assert dropped == ({"201510"} if current == "201601" else set())


# -- export_to_s3: DynamoDB Local has no export or backup API, so a before-send stub answers
# -- exactly DescribeContinuousBackups, UpdateContinuousBackups, ExportTableToPointInTime and
# -- DescribeExport, as DynamoDB documents them; every other request reaches DynamoDB Local.


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class ExportService:
    """The export APIs of DynamoDB for one client; ``statuses`` are the export's successive
    ``ExportStatus`` answers (the first to ``ExportTableToPointInTime``)."""

    OPERATIONS = frozenset({"DescribeContinuousBackups", "UpdateContinuousBackups", "ExportTableToPointInTime",
                            "DescribeExport"})

    def __init__(self, model: type[Any], statuses: list[str], *, recovery: str = "DISABLED") -> None:
        self.statuses = list(statuses)
        self.recovery = recovery
        self.requests: list[tuple[str, dict[str, Any]]] = []
        model._get_connection().connection.client.meta.events.register_first(
            "before-send.dynamodb", self.before_send)

    def before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        if operation not in self.OPERATIONS:
            return None
        body = json.loads(request.body)
        self.requests.append((operation, body))
        if operation in ("DescribeContinuousBackups", "UpdateContinuousBackups"):
            if operation == "UpdateContinuousBackups":
                self.recovery = "ENABLED"
            recovery = {"PointInTimeRecoveryStatus": self.recovery}
            answer: dict[str, Any] = {"ContinuousBackupsDescription": {
                "ContinuousBackupsStatus": "ENABLED", "PointInTimeRecoveryDescription": recovery}}
        else:
            status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
            export = {"ExportArn": "arn:aws:dynamodb:us-east-1:000000000000:table/t/export/01", "ExportStatus": status}
            if status == "FAILED":
                export.update(FailureCode="S3AccessDenied", FailureMessage="Access Denied (injected)")
            answer = {"ExportDescription": export}
        headers = {"x-amzn-requestid": "stub", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 200, headers, _Body(json.dumps(answer).encode()))

    @property
    def operations(self) -> list[str]:
        return [operation for operation, _ in self.requests]


class FakeTime:
    """The export's clock and sleep: sleeping moves the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


TIME = FakeTime()


class ExportLog(ShardedModel):
    class Meta:
        table_name = TimePartitioned(
            "rot_export.{period}", attribute="accessed_at", period="month", retention=1, clock=CLOCK,
            archive=export_to_s3("log-archive", prefix="user_log/{period}/", timeout=600, poll_interval=60,
                                 clock=TIME.clock, sleep=TIME.sleep),
        )

    user_id = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


@pytest.fixture
def export_log(dynamodb_models: Bind) -> type[ExportLog]:
    """October 2015's table with an item; a rotation in December would archive and drop it."""
    CLOCK.now = epoch(2015, 10, 5)
    TIME.now, TIME.slept = 0.0, []
    dynamodb_models(ExportLog)
    ExportLog(user_id="a", accessed_at=epoch(2015, 10, 3)).save()
    return ExportLog


def test_export_to_s3_enables_recovery_exports_waits_then_the_table_is_dropped(export_log: type[ExportLog]) -> None:
    october = export_log.period_model("201510")
    service = ExportService(october, ["IN_PROGRESS", "IN_PROGRESS", "COMPLETED"])
    arn = raw_client(october).describe_table(TableName=october.Meta.table_name)["Table"]["TableArn"]

    result = rotate(export_log, now=epoch(2015, 12, 2))

    assert [(step.action, step.period, step.done) for step in result.steps] == [
        ("create", "201512", True), ("create", "201601", True), ("archive", "201510", True), ("drop", "201510", True),
    ]
    assert "with export_to_s3('log-archive', prefix='user_log/{period}/')" in result.lines()[3]
    assert service.operations == ["DescribeContinuousBackups", "UpdateContinuousBackups", "ExportTableToPointInTime",
                                  "DescribeExport", "DescribeExport"]
    assert service.requests[1][1] == {"TableName": october.Meta.table_name,
                                      "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}}
    export = dict(service.requests[2][1])
    assert export.pop("ClientToken")  # botocore's idempotency token: a resent request is one export
    assert export == {"TableArn": arn, "S3Bucket": "log-archive", "S3Prefix": "user_log/201510/",
                      "ExportFormat": "DYNAMODB_JSON"}
    assert TIME.slept == [60.0, 60.0]
    assert "201510" not in existing_periods(export_log)


def test_a_failed_export_keeps_the_table_until_one_completes(export_log: type[ExportLog]) -> None:
    october = export_log.period_model("201510")
    service = ExportService(october, ["IN_PROGRESS", "FAILED"], recovery="ENABLED")

    failed = rotate(export_log, now=epoch(2015, 12, 2))
    assert [(step.action, step.period) for step in failed.failed] == [("archive", "201510")]
    error = failed.failed[0].error or ""
    assert error.startswith("ArchiveError: the export arn:aws:dynamodb:us-east-1:000000000000:table/t/export/01 of "
                            f"table {october.Meta.table_name!r} to s3://log-archive/user_log/201510/ ended FAILED "
                            "(S3AccessDenied: Access Denied (injected)); the table is kept")
    assert "UpdateContinuousBackups" not in service.operations  # already enabled
    assert "201510" in existing_periods(export_log)
    assert [int(item["accessed_at"]["N"]) for item in raw_items(october)] == [int(epoch(2015, 10, 3))]

    service.statuses = ["COMPLETED"]
    retried = rotate(export_log, now=epoch(2015, 12, 2))
    assert [(step.action, step.done) for step in retried.steps] == [("archive", True), ("drop", True)]
    assert "201510" not in existing_periods(export_log)


def test_an_export_still_running_at_the_timeout_keeps_the_table(export_log: type[ExportLog]) -> None:
    october = export_log.period_model("201510")
    ExportService(october, ["IN_PROGRESS"], recovery="ENABLED")
    result = rotate(export_log, now=epoch(2015, 12, 2))
    assert "was still IN_PROGRESS after 600 s" in (result.failed[0].error or "")
    assert sum(TIME.slept) == 600.0
    assert "201510" in existing_periods(export_log)


def test_export_without_recovery_and_not_allowed_to_enable_it_exports_nothing(export_log: type[ExportLog]) -> None:
    october = export_log.period_model("201510")
    service = ExportService(october, ["COMPLETED"])
    strict = export_to_s3("log-archive", enable_point_in_time_recovery=False)
    start, end = export_log.Meta.table_name.bounds("201510")
    table = PeriodTable(model=october, period="201510", table_name=october.Meta.table_name, start=start, end=end)
    with pytest.raises(ArchiveError, match="point-in-time recovery off"):
        strict(table)
    assert service.operations == ["DescribeContinuousBackups"]
    with pytest.raises(ValueError, match="export_format"):
        export_to_s3("log-archive", export_format="CSV")
    with pytest.raises(ValueError, match=r"only \{table\} and \{period\}"):
        export_to_s3("log-archive", prefix="{month}/")
