"""HashedShards finds an item by any value PynamoDB stores identically to the one it was saved with.

Proves, beside a plain PynamoDB model: an item saved with a naive ``datetime`` range key is
read and deleted with the aware value read back (the delete really deletes), and one saved
with ``5.0`` is read with ``5``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.exceptions import PynamoDBException
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding, ShardKeyError
from tests.raw import raw_items


class Visit(ShardedModel):
    class Meta:
        table_name = "visit"

    page = UnicodeAttribute(hash_key=True)
    at = UTCDateTimeAttribute(range_key=True)
    shards = Sharding(HashedShards(10))


class PlainVisit(Model):
    class Meta:
        table_name = "plain_visit"

    page = UnicodeAttribute(hash_key=True)
    at = UTCDateTimeAttribute(range_key=True)


class Score(ShardedModel):
    class Meta:
        table_name = "score"

    board = UnicodeAttribute(hash_key=True)
    points = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(10))


def test_naive_datetime_saved_aware_datetime_read_and_deleted(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Visit, PlainVisit)
    naive = datetime(2016, 2, 26, 12, 30)
    aware = naive.replace(tzinfo=UTC)
    for model in (Visit, PlainVisit):
        model("/index.html", naive).save()
        got = model.get("/index.html", aware)
        assert aware == got.at
        model("/index.html", aware).delete()
        assert [] == raw_items(model)


def test_float_saved_integer_read(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(Score)
    Score("daily", 5.0).save()
    assert 5 == Score.get("daily", 5).points
    assert [5] == [item.points for item in Score.batch_get([("daily", 5)])]


class PlainScore(Model):
    class Meta:
        table_name = "plain_score"

    board = UnicodeAttribute(hash_key=True)
    points = NumberAttribute(range_key=True)


class RandomScore(ShardedModel):
    class Meta:
        table_name = "random_score"

    board = UnicodeAttribute(hash_key=True)
    points = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


@pytest.mark.parametrize("model", [Score, RandomScore], ids=["hashed", "random"])
def test_a_number_key_that_is_no_number_names_the_attribute_before_sending(
    dynamodb_models: Callable[..., Any], model: type[ShardedModel],
) -> None:
    """PynamoDB sends ``'abc'`` for a NumberAttribute key and DynamoDB refuses it ("A value
    provided cannot be converted into a number"); the library computes the key's shard first,
    and says what is wrong before sending (it raised a bare ``decimal.InvalidOperation``)."""
    dynamodb_models(model, PlainScore)
    calls = {"get": lambda m: m.get("weekly", "abc"), "save": lambda m: m("weekly", "abc").save(),
             "delete": lambda m: m("weekly", "abc").delete()}
    for name, call in calls.items():
        with pytest.raises(PynamoDBException, match="cannot be converted into a number"):
            call(PlainScore)
        with pytest.raises(ShardKeyError) as raised:
            call(model)
        assert f"{model.__name__}.points is a NumberAttribute, and 'abc' is not a number: pass a number" in str(
            raised.value), name
    assert [] == raw_items(model)
