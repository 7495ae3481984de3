"""Plain boto3 access to a bound model's table: what is really stored, without PynamoDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
from pynamodb.models import Model

from pynamodb_sharding._protocol import PROTOCOL_KEY

if TYPE_CHECKING:
    from pynamodb_sharding.testing import DynamoDBLocal


def raw_client(model: type[Model]) -> Any:
    """A boto3 DynamoDB client for the server and credentials the model is bound to."""
    meta = model.Meta
    return boto3.client(
        "dynamodb",
        endpoint_url=meta.host,
        region_name=meta.region,
        aws_access_key_id=meta.aws_access_key_id,
        aws_secret_access_key=meta.aws_secret_access_key,
    )


def local_client(server: DynamoDBLocal) -> Any:
    """A boto3 DynamoDB client for a DynamoDB Local server (the ``dynamodb_local`` fixture)."""
    return boto3.client("dynamodb", endpoint_url=server.endpoint, region_name=server.region,
                        aws_access_key_id=server.aws_access_key_id,
                        aws_secret_access_key=server.aws_secret_access_key)


def raw_items(model: type[Model]) -> list[dict[str, Any]]:
    """Every item of the model's table, read with a consistent scan (no decoding)."""
    items: list[dict[str, Any]] = []
    paginator = raw_client(model).get_paginator("scan")
    for page in paginator.paginate(TableName=model.Meta.table_name, ConsistentRead=True):
        items.extend(page["Items"])
    return items


def count_items(metadata_model: type[Model]) -> list[dict[str, Any]]:
    """Every item of a metadata table but its fleet protocol record (which ``create_table``
    stores in a metadata table it creates): the keys' counts, hint copies, the home record."""
    return [raw for raw in raw_items(metadata_model) if raw["partition_key"]["S"] != PROTOCOL_KEY[0]]


def drop_fleet_protocol(metadata_model: type[Model], *models: type[Model]) -> None:
    """Make a metadata table one of 0.2, which stores no fleet protocol: delete the record
    ``create_table`` stored, and have each of ``models``' ``DynamicShards`` read the table again."""
    raw_client(metadata_model).delete_item(TableName=metadata_model.Meta.table_name, Key={
        "partition_key": {"S": PROTOCOL_KEY[0]}, "model": {"S": PROTOCOL_KEY[1]}})
    for model in models:
        model.shards.strategy.protocol_in_force(refresh=True)  # type: ignore[attr-defined]


def put_raw(model: type[Model], items: list[dict[str, Any]], batch: int = 25) -> None:
    """Write raw items (physical keys already in them), ``batch`` per BatchWriteItem."""
    client = raw_client(model)
    for begin in range(0, len(items), batch):
        pending: dict[str, Any] = {
            model.Meta.table_name: [{"PutRequest": {"Item": item}} for item in items[begin:begin + batch]]
        }
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def index_items(model: type[Model], index_name: str = "by_day") -> list[dict[str, Any]]:
    """Every entry of one of the model's global indexes, read with a raw scan of the index."""
    items: list[dict[str, Any]] = []
    paginator = raw_client(model).get_paginator("scan")
    for page in paginator.paginate(TableName=model.Meta.table_name, IndexName=index_name):
        items.extend(page["Items"])
    return items


def provisioned_throughput(model: type[Model]) -> tuple[int, int, tuple[int, int]]:
    """The read and write capacity units of the model's table, and of its first global index."""
    description = raw_client(model).describe_table(TableName=model.Meta.table_name)["Table"]
    units = description["ProvisionedThroughput"]
    index = description["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]
    return (units["ReadCapacityUnits"], units["WriteCapacityUnits"],
            (index["ReadCapacityUnits"], index["WriteCapacityUnits"]))
