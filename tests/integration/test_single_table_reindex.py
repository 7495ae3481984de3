"""Single-table design: several models on one table and one index, one index adopted model by
model (DynamoDB Local).

The table's items were written by the application's plain PynamoDB models: orders, tickets,
users and invoices, each with index values of its own in the ``by_state`` index. ``Order`` and
``Invoice`` then shard the index (``legacy_unsharded=True``, one shared declaration); tickets
and users stay plain. ``migrate reindex`` of one model rewrites only that model's entries (named
by a key prefix, by values, or by a discriminator); after each job every model finds all its own
items, and raw boto3 reads show which index values are stored sharded. A job that would rewrite
other models' entries is refused, the dry run lists the entries per index value, and two models
that declare the index sharded differently are refused before anything is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model

from pynamodb_sharding import (
    HashedShards,
    MigrationError,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardingDefinitionError,
)
from pynamodb_sharding.migration import JobOptions, ReindexJob, plan, reindex
from pynamodb_sharding.testing import record_requests
from tests.raw import put_raw, raw_items

TABLE = "single_table_app"
#: Each model's index values, ten items each.
VALUES = {"ORDER": ("open", "shipped"), "TICKET": ("new", "solved"), "USER": ("active",), "INVOICE": ("due", "paid")}


class PlainByState(GlobalSecondaryIndex[Any]):
    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class ShardedByState(GlobalSecondaryIndex[Any]):
    """The one sharded declaration of the index, shared by the models that shard it."""

    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4), legacy_unsharded=True)


class Item(Model):
    """What every model of the table declares (the application's own base)."""

    class Meta:
        table_name = TABLE

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    state = UnicodeAttribute()
    at = NumberAttribute()


class PlainOrder(Item):
    total = NumberAttribute(null=True)
    by_state = PlainByState()


class PlainTicket(Item):
    subject = UnicodeAttribute(null=True)
    by_state = PlainByState()


class PlainUser(Item):
    email = UnicodeAttribute(null=True)
    by_state = PlainByState()


class PlainInvoice(Item):
    amount = NumberAttribute(null=True)
    by_state = PlainByState()


class Order(Item, ShardedModel):
    """The application's base first, ShardedModel beside it: only the index is sharded."""

    total = NumberAttribute(null=True)
    by_state = ShardedByState()


class Invoice(Item, ShardedModel):
    amount = NumberAttribute(null=True)
    by_state = ShardedByState()


PLAIN = {"ORDER": PlainOrder, "TICKET": PlainTicket, "USER": PlainUser, "INVOICE": PlainInvoice}
#: How each model reads the index.
READERS: dict[str, type[Model]] = {"ORDER": Order, "TICKET": PlainTicket, "USER": PlainUser, "INVOICE": Invoice}


def fill() -> None:
    for prefix, model in PLAIN.items():
        values = VALUES[prefix]
        with model.batch_write() as batch:
            for n in range(10 * len(values)):
                batch.save(model(f"{prefix}#{n}", "item", state=values[n % len(values)], at=n))


def stored_states() -> dict[str, set[str]]:
    """Per model (key prefix): how its items' index values are stored, read with boto3:
    ``"bare"`` or ``"sharded"`` (``<value>_<1..4>``)."""
    found: dict[str, set[str]] = {}
    for raw in raw_items(Order):
        prefix = raw["pk"]["S"].split("#")[0]
        value = raw["state"]["S"]
        base, _, shard = value.rpartition("_")
        sharded = shard.isdigit() and base in VALUES[prefix]
        found.setdefault(prefix, set()).add("sharded" if sharded else "bare")
    return found


def found_by_index() -> dict[str, int]:
    """Per model: how many of its items its own queries of the index find."""
    counts = {}
    for prefix, reader in READERS.items():
        index: Any = reader.by_state  # type: ignore[attr-defined]
        found = [item for value in VALUES[prefix] for item in index.query(value)]
        assert all(item.pk.startswith(f"{prefix}#") for item in found)
        counts[prefix] = len({item.pk for item in found})
    return counts


EVERY_ITEM = {"ORDER": 20, "TICKET": 20, "USER": 10, "INVOICE": 20}


@pytest.fixture
def table(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainOrder, PlainTicket, PlainUser, PlainInvoice, Order, Invoice)
    fill()
    assert EVERY_ITEM == found_by_index()


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    return JobOptions(total_segments=2, page_size=25, checkpoint_table=checkpoint_table)


@pytest.mark.usefixtures("table")
def test_each_model_reindexes_its_own_entries_and_every_model_finds_all_its_items(options: JobOptions) -> None:
    report = reindex(Order, "by_state", options, key_prefix="ORDER#")
    assert (report.tally.written, report.tally.read) == (20, 70)
    assert {"ORDER": {"sharded"}, "TICKET": {"bare"}, "USER": {"bare"}, "INVOICE": {"bare"}} == stored_states()
    assert EVERY_ITEM == found_by_index()

    report = reindex(Invoice, "by_state", options, values=["due", "paid"])
    assert report.tally.written == 20
    assert {"ORDER": {"sharded"}, "TICKET": {"bare"}, "USER": {"bare"}, "INVOICE": {"sharded"}} == stored_states()
    assert EVERY_ITEM == found_by_index()
    # Saves through the sharded models store sharded values; the plain ones' stay bare.
    Order("ORDER#99", "item", state="open", at=99).save()
    PlainTicket("TICKET#99", "item", state="new", at=99).save()
    assert {"ORDER": {"sharded"}, "TICKET": {"bare"}, "USER": {"bare"}, "INVOICE": {"sharded"}} == stored_states()
    assert {**EVERY_ITEM, "ORDER": 21, "TICKET": 21} == found_by_index()


@pytest.mark.usefixtures("table")
def test_a_job_that_would_rewrite_other_models_entries_is_refused(options: JobOptions) -> None:
    with record_requests(Order) as sent, pytest.raises(MigrationError) as refused:
        reindex(Order, "by_state", options)
    message = str(refused.value)
    assert "PlainTicket" in message
    assert "PlainUser" in message
    assert "PlainInvoice" in message
    assert "PlainOrder" not in message  # the model as it was declared before: its items are Order's
    assert "--values" in message
    assert "--key-prefix" in message
    assert {} == dict(sent.requests)
    assert {"ORDER": {"bare"}, "TICKET": {"bare"}, "USER": {"bare"}, "INVOICE": {"bare"}} == stored_states()


@pytest.mark.usefixtures("table")
def test_the_dry_run_lists_the_entries_per_index_value(options: JobOptions) -> None:
    the_plan = plan(ReindexJob(Order, "by_state", key_prefix="ORDER#"), options, sample_size=16 * 100)
    assert (("active", 0, 10), ("due", 0, 10), ("new", 0, 10), ("open", 10, 0), ("paid", 0, 10),
            ("shipped", 10, 0), ("solved", 0, 10)) == the_plan.index_values
    lines = list(the_plan.lines())
    assert "value:      'open': 10 entries rewritten" in lines
    assert "value:      'new': 0 entries rewritten, 10 left as they are (other models')" in lines
    assert the_plan.estimated_rewrites == 20
    assert {"ORDER": {"bare"}, "TICKET": {"bare"}, "USER": {"bare"}, "INVOICE": {"bare"}} == stored_states()


class RogueByState(GlobalSecondaryIndex[Any]):
    class Meta:
        index_name = "by_state"
        projection = AllProjection()

    state = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(8))


class Rogue(Item, ShardedModel):
    """Declares the same index sharded another way (a Meta of its own, naming the same table, so
    it is bound only where the test binds it)."""

    class Meta:
        table_name = TABLE

    note = UnicodeAttribute(null=True)
    by_state = RogueByState()


def test_declarations_that_disagree_about_the_index_are_refused_before_sending(
    dynamodb_models: Callable[..., Any], options: JobOptions,
) -> None:
    dynamodb_models(Order, Rogue)
    for attempt in (lambda: Rogue("ROGUE#1", "item", state="x", at=1).save(),
                    lambda: list(Rogue.by_state.query("x")),
                    lambda: Order("ORDER#1", "item", state="open", at=1).save(),
                    lambda: reindex(Order, "by_state", options, key_prefix="ORDER#")):
        with record_requests(Order) as sent, pytest.raises(ShardingDefinitionError) as refused:
            attempt()
        message = str(refused.value)
        assert "Order" in message
        assert "Rogue" in message
        assert "'by_state'" in message
        assert "HashedShards(8)" in message
        assert "RandomShards(4)" in message
        assert "declare the same Sharding on both" in message
        assert {} == dict(sent.requests)
    assert [] == raw_items(Order)


class Entity(ShardedModel):
    """A PynamoDB discriminator hierarchy whose root shards the index for every class."""

    class Meta:
        table_name = "single_table_entities"

    pk = UnicodeAttribute(hash_key=True)
    sk = UnicodeAttribute(range_key=True)
    kind = DiscriminatorAttribute()
    state = UnicodeAttribute()
    at = NumberAttribute()
    by_state = ShardedByState()


class OrderEntity(Entity, discriminator="order"):
    pass


class TicketEntity(Entity, discriminator="ticket"):
    pass


def test_a_model_with_a_discriminator_reindexes_the_items_it_names(
    dynamodb_models: Callable[..., Any], options: JobOptions,
) -> None:
    dynamodb_models(Entity)
    raw = [{"pk": {"S": f"{kind}-{n}"}, "sk": {"S": "item"}, "kind": {"S": kind}, "state": {"S": "open"},
            "at": {"N": str(n)}} for kind in ("order", "ticket") for n in range(10)]
    put_raw(Entity, raw)
    assert reindex(OrderEntity, "by_state", options).tally.written == 10
    by_kind: dict[str, set[bool]] = {}
    for item in raw_items(Entity):
        by_kind.setdefault(item["kind"]["S"], set()).add(item["state"]["S"] != "open")
    assert {"order": {True}, "ticket": {False}} == by_kind
    assert 10 == len(list(OrderEntity.by_state.query("open")))
    assert 20 == len(list(Entity.by_state.query("open")))  # the root reads every class's entries
