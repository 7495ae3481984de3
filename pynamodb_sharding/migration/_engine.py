"""The engine every job runs on: parallel scan by segment, batched writes, moves, checkpoints.

A job's table is read with DynamoDB's parallel scan (``Segment``/``TotalSegments``), one page
at a time and with consistent reads. For each page the engine asks the job what to do with
each item (:mod:`pynamodb_sharding.migration._jobs`), writes copies with ``BatchWriteItem``
(25 puts a request, unprocessed items retried, throttles backed off and retried, never
dropped), runs each move as its own transaction, and only then records the page's checkpoint
(:mod:`pynamodb_sharding.migration._checkpoints`). Segments run in this process or in ``workers``
forked processes; ``segment=`` runs one segment for an external scheduler. ``rate`` caps the
write units per second of the whole job (split evenly between worker processes).
"""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import random
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import attrs
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as EndpointUnreachable

from pynamodb_sharding._exceptions import MigrationError, ShardKeyError
from pynamodb_sharding._host import botocore_client, reset_connection, unchanged_condition
from pynamodb_sharding._sizes import item_write_units, transaction_write_units
from pynamodb_sharding._throttling import classify
from pynamodb_sharding.migration._checkpoints import DEFAULT_CHECKPOINT_TABLE, Checkpoint, CheckpointStore
from pynamodb_sharding.migration._jobs import CompactJob, Job, Move, Put, ReshardJob, Rewrite, StoredItem, Wait
from pynamodb_sharding.migration._progress import MigrationReport, NullProgress, ProgressSink, Tally

_T = TypeVar("_T")

__all__ = ["JobOptions", "RateLimiter", "current_pass", "item_write_units", "run", "run_segment"]

#: Items per ``BatchWriteItem`` request (DynamoDB's maximum).
BATCH_SIZE = 25
_CONDITION_FAILED = "ConditionalCheckFailed"
_RETRYABLE_CANCELLATIONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


@attrs.frozen
class JobOptions:
    """How a job runs.

    Args:
        total_segments: parallel-scan segments the table is split into (part of the job's
            identity: a re-run with the same number resumes).
        segment: run only this segment (``0..total_segments - 1``), for external schedulers;
            ``None``: every segment not done yet.
        workers: processes running segments at once on this machine.
        rate: write units per second for the whole job; ``None``: unlimited.
        page_size: items per scan page (a checkpoint is written after each page).
        threads: requests in flight per process (batches or moves of one page).
        checkpoint_table: the DynamoDB table holding checkpoints (created if missing).
        pass_name: names the pass of the job that this run belongs to, for external schedulers
            (every segment's run of one Kubernetes Job or Batch array passes the same name, e.g.
            the Job's name): runs of one name resume each other, a new name starts a new pass.
            ``None``: a run without ``segment`` resumes the job's unfinished pass, or starts a new
            pass when the last one finished; a run with ``segment`` works in the current pass.
    """

    total_segments: int = 4
    segment: int | None = None
    workers: int = 1
    rate: float | None = None
    page_size: int = 500
    threads: int = 4
    checkpoint_table: str = DEFAULT_CHECKPOINT_TABLE
    pass_name: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.total_segments < 1:
            msg = f"total_segments must be at least 1, got {self.total_segments}."
            raise MigrationError(msg)
        if self.segment is not None and not 0 <= self.segment < self.total_segments:
            msg = (
                f"segment {self.segment} is outside 0..{self.total_segments - 1}; segments are numbered "
                f"from 0 (a Kubernetes JOB_COMPLETION_INDEX, an AWS_BATCH_JOB_ARRAY_INDEX)."
            )
            raise MigrationError(msg)
        if self.workers < 1 or self.page_size < 1 or self.threads < 1:
            msg = "workers, page_size and threads must be at least 1."
            raise MigrationError(msg)
        if self.pass_name is not None and (not self.pass_name or "#" in self.pass_name):
            msg = f"pass_name must be a non-empty name without '#', got {self.pass_name!r}."
            raise MigrationError(msg)
        if self.rate is not None and self.rate <= 0:
            msg = f"rate must be a positive number of write units per second, got {self.rate}."
            raise MigrationError(msg)


# -- write units and the rate limit ---------------------------------------------------------


class RateLimiter:
    """A token bucket of write units: ``acquire(n)`` waits until ``n`` units are available.

    The burst is one second of ``rate``; thread-safe; ``clock`` and ``sleep`` are injectable.
    """

    def __init__(self, rate: float | None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self._tokens = rate or 0.0
        self._at = clock()
        self._lock = threading.Lock()

    def acquire(self, units: float) -> None:
        if self.rate is None:
            return
        while True:
            with self._lock:
                now = self.clock()
                self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
                self._at = now
                # A request larger than the burst goes when the bucket is full.
                if self._tokens >= min(units, self.rate):
                    self._tokens -= units
                    return
                wait = (min(units, self.rate) - self._tokens) / self.rate
            self.sleep(wait)


# -- sending ----------------------------------------------------------------------------------


@attrs.define
class _Backoff:
    """Exponential backoff with jitter for throttles and unprocessed items; never gives up early."""

    sleep: Callable[[float], None] = time.sleep
    base: float = 0.05
    cap: float = 5.0
    max_attempts: int = 1000
    attempt: int = 0

    def wait(self, what: str) -> None:
        self.attempt += 1
        if self.attempt >= self.max_attempts:
            msg = (f"{what} was still throttled after {self.attempt} attempts; nothing past the last "
                   f"checkpoint is recorded as done: re-run the job (it resumes) when capacity allows.")
            raise MigrationError(msg)
        self.sleep(random.uniform(0, min(self.cap, self.base * 2 ** min(self.attempt, 20))))

    def send(self, what: str, request: Callable[[], _T]) -> _T:
        """``request()``, sent again after a wait while it times out, loses its connection or is
        throttled (every request of a job is safe to send again); any other error is raised."""
        while True:
            try:
                return request()
            except _NETWORK_ERRORS:
                self.wait(what)
            except ClientError as error:
                if not _is_throttle(error):
                    raise
                self.wait(what)


#: Requests that timed out or lost their connection after botocore's own retries: every
#: request of a job can be sent again safely (puts overwrite the same key, a move's token makes
#: it one transaction, scans and reads change nothing), so they are retried like throttles.
_NETWORK_ERRORS = (HTTPClientError, EndpointUnreachable)


def _is_throttle(error: BaseException) -> bool:
    return classify(error).is_throttle


def _consumed(reply: Mapping[str, Any]) -> float:
    capacity = reply.get("ConsumedCapacity") or []
    if isinstance(capacity, Mapping):
        capacity = [capacity]
    return float(sum(entry.get("CapacityUnits", 0.0) for entry in capacity))


class _Sender:
    """Sends one process's writes: batched puts and transactional moves, rate-limited, retried."""

    def __init__(self, job: Job, limiter: RateLimiter, sleep: Callable[[float], None] = time.sleep) -> None:
        self.job = job
        self.client = botocore_client(job.target.model)
        self.table = job.target.table
        self.limiter = limiter
        self.sleep = sleep

    def put_batch(self, puts: Sequence[Put]) -> Tally:
        """Write up to 25 items; retry unprocessed ones and throttled requests until all are written."""
        tally = Tally()
        pending = [{"PutRequest": {"Item": put.item}} for put in puts]
        self.limiter.acquire(sum(item_write_units(put.item) for put in puts))
        backoff = _Backoff(self.sleep)
        what = f"a batch write to {self.table!r}"
        while pending:
            reply = backoff.send(what, functools.partial(
                self.client.batch_write_item, RequestItems={self.table: pending}, ReturnConsumedCapacity="TOTAL"))
            tally.units += _consumed(reply)
            left = (reply.get("UnprocessedItems") or {}).get(self.table) or []
            if left:
                backoff.wait(what)
            pending = left
        tally.written = len(puts)
        return tally

    def move(self, move: Move) -> Tally:
        """Move one item in one transaction; retried on conflicts and throttles.

        The put of the new copy requires its key to be free; the delete of the old copy
        requires it to be unchanged (every attribute as read). If the old copy changed, it is
        read again and moved as it is now; if it is gone, another worker moved or deleted it.
        A taken target key tries the next candidate shard, and is a conflict when none is left.
        """
        if move.legacy:
            return self._move_legacy(move)
        layout = self.job.target
        item, tally = move.item, Tally()
        candidates = list(move.new_hash_keys)
        backoff = _Backoff(self.sleep)
        nonce = uuid.uuid4().hex  # this move's attempts share a token; another move of the item does not
        while True:
            self.limiter.acquire(transaction_write_units([item, item]))  # a transaction's put and delete
            target_item = {**item, layout.hash_name: {"S": candidates[0]}}
            try:
                reply = self.client.transact_write_items(
                    TransactItems=_move_request(layout.model, self.table, layout.hash_name, move.old_key, item,
                                                target_item),
                    ClientRequestToken=_token(self.table, move.old_key, target_item, nonce),
                    ReturnConsumedCapacity="TOTAL",
                )
            except _NETWORK_ERRORS:
                backoff.wait(f"a move in {self.table!r}")
                continue
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code")
                if code != "TransactionCanceledException":
                    if _is_throttle(error):
                        backoff.wait(f"a move in {self.table!r}")
                        continue
                    raise
                reasons = [r.get("Code") for r in error.response.get("CancellationReasons", [])]
                put_reason, delete_reason = ([*reasons, None, None])[:2]
                if put_reason in _RETRYABLE_CANCELLATIONS or delete_reason in _RETRYABLE_CANCELLATIONS:
                    backoff.wait(f"a move in {self.table!r}")
                    continue
                if delete_reason == _CONDITION_FAILED:
                    fresh = self._read(move.old_key, tally)
                    replanned = None if fresh is None else self.job.plan(fresh)
                    if not isinstance(replanned, Move):  # moved or deleted by someone else meanwhile
                        tally.skipped += 1
                        return tally
                    # Changed by the application: move it as it is now (its shard may depend on
                    # what changed, e.g. an attribute HashedShards derives it from).
                    item, candidates = replanned.item, list(replanned.new_hash_keys)
                    continue
                if put_reason == _CONDITION_FAILED:
                    candidates.pop(0)
                    if candidates:
                        continue
                    tally.conflicts += 1
                    tally.conflict_keys.append(f"{move.logical_key} ({_describe_key(move.old_key)})")
                    return tally
                raise
            # What DynamoDB bills the transaction (DynamoDB Local reports less), as the dry run
            # estimates it.
            tally.units += max(_consumed(reply), float(transaction_write_units([target_item, item])))
            tally.moved += 1
            return tally

    def rewrite(self, rewrite: Rewrite) -> Tally:
        """Set one item's index entry with one UpdateItem, applied only while the item still
        holds the value the job read; retried on throttles, lost replies and server errors.

        A failed condition means the application wrote the item meanwhile, and its write wins
        (skipped), unless the item now holds what this rewrite sets: an attempt whose reply was
        lost applied it (botocore's retries, or ours), so it counts as written.
        """
        tally = Tally()
        names = {"#a": rewrite.attribute}
        values: dict[str, Any] = {":read": rewrite.expected}
        conditions = ["#a = :read"]
        sets = []
        for number, (name, value) in enumerate(sorted(rewrite.values.items())):
            names[f"#s{number}"] = name
            values[f":s{number}"] = value
            sets.append(f"#s{number} = :s{number}")
        for number, name in enumerate(rewrite.absent):
            names[f"#x{number}"] = name
            conditions.append(f"attribute_not_exists(#x{number})")
        self.limiter.acquire(rewrite.units)
        backoff = _Backoff(self.sleep)
        while True:
            try:
                reply = self.client.update_item(
                    TableName=self.table, Key=rewrite.key, UpdateExpression="SET " + ", ".join(sets),
                    ConditionExpression=" AND ".join(conditions), ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values, ReturnConsumedCapacity="TOTAL",
                )
            except _NETWORK_ERRORS:
                backoff.wait(f"an index rewrite in {self.table!r}")
                continue
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    current = self._read(rewrite.key, tally)
                    if current is not None and all(current.get(name) == value
                                                   for name, value in rewrite.values.items()):
                        tally.written += 1  # an attempt whose reply was lost applied it
                    else:
                        tally.skipped += 1  # the application wrote the item meanwhile: its write wins
                    return tally
                # A server error (5xx) may or may not have been applied: the conditional update is
                # safe to send again either way.
                server_error = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500
                if not (server_error or _is_throttle(error)):
                    raise
                backoff.wait(f"an index rewrite in {self.table!r}")
                continue
            tally.units += _consumed(reply)
            tally.written += 1
            return tally

    def _move_legacy(self, move: Move) -> Tally:
        """A bare legacy item goes through :func:`~pynamodb_sharding.legacy.move_legacy_item`
        (one transaction; it also settles a sharded copy the application wrote meanwhile)."""
        from pynamodb_sharding.legacy import MoveCapacity, MoveOutcome, move_and_count

        tally = Tally()
        old_item = {**move.item, self.job.target.hash_name: move.old_key[self.job.target.hash_name]}
        self.limiter.acquire(transaction_write_units([old_item, old_item]))
        backoff = _Backoff(self.sleep)
        capacity = MoveCapacity()  # every attempt's requests, also those of an attempt that raised
        while True:
            try:
                outcome = move_and_count(self.job.target.model, old_item, capacity)
            except _NETWORK_ERRORS:
                backoff.wait(f"a legacy move in {self.table!r}")
                continue
            except ClientError as error:
                if not _is_throttle(error):
                    raise
                backoff.wait(f"a legacy move in {self.table!r}")
                continue
            break
        tally.units += capacity.write_units
        tally.read_units += capacity.read_units
        if outcome is MoveOutcome.MOVED:
            tally.moved += 1
        else:  # already moved, deleted, or shadowed by a sharded copy (whose stale legacy copy went)
            tally.skipped += 1
        return tally

    def _read(self, key: StoredItem, tally: Tally) -> StoredItem | None:
        reply = _Backoff(self.sleep).send(f"a read of {self.table!r}", lambda: self.client.get_item(
            TableName=self.table, Key=key, ConsistentRead=True, ReturnConsumedCapacity="TOTAL"))
        tally.read_units += _consumed(reply)
        item: StoredItem | None = reply.get("Item")
        return item


def _describe_key(key: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={next(iter(value.values()))!r}" for name, value in key.items())


def _token(table: str, old_key: Mapping[str, Any], new_item: Mapping[str, Any], nonce: str) -> str:
    """The same move sent again (a lost reply, botocore's retry) is the same transaction.

    DynamoDB remembers a token for 10 minutes per account and region: the table is part of it,
    so the same item moved in another table (a staging copy) is another transaction, and so is
    ``nonce``, one per move: an item written back with the same values and moved again within
    those minutes would otherwise be answered with the earlier move's success, and not moved.
    """
    text = repr((table, sorted(old_key.items()), sorted(new_item.items()), nonce))
    digest = hashlib.sha256(text.encode()).hexdigest()
    return digest[:36]


def _move_request(model: type[Any], table: str, hash_name: str, old_key: StoredItem, old_item: StoredItem,
                  new_item: StoredItem) -> list[dict[str, Any]]:
    """A move's transaction: put ``new_item`` where no item is, delete the old copy only if it
    is as read (:func:`~pynamodb_sharding._host.unchanged_condition`)."""
    keys = (hash_name, *(name for name in old_key if name != hash_name))
    delete = {"TableName": table, "Key": old_key, **unchanged_condition(model, old_item, keys)}
    put = {
        "TableName": table,
        "Item": new_item,
        "ConditionExpression": "attribute_not_exists(#h)",
        "ExpressionAttributeNames": {"#h": hash_name},
    }
    return [{"Put": put}, {"Delete": delete}]


# -- one segment --------------------------------------------------------------------------------


def _scan_page(job: Job, segment: int, total: int, position: StoredItem | None, page_size: int,
               sleep: Callable[[float], None]) -> dict[str, Any]:
    client = botocore_client(job.source.model)
    request: dict[str, Any] = {"TableName": job.source.table, "Segment": segment, "TotalSegments": total,
                               "Limit": page_size, "ConsistentRead": True}
    if position is not None:
        request["ExclusiveStartKey"] = position
    page: dict[str, Any] = _Backoff(sleep).send(f"a scan of {job.source.table!r}", lambda: client.scan(**request))
    return page


def _plan_page(job: Job, items: Iterable[StoredItem]) -> tuple[list[Put], list[Move], list[Rewrite], Tally]:
    puts: list[Put] = []
    moves: list[Move] = []
    rewrites: list[Rewrite] = []
    tally = Tally()
    for item in items:
        tally.read += 1
        try:
            action = job.plan(item)
        except ShardKeyError:
            tally.undecodable += 1
            tally.undecodable_keys.append(_describe_key(job.source.key_of(item)))
            continue
        if action is None:
            tally.skipped += 1
        elif isinstance(action, Wait):
            tally.waiting += 1
        elif isinstance(action, Put):
            puts.append(action)
        elif isinstance(action, Rewrite):
            rewrites.append(action)
        else:
            moves.append(action)
    return puts, moves, rewrites, tally


def _batches(puts: Sequence[Put], hash_name: str, range_name: str | None) -> list[list[Put]]:
    """Groups of at most 25 puts, none writing one key twice (BatchWriteItem refuses that)."""
    batches: list[list[Put]] = []
    current: list[Put] = []
    keys: set[tuple[Any, ...]] = set()
    for put in puts:
        key = (repr(put.item[hash_name]), repr(put.item.get(range_name)) if range_name else None)
        if len(current) == BATCH_SIZE or key in keys:
            batches.append(current)
            current, keys = [], set()
        current.append(put)
        keys.add(key)
    if current:
        batches.append(current)
    return batches


def current_pass(job: Job, options: JobOptions, store: CheckpointStore, *, new_when_done: bool = False) -> str:
    """The checkpoint key of the pass of ``job`` a run works in.

    A pass is one scan of the whole table. Runs of a pass resume it after a kill; a run
    without ``options.segment`` that finds the current pass finished starts a new one (with
    ``new_when_done``), so a job run again after it finished runs again: a compaction moves
    what writers put above the count since, a copy catches up with the source.
    ``options.pass_name`` names the pass instead (external schedulers).

    .. versionadded:: 0.1.0
    """
    base = job.job_id(options.total_segments)
    if options.pass_name is not None:
        return f"{base}#{options.pass_name}"
    generation = store.generation(base)
    key = f"{base}#{generation}"
    if new_when_done and all(c.done for c in store.load_all(key, options.total_segments)):
        return f"{base}#{store.advance(base, generation)}"
    return key


def run_segment(job: Job, segment: int, total_segments: int, store: CheckpointStore, *,
                options: JobOptions | None = None, limiter: RateLimiter | None = None,
                progress: ProgressSink | None = None, sleep: Callable[[float], None] = time.sleep,
                pass_key: str | None = None) -> Tally:
    """Run one segment of ``job`` from its checkpoint to its end; returns this run's counts.

    Safe to run again at any point (also after a kill): it resumes after the last page whose
    writes all completed, and redoing a page changes nothing. ``pass_key`` is the pass to work
    in (:func:`current_pass`), default the job's current pass.
    """
    options = options or JobOptions()
    progress = progress or NullProgress()
    limiter = limiter or RateLimiter(options.rate)
    if total_segments != options.total_segments:
        options = attrs.evolve(options, total_segments=total_segments, segment=None)
    job_id = pass_key if pass_key is not None else current_pass(job, options, store)
    checkpoint = store.load(job_id, segment)
    total = Tally()
    if checkpoint.done:
        return total
    counts = dict(checkpoint.counts)
    position = checkpoint.position
    sender = _Sender(job, limiter, sleep)
    with ThreadPoolExecutor(max_workers=options.threads, thread_name_prefix="migrate") as pool:
        while True:
            page = _scan_page(job, segment, total_segments, position, options.page_size, sleep)
            puts, moves, rewrites, tally = _plan_page(job, page.get("Items", []))
            batches = _batches(puts, job.target.hash_name, job.target.range_name)
            for result in pool.map(sender.put_batch, batches):
                tally.add(result)
            for result in pool.map(sender.move, moves):
                tally.add(result)
            for result in pool.map(sender.rewrite, rewrites):
                tally.add(result)
            position = page.get("LastEvaluatedKey")
            for name, value in tally.counts().items():
                counts[name] = counts.get(name, 0) + value
            store.save(job_id, Checkpoint(segment=segment, position=position, done=position is None,
                                          counts=counts))
            total.add(tally)
            progress.advance(tally)
            if position is None:
                progress.segment_done()
                return total


# -- a whole job ------------------------------------------------------------------------------


def _checkpoint_store(job: Job, options: JobOptions) -> CheckpointStore:
    store = CheckpointStore(botocore_client(job.source.model), options.checkpoint_table)
    store.ensure_table()
    return store


def _estimated_items(job: Job) -> int | None:
    try:
        table = botocore_client(job.source.model).describe_table(TableName=job.source.table)["Table"]
    except ClientError:
        return None
    count = table.get("ItemCount")
    return int(count) if count else None


def run(job: Job, options: JobOptions | None = None, *, progress: ProgressSink | None = None,
        sleep: Callable[[float], None] = time.sleep) -> MigrationReport:
    """Run ``job``: every segment not done yet (or only ``options.segment``), then its final step.

    The final step of :class:`~pynamodb_sharding.migration._jobs.CompactJob` (trimming shard
    histories) runs once every segment of the job is done, by whichever run finds them done.

    Returns:
        The report of this run (a resumed job counts only what this run did).
    """
    options = options or JobOptions()
    progress = progress or NullProgress()
    started = time.monotonic()
    store = _checkpoint_store(job, options)
    total_segments = options.total_segments
    job_id = current_pass(job, options, store, new_when_done=options.segment is None)
    wanted = [options.segment] if options.segment is not None else list(range(total_segments))
    checkpoints = {c.segment: c for c in store.load_all(job_id, total_segments)}
    pending = [segment for segment in wanted if not checkpoints[segment].done]
    progress.start(total_segments, total_segments - sum(1 for c in checkpoints.values() if not c.done),
                   _estimated_items(job))
    tally = Tally()
    if options.workers == 1 or len(pending) <= 1:
        limiter = RateLimiter(options.rate)
        for segment in pending:
            tally.add(run_segment(job, segment, total_segments, store, options=options, limiter=limiter,
                                  progress=progress, sleep=sleep, pass_key=job_id))
    else:
        tally.add(_run_in_processes(job, pending, options, progress, job_id))
    done = sum(1 for c in store.load_all(job_id, total_segments) if c.done)
    report = MigrationReport(job=job.describe(), tally=tally, duration=time.monotonic() - started,
                             segments_done=done, total_segments=total_segments)
    if tally.waiting:
        report.notes.append(_waiting_note(job, tally.waiting))
    if done == total_segments and isinstance(job, CompactJob):
        from pynamodb_sharding.migration._compaction import trim_histories

        report.notes.extend(trim_histories(job, left_waiting=tally.waiting > 0))
    progress.finish(report)
    return report


def _waiting_note(job: Job, waiting: int) -> str:
    ttl = job._ttl() if isinstance(job, ReshardJob) else 0.0
    return (f"waiting:    {waiting} items were left in shards above their key's count, which changed less "
            f"than the metadata cache TTL plus clock skew ({ttl:g} s) ago (a writer may still use the old "
            f"count): run the job again after that; it moves them.")


# -- worker processes ---------------------------------------------------------------------------


class _QueueProgress:
    """A worker's progress, forwarded to the parent process."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def start(self, total_segments: int, segments_done: int, estimated_items: int | None) -> None:
        pass

    def advance(self, tally: Tally) -> None:
        self.queue.put(("advance", attrs.asdict(tally)))

    def segment_done(self) -> None:
        self.queue.put(("segment", None))

    def finish(self, report: MigrationReport) -> None:
        pass


def _worker(job: Job, segments: Any, events: Any, options: JobOptions, rate: float | None, pass_key: str) -> None:
    try:
        for model in job.models:  # connections made before the fork belong to the parent
            reset_connection(model)
        store = CheckpointStore(botocore_client(job.source.model), options.checkpoint_table)
        limiter = RateLimiter(rate)
        sink = _QueueProgress(events)
        tally = Tally()
        while True:
            segment = segments.get()
            if segment is None:
                break
            tally.add(run_segment(job, segment, options.total_segments, store, options=options,
                                  limiter=limiter, progress=sink, pass_key=pass_key))
        events.put(("exit", attrs.asdict(tally)))
    except BaseException:
        events.put(("error", traceback.format_exc()))


def _run_in_processes(job: Job, pending: list[int], options: JobOptions, progress: ProgressSink,
                      pass_key: str) -> Tally:
    context = multiprocessing.get_context("fork")
    segments: Any = context.Queue()
    events: Any = context.Queue()
    workers = min(options.workers, len(pending))
    for segment in pending:
        segments.put(segment)
    for _ in range(workers):
        segments.put(None)
    rate = options.rate / workers if options.rate is not None else None
    processes = [context.Process(target=_worker, args=(job, segments, events, options, rate, pass_key), daemon=True)
                 for _ in range(workers)]
    for process in processes:
        process.start()
    tally, errors, running = Tally(), [], workers
    try:
        while running:
            kind, payload = events.get()
            if kind == "advance":
                progress.advance(Tally(**payload))
            elif kind == "segment":
                progress.segment_done()
            elif kind == "exit":
                tally.add(Tally(**payload))
                running -= 1
            else:
                errors.append(payload)
                running -= 1
    finally:
        for process in processes:
            process.join(timeout=30)
    if errors:
        msg = f"a worker process failed; finished segments are checkpointed, re-run to resume:\n{errors[0]}"
        raise MigrationError(msg)
    return tally
