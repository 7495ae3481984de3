"""Merged fan-out reads: the entry points ``ShardedModel.query`` and ``count`` call.

A query of a sharded key is one DynamoDB Query per shard. :func:`merged_query` plans them
(:mod:`~pynamodb_sharding._query_plan`), sends them in parallel on a bounded thread pool
(:mod:`~pynamodb_sharding._shard_requests`), merges their pages in sort-key order as they stream
in (:mod:`~pynamodb_sharding._merge`) and returns the iterators users see
(:mod:`~pynamodb_sharding._merged_results`), with one cursor (:mod:`~pynamodb_sharding._cursor`).
A request that fails is sent again by the next ``next()``, and a process forked mid-query sends
the requests its parent's threads had in flight again, so neither ends a merged query early nor
makes it hang. :func:`merged_count` sums the shards' counts in parallel.
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from pynamodb.constants import CAMEL_COUNT, LAST_EVALUATED_KEY
from pynamodb.expressions.condition import Condition

from pynamodb_sharding._conditions import Usage, rewrite_condition
from pynamodb_sharding._cursor import (
    CursorState,
    MergePosition,
    RawItem,
    RawKey,
    RawValue,
    TokenCodec,
    decode_cursor,
    item_digest,
)
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._exceptions import ShardKeyError, caller_stacklevel
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._host import table_connection
from pynamodb_sharding._indexes import sharded_index
from pynamodb_sharding._keys import FIRST_READ, LEGACY_SHARD
from pynamodb_sharding._merge import (
    SHARE_SLACK,
    STARTS_AT_POSITION,
    UNKNOWN_PLACE,
    Page,
    ShardMerge,
    SortValue,
    Start,
    sort_value,
)
from pynamodb_sharding._merged_results import MergedResultIterator
from pynamodb_sharding._point_reads import (
    index_entries,
    leaves_out_keys,
    with_key_attributes,
    without_stale_bare_copies,
)
from pynamodb_sharding._pool import (
    BoundedSubmitter,
    fanout_size_source,
    fanout_submit,
    fanout_threads,
    on_event_loop,
)
from pynamodb_sharding._query_plan import (
    MAX_DEFAULT_WORKERS,
    SHARE_MIN_PER_SHARD,
    QueryPlan,
    QuerySpec,
    admits,
    closed_end,
    copies_of_moving_items,
    default_page_size,
    default_workers,
    first_share,
    plan_query,
    range_end,
    with_class_filter,
)
from pynamodb_sharding._shard_requests import EarlyFirstPages, QueryTrace, ReadFirst, ShardQuery, as_page, traced

if TYPE_CHECKING:
    from pynamodb.models import Model

__all__ = ["FanoutPoolWarning", "count_by_shard", "merged_count", "merged_query"]

_M = TypeVar("_M", bound="Model")

class FanoutPoolWarning(UserWarning):
    """A merged query runs more threads than the model's botocore connection pool holds, or
    asks for more (``max_workers``) than the shared fan-out pool's size that was set."""


_warned_pools: set[tuple[str, str]] = set()
_warned_threads: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _reset_lock_in_child() -> None:
    """Give a forked child a fresh lock: a thread of the parent may have held it at the fork."""
    global _warned_lock  # replaced, not mutated: the old one may be held forever
    _warned_lock = threading.Lock()


at_fork(after_in_child=_reset_lock_in_child)


def _check_pool(model: type[Any], workers: int) -> None:
    """Warn once per model when its merged reads may run more requests than it has connections.

    The requests in flight are this read's ``workers`` plus those of the model's other merged
    queries still open in the process (web servers run many at once), at most the size of the
    shared fan-out pool.
    """
    if on_event_loop() is not None:  # on an event loop: the loop's tasks and connections
        return
    _check_threads(model, workers)
    pool = getattr(model.Meta, "max_pool_connections", None)
    if pool is None:
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
    warnings.warn(msg, FanoutPoolWarning, stacklevel=caller_stacklevel())


def _check_threads(model: type[Any], workers: int) -> None:
    """Warn once per model when a merged read asks for more requests at once (its declared or
    given ``max_workers``) than the shared pool runs: its pages then take more round trips than
    the declaration says. (Without a size set, the pool grows to the largest ``max_workers``
    declared, so this is a size set below it, or a ``max_workers`` given to one call.)"""
    threads = fanout_threads()
    if workers <= threads or (workers <= MAX_DEFAULT_WORKERS and shard_manager(model).max_workers is None):
        return  # within the pool, or the default min(32, shards) under a pool set smaller on purpose
    key = (model.__module__, model.__qualname__)
    with _warned_lock:
        if key in _warned_threads:
            return
        _warned_threads.add(key)
    source = fanout_size_source()
    if source == "set_fanout_threads":
        fix = (f"call set_fanout_threads({workers}) instead, or set_fanout_threads(None) to let the pool grow "
               f"to the largest max_workers declared")
    elif source is not None:
        fix = f"set {source}={workers}, or unset it to let the pool grow to the largest max_workers declared"
    else:
        fix = (f"declare Sharding(..., max_workers={workers}) on the model (the pool grows to it) or call "
               f"pynamodb_sharding.set_fanout_threads({workers}) at start-up")
    msg = (
        f"{model.__name__}: a merged read asks for {workers} shard requests at once (max_workers) but the "
        f"shared fan-out pool has {threads} threads"
        f"{f' ({source})' if source is not None else ''}, so it runs {threads} at a time and a page over "
        f"more shards takes more round trips; {fix}; or lower max_workers."
    )
    warnings.warn(msg, FanoutPoolWarning, stacklevel=caller_stacklevel())


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



#: ``observer(model, index_name, shards, operation)`` returns the read's :class:`QueryTrace`.
query_observer: Callable[[type[Any], str | None, int, str], QueryTrace] | None = None



def merged_query(
    model: type[_M],
    spec: QuerySpec,
    *,
    shards: Sequence[int] | None = None,
    max_workers: int | None = None,
) -> MergedResultIterator[_M]:
    """Query every shard of ``spec.hash_key`` in parallel and merge the results in sort-key order.

    ``spec`` holds PynamoDB's ``Model.query``'s arguments. Items come in the order of the sort key
    (the index's range key for ``index_name``, else the table's), ties between shards broken by
    shard number; on a model without a range key, shard by shard. An index whose hash key is
    not the sharded attribute is not sharded: it is one plain query.

    Args:
        model: the sharded model class.
        spec: the query; its fields below.
        shards: the shards to read; default ``shard_manager(model).read_shards(hash_key)``.
        max_workers: threads; default ``model.shards.max_workers`` or ``min(32, shard count)``.

    Fields of ``spec``:
        hash_key: the logical hash key (or the index's hash key for an unsharded index).
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

    Returns:
        A :class:`MergedResultIterator` of model instances.

    Raises:
        CursorError: ``last_evaluated_key`` is not a cursor of this query.
        UnknownIndexError: the model has no index ``index_name``.
        ConsistentIndexReadError: ``consistent_read`` on a global secondary index.
    """
    hash_key, consistent_read, index_name = spec.hash_key, spec.consistent_read, spec.index_name
    scan_index_forward, limit, last_evaluated_key = spec.scan_index_forward, spec.limit, spec.last_evaluated_key
    attributes_to_get, page_size, rate_limit = spec.attributes_to_get, spec.page_size, spec.rate_limit
    forward = scan_index_forward is not False
    range_key_condition = rewrite_condition(model, spec.range_key_condition, Usage.KEY)
    filter_condition = rewrite_condition(model, spec.filter_condition, Usage.FILTER)
    query_options: dict[str, Any] = {
        "range_key_condition": range_key_condition,
        "filter_condition": with_class_filter(model, filter_condition),
        "consistent_read": consistent_read,
        "index_name": index_name,
        "scan_index_forward": scan_index_forward,
    }
    until = range_end(model, range_key_condition, index_name)
    # Made before the count is read (it reads nothing): see CountWatch.
    watch = shard_manager(model).count_watch(hash_key) if shards is None and index_name is None else None
    early = (EarlyFirstPages.start(model, hash_key, query_options, attributes_to_get, rate_limit=rate_limit,
                                    limit=limit, page_size=page_size, share_mode=filter_condition is None,
                                    max_workers=max_workers, first_only=until is not None)
             if shards is None and index_name is None and last_evaluated_key is None else None)
    plan = plan_query(model, hash_key, shards, index_name, consistent_read, forward, until=until)
    meta = table_connection(model).get_meta_table()
    table_sort = meta.range_keyname
    # What breaks a tie at a sort value: the item's table key, as stored.
    tie_names = (meta.hash_keyname, *(() if table_sort is None else (table_sort,)))
    state = CursorState()
    tokens = TokenCodec(plan.scope, plan.key_names, plan.hash_name, shard_manager(model).cursor_secrets(),
                        shard_name=plan.shard_name, sort_name=plan.sort_name, tie_names=tie_names,
                        tie_shard=tie_shard(model, hash_key) if index_name is None else None)
    if last_evaluated_key is not None:
        state = decode_cursor(last_evaluated_key, plan.scope, key_names=plan.key_names,
                              hash_name=plan.hash_name, hash_value=plan.hash_value, secrets=tokens.secrets,
                              shard_name=plan.shard_name, sort_name=plan.sort_name, tie_names=tie_names)
    starts = resume_starts(plan, state)
    after = state.after
    resume_at = None
    if after is not None and after.value is not None and plan.sort_name is not None:
        if admits(range_key_condition, after.value):
            resume_at = (plan.sort_name, after.value)
        else:
            # A cursor of a query under another range condition: DynamoDB refuses a start key
            # outside the range, as it refuses PynamoDB's.
            starts = outside_starts(plan, after)

    hash_values = dict(plan.hash_values)
    first_reads = plan.first_reads
    if watch is not None:
        watch.planned(planned_floor(model, plan.hash_values, first_reads))
    if first_reads:
        early = None  # its first page may have been read before the first reads: not used
    elif early is not None and not early.valid():
        early = None  # the count changed since the guess: the pages are read again
    size = page_size if page_size is not None else default_page_size(len(hash_values), limit)
    if early is not None:
        send = early.send
        send.page_size = size
    else:
        send = ShardQuery(model, rate_limit, **query_options, limit=size, replicas=not first_reads,
                          attributes_to_get=with_key_attributes(attributes_to_get, plan.key_names),
                          resume_at=resume_at)

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

    def fetch_page(shard: int, start: Start) -> Page:
        page = take_page(shard, start)
        if watch is not None:
            watch()  # a page taken while the key's count was lowered: stop before it is merged
        return page

    def take_page(shard: int, start: Start) -> Page:
        if first_reads:
            read_first.wait()
            first = read_first.take(shard, start) if shard in first_reads else None
            if first is not None:
                return first  # current() was applied before the other streams were read
        sent = early.take(shard, start, hash_values[shard]) if early is not None else None
        if sent is not None:
            return current(as_page(traced(trace, shard, sent.result)))
        data = traced(trace, shard, lambda: send(hash_values[shard], start))
        return current(as_page(data))

    def fetch_share(shard: int, start: Start, size: int) -> Page:
        sent = early.take(shard, start, hash_values[shard]) if early is not None else None
        if sent is not None:
            return current(as_page(traced(trace, shard, sent.result)))
        return current(as_page(traced(trace, shard, lambda: send(hash_values[shard], start, size))))

    def send_first(shard: int, start: Start) -> dict[str, Any]:
        return traced(trace, shard, lambda: send(hash_values[shard], start))

    read_first = ReadFirst(send_first, {shard: starts.get(shard) for shard in first_reads}, limit,
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
    # An index query tells copies of one item apart only where an item can have two entries for
    # a moment (a table item being moved, an entry being rewritten out of a bare value); else
    # its pages merge a batch at a time, as a table query's.
    moving = (copies_of_moving_items(model, index_name, meta.hash_keyname, table_sort)
              if first_reads or shard_manager(model).may_move_items else None)
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
                       sort_name=plan.sort_name, after=after, tie_names=tie_names,
                       # An adopted index's bare value: the application rewrites its entries into
                       # shards under new sort values while the query runs.
                       unique_streams=first_reads if index_name is not None else (),
                       unique_keys=shard_manager(model).keeps_keys_unique,
                       ties_are_copies=index_name is None,
                       tie_stream=(tie_streams(plan, meta.hash_keyname)
                                   if index_name is None and shards is None and plan.shard_name is None else None),
                       # Of whole items only: a digest of some attributes would tell a copy read
                       # with other attributes_to_get from the item, and two items from one.
                       tie_digest=(functools.partial(item_digest, left_out=meta.hash_keyname)
                                   if attributes_to_get is None else None),
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
                                filtered=query_options["filter_condition"] is not None,
                                last_value=(closed_end(range_key_condition, forward)
                                            if index_name is None and plan.sort_name is not None else None))


def tie_shard(model: type[Any], hash_key: Any) -> Callable[[RawValue], int | None]:
    """The shard of a physical key of ``hash_key`` (a table query's tie), else ``None``."""
    codec = shard_manager(model).codec

    def shard(value: RawValue) -> int | None:
        try:
            logical, number = codec.decode(value.get("S"))
        except ShardKeyError:
            return None
        return number if logical == hash_key else None

    return shard


def tie_streams(plan: QueryPlan, hash_name: str) -> Callable[[RawKey], int | None]:
    """The stream of a plan of every shard of its key that holds a cursor tie's place (its
    table key), ``None`` for a place the plan reads no more (``ShardMerge(tie_stream=...)``),
    :data:`UNKNOWN_PLACE` for a key that is not one of its shards' (not a string)."""
    streams: dict[str, int] = {}
    for shard, value in plan.hash_values.items():
        if str(value) not in streams or shard in plan.first_reads:  # a shard read first and again: first
            streams[str(value)] = shard

    def stream_of(key: RawKey) -> int | None:
        value = key.get(hash_name)
        stored = value.get("S") if isinstance(value, dict) else None
        return streams.get(stored) if isinstance(stored, str) else UNKNOWN_PLACE

    return stream_of


def resume_starts(plan: QueryPlan, state: CursorState) -> dict[int, Start]:
    """Where each stream of ``plan`` starts for a query resuming from ``state``.

    From a position (a cursor of this version, or plain PynamoDB's): a stream the cursor names
    resumes right after its own key, every other one at the position's sort value
    (:data:`~pynamodb_sharding._merge.STARTS_AT_POSITION`), where the merge skips what the
    position returned. From a version 1 cursor: each stream right after its own key, the others
    from their start.
    """
    if state.after is None:
        return {shard: state.positions.get(shard) for shard in plan.hash_values}
    return {shard: state.positions.get(shard, STARTS_AT_POSITION) for shard in plan.hash_values}


def outside_starts(plan: QueryPlan, after: MergePosition) -> dict[int, Start]:
    """Each stream's start key at a position its query's key condition does not admit: DynamoDB
    answers those with the error it gives a PynamoDB query resuming outside its range."""
    (kind,) = plan.scope.key
    tie = after.ties[-1].key if after.ties else {}
    starts: dict[int, Start] = {}
    for shard in plan.hash_values:
        start: RawKey = {**tie, plan.hash_name: {kind: plan.hash_value(shard)}}
        if plan.sort_name is not None and after.value is not None:
            start[plan.sort_name] = after.value
        if plan.shard_name is not None:
            start[plan.shard_name] = {"N": str(shard)}
        starts[shard] = start
    return starts


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
    key_condition = rewrite_condition(model, range_key_condition, Usage.KEY)
    until = range_end(model, key_condition, index_name)
    send = ShardQuery(
        model,
        rate_limit,
        range_key_condition=key_condition,
        filter_condition=with_class_filter(model, rewrite_condition(model, filter_condition, Usage.FILTER)),
        consistent_read=consistent_read,
        index_name=index_name,
        limit=limit,
        select="COUNT",
    )
    # Where finding the shards costs a request (a DynamicShards count read, or read again once
    # its cache expired), the shards this process last read are counted meanwhile, as a merged
    # query's first pages are; only those the count read names are added up.
    watch = manager.count_watch(hash_key) if shards is None and index_name is None else None
    early, version = (_early_counts(model, hash_key, send, limit, first_only=until is not None)
                      if shards is None and index_name is None and limit != 0 else ({}, None))
    moving = manager.legacy_unsharded or (
        shards is None and index_name is None and bool(manager.moving_out(hash_key)))
    if shards is None and moving:
        # An item may be moving to another shard meanwhile (a legacy item, a reshard or a
        # compaction): count what a merged query returns, each item once (the same reads:
        # DynamoDB charges what it reads, not sends). Counts sent early are not used.
        spec = QuerySpec(hash_key=hash_key, range_key_condition=range_key_condition,
                         filter_condition=filter_condition, consistent_read=consistent_read,
                         index_name=index_name, limit=limit, rate_limit=rate_limit,
                         attributes_to_get=list(shard_manager(model).key_names))
        merged = merged_query(model, spec, max_workers=max_workers)
        with merged:
            return sum(page[CAMEL_COUNT] for page in merged.page_iter)
    total = 0
    lock = threading.Lock()
    done = threading.Event()

    def count_shard(value: Any) -> None:
        nonlocal total
        start: RawKey | None = None
        while not done.is_set():
            data = send(value, start)
            if watch is not None:
                watch()
            with lock:
                total += data[CAMEL_COUNT]
                if limit is not None and total >= limit:
                    done.set()
            start = data.get(LAST_EVALUATED_KEY)
            if start is None:
                return

    plan = plan_query(model, hash_key, shards, index_name, consistent_read, True, until=until)
    if watch is not None:
        watch.planned(planned_floor(model, plan.hash_values, plan.first_reads))
    if early and not manager.early_pages_valid(hash_key, version):
        early = {}  # the count changed since the guess: those shards are counted again
    values = list(plan.hash_values.values())
    if not values or limit == 0:
        return 0
    workers = max_workers if max_workers is not None else default_workers(model, len(values))
    _check_pool(model, workers)
    observer = query_observer
    trace = observer(model, index_name, len(values), "count") if observer is not None else None
    submitter = BoundedSubmitter(workers)
    futures = []
    counted_early = []
    for shard, value in plan.hash_values.items():
        sent = early.pop(value, None)
        if sent is not None:
            counted_early.append(functools.partial(traced, trace, shard, sent.result))
        else:
            futures.append(submitter.submit(traced, trace, shard, functools.partial(count_shard, value)))
    try:
        for result in counted_early:
            counted = result()  # not under the lock: on an event loop this waits by yielding
            if watch is not None:
                watch()
            with lock:
                total += counted
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


def planned_floor(model: type[Any], hash_values: Mapping[int, Any], first_reads: Collection[int]) -> int:
    """What a merged read of a ``DynamicShards`` key was planned with, for its
    :class:`~pynamodb_sharding._dynamic.CountWatch`: the shards it reads first start at
    ``first shard + floor`` (a job may be emptying them); reading none first, ``floor`` is the
    number of its shards."""
    # A shard read first that the layout writes too is a stream of its own, FIRST_READ above it.
    moving = [shard - FIRST_READ if shard >= FIRST_READ else shard for shard in first_reads if shard != LEGACY_SHARD]
    if moving:
        return min(moving) - shard_manager(model).first_shard
    return sum(1 for shard in hash_values if shard != LEGACY_SHARD)


def _early_counts(model: type[Any], hash_key: Any, send: ShardQuery, limit: int | None, *,
                  first_only: bool) -> tuple[dict[Any, Future[int]], Any]:
    """The counts of the shards a ``count`` of ``hash_key`` probably reads, by physical key,
    started now when finding its shards costs a request (see :class:`EarlyFirstPages`), else
    none, with the version of the count they were started for. Each counts its shard alone,
    to ``limit`` at most."""
    manager = shard_manager(model)
    guess = manager.early_read_shard(hash_key)
    if guess is None:
        return {}, None
    first, likely, version = guess

    def count_alone(value: Any) -> int:
        counted, start = 0, None
        while limit is None or counted < limit:
            data = send(value, start)
            counted += data[CAMEL_COUNT]
            start = data.get(LAST_EVALUATED_KEY)
            if start is None:
                break
        return counted

    shards = [shard for shard in range(first, first + likely) if manager.codec.fits(hash_key, shard)]
    counts: dict[Any, Future[int]] = {}
    for shard in shards[:1 if first_only else default_workers(model, likely)]:
        value = manager.physical_key(hash_key, shard)
        counts[value] = fanout_submit(count_alone, value)
    return counts, version


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
    plan = plan_query(model, hash_key, shards, None, consistent_read, True)
    if not plan.hash_values:
        return {}
    send = ShardQuery(
        model,
        None,
        filter_condition=with_class_filter(model, None),
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

