"""Instances built from items read back (``_building``) are PynamoDB's, value for value.

The reference is PynamoDB's own ``Model._instantiate`` on the same class and the same stored
item: the same values in the same order, the same error when a value is stored with another
type, ``__init__`` called where the class has one of its own.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import (
    BinaryAttribute,
    BinarySetAttribute,
    BooleanAttribute,
    DiscriminatorAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
    VersionAttribute,
)
from pynamodb.exceptions import AttributeDeserializationError
from pynamodb.models import Model

from pynamodb_sharding._building import builds_here, instantiate


class Place(MapAttribute[str, Any]):
    city = UnicodeAttribute()
    floor = NumberAttribute(null=True)


class Everything(Model):
    class Meta:
        table_name = "building_everything"

    owner = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    label = UnicodeAttribute(attr_name="lbl", default="none")
    blob = BinaryAttribute(null=True, legacy_encoding=False)
    flag = BooleanAttribute(default=False)
    when = UTCDateTimeAttribute(null=True)
    numbers = NumberSetAttribute(null=True)
    words = UnicodeSetAttribute(null=True)
    blobs = BinarySetAttribute(null=True, legacy_encoding=False)
    document = JSONAttribute(null=True)
    history = ListAttribute(of=NumberAttribute, default=list)
    place = Place(null=True)
    anything = MapAttribute(null=True)  # type: ignore[var-annotated]
    version = VersionAttribute(null=True)
    expires = TTLAttribute(null=True)


def _number() -> st.SearchStrategy[str]:
    return st.integers(-10**12, 10**12).map(str) | st.decimals(-1000, 1000, places=3, allow_nan=False).map(str)


_VALUES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "owner": st.text(min_size=1).map(lambda text: {"S": text}),
    "at": _number().map(lambda number: {"N": number}),
    "lbl": st.text().map(lambda text: {"S": text}),
    "blob": st.binary(min_size=1).map(lambda data: {"B": data}),
    "flag": st.booleans().map(lambda flag: {"BOOL": flag}),
    "when": st.datetimes(timezones=st.just(UTC)).map(
        lambda moment: {"S": moment.strftime("%Y-%m-%dT%H:%M:%S.%f+0000")}),
    "numbers": st.lists(st.integers(0, 99).map(str), min_size=1, unique=True).map(lambda ns: {"NS": ns}),
    "words": st.lists(st.text(min_size=1), min_size=1, unique=True).map(lambda ws: {"SS": ws}),
    "blobs": st.lists(st.binary(min_size=1), min_size=1, unique=True).map(lambda bs: {"BS": bs}),
    "document": st.dictionaries(st.text(), st.integers()).map(lambda doc: {"S": _json(doc)}),
    "history": st.lists(_number().map(lambda number: {"N": number})).map(lambda items: {"L": items}),
    "place": st.fixed_dictionaries({"city": st.text().map(lambda text: {"S": text})}).map(lambda m: {"M": m}),
    "anything": st.dictionaries(st.text(min_size=1), st.text().map(lambda text: {"S": text})).map(
        lambda m: {"M": m}),
    "version": st.integers(1, 1000).map(lambda number: {"N": str(number)}),
    "expires": st.integers(0, 2**31).map(lambda number: {"N": str(number)}),
}


def _json(document: dict[str, int]) -> str:
    import json

    return json.dumps(document)


def _stored(name: str) -> st.SearchStrategy[dict[str, Any] | None]:
    """A stored value of attribute ``name``: its own type, left out, NULL, or another type."""
    wrong = st.sampled_from([{"S": "x"}, {"N": "1"}, {"BOOL": True}, {"L": []}])
    return st.one_of(_VALUES[name], st.none(), st.just({"NULL": True}), wrong)


_ITEMS = st.fixed_dictionaries({}, optional={name: _stored(name) for name in _VALUES})


def _pynamodb(cls: type[Model], item: dict[str, Any]) -> Any:
    return Model._instantiate.__func__(cls, item)  # type: ignore[attr-defined]


def _outcome(build: Any) -> tuple[str, Any]:
    try:
        instance = build()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    values = instance.attribute_values
    return type(instance).__name__, [(name, _plain(value)) for name, value in values.items()]


def _plain(value: Any) -> Any:
    if isinstance(value, MapAttribute):
        return ("map", type(value).__name__, _plain(value.attribute_values))
    if isinstance(value, dict):
        return [(key, _plain(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


@given(_ITEMS)
def test_an_item_builds_the_instance_pynamodb_builds(item: dict[str, Any]) -> None:
    item = {name: value for name, value in item.items() if value is not None}
    assert builds_here(Everything)
    assert _outcome(lambda: instantiate(Everything, item)) == _outcome(lambda: _pynamodb(Everything, item))


def test_known_values_and_the_attributes_set_through_their_descriptors() -> None:
    item = {
        "owner": {"S": "o"}, "at": {"N": "3"}, "lbl": {"S": "stored under lbl"},
        "blob": {"B": b"\x00\x01"}, "when": {"S": "2024-01-15T10:00:00.000000+0000"},
        "version": {"N": "7"}, "expires": {"N": "1700000000"},
        "place": {"M": {"city": {"S": "Kyoto"}, "floor": {"N": "2"}}},
    }
    assert builds_here(Everything)
    built = instantiate(Everything, item)
    assert built.label == "stored under lbl"
    assert built.blob == b"\x00\x01"
    assert built.when == datetime(2024, 1, 15, 10, tzinfo=UTC)
    assert built.version == 7
    assert isinstance(built.version, int)
    assert built.expires == datetime.fromtimestamp(1700000000, tz=UTC)
    assert built.place is not None
    assert built.place.city == "Kyoto"
    assert built.place.floor == 2
    assert built.flag is False
    assert built.history == []
    # The defaults first, then the values read, in PynamoDB's order of the attributes.
    assert set(list(built.attribute_values)[:3]) == {"label", "flag", "history"}
    assert list(built.attribute_values) == list(_pynamodb(Everything, item).attribute_values)


def test_a_value_stored_with_another_type_raises_pynamodbs_error() -> None:
    assert builds_here(Everything)
    with pytest.raises(AttributeDeserializationError, match="'lbl'"):
        instantiate(Everything, {"owner": {"S": "o"}, "at": {"N": "1"}, "lbl": {"N": "5"}})


def test_a_default_is_made_once_for_each_instance() -> None:
    assert builds_here(Everything)
    first = instantiate(Everything, {"owner": {"S": "o"}, "at": {"N": "1"}})
    second = instantiate(Everything, {"owner": {"S": "o"}, "at": {"N": "2"}})
    first.history.append(1)
    assert second.history == []


class WithInit(Model):
    class Meta:
        table_name = "building_init"

    calls: list[bool] = []  # noqa: RUF012 (a record of the calls)

    owner = UnicodeAttribute(hash_key=True)
    note = UnicodeAttribute(default="n")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        WithInit.calls.append(kwargs.get("_user_instantiated", True))
        super().__init__(*args, **kwargs)


def test_a_class_with_its_own_init_has_it_called_as_pynamodb_calls_it() -> None:
    assert builds_here(WithInit)
    WithInit.calls.clear()
    built = instantiate(WithInit, {"owner": {"S": "o"}})
    assert WithInit.calls == [False]
    WithInit.calls.clear()
    reference = _pynamodb(WithInit, {"owner": {"S": "o"}})
    assert WithInit.calls == [False]
    assert built.attribute_values == reference.attribute_values == {"note": "n", "owner": "o"}


class Animal(Model):
    class Meta:
        table_name = "building_animals"

    name = UnicodeAttribute(hash_key=True)
    kind = DiscriminatorAttribute()


class Cat(Animal, discriminator="cat"):
    pass


class OwnDeserialize(Model):
    class Meta:
        table_name = "building_own"

    owner = UnicodeAttribute(hash_key=True)

    def _container_deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        super()._container_deserialize(attribute_values)
        self.owner = (self.owner or "").upper()


def test_classes_built_their_own_way_are_left_to_pynamodb() -> None:
    assert not builds_here(Animal)  # a discriminator picks the class
    assert not builds_here(Cat)
    assert not builds_here(OwnDeserialize)


def test_binary_values_as_a_reply_decodes_them() -> None:
    # The fast path's replies carry bytes (decode_binary_values); botocore's, bytes too.
    assert builds_here(Everything)
    data = base64.b64decode("AAEC")
    item = {"owner": {"S": "o"}, "at": {"N": "1"}, "blob": {"B": data}, "blobs": {"BS": [data]}}
    assert _outcome(lambda: instantiate(Everything, item)) == _outcome(lambda: _pynamodb(Everything, item))


def test_an_attribute_class_patched_after_the_first_read_is_built_as_patched() -> None:
    item = {"owner": {"S": "o"}, "at": {"N": "1"}, "lbl": {"S": "stored"}}
    assert instantiate(Everything, item).label == "stored"

    def shouting(self: UnicodeAttribute, value: dict[str, Any]) -> Any:
        return value["S"].upper()

    with mock.patch.object(UnicodeAttribute, "get_value", shouting):
        assert instantiate(Everything, item).label == "STORED"
        assert _pynamodb(Everything, item).label == "STORED"
    with mock.patch.object(Everything.label, "default", "patched"):  # type: ignore[attr-defined]
        assert instantiate(Everything, {"owner": {"S": "o"}, "at": {"N": "1"}}).label == "patched"
    assert instantiate(Everything, item).label == "stored"
