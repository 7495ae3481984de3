"""A write that first looks up where its item is stored fails with the write's own PynamoDB error.

``delete()``, ``update()`` and ``save()`` of an item whose shard is unknown (built by hand on a
``RandomShards`` model) first read its candidate shards (one ``BatchGetItem``). When that read
fails, code written for PynamoDB catches ``DeleteError``, ``UpdateError`` and ``PutError``
around those calls: a ``GetError`` went past it. A plain ``Model`` making the same call is the
reference, on the real DynamoDB Local with the fault injected through botocore's hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, PynamoDBException, UpdateError
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from tests.async_loop import Loop
from tests.faults import Faults
from tests.raw import raw_items


class Note(ShardedModel):
    class Meta:
        table_name = "lookup_note"
        max_retry_attempts = 0

    board = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    text = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(4))


class PlainNote(Model):
    class Meta:
        table_name = "lookup_plain_note"
        max_retry_attempts = 0

    board = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    text = UnicodeAttribute(null=True)


CALLS: dict[str, tuple[type[PynamoDBException], str, Callable[[type[Any]], Any]]] = {
    "delete": (DeleteError, "DeleteItem", lambda model: model("/b", 1).delete()),
    "update": (UpdateError, "UpdateItem", lambda model: model("/b", 1).update([model.text.set("new")])),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_failed_lookup_raises_the_write_error_pynamodb_raises(dynamodb_models: Callable[..., Any], call: str) -> None:
    dynamodb_models(Note, PlainNote)
    Note("/b", 1, text="old").save()
    PlainNote("/b", 1, text="old").save()
    error, operation, write = CALLS[call]
    plain_faults, faults = Faults(PlainNote, operation), Faults(Note, "BatchGetItem")
    plain_faults.plan, faults.plan = ["denied"], ["denied"]
    with pytest.raises(error) as plain:
        write(PlainNote)
    with pytest.raises(error) as sharded:
        write(Note)
    assert type(plain.value) is type(sharded.value)
    assert ("AccessDeniedException", "AccessDeniedException") == (
        plain.value.cause_response_code, sharded.value.cause_response_code)
    assert str(sharded.value).startswith(f"Failed to {call} item: ")
    assert [("/b", "old")] == [(item["board"]["S"].rpartition("_")[0], item["text"]["S"]) for item in raw_items(Note)]

    if call == "delete":  # adelete runs the same code on the event loop
        faults.plan = ["denied"]
        loop = Loop()
        try:
            with pytest.raises(DeleteError):
                loop.run(Note("/b", 1).adelete())
        finally:
            loop.close()
        assert 1 == len(raw_items(Note))
