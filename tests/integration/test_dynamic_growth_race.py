"""Racing growths are settled by the optimistic lock, and the race test can tell when they are not.

Eight strategy objects stand for eight processes (each has its own cache) that all read the
same metadata item and are throttled at once past the cooldown; each runs the writer's growth
path. With the lock exactly one grows and the others re-read. A second scenario: a process
with a stale cache is throttled just after another process grew; with the lock it re-reads and
does not grow again.

Negative control: with a metadata store injected from this test whose change writes without
the lock's condition (the bug the lock prevents), the same checks must find lost or double
growths, which proves they can fail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._metadata import (
    ShardCountStore,
    ShardMetadata,
    ShardState,
    format_history_entry,
    next_lock_value,
    state_from_item,
)
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._strategies import HistoryEntry
from pynamodb_sharding.signals import shard_count_changed
from tests.growth import growth_problems

KEY = "/shared/firetvGen2.txt"
COOLDOWN = 1.0
START = 1_700_000_000.0
CACHE_TTL = 10.0


class RaceShards(ShardMetadata):
    class Meta:
        table_name = "race_shards"


class RaceLog(ShardedModel):
    class Meta:
        table_name = "race_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(DynamicShards(RaceShards))


class UnlockedStore(ShardCountStore):
    """A store whose change does not check that the item is unchanged since ``seen`` was read.

    Every writer that saw the same state sets its count, as a store without the optimistic lock
    would: racing growths are lost or doubled.
    """

    def change(
        self, namespace: str, key: str, seen: ShardState, count: int, now: float, *, owner: str
    ) -> ShardState | None:
        meta = self.metadata_model
        at = next_lock_value(now, seen.last_updated)
        item = meta(key, namespace)
        item.update(
            actions=[
                meta.number_of_shards.set(count),
                meta.last_updated.set(at),
                meta.shard_history.add({format_history_entry(HistoryEntry(at=at, count=count))}),
            ]
        )
        return self.remember(namespace, key, state_from_item(item, owner=owner, max_shards=self.max_shards))


def process(now: list[float], locked: bool) -> DynamicShards:
    """A strategy object with its own cache, like another process's; ``locked=False`` injects
    :class:`UnlockedStore`."""
    strategy = DynamicShards(
        RaceShards,
        cooldown=COOLDOWN,
        backoff=(0.0, 0.0),
        cache_ttl=CACHE_TTL,
        clock=lambda: now[0],
        sleep=lambda _: None,
    )
    if not locked:
        strategy.store = UnlockedStore(RaceShards, max_shards=strategy.max_shards, ttl=CACHE_TTL)
    return strategy


@pytest.fixture
def reported() -> Any:
    growths: list[tuple[int, int]] = []

    def record(sender: Any, key: str, old: int, new: int, reason: str) -> None:
        growths.append((old, new))

    with shard_count_changed.connected_to(record, sender=RaceLog):
        yield growths


@pytest.mark.parametrize("locked", [True, False], ids=["optimistic-lock", "unlocked-store"])
def test_simultaneous_growths(dynamodb_models: Callable[..., Any], reported: Any, locked: bool) -> None:
    """Eight processes throttled at once past the cooldown: exactly one grows (unlocked: not)."""
    dynamodb_models(RaceLog)
    now = [START]
    processes = [process(now, locked) for _ in range(8)]
    seen = [p._fresh_state(RaceLog.shards.space, KEY) for p in processes]  # the first inserts, all read it
    assert len(set(seen)) == 1
    now[0] += COOLDOWN + 0.5
    barrier = threading.Barrier(len(processes))

    def throttled(index: int) -> int:
        barrier.wait()
        return processes[index]._after_key_range_throttle(RaceLog.shards.space, KEY, seen[index], 1).count

    with ThreadPoolExecutor(len(processes)) as pool:
        counts = list(pool.map(throttled, range(len(processes))))
    problems = growth_problems(RaceLog.shards.history(KEY), reported, COOLDOWN)
    if locked:
        assert problems == []
        assert reported == [(1, 2)]
        assert counts == [2] * len(processes)  # the losers re-read the winner's count
    else:
        assert problems != [], "the checks missed the lost growths"


@pytest.mark.parametrize("locked", [True, False], ids=["optimistic-lock", "unlocked-store"])
def test_stale_cache_does_not_grow_again(dynamodb_models: Callable[..., Any], reported: Any, locked: bool) -> None:
    """A process whose cache predates another's growth re-reads, not grows (unlocked: grows again)."""
    dynamodb_models(RaceLog)
    now = [START]
    first, stale = process(now, locked), process(now, locked)
    old = first._fresh_state(RaceLog.shards.space, KEY)
    assert stale._fresh_state(RaceLog.shards.space, KEY) == old
    now[0] += COOLDOWN + 0.5
    grown = first._after_key_range_throttle(RaceLog.shards.space, KEY, old, 1)
    assert grown.count == 2
    now[0] += 0.2  # inside the cooldown of that growth, but not by the stale process's cache
    after = stale._after_key_range_throttle(RaceLog.shards.space, KEY, old, 1)
    problems = growth_problems(RaceLog.shards.history(KEY), reported, COOLDOWN)
    if locked:
        assert problems == []
        assert after == grown
        assert RaceLog.shards.history(KEY)[-1].count == 2
    else:
        assert problems != [], "the checks missed the double growth"
