"""Benchmark: the library's own metadata and the merged queries of a fleet, per design.

Runs each scenario of :mod:`pynamodb_sharding.testing.fleet` (a viral key, a hot read key, cold
keys, a growth race across three regions) in the fleet simulator with each design:

* "0.2 defaults": ``DynamicShards`` as declared by default on a metadata table that stores no
  fleet protocol (a table of 0.2): every process follows its own declaration, so merged reads
  read the key's item each time and growths are used at once;
* "default protocol": the same declaration on a table storing the default fleet protocol
  (``store_fleet_protocol(Model)``: cached reads, ``cache_ttl=10``, ``clock_skew=1``);
* "default protocol + hints": and ``hot_key_hints=8``;
* "viral settings": the protocol with ``cache_ttl=7`` and ``cooldown=8.5, growth="quadruple",
  hot_key_hints=16`` (docs/scale.rst).

Every design has ``target_utilization=0.7`` (the scenarios'), other options at their defaults.
It prints, side by side: the merged queries offered, served, throttled (met a throttle on the
way, retried or moved to another copy) and failed, and the data reads throttled; the heaviest
metadata item's mean load over the second half as % of a partition's read and write limits;
metadata requests per merged query begun and per second; acknowledged writes a read missed; how
long the viral key's count takes to cover its load; key-range throttles as % of writes; failed
writes; the most any shard took of new processes' first writes against its fair share.

The growth race across regions also runs the viral settings without ``home_region`` (the
negative control) and gets a table of its own.

No DynamoDB Local: every request is answered in memory, on virtual time (see docs/scale.rst).
A seed gives one result.

Run::

    python benchmarks/bench_fleet.py --markdown out.md
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from pynamodb_sharding import FleetProtocol
from pynamodb_sharding.testing.fleet import SCENARIOS, FleetReport, Scenario, run_scenario

import report
from charts import Bars, Chart, Lines, Series, Target
from report import Report

#: (design, DynamicShards options, the protocol the table stores or None)
DESIGNS: list[tuple[str, dict[str, Any], FleetProtocol | None]] = [
    ("0.2 defaults", {}, None),
    ("default protocol", {}, FleetProtocol()),
    ("default protocol + hints", {"hot_key_hints": 8}, FleetProtocol()),
    ("viral settings", {"hot_key_hints": 16, "cache_ttl": 7.0, "cooldown": 8.5, "growth": "quadruple"},
     FleetProtocol(cache_ttl=7.0)),
]
COOLDOWN = 30.0  # DynamicShards' default
VIRAL_COOLDOWN = 8.5
#: The growth race's negative control: the viral settings without Meta.home_region.
CONTROL = "viral settings, no home region (control)"


def cell(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def per_second(value: float, result: FleetReport) -> str:
    return f"{value / max(result.seconds, 1e-9):,.0f}"


def query_row(design: str, scenario: Scenario, result: FleetReport) -> str:
    return (
        f"| {scenario.name} | {design} | {per_second(result.offered_queries, result)} | "
        f"{per_second(result.queries, result)} | {result.throttled_queries:,.0f} | {result.failed_queries:,.0f} | "
        f"{result.data_read_throttles:,.0f} | {cell(result.metadata_requests_per_query, '{:.3f}')} | "
        f"{result.metadata_reads_per_second:,.0f} | {result.mean_read_pct:.1f} | "
        f"{result.missed_writes} of {result.reads_checked} reads |"
    )


def write_row(design: str, scenario: Scenario, result: FleetReport) -> str:
    lag = (f"not within the run ({scenario.end:.0f} s)" if result.growth_lag is None and scenario.kind == "viral"
           else cell(result.growth_lag, "{:.1f}"))
    return (
        f"| {scenario.name} | {design} | {per_second(result.offered_writes, result)} | "
        f"{per_second(result.writes, result)} | {result.failed_writes:,.0f} | {result.key_range_throttle_pct:.1f} | "
        f"{result.mean_write_pct:.1f} | {cell(result.metadata_requests_per_write, '{:.3f}')} | {lag} | "
        f"{result.final_count} | {cell(result.first_write_share)} | {result.requests:,} | {result.wall_seconds:.0f} |"
    )


def run(args: argparse.Namespace, out: Report) -> None:
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only.split(",")]
    if args.quick:
        scenarios = [attrs.evolve(s, seconds=s.seconds / 4, hold=s.hold / 4) for s in scenarios]
    results: list[tuple[str, Scenario, FleetReport]] = []
    for scenario in scenarios:
        runs = [(design, scenario, options, protocol) for design, options, protocol in DESIGNS]
        if scenario.kind == "regions":
            _, viral, viral_protocol = DESIGNS[-1]
            runs.append((CONTROL, attrs.evolve(scenario, home_region=None), viral, viral_protocol))
        for design, ran, options, protocol in runs:
            results.append((design, ran, run_scenario(ran, seed=args.seed, protocol=protocol, **options)))

    out("# Merged queries of a fleet: offered, served, throttled, failed")
    out()
    out("| scenario | design | offered queries/s | served queries/s | throttled queries | failed queries | "
        "throttled data reads | metadata requests per query | metadata reads/s | steady mean metadata read % | "
        "missed acknowledged writes |")
    out("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for design, scenario, result in results:
        out(query_row(design, scenario, result))
    out()
    out("- queries are merged queries begun (offered: they arrive at the scenario's rate whatever happens to "
        "the ones before; served: returned; failed: raised after botocore's retries); throttled queries are "
        "served ones that met a throttle on the way (retried, or moved to another read replica); throttled "
        "data reads are the throttled requests of the data table and its replicas; counts are of real queries "
        "(weight-fold) over the whole run, rates over the run's length")
    out("- metadata requests per query: in the run's second half, per query begun; with cached reads, one read "
        "per process per cache_ttl whatever the query rate (metadata reads/s = processes / cache_ttl)")
    out("- a metadata item's % is the heaviest item's mean load over the run's second half (weights make a "
        "busiest second overstate lumps)")
    out()
    out("# Writes and growth of a fleet")
    out()
    out("| scenario | design | offered writes/s | acknowledged writes/s | failed writes | key-range throttles % "
        "of write attempts | steady mean metadata write % | metadata requests per write | s to cover the viral "
        "load | final count | max first-write share | simulated requests | wall s |")
    out("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for design, scenario, result in results:
        out(write_row(design, scenario, result))
    out()
    out(f"- the viral key's count, its time to cover the load and the first-write shares are of the count in "
        f"effect for writers (a growth counts from its delay on where growths are delayed); targets: covered "
        f"within 2 x cooldown ({2 * COOLDOWN:.0f} s, {2 * VIRAL_COOLDOWN:.0f} s with the viral settings), "
        f"key-range throttles <= 1 % of writes, every metadata item below 10 % of a partition's limits, 0 "
        f"missed writes")
    out("- every design has target_utilization=0.7; a table storing a protocol stores it before the start "
        "(store_fleet_protocol(..., immediately=True): a new table)")
    for scenario in scenarios:
        out(f"- {scenario.name}: {scenario.scale}")
    out()
    race = [(design, scenario, result) for design, scenario, result in results if scenario.kind == "regions"]
    if race:
        out("## The growth race across regions: what was lost, and what reads missed")
        out()
        out("| design | home region | metadata changes refused by their condition (races resolved) | "
            "lost metadata changes | count decreases seen | lost growths | "
            "replicas differing | final count | s to cover the load | missed acknowledged writes per region "
            "(missed / reads) |")
        out("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for design, scenario, result in race:
            regions = ", ".join(f"{region} {missed} / {reads}" for region, missed, reads in result.missed_by_region)
            lag = cell(result.growth_lag, "{:.1f}") if result.growth_lag is not None else "not within the run"
            out(f"| {design} | {scenario.home_region or 'none'} | {result.contested_changes:,.0f} | "
                f"{result.lost_changes} | {result.count_decreases} | "
                f"{result.lost_growths} | {result.replicas_differing} | {result.final_count} | {lag} | {regions} |")
        out()
        misses = [(design, miss) for design, _, result in race for miss in result.misses[:3]]
        if misses:
            out("First misses:")
            out()
            for design, miss in misses:
                out(f"- {design}: {miss}")
            out()
        first = race[0][1]
        out("- a read in region R is checked against every write acknowledged before it began whose copy had "
            "arrived in R's replica before it began (written in R, or replicated there); replication lag "
            f"{first.replication_lag[0]:g}-{first.replication_lag[1]:g} s between {len(first.regions)} regions, "
            "uniform per change and destination (see docs/scale.rst)")
        out(f"- {CONTROL}: the negative control; the targets are 0 lost changes, decreases, lost growths, "
            "differing replicas and missed writes with a home region")
        out()
    for kind, title in (("viral", "The viral key"), ("regions", "The growth race's key")):
        timelines = [(design, result) for design, scenario, result in results if scenario.kind == kind]
        if not timelines:
            continue
        out(f"## {title}'s shard count against the count its load needs")
        out()
        out("| second | design | offered write units/s | shard count | shards needed |")
        out("|---:|---|---:|---:|---:|")
        for design, result in timelines:
            for second, load, count, needed in result.timeline:
                out(f"| {second:.0f} | {design} | {load:,.0f} | {count:.0f} | {needed:.0f} |")
        out()


CHARTS = [
    Chart(
        heading="Merged queries of a fleet",
        panels=(
            Bars(category="scenario", split="design", value_label="merged queries a second",
                 series=(Series("offered", "offered queries/s"), Series("served", "served queries/s")),
                 value_format="{:,.0f}"),
        ),
    ),
    Chart(
        heading="Merged queries of a fleet",
        arrange="columns",
        panels=(
            Bars(category="scenario", split="design",
                 value_label="heaviest metadata item, mean read load in steady state, % of a partition's limit",
                 series=(Series("read %", "steady mean metadata read %"),),
                 targets=(Target("target: below 10 %", 10.0),), value_format="{:.1f} %"),
        ),
    ),
    Chart(
        heading="Writes and growth of a fleet",
        panels=(
            Bars(category="scenario", split="design",
                 value_label="heaviest metadata item, mean write load in steady state, % of a partition's limit",
                 series=(Series("write %", "steady mean metadata write %"),),
                 targets=(Target("target: below 10 %", 10.0),), value_format="{:.1f} %"),
        ),
    ),
    Chart(
        heading="viral key",
        panels=(Lines(
            x="second", x_label="virtual seconds", y_label="shards", split="design",
            series=(Series("shard count", "shard count", step=True),
                    Series("shards needed", "shards needed", kind="reference")),
        ),),
    ),
    Chart(
        heading="growth race",
        panels=(Lines(
            x="second", x_label="virtual seconds", y_label="shards (home region's count)", split="design",
            series=(Series("shard count", "shard count", step=True),
                    Series("shards needed", "shards needed", kind="reference")),
        ),),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated scenario names (all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fleet's random choices (0)")
    parser.add_argument("--quick", action="store_true", help="each scenario a quarter as long")
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
