"""Items built as PynamoDB builds them: model classes whose metaclass makes distinct classes
equal (``__eq__``/``__hash__`` by name)."""
from __future__ import annotations

from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding._model import ShardedMetaModel


class ByName(ShardedMetaModel):
    def __eq__(cls, other: Any) -> bool:
        return isinstance(other, type) and other.__name__ == cls.__name__

    def __hash__(cls) -> int:
        return hash(cls.__name__)


def make(table: str, attrs: dict[str, Any]) -> Any:
    return ByName("Same", (ShardedModel,), {
        "Meta": type("Meta", (), {"table_name": table}), "__module__": __name__,
        "pk": UnicodeAttribute(hash_key=True), "sk": NumberAttribute(range_key=True),
        "shards": Sharding(RandomShards(4)), **attrs})


def test_equal_classes_get_their_own_builders() -> None:
    a = make("building_eq_a", {"note": UnicodeAttribute(default="A")})
    b = make("building_eq_b", {"other": UnicodeAttribute(default="B", attr_name="o")})
    da = {"pk": {"S": a.shards.physical_key("k", 1)}, "sk": {"N": "1"}}
    db = {"pk": {"S": b.shards.physical_key("k", 1)}, "sk": {"N": "1"}, "o": {"S": "stored"}}
    first = a.from_raw_data(dict(da)).attribute_values
    got_b = b.from_raw_data(dict(db)).attribute_values
    got_a = a.from_raw_data(dict(da)).attribute_values  # _last is b now: looked up in the dict
    assert first == got_a == {"note": "A", "pk": "k", "sk": 1}
    assert got_b == {"other": "stored", "pk": "k", "sk": 1}
