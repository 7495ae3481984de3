"""A loop of one page read, to profile: ``Model.query(key, limit=...)`` (or ``aquery``) over
``RandomShards(8)`` (or a plain PynamoDB ``Model``) on DynamoDB Local, for ``--seconds``.

Prints the pages read and the client CPU per page (``time.process_time``, every thread). Run it
under py-spy to see where a page's CPU goes (``--gil``: only the thread holding the GIL is
sampled, so the samples are client CPU)::

    py-spy record --gil -r 400 -o page.svg -- python benchmarks/profile_page.py --seconds 20
    py-spy record --gil -r 400 -o apage.svg -- python benchmarks/profile_page.py --async --seconds 20
    python benchmarks/profile_page.py --plain --seconds 10   # the plain page, for comparison

``--long-read index`` (or ``table``) iterates bench_page's long read instead, 30,000 items of
one key merged over 16 shards (``--plain``: the plain PynamoDB query of one partition)::

    py-spy record --gil -r 200 -o long.svg -- python benchmarks/profile_page.py --long-read index --seconds 25

``--shards 16 --limit 100`` reads the wide page of bench_page (``RandomShards(16)``; 64 too).
When it starts its own DynamoDB Local (not with ``DYNAMODB_LOCAL_ENDPOINT`` set) it also prints
the server's CPU a page, from ``/proc/<pid>/stat`` of its Java process (Linux): on this machine
the server shares the client's cores, so its work on the extra queries is part of a page's
wall time here, and would not be against DynamoDB.

PROFILES.md holds what such profiles showed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from typing import Any

import bench_page as page

from pynamodb_sharding.testing import bound_models, running_dynamodb_local


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to read pages")
    parser.add_argument("--limit", type=int, default=5, help="items a page")
    parser.add_argument("--shards", type=int, choices=(8, 16, 64), default=8, help="shards of the key read")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--async", dest="use_async", action="store_true", help="aquery on an event loop")
    which.add_argument("--plain", action="store_true", help="a plain PynamoDB Model's page")
    parser.add_argument("--per-item", action="store_true",
                        help="also print the median time each next() (or __anext__) of a page took, and its end")
    parser.add_argument("--long-read", choices=("table", "index"),
                        help="instead of pages: iterate --items items of one key, merged over 16 shards "
                             "(bench_page's long read of a table or of a sharded index; --plain: PynamoDB's)")
    parser.add_argument("--items", type=int, default=30_000, help="items of --long-read")
    args = parser.parse_args(argv)
    if args.long_read is not None:
        return _long_reads(args)
    sharded = page.PAGE_MODELS[("RandomShards(8)", False)] if args.shards == 8 else page.WIDE_MODELS[args.shards]
    model: Any = page.PlainFeed if args.plain else sharded
    with running_dynamodb_local() as server, bound_models(server, page.PlainFeed, sharded):
        page.write(model, page.KEY, 600)
        loop = asyncio.new_event_loop()

        async def one() -> int:
            return len([item async for item in sharded.aquery(page.KEY, limit=args.limit)])

        def read() -> int:
            if args.use_async:
                return loop.run_until_complete(one())
            return len(list(model.query(page.KEY, limit=args.limit)))

        for _ in range(50):  # connections, endpoints and templates learned
            read()
        server_cpu = _cpu_seconds(server.pid)
        pages, cpu, started = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            assert read() == args.limit
            pages += 1
        cpu = time.process_time() - cpu
        server_after = _cpu_seconds(server.pid)
        steps = _per_item(model, args.limit, loop if args.use_async else None) if args.per_item else None
        loop.close()
    kind = "plain" if args.plain else "aquery" if args.use_async else "query"
    per_page = cpu / pages * 1000
    shards = "" if args.plain else f" over {args.shards} shards"
    print(f"{kind}: {pages} pages of {args.limit}{shards} in {args.seconds:g} s, "
          f"{per_page:.2f} ms of client CPU a page")
    if server_cpu is not None and server_after is not None:
        print(f"DynamoDB Local: {(server_after - server_cpu) / pages * 1000:.2f} ms of server CPU a page")
    if steps is not None:
        *items, end = steps
        print("per item (median ms): " + " ".join(f"{step:.3f}" for step in items) + f", end {end:.3f}")
    return 0


def _long_reads(args: argparse.Namespace) -> int:
    """Iterate ``args.items`` items of one key again and again for ``args.seconds``."""
    index = args.long_read == "index"
    model: Any = (page.PlainIndexedFeed if index else page.PlainFeed) if args.plain else (
        page.IndexedFeed if index else page.LONG)
    with running_dynamodb_local() as server, bound_models(server, model):
        page.write(model, "/long", args.items, day="long")
        query = (lambda: model.by_day.query("long")) if index else (lambda: model.query("/long"))
        reads, cpu, started = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            assert sum(1 for _item in query()) == args.items
            reads += 1
        cpu = time.process_time() - cpu
    kind = ("plain " if args.plain else "merged ") + ("index query" if index else "query")
    print(f"{kind}: {reads} reads of {args.items} items in {args.seconds:g} s, "
          f"{cpu / reads * 1000:.0f} ms of client CPU a read")
    return 0


def _per_item(model: Any, limit: int, loop: asyncio.AbstractEventLoop | None, pages: int = 200) -> list[float]:
    """The median wall time of each ``next()`` of a page (``__anext__`` on ``loop``), the
    first one's requests included, and of the call that ends it."""
    runs: list[list[float]] = []
    for _ in range(pages):
        if loop is None:
            result = iter(model.query(page.KEY, limit=limit))
            marks = [time.perf_counter()]
            for _item in result:
                marks.append(time.perf_counter())
            marks.append(time.perf_counter())
        else:
            marks = loop.run_until_complete(_amarks(model, limit))
        runs.append([(after - before) * 1000 for before, after in itertools.pairwise(marks)])
    return [statistics.median(run[step] for run in runs) for step in range(min(len(run) for run in runs))]


async def _amarks(model: Any, limit: int) -> list[float]:
    result = model.aquery(page.KEY, limit=limit)
    marks = [time.perf_counter()]
    async for _item in result:
        marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    return marks


def _cpu_seconds(pid: int | None) -> float | None:
    """User and system CPU seconds of process ``pid`` so far (Linux), ``None`` when unknown."""
    if pid is None:
        return None
    try:
        return page.cpu_seconds(pid)
    except OSError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
