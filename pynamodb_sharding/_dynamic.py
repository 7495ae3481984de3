"""``DynamicShards``: a shard count per key, kept in a metadata table, grown on hot-partition throttles.

The writer of AWS's dynamic write-sharding example, made safe under concurrency:

1. read the key's count (cached, :class:`~pynamodb_sharding._metadata.ShardCountStore`); a
   key without an item is inserted with ``initial`` shards, conditionally, so racing writers
   agree on one item;
2. write to a random shard in ``1..count``;
3. on a *key-range* throttle of that write: inside the cooldown (``now - last_updated <
   cooldown``) pause briefly and retry on the current shard space; past it, wait a random
   backoff, then grow the count with a conditional ``UpdateItem`` (``last_updated = <value
   read>``, the optimistic lock). The loser of a race re-reads and does not grow again.
   Then retry the write on the wider space.

Growth starts within one round trip of the first throttle: while :meth:`DynamicShards.write`
runs, a ``needs-retry`` hook on the model's botocore client turns a key-range throttle response
into an exception instead of letting botocore sleep through its retry ladder. Table-level
throttles and GSI throttles are left to botocore's retries and then raised: more base-table
shards fix neither.
"""

from __future__ import annotations

import logging
import math
import random as _random
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
from pynamodb.exceptions import PynamoDBException

from pynamodb_sharding import _attempts as attempts
from pynamodb_sharding._exceptions import (
    CapacityThrottleError,
    GrowthPolicyError,
    IndexThrottleError,
    MetadataRequestError,
    ShardCountConflictError,
    ShardCountLoweredError,
    ShardingDefinitionError,
    ShardingError,
    ShrinkTargetError,
)
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._host import botocore_client, hash_keyname, range_keyname
from pynamodb_sharding._hot_keys import HotKeyHints
from pynamodb_sharding._keys import MAX_SHARDS
from pynamodb_sharding._locals import ContextLocal
from pynamodb_sharding._metadata import (
    SEEN_ABSENT,
    ShardCountStore,
    ShardMetadata,
    ShardState,
    follow_connection,
    home_unavailable,
    region_model,
)
from pynamodb_sharding._periods import template_of
from pynamodb_sharding._pool import new_lock, pause
from pynamodb_sharding._protocol import FleetProtocol, InForce, ProtocolFollower, StoredProtocol
from pynamodb_sharding._regions import current_route
from pynamodb_sharding._strategies import HistoryEntry, ItemKey, KeySpace, ShardKey
from pynamodb_sharding._throttling import Throttle, ThrottleKind, classify, classify_response
from pynamodb_sharding._write_rate import QUIET_FRACTION, LocalWrites, RateWindow
from pynamodb_sharding.signals import (
    home_request_dropped,
    shard_count_changed,
    throttle_observed,
    warm_throughput_exceeded,
)

if TYPE_CHECKING:
    from pynamodb.models import Model


__all__ = [
    "DynamicShards",
    "GrowthPolicy",
    "add_one",
    "double",
]

_R = TypeVar("_R")

logger = logging.getLogger("pynamodb_sharding.dynamic")

#: A growth policy maps the current count to the next one (capped by ``max_shards`` afterwards).
GrowthPolicy = Callable[[int], int]


def add_one(count: int) -> int:
    """Growth policy ``"add_one"``: one more shard per growth."""
    return count + 1


def double(count: int) -> int:
    """Growth policy ``"double"`` (the default): twice the shards per growth, so a key needing
    ``n`` shards gets there in ``log2(n)`` growths, one per cooldown.
    """
    return count * 2


def quadruple(count: int) -> int:
    """Growth policy ``"quadruple"``: four times the shards per growth, for keys whose load can
    rise a hundredfold within a minute (a viral key): a key needing ``n`` shards gets there in
    ``log4(n)`` growths, at the price of up to four times the shards it needs (reads fan out
    over them). See :doc:`/scale`.

    .. versionadded:: 0.2.0
    """
    return count * 4


_POLICIES: dict[str, GrowthPolicy] = {"add_one": add_one, "double": double, "quadruple": quadruple}


# -- reacting to the first throttle ---------------------------------------------------------

_HOOK_EVENT = "needs-retry.dynamodb.PutItem"
_HOOK_ID = "pynamodb_sharding._dynamic.react_early"
_hooked_clients: weakref.WeakSet[Any] = weakref.WeakSet()
_hook_lock = threading.Lock()
_in_write = ContextLocal("dynamic.in_write")


#: Standard deviations of the rate estimate's noise a growth on the rate must stand clear of
#: (one-sided, about 1 in 160 per window): with the confirmation by a second window that a
#: steady key's growth waits for, noise alone grows a steady key about once in 25,000 windows.
RATE_CONFIDENCE = 2.5


class _EarlyThrottle(Exception):
    """Carries a key-range throttle response out of botocore, skipping its retry ladder.

    Deliberately not a botocore or PynamoDB exception: PynamoDB wraps only those, so this one
    reaches :meth:`DynamicShards.write` unchanged.
    """

    def __init__(self, throttle: Throttle, response: Mapping[str, Any]) -> None:
        super().__init__(f"key-range throttle: {throttle.code}")
        self.throttle = throttle
        self.response = response


def _react_early(response: Any = None, **kwargs: Any) -> None:
    """botocore ``needs-retry`` handler: raise on a key-range throttle of a dynamic write."""
    if not getattr(_in_write, "active", False) or response is None:
        return
    http_response, parsed = response
    # Runs before the service-wide handler that puts back reasons an older botocore dropped.
    throttle = classify_response(parsed, operation="PutItem", body=getattr(http_response, "content", None))
    if throttle.grows_shards:
        raise _EarlyThrottle(throttle, parsed)


def _ask_consumed_capacity(params: Any = None, **kwargs: Any) -> None:
    """botocore ``provide-client-params`` handler: a measured put returns its consumed capacity
    split by table and index (PynamoDB asks for the ``TOTAL`` on every put; ``INDEXES`` holds
    that total too, and the base table's share, which is what heats its partitions)."""
    measured = getattr(_in_write, "measuring", False) and isinstance(params, dict)
    if measured and params.get("ReturnConsumedCapacity") in (None, "TOTAL", "NONE"):
        params["ReturnConsumedCapacity"] = "INDEXES"


def _record_consumed_capacity(parsed: Any = None, **kwargs: Any) -> None:
    """botocore ``after-call`` handler: keep the base table's write units of a measured put."""
    if not getattr(_in_write, "measuring", False) or not isinstance(parsed, Mapping):
        return
    consumed = parsed.get("ConsumedCapacity")
    if not isinstance(consumed, Mapping):
        return
    table = consumed.get("Table")
    units = table.get("CapacityUnits") if isinstance(table, Mapping) else consumed.get("CapacityUnits")
    if isinstance(units, int | float) and not isinstance(units, bool):
        _in_write.consumed = float(units)


def _ensure_hook(model: type[Model]) -> None:
    """Register :func:`_react_early` (and the consumed-capacity hooks) once on the botocore
    client of ``model``."""
    client = botocore_client(model)
    attempts.watch(client)  # before _react_early, so a throttled resend is still recorded
    with _hook_lock:
        if client in _hooked_clients:
            return
        # First, so botocore's retry handler never computes (and sleeps) a delay for it.
        client.meta.events.register_first(_HOOK_EVENT, _react_early, unique_id=_HOOK_ID)
        client.meta.events.register(
            "provide-client-params.dynamodb.PutItem", _ask_consumed_capacity, unique_id=f"{_HOOK_ID}.ask"
        )
        client.meta.events.register(
            "after-call.dynamodb.PutItem", _record_consumed_capacity, unique_id=f"{_HOOK_ID}.consumed"
        )
        _hooked_clients.add(client)


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at fork time; it does not exist here.
    global _hook_lock
    _hook_lock = threading.Lock()


at_fork(after_in_child=_after_fork_in_child)


@contextmanager
def _measuring(enabled: bool) -> Iterator[None]:
    """Within the block, puts of this thread ask for and record their consumed capacity."""
    previous = getattr(_in_write, "measuring", False)
    _in_write.measuring = enabled
    _in_write.consumed = None
    try:
        yield
    finally:
        _in_write.measuring = previous


@contextmanager
def _reacting_early(enabled: bool) -> Iterator[None]:
    previous = getattr(_in_write, "active", False)
    _in_write.active = enabled
    try:
        yield
    finally:
        _in_write.active = previous


#: A ``last_updated`` at most this many seconds ahead of the local clock is taken as it is.
_SKEW_TOLERANCE = 1.0
#: How many future lock values :meth:`DynamicShards._in_cooldown` remembers before starting over.
_FUTURE_CHANGES_KEPT = 10_000
#: How many conditional changes ``grow()`` and ``shrink()`` try before giving up.
_CHANGE_TRIES = 10


# -- the strategy ---------------------------------------------------------------------------


def _check_rates(
    where: str,
    partition_write_units: object,
    target_utilization: object,
    rate_interval: object,
    shrink_utilization: object,
) -> None:
    """Refuse proactive-growth settings that cannot work, naming the setting and the fix."""

    def number(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

    if not number(partition_write_units) or not partition_write_units > 0:  # type: ignore[operator]
        msg = (
            f"{where}: partition_write_units must be a positive number of write units per second "
            f"(DynamoDB's partitions take 1000), got {partition_write_units!r}."
        )
        raise ShardingDefinitionError(msg)
    if target_utilization is not None and (not number(target_utilization)
                                           or not 0 < target_utilization <= 1):  # type: ignore[operator]
        msg = (
            f"{where}: target_utilization must be None (grow on throttles only) or a fraction in "
            f"(0, 1], e.g. 0.7, got {target_utilization!r}."
        )
        raise ShardingDefinitionError(msg)
    if not number(rate_interval) or not rate_interval > 0:  # type: ignore[operator]
        msg = f"{where}: rate_interval must be a positive number of seconds, got {rate_interval!r}."
        raise ShardingDefinitionError(msg)
    if shrink_utilization is not None:
        if target_utilization is None:
            msg = (
                f"{where}: shrink_utilization needs target_utilization (the rate is only measured "
                f"for proactive growth); set both, e.g. target_utilization=0.7, shrink_utilization=0.2."
            )
            raise ShardingDefinitionError(msg)
        if not number(shrink_utilization) or not 0 < shrink_utilization < target_utilization:  # type: ignore[operator]
            msg = (
                f"{where}: shrink_utilization must be a fraction above 0 and below target_utilization "
                f"({target_utilization!r}), got {shrink_utilization!r}."
            )
            raise ShardingDefinitionError(msg)


def _check_metadata_model(metadata_model: object) -> None:
    """Refuse, when ``DynamicShards`` is declared, a metadata model that cannot hold counts."""
    if not (isinstance(metadata_model, type) and issubclass(metadata_model, ShardMetadata)):
        msg = (
            f"DynamicShards: the metadata model must be a ShardMetadata subclass "
            f"(pynamodb_sharding.ShardMetadata), got {metadata_model!r}; declare "
            f"'class AuditLogShards(ShardMetadata)' with a Meta.table_name and pass that class."
        )
        raise ShardingDefinitionError(msg)
    table_name = getattr(getattr(metadata_model, "Meta", None), "table_name", None)
    if not isinstance(table_name, str) or not table_name:
        msg = (
            f"DynamicShards({metadata_model.__name__}): {metadata_model.__name__} has no "
            f"Meta.table_name; give it one, e.g. 'class Meta: table_name = \"audit_log_shards\"', "
            f"the table the shard counts are kept in."
        )
        raise ShardingDefinitionError(msg)


class CountWatch:
    """Keeps a merged read of a ``DynamicShards`` key open for long (an export iterating it) from
    missing items a compaction moves meanwhile.

    ``compact`` moves the items of the shards above a lowered count down ``settle`` seconds after
    the shrink (every process's cached count shows it by then), into shards whose pages a read
    planned before the shrink may already hold, behind its position. A read is safe from that
    until ``settle`` seconds after the count it was planned with was read (its ``deadline``).
    Called after each shard page the read takes: past the deadline, the key's count is read
    again; if a shrink lowered the shards being emptied below those the read was planned with
    (:attr:`ShardState.moving_floor`), it raises :class:`ShardCountLoweredError` (every item
    returned so far is right; the read resumes from its cursor), else the read is safe until
    ``settle`` seconds after that read. Pages taken before the deadline need nothing.
    """

    def __init__(self, strategy: DynamicShards, shard_key: ShardKey, deadline: float, started: float) -> None:
        self._strategy = strategy
        self._key = shard_key
        self._floor: int | None = None
        self._deadline = deadline
        self._started = started
        self._lock = new_lock()

    def planned(self, floor: int) -> None:
        """The read found its shards: it reads first those from ``first shard + floor`` on
        (the shards a job may be emptying), or, reading none first, ``floor`` shards."""
        self._floor = floor

    def __call__(self) -> None:
        timer = self._strategy.store.timer
        if self._floor is None or timer() <= self._deadline:
            return
        with self._lock:  # one read for the shards' pages that arrive meanwhile
            if timer() <= self._deadline:
                return
            sent = timer()
            floor = self._strategy.moving_floor(self._key, fresh=True)
            if floor < self._floor:  # a job may empty shards the read did not read first
                msg = (
                    f"{self._key.space.model_name}: the shard count of key {self._key.value!r} was lowered "
                    f"(to {floor}) while this merged read was open ({sent - self._started:.0f} s): a compaction "
                    f"may move items of its shards above {floor} behind the read's position, so it stopped "
                    f"before it could miss any. "
                    f"Every item returned so far is right: resume the read from its last_evaluated_key (or page "
                    f"token), which reads the shards being emptied first."
                )
                raise ShardCountLoweredError(msg)
            self._deadline = sent + self._strategy.protocol_in_force().settle


class DynamicShards:
    """A shard count per logical key, read from a metadata table and grown when DynamoDB
    throttles the key.

    ``Sharding(DynamicShards(AuditLogShards))`` on a model; ``AuditLogShards`` is a
    :class:`~pynamodb_sharding.ShardMetadata` subclass naming the metadata table. New items
    go to a random shard within the key's current count; reads cover every shard the key
    ever had (the largest count in its history), so lowering the count hides nothing.

    Like :class:`~pynamodb_sharding.RandomShards`, the same logical primary key may land on
    two shards: use it for append-mostly data.

    Args:
        metadata_model: the :class:`~pynamodb_sharding.ShardMetadata` subclass.
        initial: the count a new key starts with (1).
        max_shards: the most shards a key grows to (10); reads of a key
            fan out over up to this many keys.
        cooldown: seconds after a change of a key's count during which throttles retry the
            write instead of growing again (30.0); a growth on the measured write rate
            (``target_utilization``) waits ``min(cooldown, 2 x rate_interval)``.
        backoff: ``(low, high)`` seconds (``(1.0, 10.0)``): a writer past the
            cooldown waits a random time in this range before growing, so that many writers
            throttled together do not all race for the growth. Retries inside the cooldown
            pause a random time up to ``low`` doubled per retry, capped at ``high``.
        cache_ttl: seconds a key's count stays cached in this process (10.0): for writers, and
            with cached reads for merged reads too. A growth by another process is seen within
            this time (or at this process's next throttle). Part of the fleet protocol: a
            process caches for the ``cache_ttl`` its metadata table stores, or its own when
            shorter (see :doc:`/scale`).
        fresh_reads: ``None`` (default): merged reads (``query``, ``count``, ``get``) do as the
            fleet protocol stored in the metadata table says. The default protocol, which
            ``create_table`` stores in a metadata table it creates, has cached reads: a merged
            read uses the count this process cached (no metadata request per read, one
            ``GetItem`` per process per ``cache_ttl``), and a grown count is written to only
            ``cache_ttl + clock_skew`` seconds after the growth, so that every reader's cached
            count covers each shard written; a write throttled meanwhile retries on the shards
            in use (proactive growth, ``target_utilization``, grows early enough to hide the
            wait). ``True``: this process's merged reads read the key's metadata item (one
            consistent ``GetItem``) whatever the protocol (always safe; it still delays its
            growths as the protocol says). ``False``: as ``None`` on a table storing a protocol.
            On a table that stores none (0.2's, or one created outside the library), each
            process follows its own declaration as 0.2 did: ``None`` and ``True`` read fresh
            and write a growth at once, ``False`` reads the cache and delays growths.
            :func:`~pynamodb_sharding.store_fleet_protocol` stores one (see :doc:`/scale`).
        delayed_growth: on a metadata table that stores no fleet protocol only (0.2's
            setting): whether writers use a grown count only ``cache_ttl + clock_skew``
            seconds after the growth. ``None`` (default): when ``fresh_reads=False``.
        hot_key_hints: ``0`` (default): a process's first write of a key within ``cache_ttl``
            reads no count and goes to one of its initial shards (right for cold keys).
            ``N``: every change of a key's count is published, with the count, in a list of
            hot keys kept in ``N`` copies in the metadata table; a process reads one copy per
            ``cache_ttl`` and writes a listed key with the count the list gives, reading
            nothing of its own: thousands of processes starting on a grown key spread their
            first writes over its shards, and ten thousand writers of one hot key load its
            metadata with ``1/N`` of their reads each (see :doc:`/scale`). Not with a
            ``Meta.home_region`` (global tables): writers there read their region's replica.
        replication_lag: global tables (``Meta.home_region`` on the metadata model): seconds
            (2.0) within which a change reaches every region's replica. A growth is written to
            only that much later (plus ``clock_skew``, and after ``cache_ttl`` with cached
            reads), so that a reader in any region, whose replica shows the items written on
            the new shards before the count, reads those shards too (see
            :doc:`/global_tables`). Raise it to the replication latency your tables show at
            their worst (CloudWatch ``ReplicationLatency``). Part of the fleet protocol: the
            stored one is followed.
        clock_skew: seconds (1.0) the clocks of two processes may differ by, plus the time a
            metadata request takes; a delayed growth waits this much longer than ``cache_ttl``.
            Part of the fleet protocol: the stored one is followed.
        growth: ``"double"`` (default), ``"add_one"``, ``"quadruple"`` (a viral key: see
            :doc:`/scale`), or a callable ``count -> new count``;
            the result is capped by ``max_shards``.
        max_attempts: attempts of one write before the throttle error is raised (10); the
            last attempt lets botocore retry as it normally does.
        namespace: the metadata items' ``model`` value; the sharded model's table name by
            default, which keeps the keys of several models in one metadata table apart.
        clock: epoch seconds (``time.time``), for ``last_updated`` and the cooldown.
        sleep: how to wait (``time.sleep``; on an event loop, a wait that yields to it).
        timer: the cache's monotonic clock (``time.monotonic``).
        random: a ``random.Random`` for shards, pauses and backoffs.
        partition_write_units: the write units per second one partition takes (DynamoDB:
            1,000 WCU, i.e. 1,000 puts of up to 1 KB). With ``target_utilization``, the rate
            each shard of a key may take before the key grows.
        target_utilization: ``None`` (default): grow only when DynamoDB throttles (reactive).
            A fraction in ``(0, 1]``: grow as soon as the key's write rate over all writer
            processes passes ``target_utilization x partition_write_units`` per shard, before
            DynamoDB throttles (proactive); throttles still grow the key too. Each process
            adds its count of a key's write units to the metadata item at most once per
            ``rate_interval`` (one ``UpdateItem``; none for a key written under 1 % of the
            threshold). The count is of the writes asked for: a write DynamoDB throttled counts
            once (the units of the key's last acknowledged put), so a key whose demand outruns
            its shards grows to the count its demand needs, not only by the growth policy's
            step. A rate growth waits ``min(cooldown, 2 x rate_interval)`` after the last change.
        rate_interval: seconds between two reports of one key by one process, and the length
            of the rate windows (5.0).
        rate_reports: how many rate reports of one key all processes together send per
            ``rate_interval``, about, when the key writes at its growth threshold (100), however
            many processes write it: a process that wrote ``u`` units of the key in an interval
            reports them with probability ``min(1, u / q)``, as ``max(u, q)`` units (an
            unbiased estimate), where ``q`` is the threshold's units per interval over the
            key's count divided by ``rate_reports`` (for a process under 1 % of the threshold,
            ``q`` is the threshold's whole units per interval: cold keys cost one report per
            that many units at most, and a key spread over ten thousand quiet processes still
            grows). A key's item then takes at most
            ``rate_reports / (target_utilization x rate_interval)`` report writes a second
            (about 29 at 0.7 and the defaults), and reports cost at most one metadata write per
            ``q`` units written. ``None``: every process reports each key it wrote above 1 % of
            the threshold (0.1's rule; reports grow with the processes, and a key spread so
            thinly that every process writes it under 1 % of the threshold grows on throttles
            only).
        shrink_utilization: ``None`` (default): never shrink. A fraction below
            ``target_utilization``: a key whose rate per shard stays under
            ``shrink_utilization x partition_write_units`` for two windows, and whose count has
            not changed for ``max(cooldown, 10 x rate_interval)`` seconds, is shrunk to the
            count its rate needs (reads keep covering every shard it had).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        metadata_model: type[ShardMetadata],
        *,
        initial: int = 1,
        max_shards: int = 10,
        cooldown: float = 30.0,
        backoff: tuple[float, float] = (1.0, 10.0),
        cache_ttl: float = 10.0,
        growth: Literal["double", "add_one", "quadruple"] | GrowthPolicy = "double",
        max_attempts: int = 10,
        fresh_reads: bool | None = None,
        delayed_growth: bool | None = None,
        hot_key_hints: int = 0,
        clock_skew: float = 1.0,
        replication_lag: float = 2.0,
        namespace: str | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = pause,
        timer: Callable[[], float] = time.monotonic,
        random: _random.Random | None = None,
        partition_write_units: float = 1000.0,
        target_utilization: float | None = None,
        rate_interval: float = 5.0,
        rate_reports: int | None = 100,
        shrink_utilization: float | None = None,
    ) -> None:
        where = "DynamicShards"
        _check_metadata_model(metadata_model)
        for name, value, low, high in (
            ("max_shards", max_shards, 1, MAX_SHARDS),
            ("initial", initial, 1, max_shards),
            ("max_attempts", max_attempts, 1, 1_000_000),
            ("hot_key_hints", hot_key_hints, 0, 64),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                msg = f"{where}: {name} must be an int in {low}..{high}, got {value!r}."
                raise ShardingDefinitionError(msg)
        for name, number in (("cooldown", cooldown), ("cache_ttl", cache_ttl), ("clock_skew", clock_skew),
                             ("replication_lag", replication_lag)):
            if isinstance(number, bool) or not isinstance(number, int | float) or not 0 <= number < math.inf:
                msg = f"{where}: {name} must be a non-negative (finite) number of seconds, got {number!r}."
                raise ShardingDefinitionError(msg)
        if rate_reports is not None and (isinstance(rate_reports, bool) or not isinstance(rate_reports, int)
                                         or not 1 <= rate_reports <= 10_000):
            msg = (
                f"{where}: rate_reports must be None (every process reports) or an int in 1..10000, "
                f"the reports of a key per rate_interval at its growth threshold (e.g. 100), got {rate_reports!r}."
            )
            raise ShardingDefinitionError(msg)
        flags: tuple[tuple[str, object], ...] = (("fresh_reads", fresh_reads), ("delayed_growth", delayed_growth))
        for name, flag in flags:  # users pass anything; check it at run time
            if not isinstance(flag, bool) and flag is not None:
                msg = f"{where}: {name} must be None, True or False, got {flag!r}."
                raise ShardingDefinitionError(msg)
        if fresh_reads is False and delayed_growth is False and cache_ttl > 0:
            msg = (
                f"{where}: fresh_reads=False with delayed_growth=False lets a read miss items written "
                f"to shards grown within the last cache_ttl seconds; drop delayed_growth=False (cached "
                f"reads need delayed growths) or keep fresh_reads=True."
            )
            raise ShardingDefinitionError(msg)
        if (
            not isinstance(backoff, tuple)
            or len(backoff) != 2
            or not all(isinstance(b, int | float) for b in backoff)
            or not 0 <= backoff[0] <= backoff[1]
        ):
            msg = f"{where}: backoff must be (low, high) seconds with 0 <= low <= high, got {backoff!r}."
            raise ShardingDefinitionError(msg)
        _check_rates(where, partition_write_units, target_utilization, rate_interval, shrink_utilization)
        if isinstance(growth, str):
            if growth not in _POLICIES:
                msg = f"{where}: growth must be one of {sorted(_POLICIES)} or a callable, got {growth!r}."
                raise ShardingDefinitionError(msg)
            self.growth: GrowthPolicy = _POLICIES[growth]
        else:
            policy: object = growth  # users pass anything; check it at run time
            if not callable(policy):
                msg = f"{where}: growth must be one of {sorted(_POLICIES)} or a callable, got {growth!r}."
                raise ShardingDefinitionError(msg)
            self.growth = growth
        self.metadata_model = metadata_model
        self.initial = initial
        self.max_shards = max_shards
        self.cooldown = float(cooldown)
        self.backoff = (float(backoff[0]), float(backoff[1]))
        self.max_attempts = max_attempts
        #: As declared (``None``: as the table's protocol says; see :doc:`/scale`).
        self.fresh_reads = fresh_reads
        # On a table of 0.2 (no protocol stored), what 0.2 did with this declaration: fresh
        # reads unless declared False, growths delayed with cached reads or when asked.
        legacy_fresh = fresh_reads is not False
        self.delayed_growth = (not legacy_fresh) if delayed_growth is None else delayed_growth
        self.hot_key_hints = hot_key_hints
        self._hints = None if hot_key_hints == 0 else HotKeyHints(
            metadata_model, copies=hot_key_hints, ttl=cache_ttl, clock=clock, timer=timer, random=random,
        )
        self.clock_skew = float(clock_skew)
        self.replication_lag = float(replication_lag)
        self.cache_ttl = float(cache_ttl)
        self.namespace = namespace
        self.clock = clock
        self.sleep = sleep
        self._store_settings: dict[str, Any] = {
            "max_shards": max_shards, "ttl": cache_ttl, "timer": timer, "initial": initial, "sleep": sleep,
            "best_effort_pause": rate_interval,
        }
        self._store = ShardCountStore(metadata_model, **self._store_settings)
        #: The fleet protocol this process follows (see :mod:`pynamodb_sharding._protocol`).
        self.declared_protocol = FleetProtocol(
            cached_reads=fresh_reads is not True, cache_ttl=float(cache_ttl), clock_skew=float(clock_skew),
            replication_lag=float(replication_lag),
        )
        self._protocol = ProtocolFollower(
            lambda: self._store, self.declared_protocol, legacy=(not legacy_fresh, self.delayed_growth),
            owner=lambda: repr(self), clock=clock, timer=timer, follows_table=fresh_reads is None,
            on_change=self._follow_protocol,
        )
        # The stores of other regions' replicas, for writes sent there (Meta.write_region, item_home).
        self._region_stores: dict[type[ShardMetadata], ShardCountStore] = {}
        #: Best-effort requests to the home region given up because it could not be reached
        #: (rate reports, growths on a throttle): see :data:`~pynamodb_sharding.signals.home_request_dropped`.
        self.home_requests_dropped = 0
        self._dropped_lock = threading.Lock()
        self._random = random if random is not None else _random.Random()
        # When this process first saw each lock value that lies in the future (clock skew).
        self._future_changes: dict[tuple[str, str, float], float] = {}
        self.partition_write_units = float(partition_write_units)
        self.target_utilization = None if target_utilization is None else float(target_utilization)
        self.rate_interval = float(rate_interval)
        self.shrink_utilization = None if shrink_utilization is None else float(shrink_utilization)
        self.rate_reports = rate_reports
        quiet = QUIET_FRACTION * (self.target_utilization or 0) * self.partition_write_units * self.rate_interval
        self.quiet_units = quiet
        # Sampled reports drop nothing: a quiet process's units are sampled (sampled_report).
        self.local_writes = LocalWrites(self.rate_interval, 0.0 if rate_reports is not None else quiet, timer=timer)
        # The units a window held at this process's last report of each key (see _written).
        self._seen_units: dict[tuple[str, str], float] = {}
        # The rate window (index) of this process's last report of each key (see _boundary_spread).
        self._last_report_window: dict[tuple[str, str], int] = {}
        # The write units of the last acknowledged put of each key: what a throttled one counts
        # (a plain dict: one assignment is atomic; cleared when it holds too many keys).
        self._last_units: dict[tuple[str, str], float] = {}
        # table name -> the warm write units DescribeTable reported (None: none reported).
        self._warm_write_units: dict[str, float | None] = {}
        # What a writer knows of a key without a metadata item: its initial count.
        self._unstored = ShardState(count=initial, last_updated=-1.0, stored=False)

    def __repr__(self) -> str:
        return f"DynamicShards({self.metadata_model.__name__}, max_shards={self.max_shards})"

    @property
    def store(self) -> ShardCountStore:
        """The cached counts of this region's replica of the metadata table; within a write
        sent to another region (``Meta.write_region``, ``Meta.item_home``), that region's, so
        that the write spreads over the count readers there read."""
        route = current_route()
        if route is None:
            return self._store
        model = region_model(self.metadata_model, route.region, route.host)
        if model is self.metadata_model:
            return self._store
        found = self._region_stores.get(model)
        if found is None:
            # setdefault settles racing threads: one store per region.
            found = self._region_stores.setdefault(model, ShardCountStore(model, **self._store_settings))
        return found

    @store.setter
    def store(self, store: ShardCountStore) -> None:
        """Replace this region's store (a test injects one that behaves differently)."""
        self._store = store

    def describe(self) -> str:
        if self.target_utilization is None:
            when = "grows on hot-partition throttles"
        else:
            when = (
                f"grows when a shard's write rate passes {self.growth_threshold:g} units/s "
                f"({self.target_utilization:g} x {self.partition_write_units:g}) or on hot-partition throttles"
            )
        return (
            f"{self!r}: count per key in table {self.metadata_model.Meta.table_name!r}, "
            f"{when} (cooldown {self.cooldown:g} s), reads cover the history"
        )

    @property
    def growth_threshold(self) -> float:
        """Write units per second per shard past which proactive growth grows a key
        (``target_utilization x partition_write_units``; infinite when reactive only).

        .. versionadded:: 0.1.0
        """
        if self.target_utilization is None:
            return math.inf
        return self.target_utilization * self.partition_write_units

    # -- the ShardStrategy interface ---------------------------------------------------------

    def validate(self, space: KeySpace, model: type[Model]) -> None:
        self.bind_companions(space, model)

    def bind_companions(self, space: KeySpace, model: type[Model]) -> None:
        """Check the metadata model's key schema and make it follow ``model``'s connection
        (:func:`~pynamodb_sharding._metadata.follow_connection`): called when ``model`` is
        defined, for its own ``Sharding`` and for each sharded index's.

        .. versionadded:: 0.1.0
        """
        meta = self.metadata_model
        if (hash_keyname(meta), range_keyname(meta)) != ("partition_key", "model"):
            msg = (
                f"{space.name}: the metadata model {meta.__name__} "
                f"changed ShardMetadata's key schema; subclass ShardMetadata without redefining "
                f"partition_key or model."
            )
            raise ShardingDefinitionError(msg)
        follow_connection(meta, model)

    def companion_models(self) -> tuple[type[Model], ...]:
        return (self.metadata_model,)

    def shard_count(self, shard_key: ShardKey) -> int:
        space, key = shard_key.space, shard_key.value
        state = self._state(space, key)
        return self.initial if state is None else state.count

    def moving_floor(self, shard_key: ShardKey, *, fresh: bool = False) -> int:
        """The lowest count a job may be moving ``key``'s items down to: the current count, or
        the count of a shrink still in the history (a compaction trims it once done) when that
        is lower. A compaction that read the lowered count may go on moving items out of the
        shards above it after the key grew again (the moves of a page it planned before, for as
        long as the page takes): reads treat those shards as moved out of until the history is
        trimmed (by the compaction of a later shrink: see ``trim_histories``). ``fresh``: from
        the key's item read now, not the cached count.
        """
        space, key = shard_key.space, shard_key.value
        state = self._load(space, key) if fresh else self._state(space, key)
        return self.initial if state is None else state.moving_floor

    def count_watch(self, shard_key: ShardKey) -> CountWatch | None:
        """A :class:`CountWatch` for a merged read of ``key`` that starts now, before it finds
        its shards (it reads nothing); ``None`` when counts are not cached (``cache_ttl=0``):
        a job then moves items at once after a shrink, and no read is known safe for any time."""
        in_force = self.protocol_in_force()
        if in_force.settle <= 0:
            return None
        timer = self.store.timer
        started = timer()
        # The count the read is planned with was read at most cache_ttl before it starts
        # (cached reads) or after it started (fresh reads); a compaction moves nothing of a
        # shrink made after that read before settle seconds have passed since the shrink.
        safe_for = in_force.settle if self._fresh_reads() else max(0.0, in_force.settle - in_force.cache_ttl)
        return CountWatch(self, shard_key, started + safe_for, started)

    def read_shards(self, shard_key: ShardKey) -> tuple[int, ...]:
        space, key = shard_key.space, shard_key.value
        state = self._load(space, key) if self._fresh_reads() else self._state(space, key)
        return tuple(range(1, (self.initial if state is None else state.read_count) + 1))

    def likely_read_count(self, shard_key: ShardKey) -> tuple[int, tuple[Any, ...]] | None:
        """How many shards a read of ``key`` probably covers, known without a request, when
        finding them costs one: the read count of what this process last read of the key (also
        after its cached count expired), with that state's version (:meth:`early_pages_valid`).
        Merged reads start those shards' first requests while the count is read. ``None`` when
        the count is cached (cached reads: no request), or this process never read the key:
        then nothing is sent early.

        .. versionadded:: 0.1.0
        """
        namespace, key = self._namespace(shard_key.space), shard_key.value
        cached = self.store.cached(namespace, key)
        if self._protocol.known() and not self._fresh_reads() and (
                cached is not None or self.store.known_absent(namespace, key)):
            return None
        seen = self.store.last_seen(namespace, key)
        if seen is None:
            return None
        if seen == SEEN_ABSENT:
            return self.initial, seen
        count, read_count = seen[2], seen[3]
        if read_count != count:
            return None  # items may be moving between its shards: they are read in order
        return read_count, seen

    def early_pages_valid(self, shard_key: ShardKey, version: tuple[Any, ...]) -> bool:
        """Whether the first requests a merged read sent before it read the count of ``key``
        (from :meth:`likely_read_count`'s ``version``) stand for its shards: the count it read
        since is the same version, with no shard items move out of. Items move only out of the
        shards of a lowered count not trimmed yet, and a lowered count or a trim makes another
        version, so nothing moved between the shards while the requests were answered.
        Otherwise (the count grew, shrank, was trimmed, or is not known) they are dropped and
        the shards are read again: a compaction that moved items into a shard after its early
        page was read, and trimmed the history before the count was, would be missed."""
        namespace, key = self._namespace(shard_key.space), shard_key.value
        return self.store.last_seen(namespace, key) == version
    def shards_at(self, shard_key: ShardKey, at: float, *, fresh: bool = True) -> int:
        """The highest shard ``key`` had used by epoch second ``at``: the largest count in its
        history that took effect at or before ``at`` (``initial`` before any). ``fresh`` reads
        the metadata item as :meth:`read_shards` does; else the cached count is used.

        .. versionadded:: 0.1.0
        """
        space, key = shard_key.space, shard_key.value
        state = self._load(space, key) if fresh and self._fresh_reads() else self._state(space, key)
        if state is None:
            return self.initial
        if all(entry.count != state.count for entry in state.history):
            return state.read_count  # a count whose start is not recorded: skip nothing
        return max((self.initial, *(entry.count for entry in state.history if entry.at <= at)))

    @property
    def activation_delay(self) -> float:
        """Seconds after a growth before writers use its new shards, as the fleet protocol in
        force says (:meth:`protocol_in_force`): ``cache_ttl + clock_skew`` with cached reads,
        so that a reader's cached count covers every shard written; with a home region (global
        tables) also ``replication_lag`` (plus ``clock_skew`` when not counted already), so
        that every region's replica shows the count before any item on its new shards can
        reach it; else ``0``. On a table that stores no protocol, as 0.2 did:
        ``cache_ttl + clock_skew`` with ``delayed_growth``.

        .. versionadded:: 0.2.0
        """
        in_force = self.protocol_in_force()
        return in_force.home_delay if self.store.declared_home is not None else in_force.delay

    def protocol_in_force(self, *, refresh: bool = False) -> InForce:
        """What this process follows now: the fleet protocol its metadata table stores (read once
        per ``PROTOCOL_TTL``; ``refresh``: now), or on a table of 0.2, which stores none, its
        own declaration.
        """
        if refresh:
            self._protocol.refresh()
        return self._protocol.in_force()

    def store_protocol(self, protocol: FleetProtocol, *, immediately: bool = False) -> StoredProtocol:
        """Store ``protocol`` as the fleet protocol of this strategy's metadata table (see
        :func:`pynamodb_sharding.store_fleet_protocol`); returns the record stored.
        """
        record = self._protocol.store(protocol, home=self.store.declared_home is not None, immediately=immediately)
        self.protocol_in_force()
        return record

    def table_created(self) -> StoredProtocol | None:
        """Store this declaration's fleet protocol in the metadata table, created just now (by
        ``create_table``), unless it holds one already; returns what the table holds. A table
        created by 0.3 thus starts with its protocol (cached reads by default), and only a table
        that stores none (0.2's, or one created outside the library) is read as 0.2 read it.
        """
        record = self._protocol.store_if_absent()
        self.protocol_in_force()
        return record

    def settle_seconds(self) -> float:
        """Seconds after a change of a key's count before no process uses the count before it:
        the longest ``cache_ttl`` plus ``clock_skew`` any process of the table follows.
        """
        return self.protocol_in_force().settle

    def _fresh_reads(self) -> bool:
        """Whether a merged read reads the key's item now: the protocol says reads are not
        cached, or this process was declared ``fresh_reads=True`` (always safe)."""
        return self.fresh_reads is True or not self.protocol_in_force().cached_reads

    def _follow_protocol(self, in_force: InForce) -> None:
        """Cache counts for what the protocol in force allows (this process's ``cache_ttl`` at most)."""
        self._store_settings["ttl"] = in_force.cache_ttl  # the stores of regions met later too
        for store in (self._store, *self._region_stores.values()):
            store.retime(in_force.cache_ttl)
        if self._hints is not None:
            self._hints.retime(in_force.cache_ttl)

    def write_count(self, state: ShardState) -> int:
        """The shards a new item of a key in ``state`` may be written to now: ``1..write_count``
        (its count, less while a growth is not in effect yet: see :attr:`activation_delay`,
        and :attr:`ShardState.write_count` for global tables).

        .. versionadded:: 0.2.0
        """
        if state.write_count <= 1 or not state.stored:
            return state.write_count  # no growth to wait for: no need of the protocol
        delay = self.activation_delay
        if delay <= 0:
            return state.write_count
        return min(state.write_count, state.count_at(self.clock() - delay))

    def _write_count(self, space: KeySpace, key: str, state: ShardState) -> int:
        """:meth:`write_count` of ``key``, a change dated in the future (by a host whose clock
        runs fast) counting from when this process first saw it: it was made before then, so
        every reader's cache covers it one delay later, and clock skew holds a growth back by
        that delay, not until the fast clock's time comes."""
        now = self.clock()
        if state.last_updated <= now + _SKEW_TOLERANCE or state.write_count <= 1 or not state.stored:
            return self.write_count(state)
        seen = (self._namespace(space), key, state.last_updated)
        if len(self._future_changes) >= _FUTURE_CHANGES_KEPT:
            self._future_changes.clear()
        first_seen = self._future_changes.setdefault(seen, now)
        past = tuple(entry for entry in state.history if entry.at <= now + _SKEW_TOLERANCE)
        future = [entry for entry in state.history if entry.at > now + _SKEW_TOLERANCE]
        if future:  # the last of them is the count in effect once they all are
            past += (HistoryEntry(at=first_seen, count=max(future, key=lambda entry: entry.at).count),)
        return self.write_count(attrs.evolve(state, history=past, last_updated=first_seen))

    def write_shard(self, item: ItemKey) -> int:
        space, key = item.key.space, item.key.value
        state = self._state_for_write(space, key)
        return self._random.randint(1, self._write_count(space, key, state))

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return self.read_shards(item.key)

    def write(self, item: ItemKey, send: Callable[[int], _R]) -> _R:
        """Write a new item: retry and grow on key-range throttles.

        Once an attempt may have been applied (its reply was lost, or it got a 5xx), every
        retry of this write goes to that attempt's shard: the count may still grow, but the
        item is never written to a second shard.

        Raises:
            MetadataError: the key's metadata item is corrupt (nothing is written).
            MetadataRequestError: the metadata table could not be read or changed (a
                ``PutError`` whose ``cause`` is the metadata table's error).
            CapacityThrottleError: a throttle more shards cannot fix (provisioned capacity,
                account quota, on-demand maximum, a hot read partition), after botocore's
                retries; the message names the fix (a ``PutError``).
            IndexThrottleError: a global secondary index throttled the write (a ``PutError``;
                base-table shards cannot fix a hot index key).
            pynamodb.exceptions.PutError: any other failure, including a table-level throttle
                after botocore's retries, or a key-range throttle after ``max_attempts``.
        """
        space, key = item.key.space, item.key.value
        with self._metadata_requests(space, key):
            state = self._state_for_write(space, key)
        _ensure_hook(space.model)
        pinned: int | None = None
        demand_counted = False
        for attempt in range(1, self.max_attempts + 1):
            last = attempt == self.max_attempts
            shard = pinned if pinned is not None else self._random.randint(1, self._write_count(space, key, state))
            error: Exception | None = None
            written = False
            with attempts.tracking() as sent:
                try:
                    with _reacting_early(not last), _measuring(self.target_utilization is not None):
                        result = send(shard)
                        consumed = getattr(_in_write, "consumed", None)
                except _EarlyThrottle as early:
                    throttle = early.throttle
                except Exception as exc:
                    throttle = classify(exc)
                    if not throttle.is_throttle:
                        raise
                    error = exc
                else:
                    written = True
            if written:
                if self.target_utilization is not None:
                    # A put that does not ask for its capacity (a user's own hook) counts 1 unit.
                    units = 1.0 if consumed is None else consumed
                    if len(self._last_units) >= _FUTURE_CHANGES_KEPT:
                        self._last_units.clear()
                    self._last_units[(self._namespace(space), key)] = units
                    if not demand_counted:
                        self._written(space, key, units)
                return result
            if sent.may_have_applied:
                pinned = shard
            if self.target_utilization is not None and not demand_counted and throttle.grows_shards:
                # The write is wanted whether or not DynamoDB takes it now: the rate counts what
                # writers ask for, so a throttled key grows to its demand, not to what it served.
                demand_counted = True
                self._written(space, key, self._last_units.get((self._namespace(space), key), 1.0))
            throttle_observed.send(template_of(space.model), key=key, throttle=throttle)
            if error is not None:
                if throttle.kind is ThrottleKind.INDEX:
                    index = throttle.index_name or "a global secondary index"
                    msg = (
                        f"{self._owner(space)}: writes of key {key!r} are throttled by {index}, whose "
                        f"own partition key is hot; base-table shards do not fix a GSI hot key: shard "
                        f"the index key too, or lower the write rate."
                    )
                    raise IndexThrottleError(msg, error) from error
                if not throttle.grows_shards:
                    msg = (
                        f"{self._owner(space)}: writes of key {key!r} are throttled, and more shards "
                        f"cannot help (the count stays at {state.count}): {throttle.capacity_fix()}."
                    )
                    raise CapacityThrottleError(msg, error) from error
                if last:
                    raise error
            with self._metadata_requests(space, key):
                state = self._after_key_range_throttle(space, key, state, attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover

    def _written(self, space: KeySpace, key: str, units: float) -> None:
        """Proactive growth after a successful put: count its units, report them to the key's
        item each time they reach the report quantum (or, sampled, when the interval ends with
        less), and grow (or shrink) the key by the rate of all writers.

        Best effort: the item is written; a failure here is logged and the next report tries again.
        """
        namespace = self._namespace(space)
        cached = self.store.cached(namespace, key) or self._hinted_state(namespace, key)
        count = 1 if cached is None else cached.count
        may_shrink = self.shrink_utilization is not None and cached is not None and cached.count > self.initial
        spread = 0.0
        if self.rate_reports is None:
            due: float | None = self.local_writes.add((namespace, key), units, report_quiet=may_shrink)
        else:
            # Never more than twice rate_reports a window, however far the key's load is past its
            # threshold (at max_shards, or while a ramp outruns its growth): the quantum grows
            # with the units a window held at this process's last report.
            seen = self._seen_units.get((namespace, key), 0.0)
            quantum = max(self.report_quantum(count), seen / (2 * self.rate_reports))
            counted = self.local_writes.count((namespace, key), units, quantum=quantum)
            if counted is None:
                return
            if counted.exact:
                due = counted.units
            else:
                due = self.sampled_report(counted.units, count)
                if due is not None:
                    spread = self.report_spread(counted.units, due)
            if due is not None:
                spread += self._boundary_spread(namespace, key, quantum)  # where the reports fall
        if due is None:
            return
        try:
            # Best effort at the home region too: sent once, and not at all for a while after
            # it could not be reached, so that the write this report follows never waits on it.
            with self.store.best_effort():
                if cached is None and self.store.get(namespace, key, owner=self._owner(space)) is None:
                    # A key reported for the first time gets its item (it is no longer cold).
                    self.store.create(namespace, key, self.initial, self.clock(), owner=self._owner(space))
                reported = self.store.report_writes(
                    namespace, key, due, self.clock(), self.rate_interval, owner=self._owner(space), spread=spread,
                )
                if reported is not None:
                    if len(self._seen_units) >= _FUTURE_CHANGES_KEPT:
                        self._seen_units.clear()
                    window = reported[1]
                    self._seen_units[(namespace, key)] = max(window.units, window.previous)
                    self._follow_rate(space, key, *reported)
                    self._publish(space, key, reported[0], changed_here=False)  # keeps a hot key's entry alive
        except Exception as exc:
            if home_unavailable(exc):
                self._home_request_dropped(space, key, "rate report", exc)
                return
            logger.warning(
                "%s: could not report the write rate of key %r to the metadata table %r; proactive "
                "growth of this key waits for the next report",
                self._owner(space), key, self.metadata_model.Meta.table_name, exc_info=True,
            )

    def _boundary_spread(self, namespace: str, key: str, quantum: float) -> float:
        """The variance a process's first report in a window adds for where its reports fall:
        up to one quantum of its units lands in the window before or after (``quantum² / 4``)."""
        start = math.floor(self.clock() / self.rate_interval)
        marker = (namespace, key)
        if self._last_report_window.get(marker) == start:
            return 0.0
        if len(self._last_report_window) >= _FUTURE_CHANGES_KEPT:
            self._last_report_window.clear()
        self._last_report_window[marker] = start
        return quantum * quantum / 4

    def report_quantum(self, count: int) -> float:
        """The units ``q`` of a rate report of a key with ``count`` shards: the growth threshold's
        units per ``rate_interval`` over all its shards, divided by ``rate_reports``. A process
        reports a key each time it has written ``q`` units of it.

        .. versionadded:: 0.2.0
        """
        reports = self.rate_reports if self.rate_reports is not None else 1 / QUIET_FRACTION
        return count * self.growth_threshold * self.rate_interval / reports

    def sampled_report(self, units: float, count: int) -> float | None:
        """What a process reports of the ``units`` of a key with ``count`` shards it counted
        below the quantum ``q`` (:meth:`report_quantum`) when its interval ended: ``q`` with
        probability ``units / q`` and nothing otherwise, so the sum over all processes is the
        key's units on average, and the number of reports stays near the key's units over ``q``
        per interval however thinly they are spread (``units`` at or above ``q`` are reported
        as they are). Under 1 % of the threshold's units per interval (a quiet writer, which 0.1
        did not report at all) the quantum is the threshold's whole units per interval: a key
        written by ten thousand quiet processes still shows its rate, and a cold key costs one
        report per that many units at most.

        .. versionadded:: 0.2.0
        """
        quantum = self.report_quantum(count)
        if units >= quantum:
            return units
        if units < self.quiet_units:
            quantum = max(quantum, self.growth_threshold * self.rate_interval)
        if units <= 0 or self._random.random() * quantum >= units:
            return None
        return quantum

    @staticmethod
    def report_spread(units: float, reported: float) -> float:
        """The variance a sampled report adds to its window: ``reported (reported - units)``,
        the unbiased estimate of the sampling's variance (0 for units reported as they are).
        """
        return max(0.0, reported * (reported - units))

    @property
    def _growth_horizon(self) -> float:
        """Seconds from a growth on the rate to when the next one can be in effect: this one's
        :attr:`activation_delay`, the rate cooldown of two windows, and the window the rate lags by."""
        return self.activation_delay + self._rate_cooldown + self.rate_interval

    def projected_rate(self, window: RateWindow, now: float) -> float:
        """The write rate (units/s) a growth of a key decided at ``now`` must serve: the rate
        its windows confirm (:meth:`RateWindow.confirmed`: two consecutive windows' lower
        confidence bounds, :data:`RATE_CONFIDENCE` standard deviations of the sampled reports'
        noise below the estimate), or, while it rises by more than the noise over three windows
        (:meth:`RateWindow.rise`), its lower bound plus its rise per second over the time until
        the next growth can be in effect (this one's :attr:`activation_delay`, the rate cooldown
        of two windows, and the window the rate lags by). A key ramping up (a viral key) then
        grows ahead of its load instead of one step behind it; a steady key is never sized for
        more than its measured load.

        Only a rise that means something is projected, and only for a key taking at least one
        shard's worth at the growth threshold (a quiet key's sampled estimate swings widely).

        .. versionadded:: 0.2.0
        """
        z = RATE_CONFIDENCE
        rise = window.rise(now, z)
        low, _ = window.bounds(now, z)
        if rise <= 0 or low < self.growth_threshold:
            return window.confirmed(now, z)
        return low + rise * self._growth_horizon

    def _follow_rate(self, space: KeySpace, key: str, state: ShardState, window: RateWindow) -> None:
        """Grow ``key`` when the lower confidence bound of its rate per shard passes the threshold
        in two consecutive windows (or, rising beyond the noise over three, sized for where it is
        heading); shrink it (opt-in) when its rate stayed low for two windows."""
        now = self.clock()
        threshold = self.growth_threshold
        rising = window.rise(now, RATE_CONFIDENCE) > 0 and window.bounds(now, RATE_CONFIDENCE)[0] >= threshold
        rate = self.projected_rate(window, now)
        wanted = max(self.initial, math.ceil(rate / threshold - 1e-9))
        if wanted > state.count:
            if state.count >= self.max_shards or self._in_cooldown(space, key, state, self._rate_cooldown):
                return
            # A steady key gets what its measured load needs; a rising one at least the policy's step.
            new = min(self.max_shards, max(wanted, self._next_count(space, state.count)) if rising else wanted)
            self._change(space, key, state, new, reason="rate")
            return
        if self.shrink_utilization is None or state.count <= self.initial:
            return
        estimate = window.per_second(now)
        needed = max(self.initial, math.ceil(estimate / threshold - 1e-9))
        low = self.shrink_utilization * self.partition_write_units * state.count
        previous = window.previous / window.interval
        quiet_for = now - state.last_updated
        if (estimate < low and previous < low and needed < state.count
                and quiet_for >= max(self.cooldown, 10 * self.rate_interval)):
            changed = self.store.change(self._namespace(space), key, state, needed, now, owner=self._owner(space))
            if changed is not None:
                shard_count_changed.send(
                    template_of(space.model), key=key, old=state.count, new=needed, reason="shrink",
                )
                self._publish(space, key, changed)

    def warm_write_units(self, model: type[Model]) -> float | None:
        """The warm write throughput ``DescribeTable`` reports for ``model``'s table (units per
        second), read once per process; ``None`` when the table reports none.

        .. versionadded:: 0.1.0
        """
        table = model.Meta.table_name
        if table not in self._warm_write_units:
            units: float | None = None
            try:
                warm = model.describe_table().get("WarmThroughput")
            except PynamoDBException:
                logger.debug("DescribeTable of %r failed; its warm throughput stays unknown", table, exc_info=True)
                return None
            if isinstance(warm, Mapping) and isinstance(warm.get("WriteUnitsPerSecond"), int | float):
                units = float(warm["WriteUnitsPerSecond"])
            self._warm_write_units[table] = units
        return self._warm_write_units[table]

    def _check_ceiling(self, space: KeySpace, key: str, count: int) -> None:
        """Report a growth past the table's warm write throughput: the shards it adds cannot
        all be used until the table is warmed up to match."""
        warm = self.warm_write_units(space.model)
        wanted = count * self.partition_write_units
        if warm is None or wanted <= warm:
            return
        logger.warning(
            "%s: key %r now has %d shards (%g write units/s at %g per partition), past the warm "
            "write throughput of table %r (%g units/s): raise it with UpdateTable WarmThroughput "
            "(WriteUnitsPerSecond) or the extra shards throttle at the table's ceiling",
            self._owner(space), key, count, wanted, self.partition_write_units, space.model.Meta.table_name, warm,
        )
        warm_throughput_exceeded.send(
            template_of(space.model), key=key, shards=count, wanted=wanted, warm_write_units=warm,
        )

    def throttled(self, shard_key: ShardKey, attempt: int) -> int:
        """React to a key-range throttle of a write of ``shard_key`` sent outside :meth:`write`
        (a sharded index's key, throttled with ``IndexWriteKeyRangeThroughputExceeded``): wait
        as :meth:`write` does, grow past the cooldown; returns the count to retry with.

        Args:
            shard_key: the throttled key.
            attempt: how many writes of it were throttled in a row (lengthens the backoff).

        .. versionadded:: 0.1.0
        """
        space, key = shard_key.space, shard_key.value
        with self._metadata_requests(space, key):
            state = self._state_for_write(space, key)
            return self._write_count(space, key, self._after_key_range_throttle(space, key, state, attempt))

    @contextmanager
    def _metadata_requests(self, space: KeySpace, key: str) -> Iterator[None]:
        """Turn a failed request to the metadata table into the ``PutError`` that ``save()`` promises."""
        try:
            yield
        except ShardingError:
            raise
        except PynamoDBException as exc:
            msg = (
                f"{self._owner(space)}: the write of key {key!r} needs its shard count, but the "
                f"metadata table {self.metadata_model.Meta.table_name!r} failed ({exc.msg}); check that "
                f"table's capacity and permissions, then retry the save."
            )
            raise MetadataRequestError(msg, exc) from exc

    def grow(self, shard_key: ShardKey) -> int:
        """Grow the count of ``key`` now by the growth policy, ignoring the cooldown.

        The count grown from is read in this region; the change is made in the metadata
        model's home region (``Meta.home_region``), conditionally. When it fails there (another
        writer changed the count, or this region's replica had not caught up yet), the count is
        read again at home: a change to a count at least as large as the one wanted counts as
        this growth and that count is returned; otherwise the home count is grown from. At
        ``max_shards`` the count stays.

        Raises:
            ShardCountConflictError: the count kept changing at home under every try.
        """
        space, key = shard_key.space, shard_key.value
        state = self._fresh_state(space, key)
        wanted = new = self._next_count(space, state.count)
        for _ in range(_CHANGE_TRIES):
            if new == state.count:
                return state.count
            changed = self._try_change(space, key, state, new, reason="grow")
            if changed is not None:
                return changed.count
            state = self._home_state(space, key)
            if state.count >= wanted:
                return state.count
            new = self._next_count(space, state.count)
        msg = f"{space.model_name}: key {key!r} kept changing while growing it; try again."
        raise ShardCountConflictError(msg)

    def shrink(self, shard_key: ShardKey, to: int) -> int:
        """Lower the write count of ``key`` to ``to``; reads keep covering the largest count ever.

        The count is read, checked and changed in the metadata model's home region, where
        counts change (``Meta.home_region``).

        Raises:
            ShardingError: ``to`` is not in ``1..current count``.
            ShardCountConflictError: the count kept changing at home under every try.
        """
        space, key = shard_key.space, shard_key.value
        for _ in range(_CHANGE_TRIES):
            state = self._home_state(space, key)
            if isinstance(to, bool) or not isinstance(to, int) or not 1 <= to <= state.count:
                msg = (
                    f"{space.name}: cannot shrink key {key!r} to {to!r} shards; "
                    f"give an int in 1..{state.count} (its current count), or grow it with grow()."
                )
                raise ShrinkTargetError(msg)
            if to == state.count:
                return to
            changed = self.store.change(self._namespace(space), key, state, to, self.clock(), owner=self._owner(space))
            if changed is not None:
                shard_count_changed.send(template_of(space.model), key=key, old=state.count, new=to, reason="shrink")
                self._publish(space, key, changed)
                return changed.count
        msg = f"{space.model_name}: key {key!r} kept changing while shrinking it; try again."
        raise ShardCountConflictError(msg)

    def history(self, shard_key: ShardKey) -> list[HistoryEntry]:
        """The recorded count changes of ``key``, oldest first (read from the table)."""
        space, key = shard_key.space, shard_key.value
        state = self._load(space, key)
        return [] if state is None else list(state.history)

    def refresh(self, shard_key: ShardKey) -> int:
        """Forget the cached count of ``key`` and read it again; returns the read count."""
        space, key = shard_key.space, shard_key.value
        self.store.forget(self._namespace(space), key)
        return self.shard_count(shard_key)

    # -- internals ------------------------------------------------------------------------

    def _load(self, space: KeySpace, key: str) -> ShardState | None:
        """The state of ``key`` read from the table now (and cached); ``None`` without an item."""
        return self.store.load(self._namespace(space), key, owner=self._owner(space))

    def _namespace(self, space: KeySpace) -> str:
        return self.namespace if self.namespace is not None else space.namespace

    def _owner(self, space: KeySpace) -> str:
        return space.name

    def _state(self, space: KeySpace, key: str) -> ShardState | None:
        """The cached state of ``key``, read when not cached; ``None`` for a key without an
        item (remembered for ``cache_ttl``, as a cached count is)."""
        namespace = self._namespace(space)
        if self.store.known_absent(namespace, key):
            return None
        state = self.store.get(namespace, key, owner=self._owner(space))
        if state is None:
            self.store.mark_absent(namespace, key)
        return state

    def _state_for_write(self, space: KeySpace, key: str) -> ShardState:
        """The count a write of ``key`` spreads over, at no request for a cold key.

        A key without a metadata item has its initial count, and any shard of the count a
        writer knows is a valid place (reads cover the whole history), so the first write of a
        key within ``cache_ttl`` reads nothing; a key written again reads its item once per
        ``cache_ttl``, as warm keys always did. No item is created until the key grows.
        """
        namespace, owner = self._namespace(space), self._owner(space)
        cached = self.store.cached(namespace, key)
        if cached is not None:
            return cached
        hinted = self._hinted_state(namespace, key)
        if hinted is not None:
            return hinted
        if self.store.known_absent(namespace, key):
            return self._unstored
        if self.store.first_sight(namespace, key) and (self._hints is None or not self._hints.listed(namespace, key)):
            return self._unstored
        state = self.store.get(namespace, key, owner=owner)
        if state is None:
            self.store.mark_absent(namespace, key)
            return self._unstored
        return state

    @property
    def _writer_hints(self) -> HotKeyHints | None:
        """The hot-key hints writers use, ``None`` without them or with a home region (global
        tables): a writer there must not use a count its own region's replica of the item does
        not show yet."""
        return None if self.store.declared_home is not None else self._hints

    def _hinted_state(self, namespace: str, key: str) -> ShardState | None:
        """The state the hot-key hints give ``key`` for a write now (no request of its own:
        the hint list is read once per ``cache_ttl``), ``None`` when they give none that
        answers :meth:`write_count` right. Only writers use it: it may be behind the item
        (a state a writer may always use), while a reader's count must cover every shard
        written."""
        hints = self._writer_hints
        entry = None if hints is None else hints.entry(namespace, key)
        if entry is None or not entry.usable_at(self.clock() - self.activation_delay):
            return None
        return entry.state

    def _publish(self, space: KeySpace, key: str, state: ShardState, *, changed_here: bool = True) -> None:
        """Publish ``key``'s new ``state`` to the hot-key hints (best effort) when it is above
        the initial count or the key is listed (a lowered count must reach the list too).

        ``changed_here=False``: a state a rate report returned. Every reporting process of a
        hot key sees the same list age, or lag behind a growth another process publishes: about
        one publish per rate interval among them all renews an entry that lives an hour, or
        publishes a growth whose own publish was lost."""
        hints = self._writer_hints
        if hints is None:
            return
        namespace = self._namespace(space)
        if state.read_count <= self.initial and not hints.listed(namespace, key):
            return
        chance = 1.0 if changed_here else 1.0 / (self.rate_reports or 1 / QUIET_FRACTION)
        if hints.due(namespace, key, state, chance=chance):
            hints.publish(self.store.writer, namespace, key, state)

    def settle_hints(self, namespace: str, key: str, state: ShardState) -> bool:
        """Before a job moves items of ``key`` off shards above its (lowered) count: make the
        hot-key hints show ``state``, the item's current one. Returns ``True`` when a copy
        showed another state and ``state`` was published: writers may use the old one for up
        to ``cache_ttl`` more, so the job waits that long from now.

        Raises:
            pynamodb.exceptions.PynamoDBException: the hints could not be read or published.

        .. versionadded:: 0.2.0
        """
        hints = self._writer_hints
        return False if hints is None else hints.settle(self.store.writer, namespace, key, state)

    def _fresh_state(self, space: KeySpace, key: str) -> ShardState:
        """The state of ``key`` as this region's replica holds it now; its item is created (at
        home) when the replica shows none."""
        state = self._load(space, key)
        if state is None:
            state = self.store.create(self._namespace(space), key, self.initial, self.clock(), owner=self._owner(space))
        return state

    def _home_state(self, space: KeySpace, key: str) -> ShardState:
        """The state of ``key`` as the home region holds it, where its count changes (this
        region's replica may lag); its item is created there when it has none. While the
        item's home is moving, waits for the move (up to ``Meta.home_retry_seconds``)."""
        namespace, owner = self._namespace(space), self._owner(space)
        deadline: float | None = None
        while True:
            state = self.store.load(namespace, key, owner=owner, home=True)
            if state is None:
                return self.store.create(namespace, key, self.initial, self.clock(), owner=owner)
            if not state.moving:
                return state
            deadline = self.store.deadline() if deadline is None else deadline
            self.store.wait_for_move(deadline)

    def _next_count(self, space: KeySpace, count: int) -> int:
        new = self.growth(count)
        if isinstance(new, bool) or not isinstance(new, int) or new <= count:
            msg = (
                f"{space.model_name}: the growth policy {self.growth!r} turned {count} shards into "
                f"{new!r}; it must return a larger int."
            )
            raise GrowthPolicyError(msg)
        return min(new, self.max_shards)

    def _newest(self, space: KeySpace, key: str, state: ShardState) -> ShardState:
        """``state``, or what this process cached since if that is newer."""
        cached = self.store.cached(self._namespace(space), key)
        return cached if cached is not None and cached.newer_than(state) else state

    def _after_key_range_throttle(
        self, space: KeySpace, key: str, state: ShardState, throttled: int
    ) -> ShardState:
        """The reaction to a hot-partition throttle; returns the state to retry with."""
        namespace = self._namespace(space)
        if not state.stored and not self.store.known_absent(namespace, key):
            # A cold key's first write read nothing: decide on what is stored (a growth made
            # elsewhere, its cooldown), not on the initial count.
            state = self.store.load(namespace, key, owner=self._owner(space)) or self._unstored
            if state.stored:
                return self._after_key_range_throttle(space, key, state, throttled)
            self.store.mark_absent(namespace, key)
        newest = self._newest(space, key, state)
        if newest is not state:  # another thread of this process grew (or shrank) meanwhile
            return newest
        # A count changed at home and not yet in this region's replica, or a growth not in
        # effect yet (fresh_reads=False): its new shards are not to be used yet, and growing
        # again would not add any either.
        pending = self._write_count(space, key, state) < state.count
        if pending or state.count >= self.max_shards or self._in_cooldown(space, key, state):
            low, high = self.backoff
            self.sleep(self._random.uniform(0, min(high, low * 2 ** min(throttled - 1, 16))))
            return self._newest(space, key, state)
        # Past the cooldown: a random wait first, so writers throttled together spread out
        # and the first to wake grows while the others see its growth.
        self.sleep(self._random.uniform(*self.backoff))
        newest = self._newest(space, key, state)
        if newest is not state:
            return newest
        return self._change(space, key, state, self._next_count(space, state.count), reason="throttle")

    @property
    def _rate_cooldown(self) -> float:
        """Seconds between two growths on the write rate: two rate windows, so that the next
        growth follows a window measured at least partly after this one (at most ``cooldown``).
        The rate counts the writes asked for, throttled ones included, so it does not drop
        because of a growth: a key whose demand keeps rising grows every two windows."""
        return min(self.cooldown, 2 * self.rate_interval)

    def _in_cooldown(self, space: KeySpace, key: str, state: ShardState, cooldown: float | None = None) -> bool:
        """Whether the last change of the count is less than ``cooldown`` ago (the strategy's
        ``cooldown`` by default).

        A ``last_updated`` in the future (written by a host whose clock runs fast, and kept
        there by the strictly increasing lock values) counts from when this process first saw
        it, so clock skew delays growth by one cooldown at most.
        """
        if len(state.history) <= 1 and state.count == self.initial:
            # Never changed: the item was only created (by a first rate report), which starts
            # no cooldown, so a key heating up grows as soon as its rate says so.
            return False
        now = self.clock()
        changed_at = state.last_updated
        if changed_at > now + _SKEW_TOLERANCE:
            seen = (self._namespace(space), key, changed_at)
            if len(self._future_changes) >= _FUTURE_CHANGES_KEPT:
                self._future_changes.clear()
            # setdefault settles racing threads without a lock: the first to see it wins.
            changed_at = self._future_changes.setdefault(seen, now)
        return now - changed_at < (self.cooldown if cooldown is None else cooldown)

    def _home_request_dropped(self, space: KeySpace, key: str, request: str, error: BaseException) -> None:
        """Count (and signal) a best-effort request the unreachable home region did not get."""
        with self._dropped_lock:
            self.home_requests_dropped += 1
        logger.info(
            "%s: the home region of %r could not be reached; the %s of key %r was dropped and the "
            "write went on", self._owner(space), self.metadata_model.Meta.table_name, request, key,
        )
        home_request_dropped.send(template_of(space.model), key=key, request=request, error=error)

    def _change(self, space: KeySpace, key: str, state: ShardState, new: int, reason: str) -> ShardState:
        """Set the count if nobody changed it since ``state``; the loser re-reads at home (where
        the count changes: the local replica may not show the winner's change yet), nothing more.

        A growth on a throttle is best effort: when the home region cannot be reached, the
        write goes on at once with the newest count this process knows.
        """
        if reason != "throttle":
            return self._change_now(space, key, state, new, reason)
        try:
            with self.store.best_effort():
                return self._change_now(space, key, state, new, reason)
        except PynamoDBException as exc:
            if not home_unavailable(exc):
                raise
            self._home_request_dropped(space, key, "growth", exc)
            return self._newest(space, key, state)

    def _change_now(self, space: KeySpace, key: str, state: ShardState, new: int, reason: str) -> ShardState:
        changed = self._try_change(space, key, state, new, reason)
        if changed is not None:
            return changed
        if not state.stored:
            # A lost insert read the winner's item at home already.
            cached = self.store.cached(self._namespace(space), key)
            if cached is not None:
                return cached
        return self._home_state(space, key)

    def _try_change(self, space: KeySpace, key: str, state: ShardState, new: int, reason: str) -> ShardState | None:
        """Set the count if nobody changed it since ``state``; ``None`` when another change came
        first. A throttled metadata item (``reason="throttle"``) gives the newest known state."""
        namespace, owner = self._namespace(space), self._owner(space)
        now = self.clock()
        try:
            if not state.stored:
                # The key had no item: the growth inserts it, unless another writer did first.
                changed = self.store.create_grown(namespace, key, state.count, new, now, owner=owner)
            else:
                changed = self.store.change(namespace, key, state, new, now, owner=owner)
            if changed is None:
                return None
        except PynamoDBException as exc:
            if not classify(exc).is_throttle or reason != "throttle":
                raise
            # The metadata item is throttled too (many writers growing it at once, after
            # botocore's retries): growth is best effort, so the write goes on with the newest
            # count this process knows and grows at a later throttle.
            throttle_observed.send(template_of(space.model), key=key, throttle=classify(exc))
            return self._newest(space, key, state)
        if changed.last_updated > now + _SKEW_TOLERANCE:
            self._future_changes[(namespace, key, changed.last_updated)] = now
        # The count we set: `changed` may already be a later writer's state (a lost reply re-read).
        shard_count_changed.send(template_of(space.model), key=key, old=state.count, new=new, reason=reason)
        self._publish(space, key, changed)
        if self.target_utilization is not None and new > state.count:
            try:
                self._check_ceiling(space, key, new)
            except Exception:
                logger.debug("the warm throughput check of %r failed", key, exc_info=True)
        return changed
