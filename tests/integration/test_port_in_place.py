"""A model ported onto the table its unported application filled, without ``legacy_unsharded``.

The unported app stored every item under its bare key (``ann@example.com``); the ported model
reads shard keys only (``ann@example.com_3``). Its ``get``, ``aget`` and ``batch_get`` of such an
item must not answer that it does not exist: they raise :class:`LegacyItemError`, naming
``legacy_unsharded=True`` and ``migrate reshard``. Where the table holds no bare key, a read that
finds its item sends nothing more, and only a process's first miss on the model looks (one
GetItem of the bare key, one Scan of a few keys); the request counts are checked.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import (
    HashedShards,
    HostContractError,
    LegacyItemError,
    RandomShards,
    ShardedModel,
    Sharding,
    ShardKeyError,
)
from pynamodb_sharding._point_reads import BARE_KEY_SAMPLE
from pynamodb_sharding.testing.plugin import BindModels
from tests.async_loop import Loop


class PlainUser(Model):
    """The unported application's model."""

    class Meta:
        table_name = "port_users"

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()


class User(ShardedModel):
    """The same table, ported with HashedShards and without legacy_unsharded."""

    class Meta:
        table_name = "port_users"

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    shards = Sharding(HashedShards(8))


class LegacyUser(ShardedModel):
    class Meta:
        table_name = "port_users"

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    shards = Sharding(HashedShards(8), legacy_unsharded=True)


class PlainVisit(Model):
    class Meta:
        table_name = "port_visits"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


class Visit(ShardedModel):
    """Random shards and a range key: a get reads every shard in one BatchGetItem."""

    class Meta:
        table_name = "port_visits"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


@contextmanager
def requests_sent(*models: type[Model]) -> Iterator[Counter[str]]:
    """The operations the models' clients send meanwhile, counted."""
    sent: Counter[str] = Counter()

    def count(model: Any = None, **_: Any) -> None:
        sent[model.name] += 1

    clients = {id(model._get_connection().connection.client): model._get_connection().connection.client
               for model in models}
    for client in clients.values():
        client.meta.events.register("before-call.dynamodb", count, unique_id="test-port-count")
    try:
        yield sent
    finally:
        for client in clients.values():
            client.meta.events.unregister("before-call.dynamodb", unique_id="test-port-count")


def test_a_get_of_an_item_the_unported_app_wrote_names_the_fix(dynamodb_models: BindModels, loop: Loop) -> None:
    dynamodb_models(PlainUser, User, LegacyUser)
    PlainUser("ann@example.com", name="Ann").save()  # the unported app
    assert PlainUser.get("ann@example.com").name == "Ann"  # the reference: the item exists

    with pytest.raises(LegacyItemError) as raised:
        User.get("ann@example.com")
    message = str(raised.value)
    assert "User.email" in message
    assert "'ann@example.com'" in message
    assert "legacy_unsharded=True" in message
    assert "pynamodb-sharding migrate reshard tests.integration.test_port_in_place:User" in message
    assert raised.value.docs_url.endswith("errors.html#legacy-item")
    assert isinstance(raised.value, ShardKeyError)  # what a scan of the table raises too

    with pytest.raises(LegacyItemError):  # async: the same code on the loop
        loop.run(User.aget("ann@example.com"))
    with pytest.raises(LegacyItemError):
        list(User.batch_get(["ann@example.com", "bob@example.com"]))
    with pytest.raises(LegacyItemError):
        loop.run(_collect(User.abatch_get(["ann@example.com"])))

    # Declared legacy_unsharded, the model reads it; a new item is written to its shard.
    assert LegacyUser.get("ann@example.com").name == "Ann"
    User("bob@example.com", name="Bob").save()
    assert User.get("bob@example.com").name == "Bob"
    with pytest.raises(User.DoesNotExist):  # absent everywhere: the plain answer
        User.get("nobody@example.com")


async def _collect(result: Any) -> list[Any]:
    return [item async for item in result]


def test_random_shards_and_a_range_key(dynamodb_models: BindModels) -> None:
    dynamodb_models(PlainVisit, Visit)
    PlainVisit("/home", 1).save()
    with pytest.raises(LegacyItemError) as raised:
        Visit.get("/home", 1)
    assert "'/home' with range key 1" in str(raised.value)
    with pytest.raises(Visit.DoesNotExist):  # another range key: not stored bare either
        Visit.get("/home", 2)


def test_misses_cost_nothing_more_once_a_sample_found_only_shards(dynamodb_models: BindModels) -> None:
    """A sharded table: a hit sends its GetItem only; the first miss also reads the bare key and
    samples the table once; later misses send their GetItem only."""
    dynamodb_models(User)
    for n in range(BARE_KEY_SAMPLE + 5):
        User(f"user{n}@example.com", name="x").save()
    with requests_sent(User) as hit:
        User.get("user1@example.com")
    with requests_sent(User) as first_miss, pytest.raises(User.DoesNotExist):
        User.get("nobody@example.com")
    with requests_sent(User) as later_misses:
        for n in range(3):
            with pytest.raises(User.DoesNotExist):
                User.get(f"nobody{n}@example.com")
    assert {"GetItem": 1} == hit
    assert {"GetItem": 2, "Scan": 1} == first_miss
    assert {"GetItem": 3} == later_misses


def test_a_table_with_bare_keys_checks_every_miss(dynamodb_models: BindModels) -> None:
    """Once bare keys were seen (here another key's, from the sample), every miss reads its own
    bare key: an item stored bare later is never answered as missing."""
    dynamodb_models(PlainUser, User)
    PlainUser("old@example.com", name="Old").save()
    with requests_sent(User) as first_miss, pytest.raises(User.DoesNotExist):
        User.get("nobody@example.com")
    PlainUser("late@example.com", name="Late").save()  # the unported app, still running
    with requests_sent(User) as second_miss, pytest.raises(LegacyItemError):
        User.get("late@example.com")
    with requests_sent(User) as third_miss, pytest.raises(User.DoesNotExist):
        User.get("nobody2@example.com")
    assert {"GetItem": 2, "Scan": 1} == first_miss
    assert {"GetItem": 2} == second_miss == third_miss


def test_legacy_models_and_bare_key_requests_are_unchanged(dynamodb_models: BindModels) -> None:
    """A ``legacy_unsharded`` model reads bare keys anyway: a miss sends its reads, nothing more. The
    check's bare read leaves the key guard as it was: a bare key in a request of the model is
    still refused."""
    dynamodb_models(LegacyUser, User)
    with requests_sent(LegacyUser) as miss, pytest.raises(LegacyUser.DoesNotExist):
        LegacyUser.get("nobody@example.com")
    assert {"BatchGetItem": 2} == miss  # the bare key, then the shard's: no GetItem, no Scan
    with pytest.raises(User.DoesNotExist):
        User.get("nobody@example.com")
    client = User._get_connection().connection.client
    with pytest.raises(HostContractError):
        client.get_item(TableName=User.Meta.table_name, Key={"email": {"S": "nobody@example.com"}})


def test_misses_at_once_sample_the_table_once(dynamodb_models: BindModels, loop: Loop) -> None:
    """20 ``aget`` misses at once, the process's first: one Scan samples the table (the other
    misses read their bare keys meanwhile), then misses send their GetItem only."""
    dynamodb_models(User)
    User("ann@example.com", name="Ann").save()

    async def misses(prefix: str) -> int:
        async def miss(n: int) -> int:
            try:
                await User.aget(f"{prefix}{n}@example.com")
            except User.DoesNotExist:
                return 1
            return 0

        return sum(await asyncio.gather(*(miss(n) for n in range(20))))

    with requests_sent(User) as first:
        assert loop.run(misses("nobody")) == 20
    with requests_sent(User) as later:
        assert loop.run(misses("other")) == 20
    assert first["Scan"] == 1
    assert 20 < first["GetItem"] <= 40  # each miss's GetItem, and the bare keys read before the sample settled
    assert {"GetItem": 20} == later
