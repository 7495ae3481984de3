"""Merged fan-out reads: parallel per-shard queries, a streaming k-way merge, one resumable cursor.

A query of a sharded key is one DynamoDB Query per shard. :func:`merged_query` sends them in
parallel on a bounded thread pool, merges their pages in sort-key order as they stream in
(holding at most the current page and one prefetched page per shard), and exposes a single
JSON-serialisable ``last_evaluated_key`` that resumes every shard exactly where the caller
stopped. :func:`merged_count` sums the shards' counts in parallel.

The data flows top-down: DynamoDB's sort order → the cursor → the merge → the iterator users
see → the two entry points ``ShardedModel.query`` and ``ShardedModel.count`` call.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import json
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal, InvalidOperation
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from pynamodb.constants import (
    CAMEL_COUNT,
    CAPACITY_UNITS,
    CONSUMED_CAPACITY,
    ITEMS,
    LAST_EVALUATED_KEY,
    SCANNED_COUNT,
    TOTAL,
)
from pynamodb.expressions.condition import Condition
from pynamodb.indexes import GlobalSecondaryIndex
from pynamodb.pagination import RateLimiter

from pynamodb_sharding.conditions import Usage, rewrite_condition
from pynamodb_sharding.exceptions import CursorError, ShardingError, ShardKeyError

if TYPE_CHECKING:
    from pynamodb_sharding.model import ShardedModel

__all__ = [
    "CURSOR_VERSION",
    "CursorScope",
    "CursorState",
    "FanoutPoolWarning",
    "MergedResultIterator",
    "Page",
    "ShardMerge",
    "decode_cursor",
    "default_workers",
    "encode_cursor",
    "merged_count",
    "merged_query",
    "sort_value",
]

_M = TypeVar("_M", bound="ShardedModel")

#: A DynamoDB attribute value in botocore's shape: ``{"S": "a"}``, ``{"N": "1"}``, ``{"B": b"x"}``.
RawValue = dict[str, Any]
#: An item as DynamoDB returns it.
RawItem = dict[str, RawValue]
#: A primary key (plus index keys for an index query) in ``ExclusiveStartKey`` shape.
RawKey = dict[str, RawValue]
#: What a sort key becomes to compare it the way DynamoDB does.
SortValue = Decimal | str | bytes

#: Threads a merged query uses at most when the model does not say (``Sharding(max_workers=)``).
MAX_DEFAULT_WORKERS = 32

#: Items a merged query holds at most, over all shards, when neither ``page_size`` nor a
#: smaller ``limit`` is given: each shard's page and its prefetched next page. DynamoDB's own
#: 1 MB pages parse to several MB of Python objects each, which over 16 shards would be
#: hundreds of MB; this bound keeps a merged query's memory near a plain query's.
DEFAULT_BUFFERED_ITEMS = 32_000

#: Version of the cursor layout; a cursor of another version is refused, never misread.
CURSOR_VERSION = 1

_CHECKSUM_HEX_DIGITS = 16
_KEY_TYPES = frozenset({"S", "N", "B"})


# --------------------------------------------------------------------------------------------
# DynamoDB's sort order
# --------------------------------------------------------------------------------------------


def sort_value(value: Mapping[str, Any]) -> SortValue:
    """Turn a raw key attribute value into something that compares the way DynamoDB sorts it.

    DynamoDB orders ``N`` numerically, ``S`` by UTF-8 bytes and ``B`` by bytes. A Python ``str``
    compares by code point, which is exactly UTF-8 byte order (unlike UTF-16 order, where
    characters outside the Basic Multilingual Plane sort before U+E000..U+FFFF), so strings are
    compared as they are, without the cost of encoding them.

    Raises:
        ShardingError: the value is not of a key type (``S``, ``N`` or ``B``).
    """
    if "S" in value:
        text: str = value["S"]
        return text
    if "N" in value:
        return Decimal(value["N"])
    if "B" in value:
        blob = value["B"]
        return base64.b64decode(blob) if isinstance(blob, str) else bytes(blob)
    msg = f"a sort key must be of type S, N or B, got {value!r}; only those types can be DynamoDB keys."
    raise ShardingError(msg)


class _Descending:
    """Inverts the order of a ``(sort value, shard)`` pair so that ``heapq`` pops the largest."""

    __slots__ = ("value",)

    def __init__(self, value: tuple[SortValue, int]) -> None:
        self.value = value

    def __lt__(self, other: _Descending) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


# --------------------------------------------------------------------------------------------
# The cursor
# --------------------------------------------------------------------------------------------


@attrs.frozen
class CursorScope:
    """What a cursor belongs to; a cursor is only accepted by a query of the same scope.

    ``key`` is the queried hash-key value in raw form (``{"S": "logical key"}`` for a fan-out).
    """

    model: str
    table: str
    key: RawValue
    index: str | None
    forward: bool


@attrs.frozen
class CursorState:
    """A decoded cursor: where each shard resumes (right after its start key).

    A shard it does not name is read from its start (a shard added after the cursor was
    made, or one that had returned nothing).
    """

    positions: Mapping[int, RawKey] = attrs.field(factory=dict)


def _value_to_json(value: Mapping[str, Any]) -> dict[str, str]:
    (kind, inner), *_ = value.items()
    if kind == "B":
        raw = inner if isinstance(inner, bytes | bytearray) else base64.b64decode(inner)
        return {"B": base64.b64encode(raw).decode("ascii")}
    return {str(kind): str(inner)}


def _key_to_json(key: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    return {name: _value_to_json(value) for name, value in key.items()}


def _checksum(body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_CHECKSUM_HEX_DIGITS]


def encode_cursor(scope: CursorScope, state: CursorState) -> dict[str, Any]:
    """Build the JSON-serialisable cursor of ``state`` for queries of ``scope``.

    The cursor holds plain JSON types only (binary key values are base64) and a checksum over
    its content, so that :func:`decode_cursor` refuses an edited or truncated copy. The
    checksum detects accidents and misuse, not forgery: it is not a secret signature.
    """
    body: dict[str, Any] = {
        "version": CURSOR_VERSION,
        "model": scope.model,
        "table": scope.table,
        "key": _value_to_json(scope.key),
        "index": scope.index,
        "forward": scope.forward,
        "positions": [
            {"shard": shard, "start_key": _key_to_json(state.positions[shard])}
            for shard in sorted(state.positions)
        ],
    }
    body["checksum"] = _checksum(body)
    return body


class _CursorReader:
    """Validates an untrusted cursor value against the scope of the query resuming from it."""

    def __init__(
        self,
        scope: CursorScope,
        key_names: Sequence[str],
        hash_name: str,
        hash_value: Callable[[int], object],
    ) -> None:
        self.scope = scope
        self.key_names = frozenset(key_names)
        self.hash_name = hash_name
        self.hash_value = hash_value

    def fail(self, problem: str) -> CursorError:
        msg = (
            f"{self.scope.model}.query(last_evaluated_key=...): the cursor {problem}; "
            f"restart the query without last_evaluated_key (a cursor only resumes the query "
            f"that returned it, unedited)."
        )
        return CursorError(msg)

    def read(self, cursor: object) -> CursorState:
        if not isinstance(cursor, dict):
            hint = " (json.loads the stored text first)" if isinstance(cursor, str | bytes) else ""
            raise self.fail(f"is a {type(cursor).__name__}, not the dict a merged query returns{hint}")
        expected_fields = {
            "version", "model", "table", "key", "index", "forward", "positions", "checksum",
        }
        if set(cursor) != expected_fields:
            missing = sorted(expected_fields - set(cursor))
            extra = sorted(set(cursor) - expected_fields)
            raise self.fail(
                f"is truncated or not a merged-query cursor (missing {missing}, unexpected {extra})"
            )
        if cursor["version"] != CURSOR_VERSION:
            raise self.fail(f"has version {cursor['version']!r}, this library reads version {CURSOR_VERSION}")
        body = {name: value for name, value in cursor.items() if name != "checksum"}
        try:
            checksum = _checksum(body)
        except (TypeError, ValueError):
            raise self.fail("holds values that are not JSON") from None
        if cursor["checksum"] != checksum:
            raise self.fail("fails its checksum: it was edited, truncated or corrupted")
        scope = self.scope
        if (cursor["model"], cursor["table"]) != (scope.model, scope.table):
            raise self.fail(
                f"belongs to {cursor['model']} (table {cursor['table']!r}), not to "
                f"{scope.model} (table {scope.table!r})"
            )
        if cursor["key"] != _value_to_json(scope.key):
            raise self.fail(f"belongs to the hash key {cursor['key']!r}, not {_value_to_json(scope.key)!r}")
        if cursor["index"] != scope.index:
            raise self.fail(f"belongs to a query of index {cursor['index']!r}, not {scope.index!r}")
        if cursor["forward"] is not scope.forward:
            raise self.fail(
                "was made by a query in the other direction (scan_index_forward differs)"
            )
        return CursorState(positions=self._positions(cursor["positions"]))

    def _shard(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(f"names shard {value!r}; shards are ints >= 1")
        return value

    def _positions(self, value: object) -> dict[int, RawKey]:
        if not isinstance(value, list):
            raise self.fail("has no list of shard positions")
        positions: dict[int, RawKey] = {}
        for entry in value:
            if not isinstance(entry, dict) or set(entry) != {"shard", "start_key"}:
                raise self.fail(f"has a malformed shard position {entry!r}")
            shard = self._shard(entry["shard"])
            if shard in positions:
                raise self.fail(f"names shard {shard} twice")
            positions[shard] = self._start_key(shard, entry["start_key"])
        return positions

    def _start_key(self, shard: int, value: object) -> RawKey:
        if not isinstance(value, dict) or set(value) != self.key_names:
            raise self.fail(
                f"has a start key for shard {shard} with attributes "
                f"{sorted(value) if isinstance(value, dict) else value!r}, expected {sorted(self.key_names)}"
            )
        key = {name: self._raw_value(shard, name, raw) for name, raw in value.items()}
        try:
            expected = self.hash_value(shard)
        except ShardKeyError:
            raise self.fail(f"names shard {shard}, which this key cannot have") from None
        (actual,) = key[self.hash_name].values()
        if actual != expected:
            raise self.fail(
                f"has a start key for shard {shard} whose {self.hash_name} is {actual!r}, "
                f"not that shard's key {expected!r}"
            )
        return key

    def _raw_value(self, shard: int, name: str, value: object) -> RawValue:
        if not isinstance(value, dict) or len(value) != 1:
            raise self.fail(f"has a malformed value {value!r} for {name} in shard {shard}")
        ((kind, inner),) = value.items()
        if kind not in _KEY_TYPES or not isinstance(inner, str):
            raise self.fail(f"has a malformed value {value!r} for {name} in shard {shard}")
        if kind == "B":
            try:
                return {"B": base64.b64decode(inner, validate=True)}
            except (binascii.Error, ValueError):
                raise self.fail(
                    f"has a binary value for {name} in shard {shard} that is not base64"
                ) from None
        if kind == "N":
            try:
                Decimal(inner)
            except InvalidOperation:
                raise self.fail(f"has a number for {name} in shard {shard} that is not a number") from None
        return {kind: inner}


def decode_cursor(
    cursor: object,
    scope: CursorScope,
    *,
    key_names: Sequence[str],
    hash_name: str,
    hash_value: Callable[[int], object],
) -> CursorState:
    """Validate a cursor returned by a merged query and decode it for the same query's scope.

    Args:
        cursor: what the caller passed as ``last_evaluated_key`` (after a JSON round trip).
        scope: the model, table, hash key, index and direction of the resuming query.
        key_names: the attribute names every start key must have (table keys, plus the index's).
        hash_name: the attribute queried by hash key (the table's, or the index's).
        hash_value: the value ``hash_name`` must hold in a shard's start key (its physical key);
            may raise :class:`ShardKeyError` for a shard the key cannot have.

    Raises:
        CursorError: the cursor is not a dict, is truncated, edited, of another model, table,
            key, index or direction, or names shards or start keys that do not fit.
    """
    return _CursorReader(scope, key_names, hash_name, hash_value).read(cursor)


# --------------------------------------------------------------------------------------------
# The merge
# --------------------------------------------------------------------------------------------


@attrs.frozen
class Page:
    """One page of a shard's results, as DynamoDB's Query returned it."""

    items: list[RawItem]
    last_evaluated_key: RawKey | None
    count: int
    scanned_count: int


#: Fetches one page of a shard: ``fetch_page(shard, exclusive_start_key)``.
FetchPage = Callable[[int, "RawKey | None"], Page]


class _ShardStream:
    """One shard's place in the merge: its current page, its prefetch, where it resumes."""

    __slots__ = ("index", "items", "loaded", "page_key", "pending", "shard", "start")

    def __init__(self, shard: int, start: RawKey | None) -> None:
        self.shard = shard
        self.start = start  # exclusive start key of the current page's request
        self.items: list[RawItem] = []
        self.index = 0
        self.page_key: RawKey | None = None  # DynamoDB's LastEvaluatedKey of the current page
        self.pending: Future[Page] | None = None
        self.loaded = False


class ShardMerge:
    """A streaming k-way merge of per-shard result pages, fetched in parallel.

    Every shard's pages come from ``fetch_page`` on a bounded thread pool. The merge holds, per
    shard, the page being consumed and at most one prefetched page: the next page of a shard is
    requested as soon as its current page arrives, unless ``limit`` proves it will not be needed.
    Items come out in ``(sort value, shard)`` order, ascending or descending, so that ties on
    equal sort keys in different shards are broken the same way in every run.

    Args:
        fetch_page: sends one request; runs on the pool's threads.
        starts: the shards to read, each with its exclusive start key (``None``: from the start).
        sort_key: the item's sort value, see :func:`sort_value`.
        key_names: the attributes of an item's resume key (``ExclusiveStartKey`` shape).
        forward: ascending when true.
        limit: stop after that many items.
        max_workers: threads of the pool.
    """

    def __init__(
        self,
        fetch_page: FetchPage,
        starts: Mapping[int, RawKey | None],
        *,
        sort_key: Callable[[RawItem], SortValue],
        key_names: Sequence[str],
        forward: bool = True,
        limit: int | None = None,
        max_workers: int = 1,
    ) -> None:
        self._fetch_page = fetch_page
        self._streams = [_ShardStream(shard, starts[shard]) for shard in sorted(starts)]
        self._sort_key = sort_key
        self._key_names = tuple(key_names)
        self._forward = forward
        self._limit = limit
        self._max_workers = max(1, min(max_workers, len(self._streams)))
        self._heap: list[tuple[Any, int, _ShardStream]] = []
        self._refill: _ShardStream | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._finalizer: weakref.finalize[Any, ShardMerge] | None = None
        self.started = False
        self.closed = False
        self.returned = 0
        self.total_count = 0
        self.total_scanned_count = 0
        self.requests = 0

    # -- iteration ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[int, RawItem]]:
        return self

    def __next__(self) -> tuple[int, RawItem]:
        """Return ``(shard, raw item)`` of the next item in merged order."""
        if self.closed:
            raise StopIteration
        if self._limit is not None and self.returned >= self._limit:
            self.close()  # the prefetched pages will not be needed
            raise StopIteration
        try:
            if not self.started:
                self._start()
            if self._refill is not None:
                stream, self._refill = self._refill, None
                self._advance(stream)
        except BaseException:
            self.close()
            raise
        heap = self._heap
        if not heap:
            self.close()
            raise StopIteration
        stream = heap[0][2]
        item = stream.items[stream.index]
        stream.index += 1
        self.returned += 1
        if stream.index < len(stream.items):
            heapq.heapreplace(heap, self._entry(stream))
        else:
            heapq.heappop(heap)
            if stream.page_key is not None:
                # The next page may need a wait: fetch it on the next call, not before
                # handing this item over.
                self._refill = stream
        if self._limit is not None and self.returned >= self._limit:
            self.close()  # the prefetched pages will not be needed
        return stream.shard, item

    def _entry(self, stream: _ShardStream) -> tuple[Any, int, _ShardStream]:
        value = self._sort_key(stream.items[stream.index])
        if self._forward:
            return (value, stream.shard, stream)
        return (_Descending((value, stream.shard)), 0, stream)

    def _start(self) -> None:
        self.started = True
        for stream in self._streams:
            stream.pending = self._submit(stream.shard, stream.start)
        for stream in self._streams:
            self._advance(stream)

    def _advance(self, stream: _ShardStream) -> None:
        """Load pages of ``stream`` until it has an item to offer or is exhausted."""
        while stream.index >= len(stream.items):
            if stream.loaded:
                if stream.page_key is None:
                    return
                stream.start = stream.page_key
            pending = stream.pending
            if pending is None:
                pending = self._submit(stream.shard, stream.start)
            stream.pending = None
            page = pending.result()
            stream.items = page.items
            stream.index = 0
            stream.page_key = page.last_evaluated_key
            stream.loaded = True
            self.total_count += page.count
            self.total_scanned_count += page.scanned_count
            if page.last_evaluated_key is not None and self._may_need_more(len(page.items)):
                stream.pending = self._submit(stream.shard, page.last_evaluated_key)
        heapq.heappush(self._heap, self._entry(stream))

    def _may_need_more(self, available: int) -> bool:
        # A page holding as many items as the limit still allows covers the rest of the query
        # on its own: its shard's next page can never be needed.
        return self._limit is None or available < self._limit - self.returned

    def _submit(self, shard: int, start: RawKey | None) -> Future[Page]:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                self._max_workers, thread_name_prefix="pynamodb-sharding-fanout"
            )
            self._finalizer = weakref.finalize(self, _shutdown, self._executor, self._streams)
        self.requests += 1
        return self._executor.submit(self._fetch_page, shard, start)

    # -- state -------------------------------------------------------------------------------

    def state(self) -> tuple[CursorState, bool]:
        """The resume point of every shard, and whether any shard has items left.

        A shard resumes after the last item returned from it; after DynamoDB's own
        ``LastEvaluatedKey`` once its whole current page was returned (that key may lie past
        items the filter dropped); from its original start when nothing was returned yet. A
        shard read to its end keeps its position too, so items written to it later, ahead of
        the cursor, are read on resumption like those of any other shard.
        """
        positions: dict[int, RawKey] = {}
        remaining = False
        for stream in self._streams:
            if not stream.loaded:
                start = stream.start
                remaining = True
            elif stream.index >= len(stream.items):
                start = stream.page_key
                if start is None:  # read to its end: resume after its last item
                    start = self._key_of(stream.items[-1]) if stream.items else stream.start
                else:
                    remaining = True
            else:
                start = self._key_of(stream.items[stream.index - 1]) if stream.index > 0 else stream.start
                remaining = True
            if start is not None:
                positions[stream.shard] = start
        return CursorState(positions=positions), remaining

    def _key_of(self, item: RawItem) -> RawKey:
        return {name: item[name] for name in self._key_names}

    def close(self) -> None:
        """Cancel outstanding requests and release the pool's threads; idempotent."""
        self.closed = True
        self._heap = []
        self._refill = None
        if self._finalizer is not None:
            self._finalizer()


def _shutdown(executor: ThreadPoolExecutor, streams: Sequence[_ShardStream]) -> None:
    for stream in streams:
        if stream.pending is not None:
            stream.pending.cancel()
    executor.shutdown(wait=False, cancel_futures=True)


# --------------------------------------------------------------------------------------------
# What users iterate
# --------------------------------------------------------------------------------------------


class MergedResultIterator(Iterator[_M]):
    """The result of a merged query: model instances with logical keys, in sort-key order.

    It has the surface of PynamoDB's ``ResultIterator`` that iteration needs:
    ``last_evaluated_key``, ``total_count`` and ``total_scanned_count``. Nothing is sent
    before the first item is asked for. Close it (or use it as a context manager) to cancel
    the prefetched pages of a query you stop reading early; garbage collection does the same.

    ``last_evaluated_key`` follows ``ResultIterator``: before iteration it is the cursor the
    query was given (or ``None``); once every shard is exhausted it is ``None``; otherwise it is
    a cursor (a dict of JSON types) that resumes right after the last item returned.
    """

    def __init__(
        self,
        model: type[_M],
        merge: ShardMerge,
        scope: CursorScope,
        *,
        given_cursor: dict[str, Any] | None,
    ) -> None:
        self._model = model
        self._from_raw_data = model.from_raw_data
        self._merge = merge
        self._scope = scope
        self._given_cursor = given_cursor

    def __iter__(self) -> MergedResultIterator[_M]:
        return self

    def __next__(self) -> _M:
        _shard, raw = next(self._merge)
        return self._from_raw_data(raw)

    def next(self) -> _M:
        return self.__next__()

    @property
    def last_evaluated_key(self) -> dict[str, Any] | None:
        """The cursor to pass back as ``last_evaluated_key``, ``None`` when nothing is left."""
        if not self._merge.started:
            return self._given_cursor
        state, remaining = self._merge.state()
        if not remaining:
            return None
        return encode_cursor(self._scope, state)

    @property
    def total_count(self) -> int:
        """The ``Count`` of every page taken into the merge (prefetched pages excluded)."""
        return self._merge.total_count

    @property
    def total_scanned_count(self) -> int:
        """The ``ScannedCount`` of every page taken into the merge."""
        return self._merge.total_scanned_count

    @property
    def requests_sent(self) -> int:
        """Query requests submitted so far, including prefetches."""
        return self._merge.requests

    def close(self) -> None:
        """Stop: cancel prefetched pages and release the threads. Iteration then ends."""
        self._merge.close()

    def __enter__(self) -> MergedResultIterator[_M]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# The entry points ShardedModel.query and ShardedModel.count call
# --------------------------------------------------------------------------------------------


class FanoutPoolWarning(UserWarning):
    """A merged query runs more threads than the model's botocore connection pool holds."""


_warned_pools: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def default_page_size(shard_count: int, limit: int | None) -> int:
    """Each shard's ``Limit`` when the caller gives no ``page_size``: bounded by memory."""
    bound = max(100, DEFAULT_BUFFERED_ITEMS // (2 * max(1, shard_count)))
    return bound if limit is None else min(limit, bound)


def default_workers(model: type[ShardedModel], shard_count: int) -> int:
    """Threads of a merged query: ``Sharding(max_workers=)``, else ``min(32, shard_count)``."""
    configured = getattr(model._shard_manager(), "max_workers", None)
    workers = configured if configured is not None else min(MAX_DEFAULT_WORKERS, shard_count)
    return max(1, min(workers, shard_count))


def _check_pool(model: type[ShardedModel], workers: int) -> None:
    pool = getattr(model.Meta, "max_pool_connections", None)
    if pool is None or workers <= pool:
        return
    key = (model.__module__, model.__qualname__)
    with _warned_lock:
        if key in _warned_pools:
            return
        _warned_pools.add(key)
    msg = (
        f"{model.__name__}: a merged query runs {workers} threads but Meta.max_pool_connections "
        f"is {pool}, so threads wait for a connection; set Meta.max_pool_connections = {workers} "
        f"or Sharding(..., max_workers={pool})."
    )
    warnings.warn(msg, FanoutPoolWarning, stacklevel=4)


class _ShardQuery:
    """Sends one page request of one shard, paced by the logical query's shared rate limiter."""

    def __init__(self, model: type[ShardedModel], rate_limit: float | None, **query_kwargs: Any) -> None:
        self._connection = model._get_connection()
        # botocore creates a connection's client lazily and not thread-safely: create it now,
        # before the shards' threads share it.
        self._connection.connection.client  # noqa: B018
        self._limiter = _SharedRateLimiter(rate_limit) if rate_limit else None
        self._kwargs = {**query_kwargs, "return_consumed_capacity": TOTAL if self._limiter else None}

    def __call__(self, hash_value: Any, start: RawKey | None) -> dict[str, Any]:
        limiter = self._limiter
        if limiter is not None:
            limiter.acquire()
        data: dict[str, Any] = self._connection.query(hash_value, exclusive_start_key=start, **self._kwargs)
        if limiter is not None:
            limiter.consume(data.get(CONSUMED_CAPACITY, {}).get(CAPACITY_UNITS, 0))
        return data


class _SharedRateLimiter:
    """One ``RateLimiter`` for all shards of a logical query (``RateLimiter`` is not thread-safe).

    The lock is held through ``acquire``'s pause on purpose: the pause is what paces every
    shard's next request, so other shards must wait it out too.
    """

    def __init__(self, rate_limit: float) -> None:
        self._limiter = RateLimiter(rate_limit)
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:
            self._limiter.acquire()

    def consume(self, units: float) -> None:
        with self._lock:
            self._limiter.consume(units)  # type: ignore[arg-type]  # PynamoDB types units as int


@attrs.frozen
class _QueryPlan:
    """How one logical query maps onto DynamoDB queries."""

    scope: CursorScope
    hash_name: str  # the attribute the key condition names (the table's or the index's)
    hash_values: Mapping[int, Any]  # shard -> the value its requests query
    key_names: tuple[str, ...]
    sort_name: str | None
    hash_value: Callable[[int], object]


def _plan(
    model: type[ShardedModel],
    hash_key: Any,
    shards: Sequence[int] | None,
    index_name: str | None,
    consistent_read: bool,
    forward: bool,
) -> _QueryPlan:
    """``shards`` defaults to every shard ``read_shards`` names for a sharded table or index."""
    if shards is None and (index_name is None or _is_sharded_index(model, index_name)):
        shards = model._shard_manager().read_shards(hash_key)
    shards = shards or ()
    meta = model._get_connection().get_meta_table()
    table_hash = meta.hash_keyname
    table = model.Meta.table_name
    hash_name = table_hash
    sort_name = meta.range_keyname
    if index_name is not None:
        index = model._indexes.get(index_name)
        if index is None:
            msg = (
                f"{model.__name__}.query: the model has no index {index_name!r}; "
                f"use one of {sorted(model._indexes)} or index_name=None."
            )
            raise ShardingError(msg)
        if consistent_read and isinstance(index, GlobalSecondaryIndex):
            msg = (
                f"{model.__name__}.{type(index).__name__}({index_name!r}): global secondary indexes "
                f"do not support strongly consistent reads; pass consistent_read=False, or query "
                f"the table itself for a consistent read."
            )
            raise ShardingError(msg)
        hash_name = meta.get_index_hash_keyname(index_name)
        sort_name = meta.get_index_range_keyname(index_name)  # type: ignore[no-untyped-call]
    key_names = tuple(meta.get_key_names(index_name))  # type: ignore[no-untyped-call]
    if hash_name != table_hash:
        # An index keyed by another attribute is not sharded: one plain query, labelled shard 1.
        attribute = model._indexes[index_name or ""]._hash_key_attribute()  # type: ignore[no-untyped-call]
        value = attribute.serialize(hash_key)
        scope = CursorScope(model.__name__, table, {attribute.attr_type: value}, index_name, forward)

        def plain_value(shard: int) -> object:
            if shard != 1:
                msg = f"{model.__name__}: an unsharded index query has one stream, not shard {shard}."
                raise ShardKeyError(msg)
            return value

        return _QueryPlan(scope, hash_name, {1: value}, key_names, sort_name, plain_value)
    manager = model._shard_manager()
    hash_values = {shard: manager.physical_key(hash_key, shard) for shard in shards}
    scope = CursorScope(model.__name__, table, {"S": hash_key}, index_name, forward)
    return _QueryPlan(scope, hash_name, hash_values, key_names, sort_name,
                      lambda shard: manager.physical_key(hash_key, shard))


def _with_class_filter(model: type[ShardedModel], filter_condition: Condition | None) -> Condition | None:
    # As PynamoDB's Model.query: a polymorphic model only reads items of its own classes.
    discriminator = model._get_discriminator_attribute()
    if discriminator:
        filter_condition &= discriminator.is_in(*discriminator.get_registered_subclasses(model))
    return filter_condition


def _projection(attributes_to_get: Iterable[Any] | None, key_names: Sequence[str]) -> list[Any] | None:
    # The merge orders by the sort key and the cursor is built from the keys: always fetch them.
    if attributes_to_get is None:
        return None
    requested = list(attributes_to_get)
    if not requested:
        return None
    names = {getattr(entry, "attr_name", entry) for entry in requested}
    return requested + [name for name in key_names if name not in names]


def merged_query(
    model: type[_M],
    hash_key: Any,
    *,
    shards: Sequence[int] | None = None,
    range_key_condition: Condition | None = None,
    filter_condition: Condition | None = None,
    consistent_read: bool = False,
    index_name: str | None = None,
    scan_index_forward: bool | None = None,
    limit: int | None = None,
    last_evaluated_key: Any = None,
    attributes_to_get: Iterable[Any] | None = None,
    page_size: int | None = None,
    rate_limit: float | None = None,
    max_workers: int | None = None,
) -> MergedResultIterator[_M]:
    """Query every shard of ``hash_key`` in parallel and merge the results in sort-key order.

    The arguments are PynamoDB's ``Model.query``'s. Items come in the order of the sort key
    (the index's range key for ``index_name``, else the table's), ties between shards broken by
    shard number; on a model without a range key, shard by shard. An index whose hash key is
    not the sharded attribute is not sharded: it is one plain query.

    Args:
        model: the sharded model class.
        hash_key: the logical hash key (or the index's hash key for an unsharded index).
        shards: the shards to read; default ``model._shard_manager().read_shards(hash_key)``.
        range_key_condition: passed to every shard's query.
        filter_condition: passed to every shard's query.
        consistent_read: strongly consistent reads; refused for a global secondary index.
        index_name: query this index.
        scan_index_forward: ``False`` for descending order.
        limit: stop after that many merged items.
        last_evaluated_key: a cursor from a previous merged query of the same key, index and
            direction: resume right after its last item.
        attributes_to_get: projection; the key attributes are always fetched too (the merge and
            the cursor need them).
        page_size: each shard request's ``Limit``; default ``limit``, capped so that the
            pages held (one current and one prefetched per shard) stay under
            :data:`DEFAULT_BUFFERED_ITEMS` items in all (at least 100 per shard).
        rate_limit: capacity units per second for the whole logical query.
        max_workers: threads; default ``model.shards.max_workers`` or ``min(32, shard count)``.

    Returns:
        A :class:`MergedResultIterator` of model instances.

    Raises:
        CursorError: ``last_evaluated_key`` is not a cursor of this query.
        ShardingError: no such index, or ``consistent_read`` on a global secondary index.
    """
    forward = scan_index_forward is not False
    range_key_condition = rewrite_condition(model, range_key_condition, Usage.KEY)
    filter_condition = rewrite_condition(model, filter_condition, Usage.FILTER)
    plan = _plan(model, hash_key, shards, index_name, consistent_read, forward)
    state = CursorState()
    if last_evaluated_key is not None:
        state = decode_cursor(last_evaluated_key, plan.scope, key_names=plan.key_names,
                              hash_name=plan.hash_name, hash_value=plan.hash_value)
    starts = {shard: state.positions.get(shard) for shard in plan.hash_values}

    hash_values = dict(plan.hash_values)
    send = _ShardQuery(
        model,
        rate_limit,
        range_key_condition=range_key_condition,
        filter_condition=_with_class_filter(model, filter_condition),
        consistent_read=consistent_read,
        index_name=index_name,
        scan_index_forward=scan_index_forward,
        limit=page_size if page_size is not None else default_page_size(len(hash_values), limit),
        attributes_to_get=_projection(attributes_to_get, plan.key_names),
    )

    def fetch_page(shard: int, start: RawKey | None) -> Page:
        data = send(hash_values[shard], start)
        return Page(data.get(ITEMS, []), data.get(LAST_EVALUATED_KEY), data[CAMEL_COUNT], data[SCANNED_COUNT])

    sort_name = plan.sort_name
    if sort_name is None:
        def sort_key(item: RawItem) -> SortValue:
            return b""
    else:
        def sort_key(item: RawItem) -> SortValue:
            return sort_value(item[sort_name])

    workers = max_workers if max_workers is not None else default_workers(model, len(starts) or 1)
    if starts:
        _check_pool(model, min(workers, len(starts)))
    merge = ShardMerge(fetch_page, starts, sort_key=sort_key, key_names=plan.key_names, forward=forward,
                       limit=limit, max_workers=workers)
    return MergedResultIterator(model, merge, plan.scope, given_cursor=last_evaluated_key)


def _is_sharded_index(model: type[ShardedModel], index_name: str) -> bool:
    index = model._indexes.get(index_name)
    if index is None:
        return True  # _plan reports the unknown index
    meta = model._get_connection().get_meta_table()
    return bool(meta.get_index_hash_keyname(index_name) == meta.hash_keyname)


def merged_count(
    model: type[ShardedModel],
    hash_key: Any,
    *,
    shards: Sequence[int] | None = None,
    range_key_condition: Condition | None = None,
    filter_condition: Condition | None = None,
    consistent_read: bool = False,
    index_name: str | None = None,
    limit: int | None = None,
    rate_limit: float | None = None,
    max_workers: int | None = None,
) -> int:
    """Count the items of ``hash_key`` over every shard, querying the shards in parallel.

    The arguments are PynamoDB's ``Model.count``'s (with a hash key). ``limit`` caps the total:
    the count stops asking for pages once it is reached.

    Raises:
        ShardingError: no such index, or ``consistent_read`` on a global secondary index.
    """
    range_key_condition = rewrite_condition(model, range_key_condition, Usage.KEY)
    filter_condition = rewrite_condition(model, filter_condition, Usage.FILTER)
    plan = _plan(model, hash_key, shards, index_name, consistent_read, True)
    send = _ShardQuery(
        model,
        rate_limit,
        range_key_condition=range_key_condition,
        filter_condition=_with_class_filter(model, filter_condition),
        consistent_read=consistent_read,
        index_name=index_name,
        limit=limit,
        select="COUNT",
    )
    total = 0
    lock = threading.Lock()
    done = threading.Event()

    def count_shard(value: Any) -> None:
        nonlocal total
        start: RawKey | None = None
        while not done.is_set():
            data = send(value, start)
            with lock:
                total += data[CAMEL_COUNT]
                if limit is not None and total >= limit:
                    done.set()
            start = data.get(LAST_EVALUATED_KEY)
            if start is None:
                return

    values = list(plan.hash_values.values())
    if not values or limit == 0:
        return 0
    workers = max_workers if max_workers is not None else default_workers(model, len(values))
    _check_pool(model, workers)
    with ThreadPoolExecutor(workers, thread_name_prefix="pynamodb-sharding-count") as executor:
        futures = [executor.submit(count_shard, value) for value in values]
        try:
            for future in futures:
                future.result()
        except BaseException:
            done.set()
            for future in futures:
                future.cancel()
            raise
    return min(total, limit) if limit is not None else total
