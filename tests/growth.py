"""What a sound growth record of one key looks like, for the dynamic-sharding tests."""

from __future__ import annotations

import itertools

from pynamodb_sharding._strategies import HistoryEntry

__all__ = ["growth_problems"]


def growth_problems(
    history: list[HistoryEntry], reported: list[tuple[int, int]], cooldown: float
) -> list[str]:
    """Everything wrong with a key's growth record; empty when it is sound.

    Sound means: history entries strictly increase in time and count, no two changes lie
    within one ``cooldown`` (the creation of the item is not a change), and the growths the
    writers reported (``(old, new)`` from ``shard_count_changed``) are exactly the steps the
    history records, none lost or doubled.
    """
    problems = []
    for index, (before, after) in enumerate(itertools.pairwise(history)):
        if not (after.at > before.at and after.count > before.count):
            problems.append(f"history not strictly increasing: {before} then {after}")
        # The first entry is the item's creation (or the initial count from the start), not a
        # change: the first growth may follow it at once.
        if index > 0 and after.at - before.at < cooldown:
            problems.append(f"two changes within the cooldown: {before} then {after}")
    recorded = [(a.count, b.count) for a, b in itertools.pairwise(history)]
    if sorted(reported) != sorted(recorded):
        problems.append(f"writers reported growths {sorted(reported)}, history records {recorded}")
    return problems
