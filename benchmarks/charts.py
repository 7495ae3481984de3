"""The charts of a benchmark, declared beside it and drawn from its Markdown tables.

A benchmark module exports ``CHARTS``, a list of :class:`Chart`. Each chart says which of the
benchmark's tables it draws (the first whose header has every column the chart names, under a
heading matching ``heading`` if given) and what it shows of it: one or more panels, each with
one unit on its value axis (different units get different panels), lines over a numeric
column (:class:`Lines`) or bars per row (:class:`Bars`), a log axis where the values span
orders of magnitude, and targets drawn as lines. ``run_all.py`` draws them after a run, and
``run_all.py --charts-only`` redraws them from the tables already in RESULTS.md.

:func:`plot` turns a chart and its table into :class:`Panel` values (what is drawn, as
numbers; no matplotlib), which :func:`draw` renders to a PNG.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Bars",
    "Chart",
    "Lines",
    "Melt",
    "Panel",
    "Row",
    "Series",
    "Table",
    "Target",
    "draw",
    "find_tables",
    "first",
    "number",
    "number_in",
    "plot",
    "title_of",
]

# -- Markdown tables --------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_RULE = re.compile(r"\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*")
_LEADING_NUMBER = re.compile(r"^\s*(-?\d[\d,]*(?:\.\d+)?|-?\.\d+)(?![\d.])")


@dataclass(frozen=True)
class Table:
    """A pipe table of a benchmark's Markdown, with the heading it sits under."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    end_line: int  # index of the line after the table

    def records(self) -> list[Row]:
        return [Row({name: row[i] if i < len(row) else "" for i, name in enumerate(self.header)}, self)
                for row in self.rows]


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def find_tables(markdown: str) -> list[Table]:
    """The pipe tables of ``markdown`` (a header row, a ``---`` row, body rows), in order."""
    lines = markdown.splitlines()
    tables: list[Table] = []
    title = ""
    index = 0
    while index < len(lines):
        heading = _HEADING.match(lines[index])
        if heading:
            title = heading[2].strip()
        is_table = (
            lines[index].lstrip().startswith("|")
            and index + 1 < len(lines)
            and _RULE.fullmatch(lines[index + 1]) is not None
        )
        if not is_table:
            index += 1
            continue
        header = _cells(lines[index])
        index += 2
        rows = []
        while index < len(lines) and lines[index].lstrip().startswith("|"):
            rows.append(_cells(lines[index]))
            index += 1
        tables.append(Table(title=title, header=header, rows=tuple(rows), end_line=index))
    return tables


def number(cell: str) -> float | None:
    """The number a cell starts with: ``"1,205"`` 1205, ``"10 ms"`` 10, ``"0.77  (target <= 1.10)"``
    0.77; ``None`` for an empty or text cell (``"-"``, ``"met"``)."""
    match = _LEADING_NUMBER.match(cell)
    return float(match[1].replace(",", "")) if match else None


def number_in(text: str, pattern: str) -> float:
    """The number ``pattern``'s first group captures in ``text`` (a heading's parameter).

    Raises:
        ValueError: ``pattern`` does not match.
    """
    match = re.search(pattern, text)
    if match is None:
        msg = f"no {pattern!r} in {text!r}"
        raise ValueError(msg)
    return float(match[1].replace(",", ""))


class Row(Mapping[str, str]):
    """One row of a table: its cells by column header, and the table (heading, other rows)."""

    def __init__(self, cells: dict[str, str], table: Table) -> None:
        self._cells = cells
        self.table = table

    def __getitem__(self, column: str) -> str:
        return self._cells[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)

    @property
    def heading(self) -> str:
        return self.table.title

    def number(self, column: str) -> float:
        """The number in ``column``.

        Raises:
            ValueError: the cell holds no number.
        """
        value = number(self._cells.get(column, ""))
        if value is None:
            msg = f"{column!r} is {self._cells.get(column)!r} in the row {dict(self._cells)} of {self.heading!r}"
            raise ValueError(msg)
        return value


def first(rows: Sequence[Row], column: str, value: str) -> Row:
    """The first of ``rows`` whose ``column`` is ``value``.

    Raises:
        ValueError: no such row.
    """
    for row in rows:
        if row.get(column) == value:
            return row
    msg = f"no row with {column!r} = {value!r}"
    raise ValueError(msg)


# -- what a chart declares ----------------------------------------------------------------------

#: A value of a row: a column's number, or computed from the row (and its table).
Value = str | Callable[[Row], float | None]
Kind = Literal["data", "target", "reference"]
Scale = Literal["linear", "log", "log2", "symlog"]


@dataclass(frozen=True)
class Series:
    """One line (or one bar of each category): ``label`` in the legend, ``value`` of each row.

    ``kind``: ``"data"`` (a measured figure), ``"target"`` (what the figure should reach, drawn
    dashed in black) or ``"reference"`` (for comparison, drawn thick and light: the offered
    load, one partition's limit). ``step``: a count that changes in steps (shards).
    """

    label: str
    value: Value
    kind: Kind = "data"
    step: bool = False

    def of(self, row: Row) -> float | None:
        if isinstance(self.value, str):
            return number(row.get(self.value, ""))
        return self.value(row)


@dataclass(frozen=True)
class Target:
    """A horizontal target (vertical for bars) of a panel: a constant, or computed from its rows.

    ``value`` may return ``None`` where the target does not apply (another facet). With
    ``per_category`` (bars only) it is computed from, and drawn across, each category's rows.
    """

    label: str
    value: float | Callable[[Sequence[Row]], float | None]
    per_category: bool = False

    def of(self, rows: Sequence[Row]) -> float | None:
        if not rows:
            return None
        return float(self.value) if isinstance(self.value, int | float) else self.value(rows)


@dataclass(frozen=True)
class Melt:
    """Columns that hold one measure under several conditions, turned into rows.

    Each row becomes one row per column whose header matches ``columns`` (a regex), with the
    column's first group (or header) under ``name`` and its cell under ``value``.
    """

    columns: str
    name: str
    value: str

    def apply(self, table: Table, rows: Sequence[Row]) -> list[Row]:
        pattern = re.compile(self.columns)
        melted = []
        for row in rows:
            for column in table.header:
                if (match := pattern.search(column)) is None:
                    continue
                cells = {**row, self.name: match[1] if match.groups() else column, self.value: row[column]}
                melted.append(Row(cells, table))
        return melted


@dataclass(frozen=True)
class Lines:
    """A panel of lines over the numbers of column ``x``.

    ``split``: a text column whose values each get their own line of every series (the ways a
    query was read). ``where``: only the rows whose columns hold these values.
    """

    x: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    split: str | None = None
    where: Mapping[str, str] = field(default_factory=dict)
    targets: tuple[Target, ...] = ()
    x_scale: Scale = "linear"
    y_scale: Scale = "linear"
    y_ticks: tuple[float, ...] = ()
    title: str = ""
    height: float = 1.0  # relative to the other panels of the chart


@dataclass(frozen=True)
class Bars:
    """A panel of horizontal bars: one group per category, one bar per series (and split value).

    ``category``: the column (or a function of the row) naming each row's group; ``melt``
    turns columns into rows first (p50 and p99 as categories).
    """

    category: str | Callable[[Row], str]
    value_label: str
    series: tuple[Series, ...]
    split: str | None = None
    where: Mapping[str, str] = field(default_factory=dict)
    melt: Melt | None = None
    targets: tuple[Target, ...] = ()
    scale: Scale = "linear"
    value_format: str = "{:,.4g}"
    title: str = ""
    height: float = 1.0


@dataclass(frozen=True)
class Chart:
    """One PNG: panels drawn from one table of the benchmark's Markdown.

    ``facets``: columns whose values repeat the panels, the first down (rows of the grid), the
    second across (columns); ``None`` for no facet that way. ``arrange``: the panels one under
    another (``"rows"``) or side by side (``"columns"``, bars of the same categories).
    ``title``: the chart's title, or a function of the table's heading; the heading when empty.
    """

    panels: tuple[Lines | Bars, ...]
    heading: str = ""
    facets: tuple[str | None, str | None] = (None, None)
    facet_titles: Mapping[str, str] = field(default_factory=dict)  # facet column -> "{} items"
    arrange: Literal["rows", "columns"] = "rows"
    title: str | Callable[[str], str] = ""
    width: float = 9.6  # inches at 100 dpi: 960 pixels, the width of a rendered Markdown page
    panel_height: float = 3.0

    def columns(self) -> set[str]:
        """Every column the chart names; its table must have them all."""
        named = {facet for facet in self.facets if facet}
        for panel in self.panels:
            named.update(panel.where)
            if panel.split:
                named.add(panel.split)
            if isinstance(panel, Lines):
                named.add(panel.x)
            else:
                if isinstance(panel.category, str) and not (panel.melt and panel.category == panel.melt.name):
                    named.add(panel.category)
            melted = {panel.melt.name, panel.melt.value} if isinstance(panel, Bars) and panel.melt else set()
            named.update(s.value for s in panel.series if isinstance(s.value, str) and s.value not in melted)
        return named

    def table(self, tables: Sequence[Table]) -> Table | None:
        """The first of ``tables`` this chart draws, or ``None``."""
        for table in tables:
            if self.heading and re.search(self.heading, table.title) is None:
                continue
            if self.columns() <= set(table.header) and self._melts_match(table):
                return table
        return None

    def _melts_match(self, table: Table) -> bool:
        return all(
            any(re.search(panel.melt.columns, column) for column in table.header)
            for panel in self.panels
            if isinstance(panel, Bars) and panel.melt
        )


# -- what is drawn, as numbers --------------------------------------------------------------------


@dataclass(frozen=True)
class Drawn:
    """One line or one set of bars of a panel: its legend label, kind and values."""

    label: str
    kind: Kind
    points: tuple[tuple[float, float], ...] = ()  # lines: (x, y)
    values: tuple[float | None, ...] = ()  # bars: one per category
    step: bool = False


@dataclass(frozen=True)
class Line:
    """A target or reference line of a panel; ``category`` is the bar group it spans, if one."""

    label: str
    value: float
    category: int | None = None


@dataclass(frozen=True)
class Panel:
    """What one axes of a chart shows, computed from the table."""

    kind: Literal["lines", "bars"]
    title: str
    x_label: str
    y_label: str
    drawn: tuple[Drawn, ...]
    lines: tuple[Line, ...] = ()
    categories: tuple[str, ...] = ()
    x_scale: Scale = "linear"
    y_scale: Scale = "linear"
    x_ticks: tuple[float, ...] = ()
    y_ticks: tuple[float, ...] = ()
    value_format: str = "{:,.4g}"
    grid_row: int = 0
    grid_column: int = 0
    height: float = 1.0


def _values(rows: Sequence[Row], column: str | None) -> list[str]:
    found: list[str] = []
    for row in rows:
        value = row.get(column, "") if column else ""
        if value not in found:
            found.append(value)
    return found


def _keep(rows: Sequence[Row], where: Mapping[str, str]) -> list[Row]:
    return [row for row in rows if all(row.get(column) == value for column, value in where.items())]


def _label(series: Series, split_value: str, many: bool) -> str:
    if not split_value or series.kind != "data":
        return series.label
    return f"{split_value}, {series.label}" if many else split_value


def _plot_lines(panel: Lines, rows: Sequence[Row]) -> tuple[list[Drawn], list[Line], tuple[float, ...]]:
    drawn: list[Drawn] = []
    many = sum(1 for series in panel.series if series.kind == "data") > 1
    for series in panel.series:
        for split_value in _values(rows, panel.split) if series.kind == "data" else [""]:
            chosen = [row for row in rows if not split_value or row.get(panel.split or "") == split_value]
            points = []
            for row in chosen:
                x, y = number(row.get(panel.x, "")), series.of(row)
                if x is not None and y is not None:
                    points.append((x, y))
            if points:
                drawn.append(Drawn(_label(series, split_value, many), series.kind, tuple(sorted(set(points))),
                                   step=series.step))
    lines = [Line(target.label, value) for target in panel.targets if (value := target.of(rows)) is not None]
    xs = sorted({x for line in drawn for x, _ in line.points})
    return drawn, lines, tuple(xs) if len(xs) <= 8 else ()


def _category(panel: Bars, row: Row) -> str:
    return row.get(panel.category, "") if isinstance(panel.category, str) else panel.category(row)


def _plot_bars(panel: Bars, rows: Sequence[Row]) -> tuple[list[Drawn], list[Line], list[str]]:
    categories: list[str] = []
    for row in rows:
        if (name := _category(panel, row)) not in categories:
            categories.append(name)
    drawn: list[Drawn] = []
    many = len(panel.series) > 1
    for series in panel.series:
        for split_value in _values(rows, panel.split):
            values: list[float | None] = []
            for name in categories:
                matching = [row for row in rows if _category(panel, row) == name
                            and (not split_value or row.get(panel.split or "") == split_value)]
                values.append(series.of(matching[0]) if matching else None)
            drawn.append(Drawn(_label(series, split_value, many), series.kind, values=tuple(values)))
    lines = []
    for target in panel.targets:
        if target.per_category:
            for index, name in enumerate(categories):
                in_category = [row for row in rows if _category(panel, row) == name]
                if (value := target.of(in_category)) is not None:
                    lines.append(Line(target.label, value, index))
        elif (value := target.of(rows)) is not None:
            lines.append(Line(target.label, value))
    return drawn, lines, categories


def _facet_title(chart: Chart, row_value: str, column_value: str) -> str:
    parts = []
    for facet, value in zip(chart.facets, (row_value, column_value), strict=True):
        if facet:
            default = "{}" if number(value) is None else f"{facet} = {{}}"
            parts.append(chart.facet_titles.get(facet, default).format(value))
    return ", ".join(parts)


def plot(chart: Chart, table: Table) -> list[Panel]:
    """The panels of ``chart`` drawn from ``table``, grid position included (no matplotlib)."""
    records = table.records()
    down, across = chart.facets
    row_values, column_values = _values(records, down), _values(records, across)
    panels: list[Panel] = []
    for facet_row, row_value in enumerate(row_values):
        for facet_column, column_value in enumerate(column_values):
            faceted = [row for row in records
                       if (not down or row[down] == row_value) and (not across or row[across] == column_value)]
            facet_title = _facet_title(chart, row_value, column_value)
            for number_, spec in enumerate(chart.panels):
                rows = _keep(faceted, spec.where)
                title = ", ".join(part for part in (spec.title, facet_title) if part)
                if chart.arrange == "rows":
                    grid_row, grid_column = facet_row * len(chart.panels) + number_, facet_column
                else:
                    grid_row, grid_column = facet_row, facet_column * len(chart.panels) + number_
                if isinstance(spec, Lines):
                    drawn, lines, ticks = _plot_lines(spec, rows)
                    panels.append(Panel("lines", title, spec.x_label, spec.y_label, tuple(drawn), tuple(lines),
                                        x_scale=spec.x_scale, y_scale=spec.y_scale, x_ticks=ticks,
                                        y_ticks=spec.y_ticks, grid_row=grid_row, grid_column=grid_column,
                                        height=spec.height))
                else:
                    if spec.melt is not None:
                        rows = spec.melt.apply(table, rows)
                    drawn, lines, categories = _plot_bars(spec, rows)
                    panels.append(Panel("bars", title, spec.value_label, "", tuple(drawn), tuple(lines),
                                        categories=tuple(categories), x_scale=spec.scale,
                                        value_format=spec.value_format, grid_row=grid_row,
                                        grid_column=grid_column, height=spec.height))
    return panels


# -- drawing ----------------------------------------------------------------------------------


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def _colors(panels: Sequence[Panel]) -> dict[str, str]:
    """One color per data label across the chart, so a model keeps its color in every panel."""
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
               "tab:olive", "tab:cyan"]
    labels: list[str] = []
    for panel in panels:
        labels += [d.label for d in panel.drawn if d.kind == "data" and d.label not in labels]
    return {label: palette[index % len(palette)] for index, label in enumerate(labels)}


_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
# Lines that run on top of each other (two models that both carry the offered load) stay
# visible: each its own dash pattern, and its markers on other points than the others'.
_DASHES = ("-", "--", "-.", ":")


def _scale(axes: Any, scale: Scale, which: Literal["x", "y"]) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    setter = axes.set_xscale if which == "x" else axes.set_yscale
    axis = axes.xaxis if which == "x" else axes.yaxis
    if scale == "log2":
        setter("log", base=2)
    elif scale == "symlog":
        setter("symlog", linthresh=1.0)
    elif scale == "log":
        setter("log", base=10)
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    if scale != "linear":
        # 200 and 1,000, not 2 x 10^2 and 10^3.
        axis.set_major_formatter(FuncFormatter(lambda value, _: _tick_text(value)))
        axis.set_minor_formatter(NullFormatter())


def _tick_text(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:g}"


def _draw_lines(axes: Any, panel: Panel, colors: Mapping[str, str]) -> None:
    from matplotlib.ticker import NullLocator

    references = 0
    for line in panel.drawn:
        xs = [x for x, _ in line.points]
        ys = [y for _, y in line.points]
        if line.kind == "target":
            style: dict[str, Any] = {"color": "black", "linestyle": "--", "linewidth": 1.5}
        elif line.kind == "reference":
            # The first reference (the offered load) is a wide light band; others are dotted.
            style = ({"color": "0.55", "linewidth": 5, "alpha": 0.45} if references == 0
                     else {"color": "0.35", "linestyle": ":", "linewidth": 1.8})
            references += 1
        else:
            # By the label's place in the chart, so a line looks the same in every panel.
            place = list(colors).index(line.label)
            style = {"color": colors[line.label], "marker": _MARKERS[place % len(_MARKERS)], "markersize": 5,
                     "linewidth": 1.8, "linestyle": _DASHES[place % len(_DASHES)]}
            if place % 2:  # hollow: a marker on the same point as another's shows both
                style.update(markerfacecolor="none", markersize=7, markeredgewidth=1.5)
            if len(xs) > 12:
                style["markevery"] = (place % 3, 3)
        if line.step:
            plain = {k: v for k, v in style.items() if k not in ("marker", "markevery", "markersize")}
            axes.step(xs, ys, where="post", label=line.label, **plain)
        else:
            axes.plot(xs, ys, label=line.label, **style)
    for line in panel.lines:
        axes.axhline(line.value, color="black", linestyle="--", linewidth=1.2, label=f"{line.label}")
    _scale(axes, panel.x_scale, "x")
    _scale(axes, panel.y_scale, "y")
    if panel.x_ticks:
        axes.set_xticks(panel.x_ticks, [_tick_text(tick) for tick in panel.x_ticks])
        if panel.x_scale != "linear":
            axes.xaxis.set_minor_locator(NullLocator())
    if panel.y_ticks:
        axes.set_yticks(panel.y_ticks, [_tick_text(tick) for tick in panel.y_ticks])
    if panel.y_scale in ("linear", "symlog"):
        axes.set_ylim(bottom=0)
    axes.set_xlabel(panel.x_label)
    axes.set_ylabel(_wrap(panel.y_label, 34))


def _draw_bars(axes: Any, panel: Panel, colors: Mapping[str, str], show_categories: bool) -> None:
    groups = len(panel.drawn)
    height = 0.8 / max(groups, 1)
    largest = 0.0
    for index, bars in enumerate(panel.drawn):
        positions = [number_ - 0.4 + height * (index + 0.5) for number_ in range(len(panel.categories))]
        values = [value if value is not None else math.nan for value in bars.values]
        color = colors.get(bars.label, "tab:blue") if groups > 1 else "tab:blue"
        container = axes.barh(positions, values, height * 0.92, label=bars.label if groups > 1 else None,
                              color=color)
        axes.bar_label(container, labels=["" if math.isnan(v) else panel.value_format.format(v) for v in values],
                       padding=3, fontsize="small")
        largest = max([largest, *(v for v in values if not math.isnan(v))])
    labelled = set()
    for line in panel.lines:
        label = None if line.label in labelled else line.label
        labelled.add(line.label)
        if line.category is None:
            axes.axvline(line.value, color="black", linestyle="--", linewidth=1.2, label=label)
        else:
            axes.vlines(line.value, line.category - 0.45, line.category + 0.45, color="black", linestyle="--",
                        linewidth=1.5, label=label)
        largest = max(largest, line.value)
    axes.set_yticks(range(len(panel.categories)),
                    [_wrap(name, 26) for name in panel.categories] if show_categories else [""] * len(panel.categories))
    axes.invert_yaxis()
    _scale(axes, panel.x_scale, "x")
    if panel.x_scale == "linear":
        axes.set_xlim(0, largest * 1.22 or 1)  # room for the value labels
    axes.set_xlabel(_wrap(panel.x_label, 48))


def title_of(chart: Chart, table: Table) -> str:
    """The chart's title: its own, or made from the table's heading, or the heading."""
    return chart.title(table.title) if callable(chart.title) else chart.title or table.title


def draw(chart: Chart, table: Table, path: Path) -> list[Panel]:
    """Draw ``chart`` from ``table`` into a PNG at ``path``; returns what it drew."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = plot(chart, table)
    rows = max(panel.grid_row for panel in panels) + 1
    columns = max(panel.grid_column for panel in panels) + 1
    heights = [max((p.height for p in panels if p.grid_row == r), default=1.0) for r in range(rows)]
    figure, grid = plt.subplots(
        rows, columns, squeeze=False, figsize=(chart.width, chart.panel_height * sum(heights) + 0.6),
        gridspec_kw={"height_ratios": heights}, layout="constrained",
        sharex="col" if rows > 1 and chart.arrange == "rows" and all(p.kind == "lines" for p in panels) else "none",
    )
    colors = _colors(panels)
    at = {(panel.grid_row, panel.grid_column): panel for panel in panels}
    shared_x = rows > 1 and chart.arrange == "rows" and all(p.kind == "lines" for p in panels)
    legend: dict[str, Any] = {}
    for panel in panels:
        axes = grid[panel.grid_row][panel.grid_column]
        if panel.kind == "lines":
            _draw_lines(axes, panel, colors)
            if shared_x and panel.grid_row < rows - 1:
                axes.set_xlabel("")  # the panel below, on the same axis, says it
        else:
            # Side by side, a panel of the same categories as its left neighbour does not repeat them.
            left = at.get((panel.grid_row, panel.grid_column - 1))
            _draw_bars(axes, panel, colors, show_categories=left is None or left.categories != panel.categories)
        axes.grid(alpha=0.3)
        if panel.title:
            axes.set_title(panel.title, fontsize="medium")
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    # One legend under the panels, never over a line or a bar: a label keeps its color (and
    # a target its label) in every panel, so one entry serves them all.
    if legend:
        longest = max(len(label) for label in legend)
        figure.legend(legend.values(), legend.keys(), loc="outside lower center", fontsize="small",
                      ncols=max(1, min(len(legend), int(chart.width * 11 // (longest + 6)))), frameon=False)
    figure.suptitle(_wrap(title_of(chart, table), 100), fontsize="large")
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return panels
