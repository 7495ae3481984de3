"""The charts a benchmark declares draw its figure, from the tables it prints.

Pure functions and matplotlib, no server. ``charts.plot`` says what a chart draws as numbers,
so these tests check the figures on the charts of RESULTS.md (read from a copy of its tables
below, as they are now): the items read, not the shard count, of bench_amplification; the
ramp's writes, throttles (on a log axis) and shard counts in panels of their own; the
targets where each section says they are. And every chart each benchmark declares finds its
table in RESULTS.md and draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .run_all_module import BENCHMARKS, RESULTS, charts, load

run_all = load()
c = charts()

MARKDOWN = """\
# Dynamic

| second | unsharded writes/s | dynamic writes/s | dynamic shard count |
|---:|---:|---:|---:|
| 1 | 38 | 38 | 1 |
| 2 | 19 | 57 | 2 |

- a note, not a table

## One row

| writes | metadata reads |
|---:|---:|
| 2,000 | 0 |
"""


def test_finds_every_table_under_its_heading() -> None:
    """Each table with the heading above it, its header, its rows and where it ends."""
    tables = c.find_tables(MARKDOWN)
    assert ["Dynamic", "One row"] == [table.title for table in tables]
    assert ("second", "unsharded writes/s", "dynamic writes/s", "dynamic shard count") == tables[0].header
    assert (("1", "38", "38", "1"), ("2", "19", "57", "2")) == tables[0].rows
    assert "" == MARKDOWN.splitlines()[tables[0].end_line]


@pytest.mark.parametrize(
    ("cell", "expected"),
    [("1,205", 1205.0), ("10 ms", 10.0), ("200 B", 200.0), ("0.77  (target <= 1.10): met", 0.77), ("-3.5", -3.5),
     ("-", None), ("met", None), ("", None), ("(a) merged", None), ("1.2.3", None)],
)
def test_a_cell_s_number_is_the_number_it_starts_with(cell: str, expected: float | None) -> None:
    assert expected == c.number(cell)


def test_a_chart_takes_the_first_table_with_its_columns_under_its_heading() -> None:
    """The columns a chart names pick its table; ``heading`` tells apart tables of the same columns."""
    tables = c.find_tables(MARKDOWN)
    lines = c.Lines(x="second", x_label="s", y_label="writes/s", series=(c.Series("d", "dynamic writes/s"),))
    assert tables[0] == c.Chart(panels=(lines,)).table(tables)
    assert c.Chart(panels=(lines,), heading="^One row$").table(tables) is None
    missing = c.Lines(x="second", x_label="s", y_label="x", series=(c.Series("x", "no such column"),))
    assert c.Chart(panels=(missing,)).table(tables) is None


# -- the charts of RESULTS.md, from a copy of its tables ------------------------------------------

AMPLIFICATION = """\
### Items read by a first page of limit L over N shards (20 keys of 300 items, 50 ms per request)

| item | L | N | plain items read | one round trip: items read | fewest items: items read | target 1.5 x L + N | one round trip | fewest items | before: items read | plain read units | one round trip: read units | fewest items: read units | before: read units |
|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|
| 200 B | 20 | 4 | 20 | 40 | 32.45 | 34 | missed | met | 80 | 1 | 2 | 2.175 | 4 |
| 200 B | 20 | 10 | 20 | 70.1 | 38.3 | 40 | missed | met | 199.5 | 1 | 5.025 | 6.725 | 10 |
| 200 B | 20 | 16 | 20 | 96 | 43 | 46 | missed | met | 282.6 | 1 | 8 | 11.325 | 13.475 |
| 200 B | 100 | 4 | 100 | 144 | 152 | 154 | met | met | 300 | 3 | 6 | 6 | 9.925 |
| 200 B | 100 | 10 | 100 | 190.65 | 152.3 | 160 | missed | met | 300 | 3 | 10.1 | 5.55 | 11.425 |
| 200 B | 100 | 16 | 100 | 234.9 | 163.85 | 166 | missed | met | 300 | 3 | 8 | 8.95 | 13.475 |
"""  # noqa: E501  (a copy of RESULTS.md's table)

RAMP = """\
#### Ramp: one key from 0 to 60 writes/s over 30 s, then held 6 s; 12 write units/s per partition

| second | offered writes/s | unsharded writes/s | reactive writes/s | proactive writes/s | unsharded throttles | reactive throttles | proactive throttles | reactive shards | proactive shards |
|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| 9 | 17 | 17 | 17 | 17 | 0 | 0 | 0 | 1 | 4 |
| 10 | 19 | 14 | 19 | 19 | 8 | 1 | 0 | 2 | 4 |
| 21 | 41 | 13 | 41 | 41 | 203 | 0 | 0 | 8 | 8 |
| 36 | 60 | 12 | 60 | 60 | 50 | 0 | 0 | 8 | 8 |
"""  # noqa: E501

QUERY = """\
#### Query of 1000 items: (a) merged, (b) serial shard loop, (c) plain PynamoDB (median of 5)

| latency | shards | way | wall ms | client CPU ms | requests | peak MB | (a)/(c) wall |
|---:|---:|---:|---:|---:|---:|---:|---:|
| 10 ms | 1 | (a) merged | 42.2 | 25.2 | 1 | 1.91 | 1.05 |
| 10 ms | 1 | (c) plain | 40.2 | 23.1 | 1 | 1.89 |  |
| 10 ms | 64 | (a) merged | 136.2 | 120.2 | 64 | 1.22 | 3.39 |
| 10 ms | 64 | (b) serial | 829.9 | 126.6 | 64 | 0.58 |  |
| 50 ms | 1 | (a) merged | 81.6 | 25.0 | 1 | 1.91 | 1.04 |
| 50 ms | 1 | (c) plain | 78.1 | 21.9 | 1 | 1.89 |  |
| 50 ms | 16 | (a) merged | 95.8 | 49.4 | 16 | 1.15 | 1.23 |
| 50 ms | 16 | (b) serial | 872.8 | 52.6 | 16 | 0.67 |  |
"""

HEDGE = """\
### 32-shard merged query, 50 ms per request, 1 % of requests 200 ms slower

| queries | p50 (ms) | p99 (ms) | requests per query |
|---|---:|---:|---:|
| unhedged | 86.2 | 273.9 | 32.00 |
| hedged | 84.4 | 150.1 | 33.34 |
"""

COLD_KEYS = """\
### Requests per write and per query of DynamicShards (cache_ttl=10 s, 8 writer threads)

| writes to | writes | requests | requests per write | target | writes/s |
|---|---:|---|---:|---:|---:|
| cold (new keys) | 10000 | data PutItem 10000 | 1.0000 | 1.00 | 316 |
| warm (one key written before) | 2000 | data PutItem 2000, metadata GetItem 1 | 1.0005 | - | 343 |
"""

MIGRATION = """\
### Copy of 3000 items on 5 hot keys into RandomShards(8)

| copy | items/s, 0 ms round trip | items/s, 5 ms round trip |
|---|---:|---:|
| item by item (scan, save() per item) | 177 | 68 |
| toolkit (migrate copy) | 1205 | 978 |
"""


def _panels(bench: str, number: int, markdown: str) -> list[Any]:
    specs, problem = run_all.declared_charts(BENCHMARKS / f"{bench}.py")
    assert "" == problem
    chart = specs[number - 1]
    table = chart.table(c.find_tables(markdown))
    assert table is not None, f"{bench}-{number} finds no table"
    return list(c.plot(chart, table))


def _drawn(panel: Any) -> dict[str, Any]:
    return {line.label: line.points or line.values for line in panel.drawn}


def test_amplification_draws_the_items_read_against_their_target_per_limit() -> None:
    """Lines of items read over N (not bars of N), one panel per item size and limit, with 1.5 x L + N."""
    panels = _panels("bench_amplification", 1, AMPLIFICATION)
    assert ["200 B items, limit L = 20", "200 B items, limit L = 100"] == [panel.title for panel in panels]
    first = panels[0]
    assert ("lines", "shards (N)") == (first.kind, first.x_label)
    assert {
        "every shard asked for L (before)": ((4, 80), (10, 199.5), (16, 282.6)),
        "one round trip (default)": ((4, 40), (10, 70.1), (16, 96)),
        "fewest items": ((4, 32.45), (10, 38.3), (16, 43)),
        "plain query of one key": ((4, 20), (10, 20), (16, 20)),
        "target: 1.5 x L + N": ((4, 34), (10, 40), (16, 46)),
    } == _drawn(first)
    assert "target" == next(line.kind for line in first.drawn if line.label.startswith("target"))


def test_the_ramp_puts_writes_throttles_and_shards_in_panels_of_their_own() -> None:
    """Three units, three panels; the throttles on a symlog axis, so 203 does not flatten 0 and 1."""
    writes, throttles, shards = _panels("bench_dynamic", 2, RAMP)
    assert ("writes/s", "key-range throttles per second", "shards of the key") == (
        writes.y_label, throttles.y_label, shards.y_label)
    assert {"offered", "unsharded", "reactive", "proactive", "one partition's limit"} == set(_drawn(writes))
    assert ((9, 12), (10, 12), (21, 12), (36, 12)) == _drawn(writes)["one partition's limit"]
    assert "symlog" == throttles.y_scale
    assert ((9, 0), (10, 8), (21, 203), (36, 50)) == _drawn(throttles)["unsharded"]
    assert ((9, 0), (10, 1), (21, 0), (36, 0)) == _drawn(throttles)["reactive"]
    assert ((9, 1), (10, 2), (21, 8), (36, 8)) == _drawn(shards)["reactive"]
    assert all(line.step for line in shards.drawn)


def test_the_query_chart_keeps_merged_and_plain_apart_from_the_serial_loop() -> None:
    """Wall times on a log axis per latency, the 1.3 x plain target at 50 ms only, and the ratio below."""
    wall_10, ratio_10, wall_50, ratio_50 = _panels("bench_query", 1, QUERY)
    assert ("10 ms per request", "50 ms per request") == (wall_10.title, wall_50.title)
    assert ("log", "log2") == (wall_50.y_scale, wall_50.x_scale)
    assert ((1, 81.6), (16, 95.8)) == _drawn(wall_50)["(a) merged"]
    assert ((16, 872.8),) == _drawn(wall_50)["(b) serial"]
    assert [] == [line.value for line in wall_10.lines]
    assert [pytest.approx(101.53)] == [line.value for line in wall_50.lines]
    assert ((1, 1.05), (64, 3.39)) == _drawn(ratio_10)["(a) merged ÷ (c) plain"]
    assert [1.3] == [line.value for line in ratio_50.lines]


def test_hedging_draws_the_p99_target_on_the_p99_group() -> None:
    """p50 and p99 grouped, hedged beside unhedged; 0.5 x the unhedged p99 across the p99 group only."""
    latency, requests = _panels("bench_hedge", 1, HEDGE)
    assert ("bars", ("p50", "p99")) == (latency.kind, latency.categories)
    assert {"unhedged": (86.2, 273.9), "hedged": (84.4, 150.1)} == _drawn(latency)
    assert [(pytest.approx(136.95), 1)] == [(line.value, line.category) for line in latency.lines]
    assert [(pytest.approx(33.6), None)] == [(line.value, line.category) for line in requests.lines]


def test_cold_keys_draw_requests_per_write_against_one_and_short_labels() -> None:
    """Bars of requests per write (not the request descriptions as labels) and the target 1.00."""
    per_write, rate = _panels("bench_cold_keys", 1, COLD_KEYS)
    assert ("cold (new keys)", "warm (one key written before)") == per_write.categories
    assert {"requests per write": (1.0, 1.0005)} == _drawn(per_write)
    assert [1.0] == [line.value for line in per_write.lines]
    assert {"writes/s": (316, 343)} == _drawn(rate)


def test_migration_draws_a_five_times_target_per_round_trip() -> None:
    """The round trips become the groups; the target is 5 x the item-by-item rate of each."""
    (panel,) = _panels("bench_migration", 1, MIGRATION)
    assert ("0 ms round trip", "5 ms round trip") == panel.categories
    assert {"item by item (scan, save() per item)": (177, 68), "toolkit (migrate copy)": (1205, 978)} == _drawn(panel)
    assert [(885, 0), (340, 1)] == [(line.value, line.category) for line in panel.lines]


# -- every benchmark's charts, on RESULTS.md as it is --------------------------------------------


def _sections() -> dict[str, str]:
    """RESULTS.md's Markdown of each benchmark's section."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in RESULTS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:], []) if line[3:].startswith("bench_") else None
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))


def test_every_benchmark_has_a_section_in_results() -> None:
    assert {script.stem for script in SCRIPTS} == set(_sections())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.stem)
def test_every_declared_chart_draws_from_its_section(script: Path, tmp_path: Path) -> None:
    """Each chart of ``CHARTS`` finds its table in the benchmark's section and draws a PNG with units."""
    specs, problem = run_all.declared_charts(script)
    assert "" == problem
    assert specs, f"{script.name} declares no CHARTS"
    tables = c.find_tables(_sections()[script.stem])
    for number, chart in enumerate(specs, start=1):
        table = chart.table(tables)
        assert table is not None, f"{script.stem} chart {number}: no table has {sorted(chart.columns())}"
        path = tmp_path / f"{script.stem}-{number}.png"
        panels = c.draw(chart, table, path)
        assert b"\x89PNG" == path.read_bytes()[:4]
        for panel in panels:
            assert panel.x_label, f"{script.stem}-{number}: an axis without its unit"
            assert panel.y_label or panel.kind == "bars", f"{script.stem}-{number}: an axis without its unit"
            assert any(line.kind == "data" for line in panel.drawn), f"{script.stem}-{number}: a panel without data"
