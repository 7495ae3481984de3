"""A fleet of simulated processes on virtual time, against an in-memory DynamoDB.

Many processes (web workers, Lambda containers, queue workers) each run the library's **real**
code: every simulated process has its own model class and its own
:class:`~pynamodb_sharding.DynamicShards` instance (strategy, metadata store and caches,
growth, rate reports, read planning), with the strategy's ``clock``, ``sleep``, ``timer`` and
``random`` on the fleet's virtual time. Requests go through PynamoDB and botocore as they do
against DynamoDB (serialization, parsing, botocore's retry handler and the library's own event
hooks all run); botocore's ``before-send`` event answers them from :class:`FleetDynamoDB`, so no
socket is opened. botocore's retry sleeps and the library's sleeps wait on virtual time: a
process that sleeps lets the others run (each process is a greenlet; the event loop runs the
one due first).

:class:`FleetDynamoDB` keeps the items of each table and charges DynamoDB's per-partition
limits: per table and partition key value, a token bucket of ``write_units`` (1,000) write and
``read_units`` (3,000) read units a second, starting full with one second of burst. Writes
cost one unit per started KB of the larger of the old and new item; reads one unit per
started 4 KB returned (half when eventually consistent), admitted on their minimum and
charged the rest after, as :mod:`pynamodb_sharding.testing.simulator` does. Table, index and
metadata partitions are charged alike. A request over its partition's budget gets the
``ProvisionedThroughputExceededException`` DynamoDB sends, with its ``ThrottlingReasons``.

Scale: a simulated process may stand for ``weight`` identical real processes. Every request it
sends is then charged ``weight`` times its units, and counted ``weight`` times: the load on each
partition, metadata items included, is that of ``weight`` real processes doing what this one
does. What that leaves out, and what else the simulation does not model, is listed in
``docs/scale.rst``: the ``weight`` copies of one process make the same random choices at the
same moment; partitions never split (no adaptive capacity, no split for heat); no network
(every request takes zero time, no lost replies, no timeouts); no whole-table limits;
processes share one botocore client per table and region, so botocore's retry quota is shared.

Regions: ``Fleet(regions=(...))`` gives each region its own :class:`FleetDynamoDB` and makes
every table a global table (:class:`Replication`: each change is applied to the other regions
after a lag, last writer wins); a request is answered by the replica of the region whose
endpoint (:meth:`Fleet.region_host`) it was sent to, so ``Meta.home_region``,
``Meta.home_host`` and ``Meta.region_hosts`` route as they would between AWS regions.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import base64
import contextlib
import functools
import heapq
import itertools
import json
import math
import os
import random as _random
import re
import types
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import attrs
import botocore
import botocore.endpoint
from botocore.awsrequest import AWSResponse
from pynamodb.models import Model

from pynamodb_sharding import _host, _pool
from pynamodb_sharding._model import with_companions
from pynamodb_sharding._sizes import item_size
from pynamodb_sharding.testing import _expressions as expressions
from pynamodb_sharding.testing.simulator import (
    _equality_value,
    _hash_key_name,
    _RawBody,
    _throttle_body,
    read_units,
    write_units,
)

__all__ = [
    "COLD_KEYS",
    "HOT_READ",
    "REGIONS",
    "SCENARIOS",
    "VIRAL",
    "EventLoop",
    "Fleet",
    "FleetDynamoDB",
    "FleetReport",
    "ItemLoad",
    "LostChange",
    "Replication",
    "Scenario",
    "activity",
    "current_activity",
    "current_weight",
    "needed_shards",
    "run_scenario",
]

_PREFIX = "com.amazonaws.dynamodb.v20120810#"
_PAGE_BYTES = 1024 * 1024


# -- virtual time -------------------------------------------------------------------------------


class EventLoop:
    """Virtual time and the processes that run on it.

    ``spawn`` starts a function as a process (a greenlet) at a virtual time; ``sleep``, called
    by a process, lets the others run until the process is due again; ``run`` runs everything
    due up to a time. Time only moves when ``run`` takes the next process due: a process runs
    without interruption until it sleeps or ends, and takes no virtual time meanwhile.

    Args:
        start_epoch: the epoch second that virtual time 0 stands for (what :meth:`time` gives).

    .. versionadded:: 0.2.0
    """

    def __init__(self, start_epoch: float = 1_767_225_600.0) -> None:
        self.start_epoch = start_epoch
        self.now = 0.0
        self._queue: list[tuple[float, int, Any]] = []
        self._order = itertools.count()
        self._hub: Any = None

    def time(self) -> float:
        """Epoch seconds at the current virtual time (``DynamicShards(clock=...)``)."""
        return self.start_epoch + self.now

    def monotonic(self) -> float:
        """Virtual seconds since the start (``DynamicShards(timer=...)``)."""
        return self.now

    def spawn(self, function: Callable[[], object], at: float | None = None) -> None:
        """Run ``function`` as a process from virtual time ``at`` (now by default)."""
        heapq.heappush(self._queue, (self.now if at is None else at, next(self._order), function))

    def call_at(self, at: float, function: Callable[[], object]) -> None:
        """Call ``function`` at virtual time ``at``, in the loop itself (not as a process: it
        must not sleep). What the simulated DynamoDB does on its own (replication) runs so."""
        heapq.heappush(self._queue, (at, next(self._order), _Call(function)))

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of virtual time (from a process: the others run meanwhile).

        Called outside a process (by the code driving the loop), it only moves time forward.
        """
        import greenlet

        current = greenlet.getcurrent()
        if self._hub is None or current is self._hub:
            self.now += max(0.0, seconds)
            return
        heapq.heappush(self._queue, (self.now + max(0.0, seconds), next(self._order), current))
        self._hub.switch()

    def run(self, until: float) -> None:
        """Run every process due up to virtual time ``until``, in time order; time is then
        ``until``. An exception a process raises ends the run and is raised here."""
        import greenlet

        self._hub = greenlet.getcurrent()
        try:
            while self._queue and self._queue[0][0] <= until:
                at, _, runnable = heapq.heappop(self._queue)
                self.now = max(self.now, at)
                if isinstance(runnable, _Call):
                    runnable.function()
                    continue
                if not isinstance(runnable, greenlet.greenlet):
                    runnable = greenlet.greenlet(runnable, parent=self._hub)
                runnable.switch()
            self.now = max(self.now, until)
        finally:
            self._hub = None

    @property
    def pending(self) -> int:
        """How many processes (or wake-ups) are waiting."""
        return len(self._queue)


@attrs.frozen
class _Call:
    """A call the loop makes itself (:meth:`EventLoop.call_at`)."""

    function: Callable[[], object]


def current_weight() -> int:
    """The weight of the running process: how many real processes it stands for (1 outside a
    process or when it has none)."""
    import greenlet

    return int(getattr(greenlet.getcurrent(), "fleet_weight", 1))


def _note_throttle() -> None:
    """Count a throttle against the running process (see :func:`throttles_met`)."""
    import greenlet

    current = greenlet.getcurrent()
    setattr(current, "fleet_throttles", getattr(current, "fleet_throttles", 0) + 1)  # noqa: B010


@contextlib.contextmanager
def throttles_met() -> Iterator[list[int]]:
    """Within the block, count the throttles the running process's requests meet (retried or
    not): the list yielded holds that count once the block ends."""
    import greenlet

    current = greenlet.getcurrent()
    before = getattr(current, "fleet_throttles", 0)
    met = [0]
    try:
        yield met
    finally:
        met[0] = getattr(current, "fleet_throttles", 0) - before


def current_activity() -> str:
    """What the running process said it is doing (``"write"``, ``"query"``...; ``""``)."""
    import greenlet

    return str(getattr(greenlet.getcurrent(), "fleet_activity", ""))


@contextlib.contextmanager
def activity(name: str, weight: int | None = None) -> Iterator[None]:
    """Within the block, the running process's requests are counted under ``name`` (and
    charged ``weight`` times, when given)."""
    import greenlet

    current = greenlet.getcurrent()
    previous = getattr(current, "fleet_activity", ""), getattr(current, "fleet_weight", 1)
    # Attributes of the running greenlet: its process's activity and weight.
    setattr(current, "fleet_activity", name)  # noqa: B010
    if weight is not None:
        setattr(current, "fleet_weight", weight)  # noqa: B010
    try:
        yield
    finally:
        setattr(current, "fleet_activity", previous[0])  # noqa: B010
        setattr(current, "fleet_weight", previous[1])  # noqa: B010


# -- the in-memory DynamoDB ---------------------------------------------------------------------


class _ServiceError(Exception):
    def __init__(self, kind: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.body = {"__type": _PREFIX + kind, "message": message, **fields}


@attrs.define
class _Index:
    """A global secondary index of a table: its entries, kept on every write of the table."""

    name: str
    hash_key: str
    range_key: str | None
    #: ``ALL``, ``KEYS_ONLY`` or ``INCLUDE`` (with :attr:`included`)
    projection: str = "ALL"
    included: tuple[str, ...] = ()
    #: index hash key text -> {(index range value, table hash text, table range value) -> projected item}
    partitions: dict[str, dict[Any, dict[str, Any]]] = attrs.Factory(lambda: defaultdict(dict))

    def entry(self, table: _Table, item: Mapping[str, Any] | None) -> tuple[str, Any, dict[str, Any]] | None:
        """Where ``item`` sits in the index and what the index holds of it; ``None`` when the
        item lacks the index's key attributes (a sparse index leaves it out)."""
        if item is None:
            return None
        partition = _text(item.get(self.hash_key))
        if partition is None or (self.range_key is not None and self.range_key not in item):
            return None
        rank = _key_value(item[self.range_key]) if self.range_key is not None else None
        sort = (rank, _text(item.get(table.hash_key)), _key_value(item[table.range_key]) if table.range_key else None)
        if self.projection == "ALL":
            return partition, sort, dict(item)
        keep = {table.hash_key, table.range_key, self.hash_key, self.range_key, *self.included}
        return partition, sort, {name: value for name, value in item.items() if name in keep}


@attrs.define
class _Table:
    name: str
    hash_key: str
    range_key: str | None
    #: partition key text -> {range key (comparable) -> item}
    partitions: dict[str, dict[Any, dict[str, Any]]] = attrs.Factory(lambda: defaultdict(dict))
    #: global secondary indexes (read replicas included) by name
    indexes: dict[str, _Index] = attrs.Factory(dict)
    #: a provisioned table's (write, read) units per second; ``None``: on-demand (no table limit)
    provisioned: tuple[float, float] | None = None


@attrs.frozen
class ItemLoad:
    """The heaviest second of one partition: units and requests, as DynamoDB would count them.

    .. versionadded:: 0.2.0
    """

    table: str
    key: str
    second: int
    units: float
    write: bool


def _key_value(value: Mapping[str, Any]) -> Any:
    ((kind, content),) = value.items()
    if kind == "N":
        return Decimal(content)
    if kind == "B":
        return base64.b64decode(content) if isinstance(content, str) else bytes(content)
    return content


def _text(value: Any) -> str | None:
    if isinstance(value, Mapping) and len(value) == 1:
        (content,) = value.values()
        if isinstance(content, str | int | float):
            return str(content)
    return None


def _normalized(value: Any) -> Any:
    """An attribute value as DynamoDB stores it: numbers in their shortest form (``"1.50"`` is
    stored as ``"1.5"``, ``"2.0"`` as ``"2"``), in sets and documents too."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return value
    ((kind, content),) = value.items()
    if kind == "N":
        return {"N": expressions.number_text(Decimal(str(content)))}
    if kind == "NS" and isinstance(content, list):
        return {"NS": [expressions.number_text(Decimal(str(n))) for n in content]}
    if kind == "L" and isinstance(content, list):
        return {"L": [_normalized(element) for element in content]}
    if kind == "M" and isinstance(content, Mapping):
        return {"M": {name: _normalized(element) for name, element in content.items()}}
    return value


def _stored(item: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``item`` as DynamoDB stores it (see :func:`_normalized`)."""
    return {name: _normalized(value) for name, value in item.items()}


def _indexes_of(model: type[Model], hash_key: str, range_key: str | None) -> dict[str, _Index]:
    """The global secondary indexes ``model`` declares, and its read replicas
    (``Sharding(read_replicas=N)``: indexes keyed like the table, projecting everything)."""
    from pynamodb.indexes import GlobalSecondaryIndex

    from pynamodb_sharding._descriptor import is_sharded, shard_manager
    from pynamodb_sharding._replicas import replica_names

    found: dict[str, _Index] = {}
    for name, index in _host.indexes(model).items():
        if not isinstance(index, GlobalSecondaryIndex):
            continue
        ranged = _host.index_range_attribute(index)
        projection = index.Meta.projection
        found[name] = _Index(
            name, _host.index_hash_attribute(index).attr_name, None if ranged is None else ranged.attr_name,
            str(projection.projection_type), tuple(getattr(projection, "non_key_attributes", None) or ()),
        )
    if is_sharded(model):
        for name in replica_names(shard_manager(model).read_replicas):
            found[name] = _Index(name, hash_key, range_key)
    return found


#: What one write asks of one bucket: (bucket table, partition key or ``None`` for the whole
#: table, units, the throttling reason if the bucket is short).
_Charge = tuple[str, str | None, float, str]


class FleetDynamoDB:
    """Tables in memory, charged per partition as DynamoDB does (see the module docstring and
    the table of modelled behaviour in ``docs/scale.rst``).

    Serves ``PutItem``, ``UpdateItem``, ``DeleteItem``, ``GetItem``, ``Query`` (tables and global
    secondary indexes, read replicas included), ``Scan``, ``BatchGetItem``, ``BatchWriteItem``,
    ``TransactWriteItems``, ``TransactGetItems`` and ``DescribeTable``: every request the library
    sends, with the responses DynamoDB Local gives (``tests/integration/test_fleet_differential.py``
    replays the same requests against both). Any other operation gets a ``ValidationException``
    naming it. Counters (``requests``, ``throttles``, ``units``) count real requests: a request
    of a process of weight ``w`` counts ``w`` times.

    Args:
        clock: virtual seconds (:meth:`EventLoop.monotonic`), for the buckets and per-second loads.
        write_units: write units per second per partition (of a table or of an index).
        read_units: read units per second per partition.
        region: the region whose ARNs throttles name.
        record: keep every request and its response in :attr:`journal`.

    .. versionadded:: 0.2.0
    """

    #: Seconds of unused capacity a provisioned table keeps for bursts, as DynamoDB documents.
    BURST_SECONDS = 300.0

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        write_units: float = 1000.0,
        read_units: float = 3000.0,
        region: str = "us-east-1",
        record: bool = False,
    ) -> None:
        self.clock = clock
        self.limits = {True: float(write_units), False: float(read_units)}
        self.region = region
        self.tables: dict[str, _Table] = {}
        self.watched: set[str] = set()
        self._buckets: dict[tuple[str, str | None, bool], list[float]] = {}
        #: (table, operation, activity) -> requests (real ones: weight-fold)
        self.requests: Counter[tuple[str, str, str]] = Counter()
        #: (table, write) -> throttled requests (real ones); an index's under ``"<table>/index/<name>"``
        self.throttles: Counter[tuple[str, bool]] = Counter()
        #: (table, partition key, write) -> throttled requests (real ones), per item
        self.item_throttles: Counter[tuple[str, str, bool]] = Counter()
        #: (table, write) -> units charged (admitted requests)
        self.units: defaultdict[tuple[str, bool], float] = defaultdict(float)
        #: (table, write) -> units refused
        self.refused_units: defaultdict[tuple[str, bool], float] = defaultdict(float)
        #: watched table -> (key, second, write) -> units
        self.per_second: defaultdict[str, defaultdict[tuple[str, int, bool], float]] = defaultdict(
            lambda: defaultdict(float)
        )
        #: watched table -> (key, second, write) -> requests (real ones)
        self.requests_per_second: defaultdict[str, Counter[tuple[str, int, bool]]] = defaultdict(Counter)
        #: requests served (simulated ones: not weighted)
        self.sent = 0
        #: (virtual time, partition) of each put sent under the activity ``"first-write"``
        self.first_writes: list[tuple[float, str]] = []
        #: callbacks ``(table, key, new item)`` after each write of a watched table (a
        #: replicated one too)
        self.on_write: list[Callable[[str, str, dict[str, Any]], None]] = []
        #: callbacks ``(table, key, range key, new item or None, units)`` after each write this
        #: replica took from a client (not a replicated one): what :class:`Replication` copies
        self.on_stored: list[Callable[[str, str, Any, dict[str, Any] | None, float], None]] = []
        #: table -> conditional writes refused by their condition (real ones)
        self.condition_failures: Counter[str] = Counter()
        #: table -> units of replicated writes charged (global tables)
        self.replicated_units: defaultdict[str, float] = defaultdict(float)
        #: with ``record``: (operation, request body, HTTP status, response body) of every request
        self.journal: list[tuple[str, dict[str, Any], int, dict[str, Any]]] | None = [] if record else None

    # -- tables -------------------------------------------------------------------------------

    def add_table(self, model: type[Model], *, watched: bool = False,
                  provisioned: tuple[float, float] | None = None) -> None:
        """Serve ``model``'s table (empty), keyed as the model declares, with its global
        secondary indexes and read replicas; ``provisioned``: the table's (write, read) capacity
        units a second (with :attr:`BURST_SECONDS` of burst), else on-demand."""
        name = model.Meta.table_name
        range_key = next((a.attr_name for a in model.get_attributes().values() if a.is_range_key), None)
        if name not in self.tables:
            hash_key = _hash_key_name(model)
            self.tables[name] = _Table(name, hash_key, range_key, indexes=_indexes_of(model, hash_key, range_key),
                                       provisioned=provisioned)
        else:
            table = self.tables[name]
            for index_name, index in _indexes_of(model, table.hash_key, table.range_key).items():
                table.indexes.setdefault(index_name, index)
        if watched:
            self.watched.add(name)

    def items(self, table: str) -> Iterator[dict[str, Any]]:
        """Every item of ``table`` (DynamoDB JSON)."""
        for partition in self.tables[table].partitions.values():
            yield from partition.values()

    # -- charging -----------------------------------------------------------------------------

    def _bucket(self, table: str, key: str | None, write: bool, rate: float | None = None,
                capacity: float | None = None) -> list[float]:
        """The token bucket of a partition (``key``), or of a whole provisioned table (``key``
        ``None``, with ``rate`` and ``capacity``), refilled up to now."""
        now = self.clock()
        rate = self.limits[write] if rate is None else rate
        full = rate if capacity is None else capacity
        bucket = self._buckets.get((table, key, write))
        if bucket is None:
            bucket = self._buckets[(table, key, write)] = [full, now]
        else:
            bucket[0] = min(full, bucket[0] + max(0.0, now - bucket[1]) * rate)
            bucket[1] = max(bucket[1], now)
        return bucket

    def _table_bucket(self, table: _Table, write: bool) -> list[float] | None:
        if table.provisioned is None:
            return None
        rate = table.provisioned[0 if write else 1]
        return self._bucket(table.name, None, write, rate=rate, capacity=rate * self.BURST_SECONDS)

    def admit(self, table: str, key: str, units: float, *, write: bool, minimum: float | None = None) -> bool:
        """Take ``units`` from a partition's bucket if it holds them (a read: if it holds
        ``minimum``; the rest may go into debt); ``False`` (a throttle) otherwise."""
        bucket = self._bucket(table, key, write)
        known = self.tables.get(table)
        whole = None if known is None else self._table_bucket(known, write)
        needed = units if minimum is None else minimum
        if bucket[0] < needed or (whole is not None and whole[0] < needed):
            self._count_throttle(table, key, units, write)
            return False
        bucket[0] -= units
        if whole is not None:
            whole[0] -= units
        self._count_units(table, key, units, write)
        return True

    def _count_throttle(self, table: str, key: str, units: float, write: bool) -> None:
        self.throttles[(table, write)] += current_weight()
        self.item_throttles[(table, key, write)] += current_weight()
        self.refused_units[(table, write)] += units
        _note_throttle()

    def _count_units(self, table: str, key: str, units: float, write: bool) -> None:
        self.units[(table, write)] += units
        if table in self.watched:
            second = int(self.clock())
            self.per_second[table][(key, second, write)] += units
            self.requests_per_second[table][(key, second, write)] += current_weight()

    def _admit_writes(self, table: _Table, partition: str, units: float, indexes: list[tuple[str, str, float]]) -> None:
        """Take the units of one write from its partition, its table (provisioned) and each index
        partition it changes, all or none.

        Raises:
            _ServiceError: a bucket is short: the throttle DynamoDB sends, naming the table's key
                range, the table's capacity, or the index (back-pressure: a hot index partition
                refuses the write to the table).
        """
        whole = self._table_bucket(table, True)
        if self._bucket(table.name, partition, True)[0] < units:
            self._count_throttle(table.name, partition, units, True)
            raise self._throttle(table.name, write=True)
        if whole is not None and whole[0] < units:
            self._count_throttle(table.name, partition, units, True)
            raise self._throttle(table.name, write=True, reason="TableWriteProvisionedThroughputExceeded")
        for index, key, index_units in indexes:
            scope = f"{table.name}/index/{index}"
            if self._bucket(scope, key, True)[0] < index_units:
                self._count_throttle(scope, key, index_units, True)
                self._count_throttle(table.name, partition, units, True)
                raise self._throttle(scope, write=True, reason="IndexWriteKeyRangeThroughputExceeded")
        self._bucket(table.name, partition, True)[0] -= units
        if whole is not None:
            whole[0] -= units
        self._count_units(table.name, partition, units, True)
        for index, key, index_units in indexes:
            scope = f"{table.name}/index/{index}"
            self._bucket(scope, key, True)[0] -= index_units
            self._count_units(scope, key, index_units, True)

    def charge_after(self, table: str, key: str, units: float) -> None:
        """Take the rest of a read's cost, once its size is known (the bucket may go into debt)."""
        if units <= 0:
            return
        self._bucket(table, key, False)[0] -= units
        known = self.tables.get(table)
        whole = None if known is None else self._table_bucket(known, False)
        if whole is not None:
            whole[0] -= units
        self.units[(table, False)] += units
        if table in self.watched:
            self.per_second[table][(key, int(self.clock()), False)] += units

    def heaviest(self, table: str, *, write: bool, start: float = 0.0) -> ItemLoad | None:
        """The partition of a watched table with the most units in one second (from ``start``)."""
        best = None
        for (key, second, is_write), units in self.per_second[table].items():
            if is_write == write and second >= start and (best is None or units > best.units):
                best = ItemLoad(table, key, second, units, write)
        return best

    def heaviest_mean(self, table: str, *, write: bool, start: float, end: float) -> float:
        """The most units a second any partition of a watched table took on average from
        ``start`` to ``end`` (virtual seconds)."""
        totals: defaultdict[str, float] = defaultdict(float)
        for (key, second, is_write), units in self.per_second[table].items():
            if is_write == write and start <= second < end:
                totals[key] += units
        return max(totals.values(), default=0.0) / max(1.0, end - start)

    # -- serving ------------------------------------------------------------------------------

    def on_before_send(self, request: Any, **_: Any) -> AWSResponse:
        """botocore ``before-send`` handler: the response to ``request``, made here."""
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).rpartition(".")[2]
        body = json.loads(request.body or b"{}")
        status, answer = self.respond(operation, body)
        headers = {"x-amzn-requestid": "fleet", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, _RawBody(json.dumps(answer).encode()))

    def respond(self, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The HTTP status and body DynamoDB answers ``body`` with (an error's too)."""
        try:
            status, answer = 200, self.handle(operation, body)
        except _ServiceError as error:
            status, answer = 400, error.body
        except expressions.ExpressionError as error:
            status, answer = 400, {"__type": _PREFIX + "ValidationException", "message": str(error)}
        if self.journal is not None:
            self.journal.append((operation, json.loads(json.dumps(body)), status, json.loads(json.dumps(answer))))
        return status, answer

    def handle(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one request (the body botocore sends), or raise the error DynamoDB would."""
        handler = {
            "PutItem": self._put_item, "UpdateItem": self._update_item, "DeleteItem": self._delete_item,
            "GetItem": self._get_item, "Query": self._query, "Scan": self._scan, "BatchGetItem": self._batch_get,
            "BatchWriteItem": self._batch_write, "DescribeTable": self._describe_table,
            "TransactWriteItems": self._transact_write, "TransactGetItems": self._transact_get,
        }.get(operation)
        if handler is None:
            msg = f"the fleet simulator does not serve {operation}"
            raise _ServiceError("ValidationException", msg)
        table = body.get("TableName", "")
        self.sent += 1
        self.requests[(str(table), operation, current_activity())] += current_weight()
        _check_placeholders(body)
        for action in body.get("TransactItems") or ():
            for request in action.values():
                _check_placeholders(request)
        for request in (body.get("RequestItems") or {}).values() if operation == "BatchGetItem" else ():
            _check_placeholders(request)
        return handler(body)

    def _table(self, name: Any) -> _Table:
        table = self.tables.get(name)
        if table is None:
            msg = f"Requested resource not found: Table: {name} not found"
            raise _ServiceError("ResourceNotFoundException", msg)
        return table

    def _locate(self, table: _Table, key_or_item: Mapping[str, Any]) -> tuple[str, Any]:
        partition = _text(key_or_item.get(table.hash_key))
        if partition is None or (table.range_key is not None and table.range_key not in key_or_item):
            msg = "The provided key element does not match the schema"
            raise _ServiceError("ValidationException", msg)
        sort = _key_value(key_or_item[table.range_key]) if table.range_key else None
        return partition, sort

    def _key_only(self, table: _Table, key: Mapping[str, Any]) -> None:
        """Refuse a ``Key`` that holds more than the table's key attributes, as DynamoDB does."""
        if set(key) - {table.hash_key, table.range_key}:
            msg = "The provided key element does not match the schema"
            raise _ServiceError("ValidationException", msg)

    def _throttle(self, table: str, *, write: bool, reason: str | None = None) -> _ServiceError:
        reason = reason or f"Table{'Write' if write else 'Read'}KeyRangeThroughputExceeded"
        body = _throttle_body([types.SimpleNamespace(reason=reason, table=table)], self.region)  # type: ignore[list-item]
        return _ServiceError(body.pop("__type").rpartition("#")[2], body.pop("message"), **body)

    def _index_writes(self, table: _Table, old: Mapping[str, Any] | None,
                      new: Mapping[str, Any] | None) -> list[tuple[str, str, float]]:
        """(index, index partition, write units) of each index write a change of an item costs:
        an entry added, changed or removed costs one write of its projected size; an entry whose
        index key changed costs two (the old one removed, the new one added); an entry the change
        leaves as it was costs nothing."""
        writes: list[tuple[str, str, float]] = []
        for index in table.indexes.values():
            before, after = index.entry(table, old), index.entry(table, new)
            if before is not None and after is not None and before[:2] == after[:2]:
                if before[2] != after[2]:
                    writes.append((index.name, after[0], write_units(max(item_size(before[2]), item_size(after[2])))))
                continue
            for entry in (before, after):
                if entry is not None:
                    writes.append((index.name, entry[0], write_units(item_size(entry[2]))))
        return writes

    def _store(self, table: _Table, partition: str, sort: Any, old: dict[str, Any] | None,
               new: dict[str, Any] | None) -> None:
        """Put ``new`` (``None``: delete) at a key, and keep every index's entries."""
        for index in table.indexes.values():
            before, after = index.entry(table, old), index.entry(table, new)
            if before is not None:
                index.partitions.get(before[0], {}).pop(before[1], None)
            if after is not None:
                index.partitions[after[0]][after[1]] = after[2]
        if new is None:
            table.partitions.get(partition, {}).pop(sort, None)
        else:
            table.partitions[partition][sort] = new

    def _write(
        self, body: Mapping[str, Any], new: Callable[[dict[str, Any] | None], dict[str, Any] | None], *,
        charged: bool = False,
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None, float, list[tuple[str, str, float]]]:
        """Check the condition, charge, store ``new(old)``; returns the item before, the item
        stored, the table's units and the index writes.

        As DynamoDB: a condition that fails refuses the write with
        ``ConditionalCheckFailedException`` and still costs write units, the existing item's (at
        least one), before the update is evaluated (so an update that would read a missing
        attribute fails its condition, not its validation); a write costs one unit per started
        KB of the larger of the old and new item, plus its index writes
        (:meth:`_index_writes`)."""
        table = self._table(body.get("TableName"))
        given: Mapping[str, Any] = body.get("Item") or body.get("Key") or {}
        partition, sort = self._locate(table, given)
        old = table.partitions.get(partition, {}).get(sort)
        condition = body.get("ConditionExpression")
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        weight = current_weight()
        if condition and not expressions.condition(condition, names, values)(old or {}):
            units = write_units(item_size(old or {})) * weight
            if not charged:
                self._admit_writes(table, partition, units, [])
            self.condition_failures[table.name] += weight
            msg = "The conditional request failed"
            raise _ServiceError("ConditionalCheckFailedException", msg)
        after = new(None if old is None else json.loads(json.dumps(old)))
        units = write_units(max(item_size(old or {}), item_size(after or {}))) * weight
        index_writes = [(index, key, n * weight) for index, key, n in self._index_writes(table, old, after)]
        if not charged:
            self._admit_writes(table, partition, units, index_writes)
        else:  # inside a transaction, admitted as a whole: its index writes are taken as they come
            for index, key, index_units in index_writes:
                self._bucket(f"{table.name}/index/{index}", key, True)[0] -= index_units
        if body.get("Item") is not None and current_activity() == "first-write" and table.name not in self.watched:
            self.first_writes.append((self.clock(), partition))
        self._store(table, partition, sort, old, after)
        if table.name in self.watched and after is not None:
            for callback in self.on_write:
                callback(table.name, partition, after)
        for hook in self.on_stored:
            hook(table.name, partition, sort, after, units)
        return old, after, units, index_writes

    def replicate(self, table: str, partition: str, sort: Any, item: dict[str, Any] | None, units: float) -> None:
        """Apply a change another region's replica made (global tables): no condition, and
        never refused; its ``units`` are charged to the partition (which may go into debt, so
        that local writes throttle), as a replicated write takes the replica's capacity."""
        stored = self._table(table)
        self._store(stored, partition, sort, stored.partitions.get(partition, {}).get(sort), item)
        self._bucket(table, partition, True)[0] -= units
        self.replicated_units[table] += units
        if table in self.watched:
            self.per_second[table][(partition, int(self.clock()), True)] += units
            if item is not None:
                for callback in self.on_write:
                    callback(table, partition, item)

    def _consumed(self, body: Mapping[str, Any], units: float, indexes: Mapping[str, float] | None = None, *,
                  table_units: bool = True) -> dict[str, Any]:
        """``ConsumedCapacity`` as asked for (``TOTAL``: the sum; ``INDEXES``: also the table's
        and each index's share), in real units (a weighted process's request is one request)."""
        mode = body.get("ReturnConsumedCapacity")
        if mode not in ("TOTAL", "INDEXES"):
            return {}
        weight = current_weight()
        by_index = {name: n / weight for name, n in (indexes or {}).items()}
        real = units / weight
        consumed: dict[str, Any] = {"TableName": body.get("TableName"), "CapacityUnits": real + sum(by_index.values())}
        if mode == "INDEXES":
            if table_units:
                consumed["Table"] = {"CapacityUnits": real}
            if by_index:
                consumed["GlobalSecondaryIndexes"] = {name: {"CapacityUnits": n} for name, n in by_index.items()}
        return {"ConsumedCapacity": consumed}

    @staticmethod
    def _by_index(writes: list[tuple[str, str, float]]) -> dict[str, float]:
        totals: dict[str, float] = {}
        for index, _, units in writes:
            totals[index] = totals.get(index, 0.0) + units
        return totals

    def _returned(self, body: Mapping[str, Any], old: dict[str, Any] | None, new: dict[str, Any] | None,
                  *, allowed: tuple[str, ...]) -> dict[str, Any]:
        """``Attributes`` for ``ReturnValues`` (``ALL_OLD``, ``ALL_NEW``, ``UPDATED_*``)."""
        mode = body.get("ReturnValues") or "NONE"
        if mode == "NONE":
            return {}
        if mode not in allowed:
            msg = f"ReturnValues {mode} is not valid for this operation"
            raise _ServiceError("ValidationException", msg)
        if mode == "ALL_OLD":
            chosen = old
        elif mode == "ALL_NEW":
            chosen = new
        else:
            source = old if mode == "UPDATED_OLD" else new
            before, after = old or {}, new or {}
            changed = {name for name in set(before) | set(after) if before.get(name) != after.get(name)}
            chosen = {name: value for name, value in (source or {}).items() if name in changed}
        return {"Attributes": chosen} if chosen else {}

    def _put_item(self, body: dict[str, Any]) -> dict[str, Any]:
        old, _, units, writes = self._write(body, lambda old: _stored(body["Item"]))
        return {**self._returned(body, old, None, allowed=("NONE", "ALL_OLD")),
                **self._consumed(body, units, self._by_index(writes))}

    def _delete_item(self, body: dict[str, Any]) -> dict[str, Any]:
        self._key_only(self._table(body.get("TableName")), body.get("Key") or {})
        old, _, units, writes = self._write(body, lambda old: None)
        return {**self._returned(body, old, None, allowed=("NONE", "ALL_OLD")),
                **self._consumed(body, units, self._by_index(writes))}

    def _updated(self, table: _Table, body: Mapping[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """The item ``body``'s update expression makes of ``old`` (a copy; ``old`` is left as it is).

        Raises:
            _ServiceError: the update changes a key attribute.
            expressions.ExpressionError: it reads an attribute the item lacks, or is not valid.
        """
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        expression = body.get("UpdateExpression")
        item: dict[str, Any] = json.loads(json.dumps(old if old is not None else _stored(body.get("Key") or {})))
        if expression:
            # A process of weight w stands for w processes sending this request: their ADDs add up.
            scale = Decimal(str(current_weight()))
            expressions.update(expression, names, values, add_scale=scale)(item)
        for name in (table.hash_key, table.range_key):
            if name is not None and item.get(name) != (body.get("Key") or {}).get(name):
                msg = (f"One or more parameter values were invalid: Cannot update attribute {name}. "
                       f"This attribute is part of the key")
                raise _ServiceError("ValidationException", msg)
        return item

    def _update_item(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        self._key_only(table, body.get("Key") or {})
        if body.get("UpdateExpression"):  # an expression that cannot be read is refused before anything
            expressions.update(body["UpdateExpression"], body.get("ExpressionAttributeNames") or {},
                               body.get("ExpressionAttributeValues") or {})
        old, after, units, writes = self._write(body, lambda old: self._updated(table, body, old))
        return {**self._returned(body, old, after, allowed=("NONE", "ALL_OLD", "ALL_NEW", "UPDATED_OLD",
                                                           "UPDATED_NEW")),
                **self._consumed(body, units, self._by_index(writes))}

    def _transact_write(self, body: dict[str, Any]) -> dict[str, Any]:
        """ConditionChecks, Puts, Updates and Deletes, all or nothing, as DynamoDB does: each item
        costs twice the write units of the larger of its old and new versions, taken from its
        partition before the conditions are checked (a cancelled transaction costs them too); a
        partition short of them cancels the transaction (``ThrottlingError`` for that item), and
        so does a failed condition (``ConditionalCheckFailed``), naming each item's reason."""
        actions = body.get("TransactItems") or []
        weight = current_weight()
        plans: list[tuple[str, dict[str, Any], _Table, str, Any, dict[str, Any] | None, bool, float]] = []
        seen: set[tuple[str, str, Any]] = set()
        for action in actions:
            (kind, request), = action.items()
            if kind not in ("ConditionCheck", "Put", "Update", "Delete"):
                msg = f"the fleet simulator does not serve {kind} in a transaction"
                raise _ServiceError("ValidationException", msg)
            table = self._table(request.get("TableName"))
            partition, sort = self._locate(table, request.get("Item") or request.get("Key") or {})
            if (table.name, partition, sort) in seen:
                msg = "Transaction request cannot include multiple operations on one item"
                raise _ServiceError("ValidationException", msg)
            seen.add((table.name, partition, sort))
            old = table.partitions.get(partition, {}).get(sort)
            condition = request.get("ConditionExpression")
            names = request.get("ExpressionAttributeNames") or {}
            values = request.get("ExpressionAttributeValues") or {}
            failed = bool(condition) and not expressions.condition(condition, names, values)(old or {})
            new: dict[str, Any] | None = old
            if not failed:
                if kind == "Put":
                    new = _stored(request["Item"])
                elif kind == "Update":
                    new = self._updated(table, request, old)
                elif kind == "Delete":
                    new = None
            units = 2.0 * write_units(max(item_size(old or {}), item_size(new or {}))) * weight
            plans.append((kind, request, table, partition, sort, new, failed, units))
        short = [not self._bucket(table.name, partition, True)[0] >= units
                 for _, _, table, partition, _, _, _, units in plans]
        if any(short):
            for (_, _, table, partition, _, _, _, units), refused in zip(plans, short, strict=True):
                if refused:
                    self._count_throttle(table.name, partition, units, True)
            reasons = [{"Code": "ThrottlingError", "Message": "Throughput exceeds the current capacity of your table "
                        "or index."} if refused else {"Code": "None"} for refused in short]
            codes = ", ".join(reason["Code"] for reason in reasons)
            msg = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"
            raise _ServiceError("TransactionCanceledException", msg, CancellationReasons=reasons)
        for _, _, table, partition, _, _, _, units in plans:
            self._bucket(table.name, partition, True)[0] -= units
            self._count_units(table.name, partition, units, True)
        if any(failed for *_, failed, _ in plans):
            for *_, table, _, _, _, failed, _ in plans:
                if failed:
                    self.condition_failures[table.name] += weight
            reasons = [{"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
                       if failed else {"Code": "None"} for *_, failed, _ in plans]
            codes = ", ".join(reason["Code"] for reason in reasons)
            msg = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"
            raise _ServiceError("TransactionCanceledException", msg, CancellationReasons=reasons)
        for kind, request, _, _, _, new, _, _ in plans:
            if kind != "ConditionCheck":
                unconditional = {**request, "ConditionExpression": None}
                self._write(unconditional, lambda old, new=new: new, charged=True)  # type: ignore[misc]
        if body.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
            per_table: dict[str, float] = {}
            for _, _, table, _, _, _, _, units in plans:
                per_table[table.name] = per_table.get(table.name, 0.0) + units / weight
            return {"ConsumedCapacity": [{"TableName": name, "CapacityUnits": units}
                                         for name, units in per_table.items()]}
        return {}

    def _read_one(self, table: _Table, key: Mapping[str, Any], consistent: bool, *,
                  batch: bool = False) -> tuple[dict[str, Any] | None, float]:
        """Admit and charge a read of one item; returns the item and its units (a missing item
        costs the minimum, except in a ``BatchGetItem``, where it costs nothing, as DynamoDB
        Local charges)."""
        partition, sort = self._locate(table, key)
        weight = current_weight()
        least = read_units(0, consistent=consistent) * weight
        if not self.admit(table.name, partition, 0.0, write=False, minimum=least):
            raise self._throttle(table.name, write=False)
        item = table.partitions.get(partition, {}).get(sort)
        units = 0.0 if item is None and batch else read_units(item_size(item or {}), consistent=consistent) * weight
        self.charge_after(table.name, partition, units)
        return item, units

    def _get_item(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        self._key_only(table, body.get("Key") or {})
        item, units = self._read_one(table, body.get("Key") or {}, bool(body.get("ConsistentRead")))
        answer = self._consumed(body, units)
        if item is not None:
            answer["Item"] = _projected(item, body)
        return answer

    def _batch_get(self, body: dict[str, Any]) -> dict[str, Any]:
        """Each key read as a ``GetItem`` of its own (charged per item); keys whose partition is
        throttled come back in ``UnprocessedKeys``, or, when every key is, the throttle."""
        responses: dict[str, list[dict[str, Any]]] = {}
        unprocessed: dict[str, dict[str, Any]] = {}
        consumed: dict[str, float] = {}
        requested = 0
        for name, request in (body.get("RequestItems") or {}).items():
            table = self._table(name)
            responses.setdefault(name, [])
            for key in request.get("Keys") or []:
                requested += 1
                try:
                    item, units = self._read_one(table, key, bool(request.get("ConsistentRead")), batch=True)
                except _ServiceError as error:
                    if not error.body["__type"].endswith("ProvisionedThroughputExceededException"):
                        raise
                    unprocessed.setdefault(name, {**request, "Keys": []})["Keys"].append(key)
                    continue
                consumed[name] = consumed.get(name, 0.0) + units / current_weight()
                if item is not None:
                    responses[name].append(_projected(item, request))
        if requested and sum(len(entry["Keys"]) for entry in unprocessed.values()) == requested:
            raise self._throttle(next(iter(unprocessed)), write=False)
        answer: dict[str, Any] = {"Responses": responses, "UnprocessedKeys": unprocessed}
        if body.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
            answer["ConsumedCapacity"] = [{"TableName": name, "CapacityUnits": units}
                                          for name, units in consumed.items()]
        return answer

    def _transact_get(self, body: dict[str, Any]) -> dict[str, Any]:
        """Every item read consistently, at twice the read units, as DynamoDB charges."""
        found: list[dict[str, Any]] = []
        for action in body.get("TransactItems") or []:
            request = action.get("Get") or {}
            table = self._table(request.get("TableName"))
            partition, sort = self._locate(table, request.get("Key") or {})
            weight = current_weight()
            if not self.admit(table.name, partition, 2.0 * weight, write=False, minimum=2.0 * weight):
                raise _ServiceError("TransactionCanceledException", "Transaction cancelled",
                                    CancellationReasons=[{"Code": "ThrottlingError"}])
            item = table.partitions.get(partition, {}).get(sort)
            self.charge_after(table.name, partition, 2.0 * read_units(item_size(item or {}), consistent=True) * weight
                              - 2.0 * weight)
            found.append({} if item is None else {"Item": _projected(item, request)})
        return {"Responses": found}

    def _index(self, table: _Table, name: str) -> _Index:
        index = table.indexes.get(name)
        if index is None:
            msg = f"The table does not have the specified index: {name}"
            raise _ServiceError("ValidationException", msg)
        return index

    def _query(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        index = None if not body.get("IndexName") else self._index(table, body["IndexName"])
        hash_key = table.hash_key if index is None else index.hash_key
        partition = _equality_value(hash_key, body)
        if partition is None:
            msg = "Query condition missed key schema element"
            raise _ServiceError("ValidationException", msg)
        consistent = bool(body.get("ConsistentRead"))
        if index is not None and consistent:
            msg = "Consistent reads are not supported on global secondary indexes"
            raise _ServiceError("ValidationException", msg)
        weight = current_weight()
        scope = table.name if index is None else f"{table.name}/index/{index.name}"
        least = read_units(0, consistent=consistent) * weight
        if not self.admit(scope, partition, 0.0, write=False, minimum=least):
            reason = None if index is None else "IndexReadKeyRangeThroughputExceeded"
            raise self._throttle(scope, write=False, reason=reason)
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        key_condition = expressions.condition(body["KeyConditionExpression"], names, values)
        stored = (table.partitions if index is None else index.partitions).get(partition, {})
        forward = body.get("ScanIndexForward", True)
        ranged = table.range_key if index is None else index.range_key
        order = sorted(stored, key=_sortable, reverse=not forward) if ranged or index is not None else list(stored)
        start = body.get("ExclusiveStartKey")
        if start is not None:
            after = _position(table, index, start)
            mark = _sortable(after)
            order = [k for k in order if (_sortable(k) > mark if forward else _sortable(k) < mark)]
        limit = body.get("Limit")
        matched, size, last = [], 0, None
        for sort in order:
            item = stored[sort]
            if not key_condition(item):
                continue
            matched.append(item)
            size += item_size(item)
            last = item
            if (limit is not None and len(matched) >= limit) or size >= _PAGE_BYTES:
                break
        else:
            last = None
        # A page that read nothing costs nothing (DynamoDB Local's figure; it was admitted on the
        # minimum all the same: a request to a partition out of capacity is throttled).
        units = read_units(size, consistent=consistent) * weight if matched else 0.0
        self.charge_after(scope, partition, units)
        by_index = None if index is None else {index.name: units}
        return _read_page(body, table, index, matched, last,
                          self._consumed(body, 0.0 if index is not None else units, by_index))

    def _scan(self, body: dict[str, Any]) -> dict[str, Any]:
        """A scan of a table (or index), partition by partition in the order of a hash of their
        keys (``Segment`` of ``TotalSegments``: the partitions whose hash falls in it), charged to
        the table as a whole: no partition's bucket (a scan's reads spread over every partition)."""
        table = self._table(body.get("TableName"))
        index = None if not body.get("IndexName") else self._index(table, body["IndexName"])
        consistent = bool(body.get("ConsistentRead"))
        if index is not None and consistent:
            msg = "Consistent reads are not supported on global secondary indexes"
            raise _ServiceError("ValidationException", msg)
        partitions = table.partitions if index is None else index.partitions
        total, segment = int(body.get("TotalSegments") or 1), int(body.get("Segment") or 0)
        keys = sorted((zlib.crc32(key.encode()), key) for key in partitions if partitions[key])
        keys = [entry for entry in keys if entry[0] * total // 2**32 == segment]
        order = [(rank, key, sort) for rank, key in keys for sort in sorted(partitions[key], key=_sortable)]
        start = body.get("ExclusiveStartKey")
        if start is not None:
            start_key = _text(start.get(table.hash_key if index is None else index.hash_key)) or ""
            here = (zlib.crc32(start_key.encode()), start_key, _position(table, index, start))
            order = [entry for entry in order if (entry[0], entry[1], _sortable(entry[2])) >
                     (here[0], here[1], _sortable(here[2]))]
        limit = body.get("Limit")
        matched, size, last = [], 0, None
        for _, key, sort in order:
            item = partitions[key][sort]
            matched.append(item)
            size += item_size(item)
            last = item
            if (limit is not None and len(matched) >= limit) or size >= _PAGE_BYTES:
                break
        else:
            last = None
        units = read_units(size, consistent=consistent) * current_weight()
        whole = self._table_bucket(table, False)
        if whole is not None:
            whole[0] -= units
        self.units[(table.name, False)] += units
        return _read_page(body, table, index, matched, last, self._consumed(body, units))

    def _batch_write(self, body: dict[str, Any]) -> dict[str, Any]:
        """Each entry written on its own; entries whose partition is throttled come back in
        ``UnprocessedItems``, or, when every entry is, the throttle, as DynamoDB does."""
        unprocessed: dict[str, list[Any]] = {}
        entries_sent = 0
        error: _ServiceError | None = None
        for name, entries in (body.get("RequestItems") or {}).items():
            for entry in entries:
                entries_sent += 1
                single = {"TableName": name, **(entry.get("PutRequest") or entry.get("DeleteRequest") or {})}
                try:
                    if "PutRequest" in entry:
                        self._write(single, lambda old, s=single: _stored(s["Item"]))  # type: ignore[misc]
                    else:
                        self._write(single, lambda old: None)
                except _ServiceError as refused:
                    if not refused.body["__type"].endswith("ProvisionedThroughputExceededException"):
                        raise
                    error = refused
                    unprocessed.setdefault(name, []).append(entry)
        if error is not None and sum(len(entries) for entries in unprocessed.values()) == entries_sent:
            raise error
        return {"UnprocessedItems": unprocessed}

    def _describe_table(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        schema = [{"AttributeName": table.hash_key, "KeyType": "HASH"}]
        if table.range_key:
            schema.append({"AttributeName": table.range_key, "KeyType": "RANGE"})
        described: dict[str, Any] = {"TableName": table.name, "TableStatus": "ACTIVE", "KeySchema": schema}
        if table.indexes:
            described["GlobalSecondaryIndexes"] = [
                {"IndexName": index.name, "IndexStatus": "ACTIVE",
                 "KeySchema": [{"AttributeName": index.hash_key, "KeyType": "HASH"}]
                 + ([{"AttributeName": index.range_key, "KeyType": "RANGE"}] if index.range_key else []),
                 "Projection": {"ProjectionType": index.projection}}
                for index in table.indexes.values()
            ]
        return {"Table": described}


_EXPRESSIONS = ("ConditionExpression", "UpdateExpression", "KeyConditionExpression", "FilterExpression",
                "ProjectionExpression")
_PLACEHOLDER = re.compile(r"[#:][\w-]+")


def _check_placeholders(request: Mapping[str, Any]) -> None:
    """Refuse names and values a request gives but none of its expressions uses, as DynamoDB does."""
    used = set()
    for field in _EXPRESSIONS:
        text = request.get(field)
        if isinstance(text, str):
            used.update(_PLACEHOLDER.findall(text))
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        unused = sorted(set(request.get(field) or {}) - used)
        if unused:
            msg = f"Value provided in {field} unused in expressions: keys: {{{', '.join(unused)}}}"
            raise _ServiceError("ValidationException", msg)


def _sortable(key: Any) -> Any:
    """A table's range key, or an index entry's ``(index range, table hash, table range)``, in a
    form that sorts (``None`` first)."""
    if isinstance(key, tuple):
        return tuple((0, "") if part is None else (1, part) for part in key)
    return (0, "") if key is None else (1, key)


def _position(table: _Table, index: _Index | None, start: Mapping[str, Any]) -> Any:
    """Where an ``ExclusiveStartKey`` points in a partition's order (see :func:`_sortable`)."""
    sort = _key_value(start[table.range_key]) if table.range_key and table.range_key in start else None
    if index is None:
        return sort
    rank = _key_value(start[index.range_key]) if index.range_key and index.range_key in start else None
    return (rank, _text(start.get(table.hash_key)), sort)


def _read_page(body: dict[str, Any], table: Any, index: Any, matched: list[dict[str, Any]],
               last: dict[str, Any] | None, consumed: dict[str, Any]) -> dict[str, Any]:
    """A Query's or Scan's answer: the items read (``matched``) filtered by the request's
    ``FilterExpression``, counted, projected, and the page's last key (the table's key, and the
    index's for an index read)."""
    filtered = matched
    if body.get("FilterExpression"):
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        keep = expressions.condition(body["FilterExpression"], names, values)
        filtered = [item for item in matched if keep(item)]
    answer: dict[str, Any] = {"Count": len(filtered), "ScannedCount": len(matched), **consumed}
    if body.get("Select") != "COUNT":
        answer["Items"] = [_projected(item, body) for item in filtered]
    if last is not None:
        keys = [table.hash_key, table.range_key] + ([] if index is None else [index.hash_key, index.range_key])
        answer["LastEvaluatedKey"] = {name: last[name] for name in dict.fromkeys(keys) if name is not None}
    return answer


def _projected(item: dict[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """What a read returns of ``item`` for its ``ProjectionExpression`` (all of it without one)."""
    text = body.get("ProjectionExpression")
    if not text:
        return item
    return expressions.projection(text, body.get("ExpressionAttributeNames") or {})(item)


# -- global tables ------------------------------------------------------------------------------


@attrs.frozen
class LostChange:
    """A change one region's replica made that a concurrent change of the same item, made in
    another region before the first had arrived there, replaced everywhere (last writer wins).

    .. versionadded:: 0.2.0
    """

    table: str
    key: str
    region: str  #: where the lost change was made
    at: float  #: when (virtual seconds)
    winner: str  #: the region whose later change replaced it


#: One version of an item in one replica: (write time, serial, origin region, version vector).
_Version = tuple[float, int, str, tuple[int, ...]]


def _covers(newer: tuple[int, ...], older: tuple[int, ...]) -> bool:
    """Whether version vector ``newer`` has seen every change ``older`` has."""
    return all(a >= b for a, b in zip(newer, older, strict=True))


class Replication:
    """Multi-region eventually consistent global tables between a fleet's regions.

    Every change a region's replica takes from a client (every table: data and metadata) is
    applied to each other region's replica after a lag drawn, per change and per destination,
    uniformly from ``lag`` (virtual seconds), as DynamoDB replicates each item on its own: two
    changes of different items may arrive in either order. When a region changed an item before
    another region's change of it had arrived (the changes are concurrent: neither saw the
    other), the change made last wins in every region and the other is lost, without an error
    (last writer wins); each such loss is recorded in :attr:`lost`. Which changes saw which is
    tracked exactly with a version vector per item copy, so a change that arrives after a later
    change made on top of it (through a third region) is recognised as old and skipped, not
    counted as lost. Replicated writes are charged to the receiving partition and never refused
    (:meth:`FleetDynamoDB.replicate`).

    Args:
        loop: the fleet's event loop (replication runs in it, on virtual time).
        replicas: region -> that region's in-memory DynamoDB.
        lag: the lowest and highest replication lag, seconds.
        random: the source of the lags.
        lag_of: ``(table, from region, to region) -> seconds``, instead of drawing the lags
            (a test that needs one order of arrivals); also settable later as :attr:`lag_of`.

    .. versionadded:: 0.2.0
    """

    def __init__(self, loop: EventLoop, replicas: Mapping[str, FleetDynamoDB], *, lag: tuple[float, float] = (0.5, 1.5),
                 random: _random.Random | None = None,
                 lag_of: Callable[[str, str, str], float] | None = None) -> None:
        if not 0 <= lag[0] <= lag[1]:
            msg = f"Replication: lag={lag!r}; expected (lowest, highest) seconds with 0 <= lowest <= highest"
            raise ValueError(msg)
        self.loop = loop
        self.replicas = dict(replicas)
        self.regions = tuple(self.replicas)
        self.lag = lag
        self._random = random or _random.Random(0)
        self.lag_of = lag_of
        self._serial = itertools.count()
        # Per region and item: the version of the change it holds, and every change it has seen
        # (the element-wise maximum of the version vectors it took): a change made there next
        # is on top of all of them.
        self._versions: dict[str, dict[tuple[str, str, Any], _Version]] = {region: {} for region in self.regions}
        self._seen: dict[str, dict[tuple[str, str, Any], tuple[int, ...]]] = {region: {} for region in self.regions}
        #: changes copied to another region (one per change and destination)
        self.copied = 0
        #: copies that arrived after a later change made on top of them: skipped (nothing lost)
        self.superseded = 0
        #: (table, key, range key, origin region, write time) -> the loss: changes lost to a
        #: concurrent change (last writer wins)
        self.lost: dict[tuple[str, str, Any, str, float], LostChange] = {}
        #: copies in flight
        self.pending = 0
        #: callbacks ``(region, table, key, range key, item or None)`` when a region's replica
        #: shows a change: at once in the region that made it, after the lag in the others
        self.on_arrival: list[Callable[[str, str, str, Any, dict[str, Any] | None], None]] = []
        for region, replica in self.replicas.items():
            replica.on_stored.append(functools.partial(self._stored, region))

    def _stored(self, region: str, table: str, partition: str, sort: Any, item: dict[str, Any] | None,
                units: float) -> None:
        """A change ``region``'s replica took from a client: version it, send it to the others."""
        key = (table, partition, sort)
        mine = self.regions.index(region)
        seen = self._seen[region].get(key)
        clock = list(seen) if seen is not None else [0] * len(self.regions)
        clock[mine] += 1
        version: _Version = (self.loop.now, next(self._serial), region, tuple(clock))
        self._versions[region][key] = version
        self._seen[region][key] = version[3]
        for callback in self.on_arrival:
            callback(region, table, partition, sort, item)
        for target in self.regions:
            if target != region:
                self.pending += 1
                lag = self.lag_of(table, region, target) if self.lag_of else self._random.uniform(*self.lag)
                at = self.loop.now + lag
                self.loop.call_at(at, functools.partial(self._arrive, target, key, item, version, units))

    def _arrive(self, region: str, key: tuple[str, str, Any], item: dict[str, Any] | None, version: _Version,
                units: float) -> None:
        self.pending -= 1
        self.copied += 1
        current = self._versions[region].get(key)
        seen = self._seen[region].get(key)
        if current is not None and seen is not None:
            if _covers(seen, version[3]):
                self.superseded += 1  # this replica has it already, or a change made on top of it
                return
            self._seen[region][key] = tuple(max(mine, theirs) for mine, theirs in zip(seen, version[3], strict=True))
            if not _covers(version[3], current[3]):
                # Concurrent: neither change saw the other. The later one wins everywhere.
                loser, winner = sorted((current, version))
                table, partition, sort = key
                self.lost.setdefault((table, partition, sort, loser[2], loser[0]),
                                     LostChange(table, partition, loser[2], loser[0], winner[2]))
                if version < current:
                    return
        else:
            self._seen[region][key] = version[3]
        self._versions[region][key] = version
        self.replicas[region].replicate(key[0], key[1], key[2], item, units)
        for callback in self.on_arrival:
            callback(region, key[0], key[1], key[2], item)

    def lost_in(self, table: str) -> list[LostChange]:
        """The changes of ``table`` lost to a concurrent change, in time order."""
        return sorted((lost for lost in self.lost.values() if lost.table == table), key=lambda lost: lost.at)

    def differing(self, table: str) -> int:
        """Items of ``table`` not the same in every region (0 once replication has settled)."""
        keys: set[tuple[str, Any]] = set()
        for replica in self.replicas.values():
            for partition, items in replica.tables[table].partitions.items():
                keys.update((partition, sort) for sort in items)
        differing = 0
        for partition, sort in keys:
            seen = [replica.tables[table].partitions.get(partition, {}).get(sort) for replica in self.replicas.values()]
            if any(copy != seen[0] for copy in seen[1:]):
                differing += 1
        return differing


# -- binding models to the fleet ----------------------------------------------------------------


class Fleet:
    """An event loop, an in-memory DynamoDB per region, and the models of its processes bound to it.

    Args:
        write_units: write units per second per partition (DynamoDB: 1,000).
        read_units: read units per second per partition (DynamoDB: 3,000).
        seed: seeds every process's ``random.Random``.
        regions: the regions, each with its own in-memory DynamoDB (:attr:`dbs`); with more than
            one, every table is a global table replicated between them (:attr:`replication`).
            A model is served by the region its ``Meta.region`` names, and must be declared
            with ``Meta = Fleet.meta(table, region=...)`` (that region's endpoint,
            :meth:`region_host`).
        replication_lag: the lowest and highest replication lag, seconds (uniform).
        record: keep every request and response (:attr:`FleetDynamoDB.journal`).

    .. versionadded:: 0.2.0
    """

    host = "http://127.0.0.1:9"  # never contacted: before-send answers every request

    def __init__(self, *, write_units: float = 1000.0, read_units: float = 3000.0, seed: int = 0,
                 regions: tuple[str, ...] = ("us-east-1",), replication_lag: tuple[float, float] = (0.5, 1.5),
                 record: bool = False) -> None:
        if not regions or len(set(regions)) != len(regions):
            msg = f"Fleet: regions={regions!r}; name one region or more, each once"
            raise ValueError(msg)
        self.loop = EventLoop()
        self.regions = tuple(regions)
        #: region -> its in-memory DynamoDB
        self.dbs = {
            region: FleetDynamoDB(self.loop.monotonic, write_units=write_units, read_units=read_units, region=region,
                                  record=record)
            for region in self.regions
        }
        #: the first region's in-memory DynamoDB
        self.db = self.dbs[self.regions[0]]
        self.seed = seed
        self._seeds = _random.Random(seed)
        #: the global tables between the regions (``None`` with one region)
        self.replication = None if len(self.regions) == 1 else Replication(
            self.loop, self.dbs, lag=replication_lag, random=self.random())
        self._hosts = {region: self.region_host(region) for region in self.regions}
        if len(set(self._hosts.values())) != len(self._hosts):
            msg = f"Fleet: two of the regions {regions!r} have one endpoint; rename one"
            raise ValueError(msg)
        self._connections: dict[tuple[str, str, Any], Any] = {}
        self._clients: list[Any] = []

    def random(self) -> _random.Random:
        """A ``random.Random`` for one process, seeded from the fleet's seed."""
        return _random.Random(self._seeds.getrandbits(64))

    def strategy_clock(self) -> dict[str, Any]:
        """The ``clock``, ``sleep``, ``timer`` and ``random`` options of a ``DynamicShards`` on
        this fleet's virtual time: ``DynamicShards(Meta, **fleet.strategy_clock(), ...)``."""
        return {
            "clock": self.loop.time, "sleep": self.loop.sleep, "timer": self.loop.monotonic,
            "random": self.random(),
        }

    @staticmethod
    def region_host(region: str) -> str:
        """The endpoint that stands for ``region`` in a fleet (a loopback address, never
        contacted): :attr:`host` for us-east-1, another loopback address for each other region."""
        if region == "us-east-1":
            return Fleet.host
        code = zlib.crc32(region.encode()) & 0xFFFFFF
        return f"http://127.{code >> 16}.{(code >> 8) & 0xFF}.{code & 0xFF}:9"

    @property
    def hosts(self) -> dict[str, str]:
        """region -> its endpoint: ``Meta.region_hosts`` (and ``home_host``) for global tables."""
        return dict(self._hosts)

    @staticmethod
    def meta(table_name: str, region: str = "us-east-1", **settings: Any) -> type:
        """A ``Meta`` for a model of a fleet: its table, the region's endpoint (never contacted),
        dummy credentials."""
        return type("Meta", (), {
            "table_name": table_name, "host": Fleet.region_host(region), "region": region,
            "aws_access_key_id": "fleet", "aws_secret_access_key": "fleet", **settings,
        })

    def bind(self, model: type[Model], *, store_protocol: bool = True) -> type[Model]:
        """Serve ``model``'s table and its companions' (the metadata table, watched) from the
        fleet, in every region; models of one table and region share one connection (one
        botocore client). A metadata model's connections to the other regions' replicas
        (``Meta.home_region``, ``Meta.region_hosts``) are served too. Returns ``model``.

        A metadata table the fleet did not serve yet is a new table: as ``create_table`` does,
        it stores the fleet protocol ``model`` declares (one ``PutItem``; in its home region,
        with ``Meta.home_region``), unless ``store_protocol=False`` (a table of 0.2, which
        stores none).
        """
        from pynamodb_sharding._fleet import protocol_for_created_tables
        from pynamodb_sharding._metadata import ShardMetadata

        created = []
        for bound in with_companions([model]):
            if bound is not model and all(bound.Meta.table_name not in db.tables for db in self.dbs.values()):
                created.append(bound)
            self._bind_one(bound, watched=bound is not model)
            if isinstance(bound, type) and issubclass(bound, ShardMetadata) and len(self.regions) > 1:
                self._bind_replicas(bound)
        if store_protocol and created:
            with self.running():
                protocol_for_created_tables(model, created)
        return model

    def _bind_replicas(self, metadata: type[Model]) -> None:
        """Bind the models the library sends a metadata model's requests to other regions'
        replicas through: each region's (``Meta.region_hosts``, and ``Meta.home_host`` for the
        home region), and the home region's variant without retries (best-effort requests)."""
        from pynamodb_sharding._metadata import ShardMetadata, home_model, region_model

        assert issubclass(metadata, ShardMetadata)
        meta = metadata.Meta
        declared_home = getattr(meta, "home_region", None)
        hosts: Mapping[str, str] = getattr(meta, "region_hosts", None) or {}
        own: str | None = meta.host if getattr(meta, "region", None) else None
        for region in self.regions:
            home_host: str | None = getattr(meta, "home_host", None)
            host: str | None
            if region == declared_home and home_host is not None:
                host = home_host
            elif region in hosts:
                host = hosts[region]
            else:
                host = own if region == meta.region else None
            if host is not None:  # else the library sends nothing there
                self._bind_one(region_model(metadata, region, host), watched=True)
        if declared_home is not None:
            self._bind_one(home_model(metadata, retries=False), watched=True)

    def _bind_one(self, bound: type[Model], *, watched: bool) -> None:
        name = bound.Meta.table_name
        region = getattr(bound.Meta, "region", None) or "us-east-1"
        if region not in self.dbs:
            msg = (
                f"Fleet.bind: {bound.__name__} has Meta.region {region!r}, not a region of this fleet "
                f"({', '.join(self.regions)}); declare it with Meta = Fleet.meta({name!r}, region=...)"
            )
            raise ValueError(msg)
        if bound.Meta.host != self._hosts[region]:
            msg = (
                f"Fleet.bind: {bound.__name__} has Meta.host {bound.Meta.host!r}; a model of the fleet "
                f"(and its metadata model) must be declared with Meta = Fleet.meta({name!r}, region={region!r}), "
                f"so that no request of it can reach a real server"
            )
            raise ValueError(msg)
        for db in self.dbs.values():  # a global table: a replica in every region
            db.add_table(bound, watched=watched)
        key = (name, region, getattr(bound.Meta, "max_retry_attempts", None))
        shared = self._connections.get(key)
        if shared is not None:
            _host.set_connection(bound, shared)
            return
        # PynamoDB's own connection first (not yet armed by the library), to reach its client.
        client = _host.plain_table_connection(bound).connection.client
        if client not in _host._guarded:
            # Many process models share one table and client: the guard checks one per table.
            guard = _host._guarded[client] = _OnePerTable()
            client.meta.events.register_first(_host._GUARD_EVENT, guard, unique_id=_host._GUARD_ID)
        self._connections[key] = _host.table_connection(bound)
        if not any(client is known for known in self._clients):
            client.meta.events.register_first("before-send.dynamodb", self._sender(region))
            # Nothing leaves the process: signing (a third of botocore's time) is skipped.
            client.meta.events.register_first("choose-signer.dynamodb", _unsigned)
            self._clients.append(client)

    def _sender(self, region: str) -> Callable[..., AWSResponse]:
        """The ``before-send`` handler of a client made for ``region``: its replica answers, and a
        request to another region's endpoint (a client made for one region, sent to another) is
        refused loudly."""
        db, netloc = self.dbs[region], urlsplit(self._hosts[region]).netloc

        def send(request: Any, **kwargs: Any) -> AWSResponse:
            if urlsplit(request.url).netloc != netloc:
                msg = f"the fleet: a client made for {region} sent {request.url}, not to {self._hosts[region]}"
                raise AssertionError(msg)
            return db.on_before_send(request, **kwargs)

        return send

    @contextlib.contextmanager
    def running(self) -> Iterator[EventLoop]:
        """Within the block, botocore's retry sleeps wait on the fleet's virtual time (those of a
        client the asyncio side routed too, which pause through ``_pool.pause``: a process that
        imported ``pynamodb_sharding.aio`` routes every sharded model's client), and merged
        queries send their shard requests one after the other in the querying process (the
        fan-out pool runs each call at once: a simulated process is one greenlet)."""
        real = botocore.endpoint.time
        real_pause_sleep = _pool._sleep
        pool = (_pool._executor, _pool._executor_pid)
        # What draws from the random module's shared generator (botocore's retry jitter, a read
        # replica's pick) draws a sequence the fleet's seed fixes: a seed gives one result.
        shared = _random.getstate()
        _random.seed(f"fleet:{self.seed}")
        botocore.endpoint.time = types.SimpleNamespace(sleep=self.loop.sleep, time=self.loop.time)
        _pool._sleep = self.loop.sleep
        _pool._executor, _pool._executor_pid = _InlineExecutor(), os.getpid()  # type: ignore[assignment]
        try:
            yield self.loop
        finally:
            botocore.endpoint.time = real
            _pool._sleep = real_pause_sleep
            _pool._executor, _pool._executor_pid = pool
            _random.setstate(shared)


class _InlineExecutor:
    """An executor that runs each call at once in the caller, returning a finished future."""

    def submit(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(function(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, **_: Any) -> None:
        return None


class _OnePerTable(_host._KeyGuard):
    """The key guard of a client shared by many models of one table: it keeps the first."""

    def add(self, model: type[Model], codec: Any) -> None:
        if all(known.Meta.table_name != model.Meta.table_name for known in list(self.models)):
            super().add(model, codec)


def _unsigned(**_: Any) -> Any:
    return botocore.UNSIGNED


def needed_shards(units_per_second: float, partition_write_units: float) -> int:
    """The fewest shards that take ``units_per_second`` at ``partition_write_units`` each."""
    return max(1, math.ceil(units_per_second / partition_write_units - 1e-9))


# -- scenarios ----------------------------------------------------------------------------------


@attrs.frozen
class Scenario:
    """One fleet scenario, as data: who writes and reads which keys, how fast, for how long.

    Rates are those of the whole real fleet; ``weight`` real processes are simulated by one
    (see the module docstring), so ``processes / weight`` simulated processes run.

    Attributes:
        name: a short name (``"viral"``, ``"hot_read"``, ``"cold_keys"``).
        kind: which process bodies run: ``"viral"`` (writers of one key, processes and load
            ramping up together, a few readers checking what was acknowledged), ``"regions"``
            (the same in each of ``regions`` at once: a growth race across regions),
            ``"hot_read"`` (readers of one key grown to ``shards`` beforehand, one slow
            writer) or ``"cold_keys"`` (each write a new key, read back one in ``check_every``).
        seconds: virtual seconds of the ramp (processes and load go from their start values to
            their end values); the run lasts ``seconds + hold``.
        processes: real processes at the start and at the end (linear in between).
        weight: real processes one simulated process stands for.
        write_units: write units per second of the whole fleet at the start and at the end.
        queries: merged queries per second of the whole fleet.
        shards: the count the hot read key is grown to before the start.
        partition_write_units: write units per second per partition.
        partition_read_units: read units per second per partition.
        max_shards: ``DynamicShards(max_shards=)``.
        read_replicas: ``Sharding(read_replicas=)``: eventually consistent reads spread over the
            table and this many replicas (global indexes keyed like the table), each with a
            partition's read units of its own.
        readers: simulated reader processes of the viral key (weight 1), one query per ``read_every`` s.
        read_every: seconds between two queries of a viral-key reader.
        check_every: a cold-key writer reads back one key in this many.
        scale: how the scenario is scaled from the full size, in words.
        hold: virtual seconds the end values hold after the ramp.
        regions: for ``kind="regions"``: the regions (a replica of every table in each,
            replicated as global tables are: :class:`Replication`); processes, load and
            ``readers`` are split evenly between them.
        home_region: the metadata model's ``Meta.home_region`` in every region (``None``: none,
            every region changes counts in its own replica: the negative control).
        replication_lag: the lowest and highest replication lag, seconds (uniform, drawn per
            change and destination).

    .. versionadded:: 0.2.0
    """

    name: str
    kind: str
    seconds: float
    processes: tuple[int, int]
    weight: int = 1
    write_units: tuple[float, float] = (0.0, 0.0)
    queries: float = 0.0
    shards: int = 1
    partition_write_units: float = 1000.0
    partition_read_units: float = 3000.0
    max_shards: int = 256
    read_replicas: int = 0
    readers: int = 0
    read_every: float = 2.0
    check_every: int = 10
    scale: str = "full size"
    hold: float = 0.0
    regions: tuple[str, ...] = ()
    home_region: str | None = None
    replication_lag: tuple[float, float] = (0.5, 1.5)

    @property
    def end(self) -> float:
        """When the run ends: ``seconds`` of ramp, then ``hold`` seconds at the end values."""
        return self.seconds + self.hold

    def processes_at(self, t: float) -> float:
        start, end = self.processes
        return start + (end - start) * min(1.0, max(0.0, t / self.seconds))

    def load_at(self, t: float) -> float:
        start, end = self.write_units
        return start + (end - start) * min(1.0, max(0.0, t / self.seconds))


#: A viral key: 0 -> 100,000 write units/s over 60 s while processes scale 10 -> 10,000
#: (Lambda-like: new processes start cold), then 40 s at the peak (so that a growth lag up to
#: 2 x the default cooldown after the ramp is seen), simulated as up to 50 processes of weight 200.
VIRAL = Scenario(
    name="viral", kind="viral", seconds=60.0, processes=(10, 10_000), weight=200,
    write_units=(0.0, 100_000.0), readers=1, read_every=3.0, hold=40.0,
    scale="full size; 10,000 processes simulated as 50 of weight 200",
)
#: A hot read key: 20,000 merged queries/s over 16 shards from 2,000 processes, 20 s,
#: simulated as 5 processes of weight 400. Each query reads its 16 shards (half a read unit
#: each, eventually consistent): 160,000 read units a second over 16 partition keys, more than
#: three times the 3,000 a partition serves; 3 read replicas make 4 copies of each, 12,000 each.
HOT_READ = Scenario(
    name="hot_read", kind="hot_read", seconds=20.0, processes=(2_000, 2_000), weight=400,
    write_units=(20.0, 20.0), queries=20_000.0, shards=16, read_replicas=3,
    scale="full size, 20 s; 2,000 processes simulated as 5 of weight 400; 3 read replicas",
)
#: A million cold keys written once each from 1,000 processes in 60 s, scaled down 100 times:
#: 10,000 keys from 10 processes (each process's rate, 16.7 new keys/s, as at full size).
COLD_KEYS = Scenario(
    name="cold_keys", kind="cold_keys", seconds=60.0, processes=(10, 10), weight=1,
    write_units=(10_000 / 60.0, 10_000 / 60.0), check_every=10,
    scale="1/100: 10,000 keys from 10 processes (per-process rate as at full size)",
)
#: A growth race across three regions with home-region routing: one key becomes hot in every
#: region at once, 0 -> 9,000 write units/s in all (3,000 written in each region; every
#: replica's partitions take every region's writes) over 30 s while processes scale 30 -> 3,000
#: (1,000 per region), then 20 s at the peak; counts change only in us-east-1. Simulated as 40
#: processes of weight 25 per region, and one reader per region checking what was acknowledged
#: and had arrived in its region's replica.
REGIONS = Scenario(
    name="regions", kind="regions", seconds=30.0, processes=(30, 3_000), weight=25,
    write_units=(0.0, 9_000.0), readers=3, read_every=2.0, hold=20.0,
    regions=("us-east-1", "eu-west-1", "ap-northeast-1"), home_region="us-east-1",
    scale="full size; 3 regions, 3,000 processes simulated as 120 of weight 25; replication lag 0.5-1.5 s",
)
#: The scenarios the benchmark runs, in order.
SCENARIOS = (VIRAL, HOT_READ, COLD_KEYS, REGIONS)


@attrs.frozen
class FleetReport:
    """What one scenario run measured (real requests: weight-fold).

    .. versionadded:: 0.2.0
    """

    scenario: str
    metadata_read_pct: float  #: the heaviest metadata item's busiest second, % of the read limit
    metadata_write_pct: float  #: the same, % of the write limit
    steady_read_pct: float  #: the heaviest metadata item's busiest second in the second half, % of the read limit
    steady_write_pct: float  #: the same, % of the write limit
    mean_read_pct: float  #: the heaviest metadata item's mean load over the second half, % of the read limit
    mean_write_pct: float  #: the same, % of the write limit
    metadata_requests_per_query: float | None  #: per merged query begun (served or not), in the second half
    metadata_requests_per_write: float | None  #: over the whole run
    metadata_throttles: float
    missed_writes: int  #: acknowledged items a later read did not return
    reads_checked: int
    growth_lag: float | None  #: seconds until the count writers may use covers the load (viral)
    key_range_throttle_pct: float  #: data-table write throttles, % of write attempts
    first_write_share: float | None  #: max over shards of first writes / fair share of the count in effect (viral)
    writes: float  #: acknowledged writes (real ones)
    queries: float  #: merged queries served (real ones)
    errors: dict[str, int]  #: failed requests by error (simulated ones)
    requests: int  #: simulated requests sent (not weighted)
    stored_items: int  #: items in the data table at the end (weight 1: one per acknowledged write)
    final_count: int
    wall_seconds: float
    timeline: tuple[tuple[float, float, float, float], ...]  #: (t, load units/s, count, needed)
    #: Global tables (``kind="regions"``), else 1 and zeros:
    regions: int = 1
    #: metadata changes lost to a concurrent change made in another region (last writer wins)
    lost_changes: int = 0
    #: times a region's replica showed the hot key's count lower than it had shown before
    count_decreases: int = 0
    #: growths (``shard_history`` entries) some replica showed that the key's final history
    #: misses in some region
    lost_growths: int = 0
    #: items not the same in every region once replication settled (data and metadata tables)
    replicas_differing: int = 0
    #: per region: (region, missed acknowledged writes, reads checked)
    missed_by_region: tuple[tuple[str, int, int], ...] = ()
    #: best-effort metadata requests (rate reports, growths on a throttle) the processes dropped
    #: because the home region could not be reached (0 in the simulator: nothing is unreachable)
    home_requests_dropped: int = 0
    #: conditional metadata changes refused by their condition, in every region (real ones):
    #: growths (and inserts) that lost a race to another process's change, which they then read
    contested_changes: float = 0
    #: the first misses (up to 10), described: where and when the read ran, where the item was
    #: written, on which shard, and when it arrived in the read's region
    misses: tuple[str, ...] = ()
    #: merged queries begun (real ones): served (:attr:`queries`) or failed
    offered_queries: float = 0
    #: merged queries that raised (after botocore's retries)
    failed_queries: float = 0
    #: served merged queries that met a throttle on the way (retried, or moved to another copy)
    throttled_queries: float = 0
    #: writes begun (real ones): acknowledged (:attr:`writes`) or failed
    offered_writes: float = 0
    #: writes that raised
    failed_writes: float = 0
    #: throttled read requests of the data table and its read replicas (real ones)
    data_read_throttles: float = 0
    #: the run's length in virtual seconds (ramp and hold): rates are counts over it
    seconds: float = 0
    #: metadata requests of merged queries a second in the second half (real ones): one per
    #: process per ``cache_ttl`` with cached reads, whatever the query rate
    metadata_reads_per_second: float = 0


_KEY = "hot"


def _process_models(fleet: Fleet, scenario: Scenario, count: int, options: Mapping[str, Any],
                    region: str = "us-east-1") -> list[type[Model]]:
    from pynamodb.attributes import UnicodeAttribute

    from pynamodb_sharding import ShardedModel, Sharding, ShardMetadata

    placement: dict[str, Any] = {}
    if len(fleet.regions) > 1:
        placement["region_hosts"] = fleet.hosts
        if scenario.home_region is not None:
            placement.update(home_region=scenario.home_region, home_host=fleet.hosts[scenario.home_region])
    metadata = type("FleetShards", (ShardMetadata,), {"Meta": Fleet.meta("fleet_shards", region=region, **placement)})
    base = type("FleetItem", (ShardedModel,), {
        "__module__": __name__,
        "key": UnicodeAttribute(hash_key=True),
        "at": UnicodeAttribute(range_key=True),
    })
    settings = {
        "max_shards": scenario.max_shards, "partition_write_units": scenario.partition_write_units,
        "target_utilization": 0.7, **options,
    }
    models = []
    weighted = _weighted_shards()
    for index in range(count):
        strategy = weighted(metadata, **fleet.strategy_clock(), **settings)
        model = type(f"FleetItem{index}", (base,), {
            "__module__": __name__,
            "Meta": Fleet.meta("fleet_items", region=region, max_retry_attempts=3, max_pool_connections=64),
            "shards": Sharding(strategy, max_workers=1, read_replicas=scenario.read_replicas),
        })
        models.append(fleet.bind(model, store_protocol=False))  # run_scenario stores it
    return models


@functools.cache
def _weighted_shards() -> type[Any]:
    """``DynamicShards`` whose sampled rate reports are drawn as a weighted process's ``w``
    processes would draw them: each of the ``w`` decides for itself, and the report the
    process sends stands for the ``k`` that report (its ADD and its charge scaled by ``k``, not
    ``w``). One draw for all ``w`` would send every process's report or none, a far noisier
    rate than ``w`` processes give."""
    import greenlet

    from pynamodb_sharding import DynamicShards

    class WeightedShards(DynamicShards):
        def sampled_report(self, units: float, count: int) -> float | None:
            weight = current_weight()
            if weight == 1:
                return super().sampled_report(units, count)
            draws = [super(WeightedShards, self).sampled_report(units, count) for _ in range(weight)]
            sent = [draw for draw in draws if draw is not None]
            if not sent:
                return None
            setattr(greenlet.getcurrent(), "fleet_weight", len(sent))  # noqa: B010
            return sent[0]

        def _written(self, space: Any, key: str, units: float) -> None:
            current = greenlet.getcurrent()
            weight = getattr(current, "fleet_weight", 1)
            try:
                super()._written(space, key, units)
            finally:
                setattr(current, "fleet_weight", weight)  # noqa: B010

    return WeightedShards


def run_scenario(scenario: Scenario, *, seed: int = 0, protocol: Any = "declared", **options: Any) -> FleetReport:
    """Run ``scenario`` with ``DynamicShards(**options)`` (beyond the scenario's own settings
    and ``target_utilization=0.7``) in every process; returns what it measured.

    ``protocol``: the fleet protocol the metadata table stores from the start, which every
    process follows: ``"declared"`` (default) the one the processes declare, as
    ``create_table`` stores in a metadata table it creates; a
    :class:`~pynamodb_sharding.FleetProtocol`; or ``None``: the table stores none (a table of
    0.2), and each process follows its own declaration.

    .. versionadded:: 0.2.0
    """
    import time

    import greenlet

    started = time.perf_counter()
    regions = scenario.regions if scenario.kind == "regions" else ("us-east-1",)
    if scenario.kind == "regions" and (len(regions) < 2 or (
            scenario.home_region is not None and scenario.home_region not in regions)):
        msg = (
            f"scenario {scenario.name!r}: kind 'regions' needs two regions or more, and its home_region "
            f"{scenario.home_region!r} among them (regions={regions!r})"
        )
        raise ValueError(msg)
    fleet = Fleet(write_units=scenario.partition_write_units, read_units=scenario.partition_read_units, seed=seed,
                  regions=regions, replication_lag=scenario.replication_lag)
    loop = fleet.loop
    dbs = list(fleet.dbs.values())
    home_db = fleet.dbs.get(scenario.home_region or "", fleet.db)
    weight = scenario.weight
    readers = scenario.readers + (1 if scenario.kind == "hot_read" else 0)
    if scenario.kind == "regions":
        per_region = max(1, round(scenario.processes[1] / weight / len(regions)))
        region_readers = max(1, scenario.readers // len(regions))
        by_region = {
            region: _process_models(fleet, scenario, per_region + region_readers, options, region=region)
            for region in regions
        }
        simulated = per_region * len(regions)
        models: list[type[Model]] = []
    else:
        by_region = {}
        simulated = max(1, round(scenario.processes[1] / weight))
        models = _process_models(fleet, scenario, simulated + readers + 1, options)
    meta, data = "fleet_shards", "fleet_items"
    acked: list[tuple[float, str, str]] = []  # (ack time, key, range key)
    checks = {"reads": 0, "missed": 0}
    by_region_checks: dict[str, list[int]] = {region: [0, 0] for region in regions}  # missed, reads
    errors: Counter[str] = Counter()
    done = {"writes": 0.0, "queries": 0.0, "offered_writes": 0.0, "failed_writes": 0.0, "offered_queries": 0.0,
            "failed_queries": 0.0, "throttled_queries": 0.0}
    counts: list[tuple[float, int]] = [(0.0, 1)]

    def follow_count(table: str, key: str, item: dict[str, Any]) -> None:
        if key.startswith(_KEY) and "number_of_shards" in item:
            counts.append((loop.now, int(item["number_of_shards"]["N"])))

    home_db.on_write.append(follow_count)
    # Global tables: what each region's replica showed, and when each data item arrived there.
    shown: dict[str, list[int]] = {region: [] for region in regions}
    entries: set[str] = set()  # every shard_history entry any replica showed
    arrived: dict[str, dict[str, float]] = {region: {} for region in regions}
    origin: dict[str, tuple[str, str]] = {}  # range key -> (region written in, partition)
    misses: list[str] = []
    for region, replica in fleet.dbs.items():
        def follow_replica(table: str, key: str, item: dict[str, Any], region: str = region) -> None:
            if key == _KEY and "number_of_shards" in item:
                shown[region].append(int(item["number_of_shards"]["N"]))
                entries.update(item.get("shard_history", {}).get("SS", []))
        replica.on_write.append(follow_replica)
    if fleet.replication is not None:
        def arrival(region: str, table: str, key: str, sort: Any, item: dict[str, Any] | None) -> None:
            if table == data and item is not None:
                arrived[region].setdefault(str(sort), loop.now)
                origin.setdefault(str(sort), (region, key))
        fleet.replication.on_arrival.append(arrival)
    serial = itertools.count()

    def write(model: type[Model], key: str, first: bool) -> bool:
        item = model(key, f"t{loop.now:012.3f}#{next(serial)}")
        done["offered_writes"] += current_weight()
        try:
            with activity("first-write" if first else "write"):
                item.save()
        except Exception as error:
            errors[type(error).__name__] += 1
            done["failed_writes"] += current_weight()
            return False
        done["writes"] += current_weight()
        acked.append((loop.now, key, item.at))  # type: ignore[attr-defined]
        return True

    def check(model: type[Model], key: str, since: float, region: str | None = None) -> None:
        """A read of ``key`` (range keys from ``since`` on) must return every write acknowledged
        before it began, and in a region, every such write that had arrived in its replica
        before it began (written there, or replicated there)."""
        began = loop.now
        bound = f"t{since:012.3f}"
        there = arrived[region] if region is not None else None
        wanted = {
            at for t, k, at in acked
            if k == key and t < began and at >= bound and (there is None or there.get(at, math.inf) < began)
        }
        weight = current_weight()
        done["offered_queries"] += weight
        try:
            with activity("query"), throttles_met() as met:
                got = {item.at for item in model.query(key, model.at >= bound)}  # type: ignore[attr-defined]
        except Exception as error:
            errors[type(error).__name__] += 1
            done["failed_queries"] += weight
            return
        done["queries"] += weight
        done["throttled_queries"] += weight if met[0] else 0
        checks["reads"] += 1
        checks["missed"] += len(wanted - got)
        for at in sorted(wanted - got)[:max(0, 10 - len(misses))]:
            written = origin.get(at, ("", ""))
            shown_there = arrived[region].get(at) if region is not None else None
            misses.append(
                f"read of {key!r}{' in ' + region if region else ''} at {began:.3f} s missed {at} (shard "
                f"partition {written[1]!r}, written in {written[0] or 'the region'}"
                f"{'' if shown_there is None else f', arrived in {region} at {shown_there:.3f} s'})"
            )
        if region is not None:
            by_region_checks[region][0] += len(wanted - got)
            by_region_checks[region][1] += 1

    def weighted(body: Callable[[], None], w: int) -> Callable[[], None]:
        def run() -> None:
            setattr(greenlet.getcurrent(), "fleet_weight", w)  # noqa: B010
            body()
        return run

    rng = fleet.random()

    def writer(model: type[Model]) -> Callable[[], None]:
        def body() -> None:
            first = True
            while loop.now < scenario.end:
                rate = scenario.load_at(loop.now) / scenario.processes_at(loop.now)
                loop.sleep(rng.expovariate(max(rate, 0.2)))
                if loop.now >= scenario.end:
                    return
                if write(model, _KEY, first):
                    first = False
        return body

    def reader(model: type[Model], offset: float, region: str | None = None) -> Callable[[], None]:
        def body() -> None:
            loop.sleep(offset)
            while loop.now < scenario.end:
                check(model, _KEY, loop.now - 10.0, region)
                loop.sleep(scenario.read_every)
        return body

    if scenario.kind == "viral":
        start, end = scenario.processes
        for index in range(simulated):
            real = (index + 1) * weight
            at = 0.0 if real <= start else (real - start) / (end - start) * scenario.seconds
            loop.spawn(weighted(writer(models[index]), weight), at=at)
        for index in range(scenario.readers):
            offset = index * scenario.read_every / max(1, scenario.readers)
            loop.spawn(reader(models[simulated + index], offset))
    elif scenario.kind == "regions":
        start, end = scenario.processes
        for index in range(per_region):
            real = (index + 1) * weight * len(regions)  # real processes in all, once this one runs everywhere
            at = 0.0 if real <= start else (real - start) / (end - start) * scenario.seconds
            for region in regions:  # the key heats up in every region at once
                loop.spawn(weighted(writer(by_region[region][index]), weight), at=at)
        for number, region in enumerate(regions):
            for index in range(region_readers):
                offset = (number + index * len(regions)) * scenario.read_every / (region_readers * len(regions))
                loop.spawn(reader(by_region[region][per_region + index], offset, region))
    elif scenario.kind == "hot_read":
        setup = models[-1]

        def prepare() -> None:
            while setup.shards.shard_count(_KEY) < scenario.shards:  # type: ignore[attr-defined]
                setup.shards.grow(_KEY)  # type: ignore[attr-defined]
                setup.shards.refresh(_KEY)  # type: ignore[attr-defined]
            slow = models[simulated]
            while loop.now < scenario.end:
                write(slow, _KEY, False)
                loop.sleep(1.0 / max(scenario.write_units[0], 0.01))

        loop.spawn(prepare)
        per_process = scenario.queries / scenario.processes[1]
        for index in range(simulated):
            # Open loop: queries arrive at the scenario's rate whatever happens to the ones before
            # (a process serves them on threads), so what is offered is what the scenario says and
            # a slow or throttled query does not lower it.
            def arrivals(model: type[Model] = models[index]) -> None:
                loop.sleep(rng.random() / per_process)
                while loop.now < scenario.end:
                    loop.spawn(weighted(functools.partial(check, model, _KEY, loop.now - 5.0), weight))
                    loop.sleep(rng.expovariate(per_process))
            loop.spawn(arrivals)
    elif scenario.kind == "cold_keys":
        per_process = scenario.load_at(0) / scenario.processes[1]
        for index in range(simulated):
            def cold(model: type[Model] = models[index], index: int = index) -> None:
                written = 0
                while loop.now < scenario.end:
                    loop.sleep(rng.expovariate(per_process))
                    key = f"cold-{index}-{written}"
                    if write(model, key, True) and written % scenario.check_every == 0:
                        check(model, key, 0.0)
                    written += 1
            loop.spawn(cold)
    else:
        msg = f"unknown scenario kind {scenario.kind!r}: use 'viral', 'hot_read', 'cold_keys' or 'regions'"
        raise ValueError(msg)

    if protocol is not None:
        from pynamodb_sharding._fleet import store_fleet_protocol

        founder: Any = models[0] if models else next(iter(by_region.values()))[0]
        stored = founder.shards.strategy.declared_protocol if protocol == "declared" else protocol
        with fleet.running():  # a new table: in force at once
            store_fleet_protocol(founder, immediately=True, **stored.as_dict())
    steady = scenario.end / 2
    with fleet.running():
        loop.run(steady)
        before = sum((Counter(db.requests) for db in dbs), Counter())
        queries_before = done["offered_queries"]
        loop.run(scenario.end + 60.0)  # let every process finish what it started, and replication settle

    def heaviest(write: bool, start: float = 0.0) -> ItemLoad | None:
        loads = [load for db in dbs if (load := db.heaviest(meta, write=write, start=start)) is not None]
        return max(loads, key=lambda load: load.units, default=None)

    def mean(write: bool) -> float:
        return max(db.heaviest_mean(meta, write=write, start=steady, end=scenario.end) for db in dbs)

    heavy_read, heavy_write = heaviest(False), heaviest(True)
    steady_read, steady_write = heaviest(False, steady), heaviest(True, steady)
    after = sum((Counter(db.requests) for db in dbs), Counter())
    steady_meta_queries = sum(n for (t, _, a), n in (after - before).items() if t == meta and a == "query")
    steady_queries = done["offered_queries"] - queries_before
    meta_writes = sum(n for (t, _, a), n in after.items() if t == meta and a in ("write", "first-write"))
    attempts_total = sum(n for (t, op, _), n in after.items() if t == data and op == "PutItem")
    throttles: Counter[tuple[str, bool]] = sum((Counter(db.throttles) for db in dbs), Counter())
    timeline = []
    lag: float | None = None
    share: float | None = None
    if scenario.kind in ("viral", "regions"):
        # What writers may use: a growth is in effect only `activation_delay` after it is stored.
        first: Any = models[0] if models else next(iter(by_region.values()))[0]
        counts = _in_effect(counts, first.shards.strategy.activation_delay)
        lag = _growth_lag(scenario, counts)
        share = _first_write_share([w for db in dbs for w in db.first_writes], counts)
        for second in range(int(scenario.end) + 1):
            load = scenario.load_at(second)
            timeline.append((float(second), load, float(_count_at(counts, second)),
                             float(min(scenario.max_shards, needed_shards(load, scenario.partition_write_units)))))
    lost_changes = replicas_differing = lost_growths = decreases = 0
    if fleet.replication is not None:
        lost_changes = len(fleet.replication.lost_in(meta))
        replicas_differing = fleet.replication.differing(data) + fleet.replication.differing(meta)
        missing: set[str] = set()
        for replica in dbs:
            missing |= entries - _history(replica, meta)
        lost_growths = len(missing)
        for region in regions:
            highest = 0
            for count in shown[region]:
                decreases += count < highest
                highest = max(highest, count)
    dropped = 0
    for process in [*models, *(model for group in by_region.values() for model in group)]:
        strategy: Any = getattr(process, "shards").strategy  # noqa: B009
        dropped += int(getattr(strategy, "home_requests_dropped", 0))
    return FleetReport(
        scenario=scenario.name,
        metadata_read_pct=0.0 if heavy_read is None else 100 * heavy_read.units / scenario.partition_read_units,
        metadata_write_pct=0.0 if heavy_write is None else 100 * heavy_write.units / scenario.partition_write_units,
        steady_read_pct=0.0 if steady_read is None else 100 * steady_read.units / scenario.partition_read_units,
        steady_write_pct=0.0 if steady_write is None else 100 * steady_write.units / scenario.partition_write_units,
        mean_read_pct=100 * mean(False) / scenario.partition_read_units,
        mean_write_pct=100 * mean(True) / scenario.partition_write_units,
        metadata_requests_per_query=None if not steady_queries else steady_meta_queries / steady_queries,
        metadata_reads_per_second=steady_meta_queries / max(1e-9, scenario.end - steady),
        metadata_requests_per_write=None if not done["writes"] else meta_writes / done["writes"],
        metadata_throttles=throttles[(meta, True)] + throttles[(meta, False)],
        missed_writes=checks["missed"],
        reads_checked=checks["reads"],
        growth_lag=lag,
        key_range_throttle_pct=100 * throttles[(data, True)] / max(1.0, attempts_total),
        first_write_share=share,
        writes=done["writes"],
        queries=done["queries"],
        offered_queries=done["offered_queries"],
        failed_queries=done["failed_queries"],
        throttled_queries=done["throttled_queries"],
        offered_writes=done["offered_writes"],
        failed_writes=done["failed_writes"],
        data_read_throttles=sum(n for (table, write), n in throttles.items()
                                if not write and (table == data or table.startswith(f"{data}/index/"))),
        seconds=scenario.end,
        errors=dict(errors),
        requests=sum(db.sent for db in dbs),
        stored_items=sum(1 for _ in home_db.items(data)),
        final_count=counts[-1][1],
        wall_seconds=time.perf_counter() - started,
        timeline=tuple(timeline),
        regions=len(regions),
        lost_changes=lost_changes,
        count_decreases=decreases,
        lost_growths=lost_growths,
        replicas_differing=replicas_differing,
        missed_by_region=tuple((region, by_region_checks[region][0], by_region_checks[region][1]) for region in regions)
        if fleet.replication is not None else (),
        misses=tuple(misses),
        contested_changes=sum(db.condition_failures[meta] for db in dbs),
        home_requests_dropped=dropped,
    )


def _history(replica: FleetDynamoDB, table: str) -> set[str]:
    """The entries (``"<epoch>:<count>"``) of the hot key's ``shard_history`` in ``replica``."""
    found: set[str] = set()
    for item in replica.tables[table].partitions.get(_KEY, {}).values():
        found.update(item.get("shard_history", {}).get("SS", []))
    return found


def _in_effect(counts: list[tuple[float, int]], delay: float) -> list[tuple[float, int]]:
    """The count writers may use over time, from the stored one's changes: a growth from
    ``delay`` seconds after it was stored (``DynamicShards.activation_delay``), a shrink at once."""
    shifted, previous = [], counts[0][1]
    for at, count in counts:
        shifted.append((at + delay if count > previous else at, count))
        previous = count
    shifted.sort(key=lambda change: change[0])
    return shifted


def _count_at(counts: list[tuple[float, int]], t: float) -> int:
    found = counts[0][1]
    for at, count in counts:
        if at > t:
            break
        found = count
    return found


def _growth_lag(scenario: Scenario, counts: list[tuple[float, int]]) -> float | None:
    """The longest time from a load arriving to the count covering it (``None``: never covered)."""
    worst = 0.0
    step = 0.5
    t = 0.0
    while t <= scenario.end:
        needed = min(scenario.max_shards, needed_shards(scenario.load_at(t), scenario.partition_write_units))
        reached = next((at for at, count in counts if count >= needed), None)
        if reached is None:
            return None
        worst = max(worst, reached - t)
        t += step
    return worst


def _first_write_share(first_writes: list[tuple[float, str]], counts: list[tuple[float, int]]) -> float | None:
    """Max over shards of (first writes it took) / (its fair share of them), over shards whose
    fair share is at least one write."""
    from pynamodb_sharding._keys import decode

    fair: defaultdict[int, float] = defaultdict(float)
    seen: Counter[int] = Counter()
    for at, partition in first_writes:
        if not partition.startswith(_KEY):
            continue
        count = _count_at(counts, at)
        for shard in range(1, count + 1):
            fair[shard] += 1.0 / count
        seen[decode(partition)[1]] += 1
    ratios = [seen[shard] / share for shard, share in fair.items() if share >= 1.0]
    return max(ratios) if ratios else None
