"""Benchmark: the size of a merged query's cursor, as a JSON dict and as a page token.

For 4, 16 and 64 shards, with numeric sort keys (10-digit Unix timestamps) and with string
sort keys (ISO 8601 timestamps with microseconds), prints the length of:

* the cursor dict (``last_evaluated_key``) as compact JSON, and URL-quoted (what a ``?page=``
  link of it would hold);
* the page token (``next_page_token``), unsigned and signed with ``cursor_secret``;

for a table query (the position: the sort key of the last item returned and that item's
shard) and for an index query whose page ends on a sort key three items share (their table
keys). Before the cursor was a position in the merged order, it held every shard's position
(the "per shard" rows: what releases up to 0.2.0 wrote, read still).

The cursors are made by the library's own codecs (:func:`~pynamodb_sharding._cursor.encode_cursor`,
:class:`~pynamodb_sharding._cursor.TokenCodec`) from the state a merged query of the audit log
of ``/shared/firetvGen2.txt`` has after a page. Sizes do not depend on the server, so none is
started. Target: a 16-shard token with numeric sort keys under 400 characters.

Run::

    python benchmarks/bench_cursor.py --markdown out.md
"""

from __future__ import annotations

import argparse
import json
import urllib.parse

from pynamodb_sharding._cursor import CursorScope, CursorState, MergePosition, Tie, TokenCodec, encode_cursor

import report
from charts import Chart, Lines, Series, Target
from report import Report

KEY = "/shared/firetvGen2.txt"
SCOPE = CursorScope("AuditLog", "audit_log", {"S": KEY}, None, False)
KEY_NAMES = ("file_path", "accessed_at")
TARGET = 400


INDEX_SCOPE = CursorScope("AuditLog", "audit_log", {"S": "20160226"}, "by_day", False)
INDEX_NAMES = ("day", "accessed_at", "file_path")


def sort_key(shard: int, numeric: bool) -> dict[str, str]:
    second = 1_456_369_200 + shard * 37
    return {"N": str(second)} if numeric else {"S": f"2016-02-26T{shard % 24:02d}:{shard % 60:02d}:07.{shard:06d}Z"}


def per_shard(shards: int, numeric: bool) -> CursorState:
    """The cursor of releases up to 0.2.0: every shard positioned on its last item."""
    return CursorState(positions={shard: {"file_path": {"S": f"{KEY}_{shard}"}, "accessed_at": sort_key(shard, numeric)}
                                  for shard in range(1, shards + 1)})


def position(shards: int, numeric: bool) -> CursorState:
    """A table query's cursor: after the last item returned (in shard ``shards // 2``)."""
    shard = shards // 2
    value = sort_key(shard, numeric)
    return CursorState(after=MergePosition(value, (Tie({"file_path": {"S": f"{KEY}_{shard}"}, "accessed_at": value},
                                                       copy=False),)))


def index_position(numeric: bool) -> CursorState:
    """An index query's cursor whose page ends on a sort key three items share."""
    value = sort_key(7, numeric)
    return CursorState(after=MergePosition(value, tuple(Tie({"file_path": {"S": f"/shared/file-{n}.txt_{n % 8 + 1}"},
                                                             "accessed_at": value}, copy=False) for n in range(3))))


def sizes(scope: CursorScope, names: tuple[str, ...], hash_name: str, current: CursorState,
          tie_shard: bool) -> tuple[int, int, int, int]:
    cursor = json.dumps(encode_cursor(scope, current), separators=(",", ":"))
    extra: dict[str, object] = {"sort_name": "accessed_at", "tie_names": ("file_path", "accessed_at")}
    if tie_shard:
        extra["tie_shard"] = lambda value: int(value["S"].rpartition("_")[2])
    unsigned = TokenCodec(scope, names, hash_name, **extra).encode(current)  # type: ignore[arg-type]
    signed = TokenCodec(scope, names, hash_name, (b"a secret",), **extra).encode(current)  # type: ignore[arg-type]
    return len(cursor), len(urllib.parse.quote(cursor, safe="")), len(unsigned), len(signed)


def rows() -> list[list[str]]:
    table = []
    for numeric in (True, False):
        for shards in (4, 16, 64):
            for query, current, tie_shard in (("per shard (0.2.0)", per_shard(shards, numeric), False),
                                              ("table query", position(shards, numeric), True),
                                              ("index query, 3 ties", index_position(numeric), False)):
                if query.startswith("index"):
                    found = sizes(INDEX_SCOPE, INDEX_NAMES, "day", current, tie_shard)
                else:
                    found = sizes(SCOPE, KEY_NAMES, "file_path", current, tie_shard)
                table.append(["number" if numeric else "string", str(shards), query, *map(str, found),
                              f"{found[0] / found[3]:.1f}"])
    return table


def run(args: argparse.Namespace, out: Report) -> int:
    header = ["sort key", "shards", "cursor", "cursor JSON (chars)", "cursor URL-quoted (chars)",
              "token (chars)", "signed token (chars)", "JSON / token"]
    table = rows()
    out("### Cursor size: JSON dict vs page token")
    out()
    out("| " + " | ".join(header) + " |")
    out("|" + "|".join("---" if n == 0 else "---:" for n in range(len(header))) + "|")
    for row in table:
        out("| " + " | ".join(row) + " |")
    out()
    sixteen = next(int(row[6]) for row in table if row[0] == "number" and row[1] == "16" and row[2] == "table query")
    verdict = "met" if sixteen < TARGET else "MISSED"
    out(f"Target: a 16-shard token with numeric sort keys under {TARGET} characters: {sixteen} ({verdict}).")
    return 0 if sixteen < TARGET else 1


#: The lengths over the shard count, on log axes (63 to 12,850 characters), per sort-key type.
CHARTS = [
    Chart(
        facets=("cursor", "sort key"),
        facet_titles={"sort key": "{} sort keys", "cursor": "{}"},
        panels=(Lines(
            x="shards", x_label="shards", x_scale="log2", y_scale="log", y_label="length (characters)",
            series=(
                Series("cursor dict, URL-quoted", "cursor URL-quoted (chars)"),
                Series("cursor dict as JSON", "cursor JSON (chars)"),
                Series("page token", "token (chars)"),
                Series("signed page token", "signed token (chars)"),
            ),
            targets=(Target(f"target: a 16-shard token < {TARGET}",
                            lambda rows: float(TARGET) if rows[0]["sort key"] == "number"
                            and rows[0]["cursor"] == "table query" else None),),
        ),),
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    return report.main(parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
