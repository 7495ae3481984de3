"""Items built as PynamoDB builds them: patches and changes made to a model class or its
attributes after (or before) the first read."""
from __future__ import annotations

from typing import Any
from unittest import mock

from pynamodb.attributes import AttributeContainer, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from tests.integration.test_item_building_classes import calls_while_querying, keys, pair
from tests.integration.test_item_building_parity import outcome
from tests.raw import raw_client


def put_raw(s: Any, p: Any, **extra: Any) -> None:
    for m in (s, p):
        for sk in (1, 2):
            pk = m.shards.physical_key("k", 1) if m is s else "k"
            raw_client(m).put_item(TableName=m.Meta.table_name,
                                   Item={"pk": {"S": pk}, "sk": {"N": str(sk)}, **extra})


def body_note() -> dict[str, Any]:
    return {**keys(), "note": UnicodeAttribute(default="orig"), "n": NumberAttribute(null=True)}


def test_a_default_patched_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A1", body_note)
    dynamodb_models(s, p)
    put_raw(s, p)
    assert s.get("k", 1).note == p.get("k", 1).note == "orig"
    with mock.patch.object(s.note, "default", "patched"), mock.patch.object(p.note, "default", "patched"):
        assert p.get("k", 1).note == "patched"
        assert s.get("k", 1).note == "patched"


def test_a_default_set_after_the_first_read(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        return {**keys(), "note": UnicodeAttribute(null=True)}
    s, p = pair("A2", body)
    dynamodb_models(s, p)
    put_raw(s, p)
    list(s.query("k"))
    list(p.query("k"))
    s.note.default = "late"
    p.note.default = "late"
    assert outcome(lambda: list(s.query("k"))) == outcome(lambda: list(p.query("k")))


def test_an_attribute_instance_get_value_patched_before_any_read(dynamodb_models: Any) -> None:
    s, p = pair("A3", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "stored"})
    with mock.patch.object(s.note, "get_value", mock.Mock(return_value="GV")), \
            mock.patch.object(p.note, "get_value", mock.Mock(return_value="GV")):
        assert p.get("k", 1).note == "GV"
        assert s.get("k", 1).note == "GV"


def test_an_attribute_instance_attr_type_changed_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A4", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, n={"S": "7"})  # stored as a string
    assert outcome(lambda: s.get("k", 1)) == outcome(lambda: p.get("k", 1))  # both raise
    with mock.patch.object(s.n, "attr_type", "S"), mock.patch.object(p.n, "attr_type", "S"):
        assert outcome(lambda: s.get("k", 1)) == outcome(lambda: p.get("k", 1))


def test_len_added_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A5", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "stored"})
    s.get("k", 1)
    p.get("k", 1)
    with mock.patch.object(s, "__len__", mock.Mock(return_value=0), create=True), \
            mock.patch.object(p, "__len__", mock.Mock(return_value=0), create=True):
        ps = [i.attribute_values for i in p.query("k")]
        ss = [i.attribute_values for i in s.query("k")]
        assert ss == ps


def test_bool_added_to_a_base_after_the_subclass_was_read(dynamodb_models: Any) -> None:
    from pynamodb_sharding import ShardedModel
    from pynamodb_sharding._model import ShardedMetaModel
    class Mix:
        pass
    sb = ShardedMetaModel("SBaseB", (Mix, ShardedModel), {"__module__": __name__, **body_note()})
    pb = type(Model)("PBaseB", (Mix, Model), {"__module__": __name__, **body_note()})
    s, p = pair("A6", lambda: {}, sharded_bases=(sb,), plain_bases=(pb,))
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "stored"})
    s.get("k", 1)
    p.get("k", 1)
    Mix.__bool__ = lambda self: False  # type: ignore[attr-defined]
    try:
        assert [i.attribute_values for i in s.query("k")] == [i.attribute_values for i in p.query("k")]
    finally:
        del Mix.__bool__  # type: ignore[attr-defined]


def test_an_attribute_added_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A7", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, extra={"S": "x"})
    s.get("k", 1)
    p.get("k", 1)
    for m in (s, p):
        attr = UnicodeAttribute(null=True)
        m.extra = attr
        attr.__set_name__(m, "extra")
        m._attributes["extra"] = attr
    assert p.get("k", 1).attribute_values.get("extra") == "x"
    assert s.get("k", 1).attribute_values.get("extra") == "x"


def test_get_attributes_patched_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A8", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "stored"}, n={"N": "3"})
    s.get("k", 1)
    p.get("k", 1)
    with mock.patch.dict(s._attributes), mock.patch.dict(p._attributes):
        del s._attributes["n"]
        del p._attributes["n"]
        assert s.get("k", 1).attribute_values == p.get("k", 1).attribute_values


def test_a_descriptor_replaced_by_a_property_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A9", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "stored"})
    s.get("k", 1)
    p.get("k", 1)

    def make() -> property:
        def setter(self: Any, value: Any) -> None:
            self.__dict__["shadow"] = value
        return property(lambda self: self.__dict__.get("shadow"), setter)
    with mock.patch.object(s, "note", make()), mock.patch.object(p, "note", make()):
        assert outcome(lambda: s.get("k", 1)) == outcome(lambda: p.get("k", 1))


class Tracked(UnicodeAttribute):
    def __set__(self, instance: Any, value: Any) -> None:
        instance.__dict__.setdefault("_sets", []).append(value)
        super().__set__(instance, value)


def test_a_custom_set_with_a_default_is_called_as_often(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        return {**keys(), "note": Tracked(default="d")}
    s, p = pair("A10", body)
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "stored"})
    assert s.get("k", 1)._sets == p.get("k", 1)._sets


def test_a_spy_on_attribute_container_init(dynamodb_models: Any) -> None:
    s, p = pair("A11", body_note)
    dynamodb_models(s, p)
    put_raw(s, p)
    assert calls_while_querying(AttributeContainer, "__init__", p, s) == [2, 2]


def test_a_spy_on_get_attributes(dynamodb_models: Any) -> None:
    s, p = pair("A12", body_note)
    dynamodb_models(s, p)
    put_raw(s, p)
    s.get("k", 1)
    p.get("k", 1)
    with mock.patch.object(s, "get_attributes", return_value={"pk": s.pk, "sk": s.sk}), \
            mock.patch.object(p, "get_attributes", return_value={"pk": p.pk, "sk": p.sk}):
        assert list(p.get("k", 1).attribute_values) == list(s.get("k", 1).attribute_values)


def test_attr_name_changed_after_the_first_read(dynamodb_models: Any) -> None:
    s, p = pair("A13", body_note)
    dynamodb_models(s, p)
    put_raw(s, p, note={"S": "a"}, other={"S": "b"})
    s.get("k", 1)
    p.get("k", 1)
    with mock.patch.object(s.note, "attr_path", ["other"]), mock.patch.object(p.note, "attr_path", ["other"]):
        assert s.get("k", 1).attribute_values == p.get("k", 1).attribute_values
