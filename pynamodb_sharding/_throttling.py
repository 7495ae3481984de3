"""Classify DynamoDB throttles: a hot key range on this table, a table-level shortage, or a GSI.

Only a hot key range on the base table is fixed by spreading a logical key over more shards.
A table- or account-level shortage (provisioned capacity, account quota, on-demand maximum)
is not: more shards only send the same load to the same exhausted table. A hot GSI key range
is not fixed by base-table shards either: the GSI key needs its own sharding.

DynamoDB says which case it is in the ``ThrottlingReasons`` list of the error response
(``throttlingReasons`` on ``ThrottlingException``), each entry ``{reason, resource}`` where
``reason`` is ``<Table|Index><Read|Write><limit>`` and ``resource`` is the ARN of the table or
index. botocore's parser puts that list at the top level of the parsed response, beside
``Error``. PynamoDB wraps the botocore error twice (``PutError(cause=VerboseClientError)``,
the latter raised ``from`` the original ``ClientError``) and its wrapper keeps only ``Error``,
so :func:`classify` walks the chain to the original response.

botocore releases before 1.40.10 do not know the list and their parser drops it. On the
clients of sharded models (and those :func:`~pynamodb_sharding.testing.simulator.simulate_partition_limits`
hooks) pynamodb-sharding reads it from the raw body after every attempt and puts it back in
the parsed response (:func:`pynamodb_sharding._host.keep_unmodelled_fields`), so exceptions,
``after-call`` hooks and later ``needs-retry`` hooks see it on every botocore. A plain model's
client is left alone: :func:`keep_throttling_reasons` does the same for it. A hook of one
operation (``needs-retry.dynamodb.PutItem``) runs before that: pass it the raw body,
``classify_response(parsed, body=http_response.content)``.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
from pynamodb.exceptions import PutError
from pynamodb.models import Model

from pynamodb_sharding._host import (
    BATCH_WRITE_GAVE_UP,
    botocore_client,
    keep_unmodelled_fields,
    throttling_reasons_in_body,
)

__all__ = [
    "THROTTLE_ERROR_CODES",
    "UNPROCESSED_ITEMS",
    "Throttle",
    "ThrottleKind",
    "ThrottleReason",
    "classify",
    "classify_response",
    "error_chain",
    "keep_throttling_reasons",
    "unprocessed_items_throttle",
]

#: Error codes DynamoDB uses for a request refused for lack of capacity.
THROTTLE_ERROR_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
)

#: Pseudo error code of the :class:`Throttle` that :func:`unprocessed_items_throttle` returns.
UNPROCESSED_ITEMS = "UnprocessedItems"

_TRANSACTION_CANCELED = "TransactionCanceledException"
# What PynamoDB's BatchWrite.commit raises, with no cause, when items stay unprocessed.
# Codes of a TransactionCanceledException's CancellationReasons that mean "throttled".
_THROTTLED_CANCELLATION_CODES = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
_KEY_RANGE_SUFFIX = "KeyRangeThroughputExceeded"
_CAPACITY_SUFFIXES = (
    "ProvisionedThroughputExceeded",
    "AccountLimitExceeded",
    "MaxOnDemandThroughputExceeded",
)
# Codes that, without reasons, are a table- or account-level shortage: DynamoDB answers a
# request-rate quota with RequestLimitExceeded and an on-demand table's limits with
# ThrottlingException; neither has ever meant one hot partition.
_TABLE_LEVEL_CODES = frozenset({"ThrottlingException", "RequestLimitExceeded"})


class ThrottleKind(enum.Enum):
    """What kind of shortage a throttle reports, and so whether more shards help.

    .. versionadded:: 0.1.0
    """

    #: A hot key range on this table (``TableWriteKeyRangeThroughputExceeded``,
    #: ``TableReadKeyRangeThroughputExceeded``, or a ``ProvisionedThroughputExceededException``
    #: without reasons): one partition is past its 1,000 WCU/s or 3,000 RCU/s. Grow shards.
    KEY_RANGE = "key_range"
    #: A table- or account-level shortage (``...ProvisionedThroughputExceeded``,
    #: ``...AccountLimitExceeded``, ``...MaxOnDemandThroughputExceeded``, for a table or an
    #: index; ``RequestLimitExceeded``; ``ThrottlingException`` without reasons). More shards
    #: do not help: back off and raise.
    TABLE = "table"
    #: A hot key range of a global secondary index (``IndexWriteKeyRangeThroughputExceeded``,
    #: ``IndexReadKeyRangeThroughputExceeded``, or a key-range reason whose resource ARN names
    #: an index). Base-table shards do not fix it: shard the index key.
    INDEX = "index"
    #: The error is not a capacity throttle (a condition failure, a validation error...).
    NOT_THROTTLED = "not_throttled"


def _index_name_of(resource: str | None) -> str | None:
    """Return ``I`` from an ARN ``arn:<partition>:dynamodb:<region>:<account>:table/T/index/I``."""
    if not resource:
        return None
    path = resource.split(":", 5)[-1]
    parts = path.split("/")
    if len(parts) >= 4 and parts[0] == "table" and parts[2] == "index" and parts[3]:
        return parts[3]
    return None


@attrs.frozen
class ThrottleReason:
    """One ``{reason, resource}`` entry of a throttled response's ``ThrottlingReasons``.

    .. versionadded:: 0.1.0
    """

    reason: str
    resource: str | None = None

    @property
    def index_name(self) -> str | None:
        """The index the resource ARN names, or ``None`` for a table."""
        return _index_name_of(self.resource)

    @property
    def kind(self) -> ThrottleKind:
        """What this reason alone says: key range, table-level, or index key range."""
        if self.reason.endswith(_KEY_RANGE_SUFFIX):
            if self.reason.startswith("Index") or self.index_name is not None:
                return ThrottleKind.INDEX
            return ThrottleKind.KEY_RANGE
        # Capacity suffixes and any reason DynamoDB may add later: only a reason that
        # demonstrably names a hot key range may grow shards.
        return ThrottleKind.TABLE


@attrs.frozen
class Throttle:
    """The classification of one DynamoDB error or response.

    .. versionadded:: 0.1.0
    """

    kind: ThrottleKind
    #: The error code (``ProvisionedThroughputExceededException``...), :data:`UNPROCESSED_ITEMS`
    #: for a batch's unprocessed items, ``None`` when there was no error.
    code: str | None = None
    reasons: tuple[ThrottleReason, ...] = ()
    #: The index a reason's resource ARN names, if any.
    index_name: str | None = None
    operation: str | None = None

    @property
    def grows_shards(self) -> bool:
        """True only for a hot *write* key range on this table: the one case more write shards
        fix (``TableWriteKeyRangeThroughputExceeded``, or a key-range throttle without reasons).
        A read key range is a hot read partition: more write shards do not help it."""
        if self.kind is not ThrottleKind.KEY_RANGE:
            return False
        return not self.reasons or any(reason.reason.startswith("TableWrite") for reason in self.reasons)

    def capacity_fix(self) -> str:
        """What fixes a table- or account-level throttle, by its reason, in one sentence."""
        reasons = {reason.reason for reason in self.reasons}
        fixes = []
        for reason in sorted(reasons):
            target = "an index's" if reason.startswith("Index") else "the table's"
            kind = "write" if "Write" in reason else "read"
            if reason.endswith("ProvisionedThroughputExceeded"):
                fixes.append(
                    f"{reason}: {target} provisioned {kind} capacity is used up; raise it "
                    f"(UpdateTable ProvisionedThroughput, or auto scaling) or switch to on-demand"
                )
            elif reason.endswith("AccountLimitExceeded"):
                fixes.append(
                    f"{reason}: the account's {kind} throughput quota is reached; request a higher "
                    f"quota (Service Quotas) or spread the load over time"
                )
            elif reason.endswith("MaxOnDemandThroughputExceeded"):
                unit = "MaxWriteRequestUnits" if kind == "write" else "MaxReadRequestUnits"
                fixes.append(
                    f"{reason}: {target} on-demand maximum is reached; raise {unit} "
                    f"(UpdateTable OnDemandThroughput)"
                )
            elif "KeyRange" in reason:
                fixes.append(f"{reason}: a hot {kind} partition; more write shards do not fix it")
        if not fixes:
            return (
                f"{self.code or 'the throttle'} names no reason: a table- or account-level request "
                f"limit; lower the request rate or raise the limit"
            )
        return "; ".join(fixes)

    @property
    def is_throttle(self) -> bool:
        """True for every kind but :attr:`ThrottleKind.NOT_THROTTLED`."""
        return self.kind is not ThrottleKind.NOT_THROTTLED


def _parse_reasons(parsed: Mapping[Any, Any]) -> tuple[ThrottleReason, ...]:
    reasons: list[ThrottleReason] = []
    for field in ("ThrottlingReasons", "throttlingReasons"):
        entries = parsed.get(field)
        if not isinstance(entries, list | tuple):
            continue
        for entry in entries:
            if not isinstance(entry, Mapping):
                continue
            reason = entry.get("reason", entry.get("Reason"))
            resource = entry.get("resource", entry.get("Resource"))
            if isinstance(reason, str) and reason:
                reasons.append(ThrottleReason(reason, resource if isinstance(resource, str) else None))
    return tuple(reasons)


def _kind_of_reasons(reasons: tuple[ThrottleReason, ...]) -> ThrottleKind:
    # Shards grow only when every reason is a base-table key range: a table-level shortage
    # beside it would absorb the extra shards' load, a GSI beside it stays hot whatever we do.
    kinds = {reason.kind for reason in reasons}
    for kind in (ThrottleKind.TABLE, ThrottleKind.INDEX):
        if kind in kinds:
            return kind
    return ThrottleKind.KEY_RANGE


def _cancellation_codes(parsed: Mapping[Any, Any]) -> Iterator[str]:
    entries = parsed.get("CancellationReasons")
    if not isinstance(entries, list | tuple):
        return
    for entry in entries:
        code = entry.get("Code") if isinstance(entry, Mapping) else getattr(entry, "code", None)
        if isinstance(code, str):
            yield code


def classify_response(
    parsed: Mapping[str, Any], *, operation: str | None = None, body: bytes | None = None,
) -> Throttle:
    """Classify a parsed botocore response (what ``needs-retry`` and ``after-call`` hooks see).

    A ``ProvisionedThroughputExceededException`` without reasons is a :attr:`ThrottleKind.KEY_RANGE`:
    before ``ThrottlingReasons`` existed DynamoDB reported per-partition throttling exactly this
    way, and a table-level shortage of a provisioned table is told apart by comparing consumed
    with provisioned capacity, which is the caller's business. A
    ``TransactionCanceledException`` whose cancellation reasons say ``ThrottlingError`` or
    ``ProvisionedThroughputExceeded`` is classified the same way. A successful response is
    :attr:`ThrottleKind.NOT_THROTTLED`; use :func:`unprocessed_items_throttle` for batches.

    Args:
        parsed: The parsed response dict; anything else is not a throttle.
        operation: The operation name, recorded in the result.
        body: The raw response body (``http_response.content`` in a ``needs-retry`` hook): the
            throttling reasons are read from it when ``parsed`` has none, as a botocore release
            before 1.40.10 drops them.

    Returns:
        The classification; this function never raises.

    """
    untrusted: object = parsed  # hooks and callers may hand over anything
    if not isinstance(untrusted, Mapping):
        return Throttle(ThrottleKind.NOT_THROTTLED, operation=operation)
    error = untrusted.get("Error")
    code = error.get("Code") if isinstance(error, Mapping) else None
    if not isinstance(code, str):
        return Throttle(ThrottleKind.NOT_THROTTLED, operation=operation)
    if code == _TRANSACTION_CANCELED:
        if any(c in _THROTTLED_CANCELLATION_CODES for c in _cancellation_codes(parsed)):
            return Throttle(ThrottleKind.KEY_RANGE, code, operation=operation)
        return Throttle(ThrottleKind.NOT_THROTTLED, code, operation=operation)
    if code not in THROTTLE_ERROR_CODES:
        return Throttle(ThrottleKind.NOT_THROTTLED, code, operation=operation)
    reasons = _parse_reasons(parsed)
    if not reasons and body is not None:
        reasons = _parse_reasons(throttling_reasons_in_body(body))
    if reasons:
        kind = _kind_of_reasons(reasons)
    elif code in _TABLE_LEVEL_CODES:
        kind = ThrottleKind.TABLE
    else:
        kind = ThrottleKind.KEY_RANGE
    index_name = next((r.index_name for r in reasons if r.index_name is not None), None)
    return Throttle(kind, code, reasons, index_name, operation)


def keep_throttling_reasons(model: type[Model]) -> None:
    """Make ``model``'s botocore client keep the throttling reasons of its errors on a botocore
    release that drops them (before 1.40.10), so :func:`classify` of a plain PynamoDB model's
    errors tells a hot key range from a table-level shortage there too. Sharded models need
    no call: theirs are kept already. A no-op on a botocore that keeps them.

    .. versionadded:: 0.1.0
    """
    keep_unmodelled_fields(botocore_client(model))


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """Yield ``error`` and every error it wraps (``.cause``, ``__cause__``, ``__context__``), each once."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for linked in (getattr(current, "cause", None), current.__cause__, current.__context__):
            if isinstance(linked, BaseException):
                pending.append(linked)


def classify(error: BaseException) -> Throttle:
    """Classify an exception from botocore or PynamoDB.

    Accepts a botocore ``ClientError`` or any PynamoDB exception (``PutError``,
    ``UpdateError``, ``TransactWriteError``...), walking ``.cause``, ``__cause__`` and
    ``__context__`` to the response that still carries the throttling reasons.

    Args:
        error: Any exception; one that wraps no DynamoDB response is not a throttle.

    The ``PutError`` PynamoDB's ``batch_write`` raises when items are still unprocessed after
    ``Meta.max_retry_attempts`` resends carries no cause: it is recognised by its message and
    classified like :func:`unprocessed_items_throttle` (``BatchWrite.failed_operations`` holds
    the items).

    Returns:
        The most informative classification found in the chain: one with reasons first, else
        the first throttle, else :attr:`ThrottleKind.NOT_THROTTLED` with the first error code.
    """
    first_throttle: Throttle | None = None
    first_code: str | None = None
    first_operation: str | None = None
    for current in error_chain(error):
        response = getattr(current, "response", None)
        if not isinstance(response, Mapping):
            continue
        operation = getattr(current, "operation_name", None)
        throttle = classify_response(response, operation=operation if isinstance(operation, str) else None)
        if throttle.code == _TRANSACTION_CANCELED and not throttle.is_throttle:
            # PynamoDB's VerboseClientError keeps the cancellation reasons as attributes only.
            reasons = {"CancellationReasons": getattr(current, "cancellation_reasons", None)}
            if any(c in _THROTTLED_CANCELLATION_CODES for c in _cancellation_codes(reasons)):
                throttle = attrs.evolve(throttle, kind=ThrottleKind.KEY_RANGE)
        if throttle.reasons:
            return throttle
        if throttle.is_throttle and first_throttle is None:
            first_throttle = throttle
        if first_code is None:
            first_code = throttle.code
            first_operation = throttle.operation
    if first_throttle is not None:
        return first_throttle
    if first_code is None and isinstance(error, PutError) and str(error.msg).startswith(BATCH_WRITE_GAVE_UP):
        return Throttle(ThrottleKind.KEY_RANGE, UNPROCESSED_ITEMS, operation="BatchWriteItem")
    if first_code is not None:
        return Throttle(ThrottleKind.NOT_THROTTLED, first_code, operation=first_operation)
    return Throttle(ThrottleKind.NOT_THROTTLED)


def unprocessed_items_throttle(response: Mapping[str, Any], *, operation: str | None = None) -> Throttle:
    """Classify a successful ``BatchWriteItem`` (or ``BatchGetItem``) response.

    DynamoDB hands back the items it could not process for lack of capacity in
    ``UnprocessedItems`` (``UnprocessedKeys`` for reads) instead of raising, and PynamoDB's
    ``batch_write`` resends them at once, with no backoff. Any unprocessed entry is therefore a
    throttle, classified :attr:`ThrottleKind.KEY_RANGE` with code :data:`UNPROCESSED_ITEMS` and
    no reasons (DynamoDB gives none for them), like a ``ProvisionedThroughputExceededException``
    without reasons.

    Args:
        response: The parsed batch response.
        operation: The operation name, recorded in the result (defaults to the batch kind).

    Returns:
        A ``KEY_RANGE`` throttle if anything is unprocessed, else ``NOT_THROTTLED``.
    """
    if isinstance(response, Mapping):
        for field, batch_operation in (
            ("UnprocessedItems", "BatchWriteItem"),
            ("UnprocessedKeys", "BatchGetItem"),
        ):
            tables = response.get(field)
            if isinstance(tables, Mapping) and any(bool(entries) for entries in tables.values()):
                return Throttle(ThrottleKind.KEY_RANGE, UNPROCESSED_ITEMS, operation=operation or batch_operation)
    return Throttle(ThrottleKind.NOT_THROTTLED, operation=operation)
