"""The same requests to the fleet simulator's in-memory DynamoDB and to DynamoDB Local.

:class:`Differential` holds one :class:`~pynamodb_sharding.testing.FleetDynamoDB` (limits so high
that nothing throttles) and a DynamoDB Local server, each behind a botocore client, with the same
tables; :meth:`Differential.send` sends one request body to both and returns both parsed responses
(an error as its parsed body), normalised so that what may differ without a client noticing
(request ids, set order, table names made unique for the shared server) does not.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

from pynamodb_sharding.testing.fleet import FleetDynamoDB, _Index, _Table

#: A key attribute: (name, DynamoDB type ``S``/``N``/``B``).
Key = tuple[str, str]


@attrs.frozen
class IndexSpec:
    name: str
    hash_key: Key
    range_key: Key | None = None
    projection: str = "ALL"
    included: tuple[str, ...] = ()


@attrs.frozen
class TableSpec:
    name: str
    hash_key: Key
    range_key: Key | None = None
    indexes: tuple[IndexSpec, ...] = ()


#: Response and request fields keyed by table name.
_BY_TABLE = ("RequestItems", "Responses", "UnprocessedItems", "UnprocessedKeys")


def _unsigned(**_: Any) -> Any:
    return botocore.UNSIGNED


class Differential:
    """Two DynamoDBs, one request stream: see the module docstring."""

    def __init__(self, server: Any, tables: Iterable[TableSpec]) -> None:
        self.db = FleetDynamoDB(lambda: 0.0, write_units=1e12, read_units=1e12)
        config = Config(retries={"max_attempts": 0, "mode": "standard"})
        settings = {"region_name": server.region, "aws_access_key_id": server.aws_access_key_id,
                    "aws_secret_access_key": server.aws_secret_access_key, "config": config}
        self.local = boto3.client("dynamodb", endpoint_url=server.endpoint, **settings)
        self.simulated = boto3.client("dynamodb", endpoint_url="http://127.0.0.1:9", **settings)
        self.simulated.meta.events.register_first("before-send.dynamodb", self.db.on_before_send)
        self.simulated.meta.events.register_first("choose-signer.dynamodb", _unsigned)
        suffix = uuid.uuid4().hex[:8]
        self.specs = {spec.name: spec for spec in tables}
        self.names = {name: f"{name}-{suffix}" for name in self.specs}
        self.original = {local: name for name, local in self.names.items()}
        for spec in self.specs.values():
            self._create(spec)

    def _create(self, spec: TableSpec) -> None:
        self.db.tables[spec.name] = _Table(
            spec.name, spec.hash_key[0], None if spec.range_key is None else spec.range_key[0],
            indexes={index.name: _Index(index.name, index.hash_key[0], None if index.range_key is None
                                        else index.range_key[0], index.projection, index.included)
                     for index in spec.indexes},
        )
        keys = [spec.hash_key, spec.range_key, *(key for index in spec.indexes
                                                  for key in (index.hash_key, index.range_key))]
        definitions = {name: kind for name, kind in (key for key in keys if key is not None)}
        schema = [{"AttributeName": spec.hash_key[0], "KeyType": "HASH"}]
        if spec.range_key is not None:
            schema.append({"AttributeName": spec.range_key[0], "KeyType": "RANGE"})
        arguments: dict[str, Any] = {
            "TableName": self.names[spec.name], "KeySchema": schema, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": name, "AttributeType": kind}
                                     for name, kind in definitions.items()],
        }
        if spec.indexes:
            arguments["GlobalSecondaryIndexes"] = [
                {"IndexName": index.name,
                 "KeySchema": [{"AttributeName": index.hash_key[0], "KeyType": "HASH"}]
                 + ([] if index.range_key is None else [{"AttributeName": index.range_key[0], "KeyType": "RANGE"}]),
                 "Projection": {"ProjectionType": index.projection,
                                **({"NonKeyAttributes": list(index.included)} if index.included else {})}}
                for index in spec.indexes
            ]
        self.local.create_table(**arguments)
        self.local.get_waiter("table_exists").wait(TableName=self.names[spec.name])

    def close(self) -> None:
        for name in self.names.values():
            self.local.delete_table(TableName=name)

    # -- sending ---------------------------------------------------------------------------

    def send(self, operation: str, body: Mapping[str, Any], *,
             transaction_capacity: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
        """``body`` sent to both: (simulated, local), each normalised (:meth:`normalise`).

        ``transaction_capacity``: keep a ``TransactWriteItems``' ``ConsumedCapacity``, which
        :meth:`normalise` leaves out otherwise: DynamoDB Local adds each *distinct* per-item
        figure once (three one-unit puts are reported as 2 units, not 6), so it is comparable
        only for items whose units all differ."""
        simulated = self._call(self.simulated, operation, dict(body))
        local = self._call(self.local, operation, self._renamed(body, self.names))
        if operation == "TransactWriteItems" and not transaction_capacity:
            simulated.pop("ConsumedCapacity", None)
            local.pop("ConsumedCapacity", None)
        return self.normalise(operation, body, simulated), self.normalise(operation, body, local)

    @staticmethod
    def _call(client: Any, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        method = getattr(client, botocore.xform_name(operation))
        try:
            response: dict[str, Any] = method(**body)
        except ClientError as error:
            failed: dict[str, Any] = dict(error.response)
            failed.pop("ResponseMetadata", None)
            return {"error": failed}
        response.pop("ResponseMetadata", None)
        return response

    def _renamed(self, value: Any, names: Mapping[str, str]) -> Any:
        """``value`` with every table name in it (a ``TableName``, a key of ``RequestItems``,
        ``Responses`` or ``Unprocessed*``) replaced by its name in ``names``."""
        if isinstance(value, Mapping):
            renamed: dict[str, Any] = {}
            for name, inner in value.items():
                if name == "TableName" and isinstance(inner, str):
                    renamed[name] = names.get(inner, inner)
                elif name in _BY_TABLE and isinstance(inner, Mapping):
                    renamed[name] = {names.get(table, table): self._renamed(entry, names)
                                     for table, entry in inner.items()}
                else:
                    renamed[name] = self._renamed(inner, names)
            return renamed
        if isinstance(value, list):
            return [self._renamed(inner, names) for inner in value]
        return value

    def normalise(self, operation: str, body: Mapping[str, Any], response: dict[str, Any]) -> dict[str, Any]:
        """What a client may rely on in ``response``: errors by code (and cancellation reasons
        by code), sets in order, table names as the test named them, a table's description by
        its keys and indexes; a scan's items in order (a scan's order is DynamoDB's own)."""
        response = self._renamed(response, self.original)
        if "error" in response:
            error = response["error"]
            found: dict[str, Any] = {"error": error.get("Error", {}).get("Code")}
            if "CancellationReasons" in error:
                found["reasons"] = [reason.get("Code") for reason in error["CancellationReasons"]]
            return found
        if operation == "DescribeTable":
            table = response["Table"]
            return {"TableName": table["TableName"], "KeySchema": table["KeySchema"],
                    "TableStatus": table["TableStatus"],
                    "GlobalSecondaryIndexes": sorted(
                        (index["IndexName"], str(index["KeySchema"]), index["Projection"]["ProjectionType"])
                        for index in table.get("GlobalSecondaryIndexes", ()))}
        normal = _sorted_sets(response)
        if operation == "BatchGetItem":  # DynamoDB returns the items found in any order
            normal["Responses"] = {table: sorted(items, key=repr) for table, items in normal["Responses"].items()}
        if operation == "Scan" and "Items" in normal:
            normal["Items"] = sorted(normal["Items"], key=repr)
            normal.pop("LastEvaluatedKey", None)
        return normal


def _sorted_sets(value: Any) -> Any:
    if isinstance(value, Mapping):
        if len(value) == 1:
            ((kind, content),) = value.items()
            if kind in ("SS", "NS", "BS") and isinstance(content, list):
                return {kind: sorted(content, key=repr)}
        return {name: _sorted_sets(inner) for name, inner in value.items()}
    if isinstance(value, list):
        return [_sorted_sets(inner) for inner in value]
    return value
