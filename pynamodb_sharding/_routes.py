"""How a sharded model's requests are routed: chosen once per class, when the class is defined.

:class:`TableRoutes` sends a model's requests to its one table: writes through
:mod:`~pynamodb_sharding._writes`, point reads through :mod:`~pynamodb_sharding._point_reads`,
queries and counts through :mod:`~pynamodb_sharding._fanout`, the rest as PynamoDB does.
:class:`PeriodRoutes` serves a time-partitioned model (``Meta.table_name = TimePartitioned(...)``):
each request goes to the routes of the period model whose table it addresses (see
:mod:`~pynamodb_sharding._partitioned`). The model's methods call ``cls._routes`` and never
branch on which it is; a new way of routing is one new class here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import attrs
from pynamodb.constants import CAMEL_COUNT, ITEMS
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.condition import Condition
from pynamodb.models import Model
from pynamodb.pagination import ResultIterator

from pynamodb_sharding import _partitioned as partitioned
from pynamodb_sharding import _point_reads as point_reads
from pynamodb_sharding import _writes as writes
from pynamodb_sharding._batch import ShardedBatchWrite
from pynamodb_sharding._conditions import Usage, rewrite_condition
from pynamodb_sharding._descriptor import shard_manager
from pynamodb_sharding._exceptions import PeriodRangeError, ShardingDefinitionError
from pynamodb_sharding._fanout import merged_count, merged_query
from pynamodb_sharding._fleet import protocol_for_created_tables
from pynamodb_sharding._host import (
    arm_client,
    client_hooks_armed,
    discriminator_attribute,
    guard_keys,
    index_range_attribute,
    indexes,
    keep_unmodelled_fields,
    pace_rate_limit,
    table_connection,
)
from pynamodb_sharding._hot_keys import hint_item_key
from pynamodb_sharding._indexes import (
    check_index_agreement,
    sharded_index,
    sharded_indexes_of,
    write_growing_indexes,
)
from pynamodb_sharding._metadata import ShardCountsKeptWarning, ShardCountStore, ShardMetadata, delete_namespaces
from pynamodb_sharding._owned import Owned
from pynamodb_sharding._periods import is_time_partitioned
from pynamodb_sharding._point_reads import without_stale_bare_copies
from pynamodb_sharding._pool import pause
from pynamodb_sharding._query_plan import QuerySpec

__all__ = ["PeriodRoutes", "TableRoutes", "bind_routes", "routes_of"]

_R = TypeVar("_R")

#: Each sharded model class's routes, chosen when the class was defined.
_ROUTES: Owned[TableRoutes] = Owned("routes")


def bind_routes(model: type[Any]) -> TableRoutes:
    """Choose ``model``'s routes (by period for a time-partitioned model) and remember them."""
    routes = PeriodRoutes(model) if is_time_partitioned(model) else TableRoutes(model)
    _ROUTES[model] = routes
    return routes


def routes_of(model: type[Any]) -> TableRoutes:
    """The routes of a sharded model class (see :func:`bind_routes`)."""
    found = _ROUTES.get(model)
    return found if found is not None else bind_routes(model)


def _companions(model: type[Any]) -> tuple[type[Model], ...]:
    companions = shard_manager(model).companion_models()
    for index in sharded_indexes_of(model).values():
        companions += tuple(found for found in index.manager.companion_models() if found not in companions)
    return companions


def shard_count_spaces(model: type[Any]) -> dict[type[ShardMetadata], list[str]]:
    """The metadata tables (``DynamicShards``) holding the shard counts of ``model``'s keys and of
    its sharded indexes' values, each with the namespaces (``model`` values) of those items."""
    spaces: dict[type[ShardMetadata], list[str]] = {}
    managers = [shard_manager(model), *(index.manager for index in sharded_indexes_of(model).values())]
    for manager in managers:
        strategy = manager.strategy
        metadata_model = getattr(strategy, "metadata_model", None)
        if not isinstance(getattr(strategy, "store", None), ShardCountStore) or metadata_model is None:
            continue
        declared = getattr(strategy, "namespace", None)
        namespace = declared if declared is not None else manager.space.namespace
        found = spaces.setdefault(metadata_model, [])
        found.extend(name for name in (namespace, hint_item_key(namespace, 0)[1]) if name not in found)
    return spaces


def settle_shard_counts(model: type[Any], shard_metadata: bool | None) -> None:
    """After ``model``'s table was deleted: delete its shard counts (``shard_metadata=True``),
    keep them (``False``), or keep them and say so with a :class:`ShardCountsKeptWarning`
    (``None``, the default, when the model has counts in a metadata table)."""
    if shard_metadata is False:
        return
    spaces = shard_count_spaces(model)
    for metadata_model, namespaces in spaces.items():
        if shard_metadata:
            delete_namespaces(metadata_model, namespaces)
            for manager in [shard_manager(model), *(index.manager for index in sharded_indexes_of(model).values())]:
                store = getattr(manager.strategy, "store", None)
                if isinstance(store, ShardCountStore):
                    store.clear()  # this process's cached counts of the deleted items
            continue
        listed = ", ".join(repr(name) for name in namespaces if not name.endswith("#hot-keys"))
        msg = (
            f"{model.__name__}: its table {model.Meta.table_name!r} was deleted, but the shard counts of "
            f"its keys stay in the metadata table {metadata_model.Meta.table_name!r} (the items whose "
            f"model is {listed}): a table created again under this name starts from those counts. Pass "
            f"delete_table(shard_metadata=True) to delete them with the table, or shard_metadata=False "
            f"to keep them without this warning."
        )
        warnings.warn(msg, ShardCountsKeptWarning, stacklevel=4)


class _LegacyScan:
    """The scan pages of a ``legacy_unsharded`` model: without the stale bare copies of items a
    shard also holds. A bound method of an object with the table connection's ``get_meta_table``,
    as PynamoDB's ``connection.scan`` is: the scan's ``last_evaluated_key``, stopped by its limit
    in the middle of the last page, reads the key names from there."""

    def __init__(self, model: type[Any], connection: Any, consistent_read: bool | None) -> None:
        self.model = model
        self.connection = connection
        self.consistent_read = consistent_read

    def get_meta_table(self) -> Any:
        return self.connection.get_meta_table()

    def scan(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        data: dict[str, Any] = self.connection.scan(*args, **kwargs)
        items = data.get(ITEMS)
        if items:
            kept = without_stale_bare_copies(self.model, items, consistent_read=self.consistent_read)
            if len(kept) != len(items):
                count = data.get(CAMEL_COUNT, len(items)) - len(items) + len(kept)
                data = {**data, ITEMS: kept, CAMEL_COUNT: count}
        return data


class TableRoutes:
    """The requests of a sharded model with one table.

    .. versionadded:: 0.1.0
    """

    def __init__(self, model: type[Any]) -> None:
        self.model = model

    # -- the connection ---------------------------------------------------------------------

    def connection(self, connection: Any) -> Any:
        """Arm the model's table connection (PynamoDB's ``_get_connection``) before first use."""
        manager = shard_manager(self.model)
        if not manager.index_only:
            # Every request of this model goes through this connection's client: make the client
            # refuse a key without a shard suffix (see _host: fails closed if PynamoDB changes).
            guard_keys(self.model, connection, manager.codec)
        else:  # bare keys are its keys; throttles are still classified from the reasons
            keep_unmodelled_fields(connection.connection.client)
        if client_hooks_armed():
            arm_client(connection.connection.client)  # the asyncio side's transport
        return connection

    def companion_models(self) -> tuple[type[Model], ...]:
        return _companions(self.model)

    # -- writes of one item -------------------------------------------------------------------

    def save(self, item: Any, condition: Condition | None, add_version_condition: bool) -> dict[str, Any]:
        if sharded_indexes_of(self.model):
            return write_growing_indexes(item, lambda: writes.save(item, condition, add_version_condition))
        return writes.save(item, condition, add_version_condition)

    def update(self, item: Any, actions: list[Any], condition: Condition | None, add_version_condition: bool) -> Any:
        return writes.update(item, actions, condition, add_version_condition)

    def delete(self, item: Any, condition: Condition | None, add_version_condition: bool) -> Any:
        return writes.delete(item, condition, add_version_condition)

    def in_period(self, item: Any, call: Callable[[], _R]) -> _R:
        """Run ``call`` (a request of ``item`` built by PynamoDB) as it is."""
        return call()

    def refresh(self, item: Any, consistent_read: bool) -> None:
        point_reads.refresh(item, consistent_read)

    def to_dynamodb_dict(self, item: Any) -> dict[str, dict[str, Any]]:
        return writes.stored_dict(item, Model.to_dynamodb_dict(item))

    # -- reads --------------------------------------------------------------------------------

    def get(self, hash_key: Any, range_key: Any, consistent_read: bool,
            attributes_to_get: Sequence[str] | None) -> Any:
        return point_reads.get(self.model, hash_key, range_key, consistent_read, attributes_to_get)

    def batch_get(self, keys: Iterable[Any], consistent_read: bool | None,
                  attributes_to_get: Sequence[str] | None) -> Iterator[Any]:
        return point_reads.batch_get(self.model, keys, consistent_read, attributes_to_get)

    def operation_kwargs(self, hash_key: Any, range_key: Any, condition: Condition | None) -> dict[str, Any]:
        return point_reads.operation_kwargs(self.model, hash_key, range_key, condition)

    def query(self, spec: QuerySpec) -> Any:
        model = self.model
        index_name = spec.index_name
        if shard_manager(model).index_only and sharded_index(model, index_name) is None:
            # The table (or an unsharded index) of a model that shards only an index: PynamoDB's
            # own query, its cursor and pages, with conditions on sharded index attributes rewritten
            # (its rate_limit waits with the library's pause: on an event loop, by awaiting).
            plain = attrs.evolve(
                spec, range_key_condition=rewrite_condition(model, spec.range_key_condition, Usage.KEY),
                filter_condition=rewrite_condition(model, spec.filter_condition, Usage.FILTER))
            return pace_rate_limit(Model.query.__func__(  # type: ignore[attr-defined]  # PynamoDB's, for this class
                model, **plain.arguments()), pause)
        if index_name is not None and sharded_index(model, index_name) is not None:
            check_index_agreement(model)
        return merged_query(model, spec)

    def count(self, hash_key: Any, range_key_condition: Condition | None, filter_condition: Condition | None,
              consistent_read: bool, index_name: str | None, limit: int | None, rate_limit: float | None) -> int:
        model = self.model
        plain: Callable[..., int] = Model.count.__func__  # type: ignore[attr-defined]  # PynamoDB's, for this class
        if hash_key is None:
            return plain(model, None, range_key_condition, filter_condition, consistent_read, index_name, limit,
                         rate_limit)
        if shard_manager(model).index_only and sharded_index(model, index_name) is None:  # PynamoDB's, as in query
            return plain(model, hash_key, rewrite_condition(model, range_key_condition, Usage.KEY),
                         rewrite_condition(model, filter_condition, Usage.FILTER), consistent_read, index_name,
                         limit, rate_limit)
        if index_name is not None and sharded_index(model, index_name) is not None:
            check_index_agreement(model)
        return merged_count(model, hash_key, range_key_condition=range_key_condition,
                            filter_condition=filter_condition, consistent_read=consistent_read,
                            index_name=index_name, limit=limit, rate_limit=rate_limit)

    def scan(self, filter_condition: Condition | None, segment: int | None, total_segments: int | None,
             limit: int | None, last_evaluated_key: Any, page_size: int | None, consistent_read: bool | None,
             index_name: str | None, rate_limit: float | None, attributes_to_get: Sequence[str] | None) -> Any:
        """PynamoDB's scan, with comparisons of the hash key in ``filter_condition`` rewritten;
        for a ``legacy_unsharded`` model, without the stale bare copies of items a shard also
        holds (a scan may meet the two in different pages or segments)."""
        model = self.model
        filter_condition = rewrite_condition(model, filter_condition, Usage.FILTER)
        discriminator = discriminator_attribute(model)
        if discriminator:  # as Model.scan: a polymorphic model reads items of its own classes
            filter_condition &= discriminator.is_in(*discriminator.get_registered_subclasses(model))
        connection = table_connection(model)
        scan_page: Callable[..., dict[str, Any]] = connection.scan
        if shard_manager(model).legacy_unsharded:
            scan_page = _LegacyScan(model, connection, consistent_read).scan

        return pace_rate_limit(ResultIterator(
            scan_page,
            (),
            {
                "filter_condition": filter_condition, "exclusive_start_key": last_evaluated_key,
                "segment": segment, "limit": page_size if page_size is not None else limit,
                "total_segments": total_segments, "consistent_read": consistent_read,
                "index_name": index_name, "attributes_to_get": attributes_to_get,
            },
            map_fn=model.from_raw_data,
            limit=limit,
            rate_limit=rate_limit,
        ), pause)  # its rate_limit waits with the library's pause: on an event loop, by awaiting

    def batch_write(self, auto_commit: bool) -> Any:
        return ShardedBatchWrite(self.model, auto_commit=auto_commit)

    # -- the table ----------------------------------------------------------------------------

    def create_table(self, wait: bool, read_capacity_units: int | None, write_capacity_units: int | None,
                     billing_mode: str | None, ignore_update_ttl_errors: bool) -> Any:
        """Create the model's table and the tables of its companion models that are missing.

        A companion is waited for: a metadata table created here gets the declared fleet
        protocol (see :func:`pynamodb_sharding.store_fleet_protocol`) before any process uses it.
        """
        model = self.model
        result = Model.create_table.__func__(  # type: ignore[attr-defined]  # PynamoDB's, for this class
            model, wait=wait, read_capacity_units=read_capacity_units, write_capacity_units=write_capacity_units,
            billing_mode=billing_mode, ignore_update_ttl_errors=ignore_update_ttl_errors,
        )
        created = []
        for companion in self.companion_models():
            if not companion.exists():
                companion.create_table(wait=True)
                created.append(companion)
        protocol_for_created_tables(model, created)
        return result

    def delete_table(self, wait: bool, shard_metadata: bool | None) -> Any:
        result = Model.delete_table.__func__(self.model, wait=wait)  # type: ignore[attr-defined]
        settle_shard_counts(self.model, shard_metadata)
        return result

    def exists(self) -> bool:
        found: bool = Model.exists.__func__(self.model)  # type: ignore[attr-defined]
        return found

    def describe_table(self) -> Any:
        return Model.describe_table.__func__(self.model)  # type: ignore[attr-defined]


class PeriodRoutes(TableRoutes):
    """The requests of a time-partitioned model: each goes to the routes of the period model
    whose table it addresses (see :mod:`pynamodb_sharding._partitioned`).

    .. versionadded:: 0.1.0
    """

    def connection(self, connection: Any) -> Any:
        model = self.model
        msg = (
            f"{model.__name__}: Meta.table_name is {str(model.Meta.table_name)!r}, one table per period, so "
            f"this request needs a period: use {model.__name__}.period_model(period) for it."
        )
        raise ShardingDefinitionError(msg)

    def _current(self) -> Any:
        return partitioned.period_model(self.model, partitioned.declaration(self.model).current())

    def save(self, item: Any, condition: Condition | None, add_version_condition: bool) -> dict[str, Any]:
        return partitioned.write(item, lambda: routes_of(type(item)).save(item, condition, add_version_condition))

    def update(self, item: Any, actions: list[Any], condition: Condition | None, add_version_condition: bool) -> Any:
        return partitioned.write(
            item, lambda: routes_of(type(item)).update(item, actions, condition, add_version_condition),
        )

    def delete(self, item: Any, condition: Condition | None, add_version_condition: bool) -> Any:
        return partitioned.write(item, lambda: routes_of(type(item)).delete(item, condition, add_version_condition))

    def in_period(self, item: Any, call: Callable[[], _R]) -> _R:
        """Run ``call`` with ``item`` as an item of its period's model (its table)."""
        with partitioned.as_period_item(item):
            return call()

    def refresh(self, item: Any, consistent_read: bool) -> None:
        with partitioned.as_period_item(item) as model:
            try:
                return routes_of(model).refresh(item, consistent_read)
            except PynamoDBException as error:
                if not partitioned.is_missing_period_table(model, error):
                    raise
        raise self.model.DoesNotExist("This item does not exist in the table.")

    def to_dynamodb_dict(self, item: Any) -> dict[str, dict[str, Any]]:
        with partitioned.as_period_item(item) as model:
            return routes_of(model).to_dynamodb_dict(item)

    def get(self, hash_key: Any, range_key: Any, consistent_read: bool,
            attributes_to_get: Sequence[str] | None) -> Any:
        model = partitioned.period_model(self.model, partitioned.declaration(self.model).period_of(range_key))
        try:
            found = model.get(hash_key, range_key, consistent_read, attributes_to_get)
        except PynamoDBException as error:
            if not partitioned.is_missing_period_table(model, error):
                raise
            raise self.model.DoesNotExist() from error
        return partitioned.as_declared(found, self.model)

    def batch_get(self, keys: Iterable[Any], consistent_read: bool | None,
                  attributes_to_get: Sequence[str] | None) -> Iterator[Any]:
        template = self.model
        pairs = [point_reads.batch_key(template, key) for key in keys]
        for period, period_keys in partitioned.group_keys(template, pairs).items():
            model = partitioned.period_model(template, period)
            try:
                for found in model.batch_get(period_keys, consistent_read, attributes_to_get):
                    yield partitioned.as_declared(found, template)
            except PynamoDBException as error:
                if not partitioned.is_missing_period_table(model, error):
                    raise

    def operation_kwargs(self, hash_key: Any, range_key: Any, condition: Condition | None) -> dict[str, Any]:
        model = partitioned.period_model(self.model, partitioned.declaration(self.model).period_of(range_key))
        result: dict[str, Any] = model.get_operation_kwargs_from_class(hash_key, range_key, condition)
        return result

    def query(self, spec: QuerySpec) -> Any:
        """A query of a time-partitioned model: the periods it touches, one after the other."""
        template = self.model
        declared = partitioned.declaration(template)
        index_name, range_key_condition = spec.index_name, spec.range_key_condition
        if index_name is not None:
            index = indexes(template).get(index_name)
            sort = index_range_attribute(index) if index is not None else None
            if sort is not None and sort.attr_name != template.get_attributes()[declared.attribute].attr_name:
                msg = (
                    f"{template.__name__}.query: index {index_name!r} sorts by {sort.attr_name!r}, not by "
                    f"{declared.attribute!r}, so the items of several periods' tables cannot come in its "
                    f"order; query one period with {template.__name__}.period_model(period).query(..., "
                    f"index_name={index_name!r})."
                )
                raise PeriodRangeError(msg)
        forward = spec.scan_index_forward is not False
        periods, missing = partitioned.plan_read(template, range_key_condition, forward=forward)

        def query_period(model: Any, cursor: Any, left: int | None) -> Any:
            return model.query(**attrs.evolve(spec, limit=left, last_evaluated_key=cursor).arguments())

        return partitioned.PeriodResultIterator(template, periods, query_period, limit=spec.limit,
                                                given=spec.last_evaluated_key, forward=forward,
                                                page_size=spec.page_size, filtered=spec.filter_condition is not None,
                                                ends_as_one_query=True, missing=missing)

    def count(self, hash_key: Any, range_key_condition: Condition | None, filter_condition: Condition | None,
              consistent_read: bool, index_name: str | None, limit: int | None, rate_limit: float | None) -> int:
        """A count of a time-partitioned model: the sum over the periods it touches."""
        template = self.model
        declared = partitioned.declaration(template)
        periods, known_missing = partitioned.plan_read(
            template, range_key_condition if hash_key is not None else None, what="count",
        )
        missing = list(known_missing or ())
        if declared.missing_periods == "raise":
            partitioned.report_missing(template, "count", missing)  # before sending anything
        current = declared.current()
        total = 0
        for period in periods:
            left = None if limit is None else limit - total
            if left is not None and left <= 0:
                break
            model = partitioned.period_model(template, period)
            try:
                total += model.count(
                    hash_key, range_key_condition, filter_condition, consistent_read, index_name, left, rate_limit,
                )
            except PynamoDBException as error:
                state = partitioned.period_table_state(model, error)
                if not partitioned.holds_nothing(state):
                    raise
                if state == partitioned.MISSING and known_missing is None and period < current:
                    missing.append(period)
        partitioned.report_missing(template, "count", missing)
        return total

    def scan(self, filter_condition: Condition | None, segment: int | None, total_segments: int | None,
             limit: int | None, last_evaluated_key: Any, page_size: int | None, consistent_read: bool | None,
             index_name: str | None, rate_limit: float | None, attributes_to_get: Sequence[str] | None) -> Any:
        """The tables of every period that has one, oldest first."""
        def scan_period(model: Any, cursor: Any, left: int | None) -> Any:
            return model.scan(filter_condition, segment, total_segments, left, cursor, page_size,
                              consistent_read, index_name, rate_limit, attributes_to_get)

        periods = partitioned.periods_to_read(self.model, None, what="scan")
        return partitioned.PeriodResultIterator(self.model, periods, scan_period, limit=limit,
                                                given=last_evaluated_key, tokens=False)

    def batch_write(self, auto_commit: bool) -> Any:
        return partitioned.PeriodBatchWrite(self.model, auto_commit=auto_commit)

    def create_table(self, wait: bool, read_capacity_units: int | None, write_capacity_units: int | None,
                     billing_mode: str | None, ignore_update_ttl_errors: bool) -> Any:
        """The table of the current period (``rotate`` creates the periods ahead)."""
        billing: dict[str, Any] = {"read_capacity_units": read_capacity_units,
                                   "write_capacity_units": write_capacity_units, "billing_mode": billing_mode}
        if billing_mode is None and read_capacity_units is None and write_capacity_units is None:
            billing = partitioned.billing_arguments(self.model)  # Meta's, else on-demand, as rotate() does
        return self._current().create_table(wait=wait, ignore_update_ttl_errors=ignore_update_ttl_errors, **billing)

    def delete_table(self, wait: bool, shard_metadata: bool | None) -> Any:
        """Every period's table (their keys' counts are the model's: settled once, after)."""
        for period in partitioned.existing_periods(self.model):
            partitioned.period_model(self.model, period).delete_table(wait=wait, shard_metadata=False)
        settle_shard_counts(self.model, shard_metadata)

    def exists(self) -> bool:
        found: bool = self._current().exists()
        return found

    def describe_table(self) -> Any:
        return self._current().describe_table()
