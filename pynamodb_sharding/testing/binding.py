"""Point PynamoDB model classes at a DynamoDB Local server, each with a table of its own.

Binding rewrites the connection settings and the table name on each model's ``Meta``, creates
the tables, and on close deletes them and puts every ``Meta`` attribute back exactly as it was
(including attributes that were absent). A ``ShardedModel``'s companion models (the metadata
model of ``DynamicShards``) are bound with it. A subclass without its own ``Meta`` shares its
parent's ``Meta`` object and therefore its table: each distinct ``Meta`` is bound once.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from pynamodb.constants import PAY_PER_REQUEST_BILLING_MODE
from pynamodb.exceptions import TableDoesNotExist, TableError
from pynamodb.models import Model

from pynamodb_sharding._host import botocore_client, reset_connection, restore_connection
from pynamodb_sharding.model import with_companions
from pynamodb_sharding.partitioned import existing_periods, period_model
from pynamodb_sharding.periods import TimePartitioned, is_time_partitioned
from pynamodb_sharding.testing.local import DynamoDBLocal

__all__ = ["ModelBinding", "bound_models"]

_ABSENT = object()
# The Meta attributes a binding rewrites; everything else on Meta is left alone.
_BOUND_ATTRIBUTES = ("table_name", "host", "region", "aws_access_key_id", "aws_secret_access_key",
                     "aws_session_token")


class _BoundMeta:
    """One ``Meta`` object rewritten for a binding: its saved attributes and its bound table."""

    def __init__(self, meta: type, model: type[Model]) -> None:
        self.meta = meta
        self.model = model  # the model the table is created and deleted through
        self.saved = {name: vars(meta).get(name, _ABSENT) for name in _BOUND_ATTRIBUTES}
        self.table_created = False

    def restore(self) -> None:
        for name, value in self.saved.items():
            if value is _ABSENT:
                if name in vars(self.meta):
                    delattr(self.meta, name)
            else:
                setattr(self.meta, name, value)


class ModelBinding:
    """Binds model classes to one DynamoDB Local server until :meth:`close`.

    Each call of :meth:`bind` may add models; binding a model (or a ``Meta``) twice is a no-op.
    """

    def __init__(self, server: DynamoDBLocal) -> None:
        self.server = server
        self._metas: list[_BoundMeta] = []
        # Each bound model and its own ``_connection`` attribute (or _ABSENT), in binding order.
        self._connections: list[tuple[type[Model], Any]] = []

    @property
    def table_names(self) -> dict[type[Model], str]:
        """Each bound model class and the table it now uses."""
        return {model: model.Meta.table_name for model, _ in self._connections}

    def bind(self, *models: type[Model]) -> dict[type[Model], str]:
        """Bind the models and their companions; create their tables (on-demand billing).

        Returns:
            Each model bound by this call (companions included) and its table name.
        """
        bound = with_companions(models)
        suffix = uuid.uuid4().hex[:8]
        for model in bound:
            if any(model is known for known, _ in self._connections):
                continue
            meta = getattr(model, "Meta", None)
            table_name = getattr(meta, "table_name", None)
            if meta is None or not table_name:
                msg = f"{model.__name__}.Meta.table_name is not set: give the model a Meta with a table_name"
                raise TypeError(msg)
            inherited = "_connection" not in vars(model)
            previous = reset_connection(model)
            self._connections.append((model, _ABSENT if inherited else previous))
            if any(meta is entry.meta for entry in self._metas):
                continue
            entry = _BoundMeta(meta, model)
            self._metas.append(entry)
            if isinstance(table_name, TimePartitioned):  # one table per period: rename them all
                meta.table_name = table_name.renamed(f"{table_name.template}_{suffix}")
            else:
                meta.table_name = f"{table_name}_{suffix}"
            meta.host = self.server.endpoint
            meta.region = self.server.region
            meta.aws_access_key_id = self.server.aws_access_key_id
            meta.aws_secret_access_key = self.server.aws_secret_access_key
            meta.aws_session_token = None
        for entry in self._metas:
            if not entry.table_created:
                entry.model.create_table(billing_mode=PAY_PER_REQUEST_BILLING_MODE, wait=True)
                entry.table_created = True
        return {model: model.Meta.table_name for model in bound}

    __call__ = bind

    def truncate(self) -> int:
        """Delete every item of the bound tables, keeping the tables; returns how many were deleted.

        Much faster than new tables between tests (a scan of the keys and 25-item batch
        deletes instead of ``DeleteTable`` and ``CreateTable``). The shard counts that bound
        ``DynamicShards`` models cached are forgotten too, since their metadata items are gone.
        """
        deleted = 0
        for entry in self._metas:
            if entry.table_created and is_time_partitioned(entry.model):
                model: Any = entry.model
                for period in existing_periods(model):
                    deleted += _delete_every_item(period_model(model, period))
            elif entry.table_created:
                deleted += _delete_every_item(entry.model)
        for model, _ in self._connections:
            name = getattr(model, "_sharding_attr", None)
            if name is None:
                continue  # not a sharded model
            store = getattr(getattr(model, name).strategy, "store", None)  # the class's ShardManager
            if store is not None and hasattr(store, "clear"):
                store.clear()
        return deleted

    def close(self) -> None:
        """Delete the tables, restore every ``Meta`` and ``_connection``. Safe to call twice."""
        errors: list[Exception] = []
        for entry in reversed(self._metas):
            if entry.table_created:
                try:
                    entry.model.delete_table()
                except TableDoesNotExist:
                    pass
                except TableError as error:
                    if error.cause_response_code != "ResourceNotFoundException":
                        errors.append(error)
        for entry in reversed(self._metas):
            entry.restore()
        for model, connection in reversed(self._connections):
            restore_connection(model, connection, inherited=connection is _ABSENT)
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
    deleted = 0
    start: dict[str, Any] | None = None
    while True:
        page = client.scan(TableName=table, ProjectionExpression=", ".join(names), ExpressionAttributeNames=names,
                           ConsistentRead=True, **({"ExclusiveStartKey": start} if start else {}))
        keys = page.get("Items", [])
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

    Yields:
        Each bound model class and its table name.
    """
    with ModelBinding(server) as binding:
        yield binding.bind(*models)
