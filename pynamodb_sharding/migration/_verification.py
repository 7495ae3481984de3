"""Verify: compare two tables (or one table before and after a job) per logical key.

Each table is read with consistent parallel scans; every item is decoded to what a user reads
and reduced to a digest: the number of items and an order-independent checksum (the sum,
modulo 2**128, of a SHA-256 of each item in a canonical form with its hash key replaced by
the logical key and each sharded index's value by its logical value, shard attributes left
out). Two tables hold the same logical data exactly when every key's digest is the same,
whatever shards the items sit in and whatever order the scans return them in.

Sharded global secondary indexes are compared too, as their queries read them: per index and
logical index value, the digest of the items a query of that value finds (an entry stored
without its index shard, which no query of the index finds, is not counted, and an entry the
model cannot decode is reported as undecodable).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
from pynamodb.models import Model

from pynamodb_sharding._exceptions import ShardKeyError
from pynamodb_sharding._host import botocore_client, index_hash_attribute, index_range_attribute, indexes
from pynamodb_sharding._indexes import ShardedIndex, sharded_indexes_of
from pynamodb_sharding._keys import LEGACY_SHARD
from pynamodb_sharding._point_reads import without_stale_bare_copies
from pynamodb_sharding.migration._jobs import KeyLayout

__all__ = [
    "IndexDifference",
    "KeyDifference",
    "KeyDigest",
    "Snapshot",
    "VerifyReport",
    "compare",
    "item_checksum",
    "snapshot",
    "verify",
]

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
class IndexDifference:
    """A value of a sharded global index whose query would find other items on the two sides.

    .. versionadded:: 0.1.0
    """

    index: str
    value: str
    source_count: int
    target_count: int

    def describe(self) -> str:
        counts = (f"{self.source_count} items in the source, {self.target_count} in the target"
                  if self.source_count != self.target_count
                  else f"{self.source_count} items on both sides, but their contents differ")
        return f"index {self.index!r}, value {self.value!r}: {counts}"


@attrs.frozen
class VerifyReport:
    """The result of :func:`verify`: ``ok`` when every logical key matches."""

    source: str
    target: str
    keys: int
    source_items: int
    target_items: int
    differences: tuple[KeyDifference, ...]
    #: Stored hash keys (or index values) a side's model cannot decode (a difference in itself).
    undecodable: tuple[str, ...] = ()
    #: Sharded index values whose queries would find other items (see :class:`IndexDifference`).
    index_differences: tuple[IndexDifference, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.differences and not self.undecodable and not self.index_differences

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": "verify", "ok": self.ok, "source": self.source, "target": self.target, "keys": self.keys,
            "source_items": self.source_items, "target_items": self.target_items,
            "differences": [attrs.asdict(d) for d in self.differences], "undecodable": list(self.undecodable),
            "index_differences": [attrs.asdict(d) for d in self.index_differences],
        }

    def lines(self) -> Iterator[str]:
        found = len(self.differences) + len(self.undecodable) + len(self.index_differences)
        verdict = "identical" if self.ok else f"{found} differences"
        yield f"verify:     {self.source} -> {self.target}: {verdict}"
        yield f"keys:       {self.keys} logical keys; {self.source_items} items in the source, " \
              f"{self.target_items} in the target"
        for difference in self.differences[:50]:
            yield f"differs:    {difference.describe()}"
        if len(self.differences) > 50:
            yield f"differs:    ... and {len(self.differences) - 50} more keys"
        for stored in self.undecodable[:50]:
            yield f"undecodable: {stored!r} cannot be decoded by its model"
        for index_difference in self.index_differences[:50]:
            yield f"index:      {index_difference.describe()}"
        if len(self.index_differences) > 50:
            yield f"index:      ... and {len(self.index_differences) - 50} more index values"


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
        from pynamodb_sharding._strategies import canonical_number

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


@attrs.frozen
class _IndexView:
    """How one side's model reads one global index: which items a query of a value finds."""

    name: str
    #: The stored names of the index's hash key and range key (an entry needs both set).
    attr_name: str
    range_name: str | None
    #: The model's sharded index of that name, ``None`` when the model reads it as a plain index
    #: (or only has the attribute).
    sharded: ShardedIndex | None

    def entry(self, item: Mapping[str, Any]) -> tuple[str | None, bool]:
        """``(logical value, decodable)`` of ``item``'s entry; ``None`` when no query of the
        index finds the item."""
        stored = item.get(self.attr_name)
        text = stored.get("S") if isinstance(stored, Mapping) else None
        if text is None or (self.range_name is not None and self.range_name not in item):
            return None, True
        index = self.sharded
        if index is None:
            return text, True
        if index.shard_attr_name is not None:  # found only under its shard attribute
            number = item.get(index.shard_attr_name)
            shard = number.get("N") if isinstance(number, Mapping) else None
            return (text if isinstance(shard, str) and shard.isdecimal() else None), True
        try:
            logical, shard_number = index.manager.codec.decode(text)
        except ShardKeyError:
            return None, False
        if shard_number == LEGACY_SHARD and not index.manager.legacy_unsharded:
            return None, True
        return logical, True


def _index_views(model: type[Model], names: Mapping[str, tuple[str, str | None]]) -> tuple[_IndexView, ...]:
    """The views of the indexes ``names`` (index name -> the stored names of its keys) as
    ``model`` reads them."""
    sharded: dict[str, ShardedIndex] = sharded_indexes_of(model)
    declared = indexes(model)
    views = []
    for name, (attr_name, range_name) in sorted(names.items()):
        if name in declared:  # the model's own declaration of an index of that name
            attr_name = index_hash_attribute(declared[name]).attr_name
            sort = index_range_attribute(declared[name])
            range_name = sort.attr_name if sort is not None else None
        views.append(_IndexView(name, attr_name, range_name, sharded.get(name)))
    return tuple(views)


def _sharded_index_keys(*models: type[Model]) -> dict[str, tuple[str, str | None]]:
    """Every sharded global index of ``models``: name -> stored names of its hash and range keys."""
    found: dict[str, tuple[str, str | None]] = {}
    for model in models:
        for name in sharded_indexes_of(model):
            sort = index_range_attribute(indexes(model)[name])
            found.setdefault(name, (index_hash_attribute(indexes(model)[name]).attr_name,
                                    sort.attr_name if sort is not None else None))
    return found


def _add(digests: dict[str, KeyDigest], key: str, checksum: int) -> None:
    digests[key] = digests.get(key, KeyDigest()).add(checksum)


def _digest_segment(
    layout: KeyLayout, views: tuple[_IndexView, ...], segment: int, total: int,
) -> tuple[dict[str, KeyDigest], dict[str, dict[str, KeyDigest]], list[str], list[dict[str, Any]]]:
    """The digests of one scan segment, and (last) the bare legacy items of a ``legacy_unsharded``
    model, left out: whether a sharded copy shadows one is known only once every segment is read."""
    digests: dict[str, KeyDigest] = {}
    index_digests: dict[str, dict[str, KeyDigest]] = {view.name: {} for view in views}
    undecodable: list[str] = []
    bare: list[dict[str, Any]] = []
    legacy = layout.manager is not None and layout.manager.legacy_unsharded
    for item in _scan_segment(layout.model, segment, total):
        stored = item[layout.hash_name]["S"]
        try:
            logical, shard = layout.decode(stored)
        except ShardKeyError:
            undecodable.append(stored)
            continue
        if legacy and shard is None:  # decode_stored names a bare key's shard None
            bare.append(item)
            continue
        _digest_item(layout, views, item, logical, digests, index_digests, undecodable)
    return digests, index_digests, undecodable, bare


def _digest_item(layout: KeyLayout, views: tuple[_IndexView, ...], item: Mapping[str, Any], logical: str,
                 digests: dict[str, KeyDigest], index_digests: dict[str, dict[str, KeyDigest]],
                 undecodable: list[str]) -> None:
    stored = item[layout.hash_name]["S"]
    checksum = item_checksum({**layout.logical_index_entries(item), layout.hash_name: {"S": logical}})
    _add(digests, logical, checksum)
    for view in views:
        value, decodable = view.entry(item)
        if not decodable:  # every read of the item fails on it
            undecodable.append(f"{stored} ({view.attr_name}={item[view.attr_name]['S']!r}, index {view.name!r})")
        elif value is not None:
            _add(index_digests[view.name], value, checksum)


def _merged(into: dict[str, KeyDigest], more: Mapping[str, KeyDigest]) -> None:
    for key, digest in more.items():
        known = into.get(key, KeyDigest())
        into[key] = KeyDigest(known.count + digest.count, (known.checksum + digest.checksum) % _MODULUS)


@attrs.frozen
class Snapshot:
    """The digests of every logical key of one table at one time, and of every value of its
    sharded global indexes (index name -> logical value -> digest of the items a query finds)."""

    name: str
    digests: dict[str, KeyDigest]
    undecodable: tuple[str, ...] = ()
    index_digests: dict[str, dict[str, KeyDigest]] = attrs.field(factory=dict)

    @property
    def items(self) -> int:
        return sum(digest.count for digest in self.digests.values())


def snapshot(model: type[Model], *, total_segments: int = 4,
             index_keys: Mapping[str, tuple[str, str | None]] | None = None) -> Snapshot:
    """Read ``model``'s table (consistently, ``total_segments`` scans in parallel) into digests.

    ``index_keys`` (index name -> stored names of its hash and range keys) names the global
    indexes whose queries are digested too; default the model's sharded indexes.
    """
    layout = KeyLayout.of(model)
    views = _index_views(model, _sharded_index_keys(model) if index_keys is None else index_keys)
    digests: dict[str, KeyDigest] = {}
    index_digests: dict[str, dict[str, KeyDigest]] = {view.name: {} for view in views}
    undecodable: list[str] = []
    with ThreadPoolExecutor(max_workers=total_segments) as pool:
        results = pool.map(lambda segment: _digest_segment(layout, views, segment, total_segments),
                           range(total_segments))
        bare: list[dict[str, Any]] = []
        for segment_digests, segment_index_digests, segment_undecodable, segment_bare in results:
            _merged(digests, segment_digests)
            for name, values in segment_index_digests.items():
                _merged(index_digests[name], values)
            undecodable.extend(segment_undecodable)
            bare.extend(segment_bare)
    # A bare copy that a sharded copy shadows (a batch or transactional put of an item read from
    # its bare key left it) is not an item: reads return the sharded one. Looked up in the key's
    # shards, as reads look it up.
    for item in without_stale_bare_copies(model, bare, consistent_read=True) if bare else ():
        logical, _ = layout.decode(item[layout.hash_name]["S"])
        _digest_item(layout, views, item, logical, digests, index_digests, undecodable)
    return Snapshot(name=f"{model.__name__} ({layout.table})", digests=digests, undecodable=tuple(undecodable),
                    index_digests=index_digests)


def compare(source: Snapshot, target: Snapshot) -> VerifyReport:
    """Compare two snapshots per logical key, and per value of each index either one digested."""
    differences = []
    for key in sorted(source.digests.keys() | target.digests.keys()):
        before, after = source.digests.get(key, KeyDigest()), target.digests.get(key, KeyDigest())
        if before != after:
            differences.append(KeyDifference(key, before.count, after.count))
    index_differences = []
    for name in sorted(source.index_digests.keys() | target.index_digests.keys()):
        old, new = source.index_digests.get(name, {}), target.index_digests.get(name, {})
        for value in sorted(old.keys() | new.keys()):
            before, after = old.get(value, KeyDigest()), new.get(value, KeyDigest())
            if before != after:
                index_differences.append(IndexDifference(name, value, before.count, after.count))
    return VerifyReport(
        source=source.name, target=target.name, keys=len(source.digests.keys() | target.digests.keys()),
        source_items=source.items, target_items=target.items, differences=tuple(differences),
        undecodable=(*source.undecodable, *target.undecodable), index_differences=tuple(index_differences),
    )


def verify(source: type[Model], target: type[Model], *, total_segments: int = 4) -> VerifyReport:
    """Compare ``source``'s and ``target``'s tables as a user reads them: per logical key
    (count and checksum of the items, index values logical), and per value of each sharded
    global index of either model (the items a query of it finds on each side).

    Either model may be sharded or not; each side decodes its own keys and index values. A side
    that does not shard an index of that name reads it as a plain index of the same attribute.

    """
    keys = _sharded_index_keys(target, source)
    return compare(snapshot(source, total_segments=total_segments, index_keys=keys),
                   snapshot(target, total_segments=total_segments, index_keys=keys))
