"""Point PynamoDB model classes at a DynamoDB Local server, with test tables of their own.

Binding rewrites the connection settings and the table name on each model's ``Meta``, creates
the tables, and on close deletes them and puts every ``Meta`` attribute back exactly as it was
(including attributes that were absent). A ``ShardedModel``'s companion models (the metadata
model of ``DynamicShards``) are bound with it.

One test table per production table: the classes of a binding whose ``Meta`` names the same
table (the same ``table_name``, ``host`` and ``region``: several classes over one single-table
design, a subclass with or without a ``Meta`` of its own) share one test table, as they share
the production one, whether they are bound in one call or in several. The table is created
with a schema that serves every class: their key schemas must be the same, and the indexes
they declare are all created (the union), an index declared by several classes the same way
in each. What cannot be served raises :class:`SharedTableError` naming both classes, before
anything is rewritten or created.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pynamodb.constants import PAY_PER_REQUEST_BILLING_MODE
from pynamodb.exceptions import TableDoesNotExist, TableError
from pynamodb.models import Model

from pynamodb_sharding._descriptor import is_sharded, shard_manager
from pynamodb_sharding._exceptions import ShardingError
from pynamodb_sharding._host import (
    botocore_client,
    reset_connection,
    restore_connection,
    table_connection,
    table_schema,
    ttl_attribute_name,
)
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._model import with_companions
from pynamodb_sharding._partitioned import existing_periods, period_model
from pynamodb_sharding._periods import TimePartitioned, is_time_partitioned
from pynamodb_sharding._protocol import PROTOCOL_KEY
from pynamodb_sharding.testing.botocore_data import shared_botocore_data
from pynamodb_sharding.testing.local import DynamoDBLocal

__all__ = ["ModelBinding", "SharedTableError", "bound_models"]

_ABSENT = object()
# The Meta attributes a binding rewrites; everything else on Meta is left alone.
_BOUND_ATTRIBUTES = ("table_name", "host", "region", "aws_access_key_id", "aws_secret_access_key",
                     "aws_session_token")
#: How long a global secondary index added to an existing test table may take to become ACTIVE.
_INDEX_TIMEOUT_SECONDS = 60.0


class SharedTableError(ShardingError):
    """Model classes over one table declare what one test table cannot serve (keys, an index).

    .. versionadded:: 0.1.0
    """

    code = "shared-table"


class _TableSchema:
    """What one test table must have: the union of its classes' schemas, each part with the
    class that declared it first (for the messages)."""

    def __init__(self, table: str) -> None:
        self.table = table  # the production table's name
        self.models: list[type[Model]] = []
        self.keys: tuple[tuple[str, str], ...] = ()
        self.attributes: dict[str, tuple[str, type[Model]]] = {}
        # index name -> (kind "global" or "local", comparable form, PynamoDB's definition, declared by)
        self.indexes: dict[str, tuple[str, Any, dict[str, Any], type[Model]]] = {}
        self.ttl: tuple[str, type[Model]] | None = None
        self.stream: tuple[str, type[Model]] | None = None

    def copy(self) -> _TableSchema:
        other = _TableSchema(self.table)
        other.models = list(self.models)
        other.keys = self.keys
        other.attributes = dict(self.attributes)
        other.indexes = dict(self.indexes)
        other.ttl = self.ttl
        other.stream = self.stream
        return other

    def add(self, model: type[Model]) -> None:
        """Add ``model``'s schema.

        Raises:
            SharedTableError: its keys, an attribute's type, an index of the same name, its TTL
                attribute or its stream differ from a class already over the table.
        """
        schema = table_schema(model)
        types = {entry["AttributeName"]: entry["AttributeType"] for entry in schema["attribute_definitions"]}
        keys = _key_schema(schema["key_schema"])
        if self.models and keys != self.keys:
            first = self.models[0]
            msg = (
                f"{model.__name__} and {first.__name__} both use table {self.table!r}, with different keys "
                f"({_describe_keys(keys, types)} and {_describe_keys(self.keys, self._types())}): one test table "
                f"cannot serve both. Declare the production table's keys on both classes, or give one of them "
                f"the table_name of the table it really uses."
            )
            raise SharedTableError(msg)
        for name, kind in types.items():
            known = self.attributes.get(name)
            if known is not None and known[0] != kind:
                msg = (
                    f"{model.__name__} declares attribute {name!r} of table {self.table!r} (a key of the table "
                    f"or of an index) as type {kind}, {known[1].__name__} as type {known[0]}: one test table "
                    f"cannot serve both. Declare it with the same attribute class in both."
                )
                raise SharedTableError(msg)
        indexes = [("global", index) for index in schema["global_secondary_indexes"]]
        indexes += [("local", index) for index in schema["local_secondary_indexes"]]
        for kind, index in indexes:
            name = index["index_name"]
            known_index = self.indexes.get(name)
            if known_index is not None and (known_index[0], known_index[1]) != (kind, _comparable(index)):
                msg = (
                    f"{model.__name__} and {known_index[3].__name__} both declare index {name!r} of table "
                    f"{self.table!r}, differently ({_describe_index(kind, index)} and "
                    f"{_describe_index(known_index[0], known_index[2])}): one test table cannot serve both. "
                    f"Declare the index the same way (kind, keys and projection) on both classes."
                )
                raise SharedTableError(msg)
        ttl = ttl_attribute_name(model)
        if ttl is not None and self.ttl is not None and ttl != self.ttl[0]:
            msg = (
                f"{model.__name__} expires items of table {self.table!r} by attribute {ttl!r}, "
                f"{self.ttl[1].__name__} by {self.ttl[0]!r}: a table has one TTL attribute. Declare the same "
                f"TTLAttribute on both classes."
            )
            raise SharedTableError(msg)
        stream = getattr(model.Meta, "stream_view_type", None)
        if stream is not None and self.stream is not None and stream != self.stream[0]:
            msg = (
                f"{model.__name__} asks for a {stream} stream on table {self.table!r}, {self.stream[1].__name__} "
                f"for a {self.stream[0]} stream: a table has one. Declare the same Meta.stream_view_type on both."
            )
            raise SharedTableError(msg)
        # Checked: now record.
        self.models.append(model)
        self.keys = keys
        for name, kind in types.items():
            self.attributes.setdefault(name, (kind, model))
        for kind, index in indexes:
            self.indexes.setdefault(index["index_name"], (kind, _comparable(index), index, model))
        if ttl is not None and self.ttl is None:
            self.ttl = (ttl, model)
        if stream is not None and self.stream is None:
            self.stream = (stream, model)

    def _types(self) -> dict[str, str]:
        return {name: kind for name, (kind, _) in self.attributes.items()}

    def covered_by(self, model: type[Model]) -> bool:
        """Whether ``model``'s own ``create_table`` would create all of this schema."""
        alone = _TableSchema(self.table)
        alone.add(model)
        return (
            alone._types() == self._types()
            and {name: entry[:2] for name, entry in alone.indexes.items()}
            == {name: entry[:2] for name, entry in self.indexes.items()}
            and (alone.ttl or (None,))[0] == (self.ttl or (None,))[0]
            and (alone.stream or (None,))[0] == (self.stream or (None,))[0]
        )

    def create_arguments(self) -> dict[str, Any]:
        """``TableConnection.create_table`` arguments for the union (on-demand billing)."""
        arguments: dict[str, Any] = {
            "attribute_definitions": [
                {"AttributeName": name, "AttributeType": kind} for name, (kind, _) in self.attributes.items()
            ],
            "key_schema": [{"AttributeName": name, "KeyType": key_type} for name, key_type in self.keys],
            "global_secondary_indexes": [entry[2] for entry in self.indexes.values() if entry[0] == "global"],
            "local_secondary_indexes": [entry[2] for entry in self.indexes.values() if entry[0] == "local"],
            "billing_mode": PAY_PER_REQUEST_BILLING_MODE,
        }
        if self.stream is not None:
            arguments["stream_specification"] = {"stream_enabled": True, "stream_view_type": self.stream[0]}
        return arguments


def _key_schema(entries: list[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(((entry["AttributeName"], entry["KeyType"]) for entry in entries), key=lambda key: key[1]))


def _describe_keys(keys: tuple[tuple[str, str], ...], types: dict[str, str]) -> str:
    return ", ".join(f"{key_type.lower()} key {name!r} ({types.get(name, '?')})" for name, key_type in keys)


def _comparable(index: dict[str, Any]) -> tuple[Any, ...]:
    projection = index.get("projection") or {}
    return (
        _key_schema(index["key_schema"]),
        projection.get("ProjectionType"),
        tuple(sorted(projection.get("NonKeyAttributes") or ())),
    )


def _describe_index(kind: str, index: dict[str, Any]) -> str:
    keys, projection, non_key = _comparable(index)
    described = f"{kind}, " + ", ".join(f"{key_type.lower()} key {name!r}" for name, key_type in keys)
    return described + f", projection {projection}" + (f" {list(non_key)}" if non_key else "")


class _TestTable:
    """One test table: the production table it stands for and the classes bound to it."""

    def __init__(self, key: tuple[Any, ...], name: Any, schema: _TableSchema) -> None:
        self.key = key  # (table_name, host, region) of the production table
        self.name = name  # the test table's name (a TimePartitioned for a time-partitioned table)
        self.schema = schema
        self.creator: type[Model] | None = None  # the class the table is created and deleted through
        self.created = False

    def create(self) -> None:
        schema = self.schema
        creator = next((model for model in schema.models if schema.covered_by(model)), None)
        if creator is not None:
            # The common case (one class, or one declaring everything): what create_table does.
            self.creator = creator
            creator.create_table(billing_mode=PAY_PER_REQUEST_BILLING_MODE, wait=True)
        else:
            self.creator = creator = schema.models[0]
            table_connection(creator).create_table(**schema.create_arguments())
            _wait_until_active(creator)
            if schema.ttl is not None:
                schema.ttl[1].update_ttl(ignore_update_ttl_errors=False)
        self.created = True

    def extend(self, before: _TableSchema) -> None:
        """Give the created table what the classes bound since ``before`` need beyond it: their
        global secondary indexes and TTL (``_refusal`` refused the rest before anything changed)."""
        for name, (_, _, index, _) in self.schema.indexes.items():
            if name not in before.indexes:
                _add_global_index(self, index)
        if self.schema.ttl is not None and before.ttl is None:
            self.schema.ttl[1].update_ttl(ignore_update_ttl_errors=False)


def _refusal(created: _TableSchema, wanted: _TableSchema, model: type[Model]) -> str | None:
    """Why a table created for ``created`` cannot become ``wanted`` once ``model`` is added."""
    first = created.models[0].__name__
    for name, (kind, _, _, declared_by) in wanted.indexes.items():
        if name not in created.indexes and kind == "local" and declared_by is model:
            return (
                f"{model.__name__} declares local secondary index {name!r} of table {wanted.table!r}, whose "
                f"test table was created earlier for {first}; a local secondary index can only be created "
                f"with its table. Bind {model.__name__} in the same call as {first}."
            )
    if wanted.stream is not None and created.stream is None and wanted.stream[1] is model:
        return (
            f"{model.__name__} asks for a stream on table {wanted.table!r}, whose test table was created "
            f"earlier for {first} without one. Bind {model.__name__} in the same call as {first}."
        )
    return None


def _wait_until_active(model: type[Model], index: str | None = None) -> None:
    client = botocore_client(model)
    deadline = time.monotonic() + _INDEX_TIMEOUT_SECONDS
    while True:
        table = client.describe_table(TableName=model.Meta.table_name)["Table"]
        if index is None:
            status = table.get("TableStatus")
        else:
            status = next(
                (entry.get("IndexStatus") for entry in table.get("GlobalSecondaryIndexes", ())
                 if entry["IndexName"] == index),
                None,
            )
        if status == "ACTIVE":
            return
        if time.monotonic() > deadline:
            msg = f"{model.__name__}: the test table {model.Meta.table_name!r} is still {status} ({index or 'table'})"
            raise TableError(msg)
        time.sleep(0.05)


def _add_global_index(table: _TestTable, index: dict[str, Any]) -> None:
    creator = table.creator
    assert creator is not None
    keys = [{"AttributeName": name, "KeyType": key_type} for name, key_type in _key_schema(index["key_schema"])]
    botocore_client(creator).update_table(
        TableName=creator.Meta.table_name,
        AttributeDefinitions=[
            {"AttributeName": name, "AttributeType": kind} for name, (kind, _) in table.schema.attributes.items()
        ],
        GlobalSecondaryIndexUpdates=[
            {"Create": {"IndexName": index["index_name"], "KeySchema": keys, "Projection": index["projection"]}}
        ],
    )
    _wait_until_active(creator, index["index_name"])


class _BoundMeta:
    """One ``Meta`` object rewritten for a binding: its saved attributes and its test table."""

    def __init__(self, meta: type, table: _TestTable) -> None:
        self.meta = meta
        self.table = table
        self.saved = {name: vars(meta).get(name, _ABSENT) for name in _BOUND_ATTRIBUTES}

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is _ABSENT:
                if name in vars(self.meta):
                    delattr(self.meta, name)
            else:
                setattr(self.meta, name, value)


class ModelBinding:
    """Binds model classes to one DynamoDB Local server until :meth:`close`.

    Each call of :meth:`bind` may add models; binding a model twice is a no-op. Classes over
    one production table share one test table (see the module docstring).
    """

    def __init__(self, server: DynamoDBLocal) -> None:
        self.server = server
        self._tables: list[_TestTable] = []
        self._metas: list[_BoundMeta] = []
        # Each bound model and its own ``_connection`` attribute (or _ABSENT), in binding order.
        self._connections: list[tuple[type[Model], Any]] = []

    @property
    def table_names(self) -> dict[type[Model], str]:
        """Each bound model class and the table it now uses."""
        return {model: model.Meta.table_name for model, _ in self._connections}

    def bind(self, *models: type[Model]) -> dict[type[Model], str]:
        """Bind the models and their companions; create their tables (on-demand billing).

        A class over the same production table as a class bound before (in this call or an
        earlier one) shares its test table; a global secondary index that only the new class
        declares is added to it.

        Returns:
            Each model bound by this call (companions included) and its table name.

        Raises:
            SharedTableError: classes over one table declare different keys, or the same index
                differently, or (bound in a later call) a local secondary index the table lacks;
                raised before any ``Meta`` is rewritten or any table created.
        """
        bound = with_companions(models)
        # Plan first: every check passes before any Meta is rewritten or any table created.
        schemas: dict[_TestTable, _TableSchema] = {}  # the tables this call adds classes to
        metas: dict[Any, _TestTable] = {entry.meta: entry.table for entry in self._metas}
        new_metas: list[Any] = []
        new_models: list[type[Model]] = []
        for model in bound:
            if any(model is known for known, _ in self._connections) or model in new_models:
                continue
            meta = getattr(model, "Meta", None)
            table_name = getattr(meta, "table_name", None)
            if meta is None or not table_name:
                msg = f"{model.__name__}.Meta.table_name is not set: give the model a Meta with a table_name"
                raise TypeError(msg)
            table = metas.get(meta)
            if table is None:
                table = self._table_for(self._production_key(meta), schemas)
                metas[meta] = table
                new_metas.append(meta)
            schema = schemas.get(table)
            if schema is None:
                schema = schemas[table] = table.schema.copy()
            schema.add(model)
            if table.created and (problem := _refusal(table.schema, schema, model)) is not None:
                raise SharedTableError(problem)
            new_models.append(model)
        for table, schema in schemas.items():
            if isinstance(table.key[0], TimePartitioned) and not all(schema.covered_by(m) for m in schema.models):
                names = " and ".join(model.__name__ for model in schema.models)
                msg = (
                    f"{names} share the time-partitioned table {table.key[0].template!r} with different indexes, "
                    f"TTL or stream: each period's table is created by the class that first writes to it, so "
                    f"they must declare the same ones."
                )
                raise SharedTableError(msg)
        # Apply.
        for model in new_models:
            inherited = "_connection" not in vars(model)
            previous = reset_connection(model)
            self._connections.append((model, _ABSENT if inherited else previous))
        for meta in new_metas:
            table = metas[meta]
            self._metas.append(_BoundMeta(meta, table))
            meta.table_name = table.name
            meta.host = self.server.endpoint
            meta.region = self.server.region
            meta.aws_access_key_id = self.server.aws_access_key_id
            meta.aws_secret_access_key = self.server.aws_secret_access_key
            meta.aws_session_token = None
        for table, schema in schemas.items():
            before, table.schema = table.schema, schema
            if table not in self._tables:
                self._tables.append(table)
            if table.created:
                table.extend(before)
            else:
                table.create()
        return {model: model.Meta.table_name for model in bound}

    __call__ = bind

    def _production_key(self, meta: type) -> tuple[Any, ...]:
        """``(table_name, host, region)`` that ``meta`` names outside this binding.

        A ``Meta`` that inherits from a bound ``Meta`` (``class Meta(Parent.Meta)``) reads the
        bound values through inheritance: the parent's saved values are what it names.
        """
        saved = {entry.meta: entry.saved for entry in self._metas}

        def production(name: str) -> Any:
            for cls in getattr(meta, "__mro__", (meta,)):
                if cls in saved and saved[cls][name] is not _ABSENT:
                    return saved[cls][name]
                if cls not in saved and name in vars(cls):
                    return vars(cls)[name]
            return None

        return production("table_name"), production("host"), production("region")

    def _table_for(self, key: tuple[Any, ...], planned: dict[_TestTable, _TableSchema]) -> _TestTable:
        for table in (*self._tables, *planned):
            if table.key == key:
                return table
        table_name = key[0]
        suffix = uuid.uuid4().hex[:8]  # one per test table: same-named tables of two hosts stay apart
        if isinstance(table_name, TimePartitioned):  # one table per period: rename them all
            name: Any = table_name.renamed(f"{table_name.template}_{suffix}")
            label = table_name.template
        else:
            name = f"{table_name}_{suffix}"
            label = str(table_name)
        return _TestTable(key, name, _TableSchema(label))

    def truncate(self) -> int:
        """Delete every item of the bound tables, keeping the tables; returns how many were deleted.

        Much faster than new tables between tests (a scan of the keys and 25-item batch
        deletes instead of ``DeleteTable`` and ``CreateTable``). The shard counts that bound
        ``DynamicShards`` models cached are forgotten too, since their metadata items are gone.
        A metadata table keeps its fleet protocol record, which ``create_table`` stored in it:
        the tables stay as they were created.
        """
        deleted = 0
        for table in self._tables:
            model: Any = table.creator
            if not table.created:
                continue
            if is_time_partitioned(model):
                for period in existing_periods(model):
                    deleted += _delete_every_item(period_model(model, period))
            else:
                deleted += _delete_every_item(model)
        for model, _ in self._connections:
            if not is_sharded(model):
                continue
            store = getattr(shard_manager(model).strategy, "store", None)
            if store is not None and hasattr(store, "clear"):
                store.clear()
        return deleted

    def close(self) -> None:
        """Delete the tables, restore every ``Meta`` and ``_connection``. Safe to call twice."""
        errors: list[Exception] = []
        for table in reversed(self._tables):
            if table.created and table.creator is not None:
                try:
                    creator: Any = table.creator
                    if getattr(creator, "_is_sharded_model", False):  # its metadata table is the binding's too
                        creator.delete_table(shard_metadata=False)
                    else:
                        table.creator.delete_table()
                except TableDoesNotExist:
                    pass
                except TableError as error:
                    if error.cause_response_code != "ResourceNotFoundException":
                        errors.append(error)
        for entry in reversed(self._metas):
            entry.restore()
        for model, connection in reversed(self._connections):
            restore_connection(model, connection, inherited=connection is _ABSENT)
        self._tables.clear()
        self._metas.clear()
        self._connections.clear()
        if errors:
            raise errors[0]

    def __enter__(self) -> ModelBinding:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _delete_every_item(model: type[Model]) -> int:
    client = botocore_client(model)
    table = model.Meta.table_name
    key_names = [entry["AttributeName"] for entry in client.describe_table(TableName=table)["Table"]["KeySchema"]]
    names = {f"#k{n}": name for n, name in enumerate(key_names)}
    protocol = {name: {"S": value} for name, value in zip(("partition_key", "model"), PROTOCOL_KEY, strict=True)}
    kept = protocol if isinstance(model, type) and issubclass(model, ShardMetadata) else None
    deleted = 0
    start: dict[str, Any] | None = None
    while True:
        page = client.scan(TableName=table, ProjectionExpression=", ".join(names), ExpressionAttributeNames=names,
                           ConsistentRead=True, **({"ExclusiveStartKey": start} if start else {}))
        keys = [key for key in page.get("Items", []) if key != kept]
        for first in range(0, len(keys), 25):
            requests = [{"DeleteRequest": {"Key": key}} for key in keys[first:first + 25]]
            while requests:
                answer = client.batch_write_item(RequestItems={table: requests})
                requests = answer.get("UnprocessedItems", {}).get(table, [])
        deleted += len(keys)
        start = page.get("LastEvaluatedKey")
        if start is None:
            return deleted


@contextlib.contextmanager
def bound_models(server: DynamoDBLocal, *models: type[Model]) -> Iterator[dict[type[Model], str]]:
    """Bind ``models`` (and their companions) to ``server`` for the ``with`` block.

    Usable outside pytest::

        with running_dynamodb_local() as server, bound_models(server, AuditLog) as tables:
            AuditLog(...).save()

    The botocore sessions made meanwhile share botocore's parsed data files
    (:func:`~pynamodb_sharding.testing.botocore_data.shared_botocore_data`).

    Yields:
        Each bound model class and its table name.
    """
    with shared_botocore_data(), ModelBinding(server) as binding:
        yield binding.bind(*models)
