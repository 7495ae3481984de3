"""Scaling a time-partitioned model's current table by time of day (seed 002's phase 2).

A model declared with ``TimePartitioned(..., capacity=Schedule({...}))`` keeps its current
period's provisioned table (and its global secondary indexes) at the units the schedule names
for the hour: :func:`scale`, run at each change of the schedule and at the start of each period
(an hourly cron job does both)::

    pynamodb-sharding tables scale myapp.models:UserLog

It never sets less than the load needs. The load is what a :class:`LoadSource` measures; the
library can measure only its own requests: :class:`ConsumedCapacityMeter` adds up the
``ConsumedCapacity`` DynamoDB returns to the requests this process sends through the model. A
scaler in another process (the command) sees none of them: give it a source that sees them all
(CloudWatch's ``ConsumedReadCapacityUnits`` and ``ConsumedWriteCapacityUnits``) with ``load=``
(``--load MODULE:function``), or it applies the schedule alone.
"""

from __future__ import annotations

import collections
import datetime as dt
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import PynamoDBException, TableDoesNotExist

from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._partitioned import declaration, period_model
from pynamodb_sharding._periods import PeriodTable
from pynamodb_sharding._schedule import CapacityWindow, Schedule
from pynamodb_sharding.rotation import RotationStep

__all__ = ["ConsumedCapacityMeter", "LoadSource", "Scaling", "TableLoad", "scale"]

#: Requests whose ``ConsumedCapacity`` is write units; the other measured ones are reads.
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})


@attrs.frozen
class TableLoad:
    """Capacity units per second a table consumes now: what :func:`scale` never goes below.

    .. versionadded:: 0.1.0
    """

    read: float = 0.0
    write: float = 0.0
    #: Per global secondary index name: ``(read, write)`` units per second.
    indexes: Mapping[str, tuple[float, float]] = attrs.field(factory=dict)


class LoadSource(Protocol):
    """What measures a period table's load for :func:`scale` (e.g. from CloudWatch).

    .. versionadded:: 0.1.0
    """

    def __call__(self, table: PeriodTable) -> TableLoad: ...


class ConsumedCapacityMeter:
    """The capacity units that this process's requests to a time-partitioned model's tables
    consumed, per second over the last ``window`` seconds: a :class:`LoadSource`.

    Hooks the botocore clients of the current and next periods' models (again on each call, so
    a meter that is asked at least once a period follows the calendar) and asks DynamoDB for
    the ``ConsumedCapacity`` of every item, query and scan request with the breakdown per
    index (``ReturnConsumedCapacity="INDEXES"`` where PynamoDB asks for ``"TOTAL"``). It sees
    the requests of this process only: run the scaler where the traffic is, or use a source
    that sees every process.

    Args:
        model: the declared time-partitioned model.
        window: seconds of history the rate is taken over (a meter younger than that divides
            by its age, at least one second).
        clock: monotonic seconds; injectable for tests.

    .. versionadded:: 0.1.0
    """

    def __init__(self, model: type[Any], *, window: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        declaration(model)  # refuses a model that is not time-partitioned
        if isinstance(window, bool) or not isinstance(window, (int, float)) or not window > 0:
            msg = f"ConsumedCapacityMeter({model.__name__}, window={window!r}): expected seconds > 0."
            raise ValueError(msg)
        self._model = model
        self._window = float(window)
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        # (when, table, index or None, write?, units), oldest first.
        self._samples: collections.deque[tuple[float, str, str | None, bool, float]] = collections.deque()
        self._hooked: set[int] = set()
        self._id = f"pynamodb_sharding.capacity.meter.{id(self)}"
        self.watch()

    def watch(self, now: float | None = None) -> None:
        """Hook the clients of the current and the next period's models (once each)."""
        declared = declaration(self._model)
        current = declared.current(now)
        for period in (current, declared.after(current)):
            client = botocore_client(period_model(self._model, period))
            with self._lock:
                if id(client) in self._hooked:
                    continue
                self._hooked.add(id(client))
            client.meta.events.register("provide-client-params.dynamodb", self._ask, unique_id=f"{self._id}.ask")
            client.meta.events.register("after-call.dynamodb", self._record, unique_id=f"{self._id}.record")

    def _ask(self, params: Any = None, model: Any = None, **_: Any) -> None:
        name = getattr(model, "name", None)
        if isinstance(params, dict) and name in _WRITES | _READS and params.get("ReturnConsumedCapacity") == "TOTAL":
            params["ReturnConsumedCapacity"] = "INDEXES"  # the same total, with the indexes' share

    def _record(self, parsed: Any = None, model: Any = None, **_: Any) -> None:
        name = getattr(model, "name", None)
        if (name not in _WRITES and name not in _READS) or not isinstance(parsed, Mapping):
            return
        consumed = parsed.get("ConsumedCapacity")
        entries = consumed if isinstance(consumed, list) else [consumed]
        declared = declaration(self._model)
        now = self._clock()
        samples: list[tuple[float, str, str | None, bool, float]] = []
        for entry in entries:
            if not isinstance(entry, Mapping) or declared.period_of_table(str(entry.get("TableName"))) is None:
                continue
            table = str(entry["TableName"])
            indexes = entry.get("GlobalSecondaryIndexes") or {}
            own = (entry.get("Table") or {}).get("CapacityUnits")
            if own is None:  # no breakdown: the whole total is the table's
                own = entry.get("CapacityUnits") or 0.0
            samples.append((now, table, None, name in _WRITES, float(own)))
            for index, units in indexes.items():
                samples.append((now, table, str(index), name in _WRITES, float(units.get("CapacityUnits") or 0.0)))
        if samples:
            with self._lock:
                self._samples.extend(samples)

    def __call__(self, table: PeriodTable) -> TableLoad:
        """Units per second ``table`` consumed, over the last ``window`` seconds."""
        self.watch()
        now = self._clock()
        per: dict[tuple[str | None, bool], float] = collections.defaultdict(float)
        with self._lock:
            while self._samples and self._samples[0][0] < now - self._window:
                self._samples.popleft()
            for _, name, index, write, units in self._samples:
                if name == table.table_name:
                    per[(index, write)] += units
        seconds = max(1.0, min(self._window, now - self._started))
        names = sorted({index for index, _ in per if index is not None})
        indexes = {index: (per[(index, False)] / seconds, per[(index, True)] / seconds) for index in names}
        return TableLoad(read=per[(None, False)] / seconds, write=per[(None, True)] / seconds, indexes=indexes)


@attrs.frozen
class Scaling:
    """What :func:`scale` did (or, in a dry run, would do).

    .. versionadded:: 0.1.0
    """

    model: type[Any] = attrs.field(repr=False)
    #: The current period, whose table was scaled.
    current: str
    #: The window of the schedule in effect.
    window: CapacityWindow
    #: The scale step (none when the table is already where it should be, or on-demand).
    steps: tuple[RotationStep, ...]
    dry_run: bool
    #: The load measured (``None``: no load source).
    load: TableLoad | None = None
    #: Why nothing was changed, when that is not because the table is already at its capacity.
    note: str | None = None

    @property
    def failed(self) -> tuple[RotationStep, ...]:
        """The steps that failed (e.g. DynamoDB refused a decrease)."""
        return tuple(step for step in self.steps if step.error is not None)

    def lines(self) -> list[str]:
        """The report, a line per step."""
        head = (f"{self.model.__name__}: current period {self.current}, {self.window.text} "
                f"{_zone(self.model)}: {self.window.read} RCU / {self.window.write} WCU")
        if self.dry_run:
            head += " (dry run: nothing changed)"
        lines = [head]
        if self.load is None:
            lines.append("load:  not measured (no load source): the schedule alone")
        else:
            lines.append(f"load:  read {self.load.read:.1f} units/s, write {self.load.write:.1f} units/s")
        lines += [step.line(dry_run=self.dry_run) for step in self.steps]
        if not self.steps:
            lines.append(self.note or "nothing to do")
        return lines


def _zone(model: type[Any]) -> str:
    schedule = declaration(model).capacity
    return str(getattr(schedule, "timezone", dt.UTC))


def _needs(units: float, utilization: float) -> int:
    """The capacity that keeps ``units`` per second at ``utilization`` (0 for no load)."""
    return math.ceil(units / utilization - 1e-9) if units > 0 else 0


def scale(
    model: type[Any],
    *,
    now: float | None = None,
    load: LoadSource | None = None,
    dry_run: bool = False,
) -> Scaling:
    """Set the current period's provisioned table and indexes to the schedule's capacity.

    The units are the schedule's for the time of day, or what the load needs
    (``load / target_utilization``, rounded up) when that is more. A table already at those
    units is not updated; an on-demand table is left as it is. DynamoDB limits decreases of
    a table's provisioned throughput per day: a refused one fails the step (the report says
    why) and the next run tries again.

    Args:
        model: a model declared with ``TimePartitioned(..., capacity=Schedule(...))``.
        now: epoch seconds taken as now (default: the declaration's clock).
        load: measures the table's load (e.g. a :class:`ConsumedCapacityMeter`); ``None``:
            the schedule alone.
        dry_run: report the change without making it.

    Raises:
        ValueError: the model declares no capacity schedule.

    .. versionadded:: 0.1.0
    """
    declared = declaration(model)
    schedule = declared.capacity
    if not isinstance(schedule, Schedule):
        msg = (
            f"scale({model.__name__}): {model.__name__} declares no capacity schedule; declare "
            f"TimePartitioned(..., capacity=Schedule({{'00:00-08:00': (5, 10), '08:00-24:00': (50, 100)}}))."
        )
        raise ValueError(msg)
    at = declared.clock() if now is None else now
    current = declared.current(at)
    window = schedule.window_at(dt.datetime.fromtimestamp(at, dt.UTC))
    table = period_model(model, current)
    name = table.Meta.table_name

    def report(steps: tuple[RotationStep, ...] = (), measured: TableLoad | None = None,
               note: str | None = None) -> Scaling:
        return Scaling(model=model, current=current, window=window, steps=steps, dry_run=dry_run, load=measured,
                       note=note)

    try:
        description = table.describe_table()
    except TableDoesNotExist:
        error = "the table does not exist; create it with `pynamodb-sharding tables rotate` first"
        return report((RotationStep("scale", current, name, "", error=error),))
    throughput = description.get("ProvisionedThroughput", {})
    on_demand = description.get("BillingModeSummary", {}).get("BillingMode") == "PAY_PER_REQUEST"
    if on_demand or not (throughput.get("ReadCapacityUnits") or throughput.get("WriteCapacityUnits")):
        # DynamoDB Local reports no billing summary for on-demand tables, only zeros.
        return report(note=f"nothing to do: {name} is on-demand, nothing is provisioned")
    start, end = declared.bounds(current)
    measured = None if load is None else load(PeriodTable(model=table, period=current, table_name=name,
                                                          start=start, end=end))
    utilization = schedule.target_utilization

    def target(read_load: float, write_load: float) -> tuple[int, int]:
        return (max(window.read, _needs(read_load, utilization)), max(window.write, _needs(write_load, utilization)))

    changes: list[str] = []
    arguments: dict[str, Any] = {"TableName": name}
    wanted = target(measured.read, measured.write) if measured else (window.read, window.write)
    old = (throughput.get("ReadCapacityUnits", 0), throughput.get("WriteCapacityUnits", 0))
    if old != wanted:
        arguments["ProvisionedThroughput"] = {"ReadCapacityUnits": wanted[0], "WriteCapacityUnits": wanted[1]}
        changes.append(f"read {old[0]} -> {wanted[0]}, write {old[1]} -> {wanted[1]}")
    updates = []
    for index in description.get("GlobalSecondaryIndexes", []):
        units = index.get("ProvisionedThroughput", {})
        index_old = (units.get("ReadCapacityUnits", 0), units.get("WriteCapacityUnits", 0))
        if index_old == (0, 0):
            continue
        index_load = (measured.indexes if measured else {}).get(index["IndexName"], (0.0, 0.0))
        index_wanted = target(*index_load)
        if index_old != index_wanted:
            updates.append({"Update": {"IndexName": index["IndexName"], "ProvisionedThroughput": {
                "ReadCapacityUnits": index_wanted[0], "WriteCapacityUnits": index_wanted[1]}}})
            changes.append(f"index {index['IndexName']}: read {index_old[0]} -> {index_wanted[0]}, "
                           f"write {index_old[1]} -> {index_wanted[1]}")
    if updates:
        arguments["GlobalSecondaryIndexUpdates"] = updates
    if not changes:
        return report(measured=measured, note=f"nothing to do: {name} is at its capacity")
    if measured and wanted != (window.read, window.write):
        changes.append(f"the load needs more than the schedule's {window.read} RCU / {window.write} WCU "
                       f"at {utilization:.0%} utilization")
    detail = "; ".join(changes)
    if dry_run:
        return report((RotationStep("scale", current, name, detail),), measured)
    try:
        botocore_client(table).update_table(**arguments)
    except (ClientError, BotoCoreError, PynamoDBException) as failure:
        # E.g. LimitExceededException: DynamoDB allows a limited number of decreases a day.
        return report((RotationStep("scale", current, name, detail, error=str(failure)),), measured)
    return report((RotationStep("scale", current, name, detail, done=True),), measured)
