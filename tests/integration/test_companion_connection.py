"""The metadata models of ``DynamicShards`` follow the sharded model's connection (DynamoDB Local).

A ``ShardMetadata`` subclass that sets no connection settings of its own talks to the same
endpoint, region and credentials as the sharded model, whether it serves the table's Sharding
or a sharded global secondary index's: the shard counts live beside the data, whatever
``AWS_DEFAULT_REGION`` says. A metadata model whose endpoint, region or credentials differ is
refused when the sharded model is defined, unless it declares ``own_connection = True``; its
timeouts, retries, pool size and extra headers are its own.
"""

from __future__ import annotations

import gc
import json
import re
import socket
import uuid
import weakref
from typing import Any
from urllib.parse import urlsplit

import attrs
import boto3
import botocore.session
import pytest
from botocore.httpsession import URLLib3Session
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import GetError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardingDefinitionError
from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._metadata import ShardMetadata


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the probe is


def define(server: Any, metadata_meta: dict[str, Any]) -> tuple[type[ShardedModel], type[ShardMetadata]]:
    suffix = uuid.uuid4().hex[:8]
    metadata_model = type(f"Shards{suffix}", (ShardMetadata,), {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": f"companion_shards_{suffix}", **metadata_meta}),
    })

    class Meta:
        table_name = f"companion_log_{suffix}"
        host = server.endpoint
        region = server.region
        aws_access_key_id = server.aws_access_key_id
        aws_secret_access_key = server.aws_secret_access_key
        max_retry_attempts = 1
        connect_timeout_seconds = 2

    model = type(f"Log{suffix}", (ShardedModel,), {
        "__module__": __name__,
        "Meta": Meta,
        "path": UnicodeAttribute(hash_key=True),
        "at": NumberAttribute(range_key=True),
        "shards": Sharding(DynamicShards(metadata_model)),
    })
    return model, metadata_model


def local_tables(server: Any) -> list[str]:
    client = boto3.client(
        "dynamodb", endpoint_url=server.endpoint, region_name=server.region,
        aws_access_key_id=server.aws_access_key_id, aws_secret_access_key=server.aws_secret_access_key,
    )
    return list(client.list_tables()["TableNames"])


def test_settings_follow_the_sharded_model(dynamodb_local: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")  # what once sent the metadata to AWS
    model, metadata_model = define(dynamodb_local, {})
    for name in ("host", "region", "aws_access_key_id", "aws_secret_access_key", "max_retry_attempts",
                 "connect_timeout_seconds"):
        assert getattr(metadata_model.Meta, name) == getattr(model.Meta, name)
    model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    try:
        model("/f", 1).save()
        assert model.shards.shard_count("/f") == 1
        assert metadata_model.Meta.table_name in local_tables(dynamodb_local)
        assert model.shards.grow("/f") == 2  # a growth stores the count
        # The count item is in DynamoDB Local, beside the data, and the fleet protocol create_table stored.
        assert metadata_model.count() == 2
    finally:
        model.delete_table()
        metadata_model.delete_table()


def test_a_declared_setting_that_differs_is_refused(dynamodb_local: Any) -> None:
    elsewhere = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ShardingDefinitionError, match=r"Meta\.host = .*Meta\.own_connection = True"):
        define(dynamodb_local, {"host": elsewhere})


def test_an_equal_declared_setting_is_accepted(dynamodb_local: Any) -> None:
    model, metadata_model = define(dynamodb_local, {"host": dynamodb_local.endpoint})
    assert metadata_model.Meta.region == model.Meta.region


def test_own_connection_keeps_its_settings(dynamodb_local: Any) -> None:
    elsewhere = f"http://127.0.0.1:{closed_port()}"
    model, metadata_model = define(dynamodb_local, {
        "host": elsewhere, "own_connection": True, "max_retry_attempts": 0, "region": "us-east-1",
        "aws_access_key_id": "x", "aws_secret_access_key": "y",
    })
    assert metadata_model.Meta.host == elsewhere
    with pytest.raises(GetError, match=re.escape(elsewhere)):
        model.shards.shard_count("/f")  # the shard count is asked of the closed port, as declared


def test_a_shared_metadata_model_needs_equal_settings(dynamodb_local: Any) -> None:
    _model, metadata_model = define(dynamodb_local, {})

    class OtherMeta:
        table_name = "companion_other"
        host = f"http://127.0.0.1:{closed_port()}"

    with pytest.raises(ShardingDefinitionError, match="already follows the connection"):
        type("OtherLog", (ShardedModel,), {
            "__module__": __name__,
            "Meta": OtherMeta,
            "path": UnicodeAttribute(hash_key=True),
            "shards": Sharding(DynamicShards(metadata_model)),
        })


class TestClassesOfOneFactory:
    """Sharded model classes made by one function share a name (``make.<locals>.Events``):
    a metadata model they share is checked for each of them alike (found by an adversarial
    trial: a second class of the same name with another host moved the shared metadata model to
    it, and the first class's counts were read and written there without an error)."""

    @staticmethod
    def _factory(metadata_model: type[ShardMetadata]) -> Any:
        def make(host: str) -> type[ShardedModel]:
            meta = type("Meta", (), {"table_name": f"factory_events_{uuid.uuid4().hex[:8]}", "host": host})
            return type("Events", (ShardedModel,), {"__module__": __name__, "__qualname__": "make.<locals>.Events",
                                                    "Meta": meta, "path": UnicodeAttribute(hash_key=True),
                                                    "shards": Sharding(DynamicShards(metadata_model))})

        return make

    def test_a_second_class_of_the_same_name_with_another_host_is_refused(self) -> None:
        metadata_model = type(f"Counts{uuid.uuid4().hex[:6]}", (ShardMetadata,), {
            "Meta": type("Meta", (), {"table_name": f"factory_counts_{uuid.uuid4().hex[:8]}"})})
        make = self._factory(metadata_model)
        here, elsewhere = f"http://127.0.0.1:{closed_port()}", f"http://127.0.0.1:{closed_port()}"
        first = make(here)
        assert metadata_model.Meta.host == here
        with pytest.raises(ShardingDefinitionError, match=r"already follows the connection of make\.<locals>\.Events"):
            make(elsewhere)
        assert metadata_model.Meta.host == here  # still where the first class's counts are
        second = make(here)  # the same placement: accepted
        assert (first.Meta.host, second.Meta.host, metadata_model.Meta.host) == (here, here, here)

    def test_once_the_classes_are_freed_a_new_one_is_followed(self) -> None:
        metadata_model = type(f"Counts{uuid.uuid4().hex[:6]}", (ShardMetadata,), {
            "Meta": type("Meta", (), {"table_name": f"factory_counts_{uuid.uuid4().hex[:8]}"})})
        make = self._factory(metadata_model)
        here, elsewhere = f"http://127.0.0.1:{closed_port()}", f"http://127.0.0.1:{closed_port()}"
        first = make(here)
        freed = weakref.ref(first)
        del first
        gc.collect()
        assert freed() is None
        make(elsewhere)  # nothing follows the metadata model any more: it follows the new class
        assert metadata_model.Meta.host == elsewhere


def test_a_runtime_setting_of_the_metadata_model_is_not_undone(dynamodb_local: Any) -> None:
    """A model defined while a test binding points the metadata model elsewhere does not send
    it back to PynamoDB's defaults: only the sharded model's own settings are copied."""
    suffix = uuid.uuid4().hex[:8]
    metadata_model = type(f"Bound{suffix}", (ShardMetadata,), {
        "__module__": __name__, "Meta": type("Meta", (), {"table_name": f"companion_bound_{suffix}"}),
    })
    metadata_model.Meta.host = dynamodb_local.endpoint  # what a binding does at run time
    type(f"Plain{suffix}", (ShardedModel,), {
        "__module__": __name__,
        "Meta": type("Meta", (), {"table_name": f"companion_plain_{suffix}"}),
        "path": UnicodeAttribute(hash_key=True),
        "shards": Sharding(DynamicShards(metadata_model)),
    })
    assert metadata_model.Meta.host == dynamodb_local.endpoint


# -- every companion, the table's and each sharded index's ----------------------------------


class OutsideLoopback(Exception):
    """A request was about to leave 127.0.0.1: refused before the network."""


LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


@attrs.frozen
class Sent:
    """One request as it was about to be sent."""

    url: str
    table: str | None
    headers: dict[str, str]


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[Sent]:
    """Every request any botocore client made in this test sends, in order.

    A ``before-send`` handler on every client created during the test records each request
    and raises before the network when it is addressed outside 127.0.0.1; under it, the HTTP
    session refuses the same (credential lookups included), so nothing ever leaves the machine.
    Fake credentials in the environment let a request that lacks its own be signed and reach
    the handler, where the wrong endpoint shows, instead of failing for want of credentials.
    """
    requests: list[Sent] = []

    def refuse_outside(url: str) -> None:
        if urlsplit(url).hostname not in LOOPBACK_HOSTS:
            raise OutsideLoopback(f"a request to {url} was refused: it would have left 127.0.0.1")

    def record(request: Any, **_: Any) -> None:
        headers = {name.lower(): (value.decode() if isinstance(value, bytes) else str(value))
                   for name, value in request.headers.items()}
        table = json.loads(request.body or b"{}").get("TableName")
        requests.append(Sent(request.url, table, headers))
        refuse_outside(request.url)

    create_client = botocore.session.Session.create_client

    def recording_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = create_client(self, *args, **kwargs)
        # After PynamoDB's own before-send handler (registered first), which adds extra_headers.
        client.meta.events.register_last("before-send", record)
        return client

    http_send = URLLib3Session.send

    def loopback_send(self: Any, request: Any) -> Any:
        refuse_outside(request.url)
        return http_send(self, request)

    monkeypatch.setattr(botocore.session.Session, "create_client", recording_client)
    monkeypatch.setattr(URLLib3Session, "send", loopback_send)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-the-model-s")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-model-s")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return requests


def metadata_model_named(name: str, table: str) -> type[ShardMetadata]:
    """A metadata model that sets nothing but its table name."""
    return type(name, (ShardMetadata,), {"__module__": __name__, "Meta": type("Meta", (), {"table_name": table})})


def define_with_indexes(server: Any) -> tuple[type[ShardedModel], dict[str, type[ShardMetadata]]]:
    """A model with Meta.host on DynamoDB Local, a DynamicShards table and two DynamicShards
    indexes, each with a metadata model of its own that sets no connection setting.

    Set in Meta as an application does, not bound by the plugin (``dynamodb_models``): a binding
    points every companion at the server itself, which would hide what is checked here."""
    suffix = uuid.uuid4().hex[:8]
    companions = {
        name: metadata_model_named(f"{name.title()}Shards{suffix}", f"companion_{name}_{suffix}")
        for name in ("table", "by_day", "by_user")
    }

    def index(name: str, attribute: str) -> Any:
        meta = type("Meta", (), {"index_name": name, "projection": AllProjection()})
        return type(f"{name}{suffix}", (GlobalSecondaryIndex,), {
            "__module__": __name__, "Meta": meta,
            attribute: UnicodeAttribute(hash_key=True),
            "at": NumberAttribute(range_key=True),
            "shards": Sharding(DynamicShards(companions[name], max_shards=8, cooldown=0, backoff=(0, 0))),
        })()

    class Meta:
        table_name = f"companion_event_{suffix}"
        host = server.endpoint
        region = server.region
        aws_access_key_id = server.aws_access_key_id
        aws_secret_access_key = server.aws_secret_access_key

    model = type(f"Event{suffix}", (ShardedModel,), {
        "__module__": __name__,
        "Meta": Meta,
        "source": UnicodeAttribute(hash_key=True),
        "at": NumberAttribute(range_key=True),
        "day": UnicodeAttribute(),
        "user": UnicodeAttribute(),
        "by_day": index("by_day", "day"),
        "by_user": index("by_user", "user"),
        "shards": Sharding(DynamicShards(companions["table"], max_shards=8, cooldown=0, backoff=(0, 0))),
    })
    return model, companions


class TestEveryCompanionFollowsTheModel:
    """The metadata models of the table and of each sharded index send every request to the
    model's host, with its region and credentials, though they set none of those."""

    def test_settings_of_each_companion_are_the_model_s(self, dynamodb_local: Any, sent: Any) -> None:
        model, companions = define_with_indexes(dynamodb_local)
        assert set(model.companion_models()) == set(companions.values())
        for companion in companions.values():
            for name in ("host", "region", "aws_access_key_id", "aws_secret_access_key"):
                assert (companion.__name__, name, getattr(companion.Meta, name)) == (
                    companion.__name__, name, getattr(model.Meta, name))

    def test_every_request_goes_to_the_model_s_host(self, dynamodb_local: Any, sent: Any) -> None:
        model, companions = define_with_indexes(dynamodb_local)
        created = []
        try:
            for table_model in (model, *companions.values()):
                table_model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
                created.append(table_model)
            for n in range(4):
                model("s", n, day="d", user="u").save()
            # Each count is grown (a conditional write) and read back from its metadata table.
            assert (model.shards.grow("s"), model.by_day.shards.grow("d"), model.by_user.shards.grow("u")) == (2, 2, 2)
            refreshed = (model.shards.refresh("s"), model.by_day.shards.refresh("d"), model.by_user.shards.refresh("u"))
            assert refreshed == (2, 2, 2)
            for n in range(4, 8):
                model("s", n, day="d", user="u").save()
            assert sorted(int(event.at) for event in model.by_day.query("d")) == list(range(8))
            assert sorted(int(event.at) for event in model.by_user.query("u")) == list(range(8))
            assert sorted(int(event.at) for event in model.query("s")) == list(range(8))
            # The counts are stored in DynamoDB Local, each in its own metadata table.
            for name, companion in companions.items():
                assert [(item.partition_key, item.number_of_shards) for item in companion.scan()
                        if item.partition_key != "#protocol"] == [
                    ({"table": "s", "by_day": "d", "by_user": "u"}[name], 2)]
        finally:
            for table_model in created:
                table_model.delete_table()
        endpoint = urlsplit(dynamodb_local.endpoint).netloc
        assert {urlsplit(request.url).netloc for request in sent} == {endpoint}
        # Each metadata table was asked (created, grown, read) through that endpoint.
        asked = {request.table for request in sent}
        assert {companion.Meta.table_name for companion in companions.values()} <= asked


# -- what must match and what is the metadata model's own ------------------------------------


OWN_TRANSPORT = {
    "connect_timeout_seconds": 7, "read_timeout_seconds": 9, "max_retry_attempts": 2,
    "max_pool_connections": 3, "extra_headers": {"x-shard-counts": "metadata"},
}


class TestOwnTimeoutsAndRetries:
    """Timeouts, retries, pool size and extra headers are the metadata model's own; endpoint,
    region and credentials must be the sharded model's."""

    def test_own_timeouts_and_retries_are_kept_and_used(self, dynamodb_local: Any, sent: Any) -> None:
        model, metadata_model = define(dynamodb_local, OWN_TRANSPORT)
        for name, value in OWN_TRANSPORT.items():
            assert getattr(metadata_model.Meta, name) == value
        # The sharded model's own (max_retry_attempts = 1, connect_timeout_seconds = 2) stay its own.
        assert (model.Meta.max_retry_attempts, model.Meta.connect_timeout_seconds) == (1, 2)
        assert metadata_model.Meta.host == model.Meta.host
        model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        metadata_model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        try:
            model("/f", 1).save()
            assert model.shards.grow("/f") == 2
            assert [item.number_of_shards for item in metadata_model.scan() if item.partition_key != "#protocol"] == [2]
            config = botocore_client(metadata_model).meta.config
            assert (config.connect_timeout, config.read_timeout, config.max_pool_connections) == (7, 9, 3)
            assert config.retries["total_max_attempts"] == 3  # the first attempt and 2 retries
            model_config = botocore_client(model).meta.config
            assert (model_config.connect_timeout, model_config.retries["total_max_attempts"]) == (2, 2)
        finally:
            model.delete_table()
            metadata_model.delete_table()
        # The metadata model's requests, and only those, carry its extra header.
        headed = {request.table for request in sent if request.headers.get("x-shard-counts") == "metadata"}
        assert headed == {metadata_model.Meta.table_name}
        assert {urlsplit(request.url).netloc for request in sent} == {urlsplit(dynamodb_local.endpoint).netloc}

    @pytest.mark.parametrize("setting", ["host", "region", "aws_access_key_id", "aws_secret_access_key",
                                         "aws_session_token"])
    def test_another_endpoint_region_or_account_is_refused(self, dynamodb_local: Any, setting: str) -> None:
        other = {"host": f"http://127.0.0.1:{closed_port()}", "region": "ap-northeast-1",
                 "aws_access_key_id": "other", "aws_secret_access_key": "other",
                 "aws_session_token": "other"}[setting]
        with pytest.raises(ShardingDefinitionError, match=(
            rf"sets Meta\.{setting} = .* so the shard counts would be read from somewhere else than "
            rf"the data; remove Meta\.{setting} from .*Meta\.own_connection = True"
        )):
            define(dynamodb_local, {setting: other, **OWN_TRANSPORT})

    def test_a_shared_metadata_model_may_serve_models_with_other_timeouts(self, dynamodb_local: Any) -> None:
        model, metadata_model = define(dynamodb_local, {})

        class OtherMeta:
            table_name = "companion_other_timeouts"
            host = dynamodb_local.endpoint
            region = dynamodb_local.region
            aws_access_key_id = dynamodb_local.aws_access_key_id
            aws_secret_access_key = dynamodb_local.aws_secret_access_key
            read_timeout_seconds = 60
            max_retry_attempts = 5

        type("OtherLog", (ShardedModel,), {
            "__module__": __name__,
            "Meta": OtherMeta,
            "path": UnicodeAttribute(hash_key=True),
            "shards": Sharding(DynamicShards(metadata_model)),
        })
        # It keeps following the first model's (the settings it had when first used).
        assert (metadata_model.Meta.max_retry_attempts, metadata_model.Meta.connect_timeout_seconds) == (1, 2)
        assert metadata_model.Meta.host == model.Meta.host
