"""What users iterate: the merged result (model instances) and its pages, over one merge.

:class:`MergedResultIterator` has the surface of PynamoDB's ``ResultIterator`` and
:class:`MergedPageIterator` that of its ``PageIterator``; both read the one
:class:`~pynamodb_sharding._merge.ShardMerge` a merged query built, and give its cursor.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pynamodb.constants import (
    CAMEL_COUNT,
    CAPACITY_UNITS,
    CONSUMED_CAPACITY,
    ITEMS,
    LAST_EVALUATED_KEY,
    SCANNED_COUNT,
    TABLE_NAME,
)

from pynamodb_sharding._cursor import CursorScope, CursorState, RawItem, TokenCodec, encode_cursor
from pynamodb_sharding._exceptions import CursorError
from pynamodb_sharding._merge import ShardMerge, sort_value
from pynamodb_sharding._point_reads import mark_partial
from pynamodb_sharding._query_plan import DEFAULT_BUFFERED_ITEMS

if TYPE_CHECKING:
    from pynamodb.models import Model

    from pynamodb_sharding._shard_requests import ShardQuery

__all__ = ["MergedPageIterator", "MergedResultIterator"]

_M = TypeVar("_M", bound="Model")
_U = TypeVar("_U")

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
        shard_query: ShardQuery | None = None,
        tokens: TokenCodec | None = None,
        given_state: CursorState | None = None,
        filtered: bool = False,
        last_value: Mapping[str, Any] | None = None,
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
        #: The last sort key a table query's key condition admits, included: nothing follows an
        #: item there, and DynamoDB gives no ``LastEvaluatedKey`` for a page ending on it.
        self._last_value = sort_value(last_value) if last_value is not None else None
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
        page size then has a cursor until a ``next()`` found the end. A table query's page that
        ends on the last sort key its key condition admits has none, as DynamoDB's.
        """
        merge = self._merge
        state, remaining = merge.state(self._given_state)
        if merge.exhausted:
            return None  # a next() found the end: a plain query's last page has no key
        if merge.returned == 0:
            return state if remaining else None
        # On the last sort key the key condition admits, DynamoDB's page ends without a key:
        # a cursor only if an item follows (a second copy of a duplicated key, in another shard).
        after = state.after
        at_end = (self._last_value is not None and after is not None and after.value is not None
                  and sort_value(after.value) == self._last_value)
        size = self._plain_page_size
        if size is not None and not at_end and (self._filtered or merge.returned % size == 0):
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
        if self._cursor_whatever_follows(merge.returned):
            return
        with contextlib.suppress(Exception):  # the property then gives the cursor, never wrong
            merge.items_left()

    def _cursor_whatever_follows(self, returned: int) -> bool:
        """Whether, after ``returned`` items, the cursor is one whatever follows (so that
        :meth:`read_ahead_for_cursor` reads nothing ahead)."""
        size = self._plain_page_size
        return size is not None and (self._filtered or returned % size == 0)

    def read_ahead_may_send(self) -> bool:
        """Whether :meth:`read_ahead_for_cursor`, called once the next item is taken, may send
        (or wait for) a request: false when that item leaves another held, or its cursor is one
        whatever follows (the last item of a ``limit`` page)."""
        return self._merge.may_run_dry() and not self._cursor_whatever_follows(self._merge.returned + 1)

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
        shard_query: ShardQuery | None = None,
        tokens: TokenCodec | None = None,
        given_state: CursorState | None = None,
        partial: bool = False,
        filtered: bool = False,
        last_value: Mapping[str, Any] | None = None,
    ) -> None:
        self._model = model
        self._from_raw_data: Callable[[dict[str, Any]], _M] = model.from_raw_data
        if partial:  # a projection that left out the key: full puts of these items are refused
            self._from_raw_data = lambda raw: mark_partial(model.from_raw_data(raw))
        self._merge = merge
        self.page_iter = MergedPageIterator(
            merge, scope, given_cursor=given_cursor, key_names=key_names, page_size=page_size,
            shard_query=shard_query, tokens=tokens, given_state=given_state, filtered=filtered,
            last_value=last_value,
        )

    def __iter__(self) -> MergedResultIterator[_M]:
        return self

    def __next__(self) -> _M:
        return self._merge.next_as(self._instance)

    def holds_next_item(self) -> bool:
        """Whether the next ``next()`` returns an item already held, without a request (the
        async result takes such items without leaving the event loop's own code)."""
        return self._merge.holds_next_item()

    def next_held(self, otherwise: _U) -> _M | _U:
        """``next()`` when :meth:`holds_next_item`, else ``otherwise``, in one call."""
        return self._merge.next_held(self._instance, otherwise)

    def may_run_dry(self) -> bool:
        """Whether the next ``next()`` may leave no item held (then :meth:`read_ahead_for_cursor`
        may send requests)."""
        return self._merge.may_run_dry()

    def read_ahead_may_send(self) -> bool:
        """Whether :meth:`read_ahead_for_cursor` may send once the next ``next()`` took an item."""
        return self.page_iter.read_ahead_may_send()

    def ended(self) -> bool:
        """Whether ``next()`` raises ``StopIteration`` at once, sending nothing (the ``limit``
        was reached, the end found, or the result closed)."""
        return self._merge.closed

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

