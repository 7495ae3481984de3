"""What every benchmark does with its figures: a Markdown report, printed as it is written.

A benchmark's ``run(args, out)`` calls ``out(line)`` for each line of Markdown; :func:`main`
parses the command line, runs it, and writes the report to
``--markdown FILE`` for ``run_all.py``, which puts it in RESULTS.md and draws the module's
``CHARTS`` from its tables. The write-rate benchmarks measure with :func:`hammer` and count
with :func:`per_second`.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pynamodb.exceptions import PutError

__all__ = ["Report", "hammer", "main", "per_second"]


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


def hammer(new_item: Callable[[int, int], Any], writers: int, duration: float) -> tuple[list[float], int]:
    """``writers`` threads save ``new_item(writer, seq)`` (``seq`` counting from 1 per writer) for
    ``duration`` seconds; returns the times of the acknowledged saves and the count of failed ones
    (``PutError``: throttled past the retries)."""
    acks: list[float] = []
    failures = [0]
    lock = threading.Lock()
    stop = time.time() + duration

    def writer(index: int) -> None:
        seq = 0
        while time.time() < stop:
            seq += 1
            try:
                new_item(index, seq).save()
            except PutError:
                with lock:
                    failures[0] += 1
                continue
            with lock:
                acks.append(time.time())

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return acks, failures[0]


def per_second(acks: list[float], start: float, seconds: int) -> list[int]:
    """How many of ``acks`` fell in each of the ``seconds`` seconds from ``start``."""
    counts = [0] * seconds
    for at in acks:
        index = int(at - start)
        if 0 <= index < seconds:
            counts[index] += 1
    return counts
