"""Run every ``benchmarks/bench_*.py`` and write ``benchmarks/RESULTS.md`` with PNG charts.

Each benchmark runs in its own process with ``--markdown FILE``; its tables go into
RESULTS.md under a section of their own, after the machine, the date and the commit they were
measured on, and the charts the benchmark module declares (``CHARTS``, see ``charts.py``) are
drawn from those tables into PNGs beside RESULTS.md, each after the table it draws. A benchmark
that fails is reported as failed (with the end of its output) and makes this command exit
non-zero; its figures are not hidden or invented. Nothing in RESULTS.md is edited by hand.

Run (``make bench``)::

    python benchmarks/run_all.py                 # every benchmark with its own defaults
    python benchmarks/run_all.py --quick         # pass --quick to benchmarks that have it
    python benchmarks/run_all.py --only query    # benchmarks whose file name contains "query"
    python benchmarks/run_all.py --charts-only   # redraw the charts from RESULTS.md's tables; runs nothing

One DynamoDB Local is started for all of them (or ``DYNAMODB_LOCAL_ENDPOINT`` is used).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import itertools
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import charts

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_IMAGE = re.compile(r"^!\[[^\]]*\]\((?P<file>bench_\w+-\d+\.png)\)$")
_NOT_DRAWN = re.compile(r"^_Chart \d+ not drawn: .*_$")
_REDRAWN = "Charts redrawn from these tables by `python benchmarks/run_all.py --charts-only`"


# -- charts ------------------------------------------------------------------------------------


def declared_charts(script: Path) -> tuple[list[charts.Chart], str]:
    """The ``CHARTS`` a benchmark module declares, and why there are none if it could not be read.

    The module is imported, not run: its ``main()`` runs only as a script.
    """
    name = f"_charts_of_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    if spec is None or spec.loader is None:
        return [], f"{script.name} is not a Python module"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        return [], f"importing {script.name} for its CHARTS failed: {error!r}"
    finally:
        sys.modules.pop(name, None)
    declared = getattr(module, "CHARTS", [])
    return list(declared), ""


def place_charts(name: str, body: list[str], specs: Sequence[charts.Chart], out: Path) -> tuple[list[str], list[str]]:
    """``body`` with each chart of ``specs`` drawn into ``out`` and shown after the table it draws.

    Returns the lines and the problems (a chart whose table is missing or that failed to draw,
    also said in the lines where the chart would be).
    """
    tables = charts.find_tables("\n".join(body))
    inserts: dict[int, list[str]] = {}
    problems = []
    for number, chart in enumerate(specs, start=1):
        table = chart.table(tables)
        path = out / f"{name}-{number}.png"
        if table is None:
            problem = f"no table has the columns {sorted(chart.columns())}"
            where = len(body)
        else:
            where = table.end_line
            try:
                charts.draw(chart, table, path)
            except Exception as error:
                problem = f"{error!r}"
            else:
                inserts.setdefault(where, []).append(f"![{charts.title_of(chart, table)}]({path.name})")
                continue
        problems.append(f"{name}: chart {number} not drawn: {problem}")
        inserts.setdefault(where, []).append(f"_Chart {number} not drawn: {problem}_")
    lines: list[str] = []
    for index in range(len(body) + 1):
        for insert in inserts.get(index, []):
            lines += ["", insert]
        if index < len(body):
            lines.append(body[index])
    return lines, problems


def tidy(lines: Sequence[str]) -> list[str]:
    """``lines`` with runs of blank lines made one, outside fenced code blocks."""
    tidied: list[str] = []
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and not line.strip() and tidied and not tidied[-1].strip():
            continue
        tidied.append(line)
    return tidied


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


def _accepts(script: Path, option: str, env: dict[str, str]) -> bool:
    completed = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    return option in completed.stdout


def run_bench(script: Path, quick: bool, timeout: float, env: dict[str, str]) -> BenchRun:
    """Run one benchmark with ``--markdown`` into a temporary file; never raises on failure."""
    with tempfile.TemporaryDirectory() as scratch:
        markdown_path = Path(scratch) / "out.md"
        command = [sys.executable, str(script), "--markdown", str(markdown_path)]
        if quick and _accepts(script, "--quick", env):
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


def section(run: BenchRun, out: Path) -> tuple[list[str], list[str]]:
    """The RESULTS.md section of one run, its charts drawn after their tables; and chart problems."""
    lines = [f"## {run.name}", ""]
    lines.append(f"`{' '.join(run.command)}` — {run.seconds:.0f} s, exit code {run.returncode}")
    lines.append("")
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
        return lines, []
    specs, problem = declared_charts(run.script)
    body, problems = place_charts(run.name, _demote(run.markdown, 3).splitlines(), specs, out)
    lines += [*body, ""]
    return lines, [problem] if problem else problems


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
        body, problems = section(run, out)
        lines += body
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
    for earlier in kept:
        lines += [earlier.lines[0], "", f"Kept from {earlier.origin}: not run again this time.",
                  *earlier.lines[1:]]
    return "\n".join(tidy(lines)).rstrip() + "\n"


def redraw(results: Path, benchmarks: Path, out: Path, now: datetime.datetime, wanted: Sequence[str] = ()) -> int:
    """Redraw the charts of RESULTS.md's sections from the tables already there; run nothing.

    Each ``## bench_*`` section (of a benchmark whose name contains one of ``wanted``, or all)
    loses its chart images and gets the charts its module declares now, drawn from its tables.
    Returns 1 when a chart could not be drawn (said in RESULTS.md and on stderr), else 0.
    """
    if not results.exists():
        print(f"{results} does not exist: run the benchmarks first", file=sys.stderr)
        return 2
    lines = results.read_text(encoding="utf-8").splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith("## ")] + [len(lines)]
    output = lines[:starts[0]]
    problems: list[str] = []
    drawn = 0
    for begin, end in itertools.pairwise(starts):
        chunk = lines[begin:end]
        heading = re.fullmatch(r"## (bench_\w+)", chunk[0])
        if heading is None or (wanted and not any(name in heading[1] for name in wanted)):
            output += chunk
            continue
        name = heading[1]
        body = [line for line in chunk[1:] if not _NOT_DRAWN.match(line)
                and not ((image := _IMAGE.match(line)) and image["file"].startswith(f"{name}-"))]
        script = benchmarks / f"{name}.py"
        specs, problem = declared_charts(script) if script.exists() else ([], f"no {script}")
        for old in out.glob(f"{name}-*.png"):
            old.unlink()
        body, section_problems = place_charts(name, body, specs, out)
        problems += [problem] if problem else section_problems
        drawn += sum(1 for line in body if _IMAGE.match(line))
        output += [chunk[0], *body]
    stamp = f"{_REDRAWN} on {now:%Y-%m-%d %H:%M} UTC; the figures are those of the runs named below."
    output = [line for line in output if not line.startswith(_REDRAWN)]
    generated = next((index for index, line in enumerate(output) if line.startswith("Generated by")), 0)
    output[generated + 1:generated + 1] = ["", stamp]
    results.write_text("\n".join(tidy(output)).rstrip() + "\n", encoding="utf-8")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"redrew {drawn} chart(s) in {out} from the tables of {results}")
    return 1 if problems else 0


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
    parser.add_argument("--charts-only", action="store_true",
                        help="run nothing: redraw the charts from the tables of the existing RESULTS.md")
    args = parser.parse_args(argv)

    wanted = [name for name in (args.only or "").split(",") if name]
    if args.charts_only:
        now = datetime.datetime.now(datetime.UTC)
        return redraw(args.out / "RESULTS.md", args.benchmarks, args.out, now, wanted)
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
        # The package from this checkout, and charts.py and report.py for benchmarks elsewhere.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(HERE), env.get("PYTHONPATH", "")]))
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
    pictures = sorted(args.out.glob("bench_*-*.png"))
    print(f"wrote {results} and {len(pictures)} chart(s)")
    return 0 if all(run.returncode == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
