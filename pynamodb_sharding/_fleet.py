"""The fleet protocol of a model's metadata tables, read and stored (see ``_protocol``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pynamodb_sharding._descriptor import is_sharded, shard_manager
from pynamodb_sharding._dynamic import DynamicShards
from pynamodb_sharding._exceptions import ShardingDefinitionError
from pynamodb_sharding._indexes import sharded_indexes_of
from pynamodb_sharding._metadata import ShardMetadata
from pynamodb_sharding._protocol import FleetProtocol, StoredProtocol, read_record

__all__ = ["dynamic_strategies", "fleet_protocol", "protocol_for_created_tables", "store_fleet_protocol"]


def dynamic_strategies(model: type[Any]) -> list[DynamicShards]:
    """The ``DynamicShards`` of ``model``'s table and of its sharded indexes, one per metadata table."""
    found: list[Any] = []
    if is_sharded(model):
        found.append(shard_manager(model).strategy)
    found += [index.manager.strategy for index in sharded_indexes_of(model).values()]
    strategies: list[DynamicShards] = []
    for strategy in found:
        table = getattr(getattr(strategy, "metadata_model", None), "Meta", None)
        if isinstance(strategy, DynamicShards) and all(
                known.metadata_model.Meta is not table for known in strategies):
            strategies.append(strategy)
    return strategies


def _strategies(model: type[Any]) -> list[DynamicShards]:
    """:func:`dynamic_strategies`, at least one.

    Raises:
        ShardingDefinitionError: ``model`` has no ``DynamicShards``.
    """
    strategies = dynamic_strategies(model)
    if not strategies:
        msg = (
            f"{model.__name__}: has no DynamicShards (on its table or a sharded index), so no metadata table and "
            f"no fleet protocol; pass a model declared with Sharding(DynamicShards(...))."
        )
        raise ShardingDefinitionError(msg)
    return strategies


def protocol_for_created_tables(
    model: type[Any], created: Iterable[type[Any]],
) -> list[tuple[type[ShardMetadata], StoredProtocol]]:
    """Store the declared fleet protocol in each metadata table of ``model`` that ``created``
    names (tables ``create_table`` has just created and waited for): no process of the table
    can follow anything else yet, so it is in force at once. Returns each metadata model and
    the protocol its table holds (none for a global table's replica outside its home region)."""
    made = list(created)
    stored = []
    for strategy in dynamic_strategies(model):
        if any(strategy.metadata_model is table for table in made):
            record = strategy.table_created()
            if record is not None:
                stored.append((strategy.metadata_model, record))
    return stored


def fleet_protocol(model: type[Any]) -> StoredProtocol | None:
    """The fleet protocol ``model``'s metadata table stores (its table's, else its first sharded
    index's), read now; ``None`` for a table that stores none (a table of 0.2, whose processes
    follow their own declarations).

    Raises:
        ShardingDefinitionError: ``model`` has no ``DynamicShards``.
        FleetProtocolError: the stored protocol cannot be read.
    """
    return read_record(_strategies(model)[0].store)


def store_fleet_protocol(
    model: type[Any],
    *,
    cached_reads: bool | None = None,
    cache_ttl: float | None = None,
    clock_skew: float | None = None,
    replication_lag: float | None = None,
    immediately: bool = False,
) -> list[StoredProtocol]:
    """Store the fleet protocol every process of ``model``'s metadata tables follows: the
    settings given, the others as stored (or, where none is stored, as ``model``'s
    ``DynamicShards`` declares them). Every process follows the change within
    ``PROTOCOL_TTL`` (300) seconds and the safer of the old and new settings until the change
    is in force everywhere (``effective_at``), so a running fleet switches in one step.

    A metadata table that stores no protocol (written by 0.2, whose processes read none) adopts
    it here: store it once no process of 0.2 runs.

    Args:
        model: a model declared with ``Sharding(DynamicShards(...))`` (its table's and its
            sharded indexes' metadata tables are each given the protocol).
        cached_reads: merged reads use a cached count (no metadata request per query).
        cache_ttl: the longest a process caches a count, in seconds.
        clock_skew: seconds two processes' clocks may differ by, plus a request's time.
        replication_lag: global tables: seconds within which a change reaches every region.
        immediately: the change is in force at once, with no period of the safer settings: only
            when no process of the table runs (a new table before its first deployment, or a
            fleet stopped), else reads may miss items.

    Returns:
        The record stored in each metadata table.

    Raises:
        ShardingDefinitionError: ``model`` has no ``DynamicShards``, or a setting is invalid.
        FleetProtocolError: a change is still under way (store the next after its
            ``effective_at``), or the stored protocol cannot be read.
    """
    for name, value in (("cache_ttl", cache_ttl), ("clock_skew", clock_skew), ("replication_lag", replication_lag)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0):
            msg = (f"store_fleet_protocol({model.__name__}): {name} must be a non-negative number of seconds, "
                   f"got {value!r}.")
            raise ShardingDefinitionError(msg)
    given: object = cached_reads  # users pass anything; check it at run time
    if given is not None and not isinstance(given, bool):
        msg = f"store_fleet_protocol({model.__name__}): cached_reads must be True or False, got {cached_reads!r}."
        raise ShardingDefinitionError(msg)
    stored = []
    for strategy in _strategies(model):
        seen = read_record(strategy.store)
        base: FleetProtocol = strategy.declared_protocol if seen is None else seen.current
        wanted = FleetProtocol(
            cached_reads=base.cached_reads if cached_reads is None else cached_reads,
            cache_ttl=base.cache_ttl if cache_ttl is None else float(cache_ttl),
            clock_skew=base.clock_skew if clock_skew is None else float(clock_skew),
            replication_lag=base.replication_lag if replication_lag is None else float(replication_lag),
        )
        stored.append(strategy.store_protocol(wanted, immediately=immediately))
    return stored
