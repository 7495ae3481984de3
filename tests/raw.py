"""Plain boto3 access to a bound model's table: what is really stored, without PynamoDB."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
from pynamodb.models import Model

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
