"""A model that cannot be sharded fails when its class is defined, naming model, attribute, fix."""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import (
    HashedShards,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
    ShardManager,
)


class TestDefinitionErrors:
    """Each declaration mistake raises ShardingDefinitionError at class-definition time."""

    def test_hash_key_not_unicode(self) -> None:
        with pytest.raises(
            ShardingDefinitionError, match=r"Counter\.counter_id: .*NumberAttribute.*UnicodeAttribute"
        ):

            class Counter(ShardedModel):
                class Meta:
                    table_name = "counter"

                counter_id = NumberAttribute(hash_key=True)
                shards = Sharding(RandomShards(4))

    @pytest.mark.parametrize("separator", ["", "7", " "])
    def test_bad_separator(self, separator: str) -> None:
        with pytest.raises(ShardingDefinitionError, match="separator"):
            Sharding(RandomShards(4), separator=separator)

    @pytest.mark.parametrize("count", [0, -1, 10_001, 2.5, True])
    def test_shard_count_out_of_range(self, count: object) -> None:
        with pytest.raises(ShardingDefinitionError, match=r"1\.\.10000"):
            RandomShards(count)  # type: ignore[arg-type]
        with pytest.raises(ShardingDefinitionError, match=r"1\.\.10000"):
            HashedShards(count)  # type: ignore[arg-type]

    def test_not_a_strategy(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="RandomShards"):
            Sharding(10)  # type: ignore[arg-type]

    def test_custom_strategy_missing_a_protocol_method(self) -> None:
        class NoPointShards:
            max_shards = 1

            def shard_count(self, key: object) -> int:
                return 1

            def read_shards(self, key: object) -> tuple[int, ...]:
                return (1,)

            def write_shard(self, item: object) -> int:
                return 1

        with pytest.raises(ShardingDefinitionError, match=r"point_shards .*ShardStrategy protocol"):
            Sharding(NoPointShards())  # type: ignore[arg-type]

    def test_two_descriptors(self) -> None:
        with pytest.raises(ShardingDefinitionError, match=r"Twice: has 2 Sharding descriptors \(a, b\)"):

            class Twice(ShardedModel):
                class Meta:
                    table_name = "twice"

                key = UnicodeAttribute(hash_key=True)
                a = Sharding(RandomShards(2))
                b = Sharding(RandomShards(3))

    def test_second_descriptor_in_subclass(self) -> None:
        class Base(ShardedModel):
            class Meta:
                table_name = "base"

            key = UnicodeAttribute(hash_key=True)
            shards = Sharding(RandomShards(2))

        with pytest.raises(ShardingDefinitionError, match="2 Sharding descriptors"):

            class Child(Base):
                more_shards = Sharding(RandomShards(3))

    def test_missing_descriptor(self) -> None:
        with pytest.raises(
            ShardingDefinitionError, match=r"Bare: a ShardedModel needs a Sharding descriptor"
        ):

            class Bare(ShardedModel):
                class Meta:
                    table_name = "bare"

                key = UnicodeAttribute(hash_key=True)

    def test_on_plain_model(self) -> None:
        # Python < 3.12 wraps errors raised by __set_name__ in RuntimeError; the ShardingError
        # is its cause. Python 3.12+ raises it as it is.
        with pytest.raises((ShardingDefinitionError, RuntimeError)) as info:

            class Plain(Model):
                class Meta:
                    table_name = "plain"

                key = UnicodeAttribute(hash_key=True)
                shards = Sharding(RandomShards(2))

        error = info.value if isinstance(info.value, ShardingDefinitionError) else info.value.__cause__
        assert isinstance(error, ShardingDefinitionError)
        assert "Plain.shards: Sharding only works on ShardedModel subclasses" in str(error)

    def test_hashed_on_unknown_attribute(self) -> None:
        with pytest.raises(ShardingDefinitionError, match=r"Log\.key: HashedShards .*'user'.*not an attribute of Log"):

            class Log(ShardedModel):
                class Meta:
                    table_name = "log"

                key = UnicodeAttribute(hash_key=True)
                user_id = UnicodeAttribute()
                shards = Sharding(HashedShards(4, attributes=("user",)))

    def test_hashed_attributes_must_be_a_sequence(self) -> None:
        with pytest.raises(ShardingDefinitionError, match=r"attributes=\('user_id',\)"):
            HashedShards(4, attributes="user_id")


class AuditLog(ShardedModel):
    class Meta:
        table_name = "audit_log"

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(10))


class ArchivedAuditLog(AuditLog):
    """Inherits the sharding declaration."""


class WideAuditLog(AuditLog):
    """Overrides the strategy under the same name."""

    shards = Sharding(HashedShards(16), separator="#")


class TestDescriptorAccess:
    """On the class the descriptor is the manager of that class; on an instance, its shard."""

    def test_class_access_is_a_manager_bound_to_the_owner(self) -> None:
        manager = AuditLog.shards
        assert isinstance(manager, ShardManager)
        assert manager.model is AuditLog
        assert ArchivedAuditLog.shards.model is ArchivedAuditLog
        assert manager.attribute == "file_path"
        assert manager.read_shards("/f") == tuple(range(1, 11))
        assert manager.physical_key("/f", 3) == "/f_3"
        assert manager.decode("/f_3") == ("/f", 3)
        assert manager.logical_key("a_b_12") == "a_b"

    def test_subclass_overrides_strategy(self) -> None:
        assert WideAuditLog.shards.shard_count("/f") == 16
        assert WideAuditLog.shards.physical_key("/f", 2) == "/f#2"
        assert AuditLog.shards.shard_count("/f") == 10

    def test_instance_access_is_the_shard(self) -> None:
        item = AuditLog("/f", 1)
        assert item.shards is None
        item = AuditLog.from_raw_data({"file_path": {"S": "/f_7"}, "accessed_at": {"N": "1"}})
        assert item.shards == 7
        assert item.file_path == "/f"
        with pytest.raises(AttributeError, match="cannot be assigned"):
            item.shards = 3  # type: ignore[assignment]

    def test_fixed_strategies_cannot_grow(self) -> None:
        with pytest.raises(Exception, match="fixed shard count"):
            AuditLog.shards.grow("/f")
        assert [(entry.at, entry.count) for entry in AuditLog.shards.history("/f")] == [(0.0, 10)]


class TestShardedIndexDefinitionErrors:
    """A sharded global index whose suffixed attribute another key needs, or that a ShardedModel
    does not carry, fails when the model is defined, naming model, attribute and fix."""

    @staticmethod
    def index(hash_name: str, index_name: str, attribute: type = UnicodeAttribute) -> type:
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        meta = type("Meta", (), {"index_name": index_name, "projection": AllProjection()})
        return type(f"Index_{index_name}", (GlobalSecondaryIndex,), {
            "Meta": meta, hash_name: attribute(hash_key=True), "shards": Sharding(HashedShards(4)),
        })

    @staticmethod
    def doc(index: type) -> Any:
        """``Doc``, keyed by ``doc_id``, its table sharded, ``index`` declared as ``by_day``."""

        class Doc(ShardedModel):
            class Meta:
                table_name = "doc"

            doc_id = UnicodeAttribute(hash_key=True)
            day = UnicodeAttribute()
            by_day = index()
            shards = Sharding(RandomShards(2))

        return Doc

    def test_index_keyed_on_a_number_attribute(self) -> None:
        by_size = self.index("size", "by_size", NumberAttribute)
        with pytest.raises(ShardingDefinitionError, match=r"Doc\.size: .*by_size.*UnicodeAttribute"):

            class Doc(ShardedModel):
                class Meta:
                    table_name = "doc"

                doc_id = UnicodeAttribute(hash_key=True)
                size = NumberAttribute()
                index = by_size()
                shards = Sharding(RandomShards(2))

    def test_index_keyed_on_the_table_range_key(self) -> None:
        by_version = self.index("version", "by_version")
        with pytest.raises(ShardingDefinitionError, match=r"Doc\.version: .*range key"):

            class Doc(ShardedModel):
                class Meta:
                    table_name = "doc"

                doc_id = UnicodeAttribute(hash_key=True)
                version = UnicodeAttribute(range_key=True)
                index = by_version()
                shards = Sharding(RandomShards(2))

    def test_attribute_shared_with_another_index(self) -> None:
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        sharded = self.index("day", "by_day")

        class Plain(GlobalSecondaryIndex):  # type: ignore[type-arg]
            class Meta:
                index_name = "plain_by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)

        with pytest.raises(ShardingDefinitionError, match=r"Doc\.day: .*'plain_by_day'.*own"):

            class Doc(ShardedModel):
                class Meta:
                    table_name = "doc"

                doc_id = UnicodeAttribute(hash_key=True)
                day = UnicodeAttribute()
                index = sharded()
                plain = Plain()
                shards = Sharding(RandomShards(2))

    def test_sharded_index_on_a_plain_model_is_refused_on_use(self) -> None:
        by_day = self.index("day", "by_day_plain")

        class Doc(Model):
            class Meta:
                table_name = "doc"

            doc_id = UnicodeAttribute(hash_key=True)
            day = UnicodeAttribute()
            index = by_day()

        with pytest.raises(ShardingDefinitionError, match="ShardedModel"):
            Doc.index.shards  # noqa: B018

    def test_sharding_on_a_local_index_is_refused(self) -> None:
        from pynamodb.indexes import AllProjection, LocalSecondaryIndex

        # Python < 3.12 wraps errors raised by __set_name__ in RuntimeError (see test_on_plain_model).
        with pytest.raises((ShardingDefinitionError, RuntimeError)) as info:

            class ByTime(LocalSecondaryIndex):  # type: ignore[type-arg]
                class Meta:
                    index_name = "by_time"
                    projection = AllProjection()

                doc_id = UnicodeAttribute(hash_key=True)
                at = NumberAttribute(range_key=True)
                shards = Sharding(RandomShards(2))

        error = info.value if isinstance(info.value, ShardingDefinitionError) else info.value.__cause__
        assert isinstance(error, ShardingDefinitionError)
        assert "ByTime.shards: a local secondary index shares the table's partition key" in str(error)

    def test_cursor_secret_on_an_index_is_refused(self) -> None:
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        class ByDay(GlobalSecondaryIndex):  # type: ignore[type-arg]
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)
            shards = Sharding(HashedShards(4), cursor_secret="s3cret")

        with pytest.raises(ShardingDefinitionError, match=r"Doc\.day: .*cursor_secret.*model's Sharding"):
            self.doc(ByDay)

    def test_legacy_unsharded_on_an_index_reads_bare_values(self) -> None:
        """An index adopted in place (legacy_unsharded) decodes a bare value as itself, and a
        value whose suffix is above every shard the index can have as a bare value too."""
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        class ByDay(GlobalSecondaryIndex):  # type: ignore[type-arg]
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)
            shards = Sharding(HashedShards(4), legacy_unsharded=True)

        manager = self.doc(ByDay).by_day.shards
        assert manager.legacy_unsharded
        assert manager.read_targets("20160226") == (-1, 1, 2, 3, 4)
        assert manager.decode_stored("20160226") == ("20160226", None)
        assert manager.decode_stored("2016_12") == ("2016_12", None)  # 12 > 4 shards
        assert manager.decode_stored("20160226_3") == ("20160226", 3)


class TestIndexOnlyDefinition:
    """A ShardedModel without a Sharding of its own whose global index declares one keeps its
    table keys as they are: one shard, stored as the logical key."""

    @staticmethod
    def by_day() -> type:
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        meta = type("Meta", (), {"index_name": "by_day", "projection": AllProjection()})
        return type("ByDay", (GlobalSecondaryIndex,), {
            "Meta": meta, "day": UnicodeAttribute(hash_key=True), "shards": Sharding(HashedShards(4)),
        })

    @classmethod
    def index_only_doc(cls) -> Any:
        """``Doc``, keyed by ``doc_id``, whose only Sharding is on its index ``by_day``."""
        by_day = cls.by_day()

        class Doc(ShardedModel):
            class Meta:
                table_name = "doc"

            doc_id = UnicodeAttribute(hash_key=True)
            day = UnicodeAttribute()
            index = by_day()

        return Doc

    def test_table_keys_are_stored_as_they_are(self) -> None:
        from pynamodb_sharding._descriptor import shard_manager

        doc_model = self.index_only_doc()
        manager = shard_manager(doc_model)
        assert manager.index_only
        assert manager.read_shards("doc_7") == (1,)
        assert manager.physical_key("doc_7", 1) == "doc_7"
        assert manager.decode("doc_7") == ("doc_7", 1)
        assert manager.decode("doc") == ("doc", 1)
        assert doc_model.index.shards.physical_key("20160226", 3) == "20160226_3"
        doc = doc_model("a_2", day="20160226")
        assert doc.serialize()["doc_id"] == {"S": "a_2"}
        assert doc_model._serialize_keys("a_2") == ("a_2", None)  # PynamoDB's own, as for a plain model

    def test_subclass_stays_index_only_and_may_shard_its_table(self) -> None:
        Doc = self.index_only_doc()

        class Child(Doc):
            pass

        class Sharded(Doc):
            shards = Sharding(RandomShards(3))

        from pynamodb_sharding._descriptor import shard_manager

        assert shard_manager(Child).index_only
        assert not shard_manager(Sharded).index_only
        assert Sharded.shards.read_shards("k") == (1, 2, 3)

    def test_neither_table_nor_index_sharding(self) -> None:
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        class Plain(GlobalSecondaryIndex):  # type: ignore[type-arg]
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)

        with pytest.raises(ShardingDefinitionError,
                           match=r"Doc: a ShardedModel needs a Sharding descriptor.*GlobalSecondaryIndex"):

            class Doc(ShardedModel):
                class Meta:
                    table_name = "doc"

                doc_id = UnicodeAttribute(hash_key=True)
                day = UnicodeAttribute()
                index = Plain()

    def test_number_table_hash_key_is_refused_clearly(self) -> None:
        by_day = self.by_day()
        with pytest.raises(ShardingDefinitionError, match=r"Doc\.doc_id: .*NumberAttribute.*shards only an index"):

            class Doc(ShardedModel):
                class Meta:
                    table_name = "doc"

                doc_id = NumberAttribute(hash_key=True)
                day = UnicodeAttribute()
                index = by_day()


class TestLayoutDefinition:
    """``layout="multi_attribute"`` and ``shard_attribute`` are declared only where they can be."""

    def test_shard_attribute_needs_the_multi_attribute_layout(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="layout='multi_attribute'"):
            Sharding(HashedShards(4), shard_attribute="day_shard")
        with pytest.raises(ShardingDefinitionError, match="'suffixed' or 'multi_attribute'"):
            Sharding(HashedShards(4), layout="multi")  # type: ignore[arg-type]

    def test_layout_on_a_table_is_refused(self) -> None:
        with pytest.raises(ShardingDefinitionError, match="for the Sharding of a GlobalSecondaryIndex"):
            class Table(ShardedModel):
                class Meta:
                    table_name = "t"

                pk = UnicodeAttribute(hash_key=True)
                shards = Sharding(HashedShards(4), layout="multi_attribute")

    def test_shard_attribute_taken_by_the_model_is_refused(self) -> None:
        from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

        class Clash(GlobalSecondaryIndex["Taken"]):
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)
            shards = Sharding(HashedShards(4), layout="multi_attribute", shard_attribute="note")

        with pytest.raises(ShardingDefinitionError, match="'note', which Taken already uses"):
            class Taken(ShardedModel):
                class Meta:
                    table_name = "taken"

                pk = UnicodeAttribute(hash_key=True)
                day = UnicodeAttribute()
                note = UnicodeAttribute()
                by_day = Clash()
                shards = Sharding(HashedShards(2))


class TestIndexAsyncReads:
    """A sharded index's ``aquery``/``acount``: a ``ShardedIndex`` keeps its own (typed) ones; an
    index on PynamoDB's ``GlobalSecondaryIndex`` is given the same calls by ``Sharding``."""

    @staticmethod
    def index(base: type) -> type:
        from pynamodb.indexes import AllProjection

        meta = type("Meta", (), {"index_name": "by_day", "projection": AllProjection()})
        return type(f"ByDay_{base.__name__}", (base,), {
            "Meta": meta, "day": UnicodeAttribute(hash_key=True), "shards": Sharding(HashedShards(4)),
        })

    def test_a_sharded_index_keeps_its_own(self) -> None:
        from pynamodb_sharding import ShardedIndex

        index = self.index(ShardedIndex)
        assert index.aquery is ShardedIndex.aquery
        assert index.acount is ShardedIndex.acount

    def test_a_global_secondary_index_is_given_them(self) -> None:
        from pynamodb.indexes import GlobalSecondaryIndex

        index = self.index(GlobalSecondaryIndex)
        assert index.aquery.__name__ == "_index_aquery"
        assert index.acount.__name__ == "_index_acount"
