"""A loop of one page read, to profile: ``Model.query(key, limit=...)`` (or ``aquery``) over
``RandomShards(8)`` (or a plain PynamoDB ``Model``) on DynamoDB Local, for ``--seconds``.

Prints the pages read and the client CPU per page (``time.process_time``, every thread). Run it
under py-spy to see where a page's CPU goes (``--gil``: only the thread holding the GIL is
sampled, so the samples are client CPU)::

    py-spy record --gil -r 400 -o page.svg -- python benchmarks/profile_page.py --seconds 20
    py-spy record --gil -r 400 -o apage.svg -- python benchmarks/profile_page.py --async --seconds 20
    python benchmarks/profile_page.py --plain --seconds 10   # the plain page, for comparison

PROFILES.md holds what such profiles showed. Starts its own DynamoDB Local unless
``DYNAMODB_LOCAL_ENDPOINT`` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import bench_page as page

from pynamodb_sharding.testing import bound_models, running_dynamodb_local


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to read pages")
    parser.add_argument("--limit", type=int, default=5, help="items a page")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--async", dest="use_async", action="store_true", help="aquery on an event loop")
    which.add_argument("--plain", action="store_true", help="a plain PynamoDB Model's page")
    args = parser.parse_args(argv)
    sharded = page.PAGE_MODELS[("RandomShards(8)", False)]
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
        pages, cpu, started = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            assert read() == args.limit
            pages += 1
        cpu = time.process_time() - cpu
        loop.close()
    kind = "plain" if args.plain else "aquery" if args.use_async else "query"
    per_page = cpu / pages * 1000
    print(f"{kind}: {pages} pages of {args.limit} in {args.seconds:g} s, {per_page:.2f} ms of client CPU a page")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
