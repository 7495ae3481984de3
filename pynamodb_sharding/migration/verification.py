"""Verify: compare two tables (or one table before and after a job) per logical key.

Each table is read with consistent parallel scans; every item is decoded to its logical key
and reduced to a digest: the number of items and an order-independent checksum (the sum,
modulo 2**128, of a SHA-256 of each item in a canonical form with its hash key replaced by
the logical key). Two tables hold the same logical data exactly when every key's digest is the
same, whatever shards the items sit in and whatever order the scans return them in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
from pynamodb.models import Model

from pynamodb_sharding._host import botocore_client
from pynamodb_sharding.exceptions import ShardKeyError
from pynamodb_sharding.migration.jobs import KeyLayout

__all__ = ["KeyDifference", "KeyDigest", "Snapshot", "VerifyReport", "compare", "item_checksum", "snapshot", "verify"]

_MODULUS = 2**128


@attrs.frozen
class KeyDigest:
    """The items of one logical key: how many, and their order-independent checksum."""

    count: int = 0
    checksum: int = 0

    def add(self, checksum: int) -> KeyDigest:
        return KeyDigest(self.count + 1, (self.checksum + checksum) % _MODULUS)


@attrs.frozen
class KeyDifference:
    """A logical key whose items differ between the two sides."""

    key: str
    source_count: int
    target_count: int

    def describe(self) -> str:
        if self.source_count != self.target_count:
            return f"{self.key!r}: {self.source_count} items in the source, {self.target_count} in the target"
        return f"{self.key!r}: {self.source_count} items on both sides, but their contents differ"


@attrs.frozen
class VerifyReport:
    """The result of :func:`verify`: ``ok`` when every logical key matches."""

    source: str
    target: str
    keys: int
    source_items: int
    target_items: int
    differences: tuple[KeyDifference, ...]
    #: Stored hash keys a side's model cannot decode (a difference in itself).
    undecodable: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.differences and not self.undecodable

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": "verify", "ok": self.ok, "source": self.source, "target": self.target, "keys": self.keys,
            "source_items": self.source_items, "target_items": self.target_items,
            "differences": [attrs.asdict(d) for d in self.differences], "undecodable": list(self.undecodable),
        }

    def lines(self) -> Iterator[str]:
        verdict = "identical" if self.ok else f"{len(self.differences) + len(self.undecodable)} differences"
        yield f"verify:     {self.source} -> {self.target}: {verdict}"
        yield f"keys:       {self.keys} logical keys; {self.source_items} items in the source, " \
              f"{self.target_items} in the target"
        for difference in self.differences[:50]:
            yield f"differs:    {difference.describe()}"
        if len(self.differences) > 50:
            yield f"differs:    ... and {len(self.differences) - 50} more keys"
        for stored in self.undecodable[:50]:
            yield f"undecodable: {stored!r} cannot be decoded by its model"


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _canonical(inner) for key, inner in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_canonical(inner) for inner in value]
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value).hex()}
    return value


def _canonical_value(kind: str, inner: Any) -> Any:
    if kind in ("SS", "NS", "BS"):  # sets come back in any order
        return sorted(_canonical(inner), key=json.dumps)
    if kind == "N":
        from pynamodb_sharding.strategies import canonical_number

        return canonical_number(inner)
    if kind == "L":
        return [_canonical_typed(v) for v in inner]
    if kind == "M":
        return {k: _canonical_typed(v) for k, v in sorted(inner.items())}
    return _canonical(inner)


def _canonical_typed(value: Mapping[str, Any]) -> Any:
    (kind, inner), = value.items()
    return {kind: _canonical_value(kind, inner)}


def item_checksum(item: Mapping[str, Any]) -> int:
    """The checksum of one raw item, identical for two items DynamoDB stores identically."""
    canonical = {name: _canonical_typed(value) for name, value in sorted(item.items())}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:16], "big")


def _scan_segment(model: type[Model], segment: int, total: int) -> Iterator[dict[str, Any]]:
    client = botocore_client(model)
    request: dict[str, Any] = {"TableName": model.Meta.table_name, "Segment": segment, "TotalSegments": total,
                               "ConsistentRead": True}
    while True:
        page = client.scan(**request)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _digest_segment(layout: KeyLayout, segment: int, total: int) -> tuple[dict[str, KeyDigest], list[str]]:
    digests: dict[str, KeyDigest] = {}
    undecodable: list[str] = []
    for item in _scan_segment(layout.model, segment, total):
        stored = item[layout.hash_name]["S"]
        try:
            logical, _ = layout.decode(stored)
        except ShardKeyError:
            undecodable.append(stored)
            continue
        checksum = item_checksum({**item, layout.hash_name: {"S": logical}})
        digests[logical] = digests.get(logical, KeyDigest()).add(checksum)
    return digests, undecodable


@attrs.frozen
class Snapshot:
    """The digests of every logical key of one table at one time."""

    name: str
    digests: dict[str, KeyDigest]
    undecodable: tuple[str, ...] = ()

    @property
    def items(self) -> int:
        return sum(digest.count for digest in self.digests.values())


def snapshot(model: type[Model], *, total_segments: int = 4) -> Snapshot:
    """Read ``model``'s table (consistently, ``total_segments`` scans in parallel) into digests."""
    layout = KeyLayout.of(model)
    digests: dict[str, KeyDigest] = {}
    undecodable: list[str] = []
    with ThreadPoolExecutor(max_workers=total_segments) as pool:
        results = pool.map(lambda segment: _digest_segment(layout, segment, total_segments), range(total_segments))
        for segment_digests, segment_undecodable in results:
            for key, digest in segment_digests.items():
                known = digests.get(key, KeyDigest())
                digests[key] = KeyDigest(known.count + digest.count, (known.checksum + digest.checksum) % _MODULUS)
            undecodable.extend(segment_undecodable)
    return Snapshot(name=f"{model.__name__} ({layout.table})", digests=digests, undecodable=tuple(undecodable))


def compare(source: Snapshot, target: Snapshot) -> VerifyReport:
    """Compare two snapshots per logical key."""
    differences = []
    for key in sorted(source.digests.keys() | target.digests.keys()):
        before, after = source.digests.get(key, KeyDigest()), target.digests.get(key, KeyDigest())
        if before != after:
            differences.append(KeyDifference(key, before.count, after.count))
    return VerifyReport(
        source=source.name, target=target.name, keys=len(source.digests.keys() | target.digests.keys()),
        source_items=source.items, target_items=target.items, differences=tuple(differences),
        undecodable=(*source.undecodable, *target.undecodable),
    )


def verify(source: type[Model], target: type[Model], *, total_segments: int = 4) -> VerifyReport:
    """Compare ``source``'s and ``target``'s tables per logical key (count and checksum).

    Either model may be sharded or not; each side decodes its own keys.
    """
    return compare(snapshot(source, total_segments=total_segments), snapshot(target, total_segments=total_segments))
