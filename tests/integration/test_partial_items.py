"""Items read with a projection that leaves out the key cannot be written whole.

Proves: the library fetches the key attributes of every item it reads (to decode and merge),
so ``get``/``batch_get``/``query`` with ``attributes_to_get=["body"]`` return items that have
a key but lack the other attributes. A ``save()``, batch put or transactional put of such an
item would replace the stored item without them; PynamoDB refuses the same write (``ValueError``,
its key is missing), and so does the library (``PartialItemError``, a ``ValueError``), before
sending. ``refresh()`` makes the item whole again; ``update`` is allowed. The raw table is
checked with boto3, and a plain ``Model`` is the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import PartialItemError, RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing import record_requests
from tests.raw import raw_items

Bind = Callable[..., Any]


class Note(ShardedModel):
    class Meta:
        table_name = "partial_note"

    owner = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    tags = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


class PlainNote(Model):
    class Meta:
        table_name = "partial_note_plain"

    owner = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    tags = UnicodeAttribute(null=True)


READS: dict[str, Callable[[Any], Any]] = {
    "get": lambda model: model.get("ann", 1, attributes_to_get=["body"]),
    "batch_get": lambda model: next(iter(model.batch_get([("ann", 1)], attributes_to_get=["body"]))),
    "query": lambda model: next(iter(model.query("ann", attributes_to_get=["body"]))),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_full_put_of_a_projected_item_is_refused_as_in_pynamodb(dynamodb_models: Bind, read: str) -> None:
    dynamodb_models(Note, PlainNote)
    refused: dict[type[Model], type[BaseException]] = {}
    for model in (Note, PlainNote):
        model("ann", 1, body="b", tags="keep me").save()
        item = READS[read](model)
        assert item.body == "b"
        assert item.tags is None  # not fetched
        with pytest.raises(ValueError, match=r"attributes_to_get|cannot be None|key") as raised:
            item.save()
        refused[model] = type(raised.value)
    assert refused[Note] is PartialItemError
    assert [raw.get("tags") for raw in raw_items(Note)] == [{"S": "keep me"}]


def test_batch_and_transactional_puts_are_refused_before_sending(dynamodb_models: Bind) -> None:
    dynamodb_models(Note)
    Note("ann", 1, body="b", tags="keep me").save()
    item = Note.get("ann", 1, attributes_to_get=["body"])
    with record_requests(Note) as sent:
        with pytest.raises(PartialItemError, match="refresh"), Note.batch_write() as batch:
            batch.save(item)
        connection = Note._get_connection().connection
        with pytest.raises(PartialItemError), TransactWrite(connection=connection) as transaction:
            transaction.save(item)
    assert "BatchWriteItem" not in sent.requests
    assert "TransactWriteItems" not in sent.requests
    assert [raw.get("tags") for raw in raw_items(Note)] == [{"S": "keep me"}]


def test_refresh_makes_it_whole_and_update_is_allowed(dynamodb_models: Bind) -> None:
    dynamodb_models(Note)
    Note("ann", 1, body="b", tags="keep me").save()
    item = Note.get("ann", 1, attributes_to_get=["body"])
    item.update(actions=[Note.body.set("b2")])  # sends only the action; returns the whole item
    item.body = "b3"
    item.save()
    assert (Note.get("ann", 1).body, Note.get("ann", 1).tags) == ("b3", "keep me")
    again = Note.get("ann", 1, attributes_to_get=["body"])
    again.refresh()
    again.body = "b4"
    again.save()
    assert (Note.get("ann", 1).body, Note.get("ann", 1).tags) == ("b4", "keep me")


def test_a_projection_that_names_the_key_is_whole_enough(dynamodb_models: Bind) -> None:
    """As in PynamoDB: asking for the key attributes too makes the item savable."""
    dynamodb_models(Note)
    Note("ann", 1, body="b").save()
    item = Note.get("ann", 1, attributes_to_get=["owner", "at", "body"])
    item.body = "b2"
    item.save()
    assert Note.get("ann", 1).body == "b2"


def test_delete_and_transactional_update_of_a_projected_item_are_allowed(dynamodb_models: Bind) -> None:
    """Only full puts need the whole item: deletes, updates and condition checks do not."""
    dynamodb_models(Note)
    Note("ann", 1, body="b", tags="t").save()
    Note("ann", 2, body="b", tags="t").save()
    first = Note.get("ann", 1, attributes_to_get=["body"])
    second = Note.get("ann", 2, attributes_to_get=["body"])
    connection = Note._get_connection().connection
    with TransactWrite(connection=connection) as transaction:
        transaction.update(first, actions=[Note.tags.set("u")])
        transaction.condition_check(Note, "ann", 2, condition=Note.body == "b")
    assert Note.get("ann", 1).tags == "u"
    second.delete()
    assert [raw["at"]["N"] for raw in raw_items(Note)] == ["1"]
