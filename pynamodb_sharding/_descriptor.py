"""The ``Sharding`` descriptor and the ``ShardManager`` it binds to each model class.

:class:`ShardManager` is the one seam between a sharded model and its strategy: it binds the
model once (its key space, its only :class:`~pynamodb_sharding._keys.KeyCodec`), builds the
frozen key views strategies see, fills in their optional hooks, and leaves out shards whose
physical key cannot exist. The model, the merged queries, the conditions and the command line
all ask it, never the strategy directly. :func:`shard_manager` returns it for a model class.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import weakref
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, overload

import attrs
from pynamodb.indexes import GlobalSecondaryIndex

from pynamodb_sharding._cursor import CursorSecret, secret_keys
from pynamodb_sharding._exceptions import (
    CursorError,
    FixedShardCountError,
    ShardingDefinitionError,
    ShardKeyError,
)
from pynamodb_sharding._hedging import LatencyWindow
from pynamodb_sharding._host import hash_keyname, index_hash_attribute, index_model, indexes, range_keyname
from pynamodb_sharding._item import known
from pynamodb_sharding._keys import DEFAULT_SEPARATOR, LEGACY_SHARD, BareKeyCodec, KeyCodec, validate_separator
from pynamodb_sharding._owned import Owned
from pynamodb_sharding._periods import shard_namespace
from pynamodb_sharding._pool import declare_workers
from pynamodb_sharding._strategies import (
    HistoryEntry,
    ItemKey,
    KeySpace,
    ResizableShardStrategy,
    ShardKey,
    ShardStrategy,
    UnshardedKeys,
    md5_shard,
    stored_bytes,
)

if TYPE_CHECKING:
    from pynamodb.models import Model


__all__ = [
    "ShardManager",
    "Sharding",
    "index_manager",
    "is_global_index_class",
    "is_sharded",
    "register_index_manager",
    "register_model",
    "shard_manager",
]

_M = TypeVar("_M", bound="Model")
_R = TypeVar("_R")

#: Read replicas a model may declare: DynamoDB allows 20 global secondary indexes a table, and
#: the model's own indexes need some.
MAX_READ_REPLICAS = 10


class Sharding:
    """Declares write sharding of a :class:`~pynamodb_sharding.ShardedModel`'s hash key.

    ``AuditLog.shards`` (on the class) is a :class:`ShardManager`; ``item.shards`` (on an
    instance) is the shard the item lives in, or ``None`` before it is first written.

    Args:
        strategy: how writes pick a shard and which shards reads cover
            (:class:`~pynamodb_sharding.RandomShards`, :class:`~pynamodb_sharding.HashedShards`,
            :class:`~pynamodb_sharding.DynamicShards`).
        separator: put between the logical key and the shard number; must not contain digits.
        first_shard: the number of the first shard, 1 (default: ``key_1`` .. ``key_N``) or 0
            (``key_0`` .. ``key_N-1``), to declare a table sharded by hand that way.
        legacy_unsharded: the table still holds unsharded items under bare logical keys (a
            table adopting sharding in place): writes go to shards, and every read also covers
            the bare key, returning each item once (see :doc:`adoption`).
        max_workers: threads a merged query uses; default ``min(32, number of shards)``.
            Raise ``Meta.max_pool_connections`` to match, or threads wait for connections.
        cursor_secret: signs the page tokens of merged queries (``next_page_token``) with
            HMAC-SHA256, so a client cannot forge one: a ``str`` or ``bytes``, a list of them
            (the first signs, every one is accepted: rotate by putting the new one first), or a
            callable returning either, read each time a token is made or read (e.g.
            ``lambda: settings.SECRET_KEY``). With a secret, a query resumes from a token only,
            never from an unsigned cursor dict.
        layout: on a ``GlobalSecondaryIndex`` only, where the index shard is stored:
            ``"suffixed"`` (default) stores the index attribute as ``20160226_7``, any table and
            any SDK; ``"multi_attribute"`` keeps the attribute's real value and stores the shard
            in a number attribute of its own, which the index's partition key also names
            (DynamoDB's multi-attribute keys). See :doc:`indexes`.
        shard_attribute: with ``layout="multi_attribute"``, the name of the stored shard
            number attribute; default ``<index attribute>_shard`` (``day_shard``).
        written_at: the model's range key, when it is the time the item is written (a
            ``NumberAttribute`` of epoch seconds, see ``written_at_unit``, or a
            ``UTCDateTimeAttribute``): a query whose range ends before a shard was first used
            does not query it (with a strategy whose count changes over time,
            :class:`~pynamodb_sharding.DynamicShards`). See :doc:`query`.
        written_at_unit: ``"s"`` (default) or ``"ms"``: the unit of a number ``written_at``.
        written_at_margin: seconds of clock skew allowed between writers (default 300): a shard
            is skipped only when the query's range ends this long before the shard's first use.
        hedged_requests: send a shard request of a merged query or count once more when it is
            slower than the model's recent 95th percentile; the first answer wins
            (see :mod:`pynamodb_sharding._hedging`).
        read_replicas: global secondary indexes keyed like the table (``read-replica-1`` ..),
            created by ``create_table``, over which eventually consistent reads are spread,
            moving a read throttled on one copy to another at once; each costs the writes of a
            global index. See :doc:`hot_reads`.

            .. versionadded:: 0.2.0
        page_reads: how a merged query with a ``limit`` (and no ``page_size``) asks the shards
            for items: ``"one_round_trip"`` (default) asks each shard for enough that a page
            rarely needs a second request to any shard; ``"fewest_items"`` asks each for 1.5 x
            its share of the limit and reads again the shards that hold more, fewer items (and
            read units) for more round trips. See :doc:`query`.
        unique_keys: with a strategy that picks a shard per write (``RandomShards``,
            ``DynamicShards``, or ``HashedShards`` derived from attributes outside the key),
            make every ``save()`` of an instance not loaded from the table an upsert, as
            PynamoDB's: one transaction that puts the item and checks that no other shard of
            its key holds it, and when one does, replaces the item there. One copy of a key is
            ever stored, so ``get`` finds it. Each such save costs a transaction (see
            :doc:`sharding`); batch puts of such instances are sent one by one, by ``save()``.

            .. versionadded:: 0.2.0

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        strategy: ShardStrategy,
        separator: str = DEFAULT_SEPARATOR,
        *,
        first_shard: int = 1,
        legacy_unsharded: bool = False,
        max_workers: int | None = None,
        cursor_secret: CursorSecret | Callable[[], CursorSecret] | None = None,
        layout: Literal["suffixed", "multi_attribute"] = "suffixed",
        shard_attribute: str | None = None,
        written_at: str | None = None,
        written_at_unit: Literal["s", "ms"] = "s",
        written_at_margin: float = 300.0,
        hedged_requests: bool = False,
        page_reads: Literal["one_round_trip", "fewest_items"] = "one_round_trip",
        read_replicas: int = 0,
        unique_keys: bool = False,
    ) -> None:
        given: object = strategy  # checked at run time: a common slip is Sharding(10)
        if isinstance(given, type) or not isinstance(given, ShardStrategy):
            msg = (
                f"Sharding(strategy): expected a shard strategy such as RandomShards(10), got "
                f"{strategy!r}; pass RandomShards(n), HashedShards(n) or DynamicShards(Metadata), or an "
                f"object with max_shards, shard_count, read_shards, write_shard and point_shards "
                f"(the ShardStrategy protocol)."
            )
            raise ShardingDefinitionError(msg)
        self.separator = validate_separator(separator, "Sharding(separator=...)")
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                        or max_workers < 1):
            msg = f"Sharding(max_workers=...): expected a positive int or None, got {max_workers!r}."
            raise ShardingDefinitionError(msg)
        if isinstance(first_shard, bool) or first_shard not in (0, 1):
            msg = (
                f"Sharding(first_shard=...): expected 0 (keys numbered key_0 .. key_N-1) or 1 "
                f"(key_1 .. key_N, the default), got {first_shard!r}."
            )
            raise ShardingDefinitionError(msg)
        flag: object = legacy_unsharded  # checked at run time
        if not isinstance(flag, bool):
            msg = f"Sharding(legacy_unsharded=...): expected True or False, got {legacy_unsharded!r}."
            raise ShardingDefinitionError(msg)
        self.strategy = strategy
        self.first_shard = first_shard
        self.legacy_unsharded = legacy_unsharded
        self.max_workers = max_workers
        if max_workers is not None:
            declare_workers(max_workers)  # the shared pool runs that many, unless its size was set
        if cursor_secret is not None and not callable(cursor_secret):
            try:
                secret_keys(cursor_secret)
            except CursorError:
                msg = (
                    f"Sharding(cursor_secret=...): expected a non-empty str or bytes, a list of them "
                    f"or a callable returning one, got {cursor_secret!r}."
                )
                raise ShardingDefinitionError(msg) from None
        self.cursor_secret = cursor_secret
        chosen: object = layout  # checked at run time
        if chosen not in ("suffixed", "multi_attribute"):
            msg = f"Sharding(layout=...): expected 'suffixed' or 'multi_attribute', got {layout!r}."
            raise ShardingDefinitionError(msg)
        if shard_attribute is not None and (layout != "multi_attribute" or not isinstance(shard_attribute, str)
                                            or not shard_attribute):
            msg = (
                f"Sharding(shard_attribute=...): names the stored shard attribute of "
                f"layout='multi_attribute' and must be a non-empty str, got {shard_attribute!r} with "
                f"layout={layout!r}; pass layout='multi_attribute' too, or drop shard_attribute."
            )
            raise ShardingDefinitionError(msg)
        self.layout = layout
        self.shard_attribute = shard_attribute
        if written_at is not None and (not isinstance(written_at, str) or not written_at):
            msg = f"Sharding(written_at=...): expected the name of the model's range key, got {written_at!r}."
            raise ShardingDefinitionError(msg)
        unit: object = written_at_unit
        if unit not in ("s", "ms"):
            msg = f"Sharding(written_at_unit=...): expected 's' or 'ms', got {written_at_unit!r}."
            raise ShardingDefinitionError(msg)
        margin: object = written_at_margin
        if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0 <= margin < float("inf"):
            msg = f"Sharding(written_at_margin=...): expected seconds >= 0, got {written_at_margin!r}."
            raise ShardingDefinitionError(msg)
        hedge: object = hedged_requests
        if not isinstance(hedge, bool):
            msg = f"Sharding(hedged_requests=...): expected True or False, got {hedged_requests!r}."
            raise ShardingDefinitionError(msg)
        self.hedged_requests = hedged_requests
        if page_reads not in ("one_round_trip", "fewest_items"):
            msg = (f"Sharding(page_reads=...): expected \"one_round_trip\" (the default) or \"fewest_items\", "
                   f"got {page_reads!r}.")
            raise ShardingDefinitionError(msg)
        self.page_reads = page_reads
        replicas: object = read_replicas  # checked at run time
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= MAX_READ_REPLICAS:
            msg = (
                f"Sharding(read_replicas=...): expected a number of read replicas from 0 to "
                f"{MAX_READ_REPLICAS} (each is a global secondary index, DynamoDB allows 20 a table), "
                f"got {read_replicas!r}."
            )
            raise ShardingDefinitionError(msg)
        self.read_replicas = read_replicas
        unique: object = unique_keys  # checked at run time
        if not isinstance(unique, bool):
            msg = f"Sharding(unique_keys=...): expected True or False, got {unique_keys!r}."
            raise ShardingDefinitionError(msg)
        self.unique_keys = unique_keys
        self.written_at = written_at
        self.written_at_unit = written_at_unit
        self.written_at_margin = float(written_at_margin)
        self.name = ""
        # One manager per fully defined owner class: item decoding asks for it per item.
        self._managers: Owned[ShardManager[Any]] = Owned("manager")

    def __repr__(self) -> str:
        extra = f", first_shard={self.first_shard}" if self.first_shard != 1 else ""
        extra += ", legacy_unsharded=True" if self.legacy_unsharded else ""
        extra += f", layout={self.layout!r}" if self.layout != "suffixed" else ""
        extra += f", read_replicas={self.read_replicas}" if self.read_replicas else ""
        extra += ", unique_keys=True" if self.unique_keys else ""
        return f"Sharding({self.strategy!r}, separator={self.separator!r}{extra})"

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name
        if is_global_index_class(owner):
            # The index's async reads (the [async] extra): the model's, with the index's name;
            # a ShardedIndex has its own, typed (the same calls).
            for method_name, method in (("aquery", _index_aquery), ("acount", _index_acount),
                                        ("ascan", _index_ascan)):
                if getattr(owner, method_name, None) is None:
                    setattr(owner, method_name, method)
            return  # bound per model when the model is defined (see pynamodb_sharding._indexes)
        if _is_local_index_class(owner):
            msg = (
                f"{owner.__name__}.{name}: a local secondary index shares the table's partition key, "
                f"so it is read over the table's shards already; remove this Sharding (shard the "
                f"model's hash key with Sharding on the model)."
            )
            raise ShardingDefinitionError(msg)
        if not getattr(owner, "_is_sharded_model", False):
            msg = (
                f"{owner.__name__}.{name}: Sharding only works on ShardedModel subclasses; "
                f"derive {owner.__name__} from pynamodb_sharding.ShardedModel instead of Model."
            )
            raise ShardingDefinitionError(msg)

    @overload
    def __get__(self, instance: None, owner: type[_M]) -> ShardManager[_M]: ...

    @overload
    def __get__(self, instance: GlobalSecondaryIndex[Any], owner: type[Any]) -> ShardManager[Any]: ...

    @overload
    def __get__(self, instance: Model, owner: type[Any]) -> int | None: ...

    def __get__(
        self, instance: Model | GlobalSecondaryIndex[Any] | None, owner: type[_M],
    ) -> ShardManager[_M] | ShardManager[Any] | int | None:
        if isinstance(instance, GlobalSecondaryIndex) or (instance is None and is_global_index_class(owner)):
            if instance is None:
                return self  # type: ignore[return-value]  # the index class itself is not bound to a model
            return index_manager(instance)
        if instance is None:
            return self.bind(owner)
        item: Any = instance
        shard = known(item, self.bind(type(item)))
        return None if shard == LEGACY_SHARD else shard

    def bind(self, owner: type[_M], *, fresh: bool = False) -> ShardManager[_M]:
        """The manager of ``owner``, created once per fully defined class (``fresh``: created
        now, when the class's definition is complete: PynamoDB's metaclass reads the descriptor
        before it knows the class's keys)."""
        manager = self._managers.get(owner)
        if manager is None or fresh:
            written_at = (None if self.written_at is None else
                          WrittenAt(self.written_at, 1000.0 if self.written_at_unit == "ms" else 1.0,
                                    self.written_at_margin))
            manager = ShardManager(owner, self.strategy, self.separator, self.max_workers,
                                   first_shard=self.first_shard, legacy_unsharded=self.legacy_unsharded,
                                   cursor_secret=self.cursor_secret, written_at=written_at,
                                   latency_window=LatencyWindow() if self.hedged_requests else None,
                                   page_reads=self.page_reads, read_replicas=self.read_replicas,
                                   unique_keys=self.unique_keys)
            self._managers[owner] = manager
        return manager

    def __set__(self, instance: Any, value: object) -> None:
        msg = (
            f"{type(instance).__name__}.{self.name}: the shard of an item is chosen by its "
            f"strategy and cannot be assigned; construct the item and save it."
        )
        raise AttributeError(msg)


class ReadWatch(Protocol):
    """What a merged read calls after each shard page it takes (see :meth:`ShardManager.count_watch`)."""

    def planned(self, floor: int) -> None:
        """The read found its shards (see :func:`pynamodb_sharding._fanout.planned_floor`)."""

    def __call__(self) -> None:
        """Raise before a page taken now is used, if it may miss items."""


@attrs.frozen
class WrittenAt:
    """``Sharding(written_at=...)``: the range key holds the time an item is written.

    .. versionadded:: 0.1.0
    """

    #: The Python name of the model's range key.
    attribute: str
    #: Units of a number value per second (1 for seconds, 1000 for milliseconds).
    per_second: float = 1.0
    #: Seconds of clock skew allowed between writers.
    margin: float = 300.0

    def epoch(self, attribute: Any, value: Any) -> float | None:
        """``value`` of the range ``attribute`` (Python or serialized) as epoch seconds."""
        if value is None:
            return None
        if isinstance(value, datetime.datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
            return moment.timestamp()
        if isinstance(value, str) and attribute.attr_type == "S":
            return self.epoch(attribute, attribute.deserialize(value))
        return float(Decimal(str(value))) / self.per_second


@attrs.frozen
class ShardManager(Generic[_M]):
    """Manages the shards of one sharded model class (``AuditLog.shards``).

    Every question about shards goes through it: which shard a new item goes to
    (:meth:`write_shard`), which shards hold an item (:meth:`point_shards`) or a key
    (:meth:`read_shards`), how a key is encoded (:attr:`codec`), and, for resizable
    strategies, :meth:`grow`, :meth:`shrink`, :meth:`history` and :meth:`refresh`.

    .. versionadded:: 0.1.0
    """

    model: type[_M]
    strategy: ShardStrategy
    separator: str = DEFAULT_SEPARATOR
    #: Threads a merged query uses; ``None``: ``min(32, number of shards)``.
    max_workers: int | None = None
    #: The number of the first shard (0 or 1); strategies answer 1..N and the manager shifts.
    first_shard: int = attrs.field(default=1, kw_only=True)
    #: Whether the table still holds unsharded items under bare logical keys.
    legacy_unsharded: bool = attrs.field(default=False, kw_only=True)
    #: Signs page tokens (``Sharding(cursor_secret=...)``); ``None``: tokens are unsigned.
    cursor_secret: CursorSecret | Callable[[], CursorSecret] | None = attrs.field(
        default=None, kw_only=True, repr=False
    )
    #: The sharded global secondary index this manager shards, ``None`` for the table's hash key.
    index_name: str | None = attrs.field(default=None, kw_only=True)
    #: ``Sharding(written_at=...)``: the range key is the write time; queries skip later shards.
    written_at: WrittenAt | None = attrs.field(default=None, kw_only=True)
    #: ``Sharding(hedged_requests=True)``: the recent latencies slow shard requests are hedged by.
    latency_window: LatencyWindow | None = attrs.field(default=None, kw_only=True, repr=False)
    #: ``Sharding(page_reads=...)``: how a merged query with a limit asks the shards for items.
    page_reads: str = attrs.field(default="one_round_trip", kw_only=True, repr=False)
    #: ``Sharding(read_replicas=N)``: global indexes keyed like the table that share its reads.
    read_replicas: int = attrs.field(default=0, kw_only=True)
    #: ``Sharding(unique_keys=True)``: a save of an instance not loaded from the table checks
    #: the other shards of its key and replaces the item where it is stored (one copy a key).
    unique_keys: bool = attrs.field(default=False, kw_only=True)
    #: Encodes and decodes this model's physical keys (the only codec of the class).
    codec: KeyCodec = attrs.field(init=False)
    _space: KeySpace = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.index_name is None:
            attribute = hash_keyname(self.model) or ""
        else:
            attribute = index_hash_attribute_name(self.model, self.index_name)
        table = shard_namespace(self.model)
        object.__setattr__(self, "_space", KeySpace(self.model.__name__, attribute, self._namespace(table), self.model))
        # A legacy key ending in the separator and a number above every shard the layout can
        # have is a bare key (`sensor_2016` under RandomShards(8)), never that shard of another key.
        highest = self.strategy.max_shards + self.first_shard - 1 if self.legacy_unsharded else None
        # A model that shards only an index stores its table keys as they are.
        codec = BareKeyCodec if isinstance(self.strategy, UnshardedKeys) else KeyCodec
        object.__setattr__(self, "codec", codec(self.model.__name__, attribute, self.separator,
                                                self.first_shard, self.legacy_unsharded, highest))

    def _namespace(self, table: str) -> str:
        # An index's keys are apart from the table's: a shard count of `day` on the index is
        # not one of a table key that happens to be spelled the same.
        return table if self.index_name is None else f"{table}#{self.index_name}"

    @property
    def space(self) -> KeySpace:
        """The model's key space as strategies see it (its namespace follows ``Meta.table_name``)."""
        space = self._space
        table = self._namespace(shard_namespace(self.model))
        if space.namespace != table:  # a test binding or an app renamed the table at run time
            space = attrs.evolve(space, namespace=table)
            object.__setattr__(self, "_space", space)
        return space

    def cursor_secrets(self) -> tuple[bytes, ...]:
        """The HMAC keys of this model's page tokens, the signing one first (empty: unsigned).

        Raises:
            CursorError: a ``cursor_secret`` callable returned no usable secret.
        """
        return secret_keys(self.cursor_secret)

    @property
    def attribute(self) -> str:
        """The Python name of the sharded hash-key attribute."""
        return self._space.attribute  # a renamed table changes the namespace, never this

    # -- the model's keys, as the layers below the model read them ---------------------------------

    @functools.cached_property
    def key_attributes(self) -> tuple[str, ...]:
        """The Python names of the table's hash key and range key (if any)."""
        range_name = range_keyname(self.model)
        return (hash_keyname(self.model) or "", *((range_name,) if range_name else ()))

    @functools.cached_property
    def basis_names(self) -> tuple[str, ...]:
        """What an item's shard depends on: hash key, range key, then the attributes the
        strategy derives it from (see :mod:`pynamodb_sharding._item`)."""
        return (*self.key_attributes, *self.derived_attributes)

    @property
    def range_name(self) -> str | None:
        """The Python name of the table's range key, ``None`` without one."""
        return range_keyname(self.model)

    @property
    def hash_attribute(self) -> Any:
        """The table's hash-key attribute (a PynamoDB ``Attribute``)."""
        return self.model.get_attributes()[hash_keyname(self.model) or ""]

    @property
    def range_attribute(self) -> Any:
        """The table's range-key attribute, ``None`` without one."""
        name = range_keyname(self.model)
        return self.model.get_attributes()[name] if name else None

    @functools.cached_property
    def key_names(self) -> tuple[str, ...]:
        """The stored names of the table's key attributes (what decoding an item needs)."""
        return tuple(self.model.get_attributes()[name].attr_name for name in self.key_attributes)

    def serialize_range(self, value: Any) -> Any:
        """The serialized range key value, ``None`` for ``None`` or a model without one."""
        attribute = self.range_attribute
        return attribute.serialize(value) if attribute is not None and value is not None else None

    @property
    def index_only(self) -> bool:
        """Whether the model shards only global secondary indexes: its table keys are stored as
        they are (a one-shard layout whose physical key is the logical key)."""
        return isinstance(self.strategy, UnshardedKeys)

    # -- the strategy's answers, through key views ----------------------------------------------

    def key(self, value: object) -> ShardKey:
        """The view of logical key ``value`` strategies see.

        Raises:
            ShardKeyError: ``value`` is not a non-empty str.
        """
        return ShardKey(self.space, self.codec.check_logical(value))

    def item_key(self, item: _M) -> ItemKey:
        """The view of ``item`` strategies see: its logical key and stored attribute values."""
        model = self.model
        attributes = model.get_attributes()

        def attribute_bytes(name: str) -> bytes | None:
            value = getattr(item, name)
            if value is None:
                return None
            try:
                return stored_bytes(attributes[name], value)
            except decimal.InvalidOperation:  # DynamoDB would refuse it too ("cannot be converted")
                kind = type(attributes[name]).__name__
                msg = (f"{model.__name__}.{name} is a {kind}, and {value!r} is not a number: pass a "
                       f"number (an int, a float or a Decimal) for {name!r}.")
                raise ShardKeyError(msg) from None

        if self.index_name is not None:
            # An index's entries of one value are told apart by the item's primary key.
            hash_name = hash_keyname(model) or ""
            range_name = range_keyname(model)
            parts = [attribute_bytes(hash_name)] + ([attribute_bytes(range_name)] if range_name else [])
            range_bytes = None if None in parts else b"\x1f".join(part for part in parts if part is not None)
            return ItemKey(self.key(getattr(item, self.attribute)), range_bytes, attribute_bytes)
        range_name = range_keyname(model)
        range_bytes = attribute_bytes(range_name) if range_name else None
        range_value = getattr(item, range_name) if range_name else None
        return ItemKey(self.key(getattr(item, self.attribute)), range_bytes, attribute_bytes,
                       attribute_value=functools.partial(getattr, item), range_value=range_value)

    def shard_count(self, key: str) -> int:
        """The number of shards new writes of ``key`` spread over."""
        return self.strategy.shard_count(self.key(key))

    def read_shards(self, key: str) -> tuple[int, ...]:
        """Every shard a read of ``key`` covers, ascending.

        Shards whose physical key would exceed DynamoDB's 2,048-byte limit cannot hold items
        and are left out.

        Raises:
            ShardKeyError: even shard 1 of ``key`` would exceed the limit.
        """
        view = self.key(key)
        return self._possible(view.value, self._shifted(self.strategy.read_shards(view)))

    def early_read_shard(self, key: str) -> tuple[int, int, Any] | None:
        """``(shard, likely count, version)`` when finding the shards a read of ``key`` covers
        costs a request (a ``DynamicShards`` count read, fresh or once the cached one expired)
        and this process read the key before: the first of those shards, which every read
        covers, how many shards the read probably has, and what :meth:`early_pages_valid` is
        asked with once the count is read. ``None`` otherwise, and for a ``legacy_unsharded``
        model (its bare key is read first). Sends nothing.

        Raises:
            ShardKeyError: ``key`` is not a valid logical key, or too long for any shard.

        .. versionadded:: 0.1.0
        """
        hook: Callable[[ShardKey], tuple[int, Any] | None] | None = getattr(self.strategy, "likely_read_count", None)
        if hook is None or self.legacy_unsharded:
            return None
        view = self.key(key)
        guess = hook(view)
        if guess is None:
            return None
        count, version = guess
        first = self._possible(view.value, self._shifted((1,)))
        return (first[0], max(1, count), version) if first else None

    def early_pages_valid(self, key: str, version: Any) -> bool:
        """Whether requests sent for :meth:`early_read_shard`'s guess (its ``version``) may be
        used now that the count of ``key`` was read: it is the same version (see
        ``DynamicShards.early_pages_valid``).

        .. versionadded:: 0.1.0
        """
        check: Callable[[ShardKey, Any], bool] | None = getattr(self.strategy, "early_pages_valid", None)
        return check is not None and check(self.key(key), version)

    def read_targets(self, key: str) -> tuple[int, ...]:
        """:meth:`read_shards`, preceded by :data:`~pynamodb_sharding._keys.LEGACY_SHARD` (the bare
        legacy key) when the model is declared ``legacy_unsharded``."""
        shards = self.read_shards(key)
        return (LEGACY_SHARD, *shards) if self.legacy_unsharded else shards

    def decode_stored(self, value: str) -> tuple[str, int | None]:
        """Split a hash-key value stored in the table into ``(logical_key, shard)``.

        The shard is ``None`` for a bare legacy key (a ``legacy_unsharded`` model's unsharded
        item).

        Raises:
            ShardKeyError: the value is not a physical key of this model (and the model does
                not read legacy keys).

        .. versionadded:: 0.1.0
        """
        logical, shard = self.codec.decode(value)
        return logical, None if shard == LEGACY_SHARD else shard

    def point_shards(self, item: _M) -> tuple[int, ...]:
        """The shards that may hold ``item`` (its primary key, and any attribute its shard is
        derived from, set), ascending; one shard when the strategy computes it."""
        view = self.item_key(item)
        return self._possible(view.key.value, self._shifted(self.strategy.point_shards(view)))

    def legacy_target_shard(self, item: _M) -> int:
        """The shard a legacy item moves to, derived from its primary key alone.

        A strategy that computes shards gives its own; a random or dynamic one
        ``md5(logical key + range key) % shard_count + first_shard``, so that every move of one
        item (a migration's, retried or run again, or a write of it) addresses one physical key.

        .. versionadded:: 0.1.0
        """
        if self.keeps_keys_unique:
            return self.write_shard(item)
        view = self.item_key(item)
        basis = view.key.value.encode("utf-8") + (view.range_bytes or b"")
        return md5_shard(basis, self.strategy.shard_count(view.key)) + self._offset

    def misplaced(self, item: _M, shard: int) -> bool:
        """Whether ``item``, stored in ``shard``, is not where this layout writes it now, so a
        job (``migrate reshard`` or ``compact``, or a legacy move) may move it at any time: a bare
        legacy key; under a strategy that computes shards, another shard than the computed one
        (an older count, ``previous_counts``); otherwise a shard above the key's current count.

        .. versionadded:: 0.1.0
        """
        if shard == LEGACY_SHARD:
            return True
        if self.keeps_keys_unique:
            view = self.item_key(item)
            if not all(view.is_set(name) for name in self.derived_attributes):
                return False  # an item built by hand without its user_id: nothing to compare
            return shard != self.write_shard(item)
        if shard == self.first_shard:  # every key has its first shard: no count to read
            return False
        return shard >= self.first_shard + self.shard_count(self.codec.check_logical(getattr(item, self.attribute)))

    def moving_out(self, key: str, shards: tuple[int, ...] | None = None) -> tuple[int, ...]:
        """The shards among ``shards`` (default :meth:`read_targets`) of ``key`` that a job may
        move items out of (:meth:`misplaced`): the bare legacy key, the shards of an older
        ``HashedShards`` layout (``previous_counts``; they may be shards of the current layout
        too), the shards above a random or dynamic key's current count. Empty for a key no job
        moves anything of. A merged query reads them first (see :mod:`pynamodb_sharding._fanout`).
        For a dynamic key grown again while a compaction moves its items down, the shards above
        the lowered count still in its history too (:meth:`DynamicShards.moving_floor`).

        .. versionadded:: 0.1.0
        """
        shards = self.read_targets(key) if shards is None else shards
        legacy = tuple(shard for shard in shards if shard == LEGACY_SHARD)
        if self.keeps_keys_unique:
            previous: tuple[int, ...] = tuple(getattr(self.strategy, "previous_counts", ()) or ())
            highest = max(previous, default=0) + self._offset
            return legacy + tuple(shard for shard in shards if shard != LEGACY_SHARD and shard <= highest)
        if all(shard in (LEGACY_SHARD, self.first_shard) for shard in shards):
            return legacy  # nothing above the first shard: no count to read
        # A DynamicShards key grown again while a compaction still moves its items down: the
        # shards above the lowered count, too (see DynamicShards.moving_floor).
        floor = getattr(self.strategy, "moving_floor", None)
        current = self.first_shard + (floor(self.key(key)) if callable(floor) else self.shard_count(key))
        return legacy + tuple(shard for shard in shards if shard >= current)

    def count_watch(self, key: str) -> ReadWatch | None:
        """For a merged read of ``key`` that starts now: what to call after each shard page it
        takes, to stop it before a compaction of a count lowered meanwhile could make it miss
        items (see :class:`~pynamodb_sharding._dynamic.CountWatch`); ``None`` for a strategy
        whose count no job lowers under a running read."""
        watch = getattr(self.strategy, "count_watch", None)
        return watch(self.key(key)) if callable(watch) else None

    def move_targets(self, item: _M, shard: int) -> tuple[int, ...]:
        """Where a move of ``item`` out of its misplaced ``shard`` puts it, best first.

        The same answer for a job and for the application, so both address one physical key:
        a bare legacy item goes to :meth:`legacy_target_shard`; under a strategy that computes
        shards, to its computed shard; otherwise every shard of the key's current count, from
        one derived from the stored physical key and range key (a move retried or run again
        picks the same shard; the next ones serve when another item of the same primary key,
        which random strategies allow, holds it).

        .. versionadded:: 0.1.0
        """
        if shard == LEGACY_SHARD:
            return (self.legacy_target_shard(item),)
        if self.keeps_keys_unique:
            return (self.write_shard(item),)
        view = self.item_key(item)
        return self.spread_from(view.key.value, self.codec.encode_unchecked(view.key.value, shard),
                                view.range_bytes or b"")

    def spread_from(self, logical: str, source_physical: str, range_bytes: bytes) -> tuple[int, ...]:
        """Every shard of ``logical``'s current count, starting at the one an md5 of the item's
        stored physical key and range key selects: where a random or dynamic strategy moves
        (or copies) the item, deterministically.

        .. versionadded:: 0.1.0
        """
        count = self.shard_count(logical)
        start = md5_shard(source_physical.encode("utf-8") + b"\x1f" + range_bytes, count) - 1
        return tuple((start + step) % count + self.first_shard for step in range(count))

    def point_targets(self, item: _M) -> tuple[int, ...]:
        """:meth:`point_shards`, preceded by the bare legacy key for ``legacy_unsharded`` models."""
        shards = self.point_shards(item)
        return (LEGACY_SHARD, *shards) if self.legacy_unsharded else shards

    def write_shard(self, item: _M) -> int:
        """The shard a new ``item`` goes to (drawn anew by random strategies)."""
        view = self.item_key(item)
        return self._in_use(item, view, self._chosen(self.strategy.write_shard(view))) + self._offset

    def write(self, item: _M, send: Callable[[int], _R]) -> _R:
        """Write a new ``item``: the strategy picks the shard and may retry ``send(shard)``."""
        view = self.item_key(item)
        offset = self._offset
        custom: Callable[[ItemKey, Callable[[int], _R]], _R] | None = getattr(self.strategy, "write", None)
        if custom is not None:
            return custom(view, lambda shard: send(self._in_use(item, view, self._chosen(shard)) + offset))
        return send(self._in_use(item, view, self._chosen(self.strategy.write_shard(view))) + offset)

    def _in_use(self, item: _M, view: ItemKey, shard: int) -> int:
        """``shard``, or one in use when the item's ``written_at`` says it was written.

        With ``Sharding(written_at=...)`` a query skips the shards first used after its range
        ends (plus the margin). An item whose write time is older than its shard's first use (a
        writer's clock behind, or a save retried long after the item was built) is put in a
        shard that existed then instead, so no query can skip it, whatever the clocks.
        """
        written = self.written_at
        hook = getattr(self.strategy, "shards_at", None)
        if written is None or hook is None or self.index_name is not None:
            return shard
        epoch = written.epoch(self.model.get_attributes()[written.attribute], getattr(item, written.attribute))
        if epoch is None:
            return shard
        limit: int = hook(view.key, epoch + written.margin, fresh=False)
        return shard if shard <= limit else (shard - 1) % limit + 1

    def read_shards_until(self, key: str, until: Any) -> tuple[int, ...]:
        """:meth:`read_targets` of ``key`` without the shards first used after ``until`` (a
        value of the ``written_at`` range key) plus the margin: those hold no item written by
        then (see :meth:`_in_use`). Every shard when nothing can be skipped.

        .. versionadded:: 0.1.0
        """
        written = self.written_at
        hook = getattr(self.strategy, "shards_at", None)
        if written is None or hook is None or self.index_name is not None:
            return self.read_targets(key)
        epoch = written.epoch(self.model.get_attributes()[written.attribute], until)
        if epoch is None:
            return self.read_targets(key)
        view = self.key(key)
        limit: int = hook(view, epoch + written.margin, fresh=True)  # one read of the count, as read_shards
        shards = self._possible(view.value, self._shifted(tuple(range(1, limit + 1))))
        return (LEGACY_SHARD, *shards) if self.legacy_unsharded else shards

    def _chosen(self, shard: object) -> int:
        """``shard``, a strategy's choice for a write, if reads of the key cover it.

        Raises:
            ShardKeyError: not an int in ``1..max_shards`` of the strategy: an item written
                there could never be read back; nothing is sent.
        """
        highest = self.strategy.max_shards
        if isinstance(shard, int) and not isinstance(shard, bool) and 1 <= shard <= highest:
            return shard
        strategy = type(self.strategy).__name__
        msg = (
            f"{self.codec.where}: the strategy {self.strategy!r} chose shard {shard!r} for a write, "
            f"but its shards are the ints 1..{highest} ({strategy}.max_shards = {highest}), so the "
            f"item could never be read back; nothing was sent. Fix {strategy}.write_shard (or write) "
            f"to return an int in 1..max_shards."
        )
        raise ShardKeyError(msg)

    @property
    def _offset(self) -> int:
        """What turns a strategy's shard (numbered from 1) into a stored shard number."""
        return self.first_shard - 1

    def _shifted(self, shards: tuple[int, ...]) -> tuple[int, ...]:
        offset = self._offset
        return tuple(shard + offset for shard in shards) if offset else shards

    @property
    def keeps_keys_unique(self) -> bool:
        """Whether one logical primary key always maps to one shard."""
        return bool(getattr(self.strategy, "keeps_keys_unique", False))

    @property
    def may_move_items(self) -> bool:
        """Whether an item of this model's table may be stored under two physical keys (for a
        moment: a move is a put and a delete; or left behind by a layout changed without its
        ``previous_counts``): any sharded table. Not the table of a model that shards only an
        index, whose keys are stored as they are."""
        return self.legacy_unsharded or not self.index_only

    @functools.cached_property
    def derived_attributes(self) -> tuple[str, ...]:
        """Attributes besides the primary key that an item's shard is computed from."""
        hook: Callable[[], tuple[str, ...]] | None = getattr(self.strategy, "derived_attributes", None)
        return tuple(hook()) if hook is not None else ()

    def companion_models(self) -> tuple[type[Model], ...]:
        """Models whose tables must exist beside this model's own."""
        hook: Callable[[], tuple[type[Model], ...]] | None = getattr(self.strategy, "companion_models", None)
        return tuple(hook()) if hook is not None else ()

    def validate(self) -> None:
        """Let the strategy check, at class definition, that the model fits it."""
        hook: Callable[[KeySpace, type[Model]], None] | None = getattr(self.strategy, "validate", None)
        if hook is not None:
            hook(self.space, self.model)

    def bind_companions(self) -> None:
        """Let the strategy's companion models follow the model's connection, at class
        definition (a sharded index's strategy: the model's own does it in :meth:`validate`)."""
        hook: Callable[[KeySpace, type[Model]], None] | None = getattr(self.strategy, "bind_companions", None)
        if hook is not None:
            hook(self.space, self.model)

    def _possible(self, key: str, shards: tuple[int, ...]) -> tuple[int, ...]:
        possible = tuple(shard for shard in shards if self.codec.fits(key, shard))
        if not possible and shards:
            self.codec.encode(key, shards[0])  # raises the error that names the limit
        return possible

    def check_writable(self, key: object) -> str:
        """Return ``key`` if every shard the strategy may ever write it to can hold it.

        Raises:
            ShardKeyError: the key is not a non-empty str, or its physical key in the
                strategy's highest shard (``max_shards``) would exceed DynamoDB's 2,048-byte
                limit, so some writes of it would fail and others could never be read back.
        """
        logical = self.codec.check_logical(key)
        highest = self.strategy.max_shards + self._offset
        if not self.codec.fits(logical, highest):
            size = len(self.codec.encode_unchecked(logical, highest).encode("utf-8"))
            budget = self.codec.max_logical_bytes(highest)
            msg = (
                f"{self.codec.where}: the key is {len(logical.encode('utf-8'))} bytes, and its "
                f"physical key in shard {highest} (the most shards {self.strategy!r} can use) would "
                f"be {size} bytes, over DynamoDB's 2,048-byte partition-key limit; keep logical keys "
                f"at most {budget} bytes (UTF-8) for this model. Nothing was written."
            )
            raise ShardKeyError(msg)
        return logical

    # -- keys ------------------------------------------------------------------------------

    def physical_key(self, key: str, shard: int) -> str:
        """The value stored in the table for ``key`` in ``shard``.

        Raises:
            ShardKeyError: the key is not a non-empty str, the shard is out of range, or the
                physical key would exceed DynamoDB's 2,048-byte limit.
        """
        return self.codec.encode(key, shard)

    def physical_keys(self, key: str) -> list[str]:
        """The physical keys of every shard :meth:`read_shards` covers."""
        return [self.codec.encode(key, shard) for shard in self.read_shards(key)]

    def decode(self, physical_key: str) -> tuple[str, int]:
        """Split a physical key read from the table into ``(logical_key, shard)``."""
        return self.codec.decode(physical_key)

    def logical_key(self, physical_key: str) -> str:
        """The logical key of a physical key."""
        return self.codec.decode(physical_key)[0]

    # -- resizing ----------------------------------------------------------------------------

    def _resizable(self, action: str) -> ResizableShardStrategy:
        strategy = self.strategy
        if not isinstance(strategy, ResizableShardStrategy):
            msg = (
                f"{self.space.name}: {type(strategy).__name__} has a fixed shard count that cannot "
                f"{action} at run time; change the count in the model's Sharding(...) declaration, "
                f"or use DynamicShards for counts that change with load."
            )
            raise FixedShardCountError(msg)
        return strategy

    def grow(self, key: str) -> int:
        """Raise the shard count of ``key`` now (resizable strategies); returns the new count.

        Raises:
            ShardingError: the strategy has a fixed count.
        """
        return self._resizable("grow").grow(self.key(key))

    def shrink(self, key: str, to: int) -> int:
        """Lower the write shard count of ``key``; reads keep covering every count in effect.

        Raises:
            ShardingError: the strategy has a fixed count, or ``to`` is out of range.
        """
        return self._resizable("shrink").shrink(self.key(key), to)

    def history(self, key: str) -> list[HistoryEntry]:
        """The shard-count changes of ``key``, oldest first (one entry at time 0 for a fixed count)."""
        view = self.key(key)
        if isinstance(self.strategy, ResizableShardStrategy):
            return self.strategy.history(view)
        return [HistoryEntry(at=0.0, count=self.strategy.shard_count(view))]

    def refresh(self, key: str) -> int:
        """Forget what this process cached about ``key`` and read its count again.

        A fixed strategy caches nothing: its count is returned.
        """
        view = self.key(key)
        if isinstance(self.strategy, ResizableShardStrategy):
            return self.strategy.refresh(view)
        return self.strategy.shard_count(view)

    def describe(self) -> str:
        """One line naming the strategy and its read cost."""
        hook: Callable[[], str] | None = getattr(self.strategy, "describe", None)
        return hook() if hook is not None else repr(self.strategy)


#: Each sharded index (the instance declared on a model class) and a weak reference to its
#: bound manager; filled by :func:`pynamodb_sharding._indexes.bind_sharded_indexes` when the
#: model is defined. The model class holds the manager (its bound indexes); a strong reference
#: here would keep the class alive through its index. Not kept on the index instance itself:
#: PynamoDB deep-copies an inherited index into each subclass, and would copy the manager too.
_INDEX_MANAGERS: weakref.WeakKeyDictionary[Any, weakref.ref[ShardManager[Any]]] = weakref.WeakKeyDictionary()


def register_index_manager(index: Any, manager: ShardManager[Any]) -> None:
    """Record the bound manager of a sharded index instance (``AuditLog.by_day.shards``)."""
    _INDEX_MANAGERS[index] = weakref.ref(manager)


def index_manager(index: GlobalSecondaryIndex[Any]) -> ShardManager[Any]:
    """The bound shard manager of a sharded index (``AuditLog.by_day.shards``).

    Raises:
        ShardingDefinitionError: the index is not declared on a ``ShardedModel``.
    """
    held = _INDEX_MANAGERS.get(index)
    manager = held() if held is not None else None
    if manager is None:
        name = index.Meta.index_name
        msg = (
            f"{type(index).__name__}({name!r}): a sharded index works on a ShardedModel only; "
            f"declare it on a ShardedModel subclass (e.g. `{name} = {type(index).__name__}()`)."
        )
        raise ShardingDefinitionError(msg)
    return manager


def is_global_index_class(owner: object) -> bool:
    """Whether ``owner`` is a PynamoDB ``GlobalSecondaryIndex`` subclass."""
    from pynamodb.indexes import GlobalSecondaryIndex

    return isinstance(owner, type) and issubclass(owner, GlobalSecondaryIndex)


def _is_local_index_class(owner: object) -> bool:
    from pynamodb.indexes import LocalSecondaryIndex

    return isinstance(owner, type) and issubclass(owner, LocalSecondaryIndex)


def index_hash_attribute_name(model: type[Any], index_name: str) -> str:
    """The Python name, on ``model``, of the hash-key attribute of its index ``index_name``."""
    index = indexes(model)[index_name]
    stored = index_hash_attribute(index).attr_name
    for name, attribute in model.get_attributes().items():
        if attribute.attr_name == stored:
            return str(name)
    msg = (
        f"{model.__name__}.{index_name}: the index's hash key {stored!r} is not an attribute of "
        f"{model.__name__}; declare it on the model too."
    )
    raise ShardingDefinitionError(msg)


#: The class attribute holding a sharded model class's own manager, registered when the class
#: is defined (:func:`register_model`; looked up in its own ``__dict__``: a subclass has one of
#: its own).
_MANAGER = "__pynamodb_sharding_manager__"


def register_model(model: type[Any], name: str) -> ShardManager[Any]:
    """Bind ``model`` to its ``Sharding`` descriptor named ``name`` and register its manager:
    what :func:`shard_manager` and :func:`is_sharded` answer from then on."""
    descriptor = _raw_class_attribute(model, name)
    assert isinstance(descriptor, Sharding)
    manager = descriptor.bind(model, fresh=True)
    type.__setattr__(model, _MANAGER, manager)  # read on every item built: a dict lookup
    return manager


def is_sharded(model: type[Any]) -> bool:
    """Whether ``model`` is a sharded model class (a ``ShardedModel`` subclass with a table)."""
    manager = vars(model).get(_MANAGER) if isinstance(model, type) else None
    # The manager registered for this very class (not one a copy of another's namespace took).
    return manager is not None and manager.model is model


def shard_manager(model: type[_M]) -> ShardManager[_M]:
    """The :class:`ShardManager` of a sharded model class, whatever its descriptor is named.

    Raises:
        ShardingDefinitionError: ``model`` has no ``Sharding`` descriptor.

    .. versionadded:: 0.1.0
    """
    manager: ShardManager[_M] | None = vars(model).get(_MANAGER) if isinstance(model, type) else None
    if manager is None:
        msg = (
            f"{getattr(model, '__name__', model)!r} has no Sharding descriptor; pass a ShardedModel "
            f"subclass that declares e.g. `shards = Sharding(RandomShards(10))`."
        )
        raise ShardingDefinitionError(msg)
    return manager


def _raw_class_attribute(cls: type[Any], name: str) -> Any:
    """The class attribute ``name`` from the MRO, without calling its ``__get__``."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def index_owner(index: Any) -> Any:
    """The model a sharded index instance is declared on (refused for an index on none)."""
    model = index_model(index)
    if model is None:
        msg = (f"{type(index).__name__}: this index is not declared on a model; query it through "
               f"the model's index attribute (Model.by_day.aquery).")
        raise ShardingDefinitionError(msg)
    return model


def _index_aquery(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """``Model.aquery`` of this sharded index (``AuditLog.by_day.aquery("20160226")``).

    .. versionadded:: 0.2.0
    """
    return index_owner(self).aquery(hash_key, *args, index_name=self.Meta.index_name, **kwargs)


async def _index_acount(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> int:
    """``Model.acount`` of this sharded index.

    .. versionadded:: 0.2.0
    """
    count: int = await index_owner(self).acount(hash_key, *args, index_name=self.Meta.index_name, **kwargs)
    return count


def _index_ascan(self: Any, filter_condition: Any = None, segment: int | None = None,
                 total_segments: int | None = None, limit: int | None = None, last_evaluated_key: Any = None,
                 page_size: int | None = None, consistent_read: bool | None = None, rate_limit: float | None = None,
                 attributes_to_get: Any = None) -> Any:
    """``Model.ascan`` of this sharded index (the arguments of PynamoDB's ``Index.scan``).

    .. versionadded:: 0.2.0
    """
    return index_owner(self).ascan(filter_condition, segment, total_segments, limit, last_evaluated_key, page_size,
                                   consistent_read, self.Meta.index_name, rate_limit, attributes_to_get)
