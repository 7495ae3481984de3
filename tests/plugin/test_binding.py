"""Binding points models at DynamoDB Local with fresh tables and restores their Meta exactly.

Runs against the session's `dynamodb_local`: tables are created (on-demand billing, GSIs
included) and deleted, every rewritten Meta attribute comes back as it was (absent ones stay
absent), a parent and a subclass sharing one Meta are bound once, and companion models
returned by `companion_models()` are bound with their model, once even when shared.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding.testing import DynamoDBLocal, ModelBinding, bound_models
from pynamodb_sharding.testing.local import _dynamodb_client


def table_names(server: DynamoDBLocal) -> set[str]:
    return set(_dynamodb_client(server).list_tables()["TableNames"])


class ByDay(GlobalSecondaryIndex["Event"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()
        read_capacity_units = 5  # ignored under on-demand billing; must not break create_table
        write_capacity_units = 5

    day = UnicodeAttribute(hash_key=True)


class Event(Model):
    class Meta:
        table_name = "events"
        host = "https://dynamodb.example.invalid"

    event_id = UnicodeAttribute(hash_key=True)
    day = UnicodeAttribute()
    by_day = ByDay()


class SpecialEvent(Event):
    """No Meta of its own: shares Event.Meta, hence Event's table."""


class Counter(Model):
    class Meta:
        table_name = "counters"

    name = UnicodeAttribute(hash_key=True)
    value = NumberAttribute(default=0)


class Tracked(Model):
    """Stands in for a ShardedModel: its strategy needs the Counter table beside its own."""

    class Meta:
        table_name = "tracked"

    key = UnicodeAttribute(hash_key=True)

    @classmethod
    def companion_models(cls) -> list[type[Model]]:
        return [Counter]


class AlsoTracked(Model):
    class Meta:
        table_name = "also_tracked"

    key = UnicodeAttribute(hash_key=True)

    @classmethod
    def companion_models(cls) -> list[type[Model]]:
        return [Counter]


def meta_snapshot(model: type[Model]) -> dict[str, Any]:
    return dict(vars(model.Meta))


class TestTables:
    """Tables are created for the test, usable, and deleted afterwards."""

    def test_creates_on_demand_tables_with_gsis_and_deletes_them(self, dynamodb_local: DynamoDBLocal) -> None:
        with bound_models(dynamodb_local, Event) as tables:
            assert tables[Event] in table_names(dynamodb_local)
            description = Event.describe_table()
            assert description["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
            Event("e1", day="20160226").save()
            Event("e2", day="20160226").save()
            assert sorted(e.event_id for e in Event.by_day.query("20160226")) == ["e1", "e2"]
        assert tables[Event] not in table_names(dynamodb_local)

    def test_fixture_binds_and_returns_table_names(self, dynamodb_models: Any) -> None:
        tables = dynamodb_models(Counter)
        assert tables[Counter].startswith("counters_")
        assert Counter.Meta.table_name == tables[Counter]
        Counter("hits", value=3).save()
        assert Counter.get("hits").value == 3


class TestMetaRestored:
    """Every rewritten Meta attribute and the cached connection come back exactly."""

    def test_restores_values_and_absence(self, dynamodb_local: DynamoDBLocal) -> None:
        before = meta_snapshot(Event)
        del Event.Meta.aws_session_token  # absent before binding: must be absent after
        before.pop("aws_session_token")
        with bound_models(dynamodb_local, Event):
            assert Event.Meta.host == dynamodb_local.endpoint
            assert Event.Meta.aws_access_key_id == dynamodb_local.aws_access_key_id
            assert Event.Meta.table_name != "events"
        assert meta_snapshot(Event) == before
        assert "aws_session_token" not in vars(Event.Meta)
        assert "_connection" not in vars(Event)
        Event.Meta.aws_session_token = None

    def test_restores_when_the_block_raises(self, dynamodb_local: DynamoDBLocal) -> None:
        before = meta_snapshot(Counter)
        with pytest.raises(RuntimeError, match="boom"), bound_models(dynamodb_local, Counter) as tables:
            raise RuntimeError("boom")
        assert meta_snapshot(Counter) == before
        assert tables[Counter] not in table_names(dynamodb_local)


class TestSharedMeta:
    """A subclass without its own Meta shares its parent's table; the Meta is bound once."""

    def test_parent_and_subclass_bound_once(self, dynamodb_local: DynamoDBLocal) -> None:
        before = meta_snapshot(Event)
        with bound_models(dynamodb_local, Event, SpecialEvent) as tables:
            assert tables[Event] == tables[SpecialEvent]
            SpecialEvent("s1", day="d").save()
            assert Event.get("s1").day == "d"
        assert meta_snapshot(Event) == before
        assert Event.Meta.table_name == "events"


class TestCompanions:
    """`companion_models()` tables are bound with their model, each once."""

    def test_companions_bound_and_shared_ones_once(self, dynamodb_local: DynamoDBLocal) -> None:
        with ModelBinding(dynamodb_local) as binding:
            first = binding.bind(Tracked)
            second = binding.bind(AlsoTracked)
            assert set(first) == {Tracked, Counter}
            assert set(second) == {AlsoTracked, Counter}
            assert first[Counter] == second[Counter]
            bound = {first[Tracked], second[AlsoTracked], first[Counter]}
            assert len(bound) == 3
            assert bound <= table_names(dynamodb_local)
            Counter("c").save()
        assert bound.isdisjoint(table_names(dynamodb_local))
        assert Counter.Meta.table_name == "counters"


class TestInvalidInput:
    """What is not a model class is refused with a message saying what to pass."""

    not_models: ClassVar[list[object]] = [Event(), "Event", int]

    @pytest.mark.parametrize("value", not_models)
    def test_refuses_non_models(self, dynamodb_local: DynamoDBLocal, value: Any) -> None:
        with pytest.raises(TypeError, match="is not a PynamoDB Model class"), bound_models(dynamodb_local, value):
            pass
