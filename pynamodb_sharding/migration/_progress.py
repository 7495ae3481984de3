"""Counts, the final report, and how a running job shows its progress.

The engine adds a :class:`Tally` per page to a :class:`ProgressSink`; the sinks here print a
live ``rich`` bar (items, items/s, ETA, segments done), JSON lines for schedulers (``--json``),
or nothing. :class:`MigrationReport` is what a job returns and the command prints at the end.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, Protocol

import attrs

__all__ = [
    "JsonProgress",
    "MigrationReport",
    "NullProgress",
    "ProgressSink",
    "RichProgress",
    "Tally",
    "progress_for",
]

#: How many keys a report lists by name (conflicts, undecodable keys); the rest are counted.
KEYS_LISTED = 20


@attrs.define
class Tally:
    """Running counts of one page, segment or job."""

    read: int = 0
    written: int = 0
    moved: int = 0
    skipped: int = 0
    #: Items left where they are for now: their key's count changed less than the metadata
    #: cache TTL ago, so some writer may still write under the old count (a later run moves them).
    waiting: int = 0
    conflicts: int = 0
    undecodable: int = 0
    #: Write units consumed, as DynamoDB reported them (``ReturnConsumedCapacity``): the puts of
    #: a copy, the transactions of moves (at least what DynamoDB bills them: 2 units a KB for
    #: each put, delete and check; DynamoDB Local reports less), the deletes of shadowed legacy
    #: copies.
    units: float = 0.0
    #: Read units of the reads a move makes besides the scan (an item read again after it
    #: changed, a legacy item's bare key and shards after a failed attempt), as reported.
    read_units: float = 0.0
    #: Keys of items not moved because the target key was taken (listed up to KEYS_LISTED).
    conflict_keys: list[str] = attrs.field(factory=list)
    #: Stored hash keys the source model cannot decode (listed up to KEYS_LISTED).
    undecodable_keys: list[str] = attrs.field(factory=list)

    def add(self, other: Tally) -> None:
        self.read += other.read
        self.written += other.written
        self.moved += other.moved
        self.skipped += other.skipped
        self.waiting += other.waiting
        self.conflicts += other.conflicts
        self.undecodable += other.undecodable
        self.units += other.units
        self.read_units += other.read_units
        self.conflict_keys = (self.conflict_keys + other.conflict_keys)[:KEYS_LISTED]
        self.undecodable_keys = (self.undecodable_keys + other.undecodable_keys)[:KEYS_LISTED]

    def counts(self) -> dict[str, float]:
        """The numeric counts, as a checkpoint stores them."""
        return {"read": self.read, "written": self.written, "moved": self.moved, "skipped": self.skipped,
                "waiting": self.waiting, "conflicts": self.conflicts, "undecodable": self.undecodable,
                "units": self.units, "read_units": self.read_units}


@attrs.define
class MigrationReport:
    """What a job did in this run.

    ``read``: items scanned; ``written``: items copied (copy); ``moved``: items moved to
    another shard (reshard, compact: one delete each); ``skipped``: items already in place;
    ``waiting``: items left for a later run (their key's count changed less than the metadata
    cache TTL ago);
    ``conflicts``: items left where they were because their target key holds another item;
    ``undecodable``: stored keys the source model cannot decode (left alone).
    """

    job: str
    tally: Tally
    duration: float
    segments_done: int
    total_segments: int
    dry_run: bool = False
    #: Lines about steps after the scan (history trimmed, keys left for a re-run).
    notes: list[str] = attrs.field(factory=list)

    @property
    def complete(self) -> bool:
        """Every segment of the job is done."""
        return self.segments_done == self.total_segments

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": "report",
            "job": self.job,
            **self.tally.counts(),
            "conflict_keys": self.tally.conflict_keys,
            "undecodable_keys": self.tally.undecodable_keys,
            "duration_s": round(self.duration, 3),
            "segments_done": self.segments_done,
            "total_segments": self.total_segments,
            "complete": self.complete,
            "notes": self.notes,
        }

    def lines(self) -> Iterator[str]:
        tally = self.tally
        yield f"job:        {self.job}"
        yield f"segments:   {self.segments_done}/{self.total_segments} done"
        yield (f"items:      read {tally.read}, written {tally.written}, moved {tally.moved}, "
               f"skipped {tally.skipped}, conflicts {tally.conflicts}, undecodable {tally.undecodable}"
               + (f", waiting {tally.waiting}" if tally.waiting else ""))
        reads = f" (and {tally.read_units:g} read units by moves' own reads)" if tally.read_units else ""
        yield f"units:      {tally.units:g} write units consumed{reads}"
        rate = tally.read / self.duration if self.duration > 0 else 0.0
        yield f"duration:   {self.duration:.1f} s ({rate:,.0f} items/s)"
        if tally.conflict_keys:
            yield f"conflicts:  {', '.join(tally.conflict_keys)}"
        if tally.undecodable_keys:
            yield f"undecodable: {', '.join(tally.undecodable_keys)}"
        yield from self.notes


class ProgressSink(Protocol):
    """Where a running job reports its progress."""

    def start(self, total_segments: int, segments_done: int, estimated_items: int | None) -> None: ...

    def advance(self, tally: Tally) -> None: ...

    def segment_done(self) -> None: ...

    def finish(self, report: MigrationReport) -> None: ...


class NullProgress:
    """Reports nothing."""

    def start(self, total_segments: int, segments_done: int, estimated_items: int | None) -> None:
        pass

    def advance(self, tally: Tally) -> None:
        pass

    def segment_done(self) -> None:
        pass

    def finish(self, report: MigrationReport) -> None:
        pass


class _Rates:
    """Items so far, items/s and an ETA from the estimated total."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started = clock()
        self.items = 0
        self.segments_done = 0
        self.total_segments = 0
        self.estimated: int | None = None

    def snapshot(self) -> dict[str, Any]:
        elapsed = max(self.clock() - self.started, 1e-9)
        rate = self.items / elapsed
        eta = None
        if self.estimated is not None and rate > 0:
            eta = round(max(self.estimated - self.items, 0) / rate, 1)
        return {"event": "progress", "items": self.items, "items_per_s": round(rate, 1), "eta_s": eta,
                "segments_done": self.segments_done, "total_segments": self.total_segments}


class JsonProgress:
    """One JSON object per line: ``progress`` events (at most every ``interval`` seconds and
    at each finished segment), then the ``report``."""

    def __init__(self, stream: IO[str] | None = None, *, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.interval = interval
        self.rates = _Rates(clock)
        self._last = -float("inf")

    def _emit(self, payload: dict[str, Any]) -> None:
        self.stream.write(json.dumps(payload) + "\n")
        self.stream.flush()

    def start(self, total_segments: int, segments_done: int, estimated_items: int | None) -> None:
        self.rates.total_segments = total_segments
        self.rates.segments_done = segments_done
        self.rates.estimated = estimated_items

    def advance(self, tally: Tally) -> None:
        self.rates.items += tally.read
        now = self.rates.clock()
        if now - self._last >= self.interval:
            self._last = now
            self._emit(self.rates.snapshot())

    def segment_done(self) -> None:
        self.rates.segments_done += 1
        self._emit(self.rates.snapshot())

    def finish(self, report: MigrationReport) -> None:
        self._emit(report.as_dict())


class RichProgress:
    """A live bar on stderr (or ``console``): items, items/s, ETA and segments done (needs ``rich``)."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} items/s"),
            TimeRemainingColumn(),
            TextColumn("segments {task.fields[segments]}"),
            console=console if console is not None else Console(stderr=True),
            transient=False,
        )
        self.rates = _Rates(time.monotonic)
        self._task: Any = None

    def _fields(self) -> dict[str, Any]:
        snap = self.rates.snapshot()
        return {"rate": f"{snap['items_per_s']:,.0f}",
                "segments": f"{self.rates.segments_done}/{self.rates.total_segments}"}

    def start(self, total_segments: int, segments_done: int, estimated_items: int | None) -> None:
        self.rates.total_segments = total_segments
        self.rates.segments_done = segments_done
        self.rates.estimated = estimated_items
        self._progress.start()
        self._task = self._progress.add_task("items", total=estimated_items, **self._fields())

    def advance(self, tally: Tally) -> None:
        self.rates.items += tally.read
        total = self.rates.estimated
        if total is not None and self.rates.items > total:  # the estimate was low
            total = self.rates.estimated = self.rates.items
        self._progress.update(self._task, completed=self.rates.items, total=total, **self._fields())

    def segment_done(self) -> None:
        self.rates.segments_done += 1
        self._progress.update(self._task, **self._fields())

    def finish(self, report: MigrationReport) -> None:
        self._progress.stop()


def progress_for(*, json_lines: bool, live: bool) -> ProgressSink:
    """The sink a command uses: JSON lines, a live bar when ``rich`` is installed, or nothing."""
    if json_lines:
        return JsonProgress()
    if live:
        try:
            return RichProgress()
        except ModuleNotFoundError:
            return NullProgress()
    return NullProgress()
