"""Hot-key hints: which keys of a model grew lately, so that a process's first write of one reads
its count instead of going to its initial shards.

A process writes a key it has not seen within ``cache_ttl`` without reading its count (a cold
key needs none: any of its initial shards is a valid place). When thousands of new processes
start on a key that grew (a scale-out on a viral key), each one's first write would then land
on the initial shards. With ``DynamicShards(hot_key_hints=N)`` every growth adds the key to a
short list kept in ``N`` copies in the metadata table (items ``partition_key="#hot-keys#<i>"``,
``model="<namespace>#hot-keys"``, so scans of a namespace's counts do not see them); a process
reads one copy, chosen at random, once per ``cache_ttl``, and reads the count of a listed key
before its first write of it, as it does for a key written twice. Cold keys still cost no read
of their own: one read of a copy a ``cache_ttl`` serves every key of the model.

Entries are ``"<expires>:<key>"`` strings in a string set (``ADD`` and ``DELETE`` need no
condition, so racing processes never conflict); an entry lives :data:`HINT_LIFETIME` seconds,
is renewed while the key keeps being grown or reported hot, and expired entries are deleted by
the next process that adds one. A hint only says "read the count first": the count a write
uses is always the key's own item, so a stale or lost hint costs at most a write on the
initial shards, never a misplaced item.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import logging
import random as _random
import threading
import time
from collections.abc import Callable

from cachetools import TTLCache
from pynamodb.exceptions import PynamoDBException

from pynamodb_sharding._metadata import ShardMetadata

__all__ = ["HINT_LIFETIME", "HotKeyHints", "hint_item_key"]

logger = logging.getLogger("pynamodb_sharding")

#: Seconds a hint lives after the growth (or the hot rate report) that wrote it.
HINT_LIFETIME = 3600.0


def hint_item_key(namespace: str, copy: int) -> tuple[str, str]:
    """``(partition_key, model)`` of copy ``copy`` of ``namespace``'s hint list."""
    return f"#hot-keys#{copy}", f"{namespace}#hot-keys"


def _parse(entry: str) -> tuple[float, str] | None:
    expires, sep, key = entry.partition(":")
    if not sep:
        return None
    try:
        return float(expires), key
    except ValueError:
        return None


class HotKeyHints:
    """The hint lists of one metadata model: read (cached per namespace) and added to.

    Args:
        metadata_model: the metadata model whose table holds the lists (its own region's replica
            for reads; ``writer`` for the additions, the home region with global tables).
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
        # namespace -> {key: (expires, the stored entry)} as last read (or added to here).
        self._lists: TTLCache[str, dict[str, tuple[float, str]]] = TTLCache(
            maxsize=1024, ttl=max(ttl, 1e-9), timer=timer,
        )
        self._lock = threading.Lock()

    def listed(self, namespace: str, key: str) -> bool:
        """Whether ``key`` is on ``namespace``'s hint list (read once per ``ttl``; a failed read
        counts as an empty list, and the write goes on as without hints)."""
        with self._lock:
            hints = self._lists.get(namespace)
        if hints is None:
            hints = self._read(namespace)
            with self._lock:
                self._lists[namespace] = hints
        return hints.get(key, (-1.0, ""))[0] > self.clock()

    def _read(self, namespace: str) -> dict[str, tuple[float, str]]:
        model = self.metadata_model
        partition_key, sort_key = hint_item_key(namespace, self._random.randrange(self.copies))
        try:
            item = model.get(partition_key, sort_key)
        except model.DoesNotExist:
            return {}
        except PynamoDBException:
            logger.warning("could not read the hot-key hints of %r; first writes go to the initial shards",
                           namespace, exc_info=True)
            return {}
        return self._entries(item.hot_keys or set())

    @staticmethod
    def _entries(raw: set[str]) -> dict[str, tuple[float, str]]:
        hints: dict[str, tuple[float, str]] = {}
        for entry in raw:
            parsed = _parse(entry)
            if parsed is not None:
                expires, key = parsed
                if expires > hints.get(key, (-1.0, ""))[0]:
                    hints[key] = (expires, entry)
        return hints

    def due(self, namespace: str, key: str) -> bool:
        """Whether this process should (re)add ``key``: not listed as far as it knows, or its
        entry passes half its life."""
        with self._lock:
            hints = self._lists.get(namespace)
        expires = -1.0 if hints is None else hints.get(key, (-1.0, ""))[0]
        return expires - self.clock() < HINT_LIFETIME / 2

    def add(self, writer: type[ShardMetadata], namespace: str, key: str) -> None:
        """Add ``key`` to every copy of ``namespace``'s list, and delete the expired entries this
        process knows of (best effort: a failure is logged, the growth stands)."""
        now = self.clock()
        expires = round(now + HINT_LIFETIME, 3)
        entry = f"{expires!r}:{key}"
        with self._lock:
            known = dict(self._lists.get(namespace) or {})
            expired = {stored for old, (until, stored) in known.items() if until <= now or old == key}
            known[key] = (expires, entry)
            self._lists[namespace] = known
        attribute = writer.hot_keys
        for copy in range(self.copies):
            item = writer(*hint_item_key(namespace, copy))
            try:
                item.update(actions=[attribute.add({entry})])
                if expired:  # a second request: one UpdateItem cannot ADD and DELETE one attribute
                    item.update(actions=[attribute.delete(expired)])
            except PynamoDBException:
                logger.warning("could not add key %r to the hot-key hints of %r (copy %d)", key, namespace, copy,
                               exc_info=True)
