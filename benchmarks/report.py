"""What every benchmark does with its figures: a Markdown report, printed as it is written.

A benchmark's ``run(args, out)`` calls ``out(line)`` for each line of Markdown; :func:`main`
parses the command line, runs it, and writes the report to
``--markdown FILE`` for ``run_all.py``, which puts it in RESULTS.md and draws the module's
``CHARTS`` from its tables.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["Report", "main"]


class Report:
    """The lines of a benchmark's Markdown, each printed as it is added."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.lines: list[str] = []
        self._say = say or (lambda line: print(line, flush=True))

    def __call__(self, line: str = "") -> None:
        self.lines.append(line)
        self._say(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def main(parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace, Report], int | None],
         argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (with ``--markdown``), run the benchmark, write its report; its exit code."""
    parser.add_argument("--markdown", type=Path, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    report = Report()
    code = run(args, report) or 0
    if args.markdown is not None:
        args.markdown.write_text(report.text(), encoding="utf-8")
    return code
