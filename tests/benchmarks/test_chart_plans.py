"""``run_all`` finds the Markdown tables of a benchmark and picks a sensible chart for each.

Pure functions, no server: lines over a numeric x per series, counts on their own axis, bars
when each series has one row, nothing for one-row tables.
"""

from __future__ import annotations

from .run_all_module import load

run_all = load()

MARKDOWN = """\
# Dynamic

| second | unsharded writes/s | dynamic writes/s | dynamic shard count |
|---:|---:|---:|---:|
| 1 | 38 | 38 | 1 |
| 2 | 19 | 57 | 2 |

- a note, not a table

## Latency

| latency | shards | way | wall ms | (a)/(c) wall |
|---:|---:|---:|---:|---:|
| 10 ms | 1 | (a) merged | 55.8 | 1.73 |
| 10 ms | 1 | (c) plain | 32.2 |  |
| 10 ms | 4 | (a) merged | 32.9 | 1.02 |
| 10 ms | 4 | (c) plain | 32.2 |  |

## CPU

| way | shards | client CPU s | ratio to plain |
|---|---|---|---|
| plain | 1 | 0.04 | 1.00 |
| merged | 16 | 0.09 | 2.05  (target <= 1.10) |

## One row

| writes | metadata reads |
|---:|---:|
| 2000 | 0 |
"""


def test_finds_every_table_under_its_heading() -> None:
    """Four tables, each with the heading above it, its header and its rows."""
    tables = run_all.find_tables(MARKDOWN)
    assert ["Dynamic", "Latency", "CPU", "One row"] == [table.title for table in tables]
    assert ["second", "unsharded writes/s", "dynamic writes/s", "dynamic shard count"] == tables[0].header
    assert [["1", "38", "38", "1"], ["2", "19", "57", "2"]] == tables[0].rows
    assert MARKDOWN.splitlines()[tables[0].end_line] == ""


def test_time_series_plots_every_measure_over_the_first_numeric_column() -> None:
    """No text columns: one line per measure over ``second``."""
    plan = run_all.plan_chart(run_all.find_tables(MARKDOWN)[0])
    assert run_all.ChartPlan("lines", 0, [1, 2, 3], []) == plan


def test_series_come_from_varying_text_columns() -> None:
    """``way`` varies and ``latency`` does not: lines of wall ms over shards, one per way."""
    plan = run_all.plan_chart(run_all.find_tables(MARKDOWN)[1])
    assert run_all.ChartPlan("lines", 1, [3], [2]) == plan


def test_one_row_per_series_gives_bars_and_one_row_tables_no_chart() -> None:
    """Two ways with one row each: bars; a one-row table: nothing to chart."""
    tables = run_all.find_tables(MARKDOWN)
    assert run_all.ChartPlan("bars", None, [2], [0, 3, 1]) == run_all.plan_chart(tables[2])
    assert run_all.plan_chart(tables[3]) is None
