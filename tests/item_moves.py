"""An item moved between two shards of a key as a job moves it, with raw requests (no library
code): what a page-break test does between two pages."""

from __future__ import annotations

from typing import Any

from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._host import botocore_client


def move_item(model: type[Any], key: str, at: int, source: int, target: int) -> None:
    """Move the item ``at`` of ``key`` from shard ``source`` into shard ``target`` as
    ``reshard``/``compact`` does: one transaction that puts the stored item, every attribute
    as read, under the target shard where its key is free, and deletes the old copy."""
    manager = shard_manager(model)
    hash_name = model._hash_key_attribute().attr_name
    range_name = model._range_key_attribute().attr_name
    old = {hash_name: {"S": manager.physical_key(key, source)}, range_name: {"N": str(at)}}
    client = botocore_client(model)
    item = client.get_item(TableName=model.Meta.table_name, Key=old, ConsistentRead=True)["Item"]
    moved = {**item, hash_name: {"S": manager.physical_key(key, target)}}
    client.transact_write_items(TransactItems=[
        {"Put": {"TableName": model.Meta.table_name, "Item": moved,
                 "ConditionExpression": f"attribute_not_exists({hash_name})"}},
        {"Delete": {"TableName": model.Meta.table_name, "Key": old,
                    "ConditionExpression": f"attribute_exists({hash_name})"}},
    ])
