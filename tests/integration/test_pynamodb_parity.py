"""PynamoDB behaviours a sharded model keeps, each beside a plain PynamoDB model.

Proves: ``batch_get`` accepts every key sequence PynamoDB accepts (tuples, repeats, any
iterable) and lists of ``[hash, range]`` pairs;
``to_dynamodb_dict`` -> ``from_dynamodb_dict``/``from_raw_data`` rebuilds the same item in the
same shard, so an item cached outside DynamoDB is updated and deleted where it is stored
(no second copy), and the dict is what the table holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from tests.raw import raw_items


class Event(ShardedModel):
    class Meta:
        table_name = "parity_event"

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)
    shards = Sharding(RandomShards(8))


class PlainEvent(Model):
    class Meta:
        table_name = "parity_plain_event"

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)


Bind = Callable[..., Any]


@pytest.mark.parametrize(
    "keys",
    [[["s", 1], ["s", 2]], [("s", 1), ["s", 2], ("s", 1)], (key for key in [["s", 2], ("s", 1)])],
    ids=["lists", "mixed-with-repeat", "generator"],
)
def test_batch_get_accepts_pynamodb_key_sequences(dynamodb_models: Bind, keys: Any) -> None:
    dynamodb_models(Event, PlainEvent)
    keys = list(keys)
    for model in (Event, PlainEvent):
        for n in (1, 2, 3):
            model("s", n).save()
    # PynamoDB 6.1 puts the keys in a set, so its reference call needs tuples; the sharded
    # model also takes the lists PynamoDB's docs show as ``[hash, range]`` pairs.
    plain = sorted((item.stream, item.seq) for item in PlainEvent.batch_get([tuple(key) for key in keys]))
    sharded = sorted((item.stream, item.seq) for item in Event.batch_get(keys))
    assert [("s", 1), ("s", 2)] == plain
    assert plain == sharded


@pytest.mark.parametrize("rebuild", ["from_dynamodb_dict", "from_raw_data"])
def test_dict_round_trip_keeps_the_shard(dynamodb_models: Bind, rebuild: str) -> None:
    dynamodb_models(Event, PlainEvent)
    for model in (Event, PlainEvent):
        model("s", 1, body="v1").save()
        item = model.get("s", 1)
        cached = json.dumps(item.to_dynamodb_dict())  # e.g. kept in Redis or sent on a queue
        data = json.loads(cached)
        if rebuild == "from_raw_data":
            again = model.from_raw_data(data)
        else:
            again = model()
            again.from_dynamodb_dict(data)
        assert ("s", 1, "v1") == (again.stream, again.seq, again.body)
        if model is Event:
            assert item.shards == again.shards
            sharded_dict, sharded_again = item.to_dynamodb_dict(), again
        again.body = "v2"
        again.save()
    assert [("s", 1, "v2")] == [(i.stream, i.seq, i.body) for i in Event.query("s")]
    assert 1 == len(raw_items(Event))
    (stored,) = raw_items(Event)
    assert stored["stream"] == sharded_dict["stream"]  # the dict holds the stored key
    sharded_again.delete()
    assert [] == raw_items(Event)


def test_unsaved_item_round_trips_into_the_shard_it_is_then_saved_to(dynamodb_models: Bind) -> None:
    dynamodb_models(Event)
    data = Event("s", 7, body="queued").to_dynamodb_dict()
    again = Event.from_raw_data(data)
    again.save()
    (stored,) = raw_items(Event)
    assert data["stream"] == stored["stream"]
    assert ["queued"] == [item.body for item in Event.query("s")]
