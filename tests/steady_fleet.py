"""A steady fleet in the fleet simulator: ``processes`` writers of one key at a constant total
rate, for the tests of rate reports and of growth on the rate (no server, virtual time).

The in-memory DynamoDB's partitions are unlimited here (nothing throttles), so every growth is
a growth on the measured rate; the strategies' ``partition_write_units`` sets what a shard takes.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

import attrs
from pynamodb.attributes import UnicodeAttribute

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardMetadata
from pynamodb_sharding.testing.fleet import Fleet, activity

META = "steady_shards"
DATA = "steady_items"
KEY = "hot"


class SteadyShards(ShardMetadata):
    Meta = Fleet.meta(META)


class SteadyItem(ShardedModel):
    key = UnicodeAttribute(hash_key=True)
    at = UnicodeAttribute(range_key=True)
    pad = UnicodeAttribute(null=True)


@attrs.frozen
class SteadyRun:
    counts: tuple[tuple[float, int], ...]  #: (virtual second, count) at each change, from (0, 1)
    reports: int  #: rate reports made (an UpdateItem adding to a rate window that succeeded)
    report_requests: int  #: UpdateItem requests sent for them (conditional tries that failed too)
    condition_failures: float  #: conditional writes of the metadata table refused
    writes: int  #: puts acknowledged
    seconds: float
    #: write units acknowledged in each rate window (window index from the start -> units)
    per_window: tuple[int, ...] = ()
    interval: float = 1.0

    @property
    def final_count(self) -> int:
        return self.counts[-1][1]

    @property
    def reports_per_second(self) -> float:
        return self.reports / self.seconds

    def justified(self, threshold: float) -> int:
        """The most shards the writes really made can justify: the largest count that two
        consecutive complete windows' writes both needed at ``threshold`` units a second a shard
        (1 at least)."""
        complete = self.per_window[:-1]
        pairs = [min(a, b) / self.interval for a, b in itertools.pairwise(complete)]
        return max([1, *(math.ceil(rate / threshold - 1e-9) for rate in pairs)])


def run_steady(processes: int, rate: float, seconds: float, *, seed: int = 0, units: int = 1,
               **options: Any) -> SteadyRun:
    """``processes`` writers of ``KEY`` at ``rate`` write units a second in all (puts of
    ``units`` write units each, Poisson), for ``seconds`` of virtual time, each with its own
    ``DynamicShards(**options)`` (defaults: 50 write units a shard, target 0.7, 1 s windows)."""
    fleet = Fleet(write_units=1e9, read_units=1e9, seed=seed, record=True)
    settings = {"max_shards": 32, "partition_write_units": 50.0, "target_utilization": 0.7, "rate_interval": 1.0,
                "cooldown": 2.0, "cache_ttl": 2.0, "backoff": (0.1, 0.5), **options}
    models = [
        fleet.bind(type(f"SteadyProcess{n}", (SteadyItem,), {
            "Meta": Fleet.meta(DATA), "shards": Sharding(DynamicShards(SteadyShards, **fleet.strategy_clock(),
                                                                        **settings)),
        }))
        for n in range(processes)
    ]
    counts: list[tuple[float, int]] = [(0.0, 1)]

    def follow(table: str, key: str, item: dict[str, Any]) -> None:
        count = int(item["number_of_shards"]["N"])
        if key == KEY and count != counts[-1][1]:
            counts.append((fleet.loop.now, count))

    fleet.db.on_write.append(follow)
    written = [0]
    interval = float(settings["rate_interval"])
    per_window = [0] * (int(seconds / interval) + 1)
    arrivals = random.Random(seed)
    pad = "x" * (1024 * units - 100)  # a put of `units` write units (the key and names take the rest)
    puts = rate / units

    def writer(model: Any, index: int) -> Any:
        def run() -> None:
            fleet.loop.sleep(arrivals.random() * processes / puts)
            serial = 0
            while fleet.loop.now < seconds:
                with activity("write"):
                    model(KEY, f"{index}-{serial}", pad=pad).save()
                serial += 1
                written[0] += 1
                per_window[min(len(per_window) - 1, int(fleet.loop.now / interval))] += units
                fleet.loop.sleep(arrivals.expovariate(puts / processes))
        return run

    for index, model in enumerate(models):
        fleet.loop.spawn(writer(model, index))
    with fleet.running():
        fleet.loop.run(until=seconds)
    reports = [status for operation, body, status, _ in fleet.db.journal or ()
               if operation == "UpdateItem" and body.get("TableName") == META
               and any(name.startswith("rate_units") for name in (body.get("ExpressionAttributeNames") or {}).values())]
    return SteadyRun(counts=tuple(counts), reports=sum(1 for status in reports if status == 200),
                     report_requests=len(reports), condition_failures=fleet.db.condition_failures[META],
                     writes=written[0], seconds=seconds, per_window=tuple(per_window), interval=interval)
