"""A delivery list for millions of targets, walked by many workers, each target delivered once.

The design of the docs page "Delivering to millions exactly once":

* the target list is split into **chunk items** (``delivery_id``, ``order``) → ``user_ids``,
  each under DynamoDB's 400 KB item limit whatever the ids' lengths (the encoded size is
  measured); their key is sharded with :class:`~pynamodb_sharding.HashedShards` over the
  order, so writing a large delivery's chunks does not heat one partition;
* a **target item** (``user_id``, ``delivery_id``) exists until its target is delivered; taking
  it is a conditional delete, which succeeds once;
* a **progress item** holds the next chunk to walk (``nextSequence``), the chunks claimed and
  not yet done, and the counts; a **lease item** per claimed chunk says which worker holds it
  until when, so a crashed worker's chunk is taken over once its lease expires.

Every read that decides a delivery is strongly consistent, and every take is a
``TransactWriteItems`` with a client request token, which DynamoDB applies once even when
botocore resends it after a lost reply.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pynamodb.attributes import Attribute, NumberAttribute, NumberSetAttribute, UnicodeAttribute
from pynamodb.constants import STRING
from pynamodb.exceptions import TransactWriteError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding.descriptor import Sharding
from pynamodb_sharding.model import ShardedModel
from pynamodb_sharding.strategies import HashedShards

__all__ = [
    "MAX_ITEM_BYTES",
    "AtLeastOnce",
    "AtMostOnce",
    "Delivery",
    "DeliveryChunk",
    "DeliveryLease",
    "DeliveryMode",
    "DeliveryProgress",
    "DeliveryStatus",
    "DeliveryTarget",
    "ExactlyOnce",
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

_TRANSIENT_CANCELLATIONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


def encode_target_ids(target_ids: Sequence[str]) -> str:
    """The stored form of a chunk's ids: compact JSON, UTF-8 (what :func:`split_into_chunks` measures)."""
    return json.dumps(list(target_ids), ensure_ascii=False, separators=(",", ":"))


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
        ValueError: an id is not a non-empty string, or is too long to fit in a chunk alone.
    """
    if max_targets is not None and max_targets < 1:
        msg = f"max_targets={max_targets} leaves no room in a chunk; pass a positive number or None"
        raise ValueError(msg)
    chunk: list[str] = []
    size = 2  # the brackets
    for target_id in target_ids:
        if not isinstance(target_id, str) or not target_id:
            msg = f"target id {target_id!r} is not a non-empty string; pass ids as str"
            raise ValueError(msg)
        cost = len(json.dumps(target_id, ensure_ascii=False).encode())
        if 2 + cost > max_bytes:
            msg = (
                f"target id {target_id[:40]!r}... encodes in {cost} bytes, more than a chunk item holds "
                f"({max_bytes} bytes); shorten the ids (a hash of a long id) or raise max_bytes"
            )
            raise ValueError(msg)
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
            raise TypeError(msg)
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
    """Where a delivery's walk stands: the next chunk to claim, the claimed ones, the counts."""

    class Meta:
        table_name = "delivery_progress"

    delivery_id = UnicodeAttribute(hash_key=True)
    chunk_count = NumberAttribute()
    target_count = NumberAttribute()
    next_sequence = NumberAttribute(default=0, attr_name="nextSequence")
    open_chunks = NumberSetAttribute(null=True)  # claimed, not done
    chunks_done = NumberAttribute(default=0)
    targets_done = NumberAttribute(default=0)  # the targets of the done chunks


class DeliveryLease(Model):
    """Which worker holds a claimed chunk, until when (epoch seconds)."""

    class Meta:
        table_name = "delivery_lease"

    lease_key = UnicodeAttribute(hash_key=True)  # "<delivery_id>#<order>"
    owner = UnicodeAttribute()
    expires = NumberAttribute()


@dataclass(frozen=True)
class DeliveryStatus:
    """A delivery's progress, read with one strongly consistent GetItem."""

    chunk_count: int
    chunks_done: int
    chunks_open: int
    target_count: int
    targets_done: int

    @property
    def targets_left(self) -> int:
        """Targets in chunks not done yet (some of them may be delivered already)."""
        return self.target_count - self.targets_done

    @property
    def finished(self) -> bool:
        return self.chunks_done == self.chunk_count


@dataclass(frozen=True)
class WalkReport:
    """What one worker did in :meth:`Delivery.walk`."""

    chunks: int
    taken: int
    takeovers: int


class DeliveryMode(Protocol):
    """How a worker delivers a group of targets it holds the lease of (see the three modes)."""

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        """Deliver what is still to deliver among ``user_ids``; return how many this call took."""


RecordFactory = Callable[[str, str], Model]
TransactionRecorder = Callable[[TransactWrite, str, str], None]
Send = Callable[[str, str], None]


class ExactlyOnce:
    """The caller's record of a delivery is written in the transaction that takes the target.

    Args:
        record: ``record(delivery_id, user_id)`` returns a model instance to save (an inbox
            item), in the same account and region as the delivery's tables.
        in_transaction: ``in_transaction(transaction, delivery_id, user_id)`` adds its own
            writes to the ``TransactWrite`` instead (or as well).
    """

    def __init__(self, record: RecordFactory | None = None, *, in_transaction: TransactionRecorder | None = None):
        if record is None and in_transaction is None:
            msg = "ExactlyOnce needs record= or in_transaction=: the write that records a delivery"
            raise ValueError(msg)
        self.record = record
        self.in_transaction = in_transaction

    def _add(self, transaction: TransactWrite, delivery_id: str, user_id: str) -> None:
        if self.record is not None:
            transaction.save(self.record(delivery_id, user_id))
        if self.in_transaction is not None:
            self.in_transaction(transaction, delivery_id, user_id)

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        return len(delivery.take(delivery.present(user_ids), self._add))


class AtMostOnce:
    """Take the target, then ``send(delivery_id, user_id)``: a crash in between loses that one."""

    def __init__(self, send: Send) -> None:
        self.send = send

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        taken = delivery.take(delivery.present(user_ids), None)
        for user_id in taken:
            self.send(delivery.delivery_id, user_id)
        return len(taken)


class AtLeastOnce:
    """``send(delivery_id, user_id)``, then take the target: a crash in between sends it again."""

    def __init__(self, send: Send) -> None:
        self.send = send

    def deliver(self, delivery: Delivery, user_ids: list[str]) -> int:
        present = delivery.present(user_ids)
        for user_id in present:
            self.send(delivery.delivery_id, user_id)
        return len(delivery.take(present, None))


class Delivery:
    """One delivery: create it, walk it from any number of workers, count its progress.

    The four model classes default to this module's; subclass them to set your table names
    and connection settings (``Meta``), and pass the subclasses.

    Args:
        delivery_id: the delivery.
        clock: epoch seconds, for leases (tests pass a fake one).
        sleep: how a worker waits for a lease to expire.
    """

    def __init__(
        self,
        delivery_id: str,
        *,
        chunks: type[DeliveryChunk] = DeliveryChunk,
        targets: type[DeliveryTarget] = DeliveryTarget,
        progress: type[DeliveryProgress] = DeliveryProgress,
        leases: type[DeliveryLease] = DeliveryLease,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.delivery_id = delivery_id
        self.chunks = chunks
        self.targets = targets
        self.progress_model = progress
        self.leases = leases
        self.clock = clock
        self.sleep = sleep

    # -- creating --------------------------------------------------------------------------

    def create(
        self, target_ids: Iterable[str], *, write_targets: bool = True, max_chunk_targets: int | None = 1000
    ) -> DeliveryStatus:
        """Write the chunk items, the target items (``write_targets``) and the progress item.

        The progress item is written last, conditionally on there being none: a delivery that
        exists already is refused, and a crash before the end leaves nothing a walk would use
        (call ``create`` again). Ids should be unique: a repeated id is delivered once (its
        second take finds nothing) but counted twice by :meth:`status`.
        ``write_targets=False`` leaves the target items to
        :meth:`write_targets` (a separate job, or never when only the chunks are wanted).

        Raises:
            ValueError: a target id is not a string or too long (see :func:`split_into_chunks`).
            pynamodb.exceptions.PutError: the delivery exists already.
        """
        max_bytes = MAX_ITEM_BYTES - _CHUNK_ITEM_OVERHEAD - len(self.delivery_id.encode())
        chunk_count = target_count = 0
        with self.chunks.batch_write() as chunk_batch, self.targets.batch_write() as target_batch:
            for order, ids in enumerate(
                split_into_chunks(target_ids, max_bytes=max_bytes, max_targets=max_chunk_targets)
            ):
                chunk_batch.save(self.chunks(self.delivery_id, order, user_ids=ids))
                if write_targets:
                    for user_id in ids:
                        target_batch.save(self.targets(user_id, self.delivery_id))
                chunk_count += 1
                target_count += len(ids)
        self.progress_model(self.delivery_id, chunk_count=chunk_count, target_count=target_count).save(
            condition=self.progress_model.delivery_id.does_not_exist()
        )
        return self.status()

    def write_targets(self) -> int:
        """Write the target items of every chunk (after ``create(write_targets=False)``); return how many."""
        written = 0
        with self.targets.batch_write() as batch:
            for order in range(int(self._read_progress().chunk_count)):
                for user_id in self._chunk_ids(order):
                    batch.save(self.targets(user_id, self.delivery_id))
                    written += 1
        return written

    def chunk_ids(self) -> Iterator[list[str]]:
        """The chunks' ids in order (strongly consistent reads)."""
        for order in range(int(self._read_progress().chunk_count)):
            yield self._chunk_ids(order)

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
        )

    def targets_left(self) -> int:
        """The target items still stored, exactly: strongly consistent reads of the chunks not done."""
        item = self._read_progress()
        unfinished = set(range(int(item.next_sequence), int(item.chunk_count))) | {
            int(n) for n in item.open_chunks or ()
        }
        left = 0
        for order in sorted(unfinished):
            left += len(self.present(self._chunk_ids(order)))
        return left

    # -- walking -----------------------------------------------------------------------------

    def walk(self, mode: DeliveryMode, *, worker_id: str | None = None, lease_seconds: float = 60.0) -> WalkReport:
        """Claim chunks and deliver their targets until every chunk is done.

        A worker claims the next chunk (``nextSequence``); when none is left it takes over a
        chunk whose lease has expired, or waits for the open ones to finish or expire. Each
        group of targets renews the lease first; a worker that lost its lease leaves the chunk.

        Args:
            mode: :class:`ExactlyOnce`, :class:`AtMostOnce` or :class:`AtLeastOnce`.
            worker_id: names this worker in the leases; a random one by default.
            lease_seconds: how long a claim lasts without renewal: longer than a group of
                targets takes to deliver (25 at most).

        Returns:
            What this worker did.

        Raises:
            LookupError: the delivery was not created.
        """
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
        for begin in range(0, len(ids), 25):
            if not self._renew(order, worker_id, lease_seconds):
                return 0, taken
            taken += mode.deliver(self, ids[begin : begin + 25])
        return (1 if self._finish(order, len(ids)) else 0), taken

    def _lease_key(self, order: int) -> str:
        return f"{self.delivery_id}#{order}"

    def _connection(self) -> Any:
        return self.progress_model._get_connection().connection

    def _read_progress(self) -> DeliveryProgress:
        try:
            return self.progress_model.get(self.delivery_id, consistent_read=True)
        except self.progress_model.DoesNotExist:
            msg = f"delivery {self.delivery_id!r} has no progress item; create it with Delivery.create() first"
            raise LookupError(msg) from None

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
        """
        if not user_ids:
            return []
        per_target = 2 if add is not None else 1
        group = max(1, _TRANSACTION_ITEMS // per_target)
        taken: list[str] = []
        for begin in range(0, len(user_ids), group):
            ids = user_ids[begin : begin + group]
            if self._transact_take(ids, add):
                taken.extend(ids)
            elif len(ids) > 1:  # one of them was taken by another worker: take them one by one
                taken.extend(user_id for user_id in ids if self._transact_take([user_id], add))
        return taken

    def _transact_take(self, user_ids: list[str], add: Callable[[TransactWrite, str, str], None] | None) -> bool:
        # One token per attempt: botocore resends the same request (the same token) after a
        # lost reply, and DynamoDB answers a replay with the first outcome instead of applying
        # it again or failing its condition.
        for _attempt in range(10):
            try:
                with TransactWrite(connection=self._connection(), client_request_token=uuid.uuid4().hex) as tx:
                    for user_id in user_ids:
                        tx.delete(self.targets(user_id, self.delivery_id), condition=self.targets.user_id.exists())
                        if add is not None:
                            add(tx, self.delivery_id, user_id)
            except TransactWriteError as error:
                reasons = _cancelled_by(error)
                if "ConditionalCheckFailed" in reasons:
                    return False
                if reasons and reasons <= _TRANSIENT_CANCELLATIONS:
                    self.sleep(0.05)
                    continue
                raise
            return True
        msg = f"targets {user_ids[:3]}... of delivery {self.delivery_id!r} kept conflicting in 10 transactions"
        raise RuntimeError(msg)


def _cancelled_by(error: TransactWriteError) -> set[str]:
    """The codes of the writes that cancelled the transaction (not those that were merely not run)."""
    codes = {reason.code for reason in error.cancellation_reasons if reason is not None}
    return {code for code in codes if code and code != "None"}
