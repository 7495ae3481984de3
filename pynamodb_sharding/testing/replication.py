"""A test stand-in for DynamoDB global tables: two servers, replicated last-writer-wins with a lag.

Multi-region eventually consistent global tables replicate every item to every region in about
a second, and when two regions change one item before either change arrived, the change made
last wins everywhere (last writer wins); the other is lost without an error. DynamoDB Local has
no replication, so tests run two servers (one per region) and a :class:`Replicator` between
them::

    with Replicator({"us-east-1": client_a, "eu-west-1": client_b}, ["log", "log_shards"], lag=0.2):
        ...  # writes in both regions; replicator.settle() waits until both agree

Every ``interval`` it scans the tables in both regions. A change first seen in one region is
copied to the other once it is ``lag`` seconds old; when both regions changed an item, the
change seen last wins (the time a change is first seen stands for its write time, so keep
``interval`` well under the gaps that matter). Items are compared as DynamoDB compares values:
numbers by value (``12.0`` and ``12`` are one number: DynamoDB stores an ``UpdateItem``'s number
as sent and a ``PutItem``'s by value, so a copy may read back spelled differently), sets in any
order, maps and lists member by member, binary by its bytes. :meth:`pause` holds every copy back (a
partition between the regions) while changes are still timed; :meth:`resume` lets them
through. Deletions are not replicated. For tests only: it scans whole tables.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Mapping
from decimal import Decimal
from typing import Any

__all__ = ["Replicator"]

_Item = dict[str, Any]


def _value(attribute: Mapping[str, Any]) -> Hashable:
    """One attribute value (``{"N": "12.0"}``) in a form equal to another exactly when DynamoDB
    holds them equal: numbers by value, sets unordered, maps and lists recursively, bytes."""
    ((kind, inner),) = attribute.items()
    if kind == "N":
        return kind, Decimal(inner)
    if kind == "NS":
        return kind, frozenset(Decimal(number) for number in inner)
    if kind == "SS":
        return kind, frozenset(inner)
    if kind == "B":
        return kind, bytes(inner)
    if kind == "BS":
        return kind, frozenset(bytes(value) for value in inner)
    if kind == "M":
        return kind, _frozen(inner)
    if kind == "L":
        return kind, tuple(_value(member) for member in inner)
    return kind, inner  # S, BOOL, NULL


def _frozen(item: Mapping[str, Any] | None) -> Hashable:
    """An item (or map) as a hashable value compared as DynamoDB compares its attributes."""
    return None if item is None else frozenset((name, _value(value)) for name, value in item.items())


class Replicator:
    """Replicates ``tables`` between two regions' DynamoDB servers, last writer wins, after ``lag``.

    Args:
        clients: region name -> a botocore/boto3 DynamoDB client of that region's server (two).
        tables: the table names to replicate (the same names in both regions).
        lag: seconds a change waits before it is copied to the other region.
        interval: seconds between two scans.
    """

    def __init__(self, clients: dict[str, Any], tables: list[str], *, lag: float = 0.5,
                 interval: float = 0.05) -> None:
        if len(clients) != 2:
            msg = f"Replicator: expected two regions, got {sorted(clients)}"
            raise ValueError(msg)
        self.clients = dict(clients)
        self.tables = list(tables)
        self.lag = lag
        self.interval = interval
        self.copied = 0
        #: Changes lost to a newer change of the same item in the other region.
        self.overwritten = 0
        self._regions = list(self.clients)
        self._base: dict[tuple[str, Hashable], Hashable] = {}  # (table, key) -> the version both agreed on
        self._first_seen: dict[tuple[str, Hashable, str, Hashable], float] = {}  # (table, key, region, version) -> time
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._keys: dict[str, list[str]] = {}
        self.error: BaseException | None = None

    # -- control --------------------------------------------------------------------------------

    def start(self) -> Replicator:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="test-replicator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self.error is not None:
            raise self.error

    def pause(self) -> None:
        """Hold every copy back (changes are still seen and timed)."""
        self._paused.set()

    def resume(self) -> None:
        self._paused.clear()

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until both regions hold the same items (raises ``TimeoutError`` otherwise)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._idle.clear()
            if not self._idle.wait(timeout=max(0.0, deadline - time.monotonic())):
                break
            if self.error is not None:
                raise self.error
            if self._agree():
                return
        msg = f"the regions did not agree within {timeout} s"
        raise TimeoutError(msg)

    def __enter__(self) -> Replicator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- the loop -------------------------------------------------------------------------------

    def _key_names(self, table: str) -> list[str]:
        if table not in self._keys:
            client = self.clients[self._regions[0]]
            schema = client.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = [entry["AttributeName"] for entry in schema]
        return self._keys[table]

    def _scan(self, region: str, table: str) -> dict[Hashable, _Item]:
        client = self.clients[region]
        names = self._key_names(table)
        items: dict[Hashable, _Item] = {}
        start: dict[str, Any] | None = None
        while True:
            page = client.scan(TableName=table, ConsistentRead=True, **({"ExclusiveStartKey": start} if start else {}))
            for item in page.get("Items", []):
                items[tuple(_value(item[name]) for name in names)] = item
            start = page.get("LastEvaluatedKey")
            if not start:
                return items

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for table in self.tables:
                    self._cycle(table)
                self._idle.set()
                self._stop.wait(self.interval)
        except BaseException as error:  # reported by stop() and settle()
            self.error = error
            self._idle.set()

    def _cycle(self, table: str) -> None:
        first, second = self._regions
        seen = {first: self._scan(first, table), second: self._scan(second, table)}
        now = time.monotonic()
        for key in set(seen[first]) | set(seen[second]):
            items = {region: seen[region].get(key) for region in self._regions}
            versions = {region: _frozen(item) for region, item in items.items()}
            base = self._base.get((table, key))
            if versions[first] == versions[second]:
                self._base[(table, key)] = versions[first]
                continue
            changed = [region for region in self._regions
                       if versions[region] is not None and versions[region] != base]
            for region in changed:
                self._first_seen.setdefault((table, key, region, versions[region]), now)
            if not changed or self._paused.is_set():
                continue
            times = {region: self._first_seen[(table, key, region, versions[region])] for region in changed}
            winner = max(changed, key=lambda region: (times[region], region == first))
            if now - times[winner] < self.lag:
                continue
            loser = second if winner == first else first
            if loser in changed:
                self.overwritten += 1
            self.clients[loser].put_item(TableName=table, Item=items[winner])
            self.copied += 1
            self._base[(table, key)] = versions[winner]

    def _agree(self) -> bool:
        first, second = self._regions
        return all(
            {key: _frozen(item) for key, item in self._scan(first, table).items()}
            == {key: _frozen(item) for key, item in self._scan(second, table).items()}
            for table in self.tables
        )
