"""Benchmark: the library's own metadata at fleet scale, today's DynamicShards against the new one.

Runs each scenario of :mod:`pynamodb_sharding.testing.fleet` (a viral key, a hot read key, cold
keys, a growth race across three regions) in the fleet simulator three times: "today"
(``DynamicShards`` with today's behaviour spelled out: ``fresh_reads=True`` and the new options
of issue 26 off), "new" (the fleet settings of docs/scale.rst) and "new, viral settings" (plus
``cache_ttl=7, cooldown=8.5, growth="quadruple", hot_key_hints=16``), and prints side by side:
the heaviest metadata item's busiest second as % of a partition's read and write limits,
metadata requests per merged query in steady state, acknowledged writes missed by a read, how
long the viral key's count takes to cover its load (against 2 x cooldown), key-range throttles
as % of writes, and the most any shard took of the first writes of new processes against its
fair share.

The growth race across regions also runs "new" without ``home_region`` (the negative control:
each region changes counts in its own replica), and gets a table of its own: metadata changes
refused by their condition (races resolved at home), changes lost to a concurrent change in
another region, decreases of a replica's count, growths missing from a final history, replicas
differing once replication settled, and per region the acknowledged writes (that had arrived
there) a read there missed. When this checkout's ``DynamicShards`` lacks the new options, only
"today" runs and the report says so.

No DynamoDB Local: every request is answered in memory, on virtual time (see docs/scale.rst).

Run::

    python benchmarks/bench_fleet.py --markdown out.md
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any

import attrs

from pynamodb_sharding import DynamicShards
from pynamodb_sharding.testing.fleet import SCENARIOS, FleetReport, Scenario, run_scenario

import report
from charts import Bars, Chart, Lines, Series, Target
from report import Report

#: Today's behaviour, spelled out: each name is passed only if this checkout's DynamicShards has it.
TODAY: dict[str, Any] = {"fresh_reads": True, "rate_reports": None, "hot_key_hints": 0}
#: The new design (issue 26): cached reads with delayed growth, sampled reports (the default), hot-key hints.
NEW: dict[str, Any] = {"fresh_reads": False, "hot_key_hints": 8}
#: The new design with the settings docs/scale.rst gives for a viral key: a shorter cache_ttl (the
#: growth delay cache_ttl + clock_skew is 8 s; writers of a hot key read the hints, spread over 16
#: copies, not its item), a cooldown just past that delay, and four times the shards per growth.
VIRAL_SETTINGS: dict[str, Any] = {**NEW, "hot_key_hints": 16, "cache_ttl": 7.0, "cooldown": 8.5, "growth": "quadruple"}
#: The options the new design adds (all must exist for the "new" run).
NEW_OPTIONS = ("rate_reports", "clock_skew", "hot_key_hints")
COOLDOWN = 30.0  # DynamicShards' default
#: The growth race's negative control: "new" without Meta.home_region.
CONTROL = "new, no home region (control)"


def accepted(options: dict[str, Any]) -> dict[str, Any]:
    names = inspect.signature(DynamicShards.__init__).parameters
    return {name: value for name, value in options.items() if name in names}


def landed() -> bool:
    names = inspect.signature(DynamicShards.__init__).parameters
    return all(name in names for name in NEW_OPTIONS)


def cell(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def row(design: str, scenario: Scenario, result: FleetReport) -> str:
    lag = (f"not within the run ({scenario.end:.0f} s)" if result.growth_lag is None and scenario.kind == "viral"
           else cell(result.growth_lag, "{:.1f}"))
    return (
        f"| {scenario.name} | {design} | {result.metadata_read_pct:.1f} | {result.metadata_write_pct:.1f} | "
        f"{result.mean_read_pct:.1f} | {result.mean_write_pct:.1f} | "
        f"{cell(result.metadata_requests_per_query)} | {cell(result.metadata_requests_per_write, '{:.3f}')} | "
        f"{result.missed_writes} of {result.reads_checked} reads | {lag} | {result.final_count} | "
        f"{result.key_range_throttle_pct:.1f} | {cell(result.first_write_share)} | {result.writes:,.0f} | "
        f"{result.queries:,.0f} | {sum(result.errors.values())} | {result.requests:,} | {result.wall_seconds:.0f} |"
    )


def run(args: argparse.Namespace, out: Report) -> None:
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only.split(",")]
    if args.quick:
        scenarios = [attrs.evolve(s, seconds=s.seconds / 4, hold=s.hold / 4) for s in scenarios]
    designs = [("today", accepted(TODAY))]
    if landed():
        designs.append(("new", NEW))
        designs.append(("new, viral settings", VIRAL_SETTINGS))
    results: list[tuple[str, Scenario, FleetReport]] = []
    for scenario in scenarios:
        runs = [(design, scenario, options) for design, options in designs]
        if scenario.kind == "regions" and landed():
            runs.append((CONTROL, attrs.evolve(scenario, home_region=None), NEW))
        for design, ran, options in runs:
            results.append((design, ran, run_scenario(ran, seed=args.seed, **options)))

    out("# Metadata load of a fleet: today's DynamicShards against the new design")
    out()
    out("| scenario | design | metadata read % of limit | metadata write % of limit | steady mean metadata read % | "
        "steady mean metadata write % | metadata requests per "
        "query | metadata requests per write | missed acknowledged writes | s to cover the viral load | "
        "final count | key-range throttles % of writes | max first-write share | writes | queries | errors | "
        "simulated requests | wall s |")
    out("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for design, scenario, result in results:
        out(row(design, scenario, result))
    out()
    if not landed():
        out(f"- \"new\": not run; this checkout's DynamicShards has none of {', '.join(NEW_OPTIONS)} yet "
            f"(issue 26's design); today's options passed: {accepted(TODAY)}")
    out("- targets (issue 26): every metadata item below 10 % of a partition's read and write limits; 0 metadata "
        f"requests per merged query in steady state; 0 missed acknowledged writes; the viral key covered within "
        f"2 x cooldown = {2 * COOLDOWN:.0f} s ({2 * VIRAL_SETTINGS['cooldown']:.0f} s with the viral settings' "
        f"cooldown of {VIRAL_SETTINGS['cooldown']:g} s); key-range throttles <= 1 % of writes; no shard above "
        "1.5 x its share of first writes")
    out("- the viral key's shard count, its time to cover the load and the first-write shares are of the count "
        "in effect for writers: a growth counts from cache_ttl + clock_skew after it is stored where growths are "
        "delayed (fresh_reads=False); the first-write share is over the 50 simulated processes' first writes "
        "(one per process of weight 200), so a share of 1.5 x is about one write above the fair share")
    out("- every design here has 0.2's demand-counted rate (a throttled write counts once) and rate growth every "
        "two windows; \"today\" turns off only what 0.2 made optional")
    out("- a metadata item's % is of its busiest second (units charged: a throttled request is not charged, so "
        "an item over its limit shows about 100 % and throttles); with weights, one simulated request is "
        "weight real ones at once, so a busiest second overstates lumps: \"steady mean\" is the heaviest "
        "item's mean over the run's second half (unbiased by the weight); requests per query: in the second half")
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
        heading="Metadata load",
        arrange="columns",
        panels=(
            Bars(category="scenario", split="design",
                 value_label="heaviest metadata item, mean read load in steady state, % of a partition's limit",
                 series=(Series("read %", "steady mean metadata read %"),),
                 targets=(Target("target: below 10 %", 10.0),), value_format="{:.1f} %"),
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
