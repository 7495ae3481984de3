"""Run every ``benchmarks/bench_*.py`` and write ``benchmarks/RESULTS.md`` with PNG charts.

Each benchmark runs in its own process with ``--markdown FILE``; its tables go into
RESULTS.md under a section of their own, after the machine, the date and the commit they were
measured on, and each table that has something to plot gets a chart beside RESULTS.md. A
benchmark that fails is reported as failed (with the end of its output) and makes this command
exit non-zero; its figures are not hidden or invented. Nothing in RESULTS.md is edited by hand.

Run (``make bench``)::

    python benchmarks/run_all.py                 # every benchmark with its own defaults
    python benchmarks/run_all.py --quick         # pass --quick to benchmarks that have it
    python benchmarks/run_all.py --only query    # benchmarks whose file name contains "query"

One DynamoDB Local is started for all of them (or ``DYNAMODB_LOCAL_ENDPOINT`` is used).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


# -- Markdown tables -------------------------------------------------------------------------


@dataclass
class MarkdownTable:
    """A pipe table found in a benchmark's Markdown, with the heading it sits under."""

    title: str
    header: list[str]
    rows: list[list[str]]
    end_line: int  # index of the line after the table

    def column(self, index: int) -> list[str]:
        return [row[index] if index < len(row) else "" for row in self.rows]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def find_tables(markdown: str) -> list[MarkdownTable]:
    """The pipe tables of ``markdown`` (a header row, a ``---`` row, body rows)."""
    lines = markdown.splitlines()
    tables: list[MarkdownTable] = []
    title = ""
    index = 0
    while index < len(lines):
        heading = _HEADING.match(lines[index])
        if heading:
            title = heading[2].strip()
        is_table = (
            lines[index].lstrip().startswith("|")
            and index + 1 < len(lines)
            and re.fullmatch(r"\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*", lines[index + 1]) is not None
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
        tables.append(MarkdownTable(title=title, header=header, rows=rows, end_line=index))
    return tables


def _number(cell: str) -> float | None:
    text = cell.replace(",", "").strip()
    return float(text) if _NUMBER.match(text) else None


@dataclass
class ChartPlan:
    """What to draw for one table: a line chart over ``x`` or a bar chart of rows."""

    kind: str  # "lines" or "bars"
    x: int | None
    ys: list[int]
    series: list[int] = field(default_factory=list)


def plan_chart(table: MarkdownTable) -> ChartPlan | None:
    """Decide how to chart a table, or ``None`` when it has nothing worth plotting.

    Numeric columns (every filled cell a plain number) are measures; the first of them with
    at least two distinct values is the x axis. Text columns whose values differ name the
    series. With two or more points per series: lines of the first measure after x (every
    measure when there are no series); otherwise one bar per row.
    """
    if len(table.rows) < 2:
        return None
    numeric: list[int] = []
    text_varying: list[int] = []
    for index in range(len(table.header)):
        values = [cell for cell in table.column(index) if cell]
        if values and all(_number(cell) is not None for cell in values):
            numeric.append(index)
        elif len(set(values)) > 1:
            text_varying.append(index)
    x = next((i for i in numeric if len({_number(c) for c in table.column(i) if c}) >= 2), None)
    measures = [i for i in numeric if i != x]
    if not measures:
        return None
    if x is None:
        return ChartPlan("bars", None, measures[:1], text_varying) if text_varying else None
    groups: dict[tuple[str, ...], int] = {}
    for row in table.rows:
        key = tuple(row[i] if i < len(row) else "" for i in text_varying)
        groups[key] = groups.get(key, 0) + 1
    if min(groups.values()) >= 2:
        return ChartPlan("lines", x, measures[:1] if text_varying else measures, text_varying)
    if text_varying:
        return ChartPlan("bars", None, measures[:1], [*text_varying, x])
    return None


def draw_chart(table: MarkdownTable, plan: ChartPlan, path: Path) -> None:
    """Draw ``plan`` for ``table`` into a PNG at ``path`` (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    if plan.kind == "lines":
        assert plan.x is not None
        _draw_lines(axes, table, plan, plan.x)
    else:
        y = plan.ys[0]
        rows = [row for row in table.rows if y < len(row) and _number(row[y]) is not None]
        # The first label column as is, the others with their header ("shards 16").
        labels = [
            " / ".join(
                row[i] if n == 0 else f"{table.header[i]} {row[i]}" for n, i in enumerate(plan.series) if i < len(row)
            )
            for row in rows
        ]
        values = [float(_number(row[y]) or 0.0) for row in rows]
        axes.barh(range(len(rows)), values, color="tab:blue")
        axes.set_yticks(range(len(rows)), labels, fontsize="small")
        axes.invert_yaxis()
        axes.set_xlabel(table.header[y])
    axes.grid(alpha=0.3)
    axes.set_title(_wrap(table.title or "benchmark"), fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _draw_lines(axes: Any, table: MarkdownTable, plan: ChartPlan, x: int) -> None:
    """One line per series (of the first measure), or per measure when there are no series.

    Without series, measures named like a count (shard count) go on a second axis as steps.
    """
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for row in table.rows:
        groups.setdefault(tuple(row[i] if i < len(row) else "" for i in plan.series), []).append(row)
    counts = [y for y in plan.ys if not plan.series and "count" in table.header[y].lower()]
    secondary = axes.twinx() if counts else None
    for name, rows in groups.items():
        for y in plan.ys:
            points = sorted(
                (a, b)
                for a, b in ((_number(row[x]), _number(row[y]) if y < len(row) else None) for row in rows)
                if a is not None and b is not None
            )
            if not points:
                continue
            xs, values = zip(*points, strict=True)
            if y in counts and secondary is not None:
                secondary.step(xs, values, where="post", color="grey", linestyle="--", label=table.header[y])
            else:
                label = ", ".join(name) if plan.series else table.header[y]
                axes.plot(xs, values, marker="o", markersize=3, linewidth=2, label=label)
    measured = [table.header[y] for y in plan.ys if y not in counts]
    units = {header.split()[-1] for header in measured if header.split()}
    axes.set_ylabel(measured[0] if len(measured) == 1 else units.pop() if len(units) == 1 else "see legend")
    axes.set_xlabel(table.header[x])
    handles, labels = axes.get_legend_handles_labels()
    if secondary is not None:
        secondary.set_ylabel(", ".join(table.header[y] for y in counts))
        secondary.set_ylim(bottom=0)
        more_handles, more_labels = secondary.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    # The legend goes on the top-most axes so that no line is drawn over it.
    (secondary or axes).legend(handles, labels, loc="upper left", fontsize="small")
    axes.set_ylim(bottom=0)
    if table.header[x].lower() == "shards":
        axes.set_xscale("log", base=2)
        ticks = sorted({v for v in (_number(c) for c in table.column(x)) if v is not None})
        axes.set_xticks(ticks, [f"{t:g}" for t in ticks])
    elif _spans_decades(table, x):
        axes.set_xscale("log", base=10)


def _spans_decades(table: MarkdownTable, column: int) -> bool:
    values = [v for v in (_number(c) for c in table.column(column)) if v is not None and v > 0]
    return bool(values) and max(values) / min(values) >= 100


def _wrap(text: str, width: int = 90) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "\n".join(lines)


# -- running ---------------------------------------------------------------------------------


@dataclass
class BenchRun:
    """One benchmark's run: its command, exit code, time, Markdown and output tail."""

    script: Path
    command: list[str]
    returncode: int
    seconds: float
    markdown: str
    output_tail: str

    @property
    def name(self) -> str:
        return self.script.stem


def _accepts(script: Path, option: str) -> bool:
    completed = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    return option in completed.stdout


def run_bench(script: Path, quick: bool, timeout: float, env: dict[str, str]) -> BenchRun:
    """Run one benchmark with ``--markdown`` into a temporary file; never raises on failure."""
    with tempfile.TemporaryDirectory() as scratch:
        markdown_path = Path(scratch) / "out.md"
        command = [sys.executable, str(script), "--markdown", str(markdown_path)]
        if quick and _accepts(script, "--quick"):
            command.append("--quick")
        started = time.monotonic()
        try:
            completed = subprocess.run(
                command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
            )
            returncode, output = completed.returncode, completed.stdout + completed.stderr
        except subprocess.TimeoutExpired as expired:
            returncode = -1
            output = _text(expired.stdout) + _text(expired.stderr) + f"\ntimed out after {timeout:g} s"
        seconds = time.monotonic() - started
        markdown = markdown_path.read_text(encoding="utf-8") if markdown_path.exists() else ""
    where = script.relative_to(REPO) if script.is_relative_to(REPO) else script
    shown = ["python", str(where), "--markdown", "FILE", *command[4:]]
    markdown = markdown.replace(str(markdown_path), "FILE")
    tail = "\n".join(output.rstrip().splitlines()[-25:])
    return BenchRun(script, shown, returncode, seconds, markdown, tail)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


# -- the report ------------------------------------------------------------------------------


def machine_lines(endpoint: str, started_server: bool) -> Iterator[str]:
    """Where and with what the figures were measured."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    yield f"- CPU: {cpu}, {os.cpu_count()} logical cores (DynamoDB Local and the client share them)"
    if memory:
        yield f"- memory: {memory}"
    yield f"- OS: {platform.platform()}"
    yield f"- Python {platform.python_version()}; " + ", ".join(
        f"{name} {_version(name)}" for name in ("pynamodb-sharding", "pynamodb", "botocore")
    )
    java = _java_version()
    server = "started by run_all.py" if started_server else "given by DYNAMODB_LOCAL_ENDPOINT"
    yield f"- DynamoDB Local at {endpoint} ({server}); {java}"
    yield f"- commit: {_commit()}"


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _java_version() -> str:
    try:
        completed = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return "java: not found"
    first = (completed.stderr or completed.stdout).splitlines()
    return first[0].strip() if first else "java: unknown version"


def _commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        ).stdout.strip()
    except OSError:
        return "unknown (no git)"
    if not head:
        return "unknown (not a git checkout)"
    return f"{head}{' with uncommitted changes' if dirty else ''}"


def _demote(markdown: str, top: int) -> str:
    """Shift the headings of ``markdown`` so that its highest one is at level ``top``."""
    levels = [len(match[1]) for line in markdown.splitlines() if (match := _HEADING.match(line))]
    shift_by = top - min(levels, default=top)

    def shift(match: re.Match[str]) -> str:
        return "#" * max(1, min(6, len(match[1]) + shift_by)) + " " + match[2]

    return "\n".join(_HEADING.sub(shift, line) for line in markdown.splitlines())


def section(run: BenchRun, out: Path) -> tuple[list[str], list[Path]]:
    """The RESULTS.md section of one run, with a chart after each table that has one."""
    lines = [f"## {run.name}", ""]
    lines.append(f"`{' '.join(run.command)}` — {run.seconds:.0f} s, exit code {run.returncode}")
    lines.append("")
    charts: list[Path] = []
    if run.returncode != 0:
        lines += [
            f"**FAILED** (exit code {run.returncode}): the figures below, if any, are incomplete.",
            "",
            "```text",
            run.output_tail,
            "```",
            "",
        ]
    if not run.markdown.strip():
        lines += ["No Markdown was produced.", ""]
        return lines, charts
    body = _demote(run.markdown, 3).splitlines()
    tables = find_tables("\n".join(body))
    inserts: dict[int, str] = {}
    for number, table in enumerate(tables, start=1):
        plan = plan_chart(table)
        if plan is None:
            continue
        chart = out / f"{run.name}-{number}.png"
        draw_chart(table, plan, chart)
        charts.append(chart)
        inserts[table.end_line] = f"\n![{table.title or run.name}]({chart.name})\n"
    for index, line in enumerate(body):
        if index in inserts:
            lines.append(inserts[index])
        lines.append(line)
    if len(body) in inserts:
        lines.append(inserts[len(body)])
    lines.append("")
    return lines, charts


@dataclass
class KeptSection:
    """A benchmark's section carried over, unchanged, from an earlier RESULTS.md (``--keep``)."""

    name: str
    lines: list[str]
    origin: str  # when and at which commit it was measured


def kept_sections(results: Path, run_names: set[str]) -> list[KeptSection]:
    """The sections of ``results`` of benchmarks not in ``run_names``, with where they came from."""
    if not results.exists():
        return []
    text = results.read_text(encoding="utf-8").splitlines()
    generated = next((line for line in text if line.startswith("Generated by")), "")
    date = re.search(r" on (\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC)", generated)
    commit = next((line.split("commit:", 1)[1].strip() for line in text if line.startswith("- commit:")), "unknown")
    default_origin = f"the run of {date[1] if date else 'an unknown date'}, commit {commit}"
    sections: list[KeptSection] = []
    current: KeptSection | None = None
    for line in text:
        heading = re.match(r"^## (bench_\w+)$", line)
        if heading:
            current = KeptSection(heading[1], [line], default_origin)
            sections.append(current)
        elif line.startswith("## "):
            current = None
        elif current is not None:
            kept_from = re.match(r"^Kept from (.*): not run again this time\.$", line)
            if kept_from:
                current.origin = kept_from[1]
                continue
            current.lines.append(line)
    return [section for section in sections if section.name not in run_names]


def report(runs: Sequence[BenchRun], machine: Sequence[str], out: Path, now: datetime.datetime, command: str,
           kept: Sequence[KeptSection] = ()) -> str:
    """The whole RESULTS.md text; draws the charts into ``out`` as a side effect."""
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `{command}` (`make bench`) on {now:%Y-%m-%d %H:%M} UTC. Do not edit: run the command again.",
        "",
        "## Machine",
        "",
        *machine,
        "",
        "## Runs",
        "",
        "| benchmark | status | seconds |",
        "|---|---|---:|",
    ]
    for run in runs:
        status = "ok" if run.returncode == 0 else f"FAILED (exit {run.returncode})"
        lines.append(f"| [{run.name}](#{run.name}) | {status} | {run.seconds:.0f} |")
    for earlier in kept:
        lines.append(f"| [{earlier.name}](#{earlier.name}) | kept from {earlier.origin} | |")
    lines.append("")
    for run in runs:
        body, _ = section(run, out)
        lines += body
    for earlier in kept:
        lines += [earlier.lines[0], "", f"Kept from {earlier.origin}: not run again this time.",
                  *earlier.lines[1:]]
    return "\n".join(lines).rstrip() + "\n"


def _command(argv: Sequence[str] | None) -> str:
    return shlex.join(["python", "benchmarks/run_all.py", *(sys.argv[1:] if argv is None else argv)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="pass --quick to the benchmarks that accept it")
    parser.add_argument("--only", metavar="TEXT",
                        help="run only benchmarks whose file name contains TEXT (several: comma-separated)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the sections of benchmarks not run from the existing RESULTS.md, marked as such")
    parser.add_argument("--benchmarks", type=Path, default=HERE, help="directory of bench_*.py (this one)")
    parser.add_argument("--out", type=Path, default=HERE, help="where RESULTS.md and the charts go (this directory)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per benchmark before it is stopped")
    args = parser.parse_args(argv)

    wanted = [name for name in (args.only or "").split(",") if name]
    scripts = sorted(p for p in args.benchmarks.glob("bench_*.py") if not wanted or any(n in p.name for n in wanted))
    if not scripts:
        matching = f" matching {args.only!r}" if args.only else ""
        print(f"no bench_*.py in {args.benchmarks}{matching}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for script in scripts:  # the charts of kept sections stay
        for old in args.out.glob(f"{script.stem}-*.png"):
            old.unlink()

    from pynamodb_sharding.testing.local import running_dynamodb_local

    started_server = not os.environ.get("DYNAMODB_LOCAL_ENDPOINT")
    with running_dynamodb_local() as server:
        env = {**os.environ, "DYNAMODB_LOCAL_ENDPOINT": server.endpoint}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
        runs = []
        for script in scripts:
            print(f"running {script.name} ...", flush=True)
            run = run_bench(script, args.quick, args.timeout, env)
            print(f"  {'ok' if run.returncode == 0 else f'FAILED (exit {run.returncode})'} in {run.seconds:.0f} s")
            runs.append(run)
        machine = list(machine_lines(server.endpoint, started_server))
    results = args.out / "RESULTS.md"
    kept = kept_sections(results, {run.name for run in runs}) if args.keep else []
    if not args.keep:
        for old in args.out.glob("bench_*-*.png"):
            if not any(old.name.startswith(f"{run.name}-") for run in runs):
                old.unlink()
    results.write_text(
        report(runs, machine, args.out, datetime.datetime.now(datetime.UTC), _command(argv), kept), encoding="utf-8"
    )
    charts = sorted(args.out.glob("bench_*-*.png"))
    print(f"wrote {results} and {len(charts)} chart(s)")
    return 0 if all(run.returncode == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
