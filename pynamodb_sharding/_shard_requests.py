"""Sending a merged query's shard requests: one page of one shard, paced, traced, hedged.

:class:`ShardQuery` sends one shard's page request (to the table or a read replica), paced by
the logical query's shared rate limiter and parsed quickly; :class:`ReadFirst` reads the
streams a job may be moving items out of before any other; :class:`EarlyFirstPages` sends the
likely shards' first pages while a ``DynamicShards`` count is being read.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from pynamodb.constants import (
    CAMEL_COUNT,
    CAPACITY_UNITS,
    CONSUMED_CAPACITY,
    ITEMS,
    LAST_EVALUATED_KEY,
    SCANNED_COUNT,
    TOTAL,
)
from pynamodb.exceptions import PynamoDBException
from pynamodb.pagination import RateLimiter

from pynamodb_sharding._cursor import RawItem, RawValue
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._fastparse import parsed_quickly
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._hedging import hedged
from pynamodb_sharding._host import table_connection
from pynamodb_sharding._indexes import index_not_ready
from pynamodb_sharding._merge import Page, Start, sort_value
from pynamodb_sharding._point_reads import with_key_attributes
from pynamodb_sharding._pool import fanout_submit, hedging_scheduler, new_future, new_lock, pause
from pynamodb_sharding._query_plan import (
    IndexPartition,
    closed_end,
    condition_from,
    default_page_size,
    default_workers,
    first_share,
)
from pynamodb_sharding._replicas import failing_over, read_copies, spread
from pynamodb_sharding._wire import QueryWire, fast_queries_enabled

__all__ = ["EarlyFirstPages", "QueryTrace", "ReadFirst", "ShardQuery", "as_page", "traced"]

_T = TypeVar("_T")

class ShardQuery:
    """Sends one page request of one shard, paced by the logical query's shared rate limiter,
    to the table or one of its read replicas (:func:`~pynamodb_sharding._replicas.spread`).

    ``replicas=False``: the table only (a query of a key whose items a job is moving reads the
    places they leave before the places they reach, which only holds on one copy).
    ``resume_at``: an index query resumed from a position, ``(sort-key attribute, value)``: every
    request reads from that value on (included), within the query's own key condition, and a
    stream started :data:`~pynamodb_sharding._merge.STARTS_AT_POSITION` sends no
    ``ExclusiveStartKey``.
    """

    def __init__(self, model: type[Any], rate_limit: float | None, *, replicas: bool = True,
                 resume_at: tuple[str, RawValue] | None = None, **query_kwargs: Any) -> None:
        self._model = model
        self._copies = read_copies(model, consistent_read=query_kwargs.get("consistent_read"),
                                   index_name=query_kwargs.get("index_name")) if replicas else None
        self._connection = table_connection(model)
        # botocore creates a connection's client lazily and not thread-safely: create it now,
        # before the shards' threads share it.
        self._connection.connection.client  # noqa: B018
        self._limiter = _SharedRateLimiter(rate_limit) if rate_limit else None
        self._kwargs = {**query_kwargs, "return_consumed_capacity": TOTAL if self._limiter else None}
        self._window = shard_manager(model).latency_window
        # A table query's sort key is unique within a partition: a shard resumed on the last
        # value the key condition admits has nothing left (see closed_end).
        forward = query_kwargs.get("scan_index_forward") is not False
        self._end = (closed_end(query_kwargs.get("range_key_condition"), forward)
                     if query_kwargs.get("index_name") is None else None)
        self._sort_name = self._connection.get_meta_table().range_keyname  # as stored (attr_name)
        self._keep: Callable[[RawItem], bool] | None = None
        self._partitions: dict[int, tuple[IndexPartition, dict[str, Any]]] = {}
        # Shard requests below PynamoDB and botocore on their happy path (see _wire).
        self._wire = QueryWire(self._connection) if fast_queries_enabled() else None
        if resume_at is not None:
            name, value = resume_at
            condition, self._keep = condition_from(query_kwargs.get("range_key_condition"), name, value, forward)
            self._kwargs["range_key_condition"] = condition

    def _read_to_the_end(self, start: Start) -> bool:
        """``start`` sits on the last value the key condition admits."""
        end, name = self._end, self._sort_name
        if end is None or not isinstance(start, dict) or name is None or name not in start:
            return False
        resumed = start[name]
        return set(resumed) == set(end) and sort_value(resumed) == sort_value(end)

    def _partition_kwargs(self, partition: IndexPartition) -> dict[str, Any]:
        """The query's arguments for one partition of a multi-attribute index (kept per
        partition: the fast path keeps one request template per arguments)."""
        kept = self._partitions.get(id(partition))
        if kept is None or kept[0] is not partition:
            given = self._kwargs.get("range_key_condition")
            condition = partition.condition if given is None else partition.condition & given
            kept = self._partitions[id(partition)] = (partition, {**self._kwargs, "range_key_condition": condition})
        return kept[1]

    @property
    def page_size(self) -> int | None:
        """The ``Limit`` of the requests sent from now on."""
        limit: int | None = self._kwargs.get("limit")
        return limit

    @page_size.setter
    def page_size(self, limit: int | None) -> None:
        self._kwargs["limit"] = limit

    def __call__(self, hash_value: Any, start: Start, limit: int | None = None) -> dict[str, Any]:
        if self._read_to_the_end(start):  # DynamoDB would refuse that start key; nothing follows it
            return {ITEMS: [], CAMEL_COUNT: 0, SCANNED_COUNT: 0}
        exclusive_start_key = start if isinstance(start, dict) else None
        limiter = self._limiter
        if limiter is not None:
            limiter.acquire()
        kwargs = self._kwargs
        partition = isinstance(hash_value, IndexPartition)
        if isinstance(hash_value, IndexPartition):  # a multi-attribute index key: value and shard
            kwargs = self._partition_kwargs(hash_value)
            hash_value = hash_value.value
        window = self._window
        connection = self._connection
        wire = self._wire

        def send_to(copy: str | None, fail_over: bool) -> dict[str, Any]:
            sent = kwargs if copy is None else {**kwargs, "index_name": copy}
            if limit is not None:
                sent = {**sent, "limit": limit}

            def slow() -> dict[str, Any]:
                return parsed_quickly(connection.connection.client,
                                      lambda: connection.query(hash_value, exclusive_start_key=exclusive_start_key,
                                                               **sent))

            def send() -> dict[str, Any]:
                with failing_over(fail_over):  # on the thread that sends it (a hedge has its own)
                    if wire is None:
                        return slow()
                    data = wire.query(hash_value, exclusive_start_key, limit, kwargs, index_name=copy)
                    if data is not None:
                        return data
                    with wire.learning():  # through PynamoDB and botocore, as every request would
                        return slow()

            # Sharding(hedged_requests=True): a slow request is sent once more, first answer wins
            # (on an event loop, the attempts are tasks of the loop and the waits yield to it).
            if window is None:
                return send()
            scheduler = hedging_scheduler()
            return hedged(send, window) if scheduler is None else hedged(send, window, scheduler=scheduler)

        copies = self._copies
        try:
            data: dict[str, Any] = send_to(None, False) if copies is None else spread(copies, send_to)
        except PynamoDBException as error:
            if partition and error.cause_response_code == "ValidationException":
                # A multi-attribute index DynamoDB cannot answer yet: say why, not its message.
                not_ready = index_not_ready(self._model, kwargs.get("index_name"), error)
                if not_ready is not None:
                    raise not_ready from error
            raise
        if limiter is not None:
            limiter.consume(data.get(CONSUMED_CAPACITY, {}).get(CAPACITY_UNITS, 0))
        keep = self._keep
        if keep is not None and data.get(ITEMS):
            items = data[ITEMS]
            kept = [item for item in items if keep(item)]
            if len(kept) != len(items):
                data = {**data, ITEMS: kept, CAMEL_COUNT: data[CAMEL_COUNT] - (len(items) - len(kept))}
        return data


class _PausingClock:
    """The ``time`` module ``RateLimiter`` paces with, its sleep yielding on an event loop."""

    time = staticmethod(time.time)
    sleep = staticmethod(pause)


_PAUSING_CLOCK = _PausingClock()


class _SharedRateLimiter:
    """One ``RateLimiter`` for all shards of a logical query (``RateLimiter`` is not thread-safe).

    The lock is held through ``acquire``'s pause on purpose: the pause is what paces every
    shard's next request, so other shards must wait it out too.
    """

    def __init__(self, rate_limit: float) -> None:
        # The pause yields to the event loop on the async path, and so does the wait for the
        # lock there (the shards' greenlets share the loop's thread).
        self._limiter = RateLimiter(rate_limit, time_module=_PAUSING_CLOCK)
        self._lock: AbstractContextManager[Any] = new_lock()
        _rate_limiters.add(self)

    def acquire(self) -> None:
        with self._lock:
            self._limiter.acquire()

    def consume(self, units: float) -> None:
        with self._lock:
            self._limiter.consume(units)  # type: ignore[arg-type]  # PynamoDB types units as int


_rate_limiters: weakref.WeakSet[_SharedRateLimiter] = weakref.WeakSet()
_first_reads: weakref.WeakSet[ReadFirst] = weakref.WeakSet()


def _reset_locks_in_child() -> None:
    """Give a forked child fresh locks: a thread of the parent may have held one at the fork."""
    for limiter in list(_rate_limiters):
        limiter._lock = threading.Lock()
    for read in list(_first_reads):
        read._lock = threading.Lock()


at_fork(after_in_child=_reset_locks_in_child)



class QueryTrace(Protocol):
    """What an observer (:mod:`pynamodb_sharding.contrib.otel`) follows of one merged read."""

    def shard_request(self, shard: int, call: Callable[[], _T]) -> _T:
        """Run one shard request (on a fan-out thread) inside the observer's context."""

    def end(self, error: BaseException | None = None) -> None:
        """The merged read is over (idempotent)."""



def traced(trace: QueryTrace | None, shard: int, call: Callable[[], _T]) -> _T:
    return call() if trace is None else trace.shard_request(shard, call)



class EarlyFirstPages:
    """The first pages of the shards a merged query probably reads, asked for while the shards
    it does read are being found.

    A ``DynamicShards`` model reads the key's metadata item before a merged query knows its
    shards (every query with fresh counts; with cached counts, once the cached one expired).
    The shards this process last saw for a key it read before are queried at the same time, so
    a query costs one round trip when the count has not changed. The shards read are always the
    ones the metadata read returned: the pages are used only when that read names the version of
    the count they were sent for (:meth:`valid`; else items may have moved between the shards
    while they were read), an early page only by the merge's first request of its shard at its
    physical key, and the page of a shard the merge does not read is dropped.
    Pages are sized for the count expected (the merge handles a page of any size); at most
    the merge's ``max_workers`` are sent early, and only shard 1 for a query whose range may
    let it skip shards (``written_at``).
    """

    def __init__(self, send: ShardQuery, pages: dict[int, tuple[Any, Future[dict[str, Any]]]],
                 valid: Callable[[], bool] = lambda: True) -> None:
        self.send = send
        self._pages = pages
        self._lock = threading.Lock()
        self._valid = valid

    def valid(self) -> bool:
        """Whether the pages may be used, now that the shards are known: the count read names
        the version they were sent for (else something may have moved between the shards
        while they were read: see ``ShardManager.early_pages_valid``)."""
        return self._valid()

    @classmethod
    def start(
        cls, model: type[Any], hash_key: Any, query_options: Mapping[str, Any],
        attributes_to_get: Iterable[Any] | None, *, rate_limit: float | None, limit: int | None,
        page_size: int | None, share_mode: bool, max_workers: int | None, first_only: bool,
    ) -> EarlyFirstPages | None:
        """Send the likely shards' first pages now when finding the shards costs a request,
        else ``None``. ``first_only``: the query may skip shards first used after its range
        (``written_at``), so only the first shard, which every read covers, is sent early."""
        manager = shard_manager(model)
        early = manager.early_read_shard(hash_key)
        if early is None:
            return None
        first, likely, version = early
        key_names = tuple(table_connection(model).get_meta_table().get_key_names(None))  # type: ignore[no-untyped-call]
        send = ShardQuery(model, rate_limit, **query_options, limit=page_size,
                           attributes_to_get=with_key_attributes(attributes_to_get, key_names))
        if page_size is not None:
            size = page_size
        elif limit is not None and share_mode:
            # About each shard's share of the limit, as the merge would ask for it.
            slack, extra = first_share(limit, likely, manager.page_reads)
            size = max(1, min(limit, -(-int(slack * limit) // likely) + extra, default_page_size(likely, limit)))
        else:
            size = default_page_size(likely, limit)
        workers = max_workers if max_workers is not None else default_workers(model, likely)
        shards = [shard for shard in range(first, first + likely) if manager.codec.fits(hash_key, shard)]
        pages = {}
        for shard in shards[:1 if first_only else max(1, workers)]:
            hash_value = manager.physical_key(hash_key, shard)
            pages[shard] = (hash_value, fanout_submit(send, hash_value, None, size))
        return cls(send, pages, lambda: manager.early_pages_valid(hash_key, version))

    def take(self, shard: int, start: Start, hash_value: object) -> Future[dict[str, Any]] | None:
        """The early page of ``shard`` if this is the merge's first request of it, once."""
        if start is not None:
            return None
        with self._lock:
            sent = self._pages.get(shard)
            if sent is None or sent[0] != hash_value:
                return None
            del self._pages[shard]
        return sent[1]


def as_page(data: Mapping[str, Any]) -> Page:
    consumed = data.get(CONSUMED_CAPACITY, {}).get(CAPACITY_UNITS)
    return Page(data.get(ITEMS, []), data.get(LAST_EVALUATED_KEY), data[CAMEL_COUNT], data[SCANNED_COUNT],
                consumed_capacity=float(consumed) if consumed is not None else None)


class ReadFirst:
    """Reads the streams items may be moving out of before any other stream is queried.

    A job moves items out of some streams (a ``legacy_unsharded`` key's bare key, the shards
    above a key's lowered count, an older layout's shards, an index's bare value) into others
    while queries run. A query that read the new place before an item arrived there and the old
    place after it left would miss the item; reading the old places first (each to its end, or
    ``limit`` items) means an item is either seen there or already in its new place when that
    is read, where the merge returns it once (the copy outside the first reads wins). Every page
    request of the query waits until these reads are done.
    """

    def __init__(self, send: Callable[[int, Start], dict[str, Any]], starts: Mapping[int, Start],
                 limit: int | None, current: Callable[[Page], Page] | None = None) -> None:
        self._send = send
        # What the query keeps of a page (without stale bare copies), applied before any other
        # stream is read: an item moved after its bare copy was read is then in its shard's page.
        self._current = current
        self._starts = dict(starts)
        self._limit = limit
        self._lock = threading.Lock()
        self._pages: dict[int, Page] | None = None
        self._reading: Future[dict[int, Page]] | None = None
        self._handed: set[int] = set()
        _first_reads.add(self)

    def wait(self) -> None:
        """Return once every first-read stream has been read (reading them, if no other caller does).

        The reads are made by the first caller, outside the lock; the others wait on its future
        (which yields to the event loop on the asyncio bridge, where a lock held across a
        request would stop every task of the loop). A failed read is made again by the next call.
        """
        with self._lock:
            if self._pages is not None:
                return
            reading = self._reading
            if reading is None:
                reading = self._reading = mine = new_future()
            else:
                mine = None
        if mine is None:
            reading.result()
            return
        try:
            pages = {shard: self._read(shard, start) for shard, start in sorted(self._starts.items())}
        except BaseException as exc:
            with self._lock:
                self._reading = None
            mine.set_exception(exc)
            raise
        with self._lock:
            self._pages = pages
        mine.set_result(pages)

    def take(self, shard: int, start: Start) -> Page | None:
        """The page that was read, for the first request of ``shard``'s stream (from ``start``)."""
        with self._lock:
            if shard in self._handed or self._pages is None or start != self._starts.get(shard):
                return None
            self._handed.add(shard)
            return self._pages.get(shard)

    def _read(self, shard: int, start: Start) -> Page:
        items: list[RawItem] = []
        count = scanned = 0
        consumed: float | None = None
        while True:
            page = as_page(self._send(shard, start))
            if self._current is not None:  # the limit counts the items kept
                page = self._current(page)
            items.extend(page.items)
            count += page.count
            scanned += page.scanned_count
            if page.consumed_capacity is not None:
                consumed = (consumed or 0.0) + page.consumed_capacity
            start = page.last_evaluated_key
            if start is None or (self._limit is not None and len(items) >= self._limit):
                return Page(items, start, count, scanned, consumed_capacity=consumed)

