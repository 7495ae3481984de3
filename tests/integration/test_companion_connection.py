"""The metadata model of ``DynamicShards`` follows the sharded model's connection (DynamoDB Local).

A ``ShardMetadata`` subclass that sets no connection settings of its own talks to the same
endpoint, region and credentials as the sharded model: the shard counts live beside the data,
whatever ``AWS_DEFAULT_REGION`` says. A metadata model whose settings differ is refused when
the sharded model is defined, unless it declares ``own_connection = True``.
"""

from __future__ import annotations

import re
import socket
import uuid
from typing import Any

import boto3
import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import GetError

from pynamodb_sharding import DynamicShards, ShardedModel, Sharding, ShardingDefinitionError
from pynamodb_sharding.metadata import ShardMetadata


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
        assert metadata_model.count() == 1  # the count item is in DynamoDB Local, beside the data
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
