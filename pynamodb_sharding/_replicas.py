"""Read replicas: global secondary indexes keyed like the table, sharing a hot key's reads.

``Sharding(..., read_replicas=N)`` gives a model's table ``N`` global secondary indexes named
``read-replica-1`` .. ``read-replica-N``, each keyed on the table's own physical hash and range
attributes with every attribute projected. Each is a full, eventually consistent copy of the
table with read capacity of its own (a partition's 3,000 read units a second each), so a key
read faster than one partition serves is spread over ``1 + N`` copies.

:func:`spread` is the one place a read picks its copy: it tries the copies in an order
:class:`ReadCopies` draws at random for each request, and a read key-range throttle of one copy
(``TableReadKeyRangeThroughputExceeded``, or ``IndexReadKeyRangeThroughputExceeded`` naming a
replica) sends the request to the next copy at once: a ``needs-retry`` hook raises it out of
botocore before botocore sleeps through its retry ladder. The last copy tried is sent with
botocore's retries, as any read. A replica's ``LastEvaluatedKey`` holds the index keys and the
table keys, which are the same attributes: a page read on one copy resumes on any other.

Strongly consistent reads, index queries and the reads of a key whose items a job is moving
read the table only (:func:`read_copies` answers ``None``).
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pynamodb.exceptions import PynamoDBException, TableDoesNotExist

from pynamodb_sharding._descriptor import is_sharded, shard_manager
from pynamodb_sharding._exceptions import IndexNotReadyError, ShardingDefinitionError
from pynamodb_sharding._host import botocore_client, indexes
from pynamodb_sharding._locals import ContextLocal
from pynamodb_sharding._periods import is_time_partitioned
from pynamodb_sharding._throttling import Throttle, ThrottleKind, classify_response

__all__ = [
    "READ_REPLICA_PREFIX",
    "ReadCopies",
    "add_read_replicas",
    "add_replica_indexes",
    "check_declaration",
    "failing_over",
    "missing_read_replicas",
    "moves_to_another_copy",
    "read_copies",
    "replica_names",
    "spread",
]

_T = TypeVar("_T")

#: Read replica ``n`` of a table is its global secondary index ``read-replica-<n>``.
READ_REPLICA_PREFIX = "read-replica-"

_HOOK_EVENTS = ("needs-retry.dynamodb.Query", "needs-retry.dynamodb.GetItem")
_HOOK_ID = "pynamodb_sharding._replicas.fail_over"


def replica_names(count: int) -> tuple[str, ...]:
    """The index names of ``count`` read replicas: ``("read-replica-1", ...)``."""
    return tuple(f"{READ_REPLICA_PREFIX}{number}" for number in range(1, count + 1))


def add_replica_indexes(model: type[Any], schema: Any) -> Any:
    """Add ``model``'s read replicas to a PynamoDB model schema (what ``create_table`` sends):
    one global index per replica, keyed on the table's key schema, projecting every attribute,
    with the table's ``Meta`` capacity units when it declares them."""
    names = replica_names(shard_manager(model).read_replicas) if is_sharded(model) else ()
    if not names:
        return schema
    throughput: dict[str, int] = {}
    for unit, field in (("read_capacity_units", "ReadCapacityUnits"), ("write_capacity_units", "WriteCapacityUnits")):
        value = getattr(model.Meta, unit, None)
        if value is not None:
            throughput[field] = value
    for name in names:
        schema["global_secondary_indexes"].append({
            "index_name": name,
            "key_schema": [dict(entry) for entry in schema["key_schema"]],
            "projection": {"ProjectionType": "ALL"},
            "attribute_definitions": [],
            "provisioned_throughput": dict(throughput),
        })
    return schema


def check_declaration(model: type[Any]) -> None:
    """Refuse an index of ``model`` named like one of its read replicas.

    Raises:
        ShardingDefinitionError: an index's name is ``read-replica-<n>`` for a replica declared.
    """
    names = set(replica_names(shard_manager(model).read_replicas))
    for index_name in sorted(names & set(indexes(model))):
        msg = (
            f"{model.__name__}: the index {index_name!r} has the name of one of its "
            f"Sharding(read_replicas=...) replicas, which create_table creates itself; rename the index."
        )
        raise ShardingDefinitionError(msg)


class ReadCopies:
    """The copies of one table a read may go to: ``None`` (the table) and its replicas.

    ``model``: the model's name, for the error of a replica the table does not have; ``choose``
    draws the first copy a request tries (an index below its argument).
    """

    def __init__(self, model: str, replicas: Sequence[str], *,
                 choose: Callable[[int], int] = random.randrange) -> None:
        self.copies: tuple[str | None, ...] = (None, *replicas)
        self.model = model
        self._choose = choose

    def order(self) -> tuple[str | None, ...]:
        """Every copy, once, starting at one drawn at random: the order one request tries them.

        Drawn per request rather than taken in turn, so that the shards of one merged query,
        each a request, do not land on the same copy every time (a count of shards that is a
        multiple of the copies would).
        """
        start = self._choose(len(self.copies))
        return self.copies[start:] + self.copies[:start]


_copies: weakref.WeakKeyDictionary[type[Any], ReadCopies] = weakref.WeakKeyDictionary()
_copies_lock = threading.Lock()


def read_copies(model: type[Any], *, consistent_read: bool | None, index_name: str | None) -> ReadCopies | None:
    """The copies a read of ``model``'s table spreads over, or ``None`` when it reads the table
    only: a model without replicas, a strongly consistent read, a query of an index."""
    if consistent_read or index_name is not None:
        return None
    count = shard_manager(model).read_replicas
    if not count:
        return None
    watch(botocore_client(model))  # the model's client may have been replaced since
    found = _copies.get(model)
    if found is None:
        with _copies_lock:
            found = _copies.setdefault(model, ReadCopies(model.__name__, replica_names(count)))
    return found


# -- failing over on a throttle ---------------------------------------------------------------


class _CopyThrottled(Exception):
    """Carries a read key-range throttle of one copy out of botocore, skipping its retries.

    Not a botocore or PynamoDB exception: PynamoDB wraps only those, so this one reaches
    :func:`spread` unchanged.
    """

    def __init__(self, throttle: Throttle) -> None:
        super().__init__(f"read key-range throttle: {throttle.code}")
        self.throttle = throttle


_in_read = ContextLocal("replicas.in_read")
_watched: weakref.WeakSet[Any] = weakref.WeakSet()
_watch_lock = threading.Lock()


def moves_to_another_copy(throttle: Throttle) -> bool:
    """Whether a throttle is one copy's hot read key range, which another copy does not share:
    a table's read key range (or a key-range throttle without reasons), or a read replica's."""
    if throttle.kind is ThrottleKind.KEY_RANGE:
        return not throttle.reasons or any(reason.reason.startswith("TableRead") for reason in throttle.reasons)
    if throttle.kind is ThrottleKind.INDEX:
        return all(reason.reason.startswith("IndexRead") and (reason.index_name or "").startswith(READ_REPLICA_PREFIX)
                   for reason in throttle.reasons) and bool(throttle.reasons)
    return False


def _fail_over(response: Any = None, operation: Any = None, **_: Any) -> None:
    """botocore ``needs-retry`` handler: raise a copy's read key-range throttle inside :func:`failing_over`."""
    if not getattr(_in_read, "active", False) or response is None:
        return
    http_response, parsed = response
    # Runs before the service-wide handler that puts back reasons an older botocore dropped.
    throttle = classify_response(parsed, operation=getattr(operation, "name", None),
                                 body=getattr(http_response, "content", None))
    if moves_to_another_copy(throttle):
        raise _CopyThrottled(throttle)


def watch(client: Any) -> None:
    """Register :func:`_fail_over` once on a botocore DynamoDB client."""
    if client in _watched:
        return
    with _watch_lock:
        if client in _watched:
            return
        for event in _HOOK_EVENTS:
            # First, so botocore's retry handler never computes (and sleeps) a delay for it.
            client.meta.events.register_first(event, _fail_over, unique_id=_HOOK_ID)
        _watched.add(client)


class failing_over:
    """Within the block, a read key-range throttle of a Query or GetItem this thread sends is
    raised at once (to :func:`spread`) instead of being retried by botocore. (A class rather
    than a generator's context manager: it is entered around every shard request.)"""

    __slots__ = ("_enabled", "_previous")

    def __init__(self, enabled: bool) -> None:
        self._enabled = enabled
        self._previous = False

    def __enter__(self) -> None:
        self._previous = getattr(_in_read, "active", False)
        _in_read.active = self._enabled

    def __exit__(self, *_: object) -> None:
        _in_read.active = self._previous


def spread(copies: ReadCopies, send: Callable[[str | None, bool], _T]) -> _T:
    """Send one read to the copies in :meth:`ReadCopies.order`: ``send(copy, fail_over)``
    reads ``copy`` (``None``: the table), inside :func:`failing_over` when ``fail_over``.

    A read key-range throttle of a copy moves the request to the next one at once; the last
    copy is sent with botocore's retries, so a key hot on every copy backs off as before.

    Raises:
        IndexNotReadyError: DynamoDB refused to read a replica: the table does not have it yet,
            or it is still being backfilled.
    """
    order = copies.order()
    for copy in order[:-1]:
        try:
            return _sent(copies, send, copy, fail_over=True)
        except _CopyThrottled:
            continue
    return _sent(copies, send, order[-1], fail_over=False)


def _sent(copies: ReadCopies, send: Callable[[str | None, bool], _T], copy: str | None, *, fail_over: bool) -> _T:
    """``send(copy, fail_over)``, with DynamoDB's refusal of a replica it lacks said in our words."""
    try:
        return send(copy, fail_over)
    except PynamoDBException as error:
        if copy is None or error.cause_response_code != "ValidationException":
            raise
        what = str(error.cause_response_message or "")
        if "index" not in what.lower():
            raise
        msg = (
            f"{copies.model}: DynamoDB refused to read its read replica {copy!r} ({what}): the table "
            f"does not have it yet, or is still backfilling it; create it and wait for it with "
            f"add_read_replicas({copies.model}) (or `pynamodb-sharding tables add-replicas MODULE:{copies.model}`) "
            f"before deploying Sharding(read_replicas=...)."
        )
        raise IndexNotReadyError(msg) from error


# -- adding replicas to a live table -----------------------------------------------------------


def add_read_replicas(model: type[Any], *, wait: bool = True, poll_seconds: float = 5.0,
                      sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """Create the read replicas ``model`` declares that its existing table lacks.

    One ``UpdateTable`` per missing replica (DynamoDB creates one global index per call), each
    keyed and projected as ``create_table`` would create it; with ``wait``, returns once every
    replica is ``ACTIVE``, i.e. DynamoDB has backfilled it with the table's items. Reads use the
    replicas as soon as the model declares them, so deploy the declaration after this returns.

    Args:
        model: a sharded model with ``Sharding(..., read_replicas=N)``.
        wait: wait for the backfill of every replica.
        poll_seconds: seconds between two ``DescribeTable`` while waiting.
        sleep: how to wait between polls (tests pass one that does not sleep).

    Returns:
        The names of the replicas created by this call.

    Raises:
        ShardingDefinitionError: the model declares no read replicas, or has one table per
            period (call it with each period's model).
        pynamodb.exceptions.TableDoesNotExist: the model's table does not exist (create it with
            ``create_table``, which creates the replicas too).

    .. versionadded:: 0.2.0
    """
    count = shard_manager(model).read_replicas
    if not count:
        msg = (
            f"{model.__name__}: declares no read replicas; add read_replicas=N to its Sharding(...) "
            f"first, then call add_read_replicas({model.__name__})."
        )
        raise ShardingDefinitionError(msg)
    if is_time_partitioned(model):
        msg = (
            f"{model.__name__}: has one table per period; add the replicas to each period's table: "
            f"add_read_replicas({model.__name__}.period_model(period)) for each period that has a table "
            f"(the tables rotate() creates from now on have them)."
        )
        raise ShardingDefinitionError(msg)
    client = botocore_client(model)
    table = str(model.Meta.table_name)
    if not model.exists():
        raise TableDoesNotExist(table)  # PynamoDB's own error, not botocore's ResourceNotFound
    schema = add_replica_indexes(model, {"global_secondary_indexes": [], "key_schema": _key_schema(model)})
    created: list[str] = []
    for index in schema["global_secondary_indexes"]:
        if index["index_name"] not in missing_read_replicas(model):
            continue
        described = client.describe_table(TableName=table)["Table"]
        create: dict[str, Any] = {"IndexName": index["index_name"], "KeySchema": index["key_schema"],
                                  "Projection": index["projection"]}
        provisioned = described.get("BillingModeSummary", {}).get("BillingMode") != "PAY_PER_REQUEST"
        units = described.get("ProvisionedThroughput", {})
        if provisioned and units.get("ReadCapacityUnits"):
            create["ProvisionedThroughput"] = {
                "ReadCapacityUnits": index["provisioned_throughput"].get("ReadCapacityUnits",
                                                                         units["ReadCapacityUnits"]),
                "WriteCapacityUnits": index["provisioned_throughput"].get("WriteCapacityUnits",
                                                                          units["WriteCapacityUnits"]),
            }
        client.update_table(TableName=table, AttributeDefinitions=_key_definitions(model),
                            GlobalSecondaryIndexUpdates=[{"Create": create}])
        created.append(index["index_name"])
        if wait:  # DynamoDB refuses a second index creation while one is backfilling
            _wait_active(client, table, index["index_name"], poll_seconds, sleep)
    return created


def missing_read_replicas(model: type[Any]) -> list[str]:
    """The read replicas ``model`` declares that its table does not have (one ``DescribeTable``)."""
    described = botocore_client(model).describe_table(TableName=str(model.Meta.table_name))["Table"]
    present = {entry.get("IndexName") for entry in described.get("GlobalSecondaryIndexes", ())}
    return [name for name in replica_names(shard_manager(model).read_replicas) if name not in present]


def _key_schema(model: type[Any]) -> list[dict[str, str]]:
    keys = [{"AttributeName": attribute.attr_name, "KeyType": "HASH" if attribute.is_hash_key else "RANGE"}
            for attribute in model.get_attributes().values() if attribute.is_hash_key or attribute.is_range_key]
    return sorted(keys, key=lambda key: key["KeyType"])  # DynamoDB wants the hash key first


def _key_definitions(model: type[Any]) -> list[dict[str, str]]:
    return [{"AttributeName": attribute.attr_name, "AttributeType": attribute.attr_type}
            for attribute in model.get_attributes().values() if attribute.is_hash_key or attribute.is_range_key]


def _wait_active(client: Any, table: str, index_name: str, poll_seconds: float,
                 sleep: Callable[[float], None]) -> None:
    while True:
        described: Mapping[str, Any] = client.describe_table(TableName=table)["Table"]
        entry: Mapping[str, Any] = next((entry for entry in described.get("GlobalSecondaryIndexes", ())
                                         if entry.get("IndexName") == index_name), {})
        if entry.get("IndexStatus") == "ACTIVE" and not entry.get("Backfilling", False):
            return
        sleep(poll_seconds)
