"""A delivery list for millions of targets, walked by many workers, each target delivered once.

The design of the docs page "Delivering to millions exactly once":

* the target list is split into **chunk items** (``delivery_id``, ``order``) → ``user_ids``,
  each under DynamoDB's 400 KB item limit whatever the ids' lengths (the encoded size is
  measured); their key is sharded with :class:`~pynamodb_sharding.HashedShards` over the
  order, so writing a large delivery's chunks does not heat one partition;
* a **target item** (``user_id``, ``delivery_id``) exists until its target is delivered; taking
  it is a conditional delete, which succeeds once;
* a **progress item** holds the state of the creation, the next chunk to walk
  (``nextSequence``), the chunks claimed and not yet done, and the counts; a **lease item** per
  claimed chunk says which worker holds it until when, so a crashed worker's chunk is taken
  over once its lease expires;
* a **failure item** (``delivery_id`` sharded over the user id, ``user_id``) holds a target whose
  send kept failing, with its error, until :meth:`Delivery.resend_failed` delivers it.

``create()`` writes the progress item **first**, conditionally, as a reservation that carries a
creation token (a digest of the chunks): a create of an id that exists with other targets
writes nothing, and a create with the same targets (a retry, or botocore resending after a lost
reply) is recognised. Target items are written in transactions that check the reservation is
still this call's and not finished, so no target item can be written once a walk may have
taken it. A walk is refused until the target items are written.

Every read that decides a delivery is strongly consistent, and every take is a
``TransactWriteItems`` with a client request token, which DynamoDB applies once even when
botocore resends it after a lost reply.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pynamodb.attributes import Attribute, NumberAttribute, NumberSetAttribute, UnicodeAttribute
from pynamodb.constants import STRING
from pynamodb.exceptions import PutError, TransactWriteError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._exceptions import (
    DeliveryConflictError,
    DeliveryDataError,
    DeliveryExistsError,
    DeliveryInputError,
    DeliveryNotFoundError,
    DeliveryNotReadyError,
)
from pynamodb_sharding._host import table_connection
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._strategies import HashedShards

__all__ = [
    "MAX_ITEM_BYTES",
    "AtLeastOnce",
    "AtMostOnce",
    "Delivery",
    "DeliveryChunk",
    "DeliveryFailure",
    "DeliveryLease",
    "DeliveryMode",
    "DeliveryProgress",
    "DeliveryStatus",
    "DeliveryTarget",
    "ExactlyOnce",
    "ResendReport",
    "ResendingMode",
    "Retry",
    "WalkReport",
    "encode_target_ids",
    "split_into_chunks",
]

#: DynamoDB's item size limit: attribute names and values, keys included.
MAX_ITEM_BYTES = 400 * 1024

#: Room kept in a chunk item for its attribute names, keys and number encoding.
_CHUNK_ITEM_OVERHEAD = 1024

#: DynamoDB's limit of items in one ``TransactWriteItems``; a take writes two per target
#: in the exactly-once mode (the delete and the caller's record).
_TRANSACTION_ITEMS = 100

#: The longest error text kept in a failure item (the rest of a traceback is the caller's log's).
_ERROR_CHARS = 1000

_TRANSIENT_CANCELLATIONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})

# The states of a delivery's progress item. A progress item written before states existed has
# none: its create() wrote it last, after everything else, so it is ready.
_CREATING = "creating"  # reserved by create(): chunks (and target items) being written
_CHUNKS = "chunks"  # chunks written; target items left to write_targets()
_READY = "ready"  # every item written: walkable

# What a take deletes: a target item (a walk) or a failure item (a resend).
_TARGETS = "targets"
_FAILURES = "failures"


def encode_target_ids(target_ids: Sequence[str]) -> str:
    """The stored form of a chunk's ids: compact JSON, UTF-8 (what :func:`split_into_chunks` measures)."""
    return json.dumps(list(target_ids), ensure_ascii=False, separators=(",", ":"))


def _check_target_id(target_id: object) -> str:
    if not isinstance(target_id, str) or not target_id:
        msg = f"target id {target_id!r} is not a non-empty string; pass ids as str"
        raise DeliveryInputError(msg)
    return target_id


def split_into_chunks(
    target_ids: Iterable[str], *, max_bytes: int = MAX_ITEM_BYTES - _CHUNK_ITEM_OVERHEAD, max_targets: int | None = None
) -> Iterator[list[str]]:
    """Split ``target_ids`` into consecutive chunks, in order, each encoded in at most ``max_bytes``.

    The size measured is that of :func:`encode_target_ids` encoded in UTF-8, exactly, so ids of
    any length and script fit; ``max_targets`` bounds the ids of a chunk as well (smaller chunks
    share a walk among more workers).

    Args:
        target_ids: the ids, non-empty strings.
        max_bytes: the largest encoded chunk.
        max_targets: the most ids in a chunk; no bound by default.

    Returns:
        An iterator of non-empty lists whose concatenation is ``target_ids``.

    Raises:
        pynamodb_sharding.DeliveryInputError: (a ``ValueError``) an id is not a
            non-empty string, or is too long to fit in a chunk alone.
    """
    if max_targets is not None and max_targets < 1:
        msg = f"max_targets={max_targets} leaves no room in a chunk; pass a positive number or None"
        raise DeliveryInputError(msg)
    chunk: list[str] = []
    size = 2  # the brackets
    for target_id in target_ids:
        _check_target_id(target_id)
        cost = len(json.dumps(target_id, ensure_ascii=False).encode())
        if 2 + cost > max_bytes:
            msg = (
                f"target id {target_id[:40]!r}... encodes in {cost} bytes, more than a chunk item holds "
                f"({max_bytes} bytes); shorten the ids (a hash of a long id) or raise max_bytes"
            )
            raise DeliveryInputError(msg)
        full = max_targets is not None and len(chunk) >= max_targets
        if chunk and (full or size + 1 + cost > max_bytes):
            yield chunk
            chunk, size = [], 2
        size += cost + (1 if chunk else 0)
        chunk.append(target_id)
    if chunk:
        yield chunk


class TargetIdsAttribute(Attribute[list[str]]):
    """A list of ids stored as one compact JSON string, whose size is known before it is written."""

    attr_type = STRING

    def serialize(self, value: list[str]) -> str:
        return encode_target_ids(value)

    def deserialize(self, value: str) -> list[str]:
        ids = json.loads(value)
        if not isinstance(ids, list):
            msg = (
                f"a chunk item's user_ids holds {type(ids).__name__}, not a JSON list of ids: "
                f"write chunks with Delivery.create()"
            )
            raise DeliveryDataError(msg)
        return ids


class DeliveryChunk(ShardedModel):
    """One chunk of a delivery's targets; ``order`` counts from 0."""

    class Meta:
        table_name = "delivery_chunk"

    delivery_id = UnicodeAttribute(hash_key=True)
    order = NumberAttribute(range_key=True)
    user_ids = TargetIdsAttribute()
    # md5(delivery_id + order): the chunks of one delivery spread over 16 physical keys, and
    # reading chunk n costs one key.
    shards = Sharding(HashedShards(16))


class DeliveryTarget(Model):
    """A target not yet delivered: high-cardinality ``user_id`` first, so never a hot key."""

    class Meta:
        table_name = "delivery_target"

    user_id = UnicodeAttribute(hash_key=True)
    delivery_id = UnicodeAttribute(range_key=True)


class DeliveryProgress(Model):
    """Where a delivery stands: its creation, the next chunk to claim, the claimed ones, the counts."""

    class Meta:
        table_name = "delivery_progress"

    delivery_id = UnicodeAttribute(hash_key=True)
    chunk_count = NumberAttribute()
    target_count = NumberAttribute()
    next_sequence = NumberAttribute(default=0, attr_name="nextSequence")
    open_chunks = NumberSetAttribute(null=True)  # claimed, not done
    chunks_done = NumberAttribute(default=0)
    targets_done = NumberAttribute(default=0)  # the targets of the done chunks
    targets_failed = NumberAttribute(default=0)  # failure items stored: changed with them, in transactions
    state = UnicodeAttribute(null=True)  # "creating", "chunks", "ready"; none: ready (written before states)
    creation_token = UnicodeAttribute(null=True)  # digest of the chunks: recognises a create() of the same targets
    writer = UnicodeAttribute(null=True)  # the create()/write_targets() call allowed to write target items


class DeliveryLease(Model):
    """Which worker holds a claimed chunk, until when (epoch seconds)."""

    class Meta:
        table_name = "delivery_lease"

    lease_key = UnicodeAttribute(hash_key=True)  # "<delivery_id>#<order>"
    owner = UnicodeAttribute()
    expires = NumberAttribute()


class DeliveryFailure(ShardedModel):
    """A target whose send kept failing, with the last error, until it is resent.

    The delivery id is the partition key, sharded over the user id (md5 of both), so a burst
    of failures does not heat one partition and :meth:`Delivery.failed` reads them back with
    one merged query.
    """

    class Meta:
        table_name = "delivery_failure"

    delivery_id = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute(range_key=True)
    error = UnicodeAttribute()  # the last attempt's exception: "TypeName: message"
    attempts = NumberAttribute()  # sends tried, the walk's and every resend's
    failed_at = NumberAttribute()  # epoch seconds of the last failed attempt
    # Reading failures back is not latency-bound: two resends at once, 4 threads each, fit
    # PynamoDB's default pool of 10 connections.
    shards = Sharding(HashedShards(16), max_workers=4)


@dataclass(frozen=True)
class DeliveryStatus:
    """A delivery's progress, read with one strongly consistent GetItem."""

    chunk_count: int
    chunks_done: int
    chunks_open: int
    target_count: int
    targets_done: int
    #: ``"creating"`` (``create()`` is writing), ``"chunks"`` (target items not written yet),
    #: ``"ready"`` (walkable).
    state: str = _READY
    #: Targets whose send failed, recorded in failure items and not resent yet, exactly.
    targets_failed: int = 0

    @property
    def ready(self) -> bool:
        """Every item is written: the delivery can be walked."""
        return self.state == _READY

    @property
    def targets_left(self) -> int:
        """Targets in chunks not done yet (some of them may be delivered already)."""
        return self.target_count - self.targets_done

    @property
    def finished(self) -> bool:
        """Every chunk is walked (targets that failed are counted by ``targets_failed``)."""
        return self.ready and self.chunks_done == self.chunk_count


@dataclass(frozen=True)
class WalkReport:
    """What one worker did in :meth:`Delivery.walk`."""

    chunks: int
    taken: int
    takeovers: int


@dataclass(frozen=True)
class ResendReport:
    """What one :meth:`Delivery.resend_failed` call did."""

    resent: int  # failed targets delivered by this call
    failed: int  # failed targets this call tried that failed again (still recorded)


@dataclass(frozen=True)
class Retry:
    """How a delivery mode retries a target whose send raised: ``attempts`` in all, waiting
    ``backoff`` seconds before the second, doubling up to ``max_backoff``.

    The other targets of the group are sent before a retry waits; the worker renews its lease
    after each wait, so ``lease_seconds`` must outlast a group's sends plus the waits.
    """

    attempts: int = 3
    backoff: float = 1.0
    max_backoff: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool) or self.attempts < 1:
            msg = f"Retry(attempts={self.attempts!r}): attempts counts the first send; pass an int of at least 1"
            raise DeliveryInputError(msg)
        if not 0 <= self.backoff <= self.max_backoff:
            msg = (
                f"Retry(backoff={self.backoff!r}, max_backoff={self.max_backoff!r}): pass "
                f"0 <= backoff <= max_backoff (seconds)"
            )
            raise DeliveryInputError(msg)

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first retry)."""
        return float(min(self.max_backoff, self.backoff * 2**retry))


class DeliveryMode(Protocol):
    """How a worker delivers a group of targets it holds the lease of (see the three modes)."""

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        """Deliver what is still to deliver among ``user_ids``; return how many this call delivered."""


class ResendingMode(DeliveryMode, Protocol):
    """A delivery mode that can also deliver recorded failures (the three modes of this module)."""

    def resend(self, delivery: Delivery, failures: list[DeliveryFailure]) -> ResendReport:
        """Deliver ``failures`` (read just before); return how many were resent and failed again."""


RecordFactory = Callable[[str, str], Model]
TransactionRecorder = Callable[[TransactWrite, str, str], None]
Send = Callable[[str, str], None]
#: A failed target: the last error (text) and the attempts it has had in all.
_Failures = dict[str, tuple[str, int]]


def _describe(error: BaseException) -> str:
    """The text kept in a failure item: the error's type and message, DynamoDB's reasons when a
    transaction was cancelled."""
    cause = getattr(error, "cause", None)
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, TransactWriteError) and error.cancellation_reasons:
        reasons = [f"{r.code}: {r.message}" for r in error.cancellation_reasons if r is not None and r.code != "None"]
        text += f" ({'; '.join(reasons)})"
    elif cause is not None:
        text += f" ({type(cause).__name__}: {cause})"
    return text[:_ERROR_CHARS]


def _with_attempts(errors: dict[str, BaseException], attempts: Callable[[str], int]) -> _Failures:
    return {user_id: (_describe(error), attempts(user_id)) for user_id, error in errors.items()}


class ExactlyOnce:
    """The caller's record of a delivery is written in the transaction that takes the target.

    Args:
        record: ``record(delivery_id, user_id)`` returns a model instance to save (an inbox
            item), in the same account and region as the delivery's tables.
        in_transaction: ``in_transaction(transaction, delivery_id, user_id)`` adds its own
            writes to the ``TransactWrite`` instead (or as well).
        retry: how a target whose record cannot be written (``record`` raised, or its write
            refused the transaction) is retried; after the last attempt it is recorded as
            failed, its target item deleted in the same transaction as its failure item is
            written, so it is delivered by :meth:`Delivery.resend_failed` and never by a walk.
    """

    def __init__(
        self,
        record: RecordFactory | None = None,
        *,
        in_transaction: TransactionRecorder | None = None,
        retry: Retry | None = None,
    ) -> None:
        if record is None and in_transaction is None:
            msg = "ExactlyOnce needs record= or in_transaction=: the write that records a delivery"
            raise DeliveryInputError(msg)
        self.record = record
        self.in_transaction = in_transaction
        self.retry = retry or Retry()

    def _add(self, transaction: TransactWrite, delivery_id: str, user_id: str) -> None:
        if self.record is not None:
            transaction.save(self.record(delivery_id, user_id))
        if self.in_transaction is not None:
            self.in_transaction(transaction, delivery_id, user_id)

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        def attempt(ids: list[str]) -> tuple[int, dict[str, BaseException]]:
            taken, failed = delivery._take(ids, self._add, source=_TARGETS, collect=True)
            return len(taken), failed

        done, errors = delivery._rounds(delivery.present(user_ids), self.retry, attempt)
        if errors:
            delivery._record_failures(_with_attempts(errors, lambda _: self.retry.attempts), take_targets=True)
        return done

    def resend(self, delivery: Delivery, failures: list[DeliveryFailure]) -> ResendReport:
        before = {failure.user_id: int(failure.attempts) for failure in failures}

        def attempt(ids: list[str]) -> tuple[int, dict[str, BaseException]]:
            taken, failed = delivery._take(ids, self._add, source=_FAILURES, collect=True)
            return len(taken), failed

        done, errors = delivery._rounds(list(before), self.retry, attempt)
        if errors:
            delivery._update_failures(_with_attempts(errors, lambda user_id: before[user_id] + self.retry.attempts))
        return ResendReport(resent=done, failed=len(errors))


class AtMostOnce:
    """Take the target, then ``send(delivery_id, user_id)``: a crash in between loses that one.

    A ``send`` that raises is not retried (it may have sent before it raised): the target is
    recorded as failed, with the error, for :meth:`Delivery.resend_failed` to send when the
    caller asks.
    """

    def __init__(self, send: Send) -> None:
        self.send = send

    def _send_all(self, delivery_id: str, user_ids: list[str]) -> dict[str, BaseException]:
        errors: dict[str, BaseException] = {}
        for user_id in user_ids:
            try:
                self.send(delivery_id, user_id)
            except Exception as error:  # the caller's send: any failure is this target's
                errors[user_id] = error
        return errors

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        taken = delivery.take(delivery.present(user_ids), None)
        errors = self._send_all(delivery.delivery_id, taken)
        if errors:
            delivery._record_failures(_with_attempts(errors, lambda _: 1), take_targets=False)
        return len(taken) - len(errors)

    def resend(self, delivery: Delivery, failures: list[DeliveryFailure]) -> ResendReport:
        before = {failure.user_id: int(failure.attempts) for failure in failures}
        taken, _ = delivery._take(list(before), None, source=_FAILURES, collect=False)
        errors = self._send_all(delivery.delivery_id, taken)
        if errors:
            delivery._record_failures(_with_attempts(errors, lambda user_id: before[user_id] + 1), take_targets=False)
        return ResendReport(resent=len(taken) - len(errors), failed=len(errors))


class AtLeastOnce:
    """``send(delivery_id, user_id)``, then take the target: a crash in between sends it again.

    Args:
        send: delivers one target; raising means it was not delivered.
        retry: how a ``send`` that raised is retried, after the rest of the group was sent;
            after the last attempt the target is recorded as failed (its target item deleted
            in the same transaction), for :meth:`Delivery.resend_failed`.
    """

    def __init__(self, send: Send, *, retry: Retry | None = None) -> None:
        self.send = send
        self.retry = retry or Retry()

    def _attempt(self, delivery: Delivery, source: str) -> Callable[[list[str]], tuple[int, dict[str, BaseException]]]:
        def attempt(ids: list[str]) -> tuple[int, dict[str, BaseException]]:
            sent: list[str] = []
            errors: dict[str, BaseException] = {}
            for user_id in ids:
                try:
                    self.send(delivery.delivery_id, user_id)
                except Exception as error:  # the caller's send: any failure is this target's
                    errors[user_id] = error
                else:
                    sent.append(user_id)
            taken, _ = delivery._take(sent, None, source=source, collect=False)
            return len(taken), errors

        return attempt

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        done, errors = delivery._rounds(delivery.present(user_ids), self.retry, self._attempt(delivery, _TARGETS))
        if errors:
            delivery._record_failures(_with_attempts(errors, lambda _: self.retry.attempts), take_targets=True)
        return done

    def resend(self, delivery: Delivery, failures: list[DeliveryFailure]) -> ResendReport:
        before = {failure.user_id: int(failure.attempts) for failure in failures}
        done, errors = delivery._rounds(list(before), self.retry, self._attempt(delivery, _FAILURES))
        if errors:
            delivery._update_failures(_with_attempts(errors, lambda user_id: before[user_id] + self.retry.attempts))
        return ResendReport(resent=done, failed=len(errors))


class Delivery:
    """One delivery: create it, walk it from any number of workers, count its progress, resend
    the targets whose send failed.

    The five model classes default to this module's; subclass them to set your table names
    and connection settings (``Meta``), and pass the subclasses.

    Args:
        delivery_id: the delivery.
        clock: epoch seconds, for leases (tests pass a fake one).
        sleep: how a worker waits for a lease to expire or before a retry.
    """

    def __init__(
        self,
        delivery_id: str,
        *,
        chunks: type[DeliveryChunk] = DeliveryChunk,
        targets: type[DeliveryTarget] = DeliveryTarget,
        progress: type[DeliveryProgress] = DeliveryProgress,
        leases: type[DeliveryLease] = DeliveryLease,
        failures: type[DeliveryFailure] = DeliveryFailure,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.delivery_id = delivery_id
        self.chunks = chunks
        self.targets = targets
        self.progress_model = progress
        self.leases = leases
        self.failures = failures
        self.clock = clock
        self.sleep = sleep
        # The chunk lease this thread holds in walk(): one Delivery may serve many threads.
        self._held = threading.local()

    # -- creating --------------------------------------------------------------------------

    def create(
        self, target_ids: Iterable[str], *, write_targets: bool = True, max_chunk_targets: int | None = 1000
    ) -> DeliveryStatus:
        """Create the delivery: the progress item, the chunk items and the target items.

        The progress item is written first, conditionally on there being none, and carries a
        creation token, a digest of the chunks. So:

        * an id that exists with other targets (or other chunking) is refused **before
          anything is written**;
        * a call with the same targets is the same creation: when the delivery is complete
          (being walked, or done) it writes nothing and returns the status; when an earlier
          call stopped half-way it finishes it. A retry after any failure, including a lost
          reply, is safe, and so are two calls at once (the later one takes the writing over;
          the earlier one returns the status if the later one has finished, else raises
          :class:`~pynamodb_sharding.DeliveryConflictError`);
        * target items are written in transactions that check this call still holds the
          creation and has not finished it: none can be written once a walk may take it.

        A repeated id is one target: delivered once and counted once. ``write_targets=False``
        leaves the target items to :meth:`write_targets` (a separate job); the delivery cannot
        be walked until they are written. The ids are held in memory while the delivery is
        created (the digest is written before the chunks).

        Raises:
            pynamodb_sharding.DeliveryInputError: a target id is not a non-empty
                string or is too long (see :func:`split_into_chunks`); nothing is written.
            pynamodb_sharding.DeliveryExistsError: the delivery exists with other
                targets (also a ``PutError``); nothing is written.
            pynamodb_sharding.DeliveryConflictError: another call of the same
                creation took the writing over and has not finished.
        """
        max_bytes = MAX_ITEM_BYTES - _CHUNK_ITEM_OVERHEAD - len(self.delivery_id.encode())
        unique = dict.fromkeys(_check_target_id(target_id) for target_id in target_ids)
        chunks = list(split_into_chunks(unique, max_bytes=max_bytes, max_targets=max_chunk_targets))
        digest = hashlib.sha256()
        for ids in chunks:
            digest.update(encode_target_ids(ids).encode())
            digest.update(b"\n")
        token = digest.hexdigest()
        attempt = uuid.uuid4().hex
        state = self._reserve(token, attempt, chunk_count=len(chunks), target_count=len(unique))
        if state == _READY or (state == _CHUNKS and not write_targets):
            return self.status()
        try:
            if state == _CREATING:
                with self.chunks.batch_write() as chunk_batch:
                    for order, ids in enumerate(chunks):
                        # Rewriting a chunk is harmless: the same token means the same chunks.
                        chunk_batch.save(self.chunks(self.delivery_id, order, user_ids=ids))
            if write_targets:
                self._write_target_items((user_id for ids in chunks for user_id in ids), attempt, state)
            self._finish_writing(attempt, state, _READY if write_targets else _CHUNKS)
        except _TakenOver:
            return self._status_after_takeover(token, write_targets)
        return self.status()

    def write_targets(self) -> int:
        """Write the target items of every chunk (after ``create(write_targets=False)``); return how many.

        Safe to call again or from two jobs at once: once the target items are written (the
        delivery is ready, and may be walked) it writes nothing and returns 0.

        Raises:
            pynamodb_sharding.DeliveryNotReadyError: ``create()`` is still writing
                the chunks.
            pynamodb_sharding.DeliveryConflictError: another ``write_targets()``
                took the writing over and has not finished.
        """
        attempt = uuid.uuid4().hex
        state = self._become_writer(attempt, token=None, write_targets=True)
        if state == _READY:
            return 0
        if state == _CREATING:
            msg = (
                f"Delivery {self.delivery_id!r}: create() is still writing the chunks; "
                f"call write_targets() when it has returned"
            )
            raise DeliveryNotReadyError(msg)
        written = 0

        def counted() -> Iterator[str]:
            nonlocal written
            for ids in self._stored_chunks():
                written += len(ids)
                yield from ids

        try:
            self._write_target_items(counted(), attempt, _CHUNKS)
            self._finish_writing(attempt, _CHUNKS, _READY)
        except _TakenOver:
            if _state(self._read_progress()) == _READY:
                return written
            msg = (
                f"Delivery {self.delivery_id!r}: another write_targets() took the writing over and has not "
                f"finished; call write_targets() again (it writes nothing once the targets are written)"
            )
            raise DeliveryConflictError(msg) from None
        return written

    def chunk_ids(self) -> Iterator[list[str]]:
        """The chunks' ids in order (strongly consistent reads).

        Raises:
            pynamodb_sharding.DeliveryNotReadyError: ``create()`` is still writing
                the chunks.
        """
        if _state(self._read_progress()) == _CREATING:
            msg = f"Delivery {self.delivery_id!r}: create() is still writing the chunks; read them when it has returned"
            raise DeliveryNotReadyError(msg)
        return self._stored_chunks()

    def _stored_chunks(self) -> Iterator[list[str]]:
        for order in range(int(self._read_progress().chunk_count)):
            yield self._chunk_ids(order)

    def _reserve(self, token: str, attempt: str, *, chunk_count: int, target_count: int) -> str:
        """Write the progress item as this call's reservation, or recognise this creation's own.

        Returns the state this call continues from, holding the writing unless it is ready.
        """
        reservation = self.progress_model(
            self.delivery_id,
            chunk_count=chunk_count,
            target_count=target_count,
            state=_CREATING,
            creation_token=token,
            writer=attempt,
        )
        try:
            reservation.save(condition=self.progress_model.delivery_id.does_not_exist())
        except PutError as error:
            if error.cause_response_code != "ConditionalCheckFailedException":
                raise
            # Refused: another creation's item, or this creation's (an earlier call, or this
            # call's own put resent by botocore after a lost reply: then the writer is us).
            return self._become_writer(attempt, token=token, write_targets=True, refused=error)
        return _CREATING

    def _become_writer(
        self, attempt: str, *, token: str | None, write_targets: bool, refused: PutError | None = None
    ) -> str:
        """Make ``attempt`` the writer of the progress item's current (unfinished) state.

        ``token`` (a create) must match the stored one. Returns the state taken over, or a state
        that needs no writing (ready; chunks when ``write_targets`` is false; creating when
        ``token`` is None, which write_targets() refuses).
        """
        for _attempt in range(10):
            item = self._read_progress()
            if token is not None and item.creation_token != token:
                msg = (
                    f"Delivery {self.delivery_id!r} exists already with other targets or other chunking "
                    f"(or was created before creation tokens); nothing was written. Use another delivery id, "
                    f"or call create() with the targets and max_chunk_targets it was created with"
                )
                raise DeliveryExistsError(msg, refused.cause if refused is not None else None)
            state = _state(item)
            if state == _READY or (state == _CHUNKS and not write_targets) or (state == _CREATING and token is None):
                return state
            if item.writer == attempt:
                return state  # this call's own reservation, resent after a lost reply
            try:
                item.update(
                    actions=[self.progress_model.writer.set(attempt)],
                    condition=self.progress_model.state == state,
                )
            except UpdateError as error:
                if error.cause_response_code == "ConditionalCheckFailedException":
                    continue  # the state moved on meanwhile: read it again
                raise
            return state
        msg = f"Delivery {self.delivery_id!r}: its creation kept changing state under create(); call it again"
        raise DeliveryConflictError(msg)

    def _write_target_items(self, user_ids: Iterable[str], attempt: str, state: str) -> None:
        """Put the target items, each transaction fenced by the progress item still being
        ``state`` under this ``attempt``: a call taken over, or late, writes nothing."""
        group: list[str] = []
        for user_id in user_ids:
            group.append(user_id)
            if len(group) == _TRANSACTION_ITEMS - 1:
                self._fenced_put(group, attempt, state)
                group = []
        if group:
            self._fenced_put(group, attempt, state)

    def _fenced_put(self, user_ids: list[str], attempt: str, state: str) -> None:
        fence = (self.progress_model.writer == attempt) & (self.progress_model.state == state)
        for _attempt in range(10):
            try:
                # A token per attempt: a resend after a lost reply is answered with the first outcome.
                with TransactWrite(connection=self._connection(), client_request_token=uuid.uuid4().hex) as tx:
                    tx.condition_check(self.progress_model, self.delivery_id, condition=fence)
                    for user_id in user_ids:
                        tx.save(self.targets(user_id, self.delivery_id))
            except TransactWriteError as error:
                reasons = _cancelled_by(error)
                if "ConditionalCheckFailed" in reasons:
                    raise _TakenOver from None
                if reasons and reasons <= _TRANSIENT_CANCELLATIONS:
                    self.sleep(0.05)
                    continue
                raise
            return
        msg = f"Delivery {self.delivery_id!r}: target items kept conflicting in 10 transactions; call again"
        raise DeliveryConflictError(msg)

    def _finish_writing(self, attempt: str, state: str, new_state: str) -> None:
        item = self.progress_model(self.delivery_id)
        try:
            item.update(
                actions=[self.progress_model.state.set(new_state), self.progress_model.writer.remove()],
                condition=(self.progress_model.writer == attempt) & (self.progress_model.state == state),
            )
        except UpdateError as error:
            # Also botocore resending this update after a lost reply: the state is then already
            # new_state; the caller re-reads and recognises it.
            if error.cause_response_code == "ConditionalCheckFailedException":
                raise _TakenOver from None
            raise

    def _status_after_takeover(self, token: str, write_targets: bool) -> DeliveryStatus:
        item = self._read_progress()
        state = _state(item)
        if item.creation_token == token and (state == _READY or (state == _CHUNKS and not write_targets)):
            return self.status()
        msg = (
            f"Delivery {self.delivery_id!r}: another create() with the same targets took the writing over "
            f"and has not finished; call create() again (it writes nothing once the delivery is complete)"
        )
        raise DeliveryConflictError(msg)

    # -- counting ----------------------------------------------------------------------------

    def status(self) -> DeliveryStatus:
        """The progress item, read strongly consistently."""
        item = self._read_progress()
        return DeliveryStatus(
            chunk_count=int(item.chunk_count),
            chunks_done=int(item.chunks_done),
            chunks_open=len(item.open_chunks or ()),
            target_count=int(item.target_count),
            targets_done=int(item.targets_done),
            state=_state(item),
            targets_failed=int(item.targets_failed),
        )

    def targets_left(self) -> int:
        """Targets not delivered yet, exactly: strongly consistent reads of the target items of the
        chunks not done. Before the target items are written (the delivery is not ready), nobody
        has been delivered: every target is left. Failed targets are counted by
        ``status().targets_failed``, not here."""
        item = self._read_progress()
        if _state(item) != _READY:
            return int(item.target_count)
        unfinished = set(range(int(item.next_sequence), int(item.chunk_count))) | {
            int(n) for n in item.open_chunks or ()
        }
        left = 0
        for order in sorted(unfinished):
            left += len(self.present(self._chunk_ids(order)))
        return left

    def failed(self) -> Iterator[DeliveryFailure]:
        """The failure items: targets whose send failed and that were not resent yet, each with
        its last error and its attempts (a strongly consistent merged query)."""
        return iter(self.failures.query(self.delivery_id, consistent_read=True))

    # -- walking -----------------------------------------------------------------------------

    def walk(self, mode: DeliveryMode, *, worker_id: str | None = None, lease_seconds: float = 60.0) -> WalkReport:
        """Claim chunks and deliver their targets until every chunk is done.

        A worker claims the next chunk (``nextSequence``); when none is left it takes over a
        chunk whose lease has expired, or waits for the open ones to finish or expire. Each
        group of targets renews the lease first; a worker that lost its lease leaves the chunk.
        A target whose send raises is retried and then recorded as failed (see the modes); the
        rest of the chunk goes on.

        Args:
            mode: :class:`ExactlyOnce`, :class:`AtMostOnce` or :class:`AtLeastOnce`.
            worker_id: names this worker in the leases; a random one by default.
            lease_seconds: how long a claim lasts without renewal: longer than a group of
                targets takes to deliver (25 at most), retries' waits included.

        Returns:
            What this worker did.

        Raises:
            pynamodb_sharding.DeliveryNotFoundError: the delivery was not created.
            pynamodb_sharding.DeliveryNotReadyError: its target items are not all
                written yet (``create()`` running, or ``write_targets()`` not called after
                ``create(write_targets=False)``); nothing was claimed.
        """
        state = _state(self._read_progress())
        if state != _READY:
            fix = (
                "call write_targets() first (create(write_targets=False) wrote only the chunks)"
                if state == _CHUNKS
                else "wait for create() to return"
            )
            msg = f"Delivery {self.delivery_id!r} cannot be walked before its target items are written: {fix}"
            raise DeliveryNotReadyError(msg)
        worker_id = worker_id or uuid.uuid4().hex
        chunks = taken = takeovers = 0
        while True:
            claim = self._claim_next(worker_id, lease_seconds)
            if claim is None:
                claim = self._take_over(worker_id, lease_seconds)
                if claim is not None:
                    takeovers += 1
            if claim is None:
                progress = self._read_progress()
                if progress.chunks_done >= progress.chunk_count:
                    return WalkReport(chunks=chunks, taken=taken, takeovers=takeovers)
                self.sleep(min(1.0, lease_seconds / 4))
                continue
            done, count = self._walk_chunk(mode, claim, worker_id, lease_seconds)
            taken += count
            chunks += done

    def _walk_chunk(self, mode: DeliveryMode, order: int, worker_id: str, lease_seconds: float) -> tuple[int, int]:
        ids = self._chunk_ids(order)
        taken = 0
        self._held.lease = (order, worker_id, lease_seconds)
        try:
            for begin in range(0, len(ids), 25):
                if not self._renew(order, worker_id, lease_seconds):
                    return 0, taken
                taken += mode.deliver(self, ids[begin : begin + 25])
                if getattr(self._held, "lost", False):
                    return 0, taken  # the lease ran out during a retry's wait: the chunk is another's
        finally:
            self._held.lease = None
            self._held.lost = False
        return (1 if self._finish(order, len(ids)) else 0), taken

    def _keep_lease(self) -> bool:
        """Renew the lease of the chunk this thread walks (after a retry's wait); True outside a walk."""
        held = getattr(self._held, "lease", None)
        if held is None:
            return True
        if self._renew(*held):
            return True
        self._held.lost = True
        return False

    def _lease_key(self, order: int) -> str:
        return f"{self.delivery_id}#{order}"

    def _connection(self) -> Any:
        return table_connection(self.progress_model).connection

    def _read_progress(self) -> DeliveryProgress:
        try:
            return self.progress_model.get(self.delivery_id, consistent_read=True)
        except self.progress_model.DoesNotExist:
            msg = f"delivery {self.delivery_id!r} has no progress item; create it with Delivery.create() first"
            raise DeliveryNotFoundError(msg) from None

    def _chunk_ids(self, order: int) -> list[str]:
        return list(self.chunks.get(self.delivery_id, order, consistent_read=True).user_ids)

    def _claim_next(self, worker_id: str, lease_seconds: float) -> int | None:
        while True:
            item = self._read_progress()
            order = int(item.next_sequence)
            if order >= int(item.chunk_count):
                return None
            try:
                with TransactWrite(connection=self._connection(), client_request_token=uuid.uuid4().hex) as tx:
                    tx.update(
                        item,
                        actions=[
                            self.progress_model.next_sequence.set(order + 1),
                            self.progress_model.open_chunks.add({order}),
                        ],
                        condition=self.progress_model.next_sequence == order,
                    )
                    tx.save(self.leases(self._lease_key(order), owner=worker_id, expires=self.clock() + lease_seconds))
            except TransactWriteError as error:
                if _cancelled_by(error) - {"ConditionalCheckFailed", *_TRANSIENT_CANCELLATIONS}:
                    raise
                continue  # another worker claimed it (or a conflict): read again
            return order

    def _take_over(self, worker_id: str, lease_seconds: float) -> int | None:
        item = self._read_progress()
        now = self.clock()
        for order in sorted(int(n) for n in item.open_chunks or ()):
            try:
                lease = self.leases.get(self._lease_key(order), consistent_read=True)
            except self.leases.DoesNotExist:
                continue  # finished meanwhile
            if lease.expires > now:
                continue
            try:
                lease.update(
                    actions=[self.leases.owner.set(worker_id), self.leases.expires.set(now + lease_seconds)],
                    # or already ours: botocore resending this update after a lost reply
                    condition=((self.leases.owner == lease.owner) & (self.leases.expires == lease.expires))
                    | (self.leases.owner == worker_id),
                )
            except UpdateError as error:
                if error.cause_response_code == "ConditionalCheckFailedException":
                    continue
                raise
            return order
        return None

    def _renew(self, order: int, worker_id: str, lease_seconds: float) -> bool:
        lease = self.leases(self._lease_key(order))
        try:
            lease.update(
                actions=[self.leases.expires.set(self.clock() + lease_seconds)],
                condition=self.leases.owner == worker_id,
            )
        except UpdateError as error:
            if error.cause_response_code == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _finish(self, order: int, target_count: int) -> bool:
        item = self.progress_model(self.delivery_id)
        try:
            with TransactWrite(connection=self._connection(), client_request_token=uuid.uuid4().hex) as tx:
                tx.update(
                    item,
                    actions=[
                        self.progress_model.open_chunks.delete({order}),
                        self.progress_model.chunks_done.add(1),
                        self.progress_model.targets_done.add(target_count),
                    ],
                    condition=self.progress_model.open_chunks.contains(order),
                )
                tx.delete(self.leases(self._lease_key(order)))
        except TransactWriteError as error:
            if _cancelled_by(error) <= {"ConditionalCheckFailed"}:
                return False  # finished by the worker that took it over
            raise
        return True

    def present(self, user_ids: list[str]) -> list[str]:
        """The ids among ``user_ids`` whose target item is still stored, in order.

        A strongly consistent ``BatchGetItem``: what it says decides a delivery. For custom
        :class:`DeliveryMode` implementations, with :meth:`take`.
        """
        keys = [(user_id, self.delivery_id) for user_id in user_ids]
        found = {item.user_id for item in self.targets.batch_get(keys, consistent_read=True)}
        return [user_id for user_id in user_ids if user_id in found]

    def take(self, user_ids: list[str], add: TransactionRecorder | None = None) -> list[str]:
        """Take the targets: delete each only if it is still there, in transactions with ``add``'s writes.

        Args:
            user_ids: targets of this delivery.
            add: ``add(transaction, delivery_id, user_id)`` adds writes to the transaction
                that takes ``user_id`` (both happen or neither).

        Returns:
            The ids this call took, in order; the others were taken before.

        Raises:
            Exception: what ``add`` raised, or the ``TransactWriteError`` of a transaction
                refused for a reason other than the target having been taken (``add``'s own
                write refused), for the first such target; the targets before it are taken.
        """
        taken, _ = self._take(user_ids, add, source=_TARGETS, collect=False)
        return taken

    # -- failures and resending ----------------------------------------------------------------

    def resend_failed(self, mode: ResendingMode, *, limit: int | None = None) -> ResendReport:
        """Deliver the targets recorded as failed, with ``mode``'s guarantee.

        Each failure item is taken like a target: conditionally deleted, in the transaction that
        writes the record (:class:`ExactlyOnce`), after the send (:class:`AtLeastOnce`) or before
        it (:class:`AtMostOnce`), with ``status().targets_failed`` changed in the same
        transaction; so two callers at once never deliver one twice under exactly once or at
        most once. A target that fails again stays recorded, its error and attempts updated.

        Args:
            mode: one of this module's three modes (its ``retry`` applies).
            limit: resend at most this many (in the order of the failure items).

        Returns:
            How many were resent and how many failed again.
        """
        resend = getattr(mode, "resend", None)
        if not callable(resend):
            msg = (
                f"resend_failed() of delivery {self.delivery_id!r} needs ExactlyOnce, AtMostOnce or AtLeastOnce "
                f"(a mode with resend()), not {type(mode).__name__}"
            )
            raise DeliveryInputError(msg)
        self._read_progress()  # a delivery that does not exist is an error, not zero failures
        resent = failed = 0
        group: list[DeliveryFailure] = []
        for failure in self.failed():
            if limit is not None and resent + failed + len(group) >= limit:
                break
            group.append(failure)
            if len(group) == 25:
                report = mode.resend(self, group)
                resent, failed, group = resent + report.resent, failed + report.failed, []
        if group:
            report = mode.resend(self, group)
            resent, failed = resent + report.resent, failed + report.failed
        return ResendReport(resent=resent, failed=failed)

    def _rounds(
        self,
        user_ids: list[str],
        retry: Retry,
        attempt: Callable[[list[str]], tuple[int, dict[str, BaseException]]],
    ) -> tuple[int, dict[str, BaseException]]:
        """Run ``attempt`` on the targets, then on those that failed, up to ``retry.attempts`` times.

        Returns how many were delivered and the errors of those that failed every attempt (none
        when this thread lost its chunk's lease during a wait: their new holder delivers them).
        """
        delivered = 0
        pending = user_ids
        for number in range(retry.attempts):
            done, errors = attempt(pending)
            delivered += done
            if not errors:
                return delivered, {}
            if number + 1 == retry.attempts:
                return delivered, errors
            self.sleep(retry.delay(number))
            if not self._keep_lease():
                return delivered, {}
            pending = [user_id for user_id in pending if user_id in errors]
        return delivered, {}

    def _take(
        self, user_ids: list[str], add: TransactionRecorder | None, *, source: str, collect: bool
    ) -> tuple[list[str], dict[str, BaseException]]:
        """Take targets (or failure items), in groups, one by one when a group is refused.

        A target whose transaction fails is looked up: gone means another worker (or an earlier
        attempt of this one whose reply was lost) took it, so it is neither taken nor failed
        here; still there means its own writes failed: collected with the error (``collect``),
        or raised.
        """
        if not user_ids:
            return [], {}
        per_target = 2 if add is not None else 1
        room = _TRANSACTION_ITEMS - (1 if source == _FAILURES else 0)  # the count's update
        group = max(1, room // per_target)
        taken: list[str] = []
        failed: dict[str, BaseException] = {}
        for begin in range(0, len(user_ids), group):
            ids = user_ids[begin : begin + group]
            try:
                self._transact_take(ids, add, source)
            except DeliveryConflictError:
                raise
            except Exception as error:
                if len(ids) > 1:  # one of them was taken by another worker, or failed: one by one
                    for user_id in ids:
                        self._take_one(user_id, add, source, collect, taken, failed)
                elif self._still_there(ids[0], source):
                    if not collect:
                        raise
                    failed[ids[0]] = error
            else:
                taken.extend(ids)
        return taken, failed

    def _take_one(
        self,
        user_id: str,
        add: TransactionRecorder | None,
        source: str,
        collect: bool,
        taken: list[str],
        failed: dict[str, BaseException],
    ) -> None:
        try:
            self._transact_take([user_id], add, source)
        except DeliveryConflictError:
            raise
        except Exception as error:
            if self._still_there(user_id, source):
                if not collect:
                    raise
                failed[user_id] = error
        else:
            taken.append(user_id)

    def _still_there(self, user_id: str, source: str) -> bool:
        try:
            if source == _TARGETS:
                self.targets.get(user_id, self.delivery_id, consistent_read=True)
            else:
                self.failures.get(self.delivery_id, user_id, consistent_read=True)
        except (self.targets.DoesNotExist, self.failures.DoesNotExist):
            return False
        return True

    def _transact_take(self, user_ids: list[str], add: TransactionRecorder | None, source: str) -> None:
        # One token per attempt: botocore resends the same request (the same token) after a
        # lost reply, and DynamoDB answers a replay with the first outcome instead of applying
        # it again or failing its condition.
        for _attempt in range(10):
            try:
                with TransactWrite(connection=self._connection(), client_request_token=uuid.uuid4().hex) as tx:
                    for user_id in user_ids:
                        if source == _TARGETS:
                            tx.delete(self.targets(user_id, self.delivery_id), condition=self.targets.user_id.exists())
                        else:
                            tx.delete(
                                self.failures(self.delivery_id, user_id), condition=self.failures.user_id.exists()
                            )
                        if add is not None:
                            add(tx, self.delivery_id, user_id)
                    if source == _FAILURES:
                        tx.update(
                            self.progress_model(self.delivery_id),
                            actions=[self.progress_model.targets_failed.add(-len(user_ids))],
                        )
            except TransactWriteError as error:
                reasons = _cancelled_by(error)
                if reasons and reasons <= _TRANSIENT_CANCELLATIONS:
                    self.sleep(0.05)
                    continue
                raise
            return
        msg = f"targets {user_ids[:3]}... of delivery {self.delivery_id!r} kept conflicting in 10 transactions"
        raise DeliveryConflictError(msg)

    def _record_failures(self, failures: _Failures, *, take_targets: bool) -> list[str]:
        """Write failure items (deleting the target items in the same transactions when
        ``take_targets``), counting them in the progress item; return the ids recorded.

        A target whose item is gone was delivered by another worker meanwhile: not recorded.
        """
        per_target = 2 if take_targets else 1
        group = (_TRANSACTION_ITEMS - 1) // per_target
        ids = list(failures)
        recorded: list[str] = []
        for begin in range(0, len(ids), group):
            part = ids[begin : begin + group]
            if self._transact_record(part, failures, take_targets):
                recorded.extend(part)
            elif len(part) > 1:
                recorded.extend(user_id for user_id in part if self._transact_record([user_id], failures, take_targets))
        return recorded

    def _transact_record(self, user_ids: list[str], failures: _Failures, take_targets: bool) -> bool:
        now = self.clock()
        for _attempt in range(10):
            try:
                with TransactWrite(connection=self._connection(), client_request_token=uuid.uuid4().hex) as tx:
                    for user_id in user_ids:
                        if take_targets:
                            tx.delete(self.targets(user_id, self.delivery_id), condition=self.targets.user_id.exists())
                        error, attempts = failures[user_id]
                        tx.save(
                            self.failures(self.delivery_id, user_id, error=error, attempts=attempts, failed_at=now),
                            condition=self.failures.user_id.does_not_exist(),
                        )
                    tx.update(
                        self.progress_model(self.delivery_id),
                        actions=[self.progress_model.targets_failed.add(len(user_ids))],
                    )
            except TransactWriteError as error:
                reasons = _cancelled_by(error)
                if "ConditionalCheckFailed" in reasons:
                    return False
                if reasons and reasons <= _TRANSIENT_CANCELLATIONS:
                    self.sleep(0.05)
                    continue
                raise
            return True
        msg = f"failures {user_ids[:3]}... of delivery {self.delivery_id!r} kept conflicting in 10 transactions"
        raise DeliveryConflictError(msg)

    def _update_failures(self, failures: _Failures) -> None:
        """A resend failed again: keep the failure items, with the new error and attempts."""
        now = self.clock()
        for user_id, (error, attempts) in failures.items():
            try:
                self.failures(self.delivery_id, user_id).update(
                    actions=[
                        self.failures.error.set(error),
                        self.failures.attempts.set(attempts),
                        self.failures.failed_at.set(now),
                    ],
                    condition=self.failures.user_id.exists(),
                )
            except UpdateError as update_error:
                if update_error.cause_response_code != "ConditionalCheckFailedException":
                    raise  # else: resent by another caller meanwhile


class _TakenOver(Exception):
    """This create()/write_targets() call no longer holds the writing (or finished already)."""


def _state(item: DeliveryProgress) -> str:
    return item.state or _READY


def _cancelled_by(error: TransactWriteError) -> set[str]:
    """The codes of the writes that cancelled the transaction (not those that were merely not run)."""
    codes = {reason.code for reason in error.cancellation_reasons if reason is not None}
    return {code for code in codes if code and code != "None"}
