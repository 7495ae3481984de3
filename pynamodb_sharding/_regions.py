"""Where a sharded model's item writes go in a DynamoDB global table: the three write modes.

AWS's guide to global tables names three ways to write (see the "Global tables" page):

* **write to any region** (the default): every write goes to the model's own region
  (``Meta.region``). Right for writes that cannot conflict: inserts under unique keys,
  idempotent overwrites;
* **write to one region**: ``Meta.write_region = "us-east-1"`` sends every item write of the
  model to that region, where conditions, version checks and transactions see the latest data.
  ``Meta.local_inserts = True`` keeps the unconditional ``save()`` of a new item (an insert)
  in the local region and sends the rest there;
* **write to your region**: ``Meta.item_home = lambda item: item.home_region`` sends every
  write of an item to the region it names (a per-item home).

``Meta.region_hosts = {"us-east-1": "https://..."}`` gives the endpoint of a region that is not
reached at AWS's default endpoint (a VPC endpoint; DynamoDB Local in tests). Reads stay in the
model's own region.

A routed write is sent through a connection of the same model to the target region, chosen
once per write (:func:`routed`): every request the write makes (the put, the reads that locate
the item's shard, the transaction of a move) goes there. A ``DynamicShards`` model reads the
count a routed write spreads over from the target region's replica of its metadata table.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import attrs
from pynamodb.connection import Connection, TableConnection

from pynamodb_sharding._exceptions import ShardingDefinitionError, WriteRegionError
from pynamodb_sharding._host import hash_keyname

__all__ = [
    "Route",
    "batch_route",
    "check_declaration",
    "current_route",
    "route_of",
    "routed",
    "routed_connection",
    "write_connection",
]

#: What a write does, for :func:`route_of`.
WriteAction = Literal["save", "update", "delete"]


@attrs.frozen
class Route:
    """The region a write is sent to, and its endpoint (``None``: AWS's for that region)."""

    region: str
    host: str | None = None


_route: ContextVar[Route | None] = ContextVar("pynamodb_sharding_route", default=None)
_lock = threading.Lock()


def _where(model: type[Any]) -> str:
    return f"{model.__name__}.Meta"


def check_declaration(model: type[Any]) -> None:
    """Refuse write-mode settings in ``model.Meta`` that cannot be followed, naming the fix.

    Raises:
        ShardingDefinitionError: a setting has the wrong type, or two contradict each other.
    """
    meta = getattr(model, "Meta", None)
    write_region = getattr(meta, "write_region", None)
    item_home = getattr(meta, "item_home", None)
    local_inserts = getattr(meta, "local_inserts", False)
    hosts = getattr(meta, "region_hosts", None)
    where = _where(model)
    if write_region is not None and (not isinstance(write_region, str) or not write_region):
        msg = f"{where}.write_region = {write_region!r}: name the region that takes the writes, e.g. 'us-east-1'."
        raise ShardingDefinitionError(msg)
    if item_home is not None and not callable(item_home):
        msg = (
            f"{where}.item_home = {item_home!r}: give a function of the item that returns its home "
            f"region, e.g. item_home = lambda item: item.home_region."
        )
        raise ShardingDefinitionError(msg)
    if write_region is not None and item_home is not None:
        msg = (
            f"{where}: declares both write_region (every write goes to one region) and item_home "
            f"(each item's writes go to its own region); keep the one that says where writes go."
        )
        raise ShardingDefinitionError(msg)
    if local_inserts not in (True, False):
        msg = f"{where}.local_inserts = {local_inserts!r}: expected True or False."
        raise ShardingDefinitionError(msg)
    if local_inserts and write_region is None:
        msg = (
            f"{where}.local_inserts = True without write_region: it keeps inserts out of the write "
            f"region, so declare write_region = '...' too (or remove local_inserts)."
        )
        raise ShardingDefinitionError(msg)
    if hosts is not None and (not isinstance(hosts, Mapping) or not all(
            isinstance(name, str) and isinstance(host, str) for name, host in hosts.items())):
        msg = (
            f"{where}.region_hosts = {hosts!r}: expected a mapping of region names to endpoints, "
            f"e.g. {{'us-east-1': 'https://dynamodb.us-east-1.amazonaws.com'}}."
        )
        raise ShardingDefinitionError(msg)


def route_of(item: Any, action: WriteAction, *, conditional: bool, new_item: bool) -> Route | None:
    """The region a write of ``item`` goes to, or ``None`` for the model's own region.

    Args:
        item: the model instance written.
        action: what the write does.
        conditional: the write has a condition (the caller's, or a version check).
        new_item: the item was not read from the table nor written by this instance.

    Raises:
        WriteRegionError: ``Meta.item_home`` gave something that is not a region name.
    """
    model = type(item)
    meta = model.Meta
    write_region: str | None = getattr(meta, "write_region", None)
    if write_region is not None:
        if getattr(meta, "local_inserts", False) and action == "save" and new_item and not conditional:
            return None
        return _route_to(meta, write_region)
    item_home: Callable[[Any], object] | None = getattr(meta, "item_home", None)
    if item_home is None:
        return None
    region = item_home(item)
    if not isinstance(region, str) or not region:
        key = getattr(item, hash_keyname(model) or "", None)
        msg = (
            f"{_where(model)}.item_home gave {region!r} for the item of key {key!r}; it must give the "
            f"name of the item's home region (e.g. 'eu-west-1'). Set the attribute it reads before "
            f"writing the item; nothing was written."
        )
        raise WriteRegionError(msg)
    return _route_to(meta, region)


def routes_writes(model: type[Any]) -> bool:
    """Whether ``model`` declares a write mode (``Meta.write_region`` or ``Meta.item_home``):
    without one every write goes to its own region and :func:`route_of` returns ``None``."""
    meta = model.Meta
    return getattr(meta, "write_region", None) is not None or getattr(meta, "item_home", None) is not None


def batch_route(model: type[Any]) -> Route | None:
    """Where a ``batch_write()`` of ``model`` goes: its ``Meta.write_region`` unless inserts
    stay local (``local_inserts``), else its own region (``None``)."""
    meta = model.Meta
    region = getattr(meta, "write_region", None)
    if region is None or getattr(meta, "local_inserts", False):
        return None
    return _route_to(meta, region)


def _route_to(meta: Any, region: str) -> Route | None:
    hosts: Mapping[str, str] = getattr(meta, "region_hosts", None) or {}
    if region == getattr(meta, "region", None) and hosts.get(region, meta.host) == meta.host:
        return None  # the model's own region and endpoint
    return Route(region, hosts.get(region))


def current_route() -> Route | None:
    """The region the write running in this thread (or task) is sent to, if it is routed."""
    return _route.get()


@contextmanager
def routed(route: Route | None) -> Iterator[None]:
    """Within the block, the requests of sharded models go to ``route`` (nothing when ``None``)."""
    if route is None:
        yield
        return
    token = _route.set(route)
    try:
        yield
    finally:
        _route.reset(token)


_SETTINGS = (
    "connect_timeout_seconds", "read_timeout_seconds", "max_retry_attempts", "max_pool_connections",
    "extra_headers", "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
)


def _connection_settings(model: type[Any]) -> dict[str, Any]:
    return {name: getattr(model.Meta, name, None) for name in _SETTINGS}


def routed_connection(model: type[Any], local: TableConnection, route: Route) -> TableConnection:
    """The connection of ``model``'s table in ``route``'s region: ``local``'s settings but the
    region and endpoint; made once per model, route and settings, then reused."""
    settings = _connection_settings(model)
    key = (route, model.Meta.table_name, repr(sorted(settings.items())))
    cache: dict[Any, TableConnection] | None = model.__dict__.get("_routed_connections")
    found = cache.get(key) if cache is not None else None
    if found is not None:
        return found
    with _lock:
        cache = model.__dict__.get("_routed_connections")
        if cache is None:
            cache = {}
            model._routed_connections = cache
        found = cache.get(key)
        if found is None:
            found = TableConnection(
                model.Meta.table_name, region=route.region, host=route.host, meta_table=local.get_meta_table(),
                **settings,
            )
            cache[key] = found
    return found


def write_connection(model: type[Any], region: str | None = None) -> Connection:
    """A PynamoDB ``Connection`` to the region ``model``'s writes go to, for the transactions an
    application runs itself: ``TransactWrite(connection=write_connection(Ledger))``.

    Args:
        model: a model declaring ``Meta.write_region`` (or ``Meta.item_home``, then name the
            item's home ``region``).
        region: the region, for a model whose items each have their own home.

    Raises:
        WriteRegionError: no region is known: the model declares neither ``write_region`` nor
            a ``region`` was given.
    """
    meta = model.Meta
    target = region if region is not None else getattr(meta, "write_region", None)
    if not isinstance(target, str) or not target:
        msg = (
            f"{_where(model)}: write_connection() needs the region writes go to: declare "
            f"Meta.write_region, or pass region='...' (the home region of the items written)."
        )
        raise WriteRegionError(msg)
    hosts: Mapping[str, str] = getattr(meta, "region_hosts", None) or {}
    host = hosts.get(target, meta.host if target == getattr(meta, "region", None) else None)
    return Connection(region=target, host=host, **_connection_settings(model))
