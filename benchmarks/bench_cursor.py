"""Benchmark: the size of a merged query's cursor, as a JSON dict and as a page token.

For 4, 16 and 64 shards, with numeric sort keys (10-digit Unix timestamps) and with string
sort keys (ISO 8601 timestamps with microseconds), prints the length of:

* the cursor dict (``last_evaluated_key``) as compact JSON, and URL-quoted (what a ``?page=``
  link of it would hold);
* the page token (``next_page_token``), unsigned and signed with ``cursor_secret``.

The cursors are made by the library's own codecs (:func:`~pynamodb_sharding._cursor.encode_cursor`,
:class:`~pynamodb_sharding._cursor.TokenCodec`) from the state a merged query of the audit log
of ``/shared/firetvGen2.txt`` has after a page: every shard positioned on its last item. Sizes
do not depend on the server, so none is started. Target: a 16-shard token with numeric sort
keys under 400 characters.

Run::

    python benchmarks/bench_cursor.py --markdown out.md
"""

from __future__ import annotations

import argparse
import json
import urllib.parse

from pynamodb_sharding._cursor import CursorScope, CursorState, TokenCodec, encode_cursor

import report
from charts import Chart, Lines, Series, Target
from report import Report

KEY = "/shared/firetvGen2.txt"
SCOPE = CursorScope("AuditLog", "audit_log", {"S": KEY}, None, False)
KEY_NAMES = ("file_path", "accessed_at")
TARGET = 400


def state(shards: int, numeric: bool) -> CursorState:
    positions = {}
    for shard in range(1, shards + 1):
        second = 1_456_369_200 + shard * 37
        sort = {"N": str(second)} if numeric else {"S": f"2016-02-26T{shard % 24:02d}:{shard % 60:02d}:07.{shard:06d}Z"}
        positions[shard] = {"file_path": {"S": f"{KEY}_{shard}"}, "accessed_at": sort}
    return CursorState(positions=positions)


def rows() -> list[list[str]]:
    table = []
    for numeric in (True, False):
        for shards in (4, 16, 64):
            current = state(shards, numeric)
            cursor = json.dumps(encode_cursor(SCOPE, current), separators=(",", ":"))
            unsigned = TokenCodec(SCOPE, KEY_NAMES, "file_path").encode(current)
            signed = TokenCodec(SCOPE, KEY_NAMES, "file_path", (b"a secret",)).encode(current)
            table.append([
                "number" if numeric else "string", str(shards), str(len(cursor)),
                str(len(urllib.parse.quote(cursor, safe=""))), str(len(unsigned)), str(len(signed)),
                f"{len(cursor) / len(signed):.1f}",
            ])
    return table


def run(args: argparse.Namespace, out: Report) -> int:
    header = ["sort key", "shards", "cursor JSON (chars)", "cursor URL-quoted (chars)",
              "token (chars)", "signed token (chars)", "JSON / token"]
    table = rows()
    out("### Cursor size: JSON dict vs page token")
    out()
    out("| " + " | ".join(header) + " |")
    out("|" + "|".join("---" if n == 0 else "---:" for n in range(len(header))) + "|")
    for row in table:
        out("| " + " | ".join(row) + " |")
    out()
    sixteen = next(int(row[5]) for row in table if row[0] == "number" and row[1] == "16")
    verdict = "met" if sixteen < TARGET else "MISSED"
    out(f"Target: a 16-shard token with numeric sort keys under {TARGET} characters: {sixteen} ({verdict}).")
    return 0 if sixteen < TARGET else 1


#: The lengths over the shard count, on log axes (63 to 12,850 characters), per sort-key type.
CHARTS = [
    Chart(
        facets=(None, "sort key"),
        facet_titles={"sort key": "{} sort keys"},
        panels=(Lines(
            x="shards", x_label="shards", x_scale="log2", y_scale="log", y_label="length (characters)",
            series=(
                Series("cursor dict, URL-quoted", "cursor URL-quoted (chars)"),
                Series("cursor dict as JSON", "cursor JSON (chars)"),
                Series("page token", "token (chars)"),
                Series("signed page token", "signed token (chars)"),
            ),
            targets=(Target(f"target: a 16-shard token < {TARGET}",
                            lambda rows: float(TARGET) if rows[0]["sort key"] == "number" else None),),
        ),),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
