"""Adversarial parity: items read back by a ShardedModel (built by ``_building``) against a
plain PynamoDB Model over the same data, on DynamoDB Local."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pynamodb.attributes import (
    AttributeContainer,
    BinaryAttribute,
    BinarySetAttribute,
    BooleanAttribute,
    DynamicMapAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NullAttribute,
    NumberAttribute,
    NumberSetAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
    VersionAttribute,
)
from pynamodb.connection import Connection
from pynamodb.exceptions import DeleteError, PutError, UpdateError
from pynamodb.models import Model
from pynamodb.transactions import TransactGet

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding import _point_reads as point_reads
from pynamodb_sharding.aio import AsyncTransactGet
from tests.async_loop import Loop
from tests.raw import raw_client, raw_items

FIXED = dt.datetime(2020, 5, 17, 3, 4, 5, 123456, tzinfo=dt.UTC)


class Place(MapAttribute[str, Any]):
    city = UnicodeAttribute()
    floor = NumberAttribute(null=True)
    code = UnicodeAttribute(attr_name="c", null=True)


class Dyn(DynamicMapAttribute):
    kind = UnicodeAttribute(null=True)


def _attributes() -> dict[str, Any]:
    return {
        "pk": UnicodeAttribute(hash_key=True),
        "sk": NumberAttribute(range_key=True),
        "label": UnicodeAttribute(attr_name="lbl", default="none"),
        "big": NumberAttribute(null=True),
        "dec": NumberAttribute(null=True),
        "blob": BinaryAttribute(null=True, legacy_encoding=False),
        "old_blob": BinaryAttribute(null=True, legacy_encoding=True),
        "flag": BooleanAttribute(default=False),
        "when": UTCDateTimeAttribute(null=True),
        "doc": JSONAttribute(null=True),
        "ns": NumberSetAttribute(null=True),
        "ss": UnicodeSetAttribute(null=True),
        "bs": BinarySetAttribute(null=True, legacy_encoding=False),
        "nums": ListAttribute(of=NumberAttribute, null=True),
        "places": ListAttribute(of=Place, null=True),
        "anything": ListAttribute(null=True),
        "place": Place(null=True),
        "raw_map": MapAttribute(null=True),
        "dyn": Dyn(null=True),
        "nothing": NullAttribute(null=True),
        "version": VersionAttribute(null=True),
        "expires": TTLAttribute(null=True),
        "tags": ListAttribute(default=list),
        "bag": MapAttribute(default=dict),
        "created": UTCDateTimeAttribute(default=lambda: FIXED),
        "fresh": UnicodeAttribute(default_for_new="new", null=True),
        "num_default": NumberAttribute(default=0),
    }


def _model(name: str, base: type[Model], **extra: Any) -> Any:
    meta = type("Meta", (), {"table_name": f"building_p_{name}"})
    return type(name, (base,), {"Meta": meta, "__module__": __name__, **_attributes(), **extra})


Sharded = _model("Sharded", ShardedModel, shards=Sharding(RandomShards(4)))
Plain = _model("Plain", Model)
HSharded = _model("HSharded", ShardedModel, shards=Sharding(HashedShards(4)))


def plain(value: Any) -> Any:
    if isinstance(value, MapAttribute):
        return ("map", type(value).__name__, plain(value.attribute_values))
    if isinstance(value, dict):
        return [(key, plain(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, type):  # a discriminator's class: SCat / PCat
        return ("class", value.__name__[1:])
    if isinstance(value, set):
        return ("set", sorted(value, key=repr))
    return (type(value).__name__, value)


def snapshot(item: Any) -> Any:
    return {
        "values": [(k, plain(v)) for k, v in item.attribute_values.items()],
        "simple": _safe(lambda: item.to_simple_dict(force=True)),
        "dynamo": _safe(lambda: _logical(item, item.to_dynamodb_dict())),
        "repr": _repr(item),
        "vars": sorted(k for k in vars(item) if k != "attribute_values") if hasattr(item, "__dict__") else None,
    }


def _repr(item: Any) -> str:
    import re
    return re.sub(r"<class '[^']*\.[SP](\w+)'>", r"<\1>", repr(item).split("(", 1)[1])


def _safe(call: Any) -> Any:
    try:
        return call()
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def _logical(item: Any, data: dict[str, Any]) -> dict[str, Any]:
    """The physical hash key of a sharded item's ``to_dynamodb_dict`` (documented) made logical."""
    if isinstance(item, ShardedModel):
        from pynamodb_sharding._descriptor import shard_manager
        name = shard_manager(type(item)).hash_attribute.attr_name
        if name in data:
            data[name] = {"S": type(item).shards.decode(data[name]["S"])[0]}
    return data


def outcome(call: Any) -> Any:
    try:
        result = call()
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc).replace("Sharded", "X").replace("Plain", "X"))
    if isinstance(result, list):
        return [snapshot(item) for item in result]
    return snapshot(result)


FULL = {
    "label": "hello",
    "big": 10**30 + 1,
    "dec": 3.141592653589793,
    "blob": b"\x00\xffbin",
    "old_blob": b"\x01legacy",
    "flag": True,
    "when": dt.datetime(2024, 1, 15, 10, 0, 0, 5, tzinfo=dt.UTC),
    "doc": {"a": [1, 2, {"b": None}], "z": "é"},
    "ns": {1, 2.5, 10**20},
    "ss": {"x", "y"},
    "bs": {b"a", b"\x00"},
    "nums": [1, 2.5, -3],
    "places": [Place(city="Kyoto", floor=2, code="KY")],
    "anything": ["s", 1, True, None, {"m": 1}, [1, "x"], b"raw"],
    "place": Place(city="Paris"),
    "raw_map": {"k": "v", "n": 1, "nested": {"deep": [1, 2]}},
    "dyn": Dyn(kind="k", extra_field="dynamic", other=3),
    "expires": dt.datetime(2030, 1, 1, tzinfo=dt.UTC),
    "tags": ["t1"],
    "bag": {"x": 1},
    "created": dt.datetime(2021, 1, 1, tzinfo=dt.UTC),
    "fresh": "stored",
    "num_default": 7,
}


def _save_both(values: dict[str, Any], sk: int = 1) -> None:
    for model in (Sharded, Plain):
        model("k", sk, **values).save()


FULL_NO_LEGACY = {k: v for k, v in FULL.items() if k != "old_blob"}  # PynamoDB's to_dynamodb_dict fails on it


@pytest.mark.parametrize("values", [FULL, FULL_NO_LEGACY, {}],
                         ids=["full", "full-no-legacy-blob", "only-keys-and-defaults"])
def test_every_read_path_matches_plain(dynamodb_models: Any, loop: Loop, values: dict[str, Any]) -> None:
    dynamodb_models(Sharded, Plain)
    _save_both(values)
    _save_both(values, sk=2)
    reads = {
        "get": lambda m: m.get("k", 1),
        "get-consistent": lambda m: m.get("k", 1, consistent_read=True),
        "query": lambda m: list(m.query("k")),
        "query-desc-limit": lambda m: list(m.query("k", scan_index_forward=False, limit=1)),
        "query-filter": lambda m: list(m.query("k", filter_condition=m.flag == True)),  # noqa: E712
        "scan": lambda m: sorted(m.scan(), key=lambda i: i.sk),
        "batch_get": lambda m: sorted(m.batch_get([("k", 1), ("k", 2)]), key=lambda i: i.sk),
        "projection-get": lambda m: m.get("k", 1, attributes_to_get=["pk", "sk", "lbl", "dyn", "flag"]),
        "projection-query": lambda m: list(m.query("k", attributes_to_get=["pk", "sk", "places", "version"])),
        "refresh": lambda m: _refreshed(m),
        "from_raw_data": lambda m: m.from_raw_data(m.get("k", 1).to_dynamodb_dict()),
        "from_dynamodb_dict": lambda m: _from_dict(m),
    }
    for name, read in reads.items():
        assert outcome(lambda read=read: read(Sharded)) == outcome(lambda read=read: read(Plain)), name

    async def aread() -> Any:
        return [i async for i in Sharded.aquery("k")]
    assert outcome(lambda: loop.run(aread())) == outcome(lambda: list(Plain.query("k")))

    async def aget() -> Any:
        return await Sharded.aget("k", 2)
    assert outcome(lambda: loop.run(aget())) == outcome(lambda: Plain.get("k", 2))

    async def abatch() -> Any:
        return sorted(await Sharded.abatch_get([("k", 1), ("k", 2)]), key=lambda i: i.sk)
    assert outcome(lambda: loop.run(abatch())) == outcome(lambda: sorted(Plain.batch_get([("k", 1), ("k", 2)]),
                                                                          key=lambda i: i.sk))
    conn = _connection(Sharded)

    def tget(model: Any) -> Any:
        with TransactGet(connection=conn) as t:
            f = t.get(model, "k", 1)
        return f.get()
    assert outcome(lambda: tget(Sharded)) == outcome(lambda: tget(Plain))

    async def atget() -> Any:
        async with AsyncTransactGet(connection=conn) as t:
            f = await t.get(Sharded, "k", 1)
        return f.get()
    assert outcome(lambda: loop.run(atget())) == outcome(lambda: tget(Plain))


def _refreshed(model: Any) -> Any:
    item = model("k", 1)
    item.refresh()
    return item


def _from_dict(model: Any) -> Any:
    data = model.get("k", 1).to_dynamodb_dict()
    item = model()
    item.from_dynamodb_dict(data)
    return item


def _connection(model: Any) -> Connection:
    meta = model.Meta
    return Connection(region=meta.region, host=meta.host, aws_access_key_id=meta.aws_access_key_id,
                      aws_secret_access_key=meta.aws_secret_access_key)


def _put_raw_both(item: dict[str, Any], shard: int = 1) -> None:
    sharded = dict(item, pk={"S": Sharded.shards.physical_key(item["pk"]["S"], shard)})
    raw_client(Sharded).put_item(TableName=Sharded.Meta.table_name, Item=sharded)
    raw_client(Plain).put_item(TableName=Plain.Meta.table_name, Item=item)


RAW_CASES = {
    "wrong-type-str-as-number": {"lbl": {"N": "5"}},
    "wrong-type-number-as-str": {"big": {"S": "5"}},
    "wrong-type-bool-as-str": {"flag": {"S": "true"}},
    "wrong-type-list-as-map": {"place": {"L": []}},
    "wrong-type-map-as-list": {"nums": {"M": {}}},
    "wrong-type-set": {"ns": {"SS": ["a"]}},
    "wrong-type-version": {"version": {"S": "1"}},
    "wrong-type-ttl": {"expires": {"S": "1"}},
    "bad-datetime": {"when": {"S": "yesterday"}},
    "bad-json": {"doc": {"S": "{not json"}},
    "json-null": {"doc": {"S": "null"}},
    "null-values": {"lbl": {"NULL": True}, "tags": {"NULL": True}, "bag": {"NULL": True}, "version": {"NULL": True}},
    "null-with-default": {"created": {"NULL": True}, "num_default": {"NULL": True}},
    "unknown-attributes": {"zzz": {"S": "x"}, "python_name_label": {"S": "y"}, "label": {"S": "python name"}},
    "stored-under-python-name": {"label": {"S": "not lbl"}},
    "map-missing-required": {"place": {"M": {"floor": {"N": "3"}}}},
    "map-wrong-inner-type": {"place": {"M": {"city": {"N": "3"}}}},
    "list-of-maps-wrong": {"places": {"L": [{"S": "x"}]}},
    "typed-list-wrong": {"nums": {"L": [{"S": "x"}]}},
    "untyped-list-mixed": {"anything": {"L": [{"NULL": True}, {"SS": ["a"]}, {"NS": ["1"]}, {"BS": [b"a"]}]}},
    "dyn-map-extra": {"dyn": {"M": {"kind": {"S": "k"}, "x": {"N": "1"}, "y": {"L": []}}}},
    "nulls-in-map": {"raw_map": {"M": {"a": {"NULL": True}}}},
    "empty-string": {"lbl": {"S": ""}},
    "empty-list-and-map": {"tags": {"L": []}, "bag": {"M": {}}},
    "huge-number": {"big": {"N": "9" * 38}, "dec": {"N": "1E+125"}},
    "negative-small": {"dec": {"N": "-1E-130"}},
    "number-as-float-text": {"big": {"N": "1.0"}, "version": {"N": "3.0"}, "expires": {"N": "1700000000.5"}},
    "bool-numbers": {"flag": {"BOOL": False}},
    "legacy-blob-raw": {"old_blob": {"B": b"not base64!"}},
    "legacy-blob-b64": {"old_blob": {"B": b"aGVsbG8="}},
    "null-attribute-stored": {"nothing": {"NULL": True}},
    "null-attribute-wrong": {"nothing": {"S": "x"}},
    "version-zero": {"version": {"N": "0"}},
}


@pytest.mark.parametrize("case", list(RAW_CASES), ids=list(RAW_CASES))
def test_raw_items_written_by_another_tool(dynamodb_models: Any, case: str) -> None:
    dynamodb_models(Sharded, Plain)
    item = {"pk": {"S": "k"}, "sk": {"N": "1"}, **RAW_CASES[case]}
    _put_raw_both(item)
    for name, read in {
        "get": lambda m: m.get("k", 1),
        "query": lambda m: list(m.query("k")),
        "scan": lambda m: list(m.scan()),
        "batch_get": lambda m: list(m.batch_get([("k", 1)])),
    }.items():
        assert outcome(lambda read=read: read(Sharded)) == outcome(lambda read=read: read(Plain)), name


def _reference(model: Any, raw: dict[str, Any]) -> Any:
    """PynamoDB's own instantiation on the sharded class (what the change replaced)."""
    instance = AttributeContainer._instantiate.__func__(model, raw)  # type: ignore[attr-defined]
    point_reads.adopt_stored(instance, raw)
    return instance


@pytest.mark.parametrize("case", list(RAW_CASES), ids=list(RAW_CASES))
def test_raw_items_new_builder_equals_pynamodb_path(case: str) -> None:
    item = {"pk": {"S": Sharded.shards.physical_key("k", 1)}, "sk": {"N": "1"}, **RAW_CASES[case]}
    assert outcome(lambda: Sharded.from_raw_data(dict(item))) == outcome(lambda: _reference(Sharded, dict(item)))


def test_writes_after_read_hit_the_stored_item(dynamodb_models: Any) -> None:
    dynamodb_models(Sharded, Plain)
    _save_both(FULL)
    for model in (Sharded, Plain):
        item = next(iter(model.query("k")))
        assert item.version == 1
        item.label = "changed"
        item.save()
        assert item.version == 2
        item.update(actions=[model.num_default.add(1)])
        assert item.version == 3
        stale = model.get("k", 1)
        fresh = model.get("k", 1)
        fresh.save()
        with pytest.raises(PutError):
            stale.save()
        with pytest.raises(UpdateError):
            stale.update(actions=[model.flag.set(False)])
        with pytest.raises(DeleteError):
            stale.delete()
    sharded_raw = raw_items(Sharded)
    plain_raw = raw_items(Plain)
    assert len(sharded_raw) == len(plain_raw) == 1
    s = dict(sharded_raw[0])
    s["pk"] = {"S": Sharded.shards.decode(s["pk"]["S"])[0]}
    assert s == plain_raw[0]
    for model in (Sharded, Plain):
        got = model.get("k", 1)
        got.delete()
    assert raw_items(Sharded) == raw_items(Plain) == []


def test_projection_then_save_and_update(dynamodb_models: Any) -> None:
    dynamodb_models(Sharded, Plain)
    _save_both(FULL)
    results = {}
    for model in (Sharded, Plain):
        item = next(iter(model.query("k", attributes_to_get=["pk", "sk", "lbl", "version"])))
        try:
            item.update(actions=[model.label.set("u")])
            r = "ok"
        except Exception as exc:
            r = type(exc).__name__
        results[model.__name__] = (r, item.label, item.version)
    assert results["Sharded"] == results["Plain"]
    s = raw_items(Sharded)[0]
    p = raw_items(Plain)[0]
    s["pk"] = p["pk"]
    assert s == p


def test_hashed_strategy_update_after_query(dynamodb_models: Any) -> None:
    dynamodb_models(HSharded)
    for n in range(5):
        HSharded("k", n, label=f"v{n}").save()
    for item in HSharded.query("k"):
        item.update(actions=[HSharded.label.set(item.label + "!")])
    raw = raw_items(HSharded)
    assert len(raw) == 5
    assert sorted(r["lbl"]["S"] for r in raw) == [f"v{n}!" for n in range(5)]
