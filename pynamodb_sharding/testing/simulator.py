"""Make a model's botocore client throttle per physical partition key, the way DynamoDB does.

DynamoDB Local never throttles. :func:`simulate_partition_limits` hooks the botocore client of
a model (and of its companion models) through botocore's own events, so a request over a
partition's limit gets the response DynamoDB would send: a ``400`` with a
``ProvisionedThroughputExceededException`` body and its ``ThrottlingReasons``, which botocore
parses and retries exactly as it would a real one, and which PynamoDB then raises as
``PutError``/``UpdateError``/... after botocore's retries.

How requests are charged (one token bucket per table and physical partition key value, in
capacity units per second, starting full with one second of burst):

* writes (``PutItem``, ``UpdateItem``, ``DeleteItem``, each entry of ``BatchWriteItem``): one
  write unit per started KB of the item, sized from the request (the item for a put, the key
  plus the update's values for an update, the key for a delete: DynamoDB charges the larger of
  the old and new item, which the request does not show). ``TransactWriteItems`` entries cost
  twice that, and a transaction is admitted or refused as a whole;
* reads (``GetItem``, ``Query`` on the table, each key of ``BatchGetItem``): a read must find
  at least its minimum (one unit, half for an eventually consistent read) in the bucket and
  takes it before it is sent; after the response, the rest of its real cost (one unit per
  started 4 KB of the items returned, halved when eventually consistent) is taken from the
  bucket, which may go into debt, as DynamoDB lets one read overdraw and throttles the next;
* global secondary indexes, with ``index_write_units``: a put (``PutItem``, a put of
  ``BatchWriteItem``, a ``Put`` of ``TransactWriteItems``) of an item that holds an index's
  hash-key attribute also takes its write units from that index's bucket for the value it
  stores (the physical index key); an index partition short of them refuses the whole write
  with the ``IndexWriteKeyRangeThroughputExceeded`` reason and the index's ARN
  (``arn:aws:dynamodb:<region>:000000000000:table/<table>/index/<index>``), as DynamoDB's
  back-pressure does. Index partitions are counted in :attr:`PartitionLimitSimulator.write_units`
  under ``("<table>/index/<index>", value)`` (``"<value>#<shard>"`` for an index of
  ``layout="multi_attribute"``, whose partition key is the pair). Updates and deletes, whose request does not show
  the index value the item held, are not charged to index partitions;
* queries of a global secondary index (``Query`` with ``IndexName``, a read replica's of
  ``Sharding(read_replicas=N)`` too), with ``index_read_units``: charged like table queries
  to the index partition of the value the key condition sets the index's hash key equal to, and refused with
  ``IndexReadKeyRangeThroughputExceeded`` and the index's ARN; they take nothing from the
  table's buckets, as an index has capacity of its own;
* whole tables and whole indexes, with ``table_write_units``/``table_read_units`` and
  ``index_table_write_units``/``index_table_read_units``: every charge to a table's (or an
  index's) partitions is also taken from its whole-resource bucket, refused with the reason of
  the limit ``capacity_limit`` names: ``<Table|Index><Write|Read>ProvisionedThroughputExceeded``
  (the default), ``...AccountLimitExceeded`` or ``...MaxOnDemandThroughputExceeded``. With
  ``table_*`` and ``index_*`` limits the simulator produces each of DynamoDB's sixteen
  throttling reasons;
* not charged: ``Scan``, queries of a local secondary index, ``TransactGetItems``, tables of
  other models.

Over the limit:

* a single-item request gets the error response DynamoDB sends for the reason: a
  ``ProvisionedThroughputExceededException`` for key ranges and provisioned capacity, a
  ``RequestLimitExceeded`` for the account quota (``...AccountLimitExceeded``), a
  ``ThrottlingException`` (its list spelled ``throttlingReasons``) for an on-demand maximum
  (``...MaxOnDemandThroughputExceeded``);
* ``BatchWriteItem``/``BatchGetItem`` forward the admitted entries (the request body is
  rewritten in ``before-sign``, so the request is signed as sent) and return the refused ones
  in ``UnprocessedItems``/``UnprocessedKeys`` of the real success response; when every entry
  is refused the whole request gets the error response, as DynamoDB does;
* ``TransactWriteItems`` gets a ``TransactionCanceledException`` whose cancellation reason is
  ``ThrottlingError`` for each refused entry (``None`` for the others). botocore does not retry it.

Time: botocore's standard retry mode (what PynamoDB configures: ``Meta.max_retry_attempts``
retries) sleeps ``rand(0, 1) * 2**i`` seconds before retry ``i`` of a throttled request, so a
write refused on every attempt takes on average 0.5 s with one retry, 1.5 s with two and 3.5 s
with PynamoDB's default of three (at most 1, 3 and 7 s). Tests set ``max_retry_attempts`` low.
botocore also keeps a per-client retry quota (500 tokens, 5 per throttled retry, refunded by
successes): past about 100 throttled retries without a success, it stops retrying at all.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs
from botocore.awsrequest import AWSResponse
from pynamodb.indexes import GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding._descriptor import is_sharded, shard_manager
from pynamodb_sharding._host import index_hash_attribute, indexes, keep_unmodelled_fields
from pynamodb_sharding._indexes import sharded_indexes_of
from pynamodb_sharding._model import with_companions
from pynamodb_sharding._replicas import replica_names
from pynamodb_sharding._sizes import item_size
from pynamodb_sharding._throttling import ThrottleKind, ThrottleReason
from pynamodb_sharding.testing.latency import clients_of

__all__ = [
    "CapacityLimit",
    "LoadClock",
    "PartitionId",
    "PartitionLimitSimulator",
    "item_size",
    "read_units",
    "simulate_partition_limits",
    "write_units",
]

#: A physical partition: the table name and the partition key value as sent on the wire
#: (the string of an ``S`` or ``N`` value, the base64 text of a ``B`` value).
PartitionId = tuple[str, str]

#: Which whole-table (or whole-index) limit ``table_write_units``, ``table_read_units``,
#: ``index_table_write_units`` and ``index_table_read_units`` stand for: a provisioned table's
#: capacity, the account's per-table quota of an on-demand table, or an on-demand table's
#: configured maximum (``OnDemandThroughput``).
CapacityLimit = Literal["provisioned", "account", "on_demand_maximum"]

_CAPACITY_SUFFIXES: dict[str, str] = {
    "provisioned": "ProvisionedThroughputExceeded",
    "account": "AccountLimitExceeded",
    "on_demand_maximum": "MaxOnDemandThroughputExceeded",
}
_KEY_RANGE_SUFFIX = "KeyRangeThroughputExceeded"
# Bucket scopes: a table's partition, a whole table, an index's partition, a whole index.
_PARTITION, _TABLE, _INDEX, _INDEX_TABLE = "partition", "table", "index", "index_table"
_PTEE_TYPE = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
_THROTTLING_TYPE = "com.amazonaws.dynamodb.v20120810#ThrottlingException"
_REQUEST_LIMIT_TYPE = "com.amazonaws.dynamodb.v20120810#RequestLimitExceeded"
_TRANSACTION_CANCELED_TYPE = "com.amazonaws.dynamodb.v20120810#TransactionCanceledException"
_PTEE_MESSAGE = (
    "The level of configured provisioned throughput for the table was exceeded. "
    "Consider increasing your provisioning level with the UpdateTable API."
)
_THROTTLING_ERROR_MESSAGE = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
    "scaling your table or index so please try again shortly."
)
# The errors DynamoDB's error reference lists for the limits of on-demand tables, by reason
# suffix: the error type, how it spells its list of reasons, its message.
_ON_DEMAND_ERRORS = {
    "AccountLimitExceeded": (
        _REQUEST_LIMIT_TYPE, "ThrottlingReasons", "Throughput exceeds the throughput limit of your account."
    ),
    "MaxOnDemandThroughputExceeded": (
        _THROTTLING_TYPE, "throttlingReasons", "The rate of requests exceeds the throughput allowed."
    ),
}
_UNSET: Any = object()
_instances = itertools.count(1)




def write_units(size: int) -> int:
    """Write units of an item of ``size`` bytes: one per started KB, at least one."""
    return max(1, math.ceil(size / 1024))


def read_units(size: int, *, consistent: bool) -> float:
    """Read units of ``size`` bytes read: one per started 4 KB, half when eventually consistent."""
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


# -- decisions ----------------------------------------------------------------------------------


@attrs.frozen
class _Charge:
    """Units one request (or one batch entry) asks of one partition and its table."""

    table: str
    key: str | None  # None when the partition cannot be told from the request
    units: float
    write: bool
    #: True for a charge to an index partition (``table`` is then ``"<table>/index/<index>"``).
    index: bool = False


@attrs.frozen
class _Refusal:
    """A bucket that could not cover a request: its reason, table and key (``None``: table-level)."""

    reason: str
    table: str
    key: str | None


#: A token bucket: its scope, write (or read), the table (``"<table>/index/<index>"`` for an
#: index) and the partition key value (``None`` for a whole table or index).
_BucketId = tuple[str, bool, str, str | None]


@attrs.define
class _Bucket:
    tokens: float
    updated: float

    def refill(self, now: float, rate: float) -> None:
        self.tokens = min(rate, self.tokens + max(0.0, now - self.updated) * rate)
        self.updated = now


@attrs.frozen
class _Read:
    """A read admitted on its minimum, charged the rest once its response is seen."""

    table: str
    key: str | None
    consistent: bool
    item_key: Mapping[str, Any] | None = None  # the full key of one BatchGetItem key
    index: bool = False  # a query of a global index (``table`` is ``"<table>/index/<index>"``)


@attrs.define
class _Verdict:
    """What ``before-sign`` decided for one attempt, read by ``before-send`` and ``after-call``."""

    error_body: dict[str, Any] | None = None
    unprocessed_field: str | None = None
    unprocessed: dict[str, Any] = attrs.Factory(dict)
    reads: list[_Read] = attrs.Factory(list)


class _RawBody:
    """The ``raw`` of an :class:`AWSResponse` made here: botocore only streams it."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _key_text(value: Any) -> str | None:
    if isinstance(value, Mapping) and len(value) == 1:
        (content,) = value.values()
        if isinstance(content, str | int | float):
            return str(content)
    return None


_EQUALITY = re.compile(r"(#?[\w.-]+)\s*=\s*(:[\w-]+)")


class PartitionLimitSimulator:
    """The state of one :func:`simulate_partition_limits` block: buckets, limits, counters.

    All counters count attempts as botocore sends them, retries included.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        hash_keys: Mapping[str, str],
        *,
        write_units: float | None,
        read_units: float | None,
        table_write_units: float | None,
        table_read_units: float | None,
        clock: Callable[[], float],
        index_hash_keys: Mapping[str, Mapping[str, str]] | None = None,
        index_write_units: float | None = None,
        index_read_units: float | None = None,
        index_table_write_units: float | None = None,
        index_table_read_units: float | None = None,
        capacity_limit: CapacityLimit = "provisioned",
    ) -> None:
        self._hash_keys = dict(hash_keys)  # table name -> hash key attribute name
        # table name -> {index name -> the index's hash key attribute name}
        self._index_hash_keys = {table: dict(keys) for table, keys in (index_hash_keys or {}).items()}
        self._limits: dict[tuple[str, bool], float | None] = {}
        self._capacity_limit: CapacityLimit = "provisioned"
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[_BucketId, _Bucket] = {}
        self._requests: Counter[str] = Counter()
        self._throttles: Counter[ThrottleKind] = Counter()
        self._throttles_by_reason: Counter[str] = Counter()
        self._write_units: dict[PartitionId, float] = {}
        self._read_units: dict[PartitionId, float] = {}
        self._context_key = f"pynamodb_sharding.simulator.{next(_instances)}"
        self._sending = threading.local()
        self.set_limits(
            write_units=write_units,
            read_units=read_units,
            table_write_units=table_write_units,
            table_read_units=table_read_units,
            index_write_units=index_write_units,
            index_read_units=index_read_units,
            index_table_write_units=index_table_write_units,
            index_table_read_units=index_table_read_units,
            capacity_limit=capacity_limit,
        )

    # -- public surface -------------------------------------------------------------------

    def set_limits(
        self,
        *,
        write_units: float | None = _UNSET,
        read_units: float | None = _UNSET,
        table_write_units: float | None = _UNSET,
        table_read_units: float | None = _UNSET,
        index_write_units: float | None = _UNSET,
        index_read_units: float | None = _UNSET,
        index_table_write_units: float | None = _UNSET,
        index_table_read_units: float | None = _UNSET,
        capacity_limit: CapacityLimit = _UNSET,
    ) -> None:
        """Change limits (units per second; ``None`` lifts one) while the simulator runs.

        Buckets keep their tokens, capped at the new one-second burst on their next use. The
        arguments are those of :func:`simulate_partition_limits`; one not given stays as it is.

        Raises:
            ValueError: A limit is zero or negative, or ``capacity_limit`` is not one of
                ``"provisioned"``, ``"account"``, ``"on_demand_maximum"``.
        """
        if capacity_limit is not _UNSET:
            if capacity_limit not in _CAPACITY_SUFFIXES:
                msg = (
                    f"simulate_partition_limits: capacity_limit {capacity_limit!r} is not one of "
                    f"{', '.join(repr(name) for name in _CAPACITY_SUFFIXES)}"
                )
                raise ValueError(msg)
            with self._lock:
                self._capacity_limit = capacity_limit
        changes: dict[tuple[str, bool], float | None] = {
            (_PARTITION, True): write_units,
            (_PARTITION, False): read_units,
            (_TABLE, True): table_write_units,
            (_TABLE, False): table_read_units,
            (_INDEX, True): index_write_units,
            (_INDEX, False): index_read_units,
            (_INDEX_TABLE, True): index_table_write_units,
            (_INDEX_TABLE, False): index_table_read_units,
        }
        for limit, value in changes.items():
            if value is _UNSET:
                continue
            if value is not None and not value > 0:
                msg = f"simulate_partition_limits: a limit of {value!r} units/s is not positive; pass None to lift it"
                raise ValueError(msg)
            with self._lock:
                self._limits[limit] = value

    @property
    def capacity_limit(self) -> CapacityLimit:
        """Which whole-table limit the table- and index-wide limits stand for."""
        with self._lock:
            return self._capacity_limit

    @property
    def tables(self) -> dict[str, str]:
        """The simulated tables and their hash key attribute names."""
        return dict(self._hash_keys)

    @property
    def requests(self) -> dict[str, int]:
        """Requests seen per operation (every attempt, throttled or not, simulated or not)."""
        with self._lock:
            return dict(self._requests)

    @property
    def throttles(self) -> dict[ThrottleKind, int]:
        """Refusals per kind: one per refused request, one per refused batch entry."""
        with self._lock:
            return dict(self._throttles)

    @property
    def throttles_by_reason(self) -> dict[str, int]:
        """Refusals per throttling reason (``TableWriteKeyRangeThroughputExceeded``...)."""
        with self._lock:
            return dict(self._throttles_by_reason)

    @property
    def write_units(self) -> dict[PartitionId, float]:
        """Write units accepted per physical partition."""
        with self._lock:
            return dict(self._write_units)

    @property
    def read_units(self) -> dict[PartitionId, float]:
        """Read units charged per physical partition (minimum before, the rest after)."""
        with self._lock:
            return dict(self._read_units)

    # -- bucket arithmetic ----------------------------------------------------------------

    def _admit(self, charges: Sequence[_Charge]) -> list[_Refusal]:
        """Take every charge, or none: return the refusals, empty if admitted."""
        demand: dict[_BucketId, float] = {}
        for charge in charges:
            partition_scope, whole_scope = _scopes(index=charge.index)
            if charge.key is not None:
                partition = (partition_scope, charge.write, charge.table, charge.key)
                demand[partition] = demand.get(partition, 0.0) + charge.units
            whole = (whole_scope, charge.write, charge.table, None)
            demand[whole] = demand.get(whole, 0.0) + charge.units
        refusals: list[_Refusal] = []
        with self._lock:
            now = self._clock()
            for bucket_id, units in demand.items():
                rate = self._limits[bucket_id[:2]]
                if rate is None:
                    continue
                bucket = self._buckets.get(bucket_id)
                if bucket is None:
                    bucket = self._buckets.setdefault(bucket_id, _Bucket(rate, now))
                bucket.refill(now, rate)
                # A request bigger than a full bucket passes on a full bucket and leaves debt.
                if bucket.tokens + 1e-9 < min(units, rate):
                    reason = _reason(bucket_id[0], write=bucket_id[1], capacity_limit=self._capacity_limit)
                    refusals.append(_Refusal(reason, bucket_id[2], bucket_id[3]))
            if refusals:
                for refusal in refusals:
                    self._throttles_by_reason[refusal.reason] += 1
                    self._throttles[_kind(refusal.reason)] += 1
                return refusals
            for bucket_id, units in demand.items():
                if self._limits[bucket_id[:2]] is not None:
                    self._buckets[bucket_id].tokens -= units
            for charge in charges:
                if charge.key is not None:
                    counter = self._write_units if charge.write else self._read_units
                    accepted = (charge.table, charge.key)
                    counter[accepted] = counter.get(accepted, 0.0) + charge.units
        return []

    def _charge_after(self, table: str, key: str | None, units: float, *, index: bool = False) -> None:
        """Take units a read turned out to cost, into debt if need be."""
        if units <= 0:
            return
        partition_scope, whole_scope = _scopes(index=index)
        with self._lock:
            now = self._clock()
            bucket_id: _BucketId
            for bucket_id in ((partition_scope, False, table, key), (whole_scope, False, table, None)):
                rate = self._limits[bucket_id[:2]]
                if rate is None or (bucket_id[3] is None and bucket_id[0] == partition_scope):
                    continue
                bucket = self._buckets.setdefault(bucket_id, _Bucket(rate, now))
                bucket.refill(now, rate)
                bucket.tokens -= units
            if key is not None:
                self._read_units[(table, key)] = self._read_units.get((table, key), 0.0) + units

    # -- request analysis -----------------------------------------------------------------

    def _key_of(self, table: str, item: Any) -> str | None:
        attribute = self._hash_keys.get(table)
        if attribute is None or not isinstance(item, Mapping):
            return None
        return _key_text(item.get(attribute))

    def _index_charges(self, table: Any, item: Any, *, factor: int = 1) -> list[_Charge]:
        """The charges a put of ``item`` makes to the partitions of ``table``'s global indexes."""
        if not isinstance(table, str) or not isinstance(item, Mapping):
            return []
        units = float(factor * write_units(item_size(item)))
        charges = []
        for index, attribute in self._index_hash_keys.get(table, {}).items():
            # A multi-attribute partition key ("day", "day_shard") is one partition per pair.
            parts = [_key_text(item.get(name)) for name in attribute.split("\x1f")]
            key = None if None in parts else "#".join(part for part in parts if part is not None)
            if key is not None:
                charges.append(_Charge(f"{table}/index/{index}", key, units, True, index=True))
        return charges

    def _write_charge(self, table: Any, item: Any, *, factor: int = 1) -> _Charge | None:
        if not isinstance(table, str) or table not in self._hash_keys or not isinstance(item, Mapping):
            return None
        return _Charge(table, self._key_of(table, item), float(factor * write_units(item_size(item))), True)

    def _read_charge(self, table: Any, key: str | None, *, consistent: bool) -> _Charge | None:
        if not isinstance(table, str) or table not in self._hash_keys:
            return None
        return _Charge(table, key, read_units(0, consistent=consistent), False)

    def _query_key(self, attributes: str, body: Mapping[str, Any]) -> str | None:
        """The partition a query reads: the equality of its key condition on ``attributes``
        (names joined by ``\x1f`` for a multi-attribute partition key, the values then by ``#``)."""
        parts = [_equality_value(attribute, body) for attribute in attributes.split("\x1f")]
        return None if None in parts else "#".join(part for part in parts if part is not None)

    def _single(self, operation: str, body: Mapping[str, Any]) -> tuple[_Charge | None, _Verdict]:
        table = body.get("TableName")
        verdict = _Verdict()
        if operation == "PutItem":
            return self._write_charge(table, body.get("Item")), verdict
        if operation == "DeleteItem":
            return self._write_charge(table, body.get("Key")), verdict
        if operation == "UpdateItem":
            key = body.get("Key")
            values = body.get("ExpressionAttributeValues")
            item = {**(key if isinstance(key, Mapping) else {}), **(values if isinstance(values, Mapping) else {})}
            charge = self._write_charge(table, item)
            if charge is not None and isinstance(key, Mapping):
                charge = attrs.evolve(charge, key=self._key_of(charge.table, key))
            return charge, verdict
        if not isinstance(table, str) or table not in self._hash_keys:
            return None, verdict
        consistent = body.get("ConsistentRead") is True
        if operation == "GetItem":
            key = self._key_of(table, body.get("Key"))
        elif operation == "Query" and "IndexName" not in body:
            key = self._query_key(self._hash_keys[table], body)
        elif operation == "Query":
            # A global index has capacity of its own; a local one (not listed) is not charged.
            index_name = body.get("IndexName")
            attributes = self._index_hash_keys.get(table, {}).get(index_name) if isinstance(index_name, str) else None
            if attributes is None:
                return None, verdict
            index_table = f"{table}/index/{index_name}"
            key = self._query_key(attributes, body)
            verdict.reads.append(_Read(index_table, key, consistent, index=True))
            return _Charge(index_table, key, read_units(0, consistent=consistent), False, index=True), verdict
        else:
            return None, verdict
        verdict.reads.append(_Read(table, key, consistent))
        return self._read_charge(table, key, consistent=consistent), verdict

    # -- event handlers -------------------------------------------------------------------

    def _on_before_sign(self, request: Any, operation_name: str, region_name: str | None = None, **_: Any) -> None:
        self._sending.verdict = None
        context = request.context
        if isinstance(context, dict):
            context.pop(self._context_key, None)
        with self._lock:
            self._requests[operation_name] += 1
        try:
            body = json.loads(request.data or b"{}")
        except (TypeError, ValueError):
            return
        if not isinstance(body, dict) or not isinstance(context, dict):
            return
        region = region_name or "us-east-1"
        if operation_name == "BatchWriteItem":
            verdict = self._batch_write(request, body, region)
        elif operation_name == "BatchGetItem":
            verdict = self._batch_get(request, body, region)
        elif operation_name == "TransactWriteItems":
            verdict = self._transact_write(body)
        else:
            charge, verdict = self._single(operation_name, body)
            if charge is not None:
                put = operation_name == "PutItem"
                extra = self._index_charges(body.get("TableName"), body.get("Item")) if put else []
                refusals = self._admit([charge, *extra])
                if refusals:
                    verdict = _Verdict(error_body=_throttle_body(refusals, region))
        if verdict is not None:
            context[self._context_key] = verdict
        self._sending.verdict = verdict

    def _batch_write(self, request: Any, body: dict[str, Any], region: str) -> _Verdict | None:
        tables = body.get("RequestItems")
        if not isinstance(tables, dict):
            return None
        verdict = _Verdict(unprocessed_field="UnprocessedItems")
        admitted: dict[str, list[Any]] = {}
        all_refusals: list[_Refusal] = []
        for table, entries in tables.items():
            if not isinstance(entries, list):
                return None
            for entry in entries:
                item = None
                extra: list[_Charge] = []
                if isinstance(entry, Mapping):
                    put, delete = entry.get("PutRequest"), entry.get("DeleteRequest")
                    item = put.get("Item") if isinstance(put, Mapping) else None
                    extra = self._index_charges(table, item)
                    if item is None and isinstance(delete, Mapping):
                        item = delete.get("Key")
                charge = self._write_charge(table, item)
                refusals = self._admit([charge, *extra]) if charge is not None else []
                if refusals:
                    all_refusals.extend(refusals)
                    verdict.unprocessed.setdefault(table, []).append(entry)
                else:
                    admitted.setdefault(table, []).append(entry)
        if not verdict.unprocessed:
            return None
        if not admitted:
            return _Verdict(error_body=_throttle_body(all_refusals, region))
        _rewrite_body(request, {**body, "RequestItems": admitted})
        return verdict

    def _batch_get(self, request: Any, body: dict[str, Any], region: str) -> _Verdict | None:
        tables = body.get("RequestItems")
        if not isinstance(tables, dict):
            return None
        verdict = _Verdict(unprocessed_field="UnprocessedKeys")
        admitted: dict[str, Any] = {}
        all_refusals: list[_Refusal] = []
        for table, request_of_table in tables.items():
            if not isinstance(request_of_table, Mapping) or not isinstance(request_of_table.get("Keys"), list):
                return None
            consistent = request_of_table.get("ConsistentRead") is True
            for key in request_of_table["Keys"]:
                key_text = self._key_of(table, key)
                charge = self._read_charge(table, key_text, consistent=consistent)
                refusals = self._admit([charge]) if charge is not None else []
                if refusals:
                    all_refusals.extend(refusals)
                    verdict.unprocessed.setdefault(table, {**request_of_table, "Keys": []})["Keys"].append(key)
                else:
                    admitted.setdefault(table, {**request_of_table, "Keys": []})["Keys"].append(key)
                    if charge is not None:
                        verdict.reads.append(_Read(table, key_text, consistent, key))
        if not verdict.unprocessed:
            return verdict if verdict.reads else None
        if not admitted:
            return _Verdict(error_body=_throttle_body(all_refusals, region))
        _rewrite_body(request, {**body, "RequestItems": admitted})
        return verdict

    def _transact_write(self, body: dict[str, Any]) -> _Verdict | None:
        entries = body.get("TransactItems")
        if not isinstance(entries, list):
            return None
        charges: list[_Charge | None] = []
        index_charges: list[_Charge] = []
        for entry in entries:
            charge = None
            if isinstance(entry, Mapping) and len(entry) == 1:
                ((action, details),) = entry.items()
                if isinstance(details, Mapping):
                    item: Any = details.get("Item") if action == "Put" else details.get("Key")
                    if action == "Update" and isinstance(item, Mapping):
                        values = details.get("ExpressionAttributeValues")
                        sized = {**item, **(values if isinstance(values, Mapping) else {})}
                        charge = self._write_charge(details.get("TableName"), sized, factor=2)
                        if charge is not None:
                            charge = attrs.evolve(charge, key=self._key_of(charge.table, item))
                    else:
                        charge = self._write_charge(details.get("TableName"), item, factor=2)
                        if action == "Put":
                            index_charges.extend(self._index_charges(details.get("TableName"), item, factor=2))
            charges.append(charge)
        admitted = [charge for charge in charges if charge is not None] + index_charges
        refusals = self._admit(admitted) if admitted else []
        if not refusals:
            return None
        # Name the entries whose partition or table is short, as DynamoDB's reasons do.
        short = [
            charge is not None and any(
                (r.table == charge.table and r.key in (None, charge.key))
                or r.table.startswith(f"{charge.table}/index/")
                for r in refusals
            )
            for charge in charges
        ]
        reasons = [
            {"Code": "ThrottlingError", "Message": _THROTTLING_ERROR_MESSAGE} if is_short else {"Code": "None"}
            for is_short in short
        ]
        codes = ", ".join(reason["Code"] for reason in reasons)
        return _Verdict(
            error_body={
                "__type": _TRANSACTION_CANCELED_TYPE,
                "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                "CancellationReasons": reasons,
            }
        )

    def _on_before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        # before-sign and before-send of one attempt run back to back on the sending thread;
        # the prepared request carries no context before botocore 1.43.68, so the verdict
        # travels in a thread-local.
        verdict = getattr(self._sending, "verdict", None)
        self._sending.verdict = None
        if not isinstance(verdict, _Verdict) or verdict.error_body is None:
            return None
        headers = {
            "x-amzn-requestid": f"simulated-{next(_instances)}",
            "content-type": "application/x-amz-json-1.0",
        }
        return AWSResponse(request.url, 400, headers, _RawBody(json.dumps(verdict.error_body).encode()))

    def _on_after_call(self, parsed: Any, context: Any, **_: Any) -> None:
        verdict = context.get(self._context_key) if isinstance(context, dict) else None
        if not isinstance(verdict, _Verdict) or not isinstance(parsed, dict):
            return
        if verdict.unprocessed_field is not None and verdict.unprocessed:
            merged = parsed.setdefault(verdict.unprocessed_field, {})
            for table, entries in verdict.unprocessed.items():
                if verdict.unprocessed_field == "UnprocessedItems":
                    merged.setdefault(table, []).extend(entries)
                else:
                    merged.setdefault(table, {**entries, "Keys": []})["Keys"].extend(entries["Keys"])
        for read in verdict.reads:
            items = list(_returned_items(parsed, read))
            if read.item_key is None:  # a query is charged on the sum of its items
                units = read_units(sum(item_size(item) for item in items), consistent=read.consistent)
            else:
                units = sum(read_units(item_size(item), consistent=read.consistent) for item in items)
            rest = units - read_units(0, consistent=read.consistent)
            self._charge_after(read.table, read.key, rest, index=read.index)


def _returned_items(parsed: Mapping[str, Any], read: _Read) -> Iterable[Any]:
    if read.item_key is not None:
        responses = parsed.get("Responses")
        items = responses.get(read.table) if isinstance(responses, Mapping) else None
        for item in items if isinstance(items, list) else ():
            if isinstance(item, Mapping) and all(item.get(k) == v for k, v in read.item_key.items()):
                yield item
                return
    elif isinstance(parsed.get("Item"), Mapping):
        yield parsed["Item"]
    elif isinstance(parsed.get("Items"), list):
        yield from parsed["Items"]


def _scopes(*, index: bool) -> tuple[str, str]:
    """The partition scope and the whole-resource scope of a charge to a table or an index."""
    return (_INDEX, _INDEX_TABLE) if index else (_PARTITION, _TABLE)


def _reason(scope: str, *, write: bool, capacity_limit: CapacityLimit) -> str:
    """DynamoDB's reason for a bucket of ``scope`` that is short: ``<Table|Index><Write|Read><limit>``."""
    resource = "Index" if scope in (_INDEX, _INDEX_TABLE) else "Table"
    limit = _KEY_RANGE_SUFFIX if scope in (_PARTITION, _INDEX) else _CAPACITY_SUFFIXES[capacity_limit]
    return f"{resource}{'Write' if write else 'Read'}{limit}"


def _equality_value(attribute: str, body: Mapping[str, Any]) -> str | None:
    """The value a query's key condition sets ``attribute`` equal to, if it does."""
    conditions = body.get("KeyConditions")
    if isinstance(conditions, Mapping):
        condition = conditions.get(attribute)
        if isinstance(condition, Mapping) and isinstance(condition.get("AttributeValueList"), list):
            values = condition["AttributeValueList"]
            return _key_text(values[0]) if values else None
    expression = body.get("KeyConditionExpression")
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    if not isinstance(expression, str) or not isinstance(names, Mapping) or not isinstance(values, Mapping):
        return None
    for name, placeholder in _EQUALITY.findall(expression):
        if names.get(name, name) == attribute:
            return _key_text(values.get(placeholder))
    return None


def _kind(reason: str) -> ThrottleKind:
    return ThrottleReason(reason).kind


def _throttle_body(refusals: Iterable[_Refusal], region: str) -> dict[str, Any]:
    """The error DynamoDB sends: ``RequestLimitExceeded`` for an account quota, a
    ``ThrottlingException`` (its list spelled ``throttlingReasons``) for an on-demand maximum,
    else a ``ProvisionedThroughputExceededException``."""
    reasons = []
    for reason, table in dict.fromkeys((refusal.reason, refusal.table) for refusal in refusals):
        reasons.append({"reason": reason, "resource": f"arn:aws:dynamodb:{region}:000000000000:table/{table}"})
    for suffix, (error_type, field, message) in _ON_DEMAND_ERRORS.items():
        if any(entry["reason"].endswith(suffix) for entry in reasons):
            return {"__type": error_type, "message": message, field: reasons}
    return {"__type": _PTEE_TYPE, "message": _PTEE_MESSAGE, "ThrottlingReasons": reasons}


def _rewrite_body(request: Any, body: Mapping[str, Any]) -> None:
    """Replace the body of a request that is not signed yet."""
    data = json.dumps(body).encode()
    request.data = data
    if "Content-Length" in request.headers:
        request.headers["Content-Length"] = str(len(data))


def _hash_key_name(model: type[Model]) -> str:
    """The hash key's attribute name in DynamoDB (which ``attr_name`` may differ from in Python)."""
    for attribute in model.get_attributes().values():
        if attribute.is_hash_key:
            return attribute.attr_name
    msg = f"{model.__name__} has no hash key attribute: give it one with hash_key=True"
    raise ValueError(msg)


def _index_hash_key_names(model: type[Model]) -> dict[str, str]:
    """The stored hash-key attribute name of each global secondary index of ``model``; the
    names of a multi-attribute partition key joined by ``\x1f`` (``layout="multi_attribute"``)."""
    names = {}
    sharded = sharded_indexes_of(model)
    for name, index in indexes(model).items():
        if isinstance(index, GlobalSecondaryIndex):
            names[name] = index_hash_attribute(index).attr_name
            shard_attr = getattr(sharded.get(name), "shard_attr_name", None)
            if shard_attr is not None:
                names[name] += "\x1f" + shard_attr
    if is_sharded(model):  # read replicas (Sharding(read_replicas=N)) are keyed like the table
        for name in replica_names(shard_manager(model).read_replicas):
            names[name] = _hash_key_name(model)
    return names


@contextlib.contextmanager
def simulate_partition_limits(
    model: type[Model],
    write_units: float | None = 1000,
    read_units: float | None = 3000,
    *,
    table_write_units: float | None = None,
    table_read_units: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    extra_models: Iterable[type[Model]] = (),
    index_write_units: float | None = None,
    index_read_units: float | None = None,
    index_table_write_units: float | None = None,
    index_table_read_units: float | None = None,
    capacity_limit: CapacityLimit = "provisioned",
    companions: bool = True,
) -> Iterator[PartitionLimitSimulator]:
    """Throttle ``model``'s requests per physical partition key, as DynamoDB would.

    Hooks the botocore client of ``model``, of its companion models
    (``model.companion_models()``, e.g. a ``DynamicShards`` metadata model) and of
    ``extra_models``; leaves every client exactly as it was on exit. Enter it after the models
    are bound to their server (the ``dynamodb_models`` fixture), as it takes their table names
    and clients at entry.

    Args:
        model: The model whose table is limited.
        write_units: Write units per second per physical partition (``None``: unlimited).
        read_units: Read units per second per physical partition (``None``: unlimited).
        table_write_units: Write units per second for each table as a whole, refused with the
            ``TableWrite<limit>`` reason that ``capacity_limit`` names
            (``TableWriteProvisionedThroughputExceeded`` by default; ``None``: unlimited).
        table_read_units: The same for reads (``TableRead<limit>``).
        clock: Seconds, monotonic; inject one so tests refill buckets without sleeping.
        extra_models: More models to limit with the same buckets and counters.
        index_write_units: Write units per second per partition of each global secondary
            index (per physical index key value), refused with the
            ``IndexWriteKeyRangeThroughputExceeded`` reason and the index's ARN (``None``:
            unlimited).
        index_read_units: Read units per second per partition of each global secondary index,
            charged to queries of the index (``IndexName``) on the value their key condition
            sets the index's hash key equal to, like a table query (the minimum before, the
            rest after); refused with ``IndexReadKeyRangeThroughputExceeded`` and the index's
            ARN (``None``: unlimited).
        index_table_write_units: Write units per second for each global secondary index as a
            whole (the puts charged to its partitions), refused with ``IndexWrite<limit>``
            (``capacity_limit``) and the index's ARN (``None``: unlimited).
        index_table_read_units: The same for queries of each global secondary index
            (``IndexRead<limit>``).
        capacity_limit: Which limit of DynamoDB the table- and index-wide limits stand for,
            and so the reason of their refusals: ``"provisioned"`` (a provisioned table's
            capacity: ``...ProvisionedThroughputExceeded`` in a
            ``ProvisionedThroughputExceededException``), ``"account"`` (an on-demand table
            at the account's per-table quota: ``...AccountLimitExceeded``) or
            ``"on_demand_maximum"`` (an on-demand table at its configured
            ``OnDemandThroughput`` maximum: ``...MaxOnDemandThroughputExceeded``). As DynamoDB
            does, the account quota comes in a ``RequestLimitExceeded`` and the on-demand
            maximum in a ``ThrottlingException``. Partition limits keep their
            ``...KeyRangeThroughputExceeded`` reasons.
        companions: Limit the companion models' tables too (``True``); ``False`` leaves them
            alone, e.g. when each of several writer processes simulates its share of the
            partition limit, which would also give the one metadata item of a key a share of
            its partition's limit where DynamoDB gives it the whole.

    Yields:
        The :class:`PartitionLimitSimulator`: counters, and ``set_limits`` to change limits.

    Raises:
        ValueError: A limit is zero or negative, or ``capacity_limit`` is not one of
            ``"provisioned"``, ``"account"``, ``"on_demand_maximum"``.

    .. versionadded:: 0.1.0
    """
    models = with_companions([model, *extra_models]) if companions else [model, *extra_models]
    hash_keys = {m.Meta.table_name: _hash_key_name(m) for m in models}
    simulator = PartitionLimitSimulator(
        hash_keys,
        index_hash_keys={m.Meta.table_name: _index_hash_key_names(m) for m in models},
        index_write_units=index_write_units,
        index_read_units=index_read_units,
        index_table_write_units=index_table_write_units,
        index_table_read_units=index_table_read_units,
        capacity_limit=capacity_limit,
        write_units=write_units,
        read_units=read_units,
        table_write_units=table_write_units,
        table_read_units=table_read_units,
        clock=clock,
    )
    registrations = (
        ("before-sign.dynamodb", simulator._on_before_sign, "sign"),
        ("before-send.dynamodb", simulator._on_before_send, "send"),
        ("after-call.dynamodb", simulator._on_after_call, "after-call"),
    )
    hooked: list[Any] = []
    try:
        for client in clients_of(models):
            hooked.append(client)
            # The reasons it answers with reach classify() on any botocore, plain models' too.
            keep_unmodelled_fields(client)
            for event, handler, name in registrations:
                client.meta.events.register_first(event, handler, unique_id=f"{simulator._context_key}.{name}")
        yield simulator
    finally:
        for client in hooked:
            for event, _, name in registrations:
                client.meta.events.unregister(event, unique_id=f"{simulator._context_key}.{name}")


class LoadClock:
    """A simulated clock for :func:`simulate_partition_limits` driven by the requests themselves:
    ``tick()`` once per operation started moves it ``1 / per_second`` seconds, so threads that
    run as fast as the machine lets them offer exactly ``per_second`` operations a second of the
    clock, whatever the machine's speed (thread-safe).

    .. versionadded:: 0.2.0
    """

    def __init__(self, per_second: float, *, start: float = 1000.0) -> None:
        if not per_second > 0:
            msg = f"LoadClock: per_second must be a positive number of operations, not {per_second!r}"
            raise ValueError(msg)
        self.now = start
        self._step = 1.0 / per_second
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        """One operation started: the clock moves by its share of a second."""
        with self._lock:
            self.now += self._step
