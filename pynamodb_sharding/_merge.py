"""The streaming k-way merge of per-shard result pages, in DynamoDB's sort order.

:class:`ShardMerge` takes one page-fetching function and the shards to read; it fetches their
pages in parallel on a bounded thread pool, holds at most the page being consumed and one
prefetched page per shard, and yields ``(shard, raw item)`` in sort-key order (either
direction, ties broken by shard). A failed request is sent again by the next call; a process
forked mid-merge sends the requests its parent's threads had in flight again. Its
:meth:`~ShardMerge.state` is what the cursor encodes. Pure: no PynamoDB import, raw items in
botocore's shape.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import heapq
import os
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from decimal import Decimal
from typing import Any, TypeVar

import attrs

from pynamodb_sharding._cursor import MAX_TIES, CursorState, MergePosition, RawItem, RawKey, Tie
from pynamodb_sharding._exceptions import SortKeyTypeError
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._keys import LEGACY_SHARD
from pynamodb_sharding._pool import BoundedSubmitter

__all__ = [
    "STARTS_AT_POSITION",
    "UNKNOWN_PLACE",
    "FetchPage",
    "Page",
    "ShardMerge",
    "SortValue",
    "Start",
    "StartAt",
    "sort_value",
]

_T = TypeVar("_T")
_U = TypeVar("_U")

#: No sort value seen yet.
_NOTHING: Any = object()

#: What ``ShardMerge(tie_stream=...)`` gives for a tie whose place it cannot tell: no stream's,
#: and not gone (nothing is skipped as its copy).
UNKNOWN_PLACE = -(2**31)
#: The tie-break rank of a shadowed stream: after every real shard (the bare legacy key last).
_LAST = 1 << 62

#: What a sort key becomes to compare it the way DynamoDB does.
SortValue = Decimal | str | bytes
#: Whether an entry may be a copy of another of one identity: known, or told when asked (telling
#: may read a key's shard count, so it is asked only when two entries of one identity meet).
CopyFlag = bool | Callable[[], bool]


def _told(flag: CopyFlag) -> bool:
    return flag() if callable(flag) else flag


def sort_value(value: Mapping[str, Any]) -> SortValue:
    """Turn a raw key attribute value into something that compares the way DynamoDB sorts it.

    DynamoDB orders ``N`` numerically, ``S`` by UTF-8 bytes and ``B`` by bytes. A Python ``str``
    compares by code point, which is exactly UTF-8 byte order (unlike UTF-16 order, where
    characters outside the Basic Multilingual Plane sort before U+E000..U+FFFF), so strings are
    compared as they are, without the cost of encoding them.

    Raises:
        SortKeyTypeError: the value is not of a key type (``S``, ``N`` or ``B``).
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
    raise SortKeyTypeError(msg)


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


@attrs.frozen
class Page:
    """One page of a shard's results, as DynamoDB's Query returned it.

    ``consumed_capacity`` is the page's ``ConsumedCapacity.CapacityUnits`` when the request
    asked for it (``rate_limit``), else ``None``.
    """

    items: list[RawItem]
    last_evaluated_key: RawKey | None
    count: int
    scanned_count: int
    consumed_capacity: float | None = None


@attrs.frozen
class StartAt:
    """Where a stream of a resumed index query starts: at the sort value of the position it
    resumes from, that value included (items of one sort value may be anywhere in a stream's
    order), with no ``ExclusiveStartKey``; the position's ties say which of them were returned."""


#: The start of every stream of a resumed index query that names no start key of its own.
STARTS_AT_POSITION = StartAt()
#: Where a stream's first request starts: after an ``ExclusiveStartKey``, at the start
#: (``None``), or at a position's sort value (:data:`STARTS_AT_POSITION`).
Start = RawKey | StartAt | None
#: Fetches one page of a shard: ``fetch_page(shard, start)``.
FetchPage = Callable[[int, Start], Page]
#: Fetches one page of a shard of at most ``limit`` items: ``fetch(shard, start, limit)``.
FetchLimitedPage = Callable[[int, Start, int], Page]

#: The latest items returned at one sort value that the merge keeps: a cursor names at most
#: :data:`~pynamodb_sharding._cursor.MAX_TIES` of them.
_COPY_KEYS_KEPT = MAX_TIES

#: With ``fetch_share``: each shard is first asked for this many times its share of the items
#: still wanted, so that a page of ``limit`` items reads about ``1.5 x limit + shards`` items.
SHARE_SLACK = 1.5


class _ShardStream:
    """One shard's place in the merge: its current page, its prefetch, where it resumes."""

    __slots__ = ("at_position", "from_position", "index", "items", "keys", "last", "loaded", "page_key", "pending",
                 "shard", "skipped", "start", "start_returned", "tail")

    def __init__(self, shard: int, start: Start) -> None:
        self.shard = shard
        self.start: Start = start  # exclusive start key of the current page's request
        self.start_returned = False  # whether the merge returned (or skipped as a copy) that key's item
        # Started at a position's sort value, and not past it yet: what the position returned
        # there is skipped as it is read again.
        self.at_position = isinstance(start, StartAt)
        self.from_position = self.at_position  # it reads the position's value from its first item
        self.items: list[RawItem] = []
        self.last: RawItem | None = None  # the last item of the pages before this one
        self.skipped: RawItem | None = None  # the last item skipped as a copy, not returned
        self.tail: list[RawItem] = []  # the last items of one sort value of its pages before (an index's)
        self.keys: list[Any] | None = None  # the items' sort values, once a batch needed them
        self.index = 0
        self.page_key: RawKey | None = None  # DynamoDB's LastEvaluatedKey of the current page
        self.pending: Future[Page] | None = None
        self.loaded = False

    def returned(self) -> RawItem | None:
        """The last item the merge took from this stream, if it returned it (not skipped it)."""
        item = self.items[self.index - 1] if self.index > 0 else self.last
        return None if item is self.skipped else item

    def next_start(self) -> Start:
        """The exclusive start key of the request that follows the current page."""
        return self.page_key if self.loaded else self.start


class ShardMerge:
    """A streaming k-way merge of per-shard result pages, fetched in parallel.

    Every shard's pages come from ``fetch_page`` on the process-wide fan-out pool
    (:mod:`pynamodb_sharding._pool`), at most ``max_workers`` at a time. The merge holds, per
    shard, the page being consumed and at most one prefetched page: the next page of a shard is
    requested as soon as its current page arrives, unless ``limit`` proves it will not be needed.
    Items come out in ``(sort value, shard)`` order, ascending or descending, so that ties on
    equal sort keys in different shards are broken the same way in every run.

    A failed page request raises from ``next()`` and leaves the merge as it was: the next
    ``next()`` sends the same request again (same exclusive start key) and carries on, so an
    error never ends the merge early nor repeats an item. Only exhaustion, ``limit`` and
    :meth:`close` end it. In a child process forked while pages were in flight, the requests
    the parent's threads were sending are sent again from a pool of the child's own.

    Args:
        fetch_page: sends one request; runs on the pool's threads.
        starts: the shards to read, each with its exclusive start key (``None``: from the start).
        sort_key: the item's sort value, see :func:`sort_value`.
        key_names: the attributes of an item's resume key (``ExclusiveStartKey`` shape).
        forward: ascending when true.
        limit: stop after that many items.
        max_workers: the most requests of this merge running at once.
        shadowed: streams whose items yield to copies of the same item in the other streams
            (the streams of what a job moves items out of: the bare legacy key of a
            ``legacy_unsharded`` model, shards above a key's count, an older layout's shards):
            among equal sort values they come last, and an item of one whose ``identity``
            equals that of an item returned at the same sort value is dropped, not returned.
        identity: what makes two items one item (default: their sort value).
        copies: for items of any stream that may be two copies of one item (an index query
            while a job moves table items: both the old and the new table item may have an
            entry): ``(identity, may be a copy)`` of an item. Of two items with one identity
            at one sort value, at least one of which may be a copy, the second is not returned.
        resumes_after: with ``copies``, whether a start key is an item the query that gave the
            cursor returned (or skipped as a copy of one): its copies after the page break are
            not returned either. A start key the reads may have dropped before the merge (a
            stale bare copy) is not, unless the cursor says it was returned (``returned``):
            the copy of a dropped one is the item.
        returned: the shards whose start key the query that gave the cursor returned, where
            ``resumes_after`` cannot tell (:attr:`CursorState.returned`).
        also_returned: with ``copies``, the other items that query returned at the sort value
            it stopped at (:attr:`CursorState.also_returned`): their copies are not returned.
        sort_name: the attribute of the sort value (``None`` without one): a cursor's position
            names its value in the last item returned.
        after: the position the query resumes from (a cursor of this version): with
            ``copies``, the items its ties name are returned already, whichever stream holds
            them now (the streams start at its value, see ``merged_query``).
        tie_names: the attributes of an item that break a tie at a sort value (its table key,
            for an index query): what a position's ties name.
        unique_streams: with ``copies``, streams whose items may reappear under another sort
            value in another stream while the query runs (an index's bare value, whose entries
            the application rewrites into shards): an item of theirs is returned once, at the
            first sort value the merge meets it.
        unique_keys: without ``copies`` (a table query): the layout keeps logical keys unique,
            so two items of one sort value in two streams are copies of one item, never two.
        ties_are_copies: without ``copies``: items of one sort value are copies of one logical
            key (a table query); ``False``: they are items of their own (an index query whose
            items never move), each told by its table key.
        tie_stream: for a table query of every shard of its key that may hold two items of one
            key (not ``unique_keys``): the stream that holds the place of a position's tie (its
            table key), ``None`` when no stream of this read does (a shard read no more: a
            compaction emptied it).
        tie_digest: with ``tie_stream``, the digest of an item that a position's ties keep
            (:func:`~pynamodb_sharding._cursor.item_digest`; a query of whole items only). A tie
            gone from its place (that place read no more, or read past the position's value
            without it) may have moved into another stream: there, an item at the position's
            value with the tie's digest is skipped as its copy, once. A tie without a digest
            (a cursor made before they were kept), or of the bare legacy key, that stood for
            every copy (:attr:`Tie.copy`) skips every item at that value, as it did.
    """

    def __init__(
        self,
        fetch_page: FetchPage,
        starts: Mapping[int, Start],
        *,
        sort_key: Callable[[RawItem], SortValue],
        key_names: Sequence[str],
        forward: bool = True,
        limit: int | None = None,
        max_workers: int = 1,
        shadowed: Collection[int] = (),
        identity: Callable[[RawItem], Any] | None = None,
        copies: Callable[[RawItem], tuple[Any, CopyFlag]] | None = None,
        resumes_after: Callable[[RawKey], bool] | None = None,
        returned: Collection[int] = (),
        also_returned: Sequence[tuple[int, RawKey]] = (),
        sort_name: str | None = None,
        after: MergePosition | None = None,
        tie_names: Sequence[str] = (),
        unique_streams: Collection[int] = (),
        unique_keys: bool = False,
        ties_are_copies: bool = True,
        tie_stream: Callable[[RawKey], int | None] | None = None,
        tie_digest: Callable[[RawItem], bytes] | None = None,
        fetch_share: FetchLimitedPage | None = None,
        share_slack: float = SHARE_SLACK,
        share_extra: int = 0,
        share_cap: int | None = None,
        refill_first_share: bool = False,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self._fetch_page = fetch_page
        # With a limit: ask each shard for its share of what is still wanted, refill only a
        # shard whose next item the merge needs, prefetch nothing (read amplification ~1.5x).
        self._fetch_share = fetch_share if limit is not None else None
        self._share_slack = share_slack
        self._share_extra = share_extra
        self._share_cap = share_cap  # the memory bound of one shard's page
        self._first_share: int | None = None
        self._refill_first_share = refill_first_share
        self._on_close = on_close
        self._shadowed = frozenset(shadowed)
        self._identity = identity if identity is not None else sort_key
        # The sort value of the last item returned from a stream that is not shadowed, and the
        # identities of the items returned at that value: what a shadowed item yields to.
        self._tie_value: Any = _NOTHING
        self._tie_ids: set[Any] = set()
        self.shadowed_dropped = 0
        self._copies = copies
        # The sort value of the last item returned, and the identities returned at it (whether
        # each may be a copy): what a later item of one identity is a copy of. And, for a
        # resumed query, those its start keys returned, by sort value.
        self._copy_value: Any = _NOTHING
        self._copy_ids: dict[Any, list[CopyFlag]] = {}
        # The latest items returned at _copy_value (what a cursor names besides the positions).
        self._copy_keys: deque[tuple[int, RawKey, CopyFlag]] = deque(maxlen=_COPY_KEYS_KEPT)
        self._seeded: dict[Any, dict[Any, list[CopyFlag]]] = {}
        self._seeded_keys: dict[Any, list[tuple[int, RawKey, CopyFlag]]] = {}
        # Items returned at _copy_value, and at each seeded value (more than MAX_TIES: the
        # cursor then adds the streams' positions at that value).
        self._copy_count = 0
        self._seeded_counts: dict[Any, int] = {}
        self.copies_dropped = 0
        self._sort_name = sort_name
        self._tie_names = tuple(tie_names)
        self._after = after
        #: The last item returned, and the state of the cursor this merge resumed from.
        self._last: RawItem | None = None
        self._unique_streams = frozenset(unique_streams) if copies is not None else frozenset()
        # Identities seen in those streams, and those of them returned (at any sort value).
        self._unique_ids: set[Any] = set()
        self._unique_returned: set[Any] = set()
        self._streams = [_ShardStream(shard, starts[shard]) for shard in sorted(starts)]
        self._stream_of = {stream.shard: stream for stream in self._streams}
        for stream in self._streams:
            stream.start_returned = stream.shard in returned
        self._sort_key = sort_key
        self._resumes_after = resumes_after if copies is not None else None
        if copies is not None and resumes_after is not None and after is None:
            self._seed_copies(copies, [(shard, start) for shard, start in starts.items()
                                       if isinstance(start, dict) and (resumes_after(start) or shard in returned)]
                              + list(also_returned))
        # The position this merge resumes from: the items its ties name, read again at its sort
        # value, are skipped, and so are their copies (see _drop_returned, _is_copy).
        self._resume_value: Any = _NOTHING
        self._resume_keys: set[tuple[Any, ...]] = set()
        self._resume_ties: tuple[Tie, ...] = ()
        self._unique_keys = unique_keys
        self._ties_are_copies = ties_are_copies
        self._tie_stream = tie_stream if tie_digest is not None and not unique_keys else None
        self._tie_digest = tie_digest if self._tie_stream is not None else None
        # The ties read again in their place (where the position returned them), and the stream
        # that skipped an item as the copy of a tie gone from its place (once per tie).
        self._ties_in_place: set[tuple[Any, ...]] = set()
        self._tie_copies: dict[tuple[Any, ...], int] = {}
        # Each tie's place (its stream, ``None`` for one read no more), by its marker: with
        # ``tie_stream`` only.
        self._tie_place: dict[tuple[Any, ...], int | None] = {}
        #: ``id()`` of held items a batch passes over: those the position resumed from returned.
        self._dropped: set[int] = set()
        if after is not None and after.ties:
            at = {sort_name: after.value} if sort_name is not None and after.value is not None else {}
            self._resume_value = self._sort_key({**after.ties[-1].key, **at})
            self._resume_keys = {self._tie_marker(tie.key) for tie in after.ties}
            self._resume_ties = after.ties
            if self._tie_stream is not None:
                self._tie_place = {self._tie_marker(tie.key): self._tie_stream(tie.key) for tie in after.ties}
            if copies is not None:
                self._seed_copies(copies, [(0, {**tie.key, **at}) for tie in after.ties],
                                  flags=[tie.copy for tie in after.ties])
                if not after.complete:
                    self._seeded_counts[self._resume_value] = MAX_TIES + 1
        self._key_names = tuple(key_names)
        self._forward = forward
        self._limit = limit
        self._max_workers = max(1, min(max_workers, len(self._streams)))
        self._heap: list[tuple[Any, int, _ShardStream]] = []
        # Without a shadowed stream, items are merged a batch at a time (see _next_batch): every
        # item that can be returned before some shard's next page is needed, sorted at once.
        self._batched = not self._shadowed and copies is None
        self._batch: list[tuple[Any, int, int, _ShardStream]] = []
        self._batch_pos = 0
        # Streams to load before the next item can be chosen: every stream at the start, then
        # each stream whose page ran out. One stays here until its page has arrived.
        self._loading: list[_ShardStream] = []
        self._submitter: BoundedSubmitter | None = None
        self._executor_pid = 0
        self._finalizer: weakref.finalize[Any, ShardMerge] | None = None
        self.started = False
        self.closed = False
        #: The end of every shard was reached: a ``next()`` found no item left (not ``limit``).
        self.exhausted = False
        self.returned = 0
        self.total_count = 0
        self.total_scanned_count = 0
        self.total_consumed_capacity: float | None = None
        self.requests = 0
        #: How often the other streams were read again after a later page of a stream read first.
        self.rereads = 0
        self._items_left: tuple[int, bool] | None = None  # (returned, answer) of items_left()

    # -- iteration ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[int, RawItem]]:
        return self

    def __next__(self) -> tuple[int, RawItem]:
        """Return ``(shard, raw item)`` of the next item in merged order."""
        return self.next_as(_shard_and_item)

    def next_as(self, convert: Callable[[int, RawItem], _T]) -> _T:
        """Return ``convert(shard, raw item)`` of the next item, taking the item only if it returns.

        An exception from a page request or from ``convert`` leaves the item to be returned by
        the next call.

        Raises:
            StopIteration: every shard is exhausted, ``limit`` items were returned, or closed.
        """
        if self._copies is not None:
            return self._next_unique(convert)
        if self._batched:
            pos = self._batch_pos
            batch = self._batch
            if pos >= len(batch):
                self._next_batch()  # raises StopIteration at the end
                pos, batch = 0, self._batch
            stream = batch[pos][3]
            item = stream.items[stream.index]
            while self._dropped and id(item) in self._dropped:  # returned by the page this one resumes
                self._dropped.discard(id(item))
                stream.index += 1
                self.copies_dropped += 1
                self._batch_pos = pos = pos + 1
                if pos == len(batch):
                    self._batch_taken(stream)
                    self._next_batch()
                    pos, batch = 0, self._batch
                stream = batch[pos][3]
                item = stream.items[stream.index]
            value = convert(stream.shard, item)
            self._last = item
            stream.index += 1
            self.returned += 1
            self._batch_pos = pos + 1
            if pos + 1 == len(batch):
                self._batch_taken(stream)
            return value
        shard, item = self._peek()
        value = convert(shard, item)
        self._take()
        return value

    def holds_next_item(self) -> bool:
        """Whether the next :meth:`next_as` returns an item already held, sending and
        submitting nothing (not the last item of a batch, whose taking may ask for pages)."""
        return (self._batched and not self.closed and not self._dropped
                and self._batch_pos + 1 < len(self._batch))

    def next_held(self, convert: Callable[[int, RawItem], _T], otherwise: _U) -> _T | _U:
        """:meth:`next_as` when :meth:`holds_next_item`, else ``otherwise`` (one call: a long
        async read takes each held item without a second one)."""
        pos = self._batch_pos
        batch = self._batch
        if not self._batched or self.closed or self._dropped or pos + 1 >= len(batch):
            return otherwise
        stream = batch[pos][3]
        item = stream.items[stream.index]
        value = convert(stream.shard, item)
        self._last = item
        stream.index += 1
        self.returned += 1
        self._batch_pos = pos + 1
        return value

    # -- copies of one item (index queries while table items move) ---------------------------

    def _next_unique(self, convert: Callable[[int, RawItem], _T]) -> _T:
        """:meth:`next_as`, without the copies of an item already returned (one item at a
        time: a batch could not skip them)."""
        while True:
            _, item = self._peek()
            stream = self._heap[0][2]
            value = self._sort_key(item)
            identity, may_copy = self._is_copy(item, value)
            if identity is None or identity in self._unique_returned:  # a copy of one returned: skipped
                self._skip(stream)
                continue
            result = convert(stream.shard, item)
            if value != self._copy_value:
                self._copy_value, self._copy_ids = value, self._seeded.pop(value, {})
                seeded = self._seeded_keys.pop(value, ())
                self._copy_keys = deque(seeded, maxlen=_COPY_KEYS_KEPT)
                self._copy_count = self._seeded_counts.pop(value, len(seeded))
            self._copy_ids.setdefault(identity, []).append(may_copy)
            self._copy_keys.append((stream.shard, self._key_of(item), may_copy))
            self._copy_count += 1
            if identity in self._unique_ids:
                self._unique_returned.add(identity)
            self._take(close_at_limit=False)
            # Before the cursor is taken: it resumes past them. Telling a copy may read a key's
            # count; if that fails, the item is still returned and the next call tells again.
            with contextlib.suppress(Exception):
                self._skip_held_copies()
            if self._limit is not None and self.returned >= self._limit:
                self.close()  # the prefetched pages will not be needed
            return result

    def _seed_copies(self, copies: Callable[[RawItem], tuple[Any, CopyFlag]],
                     starts: list[tuple[int, RawKey]], *, flags: Sequence[bool] | None = None) -> None:
        """A resumed query: the items it resumes after (each stream's start key, and the other
        items returned at the value the cursor stopped at) count as returned at their sort
        values, so that a copy of one after the page break, in any stream, is not returned again
        (``flags``: whether each stands for every copy, as the cursor says, else as ``copies``)."""
        for number, (shard, start) in enumerate(starts):
            identity, may_copy = copies(start)
            flag: CopyFlag = flags[number] if flags is not None else may_copy
            value = self._sort_key(start)
            self._seeded.setdefault(value, {}).setdefault(identity, []).append(flag)
            self._seeded_keys.setdefault(value, []).append((shard, start, flag))

    def _is_copy(self, item: RawItem, value: Any) -> tuple[Any, CopyFlag]:
        """``(None, True)`` for a copy of an item returned, else ``(identity, may be a copy)``."""
        assert self._copies is not None
        identity, may_copy = self._copies(item)
        returned = self._copy_ids if value == self._copy_value else self._seeded.get(value)
        if returned and identity in returned and (_told(may_copy) or any(map(_told, returned[identity]))
                                                  or self._returned_at_position(item, value)):
            return None, True
        return identity, may_copy

    def _returned_at_position(self, item: RawItem, value: Any) -> bool:
        """Whether ``item`` is, as stored, an item the position this merge resumes from returned
        (read again: every stream starts at the position's sort value, included)."""
        return value == self._resume_value and self._tie_marker(item) in self._resume_keys

    def _tie_marker(self, key: RawKey) -> tuple[Any, ...]:
        return tuple(sort_value(key[name]) for name in self._tie_names)

    def _skip(self, stream: _ShardStream) -> None:
        self.copies_dropped += 1
        self._advance(stream)
        if self._shadowed:
            self._drop_shadowed()

    def _skip_held_copies(self) -> None:
        """Skip the copies next in line that are already held (no page is asked for)."""
        while not self.closed and not self._loading and self._heap:
            stream = self._heap[0][2]
            item = stream.items[stream.index]
            if self._is_copy(item, self._sort_key(item))[0] is not None:
                return
            self._skip(stream)

    def _prepare(self) -> None:
        """Stop at the end or the limit; send what a fork lost and the first requests."""
        if self.closed:
            raise StopIteration
        if self._limit is not None and self.returned >= self._limit:
            self.close()  # the prefetched pages will not be needed
            raise StopIteration
        for stream in self._leave_parents_threads():
            stream.pending = self._submit(stream.shard, stream.next_start())
        if not self.started:
            self.started = True
            # The streams read first, then those holding a position's ties, are loaded first:
            # whether a tie is still in its place is known before another stream's items at its
            # value are looked at.
            places = set(self._tie_place.values())
            self._loading = sorted(self._streams, key=lambda stream: (stream.shard not in self._shadowed,
                                                                      stream.shard not in places))
            for stream in self._streams:
                stream.pending = self._submit(stream.shard, stream.start)

    def _load_waiting(self) -> None:
        loading = self._loading
        while loading:
            # Raises with the stream still first in line: the next call loads it again.
            self._load(loading[0])
            del loading[0]

    def _next_batch(self) -> None:
        """Sort the next batch: every buffered item that comes before the last buffered item of
        the first shard to run out of its page (among shards with more pages), that one
        included. Up to there the one-at-a-time merge would return exactly these items in this
        order, ``(sort value, shard)`` and a shard's own order; after it, that shard's next page
        is needed. Each page's sort values are computed once, the batch is sorted in C."""
        self._prepare()
        self._load_waiting()
        self._batch, self._batch_pos = [], 0
        forward = self._forward
        open_streams = [stream for stream in self._streams if stream.index < len(stream.items)]
        if not open_streams:
            self.exhausted = True
            self.close()
            raise StopIteration
        for stream in open_streams:
            if stream.keys is None:
                stream.keys = [self._sort_key(item) for item in stream.items]
        # The first stream to run out: the smallest (largest, descending) last (value, shard).
        bound: tuple[Any, int] | None = None
        for stream in open_streams:
            if stream.page_key is not None:
                keys = stream.keys
                assert keys is not None
                last = (keys[-1], stream.shard)
                if bound is None or (last < bound if forward else bound < last):
                    bound = last
        batch: list[tuple[Any, int, int, _ShardStream]] = []
        for stream in open_streams:
            keys = stream.keys
            assert keys is not None
            start, rank = stream.index, stream.shard
            end = len(keys) if bound is None else self._cut(stream, bound)
            if forward:
                batch.extend([(keys[i], rank, i, stream) for i in range(start, end)])
            else:
                batch.extend([(keys[i], rank, -i, stream) for i in range(start, end)])
        batch.sort(reverse=not forward)  # (value, shard, position) is unique: streams are never compared
        if self._limit is not None:
            room = self._limit - self.returned
            if self._dropped:  # entries the position returned are passed over, not counted
                cut, counted = len(batch), 0
                for number, entry in enumerate(batch):
                    if id(entry[3].items[abs(entry[2])]) not in self._dropped:
                        counted += 1
                        if counted == room:
                            cut = number + 1
                            break
                room = cut
            del batch[room:]
        self._batch = batch

    def _cut(self, stream: _ShardStream, bound: tuple[Any, int]) -> int:
        """Where the items of ``stream`` that come no later than ``bound`` (a sort value and a
        shard) end, from its current position; its ``keys`` must be known."""
        keys = stream.keys
        assert keys is not None
        start, rank = stream.index, stream.shard
        value, bound_rank = bound
        if self._forward:
            return (bisect.bisect_right(keys, value, start) if rank <= bound_rank
                    else bisect.bisect_left(keys, value, start))
        end = start
        while end < len(keys) and (value < keys[end] or (keys[end] == value and rank >= bound_rank)):
            end += 1
        return end

    def _batch_taken(self, stream: _ShardStream) -> None:
        """The last item of a batch was taken (from ``stream``): a page may have run out."""
        # A fork since the batch began: what is sent from here goes to a pool of this process.
        for lost in self._leave_parents_threads():
            lost.pending = self._submit(lost.shard, lost.next_start())
        if stream.index >= len(stream.items):
            stream.keys = None
            if stream.page_key is not None:
                self._loading.append(stream)
                if self._fetch_share is not None:
                    self._top_up()
        if self._limit is not None and self.returned >= self._limit:
            self.close()  # the prefetched pages will not be needed

    def _peek(self) -> tuple[int, RawItem]:
        self._prepare()
        while True:
            self._load_waiting()
            if not self._heap:
                self.exhausted = True
                self.close()
                raise StopIteration
            if not self._drop_shadowed():
                break
        stream = self._heap[0][2]
        return stream.shard, stream.items[stream.index]

    def _drop_shadowed(self) -> bool:
        """Drop the items of the shadowed stream first in line that another stream returned;
        whether any was dropped (its page may then need loading)."""
        dropped = False
        heap = self._heap
        while heap and heap[0][2].shard in self._shadowed:
            stream = heap[0][2]
            item = stream.items[stream.index]
            if self._tie_value is _NOTHING or self._sort_key(item) != self._tie_value:
                break
            if self._identity(item) not in self._tie_ids:
                break
            stream.skipped = item
            self._advance(stream)
            self.shadowed_dropped += 1
            dropped = True
        return dropped

    def _take(self, *, close_at_limit: bool = True) -> None:
        """Consume the item :meth:`_peek` returned."""
        stream = self._heap[0][2]
        self._last = stream.items[stream.index]
        if self._shadowed:  # a shadowed item returned shadows its copies in other shadowed streams
            item = stream.items[stream.index]
            value = self._sort_key(item)
            if self._tie_value is _NOTHING or value != self._tie_value:
                self._tie_value, self._tie_ids = value, set()
            self._tie_ids.add(self._identity(item))
        self._advance(stream)
        self.returned += 1
        if self._shadowed:
            self._drop_shadowed()  # so that the cursor resumes past a copy already returned
        if close_at_limit and self._limit is not None and self.returned >= self._limit:
            self.close()  # the prefetched pages will not be needed

    def _advance(self, stream: _ShardStream) -> None:
        """Move past the first item of ``stream``, which is first in line."""
        heap = self._heap
        if stream.index + 1 < len(stream.items):
            entry = self._entry(stream, stream.index + 1)
            stream.index += 1
            heapq.heapreplace(heap, entry)
        else:
            stream.index += 1
            heapq.heappop(heap)
            if stream.page_key is not None:
                # The next page may need a wait: load it on the next call, not before handing
                # this item over.
                self._loading.append(stream)
                if self._fetch_share is not None:
                    self._top_up()

    def _rank(self, stream: _ShardStream) -> int:
        """Where ``stream``'s item comes among the items of one sort value, in the order of the
        merge's own sort (ascending, or descending for a descending merge)."""
        rank = stream.shard
        if stream.shard in self._shadowed:  # after every other stream's copy, either direction
            rank = _LAST + (_LAST if stream.shard == LEGACY_SHARD else stream.shard)
            rank = rank if self._forward else -rank
        return rank

    def _entry(self, stream: _ShardStream, index: int) -> tuple[Any, int, _ShardStream]:
        value = self._sort_key(stream.items[index])
        rank = self._rank(stream)
        if self._forward:
            return (value, rank, stream)
        return (_Descending((value, rank)), 0, stream)

    def _load(self, stream: _ShardStream) -> None:
        """Load pages of ``stream`` until it has an item to offer (on the heap) or is exhausted."""
        while stream.index >= len(stream.items):
            if stream.loaded and stream.page_key is None:
                return
            pending = stream.pending
            if pending is None:
                pending = stream.pending = self._submit(stream.shard, stream.next_start())
            try:
                page = pending.result()
            except BaseException:
                # A failed request is sent again by the next call; a wait that was interrupted
                # (KeyboardInterrupt) goes on waiting for the same request.
                if pending.done():
                    stream.pending = None
                raise
            stream.pending = None
            later_first_read = stream.loaded and stream.shard in self._shadowed
            if stream.loaded:
                stream.start_returned = self._resumes_after is not None and self._returned_last(stream)
                stream.start = stream.page_key
            if stream.items:
                stream.last = stream.items[-1]
                if not self._ties_are_copies and self._copies is None:
                    self._keep_tail(stream)
            stream.items = page.items
            stream.keys = None
            stream.index = 0
            if stream.shard in self._unique_streams:
                copies = self._copies
                assert copies is not None
                self._unique_ids.update(copies(item)[0] for item in page.items)
            stream.page_key = page.last_evaluated_key
            stream.loaded = True
            if stream.at_position:
                self._drop_returned(stream)
            self.total_count += page.count
            self.total_scanned_count += page.scanned_count
            if page.consumed_capacity is not None:
                self.total_consumed_capacity = (self.total_consumed_capacity or 0.0) + page.consumed_capacity
            if (page.last_evaluated_key is not None and self._fetch_share is None
                    and self._may_need_more(len(page.items))):
                stream.pending = self._submit(stream.shard, page.last_evaluated_key)
            if later_first_read:
                self._read_others_again()
        if not self._batched:
            heapq.heappush(self._heap, self._entry(stream, stream.index))

    def _read_others_again(self) -> None:
        """A stream read first (a place a job moves items out of) gave a later page, read after
        the other streams: an item that left it for another stream in between is in neither of
        the pages read. Every other stream is read again, from right after the last item the
        merge took from it (nothing past that was returned: the merge needed this page to go
        on), so that its next page is read after this one, as its first page was after the
        stream's first."""
        rewound: list[_ShardStream] = []
        for other in self._streams:
            if other.shard in self._shadowed:
                continue
            if other.pending is not None:
                other.pending.cancel()  # a request in flight: its page is not used
                other.pending = None
            if not other.loaded:
                continue  # its first page is asked for when it is loaded
            consumed = other.items[other.index - 1] if other.index > 0 else None
            restart: Start = other.start
            if consumed is not None:
                other.last = consumed
                restart = self._key_of(consumed)
            other.items, other.keys, other.index = [], None, 0
            other.loaded = False
            other.start = restart
            other.at_position = isinstance(restart, StartAt)
            rewound.append(other)
        if rewound:
            self.rereads += 1
            gone = {id(stream) for stream in rewound}
            self._heap = [entry for entry in self._heap if id(entry[2]) not in gone]
            heapq.heapify(self._heap)
            self._loading.extend(stream for stream in rewound if stream not in self._loading)

    def _drop_returned(self, stream: _ShardStream) -> None:
        """Skip the items at the head of a stream started at the resume position's sort value
        that the position returned (a table query: items of one sort value in several streams
        are copies of one logical key). One is skipped when it is, as stored, an item the
        position names, when the position's item there stood for every copy (it was in a place
        a job moves items out of, or the layout keeps keys unique), or when this stream is such
        a place; a copy in a shard of the current layout that the position did not return is a
        second item of a duplicated key, and is returned. An index query's copies are told
        apart item by item (:meth:`_is_copy`)."""
        if self._copies is not None or self._resume_value is _NOTHING:
            stream.at_position = False
            return
        if not self._ties_are_copies:
            self._drop_returned_entries(stream)
            return
        stands_for_copies = (self._unique_keys or stream.shard in self._shadowed
                             or any(tie.copy and not self._told_apart(tie) for tie in self._resume_ties))
        items = stream.items
        while stream.index < len(items):
            item = items[stream.index]
            if self._sort_key(item) != self._resume_value:
                stream.at_position = False
                return
            marker = self._tie_marker(item)
            if marker in self._resume_keys:
                # The item at the tie's key (perhaps updated since): the tie, in its place.
                self._ties_in_place.add(marker)
            elif not (stands_for_copies or self._take_moved_tie(stream, item)):
                stream.at_position = False
                return
            stream.skipped = item
            stream.index += 1
            self.copies_dropped += 1

    def _told_apart(self, tie: Tie) -> bool:
        """Whether a tie's copies are told from second items of its key: it has a digest and a
        place that can tell whether its item left it, a shard of the key, not the bare legacy
        key (where a stale copy of an item a shard holds may stay)."""
        marker = self._tie_marker(tie.key)
        return (tie.digest is not None and marker in self._tie_place
                and self._tie_place[marker] not in (LEGACY_SHARD, UNKNOWN_PLACE))

    def _take_moved_tie(self, stream: _ShardStream, item: RawItem) -> bool:
        """Whether ``item``, of ``stream`` at the position's value, is the copy of a tie that
        left its place: it has the tie's digest, the tie is not in its place (read no more, or
        read past the value without it: moved, as a job moves items, or deleted) and no other
        stream took its copy."""
        tie_digest = self._tie_digest
        if tie_digest is None:
            return False
        digest = tie_digest(item)
        for tie in self._resume_ties:
            marker = self._tie_marker(tie.key)
            taken = self._tie_copies.get(marker)
            if (tie.digest != digest or marker in self._ties_in_place
                    or (taken is not None and taken != stream.shard) or not self._told_apart(tie)):
                continue
            place = self._tie_place[marker]
            if place is not None:
                held = self._stream_of.get(place)
                if (held is None or not held.from_position or not held.loaded
                        or (held.at_position and held.page_key is not None)):
                    # Not read through the value (yet), or resumed right after the tie's own key
                    # (a cursor of more than MAX_TIES ties): the tie may still be there.
                    continue
            self._tie_copies[marker] = stream.shard
            return True
        return False

    def _drop_returned_entries(self, stream: _ShardStream) -> None:
        """An index query's stream started at the position's sort value: of the entries of that
        value (which come first, in DynamoDB's order among themselves), those the position
        returned are passed over in their place (so that a stream's position stays one in
        DynamoDB's order); the others are returned."""
        items = stream.items
        at = self._resume_value
        end = stream.index
        while end < len(items) and self._sort_key(items[end]) == at:
            if self._tie_marker(items[end]) in self._resume_keys:
                self._dropped.add(id(items[end]))
            end += 1
        if end < len(items) or stream.page_key is None:
            stream.at_position = False  # past the position's value: nothing more to pass over

    @property
    def max_workers(self) -> int:
        """The most requests of this merge running at once."""
        return self._max_workers

    def _may_need_more(self, available: int) -> bool:
        # A page holding as many items as the limit still allows covers the rest of the query
        # on its own: its shard's next page can never be needed.
        return self._limit is None or available < self._limit - self.returned

    def _submit(self, shard: int, start: Start) -> Future[Page]:
        if self._submitter is None:
            # The process-wide pool runs the requests; this merge runs at most max_workers at once.
            self._submitter = BoundedSubmitter(self._max_workers)
            self._executor_pid = _process.pid
            self._finalizer = weakref.finalize(self, _shutdown, self._submitter, self._streams, self._executor_pid)
        self.requests += 1
        if self._fetch_share is not None and self._limit is not None:
            return self._submitter.submit(self._fetch_share, shard, start, self._share())
        return self._submitter.submit(self._fetch_page, shard, start)

    def _top_up(self) -> None:
        """In share mode, while one shard's next page is awaited: request in the same round the
        next page of every shard about to run out (fewer items left than it is likely to give),
        so that the merge does not wait for them one round trip after another."""
        assert self._limit is not None
        wanted = max(1, self._limit - self.returned)
        open_streams = [stream for stream in self._streams if not (stream.loaded and stream.page_key is None)]
        if not self._batched:
            likely = -(-wanted // max(1, len(open_streams)))  # an even share of what is still wanted
            for stream in open_streams:
                if (stream.loaded and stream.page_key is not None and stream.pending is None
                        and len(stream.items) - stream.index < likely):
                    stream.pending = self._submit(stream.shard, stream.page_key)
            return
        # A shard may run out within this page only if fewer than ``wanted`` of the items held
        # come no later than its last one (the items not yet read can only come between).
        held = [stream for stream in self._streams if stream.index < len(stream.items)]
        for stream in held:
            if stream.keys is None:
                stream.keys = [self._sort_key(item) for item in stream.items]
        for stream in held:
            if stream.page_key is None or stream.pending is not None:
                continue
            keys = stream.keys
            assert keys is not None
            last = (keys[-1], stream.shard)
            before = sum(self._cut(other, last) - other.index for other in held)
            if before < wanted:
                stream.pending = self._submit(stream.shard, stream.page_key)

    def _share(self) -> int:
        """The ``Limit`` of a shard request in share mode: ``share_slack`` (:data:`SHARE_SLACK`)
        times an even share of the items still wanted over the shards that may still have some,
        rounded up, plus ``share_extra`` (so N shards read at most slack x wanted + (extra+1) x N),
        at most ``share_cap``: a large limit is read in pages no larger than the memory bound's."""
        assert self._limit is not None
        wanted = max(1, self._limit - self.returned)
        open_streams = sum(1 for stream in self._streams if not (stream.loaded and stream.page_key is None))
        share = -(-int(self._share_slack * wanted) // max(1, open_streams)) + self._share_extra
        if self._first_share is None:
            self._first_share = share
        elif self._refill_first_share:
            # A shard read again holds more than its share of a small page: ask it for at least
            # as much as the first time, not a share of the few items still wanted, so that it
            # rarely needs a third round trip.
            share = max(share, self._first_share)
        if self._share_cap is not None:
            share = min(share, self._share_cap)
        return max(1, min(wanted, share))

    def _leave_parents_threads(self) -> list[_ShardStream]:
        """In a forked child, forget the parent's pool; return the streams whose request was lost.

        The pool's threads do not exist in the child, so its futures would never complete, and
        the locks of the pool and of those futures may have been held by a thread at the fork:
        the child touches none of them, it only drops its references.
        """
        if self._submitter is None or self._executor_pid == _process.pid:
            return []
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._submitter = None
        lost = [stream for stream in self._streams if stream.pending is not None]
        for stream in lost:
            stream.pending = None
        return lost

    # -- state -------------------------------------------------------------------------------

    def state(self, given: CursorState | None = None) -> tuple[CursorState, bool]:
        """Where a query resuming after the items returned starts, and whether any shard may
        have items left.

        Once an item was returned: a :class:`~pynamodb_sharding._cursor.MergePosition` right after
        it in the merged order, which a resumed query applies to every stream it reads, and the
        streams' own positions at its sort value when more items share it than the position
        names. Before: ``given`` (the cursor this merge resumed from, else a start).
        """
        positions, remaining = self._stream_positions()
        last = self._last
        if last is None:
            return (given if given is not None else CursorState()), remaining
        sort_name = self._sort_name
        value = last[sort_name] if sort_name is not None else None
        names = self._tie_names
        # Ties name the items returned only: one skipped as a copy stood for one returned.
        if self._copies is not None:
            at = self._copy_value
            ties = [Tie({name: key[name] for name in names}, _told(flag)) for _, key, flag in self._copy_keys]
            complete = self._copy_count <= MAX_TIES
        else:
            # A table query has an item of one sort value per stream, the one its position names;
            # an index query's stream may have returned several there, the last ones of it.
            at = self._sort_key(last)
            ties = [tie for tie in self._resume_ties if at == self._resume_value]
            # The position resumed from named only the latest of its ties: still so at its value.
            seen_all = not (at == self._resume_value and self._after is not None and not self._after.complete)
            # In the order the merge returned them, so that the latest are kept.
            returned_order = sorted(self._streams, key=self._rank, reverse=not self._forward)
            digest = self._tie_digest
            for stream in returned_order:
                found, whole = self._returned_at(stream, at)
                seen_all = seen_all and whole
                ties.extend(Tie({name: item[name] for name in names},
                                self._ties_are_copies and (self._unique_keys or stream.shard in self._shadowed),
                                None if digest is None else digest(item))
                            for item in found)
            ties = list({self._tie_marker(tie.key): tie for tie in ties}.values())
            complete = seen_all and len(ties) <= MAX_TIES
        exact: dict[int, RawKey] = {}
        if not complete:
            exact = {shard: key for shard, key in positions.items() if self._sort_key(key) == at}
        return CursorState(positions=exact, after=MergePosition(value, tuple(ties[-MAX_TIES:]), complete)), remaining

    def _keep_tail(self, stream: _ShardStream) -> None:
        """Before a stream's page is replaced: keep its last items of one sort value (the ties a
        cursor may have to name), with those of the pages before it if the whole page was of
        that value, the latest ``MAX_TIES`` and one more (to tell that some were left out)."""
        items = stream.items
        value = self._sort_key(items[-1])
        start = len(items) - 1
        while start > 0 and len(items) - start <= MAX_TIES and self._sort_key(items[start - 1]) == value:
            start -= 1
        run = items[start:]
        if start == 0 and stream.tail and self._sort_key(stream.tail[-1]) == value:
            run = stream.tail + run
        stream.tail = run[-(MAX_TIES + 1):]

    def _returned_at(self, stream: _ShardStream, at: Any) -> tuple[list[RawItem], bool]:
        """The items ``stream`` returned at the sort value ``at``, oldest first, and whether that is
        all of them (beyond :data:`~pynamodb_sharding._cursor.MAX_TIES`, not kept)."""
        if self._ties_are_copies:
            item = stream.returned()
            return ([item] if item is not None and self._sort_key(item) == at else []), True
        items, index = stream.items, stream.index - 1
        found: list[RawItem] = []
        while index >= 0 and self._sort_key(items[index]) == at:
            found.append(items[index])
            index -= 1
        found.reverse()
        if index >= 0:
            return found, True
        tail = stream.tail
        if not tail or self._sort_key(tail[-1]) != at:
            return found, stream.last is None or self._sort_key(stream.last) != at
        return tail + found, len(tail) <= MAX_TIES

    def _stream_positions(self) -> tuple[dict[int, RawKey], bool]:
        """Each stream's own resume key (right after the last item it returned, or DynamoDB's
        ``LastEvaluatedKey`` once its whole page was taken), and whether any may have items left."""
        positions: dict[int, RawKey] = {}
        remaining = False
        for stream in self._streams:
            start: Any
            if not stream.loaded:
                start = stream.start
                remaining = True
            elif stream.index >= len(stream.items):
                start = stream.page_key
                if start is None:  # read to its end: after its last item
                    start = self._key_of(stream.items[-1]) if stream.items else stream.start
                else:
                    remaining = True
            else:
                start = self._key_of(stream.items[stream.index - 1]) if stream.index > 0 else stream.start
                remaining = True
            if isinstance(start, dict):
                positions[stream.shard] = start
        return positions, remaining

    def _returned_last(self, stream: _ShardStream) -> bool:
        """Whether the key after a stream's whole current page (DynamoDB's ``LastEvaluatedKey``)
        is the last item of the page the merge took: not when a read dropped that item."""
        return bool(stream.items) and self._key_of(stream.items[-1]) == stream.page_key

    def items_left(self) -> bool:
        """Whether any item comes after those returned, reading ahead where the pages held
        cannot tell.

        :meth:`state` says a shard has items left whenever DynamoDB gave its last page a
        ``LastEvaluatedKey``, which it does for a page that stopped on its ``Limit`` even when
        nothing follows. This answers exactly: an item held and not yet returned is one; a
        shard whose next page is not held is asked for it (its prefetched request is used
        when there is one), page after page while they come back empty with a
        ``LastEvaluatedKey``. What is read here is not returned by the merge nor moves the
        cursor: a ``next()`` after it reads the same pages again. The answer is kept until
        another item is returned.
        """
        if self._items_left is not None and self._items_left[0] == self.returned:
            return self._items_left[1]
        left = self._read_ahead()
        self._items_left = (self.returned, left)
        return left

    def may_run_dry(self) -> bool:
        """Whether the next :meth:`next_as` may leave no item held while a shard may still have
        a page to read, so that :meth:`items_left` may then have to read ahead (cheap and
        conservative: true at a batch's last item, unless every shard's last page is held:
        taking an item loads no page that was not already sent for; true anywhere in a batch
        while items the page a cursor resumes returned are skipped, which may be all that
        follow)."""
        if self._batched and self._batch_pos + 1 < len(self._batch) and not self._dropped:
            return False
        if not self.started:
            return True
        return not self.exhausted and any(not (stream.loaded and stream.page_key is None)
                                          for stream in self._streams)

    def read_ahead_due(self) -> bool:
        """Whether :meth:`items_left` would send (or wait for) a request now: no item is held,
        no answer is kept for the items returned, and some shard may have a next page."""
        if self.exhausted or not self.started:
            return False
        if self._items_left is not None and self._items_left[0] == self.returned:
            return False
        if self._batched and self._batch_pos < len(self._batch):
            return False
        streams = self._streams
        if any(stream.index < len(stream.items) for stream in streams):
            return False
        return any(not (stream.loaded and stream.page_key is None) for stream in streams)

    def _read_ahead(self) -> bool:
        self._leave_parents_threads()  # a forked child never sees its parent's requests complete
        streams = self._streams
        if any(stream.index < len(stream.items) for stream in streams):
            return True
        if any(stream.shard in self._shadowed and not (stream.loaded and stream.page_key is None)
               for stream in streams):
            return True  # an item leaving a stream read first meanwhile: only a read in order would tell
        for stream in streams:
            if stream.loaded and stream.page_key is None:
                continue  # read to its end
            start = stream.next_start()
            page = self._held_next_page(stream)
            while True:
                if page is None:
                    self.requests += 1
                    page = self._fetch_page(stream.shard, start)
                if any(not self._returned_copy(stream, item) for item in page.items):
                    return True
                start = page.last_evaluated_key
                if start is None:
                    break
                page = None
        return False

    @staticmethod
    def _held_next_page(stream: _ShardStream) -> Page | None:
        """The page already requested for ``stream``'s next start, if that request went through."""
        pending = stream.pending
        if pending is None or pending.cancelled():
            return None
        try:
            return pending.result()
        except Exception:  # cancelled meanwhile, or failed: ask again
            return None
        except BaseException:
            if pending.done():  # the request itself was cancelled (a task of an event loop, at close)
                return None
            raise  # the wait was interrupted: the caller's own cancellation

    def _returned_copy(self, stream: _ShardStream, item: RawItem) -> bool:
        """Whether ``item`` of a shadowed stream is a copy of an item already returned."""
        if stream.shard not in self._shadowed or self._tie_value is _NOTHING:
            return False
        return self._sort_key(item) == self._tie_value and self._identity(item) in self._tie_ids

    def _key_of(self, item: RawItem) -> RawKey:
        return {name: item[name] for name in self._key_names}

    def close(self) -> None:
        """Cancel outstanding requests (the pool's threads serve other queries); idempotent."""
        self.closed = True
        self._heap = []
        self._batch, self._batch_pos = [], 0
        self._loading = []
        if self._on_close is not None:
            self._on_close()
        self._leave_parents_threads()
        if self._finalizer is not None:
            self._finalizer()


class _Process:
    """This process's id, kept current across forks without a system call per item."""

    pid = os.getpid()

    @classmethod
    def forked(cls) -> None:
        cls.pid = os.getpid()


_process = _Process


at_fork(after_in_child=_Process.forked)


def _shard_and_item(shard: int, item: RawItem) -> tuple[int, RawItem]:
    return shard, item


def _shutdown(submitter: BoundedSubmitter, streams: Sequence[_ShardStream], pid: int) -> None:
    if os.getpid() != pid:
        return  # a forked child: the pool and its futures belong to the parent's threads
    submitter.cancel_queued()
    for stream in streams:
        if stream.pending is not None:
            stream.pending.cancel()
