"""Single-table design: ``migrate reshard`` of one model moves that model's items only.

A table the application's plain models filled holds credentials (``cred-...``) and services
(``svc-...``) under bare keys. ``Credential`` is adopted in place (``legacy_unsharded``); the
services stay plain. A reshard of ``Credential`` that does not say which items are its is
refused, naming ``Service``, and writes nothing (before: it moved the services' items into
"shards", and ``Service.get`` then raised ``DoesNotExist``, found by a new user's port of
Confidant). With ``key_prefix`` (or a discriminator) it moves the credentials only; raw boto3
scans show which keys are stored where, and both models find all their items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import DiscriminatorAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import HashedShards, MigrationError, ShardedModel, Sharding
from pynamodb_sharding.migration import JobOptions, ReshardJob, reshard
from tests.raw import raw_items

TABLE = "single_table_reshard"


class PlainCredential(Model):
    """What wrote the credentials before the deploy (the same attributes as ``Credential``)."""

    class Meta:
        table_name = TABLE

    id = UnicodeAttribute(hash_key=True)
    revision = NumberAttribute(range_key=True)
    name = UnicodeAttribute()


class Service(Model):
    """Another model of the table, staying plain."""

    class Meta:
        table_name = TABLE

    id = UnicodeAttribute(hash_key=True)
    revision = NumberAttribute(range_key=True)
    credentials = UnicodeAttribute()


class Credential(ShardedModel):
    Meta = PlainCredential.Meta

    id = UnicodeAttribute(hash_key=True)
    revision = NumberAttribute(range_key=True)
    name = UnicodeAttribute()
    shards = Sharding(HashedShards(4), legacy_unsharded=True)


class Entity(Model):
    """A discriminated single-table hierarchy's plain root."""

    class Meta:
        table_name = "single_table_reshard_entities"

    id = UnicodeAttribute(hash_key=True)
    revision = NumberAttribute(range_key=True)
    kind = DiscriminatorAttribute()


class PlainAccount(Entity, discriminator="account"):
    pass


class Group(Entity, discriminator="group"):
    pass


class ShardedEntity(ShardedModel):
    Meta = Entity.Meta

    id = UnicodeAttribute(hash_key=True)
    revision = NumberAttribute(range_key=True)
    kind = DiscriminatorAttribute()
    shards = Sharding(HashedShards(4), legacy_unsharded=True)


class Account(ShardedEntity, discriminator="account"):
    pass


@pytest.fixture
def table(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(PlainCredential, Service, Credential)
    with PlainCredential.batch_write() as batch:
        for n in range(10):
            batch.save(PlainCredential(f"cred-{n}", 1, name=f"c{n}"))
    with Service.batch_write() as batch:
        for n in range(5):
            batch.save(Service(f"svc-{n}", 1, credentials=f"cred-{n}"))


def stored_ids() -> list[str]:
    return sorted(raw["id"]["S"] for raw in raw_items(PlainCredential))


@pytest.fixture
def options(checkpoint_table: str) -> JobOptions:
    return JobOptions(total_segments=2, page_size=25, checkpoint_table=checkpoint_table)


def test_an_unscoped_reshard_of_a_shared_table_is_refused_and_writes_nothing(table: None) -> None:
    before = stored_ids()
    with pytest.raises(MigrationError, match=r"reshard Credential: the table .* also holds items of Service.*"
                                             r"key_prefix=.*--key-prefix P.*nothing was written"):
        ReshardJob(Credential)
    assert before == stored_ids()


def test_a_reshard_scoped_by_key_prefix_moves_the_models_items_only(table: None, options: JobOptions) -> None:
    report = reshard(Credential, options, key_prefix="cred-")
    assert report.tally.moved == 10
    stored = stored_ids()
    assert [f"svc-{n}" for n in range(5)] == [key for key in stored if key.startswith("svc")]  # bare, untouched
    assert all(key.rpartition("_")[2].isdigit() for key in stored if key.startswith("cred"))  # sharded
    assert [f"c{n}" for n in range(10)] == [Credential.get(f"cred-{n}", 1).name for n in range(10)]
    assert [f"svc-{n}" for n in range(5)] == sorted(Service.get(f"svc-{n}", 1).id for n in range(5))


def test_a_discriminator_names_the_models_items(dynamodb_models: Callable[..., Any], options: JobOptions) -> None:
    dynamodb_models(Entity, ShardedEntity)
    with Entity.batch_write() as batch:
        for n in range(6):
            batch.save(PlainAccount(f"acct-{n}", 1))
            batch.save(Group(f"grp-{n}", 1))
    report = reshard(Account, options)
    assert report.tally.moved == 6
    bare = sorted(raw["id"]["S"] for raw in raw_items(Entity) if not raw["id"]["S"].rpartition("_")[2].isdigit())
    assert [f"grp-{n}" for n in range(6)] == bare
