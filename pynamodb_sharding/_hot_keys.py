"""Hot-key hints: the counts of the keys of a model that grew lately, in a few copies, so that
writers of a hot key need no read of its own item.

A process writes a key it has not seen within ``cache_ttl`` without reading its count (a cold
key needs none: any of its initial shards is a valid place), and re-reads the count of a key it
keeps writing once per ``cache_ttl``. At fleet scale both go wrong on one hot key: thousands
of new processes put their first writes on its initial shards, and ten thousand processes
re-reading its one metadata item every ``cache_ttl`` make that item the hot key.

With ``DynamicShards(hot_key_hints=N)`` every change of a key's count is published in ``N``
copies of a list in the metadata table (items ``partition_key="#hot-keys#<i>"``,
``model="<namespace>#hot-keys"``, so scans of a namespace's counts do not see them). A process
reads one copy, chosen at random, once per ``cache_ttl`` (a consistent read), and a writer of a
listed key takes the key's count from it: the load of one hot key's reads is spread over ``N``
items, and cold keys still cost no read of their own.

An entry is ``"<expires>:<last_updated>:<changes>:<key>"`` in a string set: the key's count
as it was stored at ``last_updated`` (the item's lock value) with its latest changes
(``<count>@<epoch>`` joined by ``,``; ``=`` in front when they are the whole history, ``~``
when older ones were left out). It is added to every copy in one transaction that also checks
the key's item still holds that ``last_updated``, so an entry is always a state the item really
had, and a process that publishes late (a state changed since) adds nothing. Writers use the
newest entry of a key (by ``last_updated``); a state behind the item is a safe one to write
with (a smaller count, or a count since lowered, which reads still cover; ``migrate compact``
republishes a lowered count and waits a ``cache_ttl`` before moving items, see
:meth:`HotKeyHints.settle`). Readers never use the hints: a merged query's count is the item's.
An entry lives :data:`HINT_LIFETIME` seconds after it was published, is republished while the
key keeps changing or being reported hot, and older entries of a key are deleted by the process
that publishes a newer one.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import logging
import math
import random as _random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import attrs
from cachetools import TTLCache
from pynamodb.exceptions import PynamoDBException, TransactWriteError
from pynamodb.transactions import TransactWrite

from pynamodb_sharding._host import table_connection
from pynamodb_sharding._metadata import ShardMetadata, ShardState, keep_across_forks
from pynamodb_sharding._pool import single_flight
from pynamodb_sharding._strategies import HistoryEntry

__all__ = ["HINT_HISTORY", "HINT_LIFETIME", "HintEntry", "HotKeyHints", "format_entry", "hint_item_key", "parse_entry"]

logger = logging.getLogger("pynamodb_sharding")

#: Seconds an entry lives after it was published.
HINT_LIFETIME = 3600.0
#: The most recent count changes an entry carries.
HINT_HISTORY = 4
#: Tries of a publishing transaction that conflicts with another one.
_PUBLISH_TRIES = 3


def hint_item_key(namespace: str, copy: int) -> tuple[str, str]:
    """``(partition_key, model)`` of copy ``copy`` of ``namespace``'s hint list."""
    return f"#hot-keys#{copy}", f"{namespace}#hot-keys"


def _epoch(at: float) -> str:
    rounded = round(at, 3)
    return str(int(rounded)) if rounded.is_integer() else repr(rounded)


@attrs.frozen
class HintEntry:
    """One parsed entry: ``key``'s ``state`` as stored at ``state.last_updated``.

    ``complete``: the state carries the key's whole history; else only its latest changes, and
    :meth:`usable_at` tells the epochs its :meth:`ShardState.count_at` answers right.
    """

    expires: float
    key: str
    state: ShardState
    complete: bool
    text: str

    def usable_at(self, at: float) -> bool:
        """Whether ``state.count_at(at)`` is the count the whole history gives (the changes
        left out all happened before the oldest one kept, which took effect by ``at``)."""
        return self.complete or min(entry.at for entry in self.state.history) <= at


def format_entry(expires: float, key: str, state: ShardState) -> str:
    """The entry of ``key`` in ``state`` (the item's stored state), living until ``expires``."""
    history = sorted(state.history)
    if all(entry.count != state.count for entry in history):
        history.append(HistoryEntry(at=state.last_updated, count=state.count))
    kept = history[-HINT_HISTORY:]
    mark = "=" if len(kept) == len(history) else "~"
    changes = ",".join(f"{entry.count}@{_epoch(entry.at)}" for entry in kept)
    return f"{_epoch(expires)}:{_epoch(state.last_updated)}:{mark}{changes}:{key}"


def parse_entry(text: str) -> HintEntry | None:
    """An entry written by :func:`format_entry`, ``None`` for anything else."""
    parts = text.split(":", 3)
    if len(parts) != 4:
        return None
    expires_text, updated_text, changes, key = parts
    try:
        expires, last_updated = float(expires_text), float(updated_text)
        history = tuple(
            HistoryEntry(at=float(at), count=int(count))
            for count, _, at in (change.partition("@") for change in changes[1:].split(","))
        )
    except ValueError:
        return None
    finite = all(math.isfinite(value) for value in (expires, last_updated, *(entry.at for entry in history)))
    if changes[:1] not in ("=", "~") or not history or not finite or any(entry.count < 1 for entry in history):
        return None
    count = max(history, key=lambda entry: entry.at).count
    state = ShardState(count=count, last_updated=last_updated, history=history)
    return HintEntry(expires=expires, key=key, state=state, complete=changes[0] == "=", text=text)


class HotKeyHints:
    """The hint lists of one metadata model: read (cached per namespace) and published to.

    Args:
        metadata_model: the metadata model whose table holds the lists (its own region's replica
            for reads; ``writer`` for publishing).
        copies: how many copies each list is kept in (reads spread over them).
        ttl: seconds a list read stays cached (``cache_ttl``).
        clock: epoch seconds, for expiry.
        timer: the cache's monotonic clock.
        random: picks the copy read.
    """

    def __init__(
        self,
        metadata_model: type[ShardMetadata],
        *,
        copies: int,
        ttl: float,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.monotonic,
        random: _random.Random | None = None,
    ) -> None:
        self.metadata_model = metadata_model
        self.copies = copies
        self.clock = clock
        self._random = random if random is not None else _random.Random()
        # namespace -> {key: its newest entry} as last read (or published here).
        self._timer = timer
        self._lists: TTLCache[str, dict[str, HintEntry]] = TTLCache(maxsize=1024, ttl=max(ttl, 1e-9), timer=timer)
        # namespace -> the read of its list in flight, which the threads missing it meanwhile wait for.
        self._reading: dict[str, Future[dict[str, HintEntry]]] = {}
        self._lock = threading.Lock()
        keep_across_forks(self)

    def retime(self, ttl: float) -> None:
        """Keep a list read for ``ttl`` seconds from now on (what is cached is dropped).
        """
        with self._lock:
            if self._lists.ttl != max(ttl, 1e-9):
                self._lists = TTLCache(maxsize=1024, ttl=max(ttl, 1e-9), timer=self._timer)

    def _before_fork(self) -> None:
        self._lock.acquire()

    def _after_fork_in_parent(self) -> None:
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        self._reading.clear()  # the reading threads are not in the child: it reads for itself
        self._lock.release()

    def _list(self, namespace: str) -> dict[str, HintEntry]:
        """``namespace``'s list: cached, else read once for all the threads missing it at once."""
        with self._lock:
            hints = self._lists.get(namespace)
        if hints is not None:
            return hints

        def keep(read: dict[str, HintEntry]) -> dict[str, HintEntry]:
            self._lists[namespace] = read
            return read

        return single_flight(self._lock, self._reading, namespace, lambda: self._read(namespace), keep,
                             lambda: self._lists.get(namespace))

    def entry(self, namespace: str, key: str) -> HintEntry | None:
        """``key``'s newest unexpired entry in ``namespace``'s list (read once per ``ttl``; a
        failed read counts as an empty list, and writers read the key's item as without hints)."""
        found = self._list(namespace).get(key)
        return found if found is not None and found.expires > self.clock() else None

    def listed(self, namespace: str, key: str) -> bool:
        """Whether ``key`` is on ``namespace``'s hint list."""
        return self.entry(namespace, key) is not None

    def _read(self, namespace: str) -> dict[str, HintEntry]:
        model = self.metadata_model
        partition_key, sort_key = hint_item_key(namespace, self._random.randrange(self.copies))
        try:
            item = model.get(partition_key, sort_key, consistent_read=True)
        except model.DoesNotExist:
            return {}
        except PynamoDBException:
            logger.warning("could not read the hot-key hints of %r; writers read their keys' counts",
                           namespace, exc_info=True)
            return {}
        return self._entries(item.hot_keys or set())

    @staticmethod
    def _entries(raw: set[str]) -> dict[str, HintEntry]:
        hints: dict[str, HintEntry] = {}
        for text in raw:
            parsed = parse_entry(text)
            if parsed is None:
                continue
            known = hints.get(parsed.key)
            if known is None or (parsed.state.last_updated, parsed.expires) > (known.state.last_updated, known.expires):
                hints[parsed.key] = parsed
        return hints

    def due(self, namespace: str, key: str, state: ShardState, *, chance: float = 1.0) -> bool:
        """Whether ``state`` should be published: the list as this process knows it shows an
        older state of ``key`` (or none), or this one past half its life; then with probability
        ``chance`` (many processes may see the same thing at once: one publish among them is
        enough)."""
        with self._lock:
            hints = self._lists.get(namespace)
        known = None if hints is None else hints.get(key)
        if known is not None and known.state.last_updated > state.last_updated:
            return False
        if (known is not None and known.state.last_updated == state.last_updated
                and known.expires - self.clock() >= HINT_LIFETIME / 2):
            return False
        return chance >= 1.0 or self._random.random() < chance

    def publish(self, writer: type[ShardMetadata], namespace: str, key: str, state: ShardState) -> bool:
        """Add ``key``'s ``state`` to every copy of ``namespace``'s list, in one transaction that
        checks the key's item still holds ``state`` (its ``last_updated``); then delete the
        older and expired entries this process knows of. Best effort: returns whether the state
        was published (``False`` when the item changed since, or the transaction failed; logged).
        """
        now = self.clock()
        entry = format_entry(now + HINT_LIFETIME, key, state)
        parsed = parse_entry(entry)
        assert parsed is not None
        connection = table_connection(writer).connection
        for attempt in range(1, _PUBLISH_TRIES + 1):
            try:
                with TransactWrite(connection=connection) as transaction:
                    transaction.condition_check(
                        writer, key, namespace, condition=writer.last_updated == state.last_updated,
                    )
                    for copy in range(self.copies):
                        copy_item = writer(*hint_item_key(namespace, copy))
                        transaction.update(copy_item, actions=[writer.hot_keys.add({entry})])
                break
            except TransactWriteError as exc:
                reasons = [reason.code if reason is not None else None for reason in exc.cancellation_reasons or []]
                if reasons[:1] == ["ConditionalCheckFailed"]:
                    return False  # the item changed since: a newer state is (or will be) published
                if "TransactionConflict" in reasons and attempt < _PUBLISH_TRIES:
                    continue  # another publish (of this namespace's lists) went first
                logger.warning("could not publish key %r to the hot-key hints of %r", key, namespace, exc_info=True)
                return False
            except PynamoDBException:
                logger.warning("could not publish key %r to the hot-key hints of %r", key, namespace, exc_info=True)
                return False
        with self._lock:
            known = dict(self._lists.get(namespace) or {})
            stale = {
                old.text for old in known.values()
                if old.expires <= now or (old.key == key and old.state.last_updated <= state.last_updated)
            }
            known[key] = parsed
            self._lists[namespace] = known
        stale.discard(entry)
        if stale:  # one UpdateItem cannot ADD and DELETE one attribute: older entries go after
            for copy in range(self.copies):
                try:
                    writer(*hint_item_key(namespace, copy)).update(actions=[writer.hot_keys.delete(stale)])
                except PynamoDBException:
                    logger.debug("could not delete old hot-key hints of %r (copy %d)", namespace, copy, exc_info=True)
        return True

    def settle(self, writer: type[ShardMetadata], namespace: str, key: str, state: ShardState) -> bool:
        """Make every copy's newest entry of ``key`` the item's current ``state`` when one shows
        another (for ``migrate compact``, before it moves items off shards above a lowered
        count). Returns ``True`` when it published: writers may then use the old entry for up
        to ``ttl`` more, and the caller waits that long.

        Raises:
            pynamodb.exceptions.PynamoDBException: a copy could not be read, or the state could
                not be published.
        """
        model = self.metadata_model
        for copy in range(self.copies):
            try:
                item = model.get(*hint_item_key(namespace, copy), consistent_read=True)
            except model.DoesNotExist:
                continue
            shown = self._entries(item.hot_keys or set()).get(key)
            if shown is not None and shown.state.last_updated != state.last_updated:
                if not self.publish(writer, namespace, key, state):
                    msg = f"could not publish the current count of key {key!r} to the hot-key hints of {namespace!r}"
                    raise PynamoDBException(msg)
                return True
        return False
