"""``manage.py pynamodb_sharding ...``: the ``pynamodb-sharding`` command, inside a set-up Django.

Everything after the command name goes to the library's command line unchanged, e.g.
``manage.py pynamodb_sharding tables create audit.models:AuditLog``. Django's apps are loaded
first, so a ``module:Class`` argument naming a models module that also defines ORM models
imports instead of failing with ``AppRegistryNotReady``.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type hints
    help = "Run the pynamodb-sharding command line (tables, status, migrate, local) inside Django."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, help="the pynamodb-sharding command and its arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        # Django has set itself up (django.setup()) before calling this: hand the rest over,
        # and let the command line's exit code be manage.py's.
        from pynamodb_sharding._cli import cli

        cli.main(args=list(argv[2:]), prog_name=f"{argv[0]} {argv[1]}")

    def handle(self, *args: Any, **options: Any) -> None:
        """From ``call_command("pynamodb_sharding", ...)``: a failure raises ``CommandError``."""
        from pynamodb_sharding._cli import cli

        try:
            cli.main(args=list(args), prog_name="manage.py pynamodb_sharding")
        except SystemExit as done:
            if done.code not in (0, None):
                msg = f"pynamodb-sharding {' '.join(args)} exited with {done.code}"
                raise CommandError(msg) from None
