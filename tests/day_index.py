"""The ``by_day`` global index many test models declare, declared once.

``day`` is its hash key and a number attribute (``at`` unless named) its range key; every
attribute is projected. PynamoDB binds each index instance to the model that declares it, and
this library binds a sharded index's ``Sharding`` to that model, so each call makes an index
class of its own.
"""

from __future__ import annotations

from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import Sharding


def day_index(sharding: Sharding | None = None, *, name: str = "by_day", sort_key: str = "at") -> Any:
    """A ``by_day`` index, sharded by ``sharding`` if given (PynamoDB's own index if not)."""
    meta = type("Meta", (), {"index_name": name, "projection": AllProjection()})
    namespace: dict[str, Any] = {
        "Meta": meta, "day": UnicodeAttribute(hash_key=True), sort_key: NumberAttribute(range_key=True),
    }
    if sharding is not None:
        namespace["shards"] = sharding
    return type("ByDay" if sharding is None else "ShardedByDay", (GlobalSecondaryIndex,), namespace)()
