"""Items read back are built as PynamoDB builds them, whatever the model class's shape: each
sharded class beside a plain PynamoDB class with the same body, the same items saved, read back
by query/get/scan/batch_get (DynamoDB Local).

The second half holds the cases an adversarial trial found where ``_building`` first differed
from PynamoDB (an own ``_set_attributes``, ``__new__`` or metaclass ``__call__``, patches made
after the first read, stateful callable defaults, falsy instances, values that are no
attribute values, an attribute class without ``attr_type``); each asserts PynamoDB's result."""

from __future__ import annotations

import itertools
from typing import Any
from unittest import mock

import pytest
from pynamodb.attributes import (
    DiscriminatorAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UTCDateTimeAttribute,
    VersionAttribute,
)
from pynamodb.exceptions import PutError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding._model import ShardedMetaModel
from tests.integration.test_item_building_parity import outcome
from tests.raw import raw_items


def _meta(name: str) -> type:
    return type("Meta", (), {"table_name": f"building_c_{name}"})


def pair(name: str, body: Any, *, sharded_bases: tuple[type, ...] = (ShardedModel,),
         plain_bases: tuple[type, ...] = (Model,), metaclass: Any = None,
         plain_metaclass: Any = None) -> tuple[Any, Any]:
    """Two classes with ``body()``'s namespace: one sharded (RandomShards(4)), one plain."""
    s_ns = {"Meta": _meta("s_" + name), "__module__": __name__, **body(), "shards": Sharding(RandomShards(4))}
    p_ns = {"Meta": _meta("p_" + name), "__module__": __name__, **body()}
    s_meta = metaclass or ShardedMetaModel
    p_meta = plain_metaclass or type(Model)
    return s_meta("S" + name, sharded_bases, s_ns), p_meta("P" + name, plain_bases, p_ns)


def keys() -> dict[str, Any]:
    return {"pk": UnicodeAttribute(hash_key=True), "sk": NumberAttribute(range_key=True)}


READS = {
    "get": lambda m: m.get("k", 1),
    "query": lambda m: list(m.query("k")),
    "scan": lambda m: sorted(m.scan(), key=lambda i: i.sk),
    "batch_get": lambda m: sorted(m.batch_get([("k", 1), ("k", 2)]), key=lambda i: i.sk),
    "projection": lambda m: list(m.query("k", attributes_to_get=["pk", "sk"])),
}


def compare(sharded: Any, plain: Any, extra: Any = None) -> None:
    for name, read in READS.items():
        s = outcome(lambda read=read: read(sharded))
        p = outcome(lambda read=read: read(plain))
        assert s == p, name
        if extra is not None:
            assert extra(read(sharded)) == extra(read(plain)), name


def calls_while_querying(owner: Any, method: str, *models: Any) -> list[int]:
    """How often ``owner.method`` (a spy passing each call on) is called while each of
    ``models`` queries key ``"k"``."""
    counts = []
    with mock.patch.object(owner, method, autospec=True, side_effect=getattr(owner, method)) as spy:
        for model in models:
            spy.reset_mock()
            list(model.query("k"))
            counts.append(spy.call_count)
    return counts


def save_both(sharded: Any, plain: Any, **values: Any) -> None:
    for model in (sharded, plain):
        for sk in (1, 2):
            model("k", sk, **values).save()


# ---------------------------------------------------------------- shapes that pass


def test_own_init_with_instance_state(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            self.loaded_from_db = not kwargs.get("_user_instantiated", True)
            super(type(self), self).__init__(*args, **kwargs)
            if self.note is None:
                self.note = "set in init"  # wiped by PynamoDB's _container_deserialize
        return {**keys(), "note": UnicodeAttribute(null=True), "__init__": __init__}
    s, p = pair("Init", body)
    dynamodb_models(s, p)
    save_both(s, p)
    compare(s, p, extra=lambda r: [(i.loaded_from_db, i.note) for i in (r if isinstance(r, list) else [r])])


def test_own_setattr_falls_back(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        def __setattr__(self: Any, name: str, value: Any) -> None:
            if name == "note" and isinstance(value, str):
                value = value.upper()
            object.__setattr__(self, name, value)
        return {**keys(), "note": UnicodeAttribute(null=True), "__setattr__": __setattr__}
    s, p = pair("SetAttr", body)
    dynamodb_models(s, p)
    save_both(s, p, note="lower")
    compare(s, p)


def test_property_shadowing_attribute_in_subclass(dynamodb_models: Any) -> None:
    def base_body() -> dict[str, Any]:
        return {**keys(), "note": UnicodeAttribute(null=True, attr_name="n")}
    sb = ShardedMetaModel("SBase", (ShardedModel,), {"__module__": __name__, **base_body()})
    pb = type(Model)("PBase", (Model,), {"__module__": __name__, **base_body()})

    def body() -> dict[str, Any]:
        def getter(self: Any) -> Any:
            return self.__dict__.get("_note_shadow")

        def setter(self: Any, value: Any) -> None:
            self.__dict__["_note_shadow"] = ("via-property", value)
        return {"note": property(getter, setter)}
    s, p = pair("Prop", body, sharded_bases=(sb,), plain_bases=(pb,))
    dynamodb_models(s, p)
    for model in (s, p):
        model.from_raw_data  # noqa: B018
    compare(s, p)


def test_mixin_and_abstract_base_shared_with_plain(dynamodb_models: Any) -> None:
    class Mixin:
        label_prefix = "m"

        def describe(self) -> str:
            return f"{self.label_prefix}:{self.pk}"

    class AppBase(Model):
        created = UTCDateTimeAttribute(null=True)
        kind = UnicodeAttribute(default="base")

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.app_flag = True

    def body() -> dict[str, Any]:
        return {**keys(), "note": UnicodeAttribute(null=True)}
    s, p = pair("Mixed", body, sharded_bases=(Mixin, AppBase, ShardedModel), plain_bases=(Mixin, AppBase))
    dynamodb_models(s, p)
    save_both(s, p, note="x")
    compare(s, p, extra=lambda r: [(i.describe(), i.app_flag) for i in (r if isinstance(r, list) else [r])])


def test_subclass_adding_attributes(dynamodb_models: Any) -> None:
    def base_body() -> dict[str, Any]:
        return {**keys(), "a": UnicodeAttribute(default="A")}
    sb = ShardedMetaModel("SSubBase", (ShardedModel,), {"__module__": __name__, **base_body()})
    pb = type(Model)("PSubBase", (Model,), {"__module__": __name__, **base_body()})

    def body() -> dict[str, Any]:
        return {"b": NumberAttribute(default=lambda: 5), "a": UnicodeAttribute(default="override", attr_name="aa")}
    s, p = pair("Sub", body, sharded_bases=(sb,), plain_bases=(pb,))
    dynamodb_models(s, p)
    save_both(s, p)
    compare(s, p)


def test_discriminator_models(dynamodb_models: Any) -> None:
    class SAnimal(ShardedModel):
        class Meta:
            table_name = "building_c_s_animal"
        pk = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        cls = DiscriminatorAttribute()
        shards = Sharding(RandomShards(4))

    class SCat(SAnimal, discriminator="cat"):
        lives = NumberAttribute(default=9)

    class PAnimal(Model):
        class Meta:
            table_name = "building_c_p_animal"
        pk = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        cls = DiscriminatorAttribute()

    class PCat(PAnimal, discriminator="cat"):
        lives = NumberAttribute(default=9)

    dynamodb_models(SAnimal, PAnimal)
    for m in (SCat, PCat):
        m("k", 1, lives=3).save()
        m("k", 2).save()
    for read in (lambda m: list(m.query("k")), lambda m: m.get("k", 1)):
        assert outcome(lambda read=read: read(SAnimal)) == outcome(lambda read=read: read(PAnimal))
        assert outcome(lambda read=read: read(SCat)) == outcome(lambda read=read: read(PCat))


def test_container_deserialize_and_from_raw_data_overrides(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        def _container_deserialize(self: Any, attribute_values: Any) -> None:
            super(type(self), self)._container_deserialize(attribute_values)
            self.note = (self.note or "") + "+cd"

        @classmethod  # type: ignore[misc]
        def from_raw_data(cls: Any, data: Any) -> Any:
            item = super(cls, cls).from_raw_data(data)
            item.note = (item.note or "") + "+frd"
            return item
        return {**keys(), "note": UnicodeAttribute(null=True),
                "_container_deserialize": _container_deserialize, "from_raw_data": from_raw_data}
    s, p = pair("Over", body)
    dynamodb_models(s, p)
    save_both(s, p, note="n")
    compare(s, p)


def test_init_with_required_argument(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        def __init__(self: Any, hash_key: Any, range_key: Any = None, **kwargs: Any) -> None:
            super(type(self), self).__init__(hash_key, range_key, **kwargs)
        return {**keys(), "__init__": __init__}
    s, p = pair("Req", body)
    dynamodb_models(s, p)
    save_both(s, p)
    compare(s, p)


def test_version_attribute_optimistic_locking_after_query(dynamodb_models: Any) -> None:
    def body() -> dict[str, Any]:
        return {**keys(), "v": VersionAttribute(), "note": UnicodeAttribute(null=True)}
    s, p = pair("Ver", body)
    dynamodb_models(s, p)
    save_both(s, p)
    for m in (s, p):
        a = next(iter(m.query("k")))
        b = next(iter(m.query("k")))
        a.note = "a"
        a.save()
        b.note = "b"
        with pytest.raises(PutError):
            b.save()
    s_raw = sorted(raw_items(s), key=lambda r: r["sk"]["N"])
    p_raw = sorted(raw_items(p), key=lambda r: r["sk"]["N"])
    for r in s_raw:
        r["pk"] = {"S": "k"}
    assert s_raw == p_raw


def test_sharded_gsi_query_matches_plain_gsi(dynamodb_models: Any) -> None:
    class SByDay(GlobalSecondaryIndex["SIdx"]):
        class Meta:
            index_name = "by_day"
            projection = AllProjection()
        day = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        shards = Sharding(HashedShards(4, attributes=("pk",)))

    class SIdx(ShardedModel):
        class Meta:
            table_name = "building_c_s_idx"
        pk = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        day = UnicodeAttribute()
        note = UnicodeAttribute(default="d", attr_name="nn")
        by_day = SByDay()
        shards = Sharding(RandomShards(4))

    class PByDay(GlobalSecondaryIndex["PIdx"]):
        class Meta:
            index_name = "by_day"
            projection = AllProjection()
        day = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)

    class PIdx(Model):
        class Meta:
            table_name = "building_c_p_idx"
        pk = UnicodeAttribute(hash_key=True)
        sk = NumberAttribute(range_key=True)
        day = UnicodeAttribute()
        note = UnicodeAttribute(default="d", attr_name="nn")
        by_day = PByDay()

    dynamodb_models(SIdx, PIdx)
    for m in (SIdx, PIdx):
        for n in range(6):
            m(f"k{n % 3}", n, day="20240101", note=f"n{n}").save()
    def without_stored_form(result: Any) -> Any:  # to_dynamodb_dict holds the stored index value
        return [{k: v for k, v in snap.items() if k != "dynamo"} for snap in result]
    assert without_stored_form(outcome(lambda: sorted(SIdx.by_day.query("20240101"), key=lambda i: i.sk))) == \
        without_stored_form(outcome(lambda: sorted(PIdx.by_day.query("20240101"), key=lambda i: i.sk)))
    for item in SIdx.by_day.query("20240101"):
        item.update(actions=[SIdx.note.set(item.note + "!")])
    assert sorted(r["nn"]["S"] for r in raw_items(SIdx)) == [f"n{n}!" for n in range(6)]
    assert len(raw_items(SIdx)) == 6


# ---------------------------------------------------------------- cases where the builder first differed


def test_an_own_set_attributes_is_called_as_pynamodb_calls_it(dynamodb_models: Any) -> None:
    """A class overriding ``_set_attributes`` (a hook ``Model.__init__`` calls) but not
    ``__init__``: PynamoDB calls it for every item read back (the first builder skipped it)."""
    def body() -> dict[str, Any]:
        def _set_attributes(self: Any, **attributes: Any) -> None:
            super(type(self), self)._set_attributes(**attributes)
            self._snapshot_taken = True  # e.g. dirty tracking set up here
        return {**keys(), "note": UnicodeAttribute(null=True), "_set_attributes": _set_attributes}
    s, p = pair("SetAttrs", body)
    dynamodb_models(s, p)
    save_both(s, p, note="n")
    assert getattr(p.get("k", 1), "_snapshot_taken", "missing") is True
    assert getattr(s.get("k", 1), "_snapshot_taken", "missing") is True


def test_an_own_dunder_new_makes_the_instance(dynamodb_models: Any) -> None:
    """A class with its own ``__new__`` (no ``__init__``): PynamoDB's ``cls(...)`` runs it (the
    first builder made the instance with ``object.__new__`` and skipped it)."""
    def body() -> dict[str, Any]:
        def __new__(cls: Any, *args: Any, **kwargs: Any) -> Any:
            self = object.__new__(cls)
            self.cache = {}
            return self
        return {**keys(), "__new__": __new__}
    s, p = pair("New", body)
    dynamodb_models(s, p)
    save_both(s, p)
    assert p.get("k", 1).cache == {}
    assert s.get("k", 1).cache == {}


def test_a_metaclass_call_sees_every_item_read(dynamodb_models: Any) -> None:
    """A metaclass ``__call__`` (an instance registry, an identity map): PynamoDB's
    ``cls(_user_instantiated=False)`` goes through it for every item read back (the first
    builder did not)."""
    seen: list[Any] = []

    class SRegistry(ShardedMetaModel):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            instance = super().__call__(*args, **kwargs)
            seen.append(instance)
            return instance

    class PRegistry(type(Model)):  # type: ignore[misc]
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            instance = super().__call__(*args, **kwargs)
            seen.append(instance)
            return instance

    s, p = pair("Reg", keys, metaclass=SRegistry, plain_metaclass=PRegistry)
    dynamodb_models(s, p)
    save_both(s, p)
    seen.clear()
    list(p.query("k"))
    plain_count = len(seen)
    seen.clear()
    list(s.query("k"))
    assert (plain_count, len(seen)) == (2, 2)


def test_a_deserialize_patched_after_the_first_read_is_used(dynamodb_models: Any) -> None:
    """``mock.patch`` of an attribute's ``deserialize`` once the class has been read once:
    PynamoDB calls the patch (the first builder kept calling the bound method it cached)."""
    def body() -> dict[str, Any]:
        return {**keys(), "when": UTCDateTimeAttribute(null=True)}
    s, p = pair("Patch", body)
    dynamodb_models(s, p)
    import datetime as dt
    save_both(s, p, when=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    s.get("k", 1)
    p.get("k", 1)
    with mock.patch.object(UTCDateTimeAttribute, "deserialize", return_value="PATCHED"):
        assert p.get("k", 1).when == "PATCHED"
        assert s.get("k", 1).when == "PATCHED"


def test_instances_that_can_be_false_are_built_by_pynamodb(dynamodb_models: Any) -> None:
    """A model whose instances can be falsy (``__len__``): PynamoDB's ``Attribute.__set__``
    (``if instance and ...``) stores nothing while the instance is falsy (the first builder
    stored the values directly)."""
    def body() -> dict[str, Any]:
        def __len__(self: Any) -> int:
            return len(self.attribute_values.get("items") or [])
        return {**keys(), "items": ListAttribute(null=True), "__len__": __len__}
    s, p = pair("Falsy", body)
    dynamodb_models(s, p)
    from tests.raw import raw_client
    for m in (s, p):
        pk = m.shards.physical_key("k", 1) if m is s else "k"
        raw_client(m).put_item(TableName=m.Meta.table_name,
                               Item={"pk": {"S": pk}, "sk": {"N": "1"}, "items": {"L": [{"S": "a"}]}})
    assert outcome(lambda: list(s.query("k"))) == outcome(lambda: list(p.query("k")))


def test_callable_defaults_are_called_as_often_as_pynamodb_calls_them(dynamodb_models: Any) -> None:
    """A callable default with state (a counter): PynamoDB calls it twice per item read back
    (the first builder called it once, so the values read differed)."""
    def body() -> dict[str, Any]:
        counter = itertools.count()
        return {**keys(), "n": NumberAttribute(default=lambda: next(counter))}
    s, p = pair("Counter", body)
    dynamodb_models(s, p)
    from tests.raw import raw_client
    for m in (s, p):
        for sk in (1, 2):
            pk = m.shards.physical_key("k", 1) if m is s else "k"
            raw_client(m).put_item(TableName=m.Meta.table_name, Item={"pk": {"S": pk}, "sk": {"N": str(sk)}})
    assert [i.n for i in s.query("k")] == [i.n for i in p.query("k")]


@pytest.mark.parametrize("value", ["bob", "Sam", ["a"], ("S", "x")], ids=["str", "str-with-S", "list", "tuple"])
def test_a_value_that_is_no_attribute_value_raises_pynamodbs_error(value: Any) -> None:
    """``from_raw_data`` given a value that is not a DynamoDB attribute value (a
    ``to_simple_dict`` result passed by mistake): PynamoDB raises AttributeDeserializationError
    or TypeError (the first builder raised AttributeError ``'str' object has no attribute 'get'``)."""
    def body() -> dict[str, Any]:
        return {**keys(), "note": UnicodeAttribute(null=True)}
    s, p = pair("Raw", body)
    stored = {"pk": {"S": s.shards.physical_key("k", 1)}, "sk": {"N": "1"}, "note": value}
    s_out = outcome(lambda: s.from_raw_data(stored))
    p_out = outcome(lambda: p.from_raw_data({"pk": {"S": "k"}, "sk": {"N": "1"}, "note": value}))
    assert s_out[:2] == p_out[:2]


def test_a_spy_on_container_deserialize_sees_every_item(dynamodb_models: Any) -> None:
    """A test suite wrapping PynamoDB's ``AttributeContainer._container_deserialize`` (a spy,
    instrumentation): PynamoDB's read path calls it for each item (the first builder never
    did, even with the patch in place before the class's first read)."""
    from pynamodb.attributes import AttributeContainer

    def body() -> dict[str, Any]:
        return {**keys(), "note": UnicodeAttribute(null=True)}
    s, p = pair("Spy", body)
    dynamodb_models(s, p)
    save_both(s, p)
    assert calls_while_querying(AttributeContainer, "_container_deserialize", p, s) == [2, 2]


def test_an_init_added_after_the_first_read_is_called(dynamodb_models: Any) -> None:
    """An ``__init__`` patched onto the class after its first read (``mock.patch.object``):
    PynamoDB calls it (the first builder's plan, kept from the first read, did not)."""
    def body() -> dict[str, Any]:
        return keys()
    s, p = pair("LateInit", body)
    dynamodb_models(s, p)
    save_both(s, p)
    s.get("k", 1)
    p.get("k", 1)
    calls: list[str] = []

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(type(self).__name__)
        Model.__init__(self, *args, **kwargs)
    with mock.patch.object(p, "__init__", init, create=True), mock.patch.object(s, "__init__", init, create=True):
        list(p.scan())
        list(s.scan())
    assert calls == ["PLateInit"] * 2 + ["SLateInit"] * 2


def test_an_attribute_class_without_attr_type_reads_as_in_pynamodb(dynamodb_models: Any) -> None:
    """A custom ``Attribute`` subclass with no ``attr_type`` (only ever left null): PynamoDB
    reads items that do not store it (the first builder raised AttributeError for every read of
    the class: it read ``attr_type`` of every attribute up front)."""
    from pynamodb.attributes import Attribute

    class Computed(Attribute[Any]):  # e.g. a placeholder / never-persisted field
        pass

    def body() -> dict[str, Any]:
        return {**keys(), "extra": Computed(null=True)}
    s, p = pair("NoType", body)
    dynamodb_models(s, p)
    from tests.raw import raw_client
    raw_client(s).put_item(TableName=s.Meta.table_name,
                           Item={"pk": {"S": s.shards.physical_key("k", 1)}, "sk": {"N": "1"}})
    raw_client(p).put_item(TableName=p.Meta.table_name, Item={"pk": {"S": "k"}, "sk": {"N": "1"}})
    assert outcome(lambda: s.get("k", 1)) == outcome(lambda: p.get("k", 1))


def test_time_partitioned_model_with_init_and_defaults(dynamodb_models: Any) -> None:
    from pynamodb_sharding import TimePartitioned

    now = 1_456_444_800
    made: list[bool] = []

    class SPeriod(ShardedModel):
        class Meta:
            table_name = TimePartitioned("building_c_period.{period}", attribute="at", period="month",
                                         clock=lambda: now)
        path = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        note = UnicodeAttribute(default="d", attr_name="nn")
        tags = ListAttribute(default=list)
        shards = Sharding(RandomShards(4))

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(kwargs.get("_user_instantiated", True))
            super().__init__(*args, **kwargs)

    class PPeriod(Model):
        class Meta:
            table_name = "building_c_pperiod"
        path = UnicodeAttribute(hash_key=True)
        at = NumberAttribute(range_key=True)
        note = UnicodeAttribute(default="d", attr_name="nn")
        tags = ListAttribute(default=list)

    dynamodb_models(SPeriod, PPeriod)
    for m in (SPeriod, PPeriod):
        m("p", now + 1, tags=["a"]).save()
        m("p", now + 2, note="x").save()
    made.clear()
    got = list(SPeriod.query("p"))
    assert made.count(False) >= 2
    assert outcome(lambda: got) == outcome(lambda: list(PPeriod.query("p")))
