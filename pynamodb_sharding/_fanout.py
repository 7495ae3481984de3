"""Merged fan-out reads: parallel per-shard queries, a streaming k-way merge, one resumable cursor.

A query of a sharded key is one DynamoDB Query per shard. :func:`merged_query` sends them in
parallel on a bounded thread pool, merges their pages in sort-key order as they stream in
(holding at most the current page and one prefetched page per shard), and exposes a single
JSON-serialisable ``last_evaluated_key`` that resumes every shard exactly where the caller
stopped, with PynamoDB's ``page_iter`` over the merged stream. A request that fails is sent
again by the next ``next()``, and a process forked mid-query sends the requests its parent's
threads had in flight again, so neither ends a merged query early nor makes it hang.
:func:`merged_count` sums the shards' counts in parallel.

This module plans and sends: it turns a logical query into one request per shard (the same
request for query and count), runs them through :class:`~pynamodb_sharding._merge.ShardMerge`,
and wraps the merged stream in the iterators users see. The cursor lives in
:mod:`pynamodb_sharding._cursor`, the merge in :mod:`pynamodb_sharding._merge`; their names are
re-exported here for code written against earlier releases.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
from pynamodb.constants import (
    CAMEL_COUNT,
    CAPACITY_UNITS,
    CONSUMED_CAPACITY,
    ITEMS,
    LAST_EVALUATED_KEY,
    SCANNED_COUNT,
    TABLE_NAME,
    TOTAL,
)
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.indexes import GlobalSecondaryIndex
from pynamodb.pagination import RateLimiter

from pynamodb_sharding._conditions import Usage, rewrite_condition
from pynamodb_sharding._cursor import (
    CURSOR_VERSION,
    CursorScope,
    CursorState,
    RawItem,
    RawKey,
    TokenCodec,
    decode_cursor,
    encode_cursor,
)
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._exceptions import ConsistentIndexReadError, CursorError, ShardKeyError, UnknownIndexError
from pynamodb_sharding._fastparse import parsed_quickly
from pynamodb_sharding._hedging import hedged
from pynamodb_sharding._host import (
    discriminator_attribute,
    index_hash_attribute,
    indexes,
    range_keyname,
    table_connection,
)
from pynamodb_sharding._indexes import backfill_pending, index_not_ready, sharded_index
from pynamodb_sharding._keys import FIRST_READ, LEGACY_SHARD
from pynamodb_sharding._merge import SHARE_SLACK, CopyFlag, Page, ShardMerge, SortValue, sort_value
from pynamodb_sharding._point_reads import (
    index_entries,
    leaves_out_keys,
    mark_partial,
    with_key_attributes,
    without_stale_bare_copies,
)
from pynamodb_sharding._pool import (
    BoundedSubmitter,
    fanout_executor,
    fanout_threads,
    hedging_scheduler,
    new_future,
    new_lock,
    on_event_loop,
    pause,
)
from pynamodb_sharding._replicas import failing_over, read_copies, spread

if TYPE_CHECKING:
    from pynamodb.models import Model

__all__ = [
    "CURSOR_VERSION",
    "CursorScope",
    "CursorState",
    "FanoutPoolWarning",
    "MergedPageIterator",
    "MergedResultIterator",
    "Page",
    "ShardMerge",
    "count_by_shard",
    "decode_cursor",
    "default_workers",
    "encode_cursor",
    "merged_count",
    "merged_query",
    "sort_value",
]

_M = TypeVar("_M", bound="Model")
_T = TypeVar("_T")

#: Threads a merged query uses at most when the model does not say (``Sharding(max_workers=)``).
MAX_DEFAULT_WORKERS = 32

#: Items a merged query of up to 160 shards holds at most, over all shards, when neither
#: ``page_size`` nor a smaller ``limit`` is given: each shard's page and its prefetched next
#: page. DynamoDB's own 1 MB pages parse to several MB of Python objects each, which over 16
#: shards would be hundreds of MB; this bound keeps a merged query's memory near a plain
#: query's. Above 160 shards the floor of 100 items a page wins (see :func:`default_page_size`).
DEFAULT_BUFFERED_ITEMS = 32_000

# --------------------------------------------------------------------------------------------
# What users iterate
# --------------------------------------------------------------------------------------------


class MergedPageIterator(Iterator[dict[str, Any]]):
    """The pages of a merged query: PynamoDB's ``PageIterator`` surface over the merged stream.

    ``MergedResultIterator.page_iter`` is one, as ``ResultIterator.page_iter`` is a
    ``PageIterator``, with the same attributes: ``last_evaluated_key``,
    ``total_scanned_count``, ``key_names``, ``page_size`` (settable: the ``Limit`` of the
    shard requests sent from then on), and iteration over raw pages. A page is a dict in
    Query's response shape: ``Items`` (raw items, in merged order, as DynamoDB returned them:
    ``Model.from_raw_data`` reads them), ``Count``, ``ScannedCount`` (of the shard pages taken
    into the merge meanwhile), ``ConsumedCapacity`` when the requests asked for it
    (``rate_limit``), and ``LastEvaluatedKey`` except on the last page. A page holds at most
    ``page_size`` items and is made of the items the merge returns next, so a page is not one
    DynamoDB response. The pages and the items of the ``MergedResultIterator`` come from the
    one merged stream: what one of them returns, the other does not return again.

    The one intended difference from PynamoDB: ``last_evaluated_key`` (and a page's
    ``LastEvaluatedKey``) is the merged query's cursor, a dict of JSON types that resumes every
    shard right after the last item returned, not a DynamoDB key. It is the same value as the
    result iterator's ``last_evaluated_key``.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        merge: ShardMerge,
        scope: CursorScope,
        *,
        given_cursor: dict[str, Any] | str | None,
        key_names: Sequence[str],
        page_size: int | None,
        shard_query: _ShardQuery | None = None,
        tokens: TokenCodec | None = None,
        given_state: CursorState | None = None,
        filtered: bool = False,
    ) -> None:
        self._merge = merge
        self._scope = scope
        self._given_cursor = given_cursor
        self._tokens = tokens
        self._given_state = given_state
        self._key_names = tuple(key_names)
        self._page_size = page_size
        #: What a plain query's pages would hold: its ``Limit`` (``page_size``, else ``limit``).
        self._plain_page_size = page_size
        self._filtered = filtered
        self._shard_query = shard_query
        self._default_request_limit = shard_query.page_size if shard_query is not None else None
        self._is_last_page = False
        self._items: list[RawItem] = []  # a page being filled when a request failed
        self._scanned_reported = 0
        self._consumed_reported = 0.0

    def __iter__(self) -> MergedPageIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        """The next page, in the shape of a DynamoDB Query response.

        An error from a shard's request leaves the items gathered so far for the next call.
        """
        merge = self._merge
        if self._is_last_page or (merge.closed and merge.started and not self._items):
            raise StopIteration  # the end, or the query was closed
        size = max(1, self._page_size or self._default_request_limit or DEFAULT_BUFFERED_ITEMS)
        while len(self._items) < size:
            try:
                self._items.append(merge.next_as(_item_only))
            except StopIteration:
                break
        items, self._items = self._items, []
        page: dict[str, Any] = {
            ITEMS: items,
            CAMEL_COUNT: len(items),
            SCANNED_COUNT: merge.total_scanned_count - self._scanned_reported,
        }
        self._scanned_reported = merge.total_scanned_count
        consumed = merge.total_consumed_capacity
        if consumed is not None:
            page[CONSUMED_CAPACITY] = {
                CAPACITY_UNITS: consumed - self._consumed_reported,
                TABLE_NAME: self._scope.table,
            }
            self._consumed_reported = consumed
        cursor = self.last_evaluated_key
        if cursor is not None:
            page[LAST_EVALUATED_KEY] = cursor
        self._is_last_page = cursor is None or merge.closed
        return page

    def next(self) -> dict[str, Any]:
        return self.__next__()

    @property
    def key_names(self) -> Iterable[str]:
        """The attributes of an item's key: the table's, plus the index's for an index query."""
        return self._key_names

    @property
    def page_size(self) -> int | None:
        """The ``page_size`` given to the query (else its ``limit``), as in PynamoDB."""
        return self._page_size

    @page_size.setter
    def page_size(self, page_size: int | None) -> None:
        self._page_size = page_size
        if self._shard_query is not None:
            limit = page_size if page_size is not None else self._default_request_limit
            self._shard_query.page_size = limit

    @property
    def last_evaluated_key(self) -> dict[str, Any] | str | None:
        """The merged cursor: resumes right after the last item returned; ``None`` where
        PynamoDB's would be ``None`` (see :meth:`MergedResultIterator.last_evaluated_key`).

        A dict of JSON types; the page token (a ``str``, see :attr:`next_page_token`) for a
        model whose tokens are signed (``Sharding(cursor_secret=...)``).
        """
        if not self._merge.started:
            return self._given_cursor
        state = self._resume_state()
        if state is None:
            return None
        if self._tokens is not None and self._tokens.secrets:
            return self._tokens.encode(state)
        return encode_cursor(self._scope, state)

    @property
    def next_page_token(self) -> str | None:
        """The compact, URL-safe form of the cursor; ``None`` exactly when
        :attr:`last_evaluated_key` is.

        Pass it back as ``last_evaluated_key`` to resume right after the last item returned.
        It holds no table or model name, and is signed when the model has a ``cursor_secret``.

        .. versionadded:: 0.1.0
        """
        tokens = self._tokens
        if tokens is None:
            msg = f"{self._scope.model}: this query has no page token (it was not built by merged_query)."
            raise CursorError(msg)
        merge = self._merge
        if not merge.started:
            if isinstance(self._given_cursor, str):
                return self._given_cursor
            return None if self._given_state is None else tokens.encode(self._given_state)
        state = self._resume_state()
        return None if state is None else tokens.encode(state)

    def _resume_state(self) -> CursorState | None:
        """Where a resumed query starts, or ``None`` where a plain PynamoDB query of the same
        items would have no ``last_evaluated_key``.

        PynamoDB's ``ResultIterator`` gives DynamoDB's ``LastEvaluatedKey`` once a page is used
        up, and DynamoDB gives one for every page that stopped on its ``Limit`` (the query's
        ``page_size``, else its ``limit``), even when no item follows. Without a filter a plain
        query's pages are the items returned, ``page_size`` at a time: after ``r`` items it has
        a cursor when ``r`` is a multiple of the page size, otherwise only when an item follows.
        A filter hides where DynamoDB's ``Limit`` cut the items it evaluated: a query with a
        page size then has a cursor until a ``next()`` found the end.
        """
        merge = self._merge
        state, remaining = merge.state()
        if merge.exhausted:
            return None  # a next() found the end: a plain query's last page has no key
        if merge.returned == 0:
            return state if remaining else None
        size = self._plain_page_size
        if size is not None and (self._filtered or merge.returned % size == 0):
            return state
        if not remaining:
            return None
        try:
            left = merge.items_left()
        except Exception:  # a cursor is never wrong: resuming reads what is left
            left = True
        return state if left else None

    def read_ahead_for_cursor(self) -> None:
        """Read ahead now where :attr:`last_evaluated_key` would (one request per shard whose
        next page is not held), so that it then answers from the answer kept, sending nothing.
        A request that fails is left to the property (which then gives the cursor)."""
        merge = self._merge
        if merge.returned == 0 or not merge.read_ahead_due():
            return
        size = self._plain_page_size
        if size is not None and (self._filtered or merge.returned % size == 0):
            return  # a cursor whatever follows
        with contextlib.suppress(Exception):  # the property then gives the cursor, never wrong
            merge.items_left()

    @property
    def total_scanned_count(self) -> int:
        """The ``ScannedCount`` of every shard page taken into the merge."""
        return self._merge.total_scanned_count


def _item_only(shard: int, item: RawItem) -> RawItem:
    return item


class MergedResultIterator(Iterator[_M]):
    """The result of a merged query: model instances with logical keys, in sort-key order.

    It has the surface of PynamoDB's ``ResultIterator``: ``last_evaluated_key``,
    ``total_count``, and ``page_iter`` (a :class:`MergedPageIterator`, with
    ``total_scanned_count``, ``key_names``, ``page_size`` and the raw pages). Nothing is sent
    before the first item is asked for. Close it (or use it as a context manager) to cancel
    the prefetched pages of a query you stop reading early; garbage collection does the same.

    ``last_evaluated_key`` is ``None`` exactly where ``ResultIterator``'s is over the same
    items (see :attr:`last_evaluated_key`); otherwise it is a cursor (a dict of JSON types)
    that resumes right after the last item returned.

    A ``next()`` that raised (a shard's request failed, after botocore's retries) can be called
    again: it sends the failed request again and carries on where it stopped, like
    ``ResultIterator``; an error never ends the iteration early.
    """

    def __init__(
        self,
        model: type[_M],
        merge: ShardMerge,
        scope: CursorScope,
        *,
        given_cursor: dict[str, Any] | str | None,
        key_names: Sequence[str] = (),
        page_size: int | None = None,
        shard_query: _ShardQuery | None = None,
        tokens: TokenCodec | None = None,
        given_state: CursorState | None = None,
        partial: bool = False,
        filtered: bool = False,
    ) -> None:
        self._model = model
        self._from_raw_data: Callable[[dict[str, Any]], _M] = model.from_raw_data
        if partial:  # a projection that left out the key: full puts of these items are refused
            self._from_raw_data = lambda raw: mark_partial(model.from_raw_data(raw))
        self._merge = merge
        self.page_iter = MergedPageIterator(
            merge, scope, given_cursor=given_cursor, key_names=key_names, page_size=page_size,
            shard_query=shard_query, tokens=tokens, given_state=given_state, filtered=filtered,
        )

    def __iter__(self) -> MergedResultIterator[_M]:
        return self

    def __next__(self) -> _M:
        return self._merge.next_as(self._instance)

    def holds_next_item(self) -> bool:
        """Whether the next ``next()`` returns an item already held, without a request (the
        async result takes such items without leaving the event loop's own code)."""
        return self._merge.holds_next_item()

    def may_run_dry(self) -> bool:
        """Whether the next ``next()`` may leave no item held (then :meth:`read_ahead_for_cursor`
        may send requests)."""
        return self._merge.may_run_dry()

    def read_ahead_for_cursor(self) -> None:
        """Do now the read-ahead :attr:`last_evaluated_key` would do (the async result calls it
        after each item, where it can await, so that its property answers as this one)."""
        self.page_iter.read_ahead_for_cursor()

    def _instance(self, shard: int, raw: RawItem) -> _M:
        return self._from_raw_data(raw)

    def next(self) -> _M:
        return self.__next__()

    @property
    def last_evaluated_key(self) -> dict[str, Any] | str | None:
        """The cursor to pass back as ``last_evaluated_key``, or ``None``, as PynamoDB's.

        Before the first item it is the cursor the query was given (or ``None``). Once a
        ``next()`` found the end of the data (``StopIteration`` before ``limit``) it is ``None``.
        Otherwise, after ``r`` items, with ``P`` the query's ``page_size`` (else its ``limit``):

        - an item follows: a cursor;
        - no item follows and ``r`` is a multiple of ``P``: a cursor, and the page it resumes
          is empty, because DynamoDB gives a ``LastEvaluatedKey`` for a page that stopped on its
          ``Limit`` even on the last item (``limit=20`` over exactly 20 items);
        - no item follows otherwise (or without ``page_size`` and ``limit``): ``None``.

        One difference: with a ``filter_condition`` (or a polymorphic model's class filter)
        and a ``page_size`` or ``limit``, it is a cursor until a ``next()`` found the end, where
        PynamoDB's is ``None`` if DynamoDB's last page happened to end short of its ``Limit``:
        the filter hides from the merge where DynamoDB cut the items it evaluated. The page it
        resumes is then empty, with ``None``. Whether an item follows may cost one request per
        shard whose next page was not read yet; the answer is kept until the next item.
        """
        return self.page_iter.last_evaluated_key

    @property
    def next_page_token(self) -> str | None:
        """The cursor as a compact URL-safe ``str``, ``None`` exactly when
        :attr:`last_evaluated_key` is; see :attr:`MergedPageIterator.next_page_token`.

        .. versionadded:: 0.1.0
        """
        return self.page_iter.next_page_token

    def _items_left(self) -> bool:
        """Whether an item follows the last one returned (reading ahead if the pages held
        cannot tell; a request that fails counts as items left)."""
        merge = self._merge
        if merge.exhausted:
            return False
        if not merge.started:
            return True
        if not merge.state()[1]:
            return False
        try:
            return merge.items_left()
        except Exception:  # "maybe" keeps a cursor, which is never wrong
            return True

    @property
    def total_count(self) -> int:
        """The ``Count`` of every page taken into the merge (prefetched pages excluded)."""
        return self._merge.total_count

    @property
    def total_scanned_count(self) -> int:
        """The ``ScannedCount`` of every page taken into the merge (as ``page_iter``'s)."""
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


#: With ``Sharding(page_reads="fewest_items")``: below this many items per shard of a
#: ``limit``, a shard read again is asked for at least its first share, not a share of the few
#: items still wanted (which would cost a round trip after another).
SHARE_MIN_PER_SHARD = 5
#: ``page_reads="one_round_trip"``: the chance that some shard of a page needs a second request.
ONE_ROUND_TRIP_MISS = 0.05


@functools.lru_cache(maxsize=1024)
def one_round_trip_share(limit: int, shards: int) -> int:
    """Items to ask each of ``shards`` shards for, so that a page of ``limit`` items of randomly
    spread data needs a second request to some shard with a chance of at most
    :data:`ONE_ROUND_TRIP_MISS`.

    A shard is read again when it holds at least as many of the page's first ``limit - 1``
    items as it was asked for; that count is binomial (``limit - 1`` items, ``1 / shards``
    each). The share is the smallest count whose upper tail is at most the miss chance divided
    by the shards (the union bound), never more than ``limit``.
    """
    shards = max(1, shards)
    if shards == 1 or limit <= 1:
        return max(1, limit)
    n, p = limit - 1, 1.0 / shards
    bound = ONE_ROUND_TRIP_MISS / shards
    tail, pmf = 1.0, (1.0 - p) ** n  # P(X >= 0) and P(X = 0)
    if pmf < 1e-200:  # thousands of items a shard: the normal approximation, exact enough
        spread = math.sqrt(n * p * (1.0 - p))
        z = statistics.NormalDist().inv_cdf(1.0 - bound)
        return min(limit, math.ceil(n * p + z * spread + 0.5))
    for k in range(n + 1):
        tail -= pmf  # now P(X >= k + 1)
        if tail <= bound:
            return min(limit, k + 1)
        pmf *= (n - k) / (k + 1) * p / (1.0 - p)
    return limit


def first_share(limit: int, shards: int, page_reads: str = "one_round_trip") -> tuple[float, int]:
    """The ``(share_slack, share_extra)`` of a merged query of ``limit`` items over ``shards``:
    the merge first asks each shard for ``ceil(share_slack x limit / shards) + share_extra``.

    ``"one_round_trip"``: :func:`one_round_trip_share`. ``"fewest_items"``: 1.5 x each shard's
    share, so that a page reads about ``1.5 x limit + shards`` items.
    """
    if page_reads == "fewest_items":
        return SHARE_SLACK, 0
    lean = -(-int(SHARE_SLACK * limit) // max(1, shards))
    return SHARE_SLACK, one_round_trip_share(limit, shards) - lean


def default_page_size(shard_count: int, limit: int | None) -> int:
    """Each shard's ``Limit`` when the caller gives no ``page_size``: ``limit``, capped for memory.

    The cap keeps the pages a merged query holds, one current and one prefetched per shard,
    within :data:`DEFAULT_BUFFERED_ITEMS` items in all (16,000 items a page for 1 shard, 1,000
    for 16, 100 for 160), but never takes a page below 100 items, so that many shards still
    read efficiently. Above 160 shards that floor wins and the pages held grow with the shard
    count, 200 items per shard: 32,200 items at 161 shards, 200,000 at 1,000.

    Args:
        shard_count: the shards the query reads.
        limit: the caller's ``limit`` (merged items wanted), or ``None``.

    Returns:
        The ``Limit`` of each shard's request: at least 1, never more than ``limit``.
    """
    bound = max(100, DEFAULT_BUFFERED_ITEMS // (2 * max(1, shard_count)))
    return bound if limit is None else min(limit, bound)


def default_workers(model: type[Any], shard_count: int) -> int:
    """Threads of a merged query: ``Sharding(max_workers=)``, else ``min(32, shard_count)``."""
    configured = shard_manager(model).max_workers
    workers = configured if configured is not None else min(MAX_DEFAULT_WORKERS, shard_count)
    return max(1, min(workers, shard_count))


def _check_pool(model: type[Any], workers: int) -> None:
    """Warn once per model when its merged reads may run more requests than it has connections.

    The requests in flight are this read's ``workers`` plus those of the model's other merged
    queries still open in the process (web servers run many at once), at most the size of the
    shared fan-out pool.
    """
    pool = getattr(model.Meta, "max_pool_connections", None)
    if pool is None or on_event_loop() is not None:  # on an event loop: the loop's connections
        return
    with _warned_lock:  # _track adds under it: a set another thread adds to cannot be iterated
        merges = list(_open_merges.get(model, ()))
    others = sum(merge.max_workers for merge in merges if merge.started and not merge.closed)
    concurrent = min(fanout_threads(), workers + others)
    if concurrent <= pool:
        return
    key = (model.__module__, model.__qualname__)
    with _warned_lock:
        if key in _warned_pools:
            return
        _warned_pools.add(key)
    if others:
        what = (f"its merged reads run up to {concurrent} requests at once ({workers} for this one, "
                f"the rest for the other queries still open)")
    else:
        what = f"a merged query runs {concurrent} threads"
    msg = (
        f"{model.__name__}: {what} but Meta.max_pool_connections is {pool}, so threads wait for a "
        f"connection; set Meta.max_pool_connections = {concurrent} or lower Sharding(..., "
        f"max_workers=...) or the shared pool (pynamodb_sharding.set_fanout_threads)."
    )
    warnings.warn(msg, FanoutPoolWarning, stacklevel=4)


#: The merged queries of each model that may still send requests (closed or collected: gone).
_open_merges: weakref.WeakKeyDictionary[type[Any], weakref.WeakSet[ShardMerge]] = weakref.WeakKeyDictionary()


def _track(model: type[Any], merge: ShardMerge) -> None:
    if on_event_loop() is not None:  # an aquery's requests use its loop's connections, not the pool
        return
    with _warned_lock:
        merges = _open_merges.get(model)
        if merges is None:
            merges = _open_merges[model] = weakref.WeakSet()
        merges.add(merge)


class _ShardQuery:
    """Sends one page request of one shard, paced by the logical query's shared rate limiter,
    to the table or one of its read replicas (:func:`~pynamodb_sharding._replicas.spread`).

    ``replicas=False``: the table only (a query of a key whose items a job is moving reads the
    places they leave before the places they reach, which only holds on one copy).
    """

    def __init__(self, model: type[Any], rate_limit: float | None, *, replicas: bool = True,
                 **query_kwargs: Any) -> None:
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
        # value the key condition admits has nothing left (see _closed_end).
        forward = query_kwargs.get("scan_index_forward") is not False
        self._end = (_closed_end(query_kwargs.get("range_key_condition"), forward)
                     if query_kwargs.get("index_name") is None else None)
        self._sort_name = range_keyname(model)

    def _read_to_the_end(self, start: RawKey | None) -> bool:
        """``start`` sits on the last value the key condition admits."""
        end, name = self._end, self._sort_name
        if end is None or start is None or name is None or name not in start:
            return False
        resumed = start[name]
        return set(resumed) == set(end) and sort_value(resumed) == sort_value(end)

    @property
    def page_size(self) -> int | None:
        """The ``Limit`` of the requests sent from now on."""
        limit: int | None = self._kwargs.get("limit")
        return limit

    @page_size.setter
    def page_size(self, limit: int | None) -> None:
        self._kwargs["limit"] = limit

    def __call__(self, hash_value: Any, start: RawKey | None, limit: int | None = None) -> dict[str, Any]:
        if self._read_to_the_end(start):  # DynamoDB would refuse that start key; nothing follows it
            return {ITEMS: [], CAMEL_COUNT: 0, SCANNED_COUNT: 0}
        limiter = self._limiter
        if limiter is not None:
            limiter.acquire()
        kwargs = self._kwargs if limit is None else {**self._kwargs, "limit": limit}
        partition = isinstance(hash_value, IndexPartition)
        if isinstance(hash_value, IndexPartition):  # a multi-attribute index key: value and shard
            given = kwargs.get("range_key_condition")
            kwargs = {**kwargs, "range_key_condition": hash_value.condition if given is None
                      else hash_value.condition & given}
            hash_value = hash_value.value
        window = self._window
        connection = self._connection

        def send_to(copy: str | None, fail_over: bool) -> dict[str, Any]:
            sent = kwargs if copy is None else {**kwargs, "index_name": copy}

            def send() -> dict[str, Any]:
                with failing_over(fail_over):  # on the thread that sends it (a hedge has its own)
                    return parsed_quickly(connection.connection.client,
                                          lambda: connection.query(hash_value, exclusive_start_key=start, **sent))

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
_first_reads: weakref.WeakSet[_ReadFirst] = weakref.WeakSet()


def _reset_locks_in_child() -> None:
    """Give a forked child fresh locks: a thread of the parent may have held one at the fork."""
    global _warned_lock  # replaced, not mutated: the old one may be held forever
    _warned_lock = threading.Lock()
    for limiter in list(_rate_limiters):
        limiter._lock = threading.Lock()
    for read in list(_first_reads):
        read._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_reset_locks_in_child)


def _range_end(model: type[Any], condition: Condition | None, index_name: str | None) -> Any:
    """The largest value of the range key that a table query's key ``condition`` admits, as
    stored (``"1456444800"``, a datetime's text), when the model declares ``written_at`` and the
    condition bounds it from above (``<``, ``<=``, ``=``, ``between``); else ``None``."""
    written = shard_manager(model).written_at
    if written is None or condition is None or index_name is not None:
        return None
    name = model.get_attributes()[written.attribute].attr_name
    operands = condition.values
    path = operands[0] if operands else None
    if getattr(path, "path", None) != [name]:
        return None
    if condition.operator in ("<", "<=", "=") and len(operands) == 2:
        bound = operands[1]
    elif condition.operator == "BETWEEN" and len(operands) == 3:
        bound = operands[2]
    else:
        return None
    value = getattr(bound, "value", None)  # a Value operand: {"N": "..."} or {"S": "..."}
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((_, stored),) = value.items()
    return stored


def _closed_end(condition: Condition | None, forward: bool) -> Mapping[str, Any] | None:
    """The last value a table query's key ``condition`` admits in the reading direction, when it
    is a bound the condition includes (``<=`` or ``BETWEEN``'s upper bound read forward, ``>=``
    or its lower bound read backward); else ``None``.

    A shard whose resume key sits on that value has nothing left, and DynamoDB refuses the
    request ("The provided starting key does not match the range key predicate"), so
    :class:`_ShardQuery` does not send it. Only for table queries: their sort key is unique
    within a partition.
    """
    if condition is None:
        return None
    operands = condition.values
    if condition.operator == "BETWEEN" and len(operands) == 3:
        bound = operands[2] if forward else operands[1]
    elif condition.operator == ("<=" if forward else ">=") and len(operands) == 2:
        bound = operands[1]
    else:
        return None
    value = getattr(bound, "value", None)
    return value if isinstance(value, dict) and len(value) == 1 else None


class QueryTrace(Protocol):
    """What an observer (:mod:`pynamodb_sharding.contrib.otel`) follows of one merged read."""

    def shard_request(self, shard: int, call: Callable[[], _T]) -> _T:
        """Run one shard request (on a fan-out thread) inside the observer's context."""

    def end(self, error: BaseException | None = None) -> None:
        """The merged read is over (idempotent)."""


#: Called at the start of every merged query and count when set (``contrib.otel.instrument``):
#: ``observer(model, index_name, shards, operation)`` returns the read's :class:`QueryTrace`.
query_observer: Callable[[type[Any], str | None, int, str], QueryTrace] | None = None


def _traced(trace: QueryTrace | None, shard: int, call: Callable[[], _T]) -> _T:
    return call() if trace is None else trace.shard_request(shard, call)


@attrs.frozen
class IndexPartition:
    """One partition of a ``layout="multi_attribute"`` index: the queried value, and the
    equality on the shard attribute that completes the index's partition key."""

    value: str
    condition: Condition


@attrs.frozen
class _QueryPlan:
    """How one logical query maps onto DynamoDB queries."""

    scope: CursorScope
    hash_name: str  # the attribute the key condition names (the table's or the index's)
    hash_values: Mapping[int, Any]  # shard -> the value its requests query
    key_names: tuple[str, ...]
    sort_name: str | None
    hash_value: Callable[[int], object]
    #: The number attribute a multi-attribute index stores the shard in (start keys hold it).
    shard_name: str | None = None
    #: The streams read before every other one, whose items yield to copies in the others: what
    #: items may be moving out of (a bare legacy key or value, shards a job empties).
    first_reads: frozenset[int] = frozenset()


def _plan(
    model: type[Any],
    hash_key: Any,
    shards: Sequence[int] | None,
    index_name: str | None,
    consistent_read: bool,
    forward: bool,
    *,
    until: Any = None,
) -> _QueryPlan:
    """``shards`` defaults to every shard ``read_shards`` names for a sharded table or index;
    with ``until`` (the end of a table query's range on a ``written_at`` range key), without
    the shards first used after it."""
    given = shards
    if shards is None and until is not None and index_name is None:
        shards = shard_manager(model).read_shards_until(hash_key, until)
    elif shards is None and (index_name is None or _is_sharded_index(model, index_name)):
        shards = shard_manager(model).read_targets(hash_key)  # with the bare legacy key, if any
    shards = shards or ()
    meta = table_connection(model).get_meta_table()
    table_hash = meta.hash_keyname
    table = model.Meta.table_name
    hash_name = table_hash
    sort_name = meta.range_keyname
    if index_name is not None:
        index = indexes(model).get(index_name)
        if index is None:
            msg = (
                f"{model.__name__}.query: the model has no index {index_name!r}; "
                f"use one of {sorted(indexes(model))} or index_name=None."
            )
            raise UnknownIndexError(msg)
        if consistent_read and isinstance(index, GlobalSecondaryIndex):
            msg = (
                f"{model.__name__}.{type(index).__name__}({index_name!r}): global secondary indexes "
                f"do not support strongly consistent reads; pass consistent_read=False, or query "
                f"the table itself for a consistent read."
            )
            raise ConsistentIndexReadError(msg)
        hash_name = meta.get_index_hash_keyname(index_name)
        sort_name = meta.get_index_range_keyname(index_name)  # type: ignore[no-untyped-call]
    key_names = tuple(meta.get_key_names(index_name))  # type: ignore[no-untyped-call]
    index = sharded_index(model, index_name)
    if index is not None:
        # A sharded global index: one query per index shard of the logical value.
        index_manager = index.manager
        shard_name = index.shard_attr_name
        if shard_name is not None and index_manager.legacy_unsharded:
            raise backfill_pending(model, index)
        # With the bare value too while the index may hold bare entries (legacy_unsharded).
        index_shards = given if given is not None else index_manager.read_targets(hash_key)
        scope = CursorScope(model.__name__, table, {"S": hash_key}, index_name, forward)
        if shard_name is not None:
            def partition(shard: int) -> IndexPartition:
                index_manager.physical_key(hash_key, shard)  # refuses a shard the value cannot have
                number = Path([shard_name]) == Value({"N": str(shard)})
                return IndexPartition(hash_key, number)

            def logical_value(shard: int) -> object:
                index_manager.physical_key(hash_key, shard)
                return hash_key

            partitions = {shard: partition(shard) for shard in index_shards}
            return _QueryPlan(scope, hash_name, partitions, (*key_names, shard_name), sort_name,
                              logical_value, shard_name)
        values = {shard: index_manager.physical_key(hash_key, shard) for shard in index_shards}
        return _QueryPlan(scope, hash_name, values, key_names, sort_name,
                          lambda shard: index_manager.physical_key(hash_key, shard),
                          first_reads=frozenset(shard for shard in values if shard == LEGACY_SHARD))
    if hash_name != table_hash:
        # An index keyed by another attribute is not sharded: one plain query, labelled shard 1.
        attribute = index_hash_attribute(indexes(model)[index_name or ""])
        value = attribute.serialize(hash_key)
        scope = CursorScope(model.__name__, table, {attribute.attr_type: value}, index_name, forward)

        def plain_value(shard: int) -> object:
            if shard != 1:
                msg = f"{model.__name__}: an unsharded index query has one stream, not shard {shard}."
                raise ShardKeyError(msg)
            return value

        return _QueryPlan(scope, hash_name, {1: value}, key_names, sort_name, plain_value)
    manager = shard_manager(model)
    hash_values = {shard: manager.physical_key(hash_key, shard) for shard in shards}
    first_reads: set[int] = set()
    if given is None:
        # A job may be moving items out of some shards (the bare key, shards above the count,
        # an older layout's): they are read first, so an item moved while the query runs is
        # seen there or in its new shard, never in neither; a shard the current layout writes
        # too is read twice, as a first-read stream of its own.
        moving = manager.moving_out(hash_key, tuple(shards))
        if moving:
            current = set(manager.read_shards(hash_key)) - set(moving) if not manager.keeps_keys_unique else set(
                range(manager.first_shard, manager.first_shard + manager.shard_count(hash_key)))
            for shard in moving:
                if shard in current:
                    hash_values[FIRST_READ + shard] = hash_values[shard]
                    first_reads.add(FIRST_READ + shard)
                else:
                    first_reads.add(shard)
    scope = CursorScope(model.__name__, table, {"S": hash_key}, index_name, forward)

    def table_value(shard: int) -> object:
        if shard >= FIRST_READ and shard in first_reads:
            return manager.physical_key(hash_key, shard - FIRST_READ)
        return manager.physical_key(hash_key, shard)

    return _QueryPlan(scope, hash_name, hash_values, key_names, sort_name, table_value,
                      first_reads=frozenset(first_reads))


def _copies_of_moving_items(
    model: type[Any], index_name: str | None, table_hash: str, table_sort: str | None,
) -> tuple[Callable[[RawItem], tuple[Any, CopyFlag]], Callable[[RawKey], bool]] | None:
    """For an index query while table items may be moving: what makes two entries copies of
    one item, and whether a start key may be resumed after (``ShardMerge(copies=...,
    resumes_after=...)``); else ``None``.

    A job moves a table item by putting its new copy and deleting the old one in one
    transaction, but a query sees a transaction's writes one by one (read-committed), and an
    index follows its table a moment later: an index query may find both copies, under two
    physical keys of one logical key. Of two entries of one logical primary key at one index
    sort value, the second is then not returned when one of them is a bare legacy item (the
    table is being adopted: ``legacy_unsharded``), when the strategy keeps logical keys
    unique (a second item of one logical key can only be a copy), or when one of them is in a
    shard a job moves items out of (above a random or dynamic key's lowered count), as a table
    query's first reads treat them.
    A bare start key is resumed after only when the cursor says the query returned it
    (``CursorState.returned``): a read may have dropped it as a stale copy before the merge
    (see ``without_stale_bare_copies``), and then its copy is the item.
    """
    if index_name is None:
        return None
    manager = shard_manager(model)
    unique = manager.keeps_keys_unique
    codec = manager.codec

    def decoded(item: RawKey) -> tuple[str, int] | None:
        try:
            return codec.decode(item[table_hash].get("S"))
        except (ShardKeyError, KeyError):  # not this model's key
            return None

    def copies(item: RawItem) -> tuple[Any, CopyFlag]:
        sort = sort_value(item[table_sort]) if table_sort is not None else b""
        key = decoded(item)
        if key is None:  # only equal physical keys are one item
            return (item[table_hash].get("S"), sort), False
        logical, shard = key
        if unique or shard == LEGACY_SHARD:
            return (logical, sort), True
        # Random and dynamic layouts: a copy only in a shard a job moves items out of (above a
        # lowered count), told only when two entries of one identity meet (it reads the count).
        return (logical, sort), lambda: bool(manager.moving_out(logical, (shard,)))

    def resumes_after(start: RawKey) -> bool:
        key = decoded(start)
        return key is not None and key[1] != LEGACY_SHARD

    return copies, resumes_after


def _with_class_filter(model: type[Any], filter_condition: Condition | None) -> Condition | None:
    # As PynamoDB's Model.query: a polymorphic model only reads items of its own classes.
    discriminator = discriminator_attribute(model)
    if discriminator:
        filter_condition &= discriminator.is_in(*discriminator.get_registered_subclasses(model))
    return filter_condition


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
        shards: the shards to read; default ``shard_manager(model).read_shards(hash_key)``.
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
        page_size: each shard request's ``Limit``; default :func:`default_page_size`:
            ``limit``, capped so that the pages held (one current and one prefetched per
            shard) stay within :data:`DEFAULT_BUFFERED_ITEMS` items up to 160 shards, never
            below 100 items a page.
        rate_limit: capacity units per second for the whole logical query.
        max_workers: threads; default ``model.shards.max_workers`` or ``min(32, shard count)``.

    Returns:
        A :class:`MergedResultIterator` of model instances.

    Raises:
        CursorError: ``last_evaluated_key`` is not a cursor of this query.
        UnknownIndexError: the model has no index ``index_name``.
        ConsistentIndexReadError: ``consistent_read`` on a global secondary index.
    """
    forward = scan_index_forward is not False
    range_key_condition = rewrite_condition(model, range_key_condition, Usage.KEY)
    filter_condition = rewrite_condition(model, filter_condition, Usage.FILTER)
    query_options: dict[str, Any] = {
        "range_key_condition": range_key_condition,
        "filter_condition": _with_class_filter(model, filter_condition),
        "consistent_read": consistent_read,
        "index_name": index_name,
        "scan_index_forward": scan_index_forward,
    }
    until = _range_end(model, range_key_condition, index_name)
    early = (_EarlyFirstPages.start(model, hash_key, query_options, attributes_to_get, rate_limit=rate_limit,
                                    limit=limit, page_size=page_size, share_mode=filter_condition is None,
                                    max_workers=max_workers, first_only=until is not None)
             if shards is None and index_name is None and last_evaluated_key is None else None)
    plan = _plan(model, hash_key, shards, index_name, consistent_read, forward, until=until)
    state = CursorState()
    tokens = TokenCodec(plan.scope, plan.key_names, plan.hash_name, shard_manager(model).cursor_secrets(),
                        shard_name=plan.shard_name)
    if last_evaluated_key is not None:
        state = decode_cursor(last_evaluated_key, plan.scope, key_names=plan.key_names,
                              hash_name=plan.hash_name, hash_value=plan.hash_value, secrets=tokens.secrets,
                              shard_name=plan.shard_name)
    starts = {shard: state.positions.get(shard) for shard in plan.hash_values}

    hash_values = dict(plan.hash_values)
    first_reads = plan.first_reads
    if first_reads:
        early = None  # its first page may have been read before the first reads: not used
    size = page_size if page_size is not None else default_page_size(len(hash_values), limit)
    if early is not None:
        send = early.send
        send.page_size = size
    else:
        send = _ShardQuery(model, rate_limit, **query_options, limit=size, replicas=not first_reads,
                           attributes_to_get=with_key_attributes(attributes_to_get, plan.key_names))

    observer = query_observer
    trace = observer(model, index_name, len(hash_values), "query") if observer is not None else None

    # A bare legacy copy that a shard also holds is stale. Without a filter a table query sees
    # both copies and the merge keeps the sharded one; a filter or an index query may see only
    # the stale one, so its bare items are looked up in their shards (see point_reads).
    stale_bare = shard_manager(model).legacy_unsharded and (index_name is not None or filter_condition is not None)
    entries = (index_entries(model, index_name, plan.key_names, attributes_to_get,
                             filtered=filter_condition is not None)
               if stale_bare and index_name is not None else None)

    def current(page: Page) -> Page:
        if not stale_bare or not page.items:
            return page
        items = without_stale_bare_copies(model, page.items, consistent_read=consistent_read, index=entries)
        if items is page.items:
            return page
        return attrs.evolve(page, items=items, count=page.count - (len(page.items) - len(items)))

    def fetch_page(shard: int, start: RawKey | None) -> Page:
        if first_reads:
            read_first.wait()
            first = read_first.take(shard, start) if shard in first_reads else None
            if first is not None:
                return first  # current() was applied before the other streams were read
        sent = early.take(shard, start, hash_values[shard]) if early is not None else None
        if sent is not None:
            return current(_page(_traced(trace, shard, sent.result)))
        data = _traced(trace, shard, lambda: send(hash_values[shard], start))
        return current(_page(data))

    def fetch_share(shard: int, start: RawKey | None, size: int) -> Page:
        sent = early.take(shard, start, hash_values[shard]) if early is not None else None
        if sent is not None:
            return current(_page(_traced(trace, shard, sent.result)))
        return current(_page(_traced(trace, shard, lambda: send(hash_values[shard], start, size))))

    def send_first(shard: int, start: RawKey | None) -> dict[str, Any]:
        return _traced(trace, shard, lambda: send(hash_values[shard], start))

    read_first = _ReadFirst(send_first, {shard: starts.get(shard) for shard in first_reads}, limit,
                            current=current if stale_bare else None)

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
    identity: Callable[[RawItem], Any] | None = None
    meta = table_connection(model).get_meta_table()
    table_sort = meta.range_keyname
    if first_reads and sharded_index(model, index_name) is not None:
        # A sharded index's bare stream: its entries are items of any table key, and an item
        # rewritten (``migrate reindex``) while the query runs may be seen in both streams.
        table_hash = meta.hash_keyname

        def identity(item: RawItem) -> Any:
            return (sort_value(item[table_hash]),
                    sort_value(item[table_sort]) if table_sort is not None else b"")
    elif first_reads and table_sort != sort_name:  # an index query: one item is one table key
        def identity(item: RawItem) -> Any:
            return sort_value(item[table_sort]) if table_sort is not None else b""
    moving = _copies_of_moving_items(model, index_name, meta.hash_keyname, table_sort)
    copies, resumes_after = moving if moving is not None else (None, None)
    # With a limit and no page size: each shard is asked for about its share, not the whole
    # limit, when shares are large enough that a shard rarely needs a second round trip. Not
    # with a filter: DynamoDB's Limit counts items evaluated, so small pages of a selective
    # filter would take many more round trips.
    share = (fetch_share if limit is not None and page_size is None and not first_reads
             and filter_condition is None else None)
    # How much of the limit each shard is first asked for: Sharding(page_reads=...).
    page_reads = shard_manager(model).page_reads
    slack, extra = first_share(limit, len(starts), page_reads) if limit is not None else (SHARE_SLACK, 0)
    if share is not None and limit is not None and -(-int(slack * limit) // max(1, len(starts))) + extra > size:
        # A share above the memory bound's page: a long read, which streams pages of that size
        # with each shard's next page fetched ahead, as without a limit.
        share = None
    merge = ShardMerge(fetch_page, starts, sort_key=sort_key, key_names=plan.key_names, forward=forward,
                       limit=limit, max_workers=workers, shadowed=first_reads, identity=identity, copies=copies,
                       resumes_after=resumes_after, returned=state.returned, also_returned=state.also_returned,
                       fetch_share=share, share_slack=slack, share_extra=extra, share_cap=size,
                       refill_first_share=(page_reads == "fewest_items" and limit is not None
                                           and limit < SHARE_MIN_PER_SHARD * len(starts)),
                       on_close=None if trace is None else trace.end)
    if trace is not None:
        weakref.finalize(merge, trace.end)  # a merge dropped unread ends its trace too
    _track(model, merge)
    return MergedResultIterator(model, merge, plan.scope, given_cursor=last_evaluated_key,
                                key_names=plan.key_names, page_size=page_size if page_size is not None else limit,
                                shard_query=send, tokens=tokens,
                                given_state=state if last_evaluated_key is not None else None,
                                partial=leaves_out_keys(attributes_to_get, shard_manager(model).key_names),
                                filtered=query_options["filter_condition"] is not None)


class _EarlyFirstPages:
    """The first pages of the shards a merged query probably reads, asked for while the shards
    it does read are being found.

    A ``DynamicShards`` model reading fresh counts reads the key's metadata item before a
    merged query knows its shards. The shards this process last saw (shard 1 for a key it
    never read: every read covers it) are queried at the same time, so a query costs one
    round trip when the count has not changed. The shards read are always the ones the
    metadata read returned: an early page is used only by the merge's first request of its
    shard at its physical key, and the page of a shard the merge does not read is dropped.
    Pages are sized for the count expected (the merge handles a page of any size); at most
    the merge's ``max_workers`` are sent early, and only shard 1 for a query whose range may
    let it skip shards (``written_at``).
    """

    def __init__(self, send: _ShardQuery, pages: dict[int, tuple[Any, Future[dict[str, Any]]]]) -> None:
        self.send = send
        self._pages = pages
        self._lock = threading.Lock()

    @classmethod
    def start(
        cls, model: type[Any], hash_key: Any, query_options: Mapping[str, Any],
        attributes_to_get: Iterable[Any] | None, *, rate_limit: float | None, limit: int | None,
        page_size: int | None, share_mode: bool, max_workers: int | None, first_only: bool,
    ) -> _EarlyFirstPages | None:
        """Send the likely shards' first pages now when finding the shards costs a request,
        else ``None``. ``first_only``: the query may skip shards first used after its range
        (``written_at``), so only the first shard, which every read covers, is sent early."""
        manager = shard_manager(model)
        early = manager.early_read_shard(hash_key)
        if early is None:
            return None
        first, likely = early
        key_names = tuple(table_connection(model).get_meta_table().get_key_names(None))  # type: ignore[no-untyped-call]
        send = _ShardQuery(model, rate_limit, **query_options, limit=page_size,
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
        executor = fanout_executor()
        pages = {}
        for shard in shards[:1 if first_only else max(1, workers)]:
            hash_value = manager.physical_key(hash_key, shard)
            pages[shard] = (hash_value, executor.submit(send, hash_value, None, size))
        return cls(send, pages)

    def take(self, shard: int, start: RawKey | None, hash_value: object) -> Future[dict[str, Any]] | None:
        """The early page of ``shard`` if this is the merge's first request of it, once."""
        if start is not None:
            return None
        with self._lock:
            sent = self._pages.get(shard)
            if sent is None or sent[0] != hash_value:
                return None
            del self._pages[shard]
        return sent[1]


def _page(data: Mapping[str, Any]) -> Page:
    consumed = data.get(CONSUMED_CAPACITY, {}).get(CAPACITY_UNITS)
    return Page(data.get(ITEMS, []), data.get(LAST_EVALUATED_KEY), data[CAMEL_COUNT], data[SCANNED_COUNT],
                consumed_capacity=float(consumed) if consumed is not None else None)


class _ReadFirst:
    """Reads the streams items may be moving out of before any other stream is queried.

    A job moves items out of some streams (a ``legacy_unsharded`` key's bare key, the shards
    above a key's lowered count, an older layout's shards, an index's bare value) into others
    while queries run. A query that read the new place before an item arrived there and the old
    place after it left would miss the item; reading the old places first (each to its end, or
    ``limit`` items) means an item is either seen there or already in its new place when that
    is read, where the merge returns it once (the copy outside the first reads wins). Every page
    request of the query waits until these reads are done.
    """

    def __init__(self, send: Callable[[int, RawKey | None], dict[str, Any]], starts: Mapping[int, RawKey | None],
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

    def take(self, shard: int, start: RawKey | None) -> Page | None:
        """The page that was read, for the first request of ``shard``'s stream (from ``start``)."""
        with self._lock:
            if shard in self._handed or self._pages is None or start != self._starts.get(shard):
                return None
            self._handed.add(shard)
            return self._pages.get(shard)

    def _read(self, shard: int, start: RawKey | None) -> Page:
        items: list[RawItem] = []
        count = scanned = 0
        consumed: float | None = None
        while True:
            page = _page(self._send(shard, start))
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


def _is_sharded_index(model: type[Any], index_name: str) -> bool:
    index = indexes(model).get(index_name)
    if index is None:
        return True  # _plan reports the unknown index
    meta = table_connection(model).get_meta_table()
    return bool(meta.get_index_hash_keyname(index_name) == meta.hash_keyname)


def merged_count(
    model: type[Any], hash_key: Any, *, shards: Sequence[int] | None = None,
    range_key_condition: Condition | None = None, filter_condition: Condition | None = None,
    consistent_read: bool = False, index_name: str | None = None, limit: int | None = None,
    rate_limit: float | None = None, max_workers: int | None = None,
) -> int:
    """Count the items of ``hash_key`` over every shard, querying the shards in parallel.

    The arguments are PynamoDB's ``Model.count``'s (with a hash key). ``limit`` caps the total:
    the count stops asking for pages once it is reached.

    Raises:
        UnknownIndexError: the model has no index ``index_name``.
        ConsistentIndexReadError: ``consistent_read`` on a global secondary index.
    """
    index = sharded_index(model, index_name)
    manager = shard_manager(model) if index is None else index.manager
    moving = manager.legacy_unsharded or (
        shards is None and index_name is None and bool(manager.moving_out(hash_key)))
    if shards is None and moving:
        # An item may be moving to another shard meanwhile (a legacy item, a reshard or a
        # compaction): count what a merged query returns, each item once (the same reads:
        # DynamoDB charges what it reads, not sends).
        merged = merged_query(model, hash_key, range_key_condition=range_key_condition,
                              filter_condition=filter_condition, consistent_read=consistent_read,
                              index_name=index_name, limit=limit, rate_limit=rate_limit,
                              attributes_to_get=list(shard_manager(model).key_names), max_workers=max_workers)
        with merged:
            return sum(page[CAMEL_COUNT] for page in merged.page_iter)
    range_key_condition = rewrite_condition(model, range_key_condition, Usage.KEY)
    filter_condition = rewrite_condition(model, filter_condition, Usage.FILTER)
    plan = _plan(model, hash_key, shards, index_name, consistent_read, True,
                 until=_range_end(model, range_key_condition, index_name))
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
    observer = query_observer
    trace = observer(model, index_name, len(values), "count") if observer is not None else None
    submitter = BoundedSubmitter(workers)
    futures = [
        submitter.submit(_traced, trace, shard, functools.partial(count_shard, value))
        for shard, value in plan.hash_values.items()
    ]
    try:
        for future in futures:
            future.result()
    except BaseException as exc:
        done.set()
        submitter.cancel_queued()
        for future in futures:
            future.cancel()
        if trace is not None:
            trace.end(exc)
        raise
    if trace is not None:
        trace.end()
    return min(total, limit) if limit is not None else total


def count_by_shard(
    model: type[Any],
    hash_key: Any,
    *,
    shards: Sequence[int] | None = None,
    page_size: int | None = None,
    consistent_read: bool = False,
    max_workers: int | None = None,
) -> dict[int, tuple[int, ...]]:
    """Count the items of ``hash_key`` shard by shard, page by page, querying the shards in parallel.

    The requests are :func:`merged_count`'s: a shard's item count is the sum of its pages'
    counts, and the number of its pages is the requests it took. With the default
    ``page_size`` each request's ``Limit`` is the one :func:`merged_query` sends, so the pages
    are those a full merged query of the key reads (what ``pynamodb-sharding status`` reports).

    Args:
        model: the sharded model class.
        hash_key: the logical hash key.
        shards: the shards to count; default ``shard_manager(model).read_shards(hash_key)``.
        page_size: each request's ``Limit``; default a merged query's for that many shards.
        consistent_read: strongly consistent reads.
        max_workers: threads; default ``model.shards.max_workers`` or ``min(32, shard count)``.

    Returns:
        Each shard's ``Count`` of every page, in the order the pages came; a shard has at least
        one page, an empty shard ``(0,)``.

    .. versionadded:: 0.1.0
    """
    plan = _plan(model, hash_key, shards, None, consistent_read, True)
    if not plan.hash_values:
        return {}
    send = _ShardQuery(
        model,
        None,
        filter_condition=_with_class_filter(model, None),
        consistent_read=consistent_read,
        limit=page_size if page_size is not None else default_page_size(len(plan.hash_values), None),
        select="COUNT",
    )

    def count_shard(value: Any) -> tuple[int, ...]:
        counts: list[int] = []
        start: RawKey | None = None
        while True:
            data = send(value, start)
            counts.append(int(data[CAMEL_COUNT]))
            start = data.get(LAST_EVALUATED_KEY)
            if start is None:
                return tuple(counts)

    workers = max_workers if max_workers is not None else default_workers(model, len(plan.hash_values))
    _check_pool(model, workers)
    submitter = BoundedSubmitter(workers)
    futures = {shard: submitter.submit(count_shard, value) for shard, value in plan.hash_values.items()}
    try:
        return {shard: future.result() for shard, future in futures.items()}
    finally:
        submitter.cancel_queued()
