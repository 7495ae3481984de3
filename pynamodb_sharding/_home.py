"""Moving the home region of a metadata table (global tables): a fenced handover.

The shard counts of a :class:`~pynamodb_sharding.DynamicShards` model change only in one
region, the metadata model's home region (``Meta.home_region``), because a conditional write
is only safe where every writer sends it. :func:`move_home` moves that region, for a
failover away from a degraded region that can still be reached, or daily ("follow the sun"),
without a moment where two regions both change a count:

1. in the old home, the table's home record (the item under ``HOME_RECORD_KEY``)
   says the home is moving: from then on no region creates the item of a new key;
2. in the old home, every metadata item is stamped with its new home (``home``, and
   ``home_epoch`` + 1), conditionally on its home being the old one: this is the old home's
   last write of the item, and from then on every change sent there fails its condition
   (changes carry ``home = <the region they are sent to>``);
3. once the new home's replica shows every stamped item, which it receives whole with every
   change the old home made, its home record is set to name it the home of new keys.

An item becomes changeable in the new home as soon as its stamped copy arrives there (its
changes are refused everywhere in between, a second or so); new keys wait until step 3.
Processes learn the new home from the items they read and from the home record; nothing in
their ``Meta`` has to change. A move interrupted (a timeout, a crash) is finished by calling
:func:`move_home` again with the same target.

The old home must be reachable: a move out of a region that cannot be reached cannot stop it
from taking changes, and counts are not changed until it can be reached again (item writes go
on meanwhile with the counts they have).

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from pynamodb.exceptions import UpdateError

from pynamodb_sharding._exceptions import HomeHandoverError, ShardingDefinitionError
from pynamodb_sharding._keys import MAX_SHARDS
from pynamodb_sharding._metadata import HOME_RECORD_KEY, ShardCountStore, ShardMetadata
from pynamodb_sharding._protocol import PROTOCOL_KEY

__all__ = ["HomeMove", "move_home"]

_CONDITION_FAILED = "ConditionalCheckFailedException"


@attrs.frozen
class HomeMove:
    """What :func:`move_home` did.

    Attributes:
        old: the home region before the move.
        new: the home region now.
        stamped: metadata items stamped with the new home by this call (items an earlier,
            interrupted call stamped are not counted again).
        items: metadata items the new home's replica was waited for.
    """

    old: str
    new: str
    stamped: int
    items: int


def move_home(
    metadata_model: type[ShardMetadata],
    to: str,
    *,
    timeout: float = 300.0,
    poll: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    timer: Callable[[], float] = time.monotonic,
) -> HomeMove:
    """Move the home region of ``metadata_model``'s table (where its counts change) to ``to``.

    Both regions must be reachable; their endpoints, when not AWS's, come from the metadata
    model's ``Meta.home_host`` (the declared home) and ``Meta.region_hosts``. Safe to run
    while applications grow, shrink and report in every region: no change of a count is lost
    or made in two regions.

    Args:
        metadata_model: the :class:`~pynamodb_sharding.ShardMetadata` subclass, declaring
            ``Meta.home_region`` (the home before any move).
        to: the region to move the home to.
        timeout: seconds to wait for the new home's replica to receive the stamped items.
        poll: seconds between two checks of the new home's replica.
        sleep: how to wait between checks.
        timer: a monotonic clock.

    Returns:
        What was moved.

    Raises:
        ShardingDefinitionError: the metadata model declares no ``Meta.home_region``.
        HomeHandoverError: another move (to another region) is under way, or the new home's
            replica did not receive every item within ``timeout`` (call again to finish).
    """
    store = ShardCountStore(metadata_model, max_shards=MAX_SHARDS, ttl=0)
    declared = store.declared_home
    name = metadata_model.__name__
    if declared is None:
        msg = (
            f"{name}: move_home needs Meta.home_region (the region where counts change now); "
            f"declare it on {name} before moving the home."
        )
        raise ShardingDefinitionError(msg)
    old, moving = _current_home(store, declared)
    if moving is None and old == to:
        return HomeMove(old=old, new=to, stamped=0, items=0)
    if moving is not None and moving != to:
        msg = (
            f"{name}: the home region is moving from {old!r} to {moving!r} already; finish that move "
            f"first (move_home({name}, to={moving!r})), then move it again."
        )
        raise HomeHandoverError(msg)
    at_old = store.model_at(old)
    if moving is None:
        _close(at_old, old, to, declared)
    stamped, keys = _stamp(at_old, old, to, declared)
    deadline = timer() + timeout
    at_new = store.model_at(to)
    while True:
        missing = _not_arrived(at_new, to, keys)
        if not missing and _record_moving(at_new, to):
            break
        if timer() >= deadline:
            msg = (
                f"{name}: the home region is moving from {old!r} to {to!r}, but {to!r}'s replica "
                f"{'has not received ' + str(len(missing)) + ' stamped items' if missing else 'does not show the move'}"
                f" after {timeout:g} s; no region changes those counts meanwhile. Check the replication "
                f"between the regions, then call move_home({name}, to={to!r}) again to finish the move."
            )
            raise HomeHandoverError(msg)
        sleep(poll)
    record = at_new(HOME_RECORD_KEY[0], HOME_RECORD_KEY[1])
    record.update(actions=[at_new.home.set(to), at_new.moving_to.remove()], condition=at_new.moving_to == to)
    return HomeMove(old=old, new=to, stamped=stamped, items=len(keys))


def _current_home(store: ShardCountStore, declared: str) -> tuple[str, str | None]:
    """The home region now and where it is moving to, as the home record says in the home."""
    region = declared
    for _ in range(3):  # the declared home, or where the record there says it went
        record = store.home_record(region)
        home = declared if record is None or record.home is None else record.home
        if home == region or record is None:
            return region, None if record is None else record.moving_to
        region = home
    return region, None


def _close(at_old: type[ShardMetadata], old: str, to: str, declared: str) -> None:
    """Step 1: the old home's record says the home is moving; no region creates new keys' items."""
    named = at_old.home == old
    if old == declared:
        named = named | at_old.home.does_not_exist()
    record = at_old(HOME_RECORD_KEY[0], HOME_RECORD_KEY[1])
    try:
        record.update(actions=[at_old.home.set(old), at_old.moving_to.set(to)],
                      condition=named & (at_old.moving_to.does_not_exist() | (at_old.moving_to == to)))
    except UpdateError as exc:
        if exc.cause_response_code != _CONDITION_FAILED:
            raise
        msg = (
            f"{at_old.__name__}: the home record in {old!r} changed while the move to {to!r} began (another "
            f"move?); read it and call move_home again."
        )
        raise HomeHandoverError(msg, exc) from exc


def _items(model: type[ShardMetadata]) -> Iterator[Any]:
    """The items whose changes the home takes: not the table-wide records (the home record, and
    the fleet protocol, which is changed where new keys are created)."""
    for item in model.scan(consistent_read=True):
        if (item.partition_key, item.model) not in (HOME_RECORD_KEY, PROTOCOL_KEY):
            yield item


def _stamp(at_old: type[ShardMetadata], old: str, to: str, declared: str) -> tuple[int, dict[tuple[str, str], int]]:
    """Step 2: stamp every item the old home takes changes of with the new home; returns how many
    were stamped now, and the epoch each item of the table has in the new home."""
    stamped = 0
    keys: dict[tuple[str, str], int] = {}
    for item in _items(at_old):
        home = item.home or declared
        epoch = int(item.home_epoch or 0)
        if home == to:
            keys[(item.partition_key, item.model)] = epoch  # stamped by an earlier call
            continue
        if home != old:
            continue  # not the old home's: left as it is
        named = at_old.home == old
        if old == declared:
            named = named | at_old.home.does_not_exist()
        target = at_old(item.partition_key, item.model)
        try:
            target.update(actions=[at_old.home.set(to), at_old.home_epoch.set(epoch + 1)], condition=named)
        except UpdateError as exc:
            if exc.cause_response_code != _CONDITION_FAILED:
                raise
            continue  # stamped meanwhile (another call)
        stamped += 1
        keys[(item.partition_key, item.model)] = epoch + 1
    return stamped, keys


def _not_arrived(at_new: type[ShardMetadata], to: str, keys: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    """The stamped items whose stamp the new home's replica does not show yet."""
    there = {(item.partition_key, item.model): item for item in _items(at_new)}
    missing = []
    for key, epoch in keys.items():
        item = there.get(key)
        if item is None or item.home != to or int(item.home_epoch or 0) < epoch:
            missing.append(key)
    return missing


def _record_moving(at_new: type[ShardMetadata], to: str) -> bool:
    try:
        record = at_new.get(*HOME_RECORD_KEY, consistent_read=True)
    except at_new.DoesNotExist:
        return False
    return bool(record.moving_to == to)
