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
(every request takes zero time, no lost replies, no timeouts); no whole-table limits; one
region; processes share one botocore client, so botocore's retry quota is shared.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import json
import math
import random as _random
import types
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any

import attrs
import botocore
import botocore.endpoint
from botocore.awsrequest import AWSResponse
from pynamodb.models import Model

from pynamodb_sharding import _host
from pynamodb_sharding._host import botocore_client
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
    "EventLoop",
    "FleetDynamoDB",
    "ItemLoad",
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


def current_weight() -> float:
    """The weight of the running process (1 outside a process or when it has none)."""
    import greenlet

    return float(getattr(greenlet.getcurrent(), "fleet_weight", 1.0))


def current_activity() -> str:
    """What the running process said it is doing (``"write"``, ``"query"``...; ``""``)."""
    import greenlet

    return str(getattr(greenlet.getcurrent(), "fleet_activity", ""))


@contextlib.contextmanager
def activity(name: str, weight: float | None = None) -> Iterator[None]:
    """Within the block, the running process's requests are counted under ``name`` (and
    charged ``weight`` times, when given)."""
    import greenlet

    current = greenlet.getcurrent()
    previous = getattr(current, "fleet_activity", ""), getattr(current, "fleet_weight", 1.0)
    current.fleet_activity = name
    if weight is not None:
        current.fleet_weight = weight
    try:
        yield
    finally:
        current.fleet_activity, current.fleet_weight = previous


# -- the in-memory DynamoDB ---------------------------------------------------------------------


class _ServiceError(Exception):
    def __init__(self, kind: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.body = {"__type": _PREFIX + kind, "message": message, **fields}


@attrs.define
class _Table:
    name: str
    hash_key: str
    range_key: str | None
    #: partition key text -> {range key (comparable) -> item}
    partitions: dict[str, dict[Any, dict[str, Any]]] = attrs.Factory(lambda: defaultdict(dict))


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
    return Decimal(content) if kind == "N" else content


def _text(value: Any) -> str | None:
    if isinstance(value, Mapping) and len(value) == 1:
        (content,) = value.values()
        if isinstance(content, str | int | float):
            return str(content)
    return None


class FleetDynamoDB:
    """Tables in memory, charged per partition as DynamoDB does (see the module docstring).

    Serves ``PutItem``, ``UpdateItem``, ``DeleteItem``, ``GetItem``, ``Query`` (base tables),
    ``BatchWriteItem`` and ``DescribeTable``; any other operation gets a ``ValidationException``
    naming it. Counters (``requests``, ``throttles``, ``units``) count real requests: a request
    of a process of weight ``w`` counts ``w`` times.

    Args:
        clock: virtual seconds (:meth:`EventLoop.monotonic`), for the buckets and per-second loads.
        write_units: write units per second per partition.
        read_units: read units per second per partition.
        watched: tables whose per-partition load is recorded second by second (the metadata
            tables: :meth:`heaviest`).

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        write_units: float = 1000.0,
        read_units: float = 3000.0,
        region: str = "us-east-1",
    ) -> None:
        self.clock = clock
        self.limits = {True: float(write_units), False: float(read_units)}
        self.region = region
        self.tables: dict[str, _Table] = {}
        self.watched: set[str] = set()
        self._buckets: dict[tuple[str, str, bool], list[float]] = {}
        #: (table, operation, activity) -> requests (real ones: weight-fold)
        self.requests: Counter[tuple[str, str, str]] = Counter()
        #: (table, write) -> throttled requests
        self.throttles: Counter[tuple[str, bool]] = Counter()
        #: (table, write) -> units charged (admitted requests)
        self.units: Counter[tuple[str, bool]] = Counter()
        #: (table, write) -> units refused
        self.refused_units: Counter[tuple[str, bool]] = Counter()
        #: watched table -> (key, second, write) -> units
        self.per_second: dict[str, Counter[tuple[str, int, bool]]] = defaultdict(Counter)
        #: watched table -> (key, second, write) -> requests
        self.requests_per_second: dict[str, Counter[tuple[str, int, bool]]] = defaultdict(Counter)
        #: callbacks ``(table, key, new item)`` after each write of a watched table
        self.on_write: list[Callable[[str, str, dict[str, Any]], None]] = []

    # -- tables -------------------------------------------------------------------------------

    def add_table(self, model: type[Model], *, watched: bool = False) -> None:
        """Serve ``model``'s table (empty), keyed as the model declares."""
        name = model.Meta.table_name
        range_key = next((a.attr_name for a in model.get_attributes().values() if a.is_range_key), None)
        if name not in self.tables:
            self.tables[name] = _Table(name, _hash_key_name(model), range_key)
        if watched:
            self.watched.add(name)

    def items(self, table: str) -> Iterator[dict[str, Any]]:
        """Every item of ``table`` (DynamoDB JSON)."""
        for partition in self.tables[table].partitions.values():
            yield from partition.values()

    # -- charging -----------------------------------------------------------------------------

    def _bucket(self, table: str, key: str, write: bool) -> list[float]:
        now = self.clock()
        rate = self.limits[write]
        bucket = self._buckets.get((table, key, write))
        if bucket is None:
            bucket = self._buckets[(table, key, write)] = [rate, now]
        else:
            bucket[0] = min(rate, bucket[0] + max(0.0, now - bucket[1]) * rate)
            bucket[1] = max(bucket[1], now)
        return bucket

    def admit(self, table: str, key: str, units: float, *, write: bool, minimum: float | None = None) -> bool:
        """Take ``units`` from a partition's bucket if it holds them (a read: if it holds
        ``minimum``; the rest may go into debt); ``False`` (a throttle) otherwise."""
        bucket = self._bucket(table, key, write)
        if bucket[0] < (units if minimum is None else minimum):
            self.throttles[(table, write)] += 1 * current_weight()
            self.refused_units[(table, write)] += units
            return False
        bucket[0] -= units
        self.units[(table, write)] += units
        if table in self.watched:
            second = int(self.clock())
            self.per_second[table][(key, second, write)] += units
            self.requests_per_second[table][(key, second, write)] += current_weight()
        return True

    def charge_after(self, table: str, key: str, units: float) -> None:
        """Take the rest of a read's cost, once its size is known (the bucket may go into debt)."""
        if units <= 0:
            return
        self._bucket(table, key, False)[0] -= units
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

    # -- serving ------------------------------------------------------------------------------

    def on_before_send(self, request: Any, **_: Any) -> AWSResponse:
        """botocore ``before-send`` handler: the response to ``request``, made here."""
        target = request.headers.get("X-Amz-Target", b"")
        operation = (target.decode() if isinstance(target, bytes) else target).rpartition(".")[2]
        body = json.loads(request.body or b"{}")
        try:
            status, answer = 200, self.handle(operation, body)
        except _ServiceError as error:
            status, answer = 400, error.body
        except expressions.ExpressionError as error:
            status, answer = 400, {"__type": _PREFIX + "ValidationException", "message": str(error)}
        headers = {"x-amzn-requestid": "fleet", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, _RawBody(json.dumps(answer).encode()))

    def handle(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """Answer one request (the body botocore sends), or raise the error DynamoDB would."""
        handler = {
            "PutItem": self._put_item, "UpdateItem": self._update_item, "DeleteItem": self._delete_item,
            "GetItem": self._get_item, "Query": self._query, "BatchWriteItem": self._batch_write,
            "DescribeTable": self._describe_table,
        }.get(operation)
        if handler is None:
            msg = f"the fleet simulator does not serve {operation}"
            raise _ServiceError("ValidationException", msg)
        table = body.get("TableName", "")
        self.requests[(str(table), operation, current_activity())] += current_weight()
        return handler(body)

    def _table(self, name: Any) -> _Table:
        table = self.tables.get(name)
        if table is None:
            msg = f"Requested resource not found: Table: {name} not found"
            raise _ServiceError("ResourceNotFoundException", msg)
        return table

    def _locate(self, table: _Table, key_or_item: Mapping[str, Any]) -> tuple[str, Any]:
        partition = _text(key_or_item.get(table.hash_key))
        if partition is None:
            msg = f"the key of {table.name} needs {table.hash_key}"
            raise _ServiceError("ValidationException", msg)
        sort = _key_value(key_or_item[table.range_key]) if table.range_key else None
        return partition, sort

    def _throttle(self, table: str, *, write: bool) -> _ServiceError:
        reason = f"Table{'Write' if write else 'Read'}KeyRangeThroughputExceeded"
        body = _throttle_body([types.SimpleNamespace(reason=reason, table=table)], self.region)  # type: ignore[list-item]
        return _ServiceError(body.pop("__type").rpartition("#")[2], body.pop("message"), **body)

    def _write(self, body: Mapping[str, Any], new: Callable[[dict[str, Any] | None], dict[str, Any] | None]) -> tuple[
        dict[str, Any] | None, float
    ]:
        """Charge, check the condition, store ``new(old)``; returns the stored item and units."""
        table = self._table(body.get("TableName"))
        given = body.get("Item") or body.get("Key") or {}
        partition, sort = self._locate(table, given)
        old = table.partitions.get(partition, {}).get(sort)
        condition = body.get("ConditionExpression")
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        after = new(None if old is None else json.loads(json.dumps(old)))
        units = write_units(max(item_size(old or {}), item_size(after or {}))) * current_weight()
        if not self.admit(table.name, partition, units, write=True):
            raise self._throttle(table.name, write=True)
        if condition and not expressions.condition(condition, names, values)(old or {}):
            msg = "The conditional request failed"
            raise _ServiceError("ConditionalCheckFailedException", msg)
        if after is None:
            table.partitions.get(partition, {}).pop(sort, None)
        else:
            table.partitions[partition][sort] = after
        if table.name in self.watched and after is not None:
            for callback in self.on_write:
                callback(table.name, partition, after)
        return after, units

    def _consumed(self, body: Mapping[str, Any], units: float) -> dict[str, Any]:
        mode = body.get("ReturnConsumedCapacity")
        if mode not in ("TOTAL", "INDEXES"):
            return {}
        real = units / current_weight()
        consumed: dict[str, Any] = {"TableName": body.get("TableName"), "CapacityUnits": real}
        if mode == "INDEXES":
            consumed["Table"] = {"CapacityUnits": real}
        return {"ConsumedCapacity": consumed}

    def _put_item(self, body: dict[str, Any]) -> dict[str, Any]:
        _, units = self._write(body, lambda old: body["Item"])
        return self._consumed(body, units)

    def _delete_item(self, body: dict[str, Any]) -> dict[str, Any]:
        _, units = self._write(body, lambda old: None)
        return self._consumed(body, units)

    def _update_item(self, body: dict[str, Any]) -> dict[str, Any]:
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        expression = body.get("UpdateExpression")
        apply = expressions.update(expression, names, values) if expression else (lambda item: None)

        def new(old: dict[str, Any] | None) -> dict[str, Any]:
            item = old if old is not None else json.loads(json.dumps(body["Key"]))
            apply(item)
            return item

        after, units = self._write(body, new)
        answer = self._consumed(body, units)
        if body.get("ReturnValues") == "ALL_NEW" and after is not None:
            answer["Attributes"] = after
        return answer

    def _get_item(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        partition, sort = self._locate(table, body.get("Key") or {})
        consistent = bool(body.get("ConsistentRead"))
        weight = current_weight()
        least = read_units(0, consistent=consistent) * weight
        if not self.admit(table.name, partition, least, write=False, minimum=least):
            raise self._throttle(table.name, write=False)
        item = table.partitions.get(partition, {}).get(sort)
        units = read_units(item_size(item or {}), consistent=consistent) * weight
        self.charge_after(table.name, partition, units - least)
        answer = self._consumed(body, units)
        if item is not None:
            answer["Item"] = item
        return answer

    def _query(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        if body.get("IndexName"):
            msg = f"the fleet simulator does not serve queries of indexes ({body['IndexName']})"
            raise _ServiceError("ValidationException", msg)
        partition = _equality_value(table.hash_key, body)
        if partition is None:
            msg = f"a query of {table.name} needs {table.hash_key} = :value"
            raise _ServiceError("ValidationException", msg)
        consistent = bool(body.get("ConsistentRead"))
        weight = current_weight()
        least = read_units(0, consistent=consistent) * weight
        if not self.admit(table.name, partition, least, write=False, minimum=least):
            raise self._throttle(table.name, write=False)
        names, values = body.get("ExpressionAttributeNames") or {}, body.get("ExpressionAttributeValues") or {}
        key_condition = expressions.condition(body["KeyConditionExpression"], names, values)
        stored = table.partitions.get(partition, {})
        order = sorted(stored, reverse=not body.get("ScanIndexForward", True)) if table.range_key else list(stored)
        start = body.get("ExclusiveStartKey")
        if start is not None and table.range_key:
            after = _key_value(start[table.range_key])
            forward = body.get("ScanIndexForward", True)
            order = [k for k in order if (k > after if forward else k < after)]
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
        units = read_units(size, consistent=consistent) * weight
        self.charge_after(table.name, partition, units - least)
        filtered = matched
        if body.get("FilterExpression"):
            keep = expressions.condition(body["FilterExpression"], names, values)
            filtered = [item for item in matched if keep(item)]
        answer: dict[str, Any] = {"Count": len(filtered), "ScannedCount": len(matched), **self._consumed(body, units)}
        if body.get("Select") != "COUNT":
            answer["Items"] = filtered
        if last is not None:
            answer["LastEvaluatedKey"] = {
                name: last[name] for name in (table.hash_key, table.range_key) if name is not None
            }
        return answer

    def _batch_write(self, body: dict[str, Any]) -> dict[str, Any]:
        unprocessed: dict[str, list[Any]] = {}
        for name, entries in (body.get("RequestItems") or {}).items():
            for entry in entries:
                single = {"TableName": name, **(entry.get("PutRequest") or entry.get("DeleteRequest") or {})}
                try:
                    if "PutRequest" in entry:
                        self._write(single, lambda old, s=single: s["Item"])  # type: ignore[misc]
                    else:
                        self._write(single, lambda old: None)
                except _ServiceError as error:
                    if not error.body["__type"].endswith("ProvisionedThroughputExceededException"):
                        raise
                    unprocessed.setdefault(name, []).append(entry)
        return {"UnprocessedItems": unprocessed}

    def _describe_table(self, body: dict[str, Any]) -> dict[str, Any]:
        table = self._table(body.get("TableName"))
        schema = [{"AttributeName": table.hash_key, "KeyType": "HASH"}]
        if table.range_key:
            schema.append({"AttributeName": table.range_key, "KeyType": "RANGE"})
        return {"Table": {"TableName": table.name, "TableStatus": "ACTIVE", "KeySchema": schema}}


# -- binding models to the fleet ----------------------------------------------------------------


class Fleet:
    """An event loop, an in-memory DynamoDB, and the models of its processes bound to it.

    Args:
        write_units: write units per second per partition (DynamoDB: 1,000).
        read_units: read units per second per partition (DynamoDB: 3,000).
        seed: seeds every process's ``random.Random``.

    .. versionadded:: 0.2.0
    """

    host = "http://127.0.0.1:9"  # never contacted: before-send answers every request

    def __init__(self, *, write_units: float = 1000.0, read_units: float = 3000.0, seed: int = 0) -> None:
        self.loop = EventLoop()
        self.db = FleetDynamoDB(self.loop.monotonic, write_units=write_units, read_units=read_units)
        self._seeds = _random.Random(seed)
        self._connections: dict[str, Any] = {}
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
    def meta(table_name: str, **settings: Any) -> type:
        """A ``Meta`` for a model of this fleet: its table, the fleet's endpoint, dummy credentials."""
        return type("Meta", (), {
            "table_name": table_name, "host": Fleet.host, "region": "us-east-1",
            "aws_access_key_id": "fleet", "aws_secret_access_key": "fleet", **settings,
        })

    def bind(self, model: type[Model]) -> type[Model]:
        """Serve ``model``'s table and its companions' (the metadata table, watched) from the
        fleet; models of one table share one connection (one botocore client). Returns ``model``."""
        for bound in with_companions([model]):
            name = bound.Meta.table_name
            self.db.add_table(bound, watched=bound is not model)
            shared = self._connections.get(name)
            if shared is not None:
                bound._connection = shared
                continue
            # PynamoDB's own connection first (not yet armed by the library), to reach its client.
            client = Model._get_connection.__func__(bound).connection.client  # type: ignore[attr-defined]
            if client not in _host._guarded:
                # Many process models share one table and client: the guard checks one per table.
                guard = _host._guarded[client] = _OnePerTable()
                client.meta.events.register_first(_host._GUARD_EVENT, guard, unique_id=_host._GUARD_ID)
            self._connections[name] = bound._get_connection()
            if not any(client is known for known in self._clients):
                client.meta.events.register_first("before-send.dynamodb", self.db.on_before_send)
                # Nothing leaves the process: signing (a third of botocore's time) is skipped.
                client.meta.events.register_first("choose-signer.dynamodb", _unsigned)
                self._clients.append(client)
        return model

    @contextlib.contextmanager
    def running(self) -> Iterator[EventLoop]:
        """Within the block, botocore's retry sleeps wait on the fleet's virtual time."""
        real = botocore.endpoint.time
        botocore.endpoint.time = types.SimpleNamespace(sleep=self.loop.sleep, time=real.time)  # type: ignore[assignment]
        try:
            yield self.loop
        finally:
            botocore.endpoint.time = real


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
