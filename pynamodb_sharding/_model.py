"""``ShardedModel``: the PynamoDB ``Model`` subclass whose hash key is write-sharded.

User code only ever sees the logical key. Every request is rewritten to the physical key
(``logical + separator + shard``), every item read back is decoded and remembers its shard
(:mod:`~pynamodb_sharding._item`), so saving, updating, deleting or refreshing it again hits
the same physical key.

The class is a thin front: PynamoDB's public methods and the hooks PynamoDB calls, each handing
the work to the class's routes (:mod:`~pynamodb_sharding._routes`, chosen once when the class is
defined: one table, or one table per period), which go down to the writes, point reads and
merged reads. Nothing below calls back up into this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pynamodb.connection.table import TableConnection
from pynamodb.exceptions import DeleteError, PutError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.indexes import GlobalSecondaryIndex
from pynamodb.models import MetaModel, Model
from pynamodb.pagination import ResultIterator

from pynamodb_sharding import _item as item_shard
from pynamodb_sharding import _partitioned as partitioned
from pynamodb_sharding import _point_reads as point_reads
from pynamodb_sharding import _regions as regions
from pynamodb_sharding import _writes as writes
from pynamodb_sharding._building import builds_here, instantiate
from pynamodb_sharding._declaration import declare
from pynamodb_sharding._descriptor import index_owner, shard_manager
from pynamodb_sharding._exceptions import LogicalKeyError, ShardingDefinitionError
from pynamodb_sharding._host import connection_owner, reset_connection, share_botocore_data
from pynamodb_sharding._indexes import add_shard_attributes
from pynamodb_sharding._periods import is_time_partitioned
from pynamodb_sharding._query_plan import QuerySpec
from pynamodb_sharding._replicas import add_replica_indexes
from pynamodb_sharding._routes import TableRoutes

if TYPE_CHECKING:
    from pynamodb_sharding._async_results import AsyncBatchWrite, AsyncMergedResult, AsyncResult, AsyncResultIterator
    from pynamodb_sharding._merged_results import MergedResultIterator

__all__ = ["ShardedModel", "with_companions"]

_T = TypeVar("_T", bound="ShardedModel")


class ShardedMetaModel(MetaModel):
    """Checks and binds the sharding declaration when a ``ShardedModel`` subclass is defined
    (:func:`~pynamodb_sharding._declaration.declare`), and chooses how its requests are routed."""

    def __init__(self, name: str, bases: Any, namespace: Any, discriminator: Any = None) -> None:
        super().__init__(name, bases, namespace, discriminator)
        cls: Any = self
        cls._routes = declare(cls)


class ShardedModel(Model, metaclass=ShardedMetaModel):
    """A PynamoDB model whose hash key is spread over shards.

    Declare a ``Sharding`` descriptor on the subclass (or only on one of its
    ``GlobalSecondaryIndex`` classes, to shard that index and keep the table's keys as they
    are); everything else is PynamoDB::

        class AuditLog(ShardedModel):
            class Meta:
                table_name = "audit_log"
            file_path = UnicodeAttribute(hash_key=True)
            accessed_at = NumberAttribute(range_key=True)
            shards = Sharding(RandomShards(10))

    .. versionadded:: 0.1.0
    """

    # Where an item remembers its shard (``_item.SLOT``): a slot, so that the item's ``__dict__``
    # (``vars(item)``, FastAPI's ``jsonable_encoder``) is a plain PynamoDB item's.
    __slots__ = (item_shard.SLOT,)

    #: What ``Sharding.__set_name__`` checks (without importing this module).
    _is_sharded_model: ClassVar[bool] = True
    #: How this class's requests are routed (one table, or one per period); ``None`` on an
    #: abstract base. Chosen when the class is defined.
    _routes: ClassVar[TableRoutes | None] = None

    @classmethod
    def _routing(cls) -> TableRoutes:
        routes = cls._routes
        if routes is None:
            shard_manager(cls)  # raises the error that names the missing declaration
            raise AssertionError("unreachable")
        return routes

    # -- the sharding declaration -------------------------------------------------------------

    @classmethod
    def companion_models(cls) -> tuple[type[Model], ...]:
        """Models whose tables must exist beside this one (e.g. the shard-count metadata)."""
        return () if cls._routes is None else cls._routes.companion_models()

    def logical_hash_key(self) -> str:
        """The logical hash key of this item, validated."""
        return item_shard.logical_key(self, shard_manager(type(self)))

    @classmethod
    def period_model(cls: type[_T], period: str) -> type[_T]:
        """The model of one period's table of a time-partitioned model (``"201602"``).

        A subclass of this model whose ``Meta.table_name`` is that period's table; every
        request of it goes to that table. Made once per period and reused.

        .. versionadded:: 0.1.0
        """
        if not is_time_partitioned(cls):
            msg = (
                f"{cls.__name__}.period_model: {cls.__name__} is not time-partitioned; declare "
                f"Meta.table_name = TimePartitioned('name.{{period}}', attribute=..., period=...)."
            )
            raise ShardingDefinitionError(msg)
        return partitioned.period_model(cls, period)

    # -- hooks PynamoDB calls -----------------------------------------------------------------

    @classmethod
    def _get_connection(cls) -> TableConnection:
        owner = connection_owner(cls)
        if owner is not None and owner is not cls and not getattr(owner, "_is_sharded_model", False):
            # A plain base of the application (class Event(AppModel, ShardedModel)) cached its
            # connection: this model's client gets the key guard, so it needs one of its own.
            reset_connection(cls)
        connection = super()._get_connection()
        if vars(cls).get("_derived_at_run_time"):  # a period model: botocore's data parsed once
            share_botocore_data(connection)
        route = regions.current_route()
        if route is not None:  # a write sent to another region (Meta.write_region, item_home)
            connection = regions.routed_connection(cls, connection, route)
        routed: TableConnection = cls._routing().connection(connection)
        return routed

    @classmethod
    def _instantiate(cls: type[_T], attribute_values: dict[str, Any]) -> _T:
        instance = instantiate(cls, attribute_values) if builds_here(cls) else super()._instantiate(attribute_values)
        point_reads.adopt_stored(instance, attribute_values)
        return instance

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        super().deserialize(attribute_values)
        point_reads.adopt_stored(self, attribute_values)
        item_shard.state(self).partial = False  # refresh() and update() read the whole item

    def serialize(self, null_check: bool = True) -> dict[str, dict[str, Any]]:
        """The item as DynamoDB stores it: the hash key is the physical key.

        A new item is assigned its write shard here (and keeps it), which is what batch and
        transactional writes of new items use.
        """
        return writes.stored_form(self, super().serialize(null_check=null_check), null_check=null_check)

    @classmethod
    def _serialize_keys(cls, hash_key: Any, range_key: Any = None) -> tuple[Any, Any]:
        manager = shard_manager(cls)
        if manager.index_only:  # the table's keys are stored as they are: PynamoDB's are right
            keys: tuple[Any, Any] = super()._serialize_keys(hash_key, range_key)
            return keys
        msg = (
            f"{manager.codec.where}: a logical key cannot be sent to DynamoDB without choosing a shard; "
            f"use {cls.__name__}'s own get/query/count/batch_get, or "
            f"{cls.__name__}.shards.physical_key(key, shard) for raw requests."
        )
        raise LogicalKeyError(msg)

    def _get_serialized_keys(self) -> tuple[Any, Any]:
        return writes.addressed_key(self)

    def _get_hash_range_key_serialized_values(self) -> tuple[Any, Any]:
        return writes.addressed_key(self)

    def _get_save_args(
        self, condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> tuple[Iterable[Any], dict[str, Any]]:
        # TransactWrite.save builds its put here; the hash key in args is the physical key.
        raw_args, kwargs = super()._get_save_args(condition, add_version_condition=add_version_condition)
        args = tuple(raw_args)
        kwargs["condition"] = writes.transaction_put_condition(self, args[0], kwargs["condition"])
        return args, kwargs

    @classmethod
    def _get_schema(cls) -> Any:
        # PynamoDB builds CreateTable and its own key metadata from this schema: add the shard
        # attribute of each layout="multi_attribute" index (tested by creating such a table), and
        # the read replicas of Sharding(read_replicas=N).
        return add_replica_indexes(cls, add_shard_attributes(cls, super()._get_schema()))

    def get_update_kwargs_from_instance(
        self,
        actions: list[Action],
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            guarded = writes.update_condition(self, actions, condition)
            kwargs: dict[str, Any] = Model.get_update_kwargs_from_instance(
                self, actions, guarded, return_values_on_condition_failure,
                add_version_condition=add_version_condition)
            return kwargs

        return self._routing().in_period(self, build)

    def get_delete_kwargs_from_instance(
        self,
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            guarded = writes.delete_condition(self, condition)
            kwargs: dict[str, Any] = Model.get_delete_kwargs_from_instance(
                self, guarded, return_values_on_condition_failure, add_version_condition=add_version_condition)
            return kwargs

        return self._routing().in_period(self, build)

    def get_save_kwargs_from_instance(
        self,
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
    ) -> dict[str, Any]:
        def build() -> dict[str, Any]:
            writes.check_transaction_put(self)  # TransactWrite.save: before a shard is drawn
            kwargs: dict[str, Any] = Model.get_save_kwargs_from_instance(
                self, condition, return_values_on_condition_failure)
            return kwargs

        return self._routing().in_period(self, build)

    @classmethod
    def get_operation_kwargs_from_class(
        cls, hash_key: str, range_key: Any = None, condition: Condition | None = None,
    ) -> dict[str, Any]:
        """Request arguments for one item (``TransactGet.get``, ``TransactWrite.condition_check``)."""
        return cls._routing().operation_kwargs(hash_key, range_key, condition)

    # -- writes --------------------------------------------------------------------------------

    def save(
        self, condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> dict[str, Any]:
        """Save this item: a new item goes where its strategy says, a known one stays put.

        A sharded index whose count grows (``DynamicShards``) and that throttles the save
        grows for the item's index value, and the save is sent again (see
        :func:`pynamodb_sharding._indexes.write_growing_indexes`).

        An item whose primary key changed since it was read is a new item (the stored one
        stays, as in PynamoDB). An item whose shard is derived from attributes that changed
        since it was read is moved: the new copy is put and the old one deleted in one
        transaction. A new instance whose key :class:`HashedShards` finds stored under an older
        layout (``previous_counts``) replaces it, moving it to the current layout. An item a
        job may move (read from a bare legacy key, an older layout, a shard above its key's
        count) is moved where the job would move it, and followed when the job moved it
        meanwhile. A key is never stored twice.

        A failed save of a new item keeps the shard it was sent to when the write may have
        been applied (a timeout, a lost connection, a 5xx), so retrying ``save()`` on the
        same instance addresses the same physical key.

        With ``Meta.write_region`` or ``Meta.item_home`` (global tables) the save is sent to
        the region they name (see :doc:`global_tables`).
        """
        with regions.routed(writes.write_route(self, "save", condition, add_version_condition)), \
                writes.lookups_fail_as(PutError, "put item"):
            return self._routing().save(self, condition, add_version_condition)

    def update(
        self, actions: list[Action], condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> Any:
        """PynamoDB's ``update``; refuses actions on attributes the item's shard is derived from.

        An item a job may move is updated only where it still is, and followed when a job moved
        it meanwhile (see :doc:`migrations`).

        Raises:
            ShardingError: an action sets or removes such an attribute: the item would stay in
                a shard its new value does not select (set the attribute and call ``save()``).
        """
        with regions.routed(writes.write_route(self, "update", condition, add_version_condition)), \
                writes.lookups_fail_as(UpdateError, "update item"):
            return self._routing().update(self, actions, condition, add_version_condition)

    def delete(self, condition: Condition | None = None, *, add_version_condition: bool = True) -> Any:
        """PynamoDB's ``delete``, of the item where it is stored (followed when a job moved it)."""
        with regions.routed(writes.write_route(self, "delete", condition, add_version_condition)), \
                writes.lookups_fail_as(DeleteError, "delete item"):
            return self._routing().delete(self, condition, add_version_condition)

    def refresh(self, consistent_read: bool = False) -> None:
        """PynamoDB's ``refresh``, from the shard the item is stored in (found when unknown)."""
        self._routing().refresh(self, consistent_read)

    @classmethod
    def batch_write(cls: type[_T], auto_commit: bool = True) -> Any:
        """PynamoDB's ``batch_write``; items a job may be moving are written on their own, and a
        time-partitioned model's items each go to their period's table."""
        return cls._routing().batch_write(auto_commit)

    # -- outside DynamoDB ----------------------------------------------------------------------

    def to_dynamodb_dict(self) -> dict[str, dict[str, Any]]:
        """The item as DynamoDB stores it, with its physical key, in DynamoDB JSON.

        :meth:`from_dynamodb_dict` and :meth:`from_raw_data` read it back as the same item, in
        the same shard, so items cached outside DynamoDB (Redis, a queue message) are saved,
        updated and deleted where they are stored. An item not written yet is assigned its
        write shard here, as :meth:`serialize` does.
        """
        return self._routing().to_dynamodb_dict(self)

    def from_dynamodb_dict(self, d: dict[str, dict[str, Any]]) -> None:
        """Set attributes from :meth:`to_dynamodb_dict`'s output; the item keeps its shard."""
        super().from_dynamodb_dict(d)
        point_reads.adopt_stored(self, d)

    # -- reads ---------------------------------------------------------------------------------

    @classmethod
    def get(
        cls: type[_T],
        hash_key: Any,
        range_key: Any = None,
        consistent_read: bool = False,
        attributes_to_get: Sequence[str] | None = None,
    ) -> _T:
        """Read one item: one GetItem when its shard is computable, else one batched read."""
        found: _T = cls._routing().get(hash_key, range_key, consistent_read, attributes_to_get)
        return found

    @classmethod
    def batch_get(
        cls: type[_T],
        items: Iterable[Any],
        consistent_read: bool | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> Iterator[_T]:
        """BatchGetItem over every candidate shard of every requested key.

        Yields each stored item found (a logical key stored in two shards yields both copies).
        """
        return cls._routing().batch_get(items, consistent_read, attributes_to_get)

    @classmethod
    def query(  # type: ignore[override]  # returns a MergedResultIterator, not a ResultIterator
        cls: type[_T],
        hash_key: Any,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        index_name: str | None = None,
        scan_index_forward: bool | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, Any] | str | None = None,
        attributes_to_get: Iterable[str] | None = None,
        page_size: int | None = None,
        rate_limit: float | None = None,
    ) -> MergedResultIterator[_T]:
        """Query every shard of ``hash_key`` in parallel and merge in sort-key order.

        Same arguments as :meth:`pynamodb.models.Model.query`; ``last_evaluated_key`` of the
        result is one JSON-serialisable cursor covering every shard, and ``next_page_token`` the
        same cursor as a compact URL-safe ``str``; either is accepted as ``last_evaluated_key``.

        A model that shards only an index (no ``Sharding`` of its own) queries its table, and
        its unsharded indexes, with PynamoDB's own query: the result is PynamoDB's
        ``ResultIterator``, with PynamoDB's ``last_evaluated_key``.

        """
        found: MergedResultIterator[_T] = cls._routing().query(QuerySpec(
            hash_key=hash_key, range_key_condition=range_key_condition, filter_condition=filter_condition,
            consistent_read=consistent_read, index_name=index_name, scan_index_forward=scan_index_forward,
            limit=limit, last_evaluated_key=last_evaluated_key, attributes_to_get=attributes_to_get,
            page_size=page_size, rate_limit=rate_limit,
        ))
        return found

    @classmethod
    def scan(
        cls: type[_T],
        filter_condition: Condition | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        page_size: int | None = None,
        consistent_read: bool | None = None,
        index_name: str | None = None,
        rate_limit: float | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> ResultIterator[_T]:
        """PynamoDB's scan, with comparisons of the hash key in ``filter_condition`` rewritten.

        A time-partitioned model scans the tables of every period that has one, oldest first.
        """
        found: ResultIterator[_T] = cls._routing().scan(
            filter_condition, segment, total_segments, limit, last_evaluated_key, page_size, consistent_read,
            index_name, rate_limit, attributes_to_get,
        )
        return found

    @classmethod
    def count(
        cls: type[_T],
        hash_key: Any = None,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        index_name: str | None = None,
        limit: int | None = None,
        rate_limit: float | None = None,
    ) -> int:
        """Count the items of ``hash_key`` over every shard (in parallel); no key: the table's."""
        return cls._routing().count(hash_key, range_key_condition, filter_condition, consistent_read, index_name,
                                    limit, rate_limit)

    # -- asyncio (the [async] extra) -----------------------------------------------------------

    @classmethod
    def aquery(
        cls: type[_T],
        hash_key: Any,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        index_name: str | None = None,
        scan_index_forward: bool | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, Any] | str | None = None,
        attributes_to_get: Iterable[str] | None = None,
        page_size: int | None = None,
        rate_limit: float | None = None,
    ) -> AsyncMergedResult[_T]:
        """:meth:`query` on the running event loop: ``async for item in Model.aquery(...)``.

        The same items, order, ``last_evaluated_key`` and ``next_page_token`` as :meth:`query`
        (a cursor of either resumes the other); the shards' requests are tasks of the loop, at
        most ``Sharding(max_workers=)`` of them at a time; ``rate_limit`` paces them by
        awaiting, and ``Sharding(hedged_requests=True)`` hedges with tasks of the loop. Needs the
        ``[async]`` extra; see :doc:`async`.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        spec = QuerySpec(
            hash_key=hash_key, range_key_condition=range_key_condition, filter_condition=filter_condition,
            consistent_read=consistent_read, index_name=index_name, scan_index_forward=scan_index_forward,
            limit=limit, last_evaluated_key=last_evaluated_key, attributes_to_get=attributes_to_get,
            page_size=page_size, rate_limit=rate_limit,
        )
        return aio.AsyncMergedResult(cls, lambda: cls.query(**spec.arguments()), spec.last_evaluated_key)

    @classmethod
    async def acount(
        cls: type[_T],
        hash_key: Any = None,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        index_name: str | None = None,
        limit: int | None = None,
        rate_limit: float | None = None,
    ) -> int:
        """:meth:`count` on the running event loop (``rate_limit`` paces it by awaiting).

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.read(cls, lambda: cls.count(hash_key, range_key_condition, filter_condition,
                                                     consistent_read, index_name, limit, rate_limit))

    @classmethod
    async def aget(
        cls: type[_T],
        hash_key: Any,
        range_key: Any = None,
        consistent_read: bool = False,
        attributes_to_get: Sequence[str] | None = None,
    ) -> _T:
        """:meth:`get` on the running event loop.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.read(cls, lambda: cls.get(hash_key, range_key, consistent_read, attributes_to_get))

    async def asave(
        self, condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> dict[str, Any]:
        """:meth:`save` on the running event loop. A cancelled ``asave`` finishes the write
        first (the item is never left half-moved), then raises ``CancelledError``.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.write(type(self), lambda: self.save(condition, add_version_condition=add_version_condition))

    async def adelete(self, condition: Condition | None = None, *, add_version_condition: bool = True) -> Any:
        """:meth:`delete` on the running event loop; a cancelled ``adelete`` finishes first.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.write(type(self), lambda: self.delete(condition, add_version_condition=add_version_condition))

    async def aupdate(
        self, actions: list[Action], condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> Any:
        """:meth:`update` on the running event loop; a cancelled ``aupdate`` finishes first.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.write(type(self), lambda: self.update(actions, condition,
                                                               add_version_condition=add_version_condition))

    async def arefresh(self, consistent_read: bool = False) -> None:
        """:meth:`refresh` on the running event loop.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        await aio.read(type(self), lambda: self.refresh(consistent_read))

    @classmethod
    def ascan(
        cls: type[_T],
        filter_condition: Condition | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        page_size: int | None = None,
        consistent_read: bool | None = None,
        index_name: str | None = None,
        rate_limit: float | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> AsyncResultIterator[_T]:
        """:meth:`scan` on the running event loop: ``async for item in Model.ascan(...)``.

        The same items, order and ``last_evaluated_key`` as :meth:`scan` (a cursor of either
        resumes the other); each page is one request of the loop, ``rate_limit`` paces them by
        awaiting.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return aio.AsyncResultIterator(cls, lambda: cls.scan(
            filter_condition, segment, total_segments, limit, last_evaluated_key, page_size, consistent_read,
            index_name, rate_limit, attributes_to_get), last_evaluated_key)

    @classmethod
    def abatch_get(
        cls: type[_T],
        items: Iterable[Any],
        consistent_read: bool | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> AsyncResult[_T]:
        """:meth:`batch_get` on the running event loop: ``async for item in Model.abatch_get(keys)``
        (or ``await`` it for a list); ``items`` is read at the first ``__anext__``.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return aio.AsyncResult(cls, lambda: cls.batch_get(items, consistent_read, attributes_to_get))

    @classmethod
    def abatch_write(cls: type[_T], auto_commit: bool = True) -> AsyncBatchWrite[_T]:
        """:meth:`batch_write` on the running event loop: ``async with Model.abatch_write() as
        batch: await batch.save(item)``; what is pending is sent as the block ends.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return aio.AsyncBatchWrite(cls, cls.batch_write(auto_commit))

    # -- the table, on the event loop ----------------------------------------------------------

    @classmethod
    async def aexists(cls) -> bool:
        """:meth:`exists` on the running event loop.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.read(cls, cls.exists)

    @classmethod
    async def adescribe_table(cls) -> Any:
        """:meth:`describe_table` on the running event loop.

        .. versionadded:: 0.2.0
        """
        from pynamodb_sharding import _async_results as aio

        return await aio.read(cls, cls.describe_table)

    @classmethod
    async def acreate_table(
        cls,
        wait: bool = False,
        read_capacity_units: int | None = None,
        write_capacity_units: int | None = None,
        billing_mode: str | None = None,
        ignore_update_ttl_errors: bool = False,
    ) -> Any:
        """:meth:`create_table` in a worker thread (``asyncio.to_thread``): PynamoDB waits for a
        new table with ``time.sleep``, which would stop the event loop. For an application's
        startup; the loop goes on serving meanwhile.

        .. versionadded:: 0.2.0
        """
        return await asyncio.to_thread(cls.create_table, wait, read_capacity_units, write_capacity_units,
                                       billing_mode, ignore_update_ttl_errors)

    @classmethod
    async def adelete_table(cls, *, wait: bool = False) -> Any:
        """:meth:`delete_table` in a worker thread, as :meth:`acreate_table`.

        .. versionadded:: 0.2.0
        """
        return await asyncio.to_thread(lambda: cls.delete_table(wait=wait))

    # -- the table -----------------------------------------------------------------------------

    @classmethod
    def create_table(
        cls,
        wait: bool = False,
        read_capacity_units: int | None = None,
        write_capacity_units: int | None = None,
        billing_mode: str | None = None,
        ignore_update_ttl_errors: bool = False,
    ) -> Any:
        """Create this model's table and the tables of its companion models that are missing.

        A time-partitioned model creates the table of the current period (see
        :func:`pynamodb_sharding.rotation.rotate` for the periods ahead).
        """
        return cls._routing().create_table(wait, read_capacity_units, write_capacity_units, billing_mode,
                                           ignore_update_ttl_errors)

    @classmethod
    def delete_table(cls, *, wait: bool = False, shard_metadata: bool | None = None) -> Any:
        """Delete this model's table; a time-partitioned model deletes every period's table.

        The shard counts of its keys (and of its sharded indexes' values) that a
        ``DynamicShards`` strategy keeps in a metadata table outlive the table by default: a
        table created again under the same name starts from them. ``shard_metadata=True``
        deletes those items too (a scan of the metadata table, then batched deletes; the
        metadata table itself stays, as other models may use it); ``False`` keeps them;
        ``None`` (the default) keeps them and says so with a
        :class:`~pynamodb_sharding.ShardCountsKeptWarning` when the model has such
        counts.

        .. versionchanged:: 0.2.0
           ``shard_metadata``.
        """
        return cls._routing().delete_table(wait, shard_metadata)

    @classmethod
    def exists(cls) -> bool:
        """Whether the table exists; for a time-partitioned model, the current period's."""
        return cls._routing().exists()

    @classmethod
    def describe_table(cls) -> Any:
        """``DescribeTable`` of the table; for a time-partitioned model, the current period's."""
        return cls._routing().describe_table()


def with_companions(models: Iterable[type[Model]]) -> list[type[Model]]:
    """The models followed by their companion models, recursively, each once, in first-seen order.

    A companion is what ``Model.companion_models()`` returns, when the model has that method
    (``ShardedModel`` does: the tables its sharding strategy needs beside the model's own).
    """
    seen: list[type[Model]] = []
    pending = list(models)
    while pending:
        model = pending.pop(0)
        candidate: object = model  # callers are not always type-checked
        if not (isinstance(candidate, type) and issubclass(candidate, Model)):
            msg = f"{model!r} is not a PynamoDB Model class: pass the model classes themselves"
            raise TypeError(msg)
        if model in seen:
            continue
        seen.append(model)
        companions: Callable[[], Iterable[type[Model]]] | None = getattr(model, "companion_models", None)
        if callable(companions):
            pending.extend(companions())
    return seen


_M = TypeVar("_M", bound=Model)


class ShardedIndex(GlobalSecondaryIndex[_M]):  # type: ignore[no-untyped-call]  # PynamoDB: Index.__init_subclass__
    """A ``GlobalSecondaryIndex`` that declares the async reads of a sharded index for type
    checkers: declare ``class ByDay(ShardedIndex["AuditLog"])`` instead of
    ``GlobalSecondaryIndex`` and ``AuditLog.by_day.aquery(...)`` is typed like
    :meth:`ShardedModel.aquery` (an index declaring ``Sharding(...)`` on another base gets
    the same two methods at run time; this base declares them where ``mypy --strict`` sees them).

    .. versionadded:: 0.2.0
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Typed, so that ``mypy --strict`` accepts a user's subclass (PynamoDB's is untyped).
        super().__init_subclass__(**kwargs)  # type: ignore[no-untyped-call]

    def aquery(
        self,
        hash_key: Any,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        scan_index_forward: bool | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, Any] | str | None = None,
        attributes_to_get: Iterable[str] | None = None,
        page_size: int | None = None,
        rate_limit: float | None = None,
    ) -> AsyncMergedResult[_M]:
        """:meth:`ShardedModel.aquery` of this index's model, on this index.

        .. versionadded:: 0.2.0
        """
        result: AsyncMergedResult[_M] = index_owner(self).aquery(
            hash_key, range_key_condition=range_key_condition, filter_condition=filter_condition,
            consistent_read=consistent_read, index_name=self.Meta.index_name, scan_index_forward=scan_index_forward,
            limit=limit, last_evaluated_key=last_evaluated_key, attributes_to_get=attributes_to_get,
            page_size=page_size, rate_limit=rate_limit)
        return result

    async def acount(
        self,
        hash_key: Any,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        limit: int | None = None,
        rate_limit: float | None = None,
    ) -> int:
        """:meth:`ShardedModel.acount` of this index's model, on this index.

        .. versionadded:: 0.2.0
        """
        count: int = await index_owner(self).acount(
            hash_key, range_key_condition, filter_condition, consistent_read, self.Meta.index_name, limit, rate_limit)
        return count

    def ascan(
        self,
        filter_condition: Condition | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        page_size: int | None = None,
        consistent_read: bool | None = None,
        rate_limit: float | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> AsyncResultIterator[_M]:
        """:meth:`ShardedModel.ascan` of this index's model, on this index.

        .. versionadded:: 0.2.0
        """
        result: AsyncResultIterator[_M] = index_owner(self).ascan(
            filter_condition, segment, total_segments, limit, last_evaluated_key, page_size, consistent_read,
            self.Meta.index_name, rate_limit, attributes_to_get)
        return result
