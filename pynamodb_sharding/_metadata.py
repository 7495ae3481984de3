"""The shard-count metadata table and the cached store that reads and changes it.

One metadata item per logical partition key holds the key's current shard count
(``number_of_shards``), when it last changed (``last_updated``) and every change so far
(``shard_history``, a string set of ``"<epoch>:<count>"``). :class:`ShardCountStore` keeps
those items in a per-process TTL cache so that a warm key costs about one metadata read per
TTL, however many threads write it.

Lock values. ``last_updated`` doubles as the optimistic lock of a change (the conditional
``UpdateItem`` requires ``last_updated = <value read>``), so two changes must never share a
value even when they happen within one second or under a frozen test clock. It is stored as
epoch seconds with a millisecond fraction (``1562858912.25``), and every change writes
``max(now, previous + 0.001)``: strictly increasing per key, hence distinct, and still plain
epoch seconds for anyone reading the table. Items whose ``last_updated`` is whole seconds
(``1562858912``), as other writers of this schema store it, read fine.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, ClassVar, Protocol, TypeVar

import attrs
from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError
from cachetools import LRUCache, TTLCache
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.connection.table import TableConnection
from pynamodb.exceptions import PutError, PynamoDBException, TransactWriteError, UpdateError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.settings import get_settings_value
from pynamodb.transactions import TransactWrite

from pynamodb_sharding import _attempts as attempts
from pynamodb_sharding._exceptions import (
    HomeHandoverError,
    MetadataError,
    MetadataRequestError,
    ShardingDefinitionError,
)
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._host import (
    CONNECTION_SETTINGS,
    PLACEMENT_SETTINGS,
    botocore_client,
    connection_fingerprint,
    reset_connection,
    share_botocore_data,
    table_connection,
    unshared_connection,
)
from pynamodb_sharding._locals import ContextLocal
from pynamodb_sharding._owned import Owned
from pynamodb_sharding._pool import pause, single_flight
from pynamodb_sharding._strategies import HistoryEntry
from pynamodb_sharding._throttling import error_chain
from pynamodb_sharding._write_rate import (
    RATE_SPREAD_PREFIX,
    RATE_UNITS_PREFIX,
    RateWindow,
    rate_attribute_names,
    stored_window,
    window_attribute,
    window_start,
)

__all__ = [
    "HOME_RECORD_KEY",
    "LOCK_RESOLUTION",
    "SEEN_ABSENT",
    "ShardCountStore",
    "ShardCountsKeptWarning",
    "ShardMetadata",
    "ShardState",
    "delete_namespaces",
    "format_history_entry",
    "home_model",
    "home_unavailable",
    "home_unreachable",
    "next_lock_value",
    "parse_history_entry",
    "region_model",
    "seen_version",
]

#: The smallest step between two ``last_updated`` values of one key, in seconds.
LOCK_RESOLUTION = 0.001

_CONDITION_FAILED = "ConditionalCheckFailedException"

#: ``(partition_key, model)`` of a metadata table's home record (global tables): the region where
#: the items of new keys are created, and a move of it under way. ``"#home"`` is no table name,
#: so no sharded model's namespace holds it.
HOME_RECORD_KEY = ("#home", "#home")


class ShardMetadata(Model):
    """The companion metadata model of :class:`~pynamodb_sharding.DynamicShards`.

    Subclass it to name the table (and host, region, credentials like any PynamoDB model);
    its billing mode defaults to on-demand (``PAY_PER_REQUEST``)::

        class AuditLogShards(ShardMetadata):
            class Meta:
                table_name = "audit_log_shards"

    The hash key is the logical partition key, the same value as the main table's; the range
    key ``model`` is a namespace (the sharded model's table name by default) so that one
    metadata table serves several sharded models without their keys colliding.

    Its connection follows the sharded model's, whether it serves the model's ``Sharding`` or a
    sharded index's: every connection setting its ``Meta`` does not set (``host``, ``region``,
    credentials, timeouts, retries, pool size, extra headers) is taken from the sharded model's
    ``Meta`` when that model is defined, so the shard counts live beside the data. Where the
    data lives (``host``, ``region``, credentials) must be the sharded model's: setting one of
    those to something else is refused when the model is defined. Timeouts, retries, pool size
    and extra headers it sets are its own. ``Meta.own_connection = True`` says a difference of
    place is meant (the metadata table really lives elsewhere) and turns the following off.

    Global tables (multi-region, eventually consistent): ``Meta.home_region = "us-east-1"``
    sends every change of a count, and the reads that decide one, to that region
    (``Meta.home_host`` for its endpoint when it is not AWS's; ``Meta.home_retry_seconds``,
    default 30, for how long an unreachable home region is retried); reads of the count stay
    local. ``Meta.multi_region_strong = True`` says the table is in multi-region strong
    consistency, where conditional writes are safe in every region. See the "Global tables"
    page of the documentation.

    .. versionadded:: 0.1.0
    """

    partition_key = UnicodeAttribute(hash_key=True)
    model = UnicodeAttribute(range_key=True)
    number_of_shards = NumberAttribute(null=True)
    last_updated = NumberAttribute(null=True)
    shard_history = UnicodeSetAttribute(null=True)
    #: Proactive growth (``DynamicShards(target_utilization=...)``) as 0.2 kept it: the start of
    #: the current rate window (epoch seconds), the write units every writer process reported
    #: in it, and in the window before. Read, never written: reports now go to one attribute
    #: per window, ``rate_units@<window start>`` (see ``_write_rate``).
    rate_window = NumberAttribute(null=True)
    rate_units = NumberAttribute(null=True)
    rate_previous_units = NumberAttribute(null=True)
    #: Global tables (``Meta.home_region``): the region whose replica takes this item's changes
    #: (absent: ``Meta.home_region``) and how many times it moved; in the table's home record
    #: (:data:`HOME_RECORD_KEY`), the region where new keys' items are created, and during a
    #: move of it (:func:`pynamodb_sharding.move_home`) where it moves to.
    home = UnicodeAttribute(null=True)
    home_epoch = NumberAttribute(null=True)
    moving_to = UnicodeAttribute(null=True)
    #: Hot-key hints (``DynamicShards(hot_key_hints=N)``): in the items of a namespace's hint
    #: list, ``"<expires>:<key>"`` for each key grown lately (see ``_hot_keys``).
    hot_keys = UnicodeSetAttribute(null=True)
    #: In the table's protocol record (``_protocol.PROTOCOL_KEY``): the settings every process
    #: follows (cached reads, cache TTL, clock skew, replication lag), as JSON, and during a
    #: change the ones before it and when the change is in force everywhere.
    fleet_protocol = UnicodeAttribute(null=True)

    #: The billing mode a subclass's ``Meta`` gets when it does not set one.
    default_billing_mode: ClassVar[str] = "PAY_PER_REQUEST"

    #: The connection settings the subclass's own ``Meta`` declares (before PynamoDB fills in
    #: its defaults): the others follow the sharded model's.
    declared_connection: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _get_connection(cls) -> TableConnection:
        connection: TableConnection = super()._get_connection()
        if vars(cls).get("_derived_at_run_time"):  # a home region's model: botocore's data parsed once
            share_botocore_data(connection)
        return connection

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        meta = cls.__dict__.get("Meta")
        if meta is not None:
            # Runs before PynamoDB's metaclass sets the defaults: what is there was written.
            cls.declared_connection = frozenset(name for name in CONNECTION_SETTINGS if hasattr(meta, name))
        # PynamoDB's create_table reads Meta.billing_mode; setting it here makes on-demand the
        # default without users repeating it in every metadata model.
        if meta is not None and not hasattr(meta, "billing_mode"):
            meta.billing_mode = cls.default_billing_mode
        if meta is not None:
            _check_regions(cls, meta)


class ShardCountsKeptWarning(UserWarning):
    """``delete_table()`` of a model whose shard counts live in a metadata table
    (``DynamicShards``) deleted the model's table and kept those counts: a table created again
    under the same name starts from them. ``delete_table(shard_metadata=True)`` deletes them
    with the table; ``shard_metadata=False`` keeps them without this warning.

    .. versionadded:: 0.2.0
    """


def delete_namespaces(metadata_model: type[ShardMetadata], namespaces: Iterable[str], *,
                      sleep: Callable[[float], None] = time.sleep) -> int:
    """Delete every item of the metadata table whose ``model`` (namespace) is one of
    ``namespaces``: one consistent scan of the table's keys, then ``BatchWriteItem`` deletes
    (unprocessed ones sent again). Returns how many items were deleted."""
    names = sorted(set(namespaces))
    if not names:
        return 0
    client = botocore_client(metadata_model)
    table = str(metadata_model.Meta.table_name)
    values = {f":n{number}": {"S": name} for number, name in enumerate(names)}
    attributes = metadata_model.get_attributes()
    request: dict[str, Any] = {
        "TableName": table, "ConsistentRead": True, "ProjectionExpression": "#p, #m",
        "FilterExpression": f"#m IN ({', '.join(values)})", "ExpressionAttributeValues": values,
        "ExpressionAttributeNames": {"#p": attributes["partition_key"].attr_name, "#m": attributes["model"].attr_name},
    }
    keys: list[dict[str, Any]] = []
    for page in client.get_paginator("scan").paginate(**request):
        keys.extend(page.get("Items", []))
    for start in range(0, len(keys), 25):
        pending: dict[str, Any] = {table: [{"DeleteRequest": {"Key": key}} for key in keys[start:start + 25]]}
        for attempt in range(1, 1000):
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            sleep(min(1.0, 0.05 * attempt))
    return len(keys)


def _check_regions(cls: type[ShardMetadata], meta: Any) -> None:
    """Refuse a global-table declaration that cannot be followed."""
    home = getattr(meta, "home_region", None)
    home_host = getattr(meta, "home_host", None)
    strong = getattr(meta, "multi_region_strong", False)
    where = f"{cls.__name__}.Meta"
    if home is not None and (not isinstance(home, str) or not home):
        msg = f"{where}.home_region = {home!r}: name the region that holds the writes, e.g. 'us-east-1'."
        raise ShardingDefinitionError(msg)
    if home_host is not None and home is None:
        msg = (
            f"{where}.home_host = {home_host!r} without home_region: declare the home region too "
            f"(home_region = 'us-east-1'); home_host only says where to reach it."
        )
        raise ShardingDefinitionError(msg)
    if strong not in (True, False):
        msg = f"{where}.multi_region_strong = {strong!r}: expected True or False."
        raise ShardingDefinitionError(msg)
    if strong and home is not None:
        msg = (
            f"{where}: declares both home_region and multi_region_strong; a table in multi-region "
            f"strong consistency takes conditional writes in every region, so remove home_region "
            f"(or remove multi_region_strong if the table is eventually consistent)."
        )
        raise ShardingDefinitionError(msg)
    hosts = getattr(meta, "region_hosts", None)
    if hosts is not None and (not isinstance(hosts, Mapping) or not all(
            isinstance(name, str) and isinstance(host, str) for name, host in hosts.items())):
        msg = (
            f"{where}.region_hosts = {hosts!r}: expected a mapping of region names to endpoints, "
            f"e.g. {{'eu-west-1': 'https://dynamodb.eu-west-1.amazonaws.com'}}."
        )
        raise ShardingDefinitionError(msg)
    retry = getattr(meta, "home_retry_seconds", None)
    if retry is not None and (isinstance(retry, bool) or not isinstance(retry, (int, float)) or retry < 0):
        msg = f"{where}.home_retry_seconds = {retry!r}: expected seconds >= 0."
        raise ShardingDefinitionError(msg)


_R = TypeVar("_R")


def home_unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is a connection that could not be made (nothing sent):
    what a home region that cannot be reached answers.

    .. versionadded:: 0.1.0
    """
    return any(isinstance(current, (EndpointConnectionError, ConnectTimeoutError)) for current in error_chain(error))


def home_unavailable(error: BaseException) -> bool:
    """Whether ``error`` says that the home region could not take a change now: it cannot be
    reached (:func:`home_unreachable`), or it is being moved (:class:`HomeHandoverError`).

    .. versionadded:: 0.1.0
    """
    return home_unreachable(error) or any(isinstance(current, HomeHandoverError) for current in error_chain(error))


#: Each metadata model's copies placed in other regions or hosts, by placement (kept in the
#: metadata model: a class made at run time is freed with its copies).
_home_models: Owned[dict[tuple[Any, ...], type[ShardMetadata]]] = Owned("placed_copies")
_home_lock = threading.Lock()

#: How long a change of the count waits for an unreachable home region before it fails.
HOME_RETRY_SECONDS = 30.0


def home_model(metadata_model: type[ShardMetadata], *, retries: bool = True) -> type[ShardMetadata]:
    """The model the count's changes are sent through: ``metadata_model`` itself, or, when its
    ``Meta.home_region`` is set, a subclass connected to the home region (``Meta.home_host``
    when given, else that region's AWS endpoint), with the same table and credentials
    (``metadata_model`` itself when it is connected there already).

    ``retries=False``: the subclass botocore sends each request of once (no retry of a
    connection that could not be made, no backoff): what best-effort requests (rate reports,
    growth on a throttle) go through, so that a write never waits on the home region.

    .. versionadded:: 0.1.0
    """
    meta = metadata_model.Meta
    home = getattr(meta, "home_region", None)
    if home is None:
        return metadata_model
    return _placed(metadata_model, home, getattr(meta, "home_host", None), retries=retries)


def region_model(metadata_model: type[ShardMetadata], region: str, host: str | None) -> type[ShardMetadata]:
    """``metadata_model`` connected to its table's replica in ``region`` (at ``host``; ``None``:
    AWS's endpoint): itself when it is connected there, else a subclass, made once.

    .. versionadded:: 0.1.0
    """
    return _placed(metadata_model, region, host, retries=True)


def _placed(
    metadata_model: type[ShardMetadata], region: str, host: str | None, *, retries: bool,
) -> type[ShardMetadata]:
    meta = metadata_model.Meta
    if retries and (getattr(meta, "region", None), getattr(meta, "host", None)) == (region, host):
        return metadata_model
    key = (region, host, retries, connection_fingerprint(meta))
    with _home_lock:
        placed = _home_models.setdefault(metadata_model, {})
        found = placed.get(key)
        if found is None:
            parent: Any = meta
            settings: dict[str, Any] = {"region": region, "host": host, "__module__": metadata_model.__module__}
            if not retries:
                settings["max_retry_attempts"] = 0
            placed_meta = type("Meta", (parent,), settings)
            metaclass: Any = type(metadata_model)
            found = metaclass(metadata_model.__name__, (metadata_model,), {
                "Meta": placed_meta, "__module__": metadata_model.__module__,
                "__qualname__": metadata_model.__qualname__, "DoesNotExist": metadata_model.DoesNotExist,
                # Its own connection: PynamoDB reuses a parent's cached one for the same table name.
                "_connection": unshared_connection(metadata_model),
                "_derived_at_run_time": True,
            })
            placed[key] = found
    return found


#: Each metadata model class that follows its sharded models' connection: the first one's name,
#: the settings it gave, and the sharded model classes alive that follow it (weakly). Kept in the
#: class: a class made at run time is freed with them.
_followed: Owned[tuple[str, dict[str, Any], weakref.WeakSet[type[Any]]]] = Owned("followed_connection")


def follow_connection(metadata_model: type[ShardMetadata], owner: type[Model]) -> None:
    """Give ``metadata_model`` the connection settings of the sharded model ``owner``.

    Where the data lives (:data:`PLACEMENT_SETTINGS`: endpoint, region, credentials) must be
    the owner's: a placement setting the metadata model declares must equal the owner's, and a
    metadata model shared by several sharded models must find the same placement in each. How
    requests are sent (:data:`TRANSPORT_SETTINGS`: timeouts, retries, pool size, extra headers)
    is the metadata model's own where it declares it; the rest is copied from the first owner's
    ``Meta``. ``Meta.own_connection = True`` on the metadata model turns all of this off.

    Raises:
        ShardingDefinitionError: a declared placement setting differs from the owner's, or two
            sharded models sharing the metadata model have different placements.
    """
    meta = metadata_model.Meta
    if getattr(meta, "own_connection", False) is True:
        return
    wanted = {name: getattr(owner.Meta, name) for name in CONNECTION_SETTINGS if hasattr(owner.Meta, name)}
    # What the owner has beyond PynamoDB's defaults (which the metadata model has too): only
    # that is copied, so a value set on the metadata model at run time (a test binding) stays.
    explicit = {name: value for name, value in wanted.items() if value != get_settings_value(name)}
    declared: frozenset[str] = getattr(metadata_model, "declared_connection", frozenset())
    for name in PLACEMENT_SETTINGS:
        theirs = getattr(meta, name, None)
        if name in declared and theirs != wanted.get(name):
            msg = (
                f"{owner.__name__}: its metadata model {metadata_model.__name__} sets Meta.{name} = "
                f"{theirs!r} but {owner.__name__} has {wanted.get(name)!r}, so the shard counts would be read "
                f"from somewhere else than the data; remove Meta.{name} from {metadata_model.__name__} "
                f"(it follows {owner.__name__}), or set Meta.own_connection = True on it if that is meant."
            )
            raise ShardingDefinitionError(msg)
    earlier = _followed.get(metadata_model)
    owners: weakref.WeakSet[type[Any]] = earlier[2] if earlier is not None else weakref.WeakSet()
    # The placement must be the first owner's for a class of another name, and for one of the
    # same name while another class alive follows it that is not its base (a factory makes
    # many classes of one name). The same class again (its index's Sharding) or a class derived
    # from it at run time (a period model) follows it as it is now (a test binding moves both).
    if earlier is not None and (earlier[0] != owner.__qualname__ or any(
            other is not owner and not issubclass(owner, other) for other in owners)):
        first, settings, _ = earlier
        differing = [name for name in PLACEMENT_SETTINGS if settings.get(name) != explicit.get(name)]
        if differing:
            msg = (
                f"{owner.__name__}: its metadata model {metadata_model.__name__} already follows the "
                f"connection of {first}, whose Meta.{differing[0]} ({settings.get(differing[0])!r}) differs "
                f"from {owner.__name__}'s ({explicit.get(differing[0])!r}); give each a metadata model of its "
                f"own, or set the connection on {metadata_model.__name__} with Meta.own_connection = True."
            )
            raise ShardingDefinitionError(msg)
        # The same placement: how requests are sent stays what the first owner gave.
        explicit = {name: value for name, value in explicit.items() if name in PLACEMENT_SETTINGS}
    else:
        _followed[metadata_model] = (owner.__qualname__, explicit, owners)
    owners.add(owner)  # once accepted: a refused class follows nothing
    for name, value in explicit.items():
        if name not in declared:
            setattr(meta, name, value)
    reset_connection(metadata_model)


def format_history_entry(entry: HistoryEntry) -> str:
    """``HistoryEntry(at=1562858912.25, count=2)`` -> ``"1562858912.25:2"``."""
    return f"{_format_epoch(entry.at)}:{entry.count}"


def parse_history_entry(text: str) -> HistoryEntry:
    """``"1562858912:2"`` -> ``HistoryEntry(at=1562858912.0, count=2)``.

    Raises:
        ValueError: ``text`` is not ``"<epoch seconds>:<count>"`` with a finite, non-negative
            epoch and a positive integer count.
    """
    epoch_text, sep, count_text = text.rpartition(":")
    if not sep:
        msg = f"{text!r} has no ':' between the epoch and the count"
        raise ValueError(msg)
    at = float(epoch_text)
    count = int(count_text)
    if not math.isfinite(at) or at < 0 or count < 1:
        msg = f"{text!r} needs a non-negative epoch and a count of at least 1"
        raise ValueError(msg)
    return HistoryEntry(at=at, count=count)


def next_lock_value(now: float, previous: float | None) -> float:
    """The ``last_updated`` of a change at ``now``: ``now`` to the millisecond, but always at
    least :data:`LOCK_RESOLUTION` past ``previous`` so that two changes never share a lock value.
    """
    value = round(now, 3)
    if previous is not None:
        value = max(value, round(previous + LOCK_RESOLUTION, 3))
    return value


def _format_epoch(at: float) -> str:
    rounded = round(at, 3)
    if rounded.is_integer():
        return str(int(rounded))
    return repr(rounded)


@attrs.frozen
class ShardState:
    """A validated metadata item: what writers and readers of one logical key need."""

    #: The shard count new writes spread over.
    count: int
    #: Epoch seconds of the last change of the count (the optimistic-lock value).
    last_updated: float
    #: Every recorded change, oldest first.
    history: tuple[HistoryEntry, ...] = ()
    #: ``False`` for a key with no metadata item (it has its initial count): a growth then
    #: inserts the item instead of changing it.
    stored: bool = True
    #: For a state read or written in the home region (``Meta.home_region``) that this region's
    #: replica did not show yet: the count the replica showed. Readers here read the replica's
    #: count, so writes here use no shard above it until the replica shows this state (see
    #: :attr:`write_count`). ``None``: the replica shows this state.
    replica_count: int | None = None
    #: Global tables: the region whose replica takes this key's changes (its item's ``home``;
    #: ``None``: ``Meta.home_region``), and how many times it moved.
    home: str | None = None
    home_epoch: int = 0
    #: A home-region read found the item moving to another home region whose replica does
    #: not show the move yet: no region takes its changes until it does.
    moving: bool = False

    @property
    def write_count(self) -> int:
        """The shards a new item written in this region may go to: ``1..write_count``. The count,
        or less while this region's replica still shows a lower count (a growth made at home a
        moment ago): a reader here, which reads the replica's count, covers every shard used here.

        .. versionadded:: 0.1.0
        """
        return self.count if self.replica_count is None else min(self.count, self.replica_count)

    @property
    def moving_floor(self) -> int:
        """The lowest count a job may be moving this key's items down to: the count, or the
        count of a shrink still in the history (``compact`` trims it once done) when lower."""
        lowest = self.count
        for before, after in itertools.pairwise(self.history):  # oldest first
            if after.count < before.count:
                lowest = min(lowest, after.count)
        return lowest

    def count_at(self, at: float) -> int:
        """The count writers were using at epoch second ``at`` when a growth takes effect only
        from ``at`` on and a shrink at once: the count of the latest change made at or before
        ``at`` (the oldest recorded count before any), never above the current count.

        ``DynamicShards(fresh_reads=False)`` writes over ``count_at(now - (cache_ttl +
        clock_skew))``: a growth is used by no writer before every reader's cached count shows it.

        .. versionadded:: 0.2.0
        """
        history = self.history
        if all(entry.count != self.count for entry in history):
            # A count whose change is not recorded (set by hand): in effect since last_updated.
            history = (*history, HistoryEntry(at=self.last_updated, count=self.count))
        started = [entry for entry in history if entry.at <= at]
        if started:
            latest = max(started, key=lambda entry: entry.at)
            return min(self.count, latest.count)
        return min(self.count, min(entry.count for entry in history))

    def same_version(self, other: ShardState) -> bool:
        """Whether both are the same stored version of the item."""
        mine = (self.last_updated, self.history, self.home_epoch)
        return mine == (other.last_updated, other.history, other.home_epoch)

    @property
    def read_count(self) -> int:
        """The largest count ever used: reads cover ``1..read_count`` so a lowered count hides nothing."""
        return max((self.count, *(entry.count for entry in self.history)))

    def newer_than(self, other: ShardState) -> bool:
        """Whether this state was written after ``other`` (lock values strictly increase)."""
        mine = (self.last_updated, len(self.history), self.home_epoch)
        return mine > (other.last_updated, len(other.history), other.home_epoch)


def _where(owner: str, key: str) -> str:
    return f"{owner}: the shard metadata of key {key!r}"


def state_from_item(item: ShardMetadata, *, owner: str, max_shards: int) -> ShardState:
    """Validate a metadata item read from the table.

    Args:
        item: the item.
        owner: ``"Model.attribute"`` of the sharded model, for error messages.
        max_shards: the largest count the strategy accepts.

    Raises:
        MetadataError: a field is missing or out of range; the message names the key and the fix.
    """
    where = _where(owner, item.partition_key)
    table = type(item).Meta.table_name
    fix = (
        f"fix or delete the item (partition_key={item.partition_key!r}, model={item.model!r}) "
        f"in the metadata table {table!r}; a deleted item is recreated with the initial count"
    )
    count: object = item.number_of_shards  # typed float by PynamoDB, but null=True and any number
    if count is None:
        msg = f"{where} has no number_of_shards; {fix}."
        raise MetadataError(msg)
    if isinstance(count, float) and count.is_integer():
        count = int(count)
    if not isinstance(count, int) or not 1 <= count <= max_shards:
        msg = f"{where} has number_of_shards={count!r}, outside 1..{max_shards} (max_shards); {fix}."
        raise MetadataError(msg)
    last_updated: float | None = item.last_updated
    if last_updated is None or not math.isfinite(last_updated):
        msg = f"{where} has no valid last_updated (the lock value of growth); {fix}."
        raise MetadataError(msg)
    history = []
    for text in sorted(item.shard_history or ()):
        try:
            entry = parse_history_entry(text)
        except ValueError as exc:
            msg = f"{where} has an unparsable shard_history entry ({exc}); expected '<epoch>:<count>'; {fix}."
            raise MetadataError(msg) from exc
        if entry.count > max_shards:
            msg = f"{where} records {entry.count} shards in shard_history, over max_shards={max_shards}; {fix}."
            raise MetadataError(msg)
        history.append(entry)
    history.sort()
    return ShardState(
        count=count, last_updated=float(last_updated), history=tuple(history), home=item.home,
        home_epoch=int(item.home_epoch or 0),
    )


_CacheKey = tuple[str, str]
#: :meth:`ShardCountStore.last_seen` of a key read without a metadata item.
SEEN_ABSENT: tuple[Any, ...] = ("absent",)


def seen_version(state: ShardState) -> tuple[Any, ...]:
    """What tells two states of a key apart for :meth:`ShardCountStore.last_seen`: a change of
    the count has a new lock value, a trim of the history a smaller read count."""
    return (state.last_updated, state.home_epoch, state.count, state.read_count)

class ForkSafe(Protocol):
    """What a fork does to a cache of this process: its lock held across the fork (so that no
    cache is copied half-changed), then released; in the child, its flights (reads another
    thread was making, which the child never sees end) dropped."""

    def _before_fork(self) -> None: ...

    def _after_fork_in_parent(self) -> None: ...

    def _after_fork_in_child(self) -> None: ...


#: Every store (and hot-key hint list) of this process, so that a fork leaves each one usable
#: in the child.
_stores: weakref.WeakSet[ForkSafe] = weakref.WeakSet()


def keep_across_forks(cache: ForkSafe) -> None:
    """Make ``cache`` usable in a forked child, as the stores are (:class:`ForkSafe`)."""
    _stores.add(cache)


class _Fork(threading.local):
    """The stores the forking thread locked in ``before``, released again after the fork."""

    def __init__(self) -> None:
        self.held: list[ForkSafe] = []

    def before(self) -> None:
        # Held across the fork so that no cache is copied half-changed; a store's lock guards
        # only cache access, never a request, so this waits a moment at most.
        self.held = list(_stores)
        for store in self.held:
            store._before_fork()

    def after(self, *, in_child: bool) -> None:
        held, self.held = self.held, []
        for store in held:
            if in_child:
                store._after_fork_in_child()
            else:
                store._after_fork_in_parent()


_fork = _Fork()


class ShardCountStore:
    """Reads, caches and changes the metadata items of one metadata model.

    Reads go through a ``cachetools.TTLCache``: many threads missing the same key wait for one
    metadata read (a per-key future, settled with ``setdefault``), and the lock guards only the
    cache, never a DynamoDB call. A change made by this process replaces the cached state at
    once; changes made by other processes are seen when the entry expires (``ttl``) or when a
    conditional write fails and the key is re-read.

    Args:
        metadata_model: the :class:`ShardMetadata` subclass naming the table.
        max_shards: the largest valid count (larger stored counts are corrupt).
        ttl: seconds a state stays cached.
        timer: the cache's clock (``time.monotonic``); inject a fake one in tests.
        maxsize: how many keys the cache holds.
        consistent_read: read metadata with strongly consistent reads (default), so that a
            writer that lost a race sees the winner's item.
        initial: the count of a key without an item: what this region's replica is taken to
            show of a key nothing was read of (see :attr:`ShardState.replica_count`).
        sleep: how a change waits before it tries an unreachable home region again.
        best_effort_pause: seconds during which, after a best-effort request (see
            :meth:`best_effort`) found the home region unreachable, the next ones are given up
            without being sent; doubled at each failure in a row, up to 64 times.
    """

    def __init__(
        self,
        metadata_model: type[ShardMetadata],
        *,
        max_shards: int,
        ttl: float,
        timer: Callable[[], float] = time.monotonic,
        maxsize: int = 100_000,
        consistent_read: bool = True,
        initial: int = 1,
        sleep: Callable[[float], None] = pause,
        best_effort_pause: float = 5.0,
    ) -> None:
        candidate: object = metadata_model  # users pass anything; check it at run time
        if not (isinstance(candidate, type) and issubclass(candidate, ShardMetadata)):
            msg = (
                f"the metadata model must be a ShardMetadata subclass, got {metadata_model!r}; declare "
                f"`class MyShards(ShardMetadata): class Meta: table_name = '...'` and pass MyShards."
            )
            raise ShardingDefinitionError(msg)
        self.metadata_model = metadata_model
        self.max_shards = max_shards
        self.ttl = ttl
        self.consistent_read = consistent_read
        self.initial = initial
        self.best_effort_pause = best_effort_pause
        self._timer = timer
        self._sleep = sleep
        self._best_effort = ContextLocal("metadata.best_effort")
        # Until when (timer seconds) best-effort requests skip the home region, why, and how
        # many best-effort requests in a row found it unreachable.
        self._home_down: tuple[float, Exception, int] | None = None
        self._cache: TTLCache[_CacheKey, ShardState] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._loading: dict[_CacheKey, Future[ShardState | None]] = {}
        self._creating: dict[_CacheKey, Future[ShardState | None]] = {}
        # The rate-window attributes each key's item held at this process's last report: the
        # next report removes the ones that are out of date.
        self._rate_names: TTLCache[_CacheKey, tuple[tuple[str, float], ...]] = TTLCache(
            maxsize=maxsize, ttl=3600, timer=timer)
        # Keys read without an item, and keys this process wrote without reading (cold keys).
        self._absent: TTLCache[_CacheKey, bool] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._seen: TTLCache[_CacheKey, bool] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        # The table's home record as last read: (home of new keys, where it is moving to).
        self._record: TTLCache[None, tuple[str | None, str | None]] = TTLCache(maxsize=1, ttl=ttl, timer=timer)
        # The state each key was trimmed to here: a read sent before the trim and answered
        # after it shows the same ``last_updated`` with the old history, and must not bring
        # that history back into the cache (see ``_remember_locked``).
        self._trimmed: LRUCache[_CacheKey, ShardState] = LRUCache(maxsize=maxsize)
        # The newest state this process read or wrote of each key (None: read without an item),
        # kept after it expires from the cache: see last_seen.
        self._last_seen: LRUCache[_CacheKey, ShardState | None] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()
        _stores.add(self)

    # -- fork safety -----------------------------------------------------------------------

    def _before_fork(self) -> None:
        self._lock.acquire()

    def _after_fork_in_parent(self) -> None:
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        # The threads running these flights were not copied into the child: a future left
        # here would never be settled, and the child's first read of the key would wait forever.
        self._loading.clear()
        self._creating.clear()
        self._lock.release()

    # -- reads ---------------------------------------------------------------------------

    @property
    def timer(self) -> Callable[[], float]:
        """The cache's monotonic clock."""
        return self._timer

    def cached(self, namespace: str, key: str) -> ShardState | None:
        """The cached state, or ``None``; never reads the table."""
        with self._lock:
            return self._cache.get((namespace, key))

    def get(self, namespace: str, key: str, *, owner: str) -> ShardState | None:
        """The state of ``key`` (``None`` if it has no item), from the cache when fresh.

        Raises:
            MetadataError: the stored item is corrupt.
        """
        cache_key = (namespace, key)
        with self._lock:
            state = self._cache.get(cache_key)
        if state is not None:
            return state
        return self._single_flight(self._loading, cache_key, lambda: self._read(namespace, key, owner=owner)[0],
                                   kept=lambda: self._cache.get(cache_key))

    def get_or_create(
        self, namespace: str, key: str, count: int, clock: Callable[[], float], *, owner: str
    ) -> ShardState:
        """The state of ``key``, inserting its item with ``count`` shards if it has none.

        Like reads, the insert is made once per process however many threads need it.
        """
        state = self.get(namespace, key, owner=owner)
        if state is not None:
            return state

        def create() -> ShardState:
            # A thread that starts a new flight just after another one inserted finds it cached.
            return self.cached(namespace, key) or self.create(namespace, key, count, clock(), owner=owner)

        created = self._single_flight(self._creating, (namespace, key), create)
        assert created is not None  # create() always returns a state
        return created

    def _single_flight(
        self,
        flights: dict[_CacheKey, Future[ShardState | None]],
        cache_key: _CacheKey,
        call: Callable[[], ShardState | None],
        *,
        kept: Callable[[], ShardState | None] = lambda: None,
    ) -> ShardState | None:
        """Run ``call`` once for all the threads asking at the same time; cache its state."""

        def keep(state: ShardState | None) -> ShardState | None:
            return None if state is None else self._remember_locked(cache_key, state)

        return single_flight(self._lock, flights, cache_key, call, keep, kept)

    def load(self, namespace: str, key: str, *, owner: str, home: bool = False) -> ShardState | None:
        """Read ``key`` from the table now (bypassing the cache) and cache what was read.

        ``home``: read it in its home region (``Meta.home_region``, or where it moved), where its
        changes are made: what a writer that lost a conditional change must see.
        """
        state, region = self._read(namespace, key, owner=owner, home=home)
        if state is None:
            self.forget(namespace, key)
            with self._lock:
                self._see_absent((namespace, key))
            return None
        return self.remember(namespace, key, state, at_home=self._remote(region))

    def item(self, namespace: str, key: str, *, home: bool = False) -> ShardMetadata | None:
        """The raw metadata item (``None`` if absent), read consistently and not validated;
        ``home``: as its home region holds it."""
        if home and self.declared_home is not None:
            return self._read_at_home(namespace, key)[0]
        model = self.writer if home else self.metadata_model
        return self._get(model, namespace, key)

    def _get(self, model: type[ShardMetadata], namespace: str, key: str) -> ShardMetadata | None:
        try:
            return self._send(model, lambda: model.get(key, namespace, consistent_read=self.consistent_read))
        except self.metadata_model.DoesNotExist:
            return None

    def _read_at_home(self, namespace: str, key: str) -> tuple[ShardMetadata | None, str, bool]:
        """``key``'s item as the region that takes its changes holds it, that region, and
        whether the item is moving (see :attr:`ShardState.moving`).

        Read where this process last saw its home (for a key it knows nothing of, where new
        keys are created); a copy that names another home is followed there once: the copy
        there is the one that counts when it names that region too (the move arrived), or
        when it moved on; otherwise the move has not arrived and the copy read first (the last
        one its old home wrote) is the newest.
        """
        declared = self.declared_home
        assert declared is not None  # only called with a home region
        cached = self.cached(namespace, key)
        start = self.home_of(cached) if cached is not None else self._new_key_home()[0]
        assert start is not None
        copy = self._get(self.model_at(start), namespace, key)
        if copy is None:
            return None, start, False
        home = copy.home or declared
        if home == start:
            return copy, start, False
        there = self._get(self.model_at(home), namespace, key)
        if there is not None:
            epochs = (int(there.home_epoch or 0), int(copy.home_epoch or 0))
            if (there.home or declared) == home and epochs[0] >= epochs[1]:
                return there, home, False
            if epochs[0] > epochs[1]:
                return there, home, True
        return copy, start, True

    @property
    def writer(self) -> type[ShardMetadata]:
        """The model changes of the count are sent through when the item names no home of its
        own: ``Meta.home_region``'s (see :func:`home_model`); inside :meth:`best_effort`, its
        variant that sends each request once."""
        declared = self.declared_home
        return self.metadata_model if declared is None else self.model_at(declared)

    # -- where changes are made (global tables) ------------------------------------------

    @property
    def declared_home(self) -> str | None:
        """``Meta.home_region`` of the metadata model: where changes are made until it moves."""
        home: str | None = getattr(self.metadata_model.Meta, "home_region", None)
        return home

    @property
    def at_home(self) -> bool:
        """Whether this region's replica takes the table-wide changes (no ``Meta.home_region``,
        or this is it)."""
        declared = self.declared_home
        return declared is None or not self._remote(declared)

    def host_of(self, region: str) -> str | None:
        """The endpoint of the metadata table's replica in ``region`` (``None``: AWS's): the
        home region's ``Meta.home_host``, ``Meta.region_hosts``, or this region's own host."""
        meta = self.metadata_model.Meta
        if region == self.declared_home and hasattr(meta, "home_host"):
            home_host: str | None = meta.home_host
            return home_host
        hosts: Mapping[str, str] = getattr(meta, "region_hosts", None) or {}
        if region in hosts:
            return hosts[region]
        return getattr(meta, "host", None) if region == getattr(meta, "region", None) else None

    def model_at(self, region: str) -> type[ShardMetadata]:
        """The metadata model connected to ``region``'s replica (inside :meth:`best_effort`,
        its variant that sends each request once)."""
        patient = not getattr(self._best_effort, "active", False)
        return _placed(self.metadata_model, region, self.host_of(region), retries=patient)

    def _remote(self, region: str | None) -> bool:
        """Whether ``region``'s replica is another than this region's."""
        if region is None:
            return False
        return _placed(self.metadata_model, region, self.host_of(region), retries=True) is not self.metadata_model

    def home_of(self, state: ShardState | None) -> str | None:
        """The region whose replica takes the changes of the key ``state`` is of: the one its
        item names, else ``Meta.home_region``; ``None`` without a home region (this one's)."""
        declared = self.declared_home
        if declared is None:
            return None
        return state.home if state is not None and state.home else declared

    @property
    def table_writer(self) -> type[ShardMetadata]:
        """The model a table-wide record (the fleet protocol) is changed through: the current
        home region's (where new keys' items are created, see :mod:`pynamodb_sharding._home`),
        this region's without a home region."""
        home, _ = self._new_key_home()
        return self.metadata_model if home is None else self.model_at(home)

    def record(self, key: tuple[str, str]) -> ShardMetadata | None:
        """A table-wide record (``(partition_key, model)``: the protocol record, the home record)
        as this region's replica holds it, read consistently; ``None`` when absent."""
        return self._get(self.metadata_model, key[1], key[0])

    def send(self, model: type[ShardMetadata], call: Callable[[], _R]) -> _R:
        """``call()``, a request through ``model``: at a home region, retried while it cannot
        be reached (see :meth:`_send`)."""
        return self._send(model, call)

    def retime(self, ttl: float) -> None:
        """Cache counts (and absences, first sights, the home record) for ``ttl`` seconds from
        now on: what this process caches is dropped (it is read again when needed).
        """
        with self._lock:
            if ttl == self.ttl:
                return
            self.ttl = ttl
            maxsize = self._cache.maxsize
            self._cache = TTLCache(maxsize=maxsize, ttl=ttl, timer=self._timer)
            self._absent = TTLCache(maxsize=maxsize, ttl=ttl, timer=self._timer)
            self._seen = TTLCache(maxsize=maxsize, ttl=ttl, timer=self._timer)
            self._record = TTLCache(maxsize=1, ttl=ttl, timer=self._timer)

    def home_record(self, region: str | None = None) -> ShardMetadata | None:
        """The table's home record (:data:`HOME_RECORD_KEY`) as ``region``'s replica holds it
        (``None``: this region's), read consistently; ``None`` when the home never moved."""
        model = self.metadata_model if region is None else self.model_at(region)
        return self._get(model, HOME_RECORD_KEY[1], HOME_RECORD_KEY[0])

    def _new_key_home(self) -> tuple[str | None, str | None]:
        """Where new keys' items are created, and where the home is moving to (``None``: it is
        not): the table's home record as this region's replica holds it (cached for ``ttl``)."""
        declared = self.declared_home
        if declared is None:
            return None, None
        with self._lock:
            known = self._record.get(None)
        if known is None:
            known = self._remember_record(self.home_record())
        return known

    def _remember_record(self, record: ShardMetadata | None) -> tuple[str | None, str | None]:
        known = (self.declared_home, None) if record is None else (
            record.home or self.declared_home, record.moving_to)
        with self._lock:
            self._record[None] = known
        return known

    def deadline(self) -> float:
        """When a change that waits for the home region (``Meta.home_retry_seconds``) gives up."""
        patience = getattr(self.metadata_model.Meta, "home_retry_seconds", None)
        return self._timer() + (HOME_RETRY_SECONDS if patience is None else float(patience))

    def wait_for_move(self, deadline: float) -> None:
        """Wait a moment for a move of the home region to finish; raise instead inside
        :meth:`best_effort`, or past ``deadline``.

        Raises:
            HomeHandoverError: the move is still under way.
        """
        if getattr(self._best_effort, "active", False) or self._timer() >= deadline:
            home, moving = self._new_key_home()
            msg = (
                f"{self.metadata_model.__name__}: the home region of the shard counts is moving "
                f"({home!r} -> {moving!r}); counts change only in their home region, so nothing was "
                f"changed. Retry once the move has finished (pynamodb_sharding.move_home), or raise "
                f"Meta.home_retry_seconds."
            )
            raise HomeHandoverError(msg)
        self._sleep(0.2)

    def _fenced(self, model: type[ShardMetadata], region: str | None, condition: Condition) -> Condition:
        """``condition``, and that the item's home is ``region``: a change sent to a region that
        no longer takes the item's changes (it moved) fails there instead of being lost."""
        declared = self.declared_home
        if declared is None or region is None:
            return condition
        named: Condition = model.home == region
        if region == declared:
            named = named | model.home.does_not_exist()
        fenced: Condition = condition & named
        return fenced

    @contextmanager
    def best_effort(self) -> Iterator[None]:
        """Within the block, requests of this thread to the home region are best effort: sent
        once, never waited on. When the home region cannot be reached the request raises at once
        (:func:`home_unreachable` is true of the error), and for ``best_effort_pause`` seconds
        the following best-effort requests raise without being sent.

        .. versionadded:: 0.1.0
        """
        previous = getattr(self._best_effort, "active", False)
        self._best_effort.active = True
        try:
            yield
        finally:
            self._best_effort.active = previous

    def _send(self, model: type[ShardMetadata], call: Callable[[], _R]) -> _R:
        """``call()``; a home region that cannot be reached is retried (with a growing pause)
        for ``Meta.home_retry_seconds``, then refused: a change is never made elsewhere. Inside
        :meth:`best_effort` it is tried once, or not at all while it was found unreachable."""
        if model is self.metadata_model:
            return call()
        meta: Any = self.metadata_model.Meta
        if getattr(self._best_effort, "active", False):
            return self._send_once(call)
        patience = getattr(meta, "home_retry_seconds", None)
        deadline = self.deadline()
        pause = 0.1
        while True:
            try:
                return call()
            except PynamoDBException as exc:
                if not home_unreachable(exc):
                    raise
                if self._timer() >= deadline:
                    msg = (
                        f"{self.metadata_model.__name__}: the home region {model.Meta.region!r} "
                        f"({model.Meta.host or 'its AWS endpoint'}) could not be reached for "
                        f"{patience if patience is not None else HOME_RETRY_SECONDS} s; shard counts change only "
                        f"there (Meta.home_region), so nothing was changed. Check the home region's "
                        f"availability, or raise Meta.home_retry_seconds."
                    )
                    raise MetadataRequestError(msg, exc) from exc
                self._sleep(min(pause, max(0.0, deadline - self._timer())))
                pause = min(pause * 2, 2.0)

    def _send_once(self, call: Callable[[], _R]) -> _R:
        """A best-effort request to the home region: sent once, or refused at once while the
        home region was found unreachable less than ``best_effort_pause`` seconds ago."""
        down = self._home_down
        if down is not None and self._timer() <= down[0]:
            msg = (
                f"{self.metadata_model.__name__}: the home region could not be reached a moment ago; "
                f"this best-effort request was not sent."
            )
            raise MetadataRequestError(msg, down[1]) from down[1]
        try:
            result = call()
        except PynamoDBException as exc:
            if home_unreachable(exc):
                failures = 1 if down is None else down[2] + 1
                pause = self.best_effort_pause * 2 ** min(failures - 1, 6)
                self._home_down = (self._timer() + pause, exc, failures)
            raise
        self._home_down = None
        return result

    def _read(
        self, namespace: str, key: str, *, owner: str, home: bool = False,
    ) -> tuple[ShardState | None, str | None]:
        """The state of ``key`` (here, or at ``home``), and the region it was read in (``None``:
        this one)."""
        region: str | None = None
        moving = False
        try:
            if home and self.declared_home is not None:
                item, region, moving = self._read_at_home(namespace, key)
            else:
                item = self.item(namespace, key, home=home)
        except (ValueError, TypeError) as exc:
            # PynamoDB could not even deserialize the item (a number stored as text, ...).
            msg = (
                f"{_where(owner, key)} cannot be decoded ({exc}); fix or delete the item in the "
                f"metadata table {self.metadata_model.Meta.table_name!r}."
            )
            raise MetadataError(msg, exc) from exc
        if item is None:
            return None, region
        state = state_from_item(item, owner=owner, max_shards=self.max_shards)
        return (attrs.evolve(state, moving=True) if moving else state), region

    # -- cache maintenance ---------------------------------------------------------------

    def remember(self, namespace: str, key: str, state: ShardState, *, at_home: bool = False) -> ShardState:
        """Cache ``state`` unless a newer one is cached; return the one cached.

        ``at_home``: ``state`` was read or written in the home region, so this region's replica
        may not show it yet: it keeps the count the replica was last seen with
        (:attr:`ShardState.replica_count`) until a read of the replica shows this state.
        """
        with self._lock:
            return self._remember_locked((namespace, key), state, at_home=at_home)

    def _remember_locked(self, cache_key: _CacheKey, state: ShardState, *, at_home: bool = False) -> ShardState:
        trimmed = self._trimmed.get(cache_key)
        if trimmed is not None:
            if (state.last_updated, state.home_epoch) == (trimmed.last_updated, trimmed.home_epoch):
                # Only a trim changes the history without a new lock value: a longer history
                # under the trimmed state's lock value was read before the trim.
                if len(state.history) > len(trimmed.history):
                    state = attrs.evolve(state, history=trimmed.history)
            elif state.newer_than(trimmed):
                del self._trimmed[cache_key]
        current = self._cache.get(cache_key)
        if at_home:
            if current is not None and not state.newer_than(current):
                return current
            replica = self.initial
            if current is not None:
                replica = current.count if current.replica_count is None else current.replica_count
            state = attrs.evolve(state, replica_count=replica)
            self._keep(cache_key, state)
            return state
        if current is not None and not state.newer_than(current) and not state.same_version(current):
            if current.replica_count is not None:
                # An older state read here: the replica has not caught up with the home yet,
                # but shows this count now.
                current = attrs.evolve(current, replica_count=state.count)
                self._keep(cache_key, current)
            return current
        self._keep(cache_key, state)
        return state

    def forget(self, namespace: str, key: str) -> None:
        """Drop the cached state of ``key``: the next read goes to the table."""
        with self._lock:
            self._cache.pop((namespace, key), None)
            self._absent.pop((namespace, key), None)

    def clear(self) -> None:
        """Drop every cached state."""
        with self._lock:
            self._cache.clear()
            self._absent.clear()
            self._seen.clear()
            self._record.clear()
            self._trimmed.clear()
            self._last_seen.clear()

    def last_seen(self, namespace: str, key: str) -> tuple[Any, ...] | None:
        """The version of what this process last read or wrote of ``key`` (:func:`seen_version`,
        or :data:`SEEN_ABSENT` for no item), also once it expired from the cache; ``None`` if
        nothing. Merged reads that query shards before they know the count use it: a page read
        then is used only if the count read names the same version (nothing could have moved
        in between). Never reads the table."""
        with self._lock:
            if (namespace, key) not in self._last_seen:
                return None
            state = self._last_seen[(namespace, key)]
        return SEEN_ABSENT if state is None else seen_version(state)

    def _keep(self, cache_key: _CacheKey, state: ShardState) -> None:
        self._cache[cache_key] = state
        # Never back to an older version: a read answered late in another thread (a cache entry
        # expired, or cache_ttl=0, lets it be remembered) must not make a changed count look
        # unchanged to a merged read checking its early pages.
        last = self._last_seen.get(cache_key)
        if last is None or (state.last_updated, state.home_epoch) > (last.last_updated, last.home_epoch) or (
                (state.last_updated, state.home_epoch) == (last.last_updated, last.home_epoch)
                and state.read_count <= last.read_count):  # the same count, trimmed or not
            self._last_seen[cache_key] = state

    def _see_absent(self, cache_key: _CacheKey) -> None:
        """A read found no item: remembered only when no state was (a read answered late must not
        hide a state another thread saw since; an item deleted by hand leaves its last state)."""
        if self._last_seen.get(cache_key) is None:
            self._last_seen[cache_key] = None

    def known_absent(self, namespace: str, key: str) -> bool:
        """Whether ``key`` was read without an item less than ``ttl`` seconds ago.

        .. versionadded:: 0.1.0
        """
        with self._lock:
            return (namespace, key) in self._absent and (namespace, key) not in self._cache

    def mark_absent(self, namespace: str, key: str) -> None:
        """Remember for ``ttl`` seconds that ``key`` has no item.

        .. versionadded:: 0.1.0
        """
        with self._lock:
            self._absent[(namespace, key)] = True
            self._see_absent((namespace, key))

    def first_sight(self, namespace: str, key: str) -> bool:
        """``True`` the first time ``key`` is asked about within ``ttl`` seconds (a cold key's
        write needs no read of its count: any shard of its initial count is a valid place).

        Always ``False`` with ``ttl=0``: a writer that caches nothing reads the count at
        every write, so it sees every change at once.

        .. versionadded:: 0.1.0
        """
        if self.ttl <= 0:
            return False
        with self._lock:
            if (namespace, key) in self._seen:
                return False
            self._seen[(namespace, key)] = True
            return True

    # -- writes --------------------------------------------------------------------------

    def create(self, namespace: str, key: str, count: int, now: float, *, owner: str) -> ShardState:
        """Insert the item of a new key with ``count`` shards, unless another writer did first.

        The insert is conditional (``attribute_not_exists``); the loser re-reads and returns
        the winner's state.
        """
        at = next_lock_value(now, None)
        entry = HistoryEntry(at=at, count=count)
        fields = {"number_of_shards": count, "last_updated": at, "shard_history": {format_history_entry(entry)}}
        try:
            region = self._insert(namespace, key, fields)
        except _ItemExists:
            state = self.load(namespace, key, owner=owner, home=True)
            if state is None:  # deleted between our insert and our read: try once more
                return self.create(namespace, key, count, now, owner=owner)
            return state
        state = ShardState(count=count, last_updated=at, history=(entry,), home=region)
        return self.remember(namespace, key, state, at_home=self._remote(region))

    def create_grown(
        self, namespace: str, key: str, initial: int, count: int, now: float, *, owner: str
    ) -> ShardState | None:
        """Insert the item of a key that had no item, with ``count`` shards, grown from its
        ``initial`` count (recorded as in effect from epoch 0, the start); ``None`` when an
        item exists already (read and cached instead: the caller works with it and grows
        nothing blindly).

        .. versionadded:: 0.1.0
        """
        at = next_lock_value(now, None)
        entry = HistoryEntry(at=at, count=count)
        start = HistoryEntry(at=0.0, count=initial)
        fields = {"number_of_shards": count, "last_updated": at,
                  "shard_history": {format_history_entry(start), format_history_entry(entry)}}
        with attempts.tracking() as sent:
            try:
                region = self._insert(namespace, key, fields)
            except _ItemExists:
                if sent.may_have_applied:
                    # Our own insert, applied, and its reply lost: what is stored decides.
                    own = self._own_change(namespace, key, entry, owner=owner)
                    if own is not None:
                        return own
                self.load(namespace, key, owner=owner, home=True)
                return None
        with self._lock:
            self._absent.pop((namespace, key), None)
        state = ShardState(count=count, last_updated=at, history=(start, entry), home=region)
        return self.remember(namespace, key, state, at_home=self._remote(region))

    def _insert(self, namespace: str, key: str, fields: dict[str, Any]) -> str | None:
        """Insert the item of a new key where new keys are created; returns that region
        (``None``: this one, without a home region).

        With a home region, the insert is a transaction that also requires the table's home
        record there to name that region the home of new keys, with no move under way: while
        the home moves, no region creates items, so no key gets an item in two regions.

        Raises:
            _ItemExists: the key has an item there already.
            HomeHandoverError: the home kept moving for ``Meta.home_retry_seconds`` (at once
                inside :meth:`best_effort`).
        """
        if self.declared_home is None:
            model = self.writer
            item = model(key, namespace, **fields)
            attempts.watch(botocore_client(model))
            try:
                self._send(model, lambda: item.save(condition=model.partition_key.does_not_exist()))
            except PutError as exc:
                if exc.cause_response_code == _CONDITION_FAILED:
                    raise _ItemExists from exc
                raise
            return None
        deadline = self.deadline()
        region, moving = self._new_key_home()
        redirects = 0
        while True:
            assert region is not None
            if moving is None:
                model = self.model_at(region)
                item = model(key, namespace, home=region, **fields)
                attempts.watch(botocore_client(model))
                target: str = region
                try:
                    self._send(model, lambda: _insert_where_open(model, item, target, self.declared_home))  # noqa: B023
                    return region
                except _RecordClosed:
                    pass
                # The home of new keys is elsewhere, or moving: what that region's record says.
                region, moving = self._remember_record(self.home_record(region))
                redirects += 1
                if moving is None and redirects <= 2:
                    continue  # it names the home to try now
            self.wait_for_move(deadline)
            region, moving = self._remember_record(self.home_record(region))

    def change(
        self,
        namespace: str,
        key: str,
        seen: ShardState,
        count: int,
        now: float,
        *,
        owner: str,
    ) -> ShardState | None:
        """Set the count of ``key`` to ``count`` if nobody changed it since ``seen`` was read.

        Writes the count, a new ``last_updated`` and a history entry in one conditional
        ``UpdateItem`` (condition: ``last_updated = seen.last_updated``, and, with a home
        region, that the item's home is the region the change is sent to).

        Returns:
            The new state (also cached), or ``None`` when another writer changed the item
            first (or its home moved); the caller re-reads with :meth:`load` and must not
            change it again blindly.
        """
        at = next_lock_value(now, seen.last_updated)
        entry = HistoryEntry(at=at, count=count)
        entries = {format_history_entry(entry)}
        previous = HistoryEntry(at=seen.last_updated, count=seen.count)
        if previous not in seen.history:
            # A count the history does not show (an item from another writer of this schema,
            # or fixed by hand) is recorded with the change, so reads keep covering its shards.
            entries.add(format_history_entry(previous))
        region = self.home_of(seen)
        meta = self.writer if region is None else self.model_at(region)
        item = meta(key, namespace)
        condition = self._fenced(meta, region, meta.last_updated == seen.last_updated)
        actions: list[Action] = [
            meta.number_of_shards.set(count), meta.last_updated.set(at), meta.shard_history.add(entries),
        ]
        attempts.watch(botocore_client(meta))
        with attempts.tracking() as sent:
            try:
                self._send(meta, lambda: item.update(actions=actions, condition=condition))
            except UpdateError as exc:
                if exc.cause_response_code != _CONDITION_FAILED:
                    raise
                if not sent.may_have_applied:
                    return None
                # An earlier attempt may have been applied and its reply lost: botocore's
                # resend then fails the condition on our own change. What is stored decides.
                return self._own_change(namespace, key, entry, owner=owner)
        # UpdateItem returned the whole new item (ALL_NEW): cache exactly what is stored.
        state = state_from_item(item, owner=owner, max_shards=self.max_shards)
        return self.remember(namespace, key, state, at_home=self._remote(region))

    def report_writes(
        self, namespace: str, key: str, units: float, now: float, interval: float, *, owner: str,
        spread: float = 0.0,
    ) -> tuple[ShardState, RateWindow] | None:
        """Add ``units`` written to ``key`` by this process to the current rate window of its item.

        One ``UpdateItem``, whatever other processes report meanwhile: it adds ``units`` (and
        their variance ``spread``, when sampled) to the current window's attributes and removes
        the windows this process last saw that are older than the two before (see
        ``_write_rate``). Its only condition is that the key has an item. Lock values and the
        count are not touched. A lost reply that botocore resends may count the units twice:
        the estimate then errs high (an early growth), never low.

        Returns:
            The key's state and its rate windows as stored after the report (the state is
            cached), or ``None`` when the key has no metadata item (nothing is written then).
        """
        region = self.home_of(self.cached(namespace, key))
        reported = self._report_at(region, namespace, key, units, now, interval, owner=owner, spread=spread)
        if reported is None and self.declared_home is not None:
            # Nothing matched there: the item's home moved.
            state = self.load(namespace, key, owner=owner, home=True)
            if state is not None and self.home_of(state) != region:
                reported = self._report_at(self.home_of(state), namespace, key, units, now, interval, owner=owner,
                                           spread=spread)
        return reported

    def _report_at(
        self, region: str | None, namespace: str, key: str, units: float, now: float, interval: float, *, owner: str,
        spread: float = 0.0,
    ) -> tuple[ShardState, RateWindow] | None:
        meta = self.writer if region is None else self.model_at(region)
        start = window_start(now, interval)
        exists = self._fenced(meta, region, meta.partition_key.exists() & meta.number_of_shards.exists())
        actions: list[Action] = [NumberAttribute(attr_name=window_attribute(RATE_UNITS_PREFIX, start)).add(units)]
        if spread > 0:
            actions.append(NumberAttribute(attr_name=window_attribute(RATE_SPREAD_PREFIX, start)).add(spread))
        # Windows older than the two before the current one are out of date (a half window's
        # margin: the starts are read back from rounded names).
        stale = [name for name, at in self._rate_names.get((namespace, key), ())
                 if at < start - 2 * interval - interval / 2]
        actions += [NumberAttribute(attr_name=name).remove() for name in stale]
        item = meta(key, namespace)
        try:
            data = self._send(meta, lambda: item.update(actions=actions, condition=exists))
        except UpdateError as exc:
            if exc.cause_response_code != _CONDITION_FAILED:
                raise
            return None
        attributes: Mapping[str, Any] = (data or {}).get("Attributes") or {}
        self._rate_names[(namespace, key)] = tuple(rate_attribute_names(attributes).items())
        stored = state_from_item(item, owner=owner, max_shards=self.max_shards)
        state = self.remember(namespace, key, stored, at_home=self._remote(region))
        window = stored_window(attributes, interval, now) or RateWindow(start, units, 0.0, interval, spread)
        return state, window

    def trim_history(self, namespace: str, key: str, seen: ShardState, *, owner: str) -> ShardState | None:
        """Drop every history entry but the current count's, if nobody changed ``key`` since ``seen``.

        After this, reads cover only ``1..seen.count``: call it only once no shard above the
        count holds an item (the ``compact`` migration checks that first). The count and
        ``last_updated`` stay as they are; the update is conditional on ``last_updated``, so a
        growth that happened after ``seen`` was read makes it return ``None`` and trim nothing.

        .. versionadded:: 0.1.0
        """
        region = self.home_of(seen)
        meta = self.writer if region is None else self.model_at(region)
        current = format_history_entry(HistoryEntry(at=seen.last_updated, count=seen.count))
        item = meta(key, namespace)
        condition = self._fenced(meta, region, meta.last_updated == seen.last_updated)
        try:
            self._send(meta, lambda: item.update(actions=[meta.shard_history.set({current})], condition=condition))
        except UpdateError as exc:
            if exc.cause_response_code != _CONDITION_FAILED:
                raise
            return None
        state = state_from_item(item, owner=owner, max_shards=self.max_shards)
        with self._lock:
            # The trimmed state is not "newer" (same lock value, fewer entries): replace the
            # cached one, and keep reads already in flight from restoring the old history.
            self._cache.pop((namespace, key), None)
            self._trimmed[(namespace, key)] = state
            return self._remember_locked((namespace, key), state, at_home=self._remote(region))

    def _own_change(self, namespace: str, key: str, entry: HistoryEntry, *, owner: str) -> ShardState | None:
        """The stored state if it holds the change ``entry`` (ours, applied), else ``None``."""
        state = self.load(namespace, key, owner=owner, home=True)
        if state is None or entry not in state.history:
            return None
        # Entries are only ever added, so a later change by another writer still shows ours;
        # its newer state is then what the caller should work with.
        return state


class _ItemExists(Exception):
    """The insert of a new key's item found one there already (its condition failed)."""


class _RecordClosed(Exception):
    """An insert's region does not create new keys' items now: the table's home record there
    names another home, or a move of it is under way."""


def _insert_where_open(model: type[ShardMetadata], item: ShardMetadata, region: str, declared: str | None) -> None:
    """Put ``item`` (conditionally: no item of its key) and check, in the same transaction, that
    the home record in ``region``'s replica names ``region`` the home of new keys (absent, the
    declared home is) with no move under way."""
    named = model.home == region
    if region == declared:
        named = named | model.home.does_not_exist()
    try:
        with TransactWrite(connection=table_connection(model).connection) as transaction:
            transaction.condition_check(
                model, HOME_RECORD_KEY[0], HOME_RECORD_KEY[1], condition=named & model.moving_to.does_not_exist(),
            )
            transaction.save(item, condition=model.partition_key.does_not_exist())
    except TransactWriteError as exc:
        reasons = [reason.code if reason is not None else None for reason in exc.cancellation_reasons or []]
        reasons += [None, None]
        if reasons[1] == "ConditionalCheckFailed":
            raise _ItemExists from exc
        if reasons[0] == "ConditionalCheckFailed":
            raise _RecordClosed from exc
        raise


at_fork(
    before=_fork.before,
    after_in_parent=lambda: _fork.after(in_child=False),
    after_in_child=lambda: _fork.after(in_child=True),
)
