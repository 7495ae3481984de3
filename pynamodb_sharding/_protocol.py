"""The fleet protocol: the settings every process of a metadata table follows, stored in the table.

Whether merged reads may use a cached count, how long a count may stay cached, and so how long
after a growth writers wait before they use it, must be the same in every process of a model: a
process that writes a growth at once puts items on shards a process reading from its cache does
not read yet, and those reads miss the items without an error. 0.2 asked every process to be
declared alike. Now the metadata table holds the settings in one item, the *protocol record*
(:data:`PROTOCOL_KEY`), and every process follows what it holds:

* a process reads the record once per :data:`PROTOCOL_TTL` seconds (one consistent ``GetItem``)
  and uses the stored settings, whatever it was declared with (a declaration that differs is
  logged once): merged reads use a cached count only when the table says so, a process caches a
  count for the table's ``cache_ttl`` at most, and a growth is used ``cache_ttl + clock_skew``
  seconds after it is made when reads are cached (plus ``replication_lag`` with a home region);
* a table that stores no record (every table of 0.2, and a new one until the protocol is stored)
  is read as 0.2 read it: every process follows its own declaration (``fresh_reads``,
  ``delayed_growth``, ``cache_ttl``, ``clock_skew``), and all must be declared alike, which a
  process declared for cached reads is warned of once. :func:`store_fleet_protocol` stores one
  (the default: cached reads), once no process of 0.2 runs (they read no record);
* a change of the stored settings is in force everywhere only :data:`PROTOCOL_TTL` seconds, and
  the longest cache either setting allows, after it is made: until then every process that knows
  of it follows the safer of the two (reads cached only if both allow it, counts cached for the
  shorter ``cache_ttl``, growths used after the longer delay), and one that does not know of it
  yet follows the old one. So a running fleet switches in one step, and no read misses an item.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from pynamodb.exceptions import PutError, UpdateError

from pynamodb_sharding._exceptions import FleetProtocolError
from pynamodb_sharding._metadata import next_lock_value

if TYPE_CHECKING:
    from pynamodb_sharding._metadata import ShardCountStore, ShardMetadata

__all__ = [
    "PROTOCOL_KEY",
    "PROTOCOL_TTL",
    "FleetProtocol",
    "InForce",
    "ProtocolFollower",
    "StoredProtocol",
]

logger = logging.getLogger("pynamodb_sharding")

#: ``(partition_key, model)`` of a metadata table's protocol record. ``"#protocol"`` is no table
#: name, so no sharded model's namespace holds it.
PROTOCOL_KEY = ("#protocol", "#protocol")
#: Seconds a process follows the protocol record it read before it reads it again: how long a
#: change takes to reach every process.
PROTOCOL_TTL = 300.0

_CONDITION_FAILED = "ConditionalCheckFailedException"


@attrs.frozen
class FleetProtocol:
    """The settings every process of a metadata table follows.

    Attributes:
        cached_reads: merged reads (``query``, ``count``, ``get``) use the count a process
            cached; ``False``: they read the key's item each time (one consistent ``GetItem``).
        cache_ttl: the longest a process caches a key's count, in seconds.
        clock_skew: seconds two processes' clocks may differ by, plus a metadata request's time.
        replication_lag: global tables: seconds within which a change reaches every region.
    """

    cached_reads: bool = True
    cache_ttl: float = 10.0
    clock_skew: float = 1.0
    replication_lag: float = 2.0

    def growth_delay(self, *, home: bool) -> float:
        """Seconds after a growth before writers use its new shards: ``cache_ttl + clock_skew``
        with cached reads (every reader's cached count covers each shard written), plus, with a
        home region, ``replication_lag`` (and ``clock_skew`` when not counted already)."""
        delay = self.cache_ttl + self.clock_skew if self.cached_reads and self.cache_ttl > 0 else 0.0
        if home:
            delay += self.replication_lag + (0.0 if delay else self.clock_skew)
        return delay

    @property
    def settle(self) -> float:
        """Seconds after a change of a count before no process caches the count before it."""
        return self.cache_ttl + self.clock_skew if self.cache_ttl > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"cached_reads": self.cached_reads, "cache_ttl": self.cache_ttl, "clock_skew": self.clock_skew,
                "replication_lag": self.replication_lag}


@attrs.frozen
class InForce:
    """What a process follows at one moment.

    Attributes:
        cached_reads: merged reads may use a cached count.
        cache_ttl: the longest this process caches a count.
        delay: seconds after a growth before writers use it, without a home region.
        home_delay: the same with a home region.
        settle: seconds by which every process's cache shows a change of a count (the longest
            ``cache_ttl`` plus ``clock_skew`` any process may follow): what a job waits before
            it moves items off shards a lowered count no longer writes.
        stored: ``True`` when the table stores it; ``False``: the process's own declaration (a
            table of 0.2, which stores none).
    """

    cached_reads: bool
    cache_ttl: float
    delay: float
    home_delay: float
    settle: float
    stored: bool


@attrs.frozen
class StoredProtocol:
    """A protocol record: the settings in force, and during a change, the ones before it.

    Attributes:
        current: the settings stored last.
        previous: the settings before them, while the change is not in force everywhere yet.
        changed_at: epoch seconds of the change.
        effective_at: epoch seconds from which every process follows ``current`` alone.
        lock: the record's ``last_updated``, the optimistic lock of the next change.
    """

    current: FleetProtocol
    previous: FleetProtocol | None = None
    changed_at: float = 0.0
    effective_at: float = 0.0
    lock: float | None = None

    def in_force(self, now: float, declared_cache_ttl: float) -> InForce:
        """What a process follows at epoch second ``now``; it caches for ``declared_cache_ttl``
        at most (its own, when shorter than the table's)."""
        protocols = [self.current]
        if self.previous is not None and now < self.effective_at:
            protocols.append(self.previous)
        return InForce(
            cached_reads=all(protocol.cached_reads for protocol in protocols),
            cache_ttl=min(declared_cache_ttl, *(protocol.cache_ttl for protocol in protocols)),
            delay=max(protocol.growth_delay(home=False) for protocol in protocols),
            home_delay=max(protocol.growth_delay(home=True) for protocol in protocols),
            settle=max(protocol.settle for protocol in protocols),
            stored=True,
        )

    def to_json(self) -> str:
        return json.dumps({
            "current": self.current.as_dict(),
            "previous": None if self.previous is None else self.previous.as_dict(),
            "changed_at": self.changed_at, "effective_at": self.effective_at, "format": 1,
        }, sort_keys=True)


def _protocol_from(data: Any, table: str) -> FleetProtocol:
    fix = (f"fix or delete the item (partition_key={PROTOCOL_KEY[0]!r}, model={PROTOCOL_KEY[1]!r}) in the metadata "
           f"table {table!r}, then store the protocol again with store_fleet_protocol(Model)")
    try:
        cached_reads = data["cached_reads"]
        numbers = [float(data[name]) for name in ("cache_ttl", "clock_skew", "replication_lag")]
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"the fleet protocol stored in {table!r} cannot be read ({exc!r}); {fix}."
        raise FleetProtocolError(msg) from exc
    if not isinstance(cached_reads, bool) or not all(math.isfinite(n) and n >= 0 for n in numbers):
        msg = f"the fleet protocol stored in {table!r} holds values out of range ({data!r}); {fix}."
        raise FleetProtocolError(msg)
    return FleetProtocol(cached_reads, *numbers)


def parse_record(item: ShardMetadata) -> StoredProtocol:
    """The protocol a record holds.

    Raises:
        FleetProtocolError: the record cannot be read; the message names the item and the fix.
    """
    table = type(item).Meta.table_name
    text: object = getattr(item, "fleet_protocol", None)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("current"), dict):
        msg = (
            f"the fleet protocol record of the metadata table {table!r} holds no readable settings "
            f"(fleet_protocol={text!r}); delete the item (partition_key={PROTOCOL_KEY[0]!r}, "
            f"model={PROTOCOL_KEY[1]!r}) and store the protocol again with store_fleet_protocol(Model)."
        )
        raise FleetProtocolError(msg)
    previous = data.get("previous")
    return StoredProtocol(
        current=_protocol_from(data["current"], table),
        previous=None if previous is None else _protocol_from(previous, table),
        changed_at=float(data.get("changed_at") or 0.0), effective_at=float(data.get("effective_at") or 0.0),
        lock=None if item.last_updated is None else float(item.last_updated),
    )


def read_record(store: ShardCountStore) -> StoredProtocol | None:
    """The table's protocol record as this region's replica holds it (consistent), ``None`` when
    it has none."""
    item = store.record(PROTOCOL_KEY)
    return None if item is None else parse_record(item)


def write_record(store: ShardCountStore, record: StoredProtocol, *, seen: StoredProtocol | None,
                 now: float) -> StoredProtocol | None:
    """Store ``record`` if the table's record is still ``seen`` (``None``: it has none);
    ``None`` when another process stored one first. Changes go to the home region (where new
    keys are created, after a move of the home too)."""
    model = store.table_writer
    lock = next_lock_value(now, seen.lock if seen is not None else None)
    item = model(PROTOCOL_KEY[0], PROTOCOL_KEY[1], fleet_protocol=record.to_json(), last_updated=lock)
    condition = (model.partition_key.does_not_exist() if seen is None or seen.lock is None
                 else model.last_updated == seen.lock)
    try:
        store.send(model, lambda: item.save(condition=condition))
    except (PutError, UpdateError) as exc:
        if exc.cause_response_code == _CONDITION_FAILED:
            return None
        raise
    return attrs.evolve(record, lock=lock)


def effective_after(before: FleetProtocol, after: FleetProtocol, *, home: bool) -> float:
    """Seconds after a change from ``before`` to ``after`` until every process follows ``after``
    alone: every process has read the record again (:data:`PROTOCOL_TTL`), every count cached
    under ``before`` has expired, and clocks (and, with a home region, replicas) agree."""
    wait = PROTOCOL_TTL + max(before.cache_ttl, after.cache_ttl) + max(before.clock_skew, after.clock_skew)
    if home:
        wait += max(before.replication_lag, after.replication_lag)
    return wait


class ProtocolFollower:
    """One process's view of its metadata table's protocol: read lazily, followed, re-read once
    per :data:`PROTOCOL_TTL` seconds.

    Args:
        store: the count store of the table (its region's replica).
        declared: the settings this process was declared with: stored on a new table, followed
            on a table of 0.2 (that stores none).
        legacy: what this process follows on a table of 0.2: ``(cached_reads, delayed_growth)``
            as 0.2 read them from the declaration.
        follows_table: declared to follow the table (``fresh_reads=None``): on a table that
            stores no protocol, the process says once what its merged reads cost there.
        owner: ``"Model.attribute"``, for messages.
        clock: epoch seconds; timer: monotonic seconds.
        on_change: called with the new :class:`InForce` when what the process follows changes.
    """

    def __init__(self, store: Callable[[], ShardCountStore], declared: FleetProtocol, *,
                 legacy: tuple[bool, bool], owner: Callable[[], str], clock: Callable[[], float],
                 timer: Callable[[], float] = time.monotonic, follows_table: bool = False,
                 on_change: Callable[[InForce], None] | None = None) -> None:
        self._store = store
        self.declared = declared
        self._legacy = legacy
        self._follows_table = follows_table
        self._owner = owner
        self._clock = clock
        self._timer = timer
        self._on_change = on_change
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._read_from: tuple[object, object] | None = None
        self._record: StoredProtocol | None = None
        self._last: InForce | None = None
        # What a record without a change under way (or no record) makes this process follow:
        # the same until the record is read again, so a merged query does not work it out again.
        self._steady: tuple[StoredProtocol | None, InForce] | None = None

    @property
    def record(self) -> StoredProtocol | None:
        """The record last read (``None``: none was read, or the table has none)."""
        return self._record

    def known(self) -> bool:
        """Whether the record was read less than :data:`PROTOCOL_TTL` seconds ago, from the table
        the metadata model names now (a test binding the model to new tables reads it again)."""
        read_at = self._read_at
        return (read_at is not None and self._timer() - read_at < PROTOCOL_TTL
                and self._read_from == self._table())

    def _table(self) -> tuple[object, object]:
        meta = self._store().metadata_model.Meta
        return getattr(meta, "table_name", None), getattr(meta, "host", None)

    def _keep(self, record: StoredProtocol | None) -> None:
        """Follow ``record``, read (or written) now from the table the model names."""
        table = self._table()
        with self._lock:
            self._record, self._read_at, self._read_from = record, self._timer(), table

    def legacy_in_force(self) -> InForce:
        """What this process follows on a table that stores no protocol: its declaration, as 0.2 did."""
        cached_reads, delayed = self._legacy
        declared = self.declared
        local = declared.cache_ttl + declared.clock_skew if delayed and declared.cache_ttl > 0 else 0.0
        home = local + declared.replication_lag + (0.0 if local else declared.clock_skew)
        return InForce(cached_reads=cached_reads, cache_ttl=declared.cache_ttl, delay=local, home_delay=home,
                       settle=declared.settle, stored=False)

    def in_force(self) -> InForce:
        """What this process follows now (reading the record when not :meth:`known`).

        Raises:
            FleetProtocolError: the record cannot be read.
            pynamodb.exceptions.PynamoDBException: the metadata table could not be read.
        """
        if not self.known():
            self.refresh()
        record = self._record
        steady = self._steady
        if steady is not None and steady[0] is record:
            return steady[1]
        now = self._clock()
        found = self.legacy_in_force() if record is None else record.in_force(now, self.declared.cache_ttl)
        if record is None or record.previous is None or now >= record.effective_at:
            self._steady = (record, found)
        if found != self._last:
            self._last = found
            if self._on_change is not None:
                self._on_change(found)
        return found

    def assume(self, record: StoredProtocol | None) -> None:
        """Follow ``record`` (``None``: none stored) as if it had just been read from the table:
        for a strategy that no table serves (a unit test), or a tool that knows the record."""
        self._keep(record)

    def refresh(self) -> StoredProtocol | None:
        """Read the record now (``None``: the table stores none)."""
        store = self._store()
        record = read_record(store)
        self._keep(record)
        table = store.metadata_model.Meta.table_name
        if record is None and self._legacy[0]:
            _warn_once(
                ("cached reads, none stored", table),
                "%s: declares cached reads, but the metadata table %r stores no fleet protocol, so every process "
                "must be declared alike (as with 0.2); store it with pynamodb_sharding.store_fleet_protocol(Model) "
                "or `pynamodb-sharding protocol MODULE:Model --store`, and every process follows the table",
                self._owner(), table,
            )
        elif record is None and self._follows_table:
            _warn_once(
                ("none stored", table),
                "%s: the metadata table %r stores no fleet protocol (a table of 0.2, or one created outside "
                "pynamodb-sharding), so each process follows its own declaration as 0.2 did: merged reads read the "
                "key's count on every query (one consistent GetItem each). Once no process of 0.2 runs, store the "
                "protocol with pynamodb_sharding.store_fleet_protocol(Model) or `pynamodb-sharding protocol "
                "MODULE:Model --store` (a new table: immediately=True, --immediately), and merged reads use a cached "
                "count",
                self._owner(), table,
            )
        elif record is not None and record.current != self.declared:
            _warn_once(
                ("declared otherwise", table, self.declared, record.current),
                "%s: follows the fleet protocol stored in the metadata table %r (%s), not its own declaration "
                "(%s); change the stored one with pynamodb_sharding.store_fleet_protocol(Model, ...) or "
                "`pynamodb-sharding protocol MODULE:Model --store ...`",
                self._owner(), table, _describe(record.current), _describe(self.declared),
            )
        return record

    def store_if_absent(self) -> StoredProtocol | None:
        """On a metadata table created just now, which no process can have followed yet: store
        the declared protocol, in force at once, unless the table holds one already (another
        process created it at the same moment and stored first). Returns what the table holds;
        ``None`` for a replica of a global table outside its home region, which gets the
        protocol from its home's table by replication.
        """
        store = self._store()
        if not store.at_home:
            return None
        now = self._clock()
        record = StoredProtocol(current=self.declared, changed_at=now, effective_at=now)
        written = write_record(store, record, seen=None, now=now)
        if written is None:
            return self.refresh()
        self._keep(written)
        return written

    def store(self, wanted: FleetProtocol, *, home: bool, immediately: bool = False) -> StoredProtocol:
        """Store ``wanted`` as the table's protocol: a change in force everywhere after
        :func:`effective_after` (at once with ``immediately``: no process of the table runs);
        on a table of 0.2 (no record), the change is from what this process followed (its
        declaration, as 0.2 read it). Returns the record stored.

        Raises:
            FleetProtocolError: a change is still under way (wait until its ``effective_at``),
                or the record kept changing under this one.
        """
        store = self._store()
        for _ in range(5):
            now = self._clock()
            seen = read_record(store)
            if seen is not None and seen.previous is not None and now < seen.effective_at and not immediately:
                msg = (
                    f"{self._owner()}: a change of the fleet protocol stored in "
                    f"{store.metadata_model.Meta.table_name!r} is under way until epoch {seen.effective_at:.0f} "
                    f"({seen.effective_at - now:.0f} s from now); store the next one after that."
                )
                raise FleetProtocolError(msg)
            if seen is not None and seen.current == wanted:
                return seen
            before = self._legacy_protocol() if seen is None else seen.current
            if immediately or before == wanted:
                record = StoredProtocol(current=wanted, changed_at=now, effective_at=now)
            else:
                record = StoredProtocol(current=wanted, previous=before, changed_at=now,
                                        effective_at=now + effective_after(before, wanted, home=home))
            written = write_record(store, record, seen=seen, now=now)
            if written is not None:
                self._keep(written)
                return written
        msg = f"{self._owner()}: the fleet protocol kept changing while storing it; try again."
        raise FleetProtocolError(msg)

    def _legacy_protocol(self) -> FleetProtocol:
        """What a 0.2 fleet declared like this process follows, as a protocol: cached reads when
        its reads were cached; growths delayed (fresh reads with ``delayed_growth``) are counted
        as cached reads' delay, which the change then keeps until it is in force."""
        cached_reads, delayed = self._legacy
        return attrs.evolve(self.declared, cached_reads=cached_reads or delayed)


_warned: set[tuple[object, ...]] = set()
_warned_lock = threading.Lock()


def _warn_once(what: tuple[object, ...], message: str, *args: object) -> None:
    """Log ``message`` once per process for ``what`` (a simulated fleet's processes share one)."""
    with _warned_lock:
        if what in _warned:
            return
        _warned.add(what)
    logger.warning(message, *args)


def _describe(protocol: FleetProtocol) -> str:
    reads = "cached reads" if protocol.cached_reads else "fresh reads"
    return (f"{reads}, cache_ttl={protocol.cache_ttl:g}, clock_skew={protocol.clock_skew:g}, "
            f"replication_lag={protocol.replication_lag:g}")
