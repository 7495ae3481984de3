"""Benchmark: the size of a merged query's cursor, as a JSON dict and as a page token.

For 4, 16 and 64 shards, with numeric sort keys (10-digit Unix timestamps) and with string
sort keys (ISO 8601 timestamps with microseconds), prints the length of:

* the cursor dict (``last_evaluated_key``) as compact JSON, and URL-quoted (what a ``?page=``
  link of it would hold);
* the page token (``next_page_token``), unsigned and signed with ``cursor_secret``.

The cursors are made by the library's own codecs (:func:`~pynamodb_sharding.cursor.encode_cursor`,
:class:`~pynamodb_sharding.cursor.TokenCodec`) from the state a merged query of the audit log
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
from pathlib import Path

from pynamodb_sharding.cursor import CursorScope, CursorState, TokenCodec, encode_cursor

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--markdown", type=Path, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    header = ["sort key", "shards", "cursor JSON (chars)", "cursor URL-quoted (chars)",
              "token (chars)", "signed token (chars)", "JSON / token"]
    table = rows()
    lines = [
        "### Cursor size: JSON dict vs page token",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if n == 0 else "---:" for n in range(len(header))) + "|",
        *("| " + " | ".join(row) + " |" for row in table),
        "",
    ]
    sixteen = next(int(row[5]) for row in table if row[0] == "number" and row[1] == "16")
    verdict = "met" if sixteen < TARGET else "MISSED"
    lines.append(f"Target: a 16-shard token with numeric sort keys under {TARGET} characters: "
                 f"{sixteen} ({verdict}).")
    print("\n".join(lines))
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0 if sixteen < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
