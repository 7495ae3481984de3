"""``ShardedModel``: the PynamoDB ``Model`` subclass whose hash key is write-sharded.

User code only ever sees the logical key. Every request is rewritten to the physical key
(``logical + separator + shard``), every item read back is decoded and remembers its shard,
so saving, updating, deleting or refreshing it again hits the same physical key.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pynamodb.attributes import Attribute, UnicodeAttribute, UTCDateTimeAttribute
from pynamodb.connection.table import TableConnection
from pynamodb.constants import CAMEL_COUNT, ITEM, ITEMS
from pynamodb.exceptions import (
    DeleteError,
    PutError,
    PynamoDBException,
    TransactWriteError,
    UpdateError,
    VerboseClientError,
)
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import MetaModel, Model
from pynamodb.pagination import ResultIterator

from pynamodb_sharding import attempts, partitioned, regions
from pynamodb_sharding._host import (
    botocore_client,
    bump_local_version,
    discriminator_attribute,
    guard_keys,
    index_range_attribute,
    indexes,
    keep_unmodelled_fields,
    save_arguments,
    version_condition,
)
from pynamodb_sharding.batch import ShardedBatchWrite
from pynamodb_sharding.conditions import Usage, check_item_condition, rewrite_condition
from pynamodb_sharding.descriptor import Sharding, ShardManager, shard_manager
from pynamodb_sharding.exceptions import (
    DerivedAttributeUpdateError,
    LogicalKeyError,
    PartialItemError,
    PeriodRangeError,
    ShardingDefinitionError,
    ShardMoveError,
)
from pynamodb_sharding.indexes import (
    ShardedIndex,
    add_shard_attributes,
    check_index_actions,
    declares_sharded_index,
    sharded_index,
    sharded_indexes,
    write_growing_indexes,
)
from pynamodb_sharding.keys import LEGACY_SHARD, KeyCodec, describe_shard
from pynamodb_sharding.periods import TimePartitioned
from pynamodb_sharding.point_reads import (
    leaves_out_keys,
    locate,
    read_physical,
    with_key_attributes,
    without_stale_bare_copies,
)
from pynamodb_sharding.strategies import UnshardedKeys

if TYPE_CHECKING:
    from pynamodb_sharding.fanout import MergedResultIterator

__all__ = ["ShardedModel", "with_companions"]

_T = TypeVar("_T", bound="ShardedModel")

#: Where the metaclass puts the one-shard table layout of a model that shards only an index.
TABLE_KEYS = "_table_keys"


class ShardedMetaModel(MetaModel):
    """Validates the sharding declaration when a ``ShardedModel`` subclass is defined."""

    def __init__(self, name: str, bases: Any, namespace: Any, discriminator: Any = None) -> None:
        super().__init__(name, bases, namespace, discriminator)
        cls: Any = self
        # The one-shard layout given to a model that shards only an index is not a declaration.
        declared = sorted({attr for klass in cls.__mro__ for attr, value in vars(klass).items()
                           if isinstance(value, Sharding) and not isinstance(value.strategy, UnshardedKeys)})
        if len(declared) > 1:
            msg = (
                f"{name}: has {len(declared)} Sharding descriptors ({', '.join(declared)}); a model "
                f"shards one hash key: keep one, overriding the inherited one under the same name."
            )
            raise ShardingDefinitionError(msg)
        cls._sharding_attr = declared[0] if declared else None
        cls._index_only = False
        table_name = getattr(getattr(cls, "Meta", None), "table_name", None)
        cls._time_partitioned = table_name if isinstance(table_name, TimePartitioned) else None
        if cls._hash_keyname is None:
            return  # an abstract base without a hash key: nothing to shard yet
        if not declared and not getattr(getattr(cls, "Meta", None), "table_name", None):
            return  # an abstract base (no table): its concrete subclasses declare the Sharding
        if not declared:
            if not declares_sharded_index(cls):
                msg = (
                    f"{name}: a ShardedModel needs a Sharding descriptor; add e.g. "
                    f"`shards = Sharding(RandomShards(10))` to the class to shard its hash key, or to "
                    f"one of its GlobalSecondaryIndex classes to shard only that index, or derive "
                    f"from Model (a base class shared by sharded models has no Meta.table_name)."
                )
                raise ShardingDefinitionError(msg)
            # Only an index is sharded: the table gets one shard stored as the logical key itself,
            # so every request of the table addresses what a plain Model's would.
            layout = Sharding(UnshardedKeys())
            layout.__set_name__(cls, TABLE_KEYS)
            setattr(cls, TABLE_KEYS, layout)
            declared = [TABLE_KEYS]
            cls._sharding_attr = TABLE_KEYS
            cls._index_only = True
        attribute = cls.get_attributes()[cls._hash_keyname]
        if not isinstance(attribute, UnicodeAttribute):
            if cls._index_only:
                msg = (
                    f"{name}.{cls._hash_keyname}: the hash key is a {type(attribute).__name__}; a "
                    f"ShardedModel that shards only an index keeps the table's keys as they are, but "
                    f"needs them to be strings (UnicodeAttribute) in this release; declare the index "
                    f"on a model whose hash key is a UnicodeAttribute."
                )
                raise ShardingDefinitionError(msg)
            msg = (
                f"{name}.{cls._hash_keyname}: the hash key is a {type(attribute).__name__}, but "
                f"sharding appends a suffix to it; declare it as a UnicodeAttribute (string keys)."
            )
            raise ShardingDefinitionError(msg)
        sharding = next(vars(klass)[declared[0]] for klass in cls.__mro__ if declared[0] in vars(klass))
        if sharding.layout != "suffixed":
            msg = (
                f"{name}.{declared[0]}: layout={sharding.layout!r} is for the Sharding of a "
                f"GlobalSecondaryIndex; a table's hash key is always stored suffixed: remove layout."
            )
            raise ShardingDefinitionError(msg)
        regions.check_declaration(cls)
        manager = shard_manager(cls)  # binds the class: its key space and its one codec
        manager.validate()
        if manager.written_at is not None:
            _check_written_at(cls, manager)
        cls._shard_codec = manager.codec
        cls._shard_basis_names = (
            cls._hash_keyname, *([cls._range_keyname] if cls._range_keyname else []),
            *manager.derived_attributes,
        )
        cls._sharded_indexes = sharded_indexes(cls)
        if cls._time_partitioned is not None:
            partitioned.check_declaration(cls)


def _check_written_at(cls: Any, manager: ShardManager[Any]) -> None:
    """Refuse a ``Sharding(written_at=...)`` that is not the range key, not a time, or on a
    strategy whose shards do not change over time (nothing could ever be skipped)."""
    written = manager.written_at
    assert written is not None
    where = f"{cls.__name__}.{written.attribute}"
    attribute = cls.get_attributes().get(written.attribute)
    if attribute is None or written.attribute != cls._range_keyname:
        msg = (
            f"{where}: Sharding(written_at={written.attribute!r}) must name {cls.__name__}'s range key "
            f"({cls._range_keyname!r}), the attribute a query's key condition limits."
        )
        raise ShardingDefinitionError(msg)
    if attribute.attr_type != "N" and not isinstance(attribute, UTCDateTimeAttribute):
        msg = (
            f"{where}: written_at must be a NumberAttribute of epoch seconds (or milliseconds, "
            f"written_at_unit='ms') or a UTCDateTimeAttribute, not a {type(attribute).__name__}."
        )
        raise ShardingDefinitionError(msg)
    if getattr(manager.strategy, "shards_at", None) is None:
        msg = (
            f"{where}: written_at lets queries skip shards added after their range ends, but "
            f"{manager.strategy!r} never adds shards over time; use DynamicShards, or drop written_at."
        )
        raise ShardingDefinitionError(msg)


#: How often a write follows an item that jobs keep moving before it gives up.
_MAX_RELOCATIONS = 3

_E = TypeVar("_E", bound=PynamoDBException)
_R = TypeVar("_R")


class _TargetTaken(Exception):
    """A move's target shard holds another item of the same primary key (random strategies)."""


def condition_failed(error: type[_E], action: str, operation: str, table: str, failed: TransactWriteError) -> _E:
    """PynamoDB's own error for a condition the library sent inside a transaction:
    ``PutError("Failed to put item: An error occurred (ConditionalCheckFailedException) on request
    (...) on table (...) when calling the PutItem operation: The conditional request failed")``,
    with the same ``cause_response_code``, as applications match on either."""
    reasons = failed.cancellation_reasons or []
    message = next((reason.message for reason in reasons if reason is not None and reason.message), None)
    original = getattr(failed.cause, "__cause__", None)
    headers = getattr(original, "response", {}).get("ResponseMetadata", {}).get("HTTPHeaders", {})
    cause = VerboseClientError(
        {"Error": {"Code": "ConditionalCheckFailedException",
                   "Message": message or "The conditional request failed"}},
        operation,
        {"request_id": headers.get("x-amzn-requestid", ""), "table_name": table},
    )
    return error(f"Failed to {action}: {cause}", cause)


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

    _sharding_attr: ClassVar[str | None] = None
    #: The model shards only global secondary indexes: its table keys are stored as they are
    #: (a one-shard layout whose physical key is the logical key), set when the class is defined.
    _index_only: ClassVar[bool] = False
    #: What ``Sharding.__set_name__`` checks (without importing this module).
    _is_sharded_model: ClassVar[bool] = True
    #: The class's ``ShardManager.codec``, kept here for per-item decoding; set when the class is defined.
    _shard_codec: ClassVar[KeyCodec | None] = None
    #: The shard this item was last written to or read from; ``None`` until then.
    _physical_shard: int | None = None
    #: What the shard depended on when ``_physical_shard`` was set (see :meth:`_shard_basis`):
    #: the shard is this item's only while that is unchanged.
    _pinned_basis: tuple[Any, ...] | None = None
    #: The attributes an item's shard depends on: hash key, range key, then those the
    #: strategy derives the shard from; set when the class is defined.
    _shard_basis_names: ClassVar[tuple[str, ...]] = ()
    #: The model's sharded global secondary indexes by name (see :mod:`pynamodb_sharding.indexes`).
    _sharded_indexes: ClassVar[dict[str, ShardedIndex]] = {}
    #: Index name -> (logical value, index shard) this item was read from or written to.
    _index_pins: dict[str, tuple[str, int]] | None = None
    #: Read with a projection that left out a key attribute (fetched anyway, for decoding and
    #: merging): a full put of it is refused, as PynamoDB refuses it (see PartialItemError).
    _partial: bool = False
    #: ``Meta.table_name`` when it is a ``TimePartitioned``: the model has one table per period,
    #: and its requests run as its period models' (see :mod:`pynamodb_sharding.partitioned`).
    _time_partitioned: ClassVar[TimePartitioned | None] = None
    #: On a period model: the declaration of the model it serves one period of, and the period.
    _partitioned_by: ClassVar[TimePartitioned | None] = None
    _period: ClassVar[str | None] = None

    # -- the sharding declaration -------------------------------------------------------------

    @classmethod
    def _shard_manager(cls: type[_T]) -> ShardManager[_T]:
        return shard_manager(cls)

    @classmethod
    def companion_models(cls) -> tuple[type[Model], ...]:
        """Models whose tables must exist beside this one (e.g. the shard-count metadata)."""
        if cls._sharding_attr is None:
            return ()
        companions = shard_manager(cls).companion_models()
        for index in cls._sharded_indexes.values():
            companions += tuple(model for model in index.manager.companion_models() if model not in companions)
        return companions

    def logical_hash_key(self) -> str:
        """The logical hash key of this item, validated."""
        return self._shard_manager().codec.check_logical(getattr(self, self._hash_keyname or ""))

    def _physical_hash_key(self, shard: int) -> str:
        return self._shard_manager().codec.encode(getattr(self, self._hash_keyname or ""), shard)

    @classmethod
    def _key_item(cls: type[_T], hash_key: Any, range_key: Any = None) -> _T:
        """An unsaved instance holding only the primary key (what strategies hash)."""
        values: dict[str, Any] = {}
        if cls._hash_keyname is not None:
            values[cls._hash_keyname] = hash_key
        if cls._range_keyname is not None and range_key is not None:
            values[cls._range_keyname] = range_key
        return cls(_user_instantiated=False, **values)

    @classmethod
    def _hash_attr(cls) -> Attribute[Any]:
        return cls.get_attributes()[cls._hash_keyname or ""]

    @classmethod
    def _serialize_range(cls, value: Any) -> Any:
        """The serialized range key value, ``None`` for ``None`` or a model without one."""
        attr = cls._range_attr()
        return attr.serialize(value) if attr is not None and value is not None else None

    @classmethod
    def _key_names(cls) -> list[str]:
        """The stored names of the key attributes (what decoding an item needs)."""
        return [attr.attr_name for attr in (cls._hash_attr(), cls._range_attr()) if attr is not None]

    @classmethod
    def _range_attr(cls) -> Attribute[Any] | None:
        return cls.get_attributes()[cls._range_keyname] if cls._range_keyname else None

    @classmethod
    def period_model(cls: type[_T], period: str) -> type[_T]:
        """The model of one period's table of a time-partitioned model (``"201602"``).

        A subclass of this model whose ``Meta.table_name`` is that period's table; every
        request of it goes to that table. Made once per period and reused.

        .. versionadded:: 0.4.0
        """
        if cls._time_partitioned is None:
            msg = (
                f"{cls.__name__}.period_model: {cls.__name__} is not time-partitioned; declare "
                f"Meta.table_name = TimePartitioned('name.{{period}}', attribute=..., period=...)."
            )
            raise ShardingDefinitionError(msg)
        return partitioned.period_model(cls, period)

    @classmethod
    def _get_connection(cls) -> TableConnection:
        if cls._time_partitioned is not None:
            msg = (
                f"{cls.__name__}: Meta.table_name is {str(cls.Meta.table_name)!r}, one table per period, so "
                f"this request needs a period: use {cls.__name__}.period_model(period) for it."
            )
            raise ShardingDefinitionError(msg)
        # Every request of this model goes through this connection's client: make the client
        # refuse a key without a shard suffix (see _host: fails closed if PynamoDB changes).
        connection = super()._get_connection()
        route = regions.current_route()
        if route is not None:  # a write sent to another region (Meta.write_region, item_home)
            connection = regions.routed_connection(cls, connection, route)
        if cls._shard_codec is not None and not cls._index_only:  # bare keys are its keys
            guard_keys(cls, connection)
        elif cls._shard_codec is not None:
            # No key guard, but throttles are classified from the reasons older botocore drops.
            keep_unmodelled_fields(connection.connection.client)
        return connection

    # -- the shard an item lives in ------------------------------------------------------------

    def _shard_basis(self) -> tuple[Any, ...]:
        """The values an item's shard depends on: hash key, range key, derived attributes.

        The first two entries are the primary key: while they are unchanged, the item is the
        same item (a change of a derived attribute moves it); a changed primary key makes a new
        item. Python values are kept as they are (cheap on every item read back) and compared
        by what DynamoDB would store when they differ (:meth:`_same_basis`).
        """
        return tuple(map(self.attribute_values.get, self._shard_basis_names))

    def _same_basis(self, pinned: tuple[Any, ...], current: tuple[Any, ...], *, key_only: bool = False) -> bool:
        """Whether two bases would be stored identically (only the primary key if ``key_only``)."""
        names = self._shard_basis_names
        if key_only:
            size = 2 if self._range_keyname else 1
            names, pinned, current = names[:size], pinned[:size], current[:size]
        if pinned == current:
            return True
        attributes = self.get_attributes()
        for name, old, new in zip(names, pinned, current, strict=True):
            if old is new or old == new:
                continue
            if old is None or new is None:
                return False
            try:  # e.g. a naive and an aware UTC datetime: different objects, one stored value
                if attributes[name].serialize(old) != attributes[name].serialize(new):
                    return False
            except (TypeError, ValueError, AttributeError):
                return False
        return True

    def _pin_shard(self, shard: int) -> int:
        """Record that this item, as it is now, lives in ``shard``."""
        self._physical_shard = shard
        self._pinned_basis = self._shard_basis()
        return shard

    def _forget_shard(self) -> None:
        self._physical_shard = None
        self._pinned_basis = None

    def _known_shard(self) -> int | None:
        """The shard this item lives in, or ``None`` when unknown or no longer valid.

        A shard read back or written is valid only while every attribute it depends on is
        unchanged: an item whose key was changed is a new item and goes where its strategy
        says, never to the shard the old key was read from.
        """
        shard, pinned = self._physical_shard, self._pinned_basis
        if shard is None or pinned is None:
            return None
        return shard if self._same_basis(pinned, self._shard_basis()) else None

    def _moved_from(self) -> int | None:
        """The shard of the stored copy when only attributes the shard is derived from changed.

        The primary key is unchanged, so this is the same item, stored in a shard its new
        values no longer select: saving it moves it.
        """
        shard, pinned = self._physical_shard, self._pinned_basis
        if shard is None or pinned is None:
            return None
        current = self._shard_basis()
        if self._same_basis(pinned, current, key_only=True) and not self._same_basis(pinned, current):
            return shard
        return None

    def _stored_shard_of_key(self) -> int | None:
        """Where a new instance's primary key is already stored, for strategies that keep keys
        unique but may have stored it under an older layout (``HashedShards(previous_counts=)``).

        ``None`` when the strategy computes one shard for the key (no read is needed), when it
        does not keep keys unique, or when the key is stored nowhere.
        """
        manager = self._shard_manager()
        if not manager.keeps_keys_unique:
            if manager.legacy_unsharded:  # the key may still be stored bare: replace that item
                stored, _ = self._locate((LEGACY_SHARD,))
                return stored
            return None
        candidates = self._candidate_shards()
        if len(candidates) < 2:
            return None
        stored, _ = self._locate(candidates)
        return stored

    def _new_item_shard(self) -> int:
        """Pin and return the shard a write of this item, whose shard is unknown, goes to."""
        if self._moved_from() is not None:
            raise self._move_refused("batch-written, written in a transaction or serialized")
        manager = self._shard_manager()
        manager.check_writable(getattr(self, self._hash_keyname or ""))
        stored = self._stored_shard_of_key()
        if stored == LEGACY_SHARD:  # shadow the bare copy where a move puts it (see serialize)
            return self._pin_shard(manager.legacy_target_shard(self))
        if stored is not None:
            if self._derives_from_other_attributes():
                target = manager.write_shard(self)
                if target != stored:
                    derived = ", ".join(manager.derived_attributes)
                    cls = type(self)
                    msg = (
                        f"{cls.__name__}.{cls._hash_keyname}: the item {self.logical_hash_key()!r} "
                        f"with range key {self._range_value()!r} is stored in shard {stored}, but this "
                        f"instance's {derived} selects shard {target}, so a batch or transactional "
                        f"write (or serializing it) would leave two copies of one key; nothing was "
                        f"sent. Call save() on it, which moves the stored item in one transaction."
                    )
                    raise ShardMoveError(msg)
            # Under an older layout a job may move it: a batch sends it through save(), which
            # moves it; a transaction's put requires it to be still there (see _get_save_args).
            return self._pin_shard(stored)
        return self._pin_shard(manager.write_shard(self))

    # -- encoding ------------------------------------------------------------------------------

    def _adopt_physical_key(self, raw: Mapping[str, Any] | None = None) -> None:
        """Replace the physical hash key just deserialized (from ``raw``) by its logical key;
        keep the shard."""
        codec = self._shard_codec
        if codec is None:
            self._shard_manager()  # raises the error that names the missing declaration
            raise AssertionError("unreachable")
        values = self.attribute_values
        if self._sharded_indexes:
            for index in self._sharded_indexes.values():
                index.adopt(self, raw)
        physical = values.get(codec.attribute)
        if physical is None:  # projected away
            return
        values[codec.attribute], self._physical_shard = codec.decode(physical)
        # _pin_shard inlined: this runs for every item read back.
        self._pinned_basis = tuple(map(values.get, self._shard_basis_names))

    def _pin_index_shard(self, index_name: str, value: str, shard: int) -> None:
        if self._index_pins is None:
            self._index_pins = {}
        self._index_pins[index_name] = (value, shard)

    def _forget_index_shard(self, index_name: str) -> None:
        if self._index_pins is not None:
            self._index_pins.pop(index_name, None)

    def _store_index_values(self, data: dict[str, dict[str, Any]]) -> None:
        """Put each sharded index's entry (physical value, or shard attribute) in serialized ``data``."""
        for index in self._sharded_indexes.values():
            index.store(self, data)

    @classmethod
    def _instantiate(cls: type[_T], attribute_values: dict[str, Any]) -> _T:
        instance = super()._instantiate(attribute_values)
        instance._adopt_physical_key(attribute_values)
        return instance

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        super().deserialize(attribute_values)
        self._adopt_physical_key(attribute_values)
        self._partial = False  # refresh() and update() read the whole item

    def _marked_partial(self: _T) -> _T:
        self._partial = True
        return self

    def _refuse_partial_put(self) -> None:
        cls = type(self)
        msg = (
            f"{cls.__name__}: this item was read with attributes_to_get leaving out its key, so it "
            f"holds only the attributes fetched; a put would replace the stored item without the "
            f"others (PynamoDB refuses it too: its key is missing). Nothing was sent. Call "
            f"item.refresh() first, or change it with item.update(actions=[...])."
        )
        raise PartialItemError(msg)

    def serialize(self, null_check: bool = True) -> dict[str, dict[str, Any]]:
        """The item as DynamoDB stores it: the hash key is the physical key.

        A new item is assigned its write shard here (and keeps it), which is what batch and
        transactional writes of new items use.
        """
        if null_check and self._partial:
            self._refuse_partial_put()
        data = super().serialize(null_check=null_check)
        shard = self._known_shard()
        if shard == LEGACY_SHARD:
            # A batch or transactional put of an item read from its bare key: a migration may
            # have moved it meanwhile, so put it where a move puts it; the bare copy it shadows
            # is deleted by the migration, and reads never return it (the sharded copy wins).
            shard = self._pin_shard(self._shard_manager().legacy_target_shard(self))
        elif shard is None:
            shard = self._new_item_shard()
        attribute = self._hash_attr()
        data[attribute.attr_name] = {"S": self._physical_hash_key(shard)}
        if self._sharded_indexes:
            self._store_index_values(data)
        return data

    @classmethod
    def _serialize_keys(cls, hash_key: Any, range_key: Any = None) -> tuple[Any, Any]:
        if cls._index_only:  # the table's keys are stored as they are: PynamoDB's are right
            keys: tuple[Any, Any] = super()._serialize_keys(hash_key, range_key)
            return keys
        msg = (
            f"{cls.__name__}.{cls._hash_keyname}: a logical key cannot be sent to DynamoDB without "
            f"choosing a shard; use {cls.__name__}'s own get/query/count/batch_get, or "
            f"{cls.__name__}.shards.physical_key(key, shard) for raw requests."
        )
        raise LogicalKeyError(msg)

    def _get_serialized_keys(self) -> tuple[Any, Any]:
        return self._get_hash_range_key_serialized_values()

    def _get_hash_range_key_serialized_values(self) -> tuple[Any, Any]:
        shard = self._locate_for_write()
        range_value = None
        if self._range_keyname is not None:
            value = getattr(self, self._range_keyname)
            if value is not None:
                range_value = self._serialize_range(value)
        return self._physical_hash_key(shard), range_value

    # -- locating an item whose shard is unknown -----------------------------------------------

    def _candidate_shards(self) -> tuple[int, ...]:
        """The shards that may hold this item's primary key, its shard being unknown.

        Where the shard is derived from attributes outside the primary key
        (``HashedShards(attributes=("user_id",))``), an instance built by hand may carry another
        ``user_id`` than the stored item, so every shard of the key is a candidate, as in a
        ``get`` by key: the key is what names the item, as in PynamoDB.
        """
        manager = self._shard_manager()
        if self._derives_from_other_attributes():
            return manager.read_targets(self.logical_hash_key())
        return manager.point_targets(self)

    @classmethod
    def _derives_from_other_attributes(cls) -> bool:
        """Whether the strategy computes shards from attributes outside the primary key."""
        keys = {cls._hash_keyname, cls._range_keyname}
        return any(name not in keys for name in cls._shard_manager().derived_attributes)

    def _derived_attributes_set(self) -> bool:
        values = self.attribute_values
        return all(values.get(name) is not None for name in self._shard_manager().derived_attributes)

    def _locate(
        self,
        candidates: Sequence[int],
        *,
        consistent_read: bool = True,
        attributes_to_get: Sequence[str] | None = None,
    ) -> tuple[int | None, dict[str, Any] | None]:
        return locate(self, candidates, consistent_read=consistent_read, attributes_to_get=attributes_to_get)

    def _range_value(self) -> Any:
        return getattr(self, self._range_keyname) if self._range_keyname else None

    def _locate_for_write(self) -> int:
        """The shard an update/delete/refresh of this item addresses."""
        known = self._known_shard()
        if known is not None:
            return known
        if self._moved_from() is not None:
            raise self._move_refused("updated, deleted or refreshed")
        candidates = self._candidate_shards()
        if len(candidates) == 1:
            return self._pin_shard(candidates[0])
        shard, _ = self._locate(candidates)
        if shard is None:
            # Not stored anywhere: the request acts on a missing item, exactly as PynamoDB's
            # would (an update creates it, a delete is a no-op, a condition sees no item).
            manager = self._shard_manager()
            manager.check_writable(self.logical_hash_key())
            if self._derived_attributes_set():
                shard = manager.write_shard(self)
            else:  # no user_id to compute a shard from: every candidate is equally empty
                shard = next(candidate for candidate in candidates if candidate != LEGACY_SHARD)
        return self._pin_shard(shard)

    def _move_refused(self, action: str) -> ShardMoveError:
        cls = type(self)
        derived = ", ".join(self._shard_manager().derived_attributes)
        read_from = "its shard" if self._physical_shard is None else describe_shard(self._physical_shard)
        msg = (
            f"{cls.__name__}.{cls._hash_keyname}: this item was read from {read_from}, "
            f"but its {derived} changed since, which selects another shard, so it cannot be {action} "
            f"where it is stored; call save() on it, which moves it to its new shard in one transaction."
        )
        return ShardMoveError(msg)

    # -- writes --------------------------------------------------------------------------------

    def save(
        self, condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> dict[str, Any]:
        """Save this item: a new item goes where its strategy says, a known one stays put.

        A sharded index whose count grows (``DynamicShards``) and that throttles the save
        grows for the item's index value, and the save is sent again (see
        :func:`pynamodb_sharding.indexes.write_growing_indexes`).

        An item whose primary key changed since it was read is a new item (the stored one
        stays, as in PynamoDB). An item whose shard is derived from attributes that changed
        since it was read is moved: the new copy is put and the old one deleted in one
        transaction. A new instance whose key :class:`HashedShards` finds stored under an older
        layout (``previous_counts``) replaces it where it is stored. A key is never stored twice.

        A failed save of a new item keeps the shard it was sent to when the write may have
        been applied (a timeout, a lost connection, a 5xx), so retrying ``save()`` on the
        same instance addresses the same physical key.

        With ``Meta.write_region`` or ``Meta.item_home`` (global tables) the save is sent to
        the region they name (see :mod:`pynamodb_sharding.regions`).
        """
        with regions.routed(self._write_route("save", condition, add_version_condition)):
            if self._time_partitioned is not None:
                return partitioned.write(
                    self, lambda: self.save(condition, add_version_condition=add_version_condition),
                )
            if self._sharded_indexes:
                return write_growing_indexes(self, lambda: self._save_item(condition, add_version_condition))
            return self._save_item(condition, add_version_condition)

    def _write_route(
        self, action: regions.WriteAction, condition: Condition | None, add_version_condition: bool,
    ) -> regions.Route | None:
        """The region a write of this item goes to (``None``: the model's own)."""
        conditional = condition is not None or (add_version_condition and self._version_attribute_name is not None)
        new_item = self._known_shard() is None and self._moved_from() is None
        return regions.route_of(self, action, conditional=conditional, new_item=new_item)

    def _save_item(
        self, condition: Condition | None, add_version_condition: bool, *, relocations: int = 0,
    ) -> dict[str, Any]:
        check_item_condition(type(self), condition)  # before the strategy reads anything
        manager = self._shard_manager()
        known = self._known_shard()
        if known is not None:
            if manager.misplaced(self, known):  # a job may move it: the save moves it first
                return self._save_misplaced(known, condition, add_version_condition, relocations)
            return super().save(condition, add_version_condition=add_version_condition)
        manager.check_writable(getattr(self, self._hash_keyname or ""))  # before any I/O
        cls = type(self)
        moved_from = self._moved_from()
        if moved_from is not None:
            target = manager.write_shard(self)
            if target != moved_from:
                return self._save_moving(moved_from, target, condition, add_version_condition)
            self._pin_shard(moved_from)
            return super().save(condition, add_version_condition=add_version_condition)
        self._forget_shard()
        stored = self._stored_shard_of_key()
        if stored is not None:  # overwrite by key where the key is stored, never a second copy
            self._pin_shard(stored)
            if manager.misplaced(self, stored):  # an older layout, or this item's user_id moved it
                return self._save_misplaced(stored, condition, add_version_condition, relocations)
            return super().save(condition, add_version_condition=add_version_condition)
        self._forget_shard()

        attempts.watch(botocore_client(cls))
        ambiguous = False  # some attempt of this save may have been applied

        def send(shard: int) -> dict[str, Any]:
            nonlocal ambiguous
            self._pin_shard(shard)
            with attempts.tracking() as sent:
                try:
                    return Model.save(self, condition, add_version_condition=add_version_condition)
                except BaseException:
                    # Forget the shard only when nothing can have been written; after a lost
                    # reply every retry (the strategy's, then the application's) must address
                    # the same physical key, as PynamoDB's would.
                    ambiguous = ambiguous or sent.may_have_applied
                    if not ambiguous:
                        self._forget_shard()
                    raise

        return manager.write(self, send)

    def _save_misplaced(
        self, stored: int, condition: Condition | None, add_version_condition: bool, relocations: int,
    ) -> dict[str, Any]:
        """Save an item stored where the layout no longer writes it (a bare legacy key, an older
        count): move it where a job would, in one transaction (put the new copy, delete the
        stored one if it is still there and meets ``condition`` and the version check).

        When a job moved the item first (the transaction finds the stored copy gone), the save
        goes to the item where it is now, with the user's change; when the item was deleted
        meanwhile, the save puts it where the layout writes it, as PynamoDB recreates a deleted
        item; when ``condition`` failed on the stored copy, PynamoDB's ``PutError`` is raised.
        """
        manager = self._shard_manager()
        targets = manager.move_targets(self, stored)
        # A random or dynamic strategy lets another item of the same primary key live in another
        # shard: never overwrite it (a legacy move's target, or a computed shard, is this item's).
        target_free = stored != LEGACY_SHARD and not manager.keeps_keys_unique
        for target in targets:
            try:
                return self._save_moving(stored, target, condition, add_version_condition, target_free=target_free)
            except _TargetTaken:
                continue
            except PutError as exc:
                if getattr(exc, "cause_response_code", None) != "ConditionalCheckFailedException":
                    raise
                where = self._relocate(stored)
                if where == stored or relocations >= _MAX_RELOCATIONS:
                    raise  # the condition or the version check failed on the stored copy
                if where is None:  # deleted meanwhile: recreated where the layout writes it
                    self._pin_shard(target)
                    return super().save(condition, add_version_condition=add_version_condition)
                return self._save_item(condition, add_version_condition, relocations=relocations + 1)
        cls = type(self)
        msg = (
            f"{cls.__name__}.{cls._hash_keyname}: the item {self.logical_hash_key()!r} with range key "
            f"{self._range_value()!r} must move out of shard {stored}, but every shard it could move to "
            f"holds another item of the same primary key (random and dynamic strategies do not keep "
            f"keys unique); nothing was written. Delete the extra copies (read them with "
            f"{cls.__name__}.query), or use HashedShards where items are overwritten by key."
        )
        raise ShardMoveError(msg)

    def _relocate(self, stored: int) -> int | None:
        """After a write addressed to ``stored`` failed its condition: where the item is now
        (pinned there), ``stored`` itself when it is still there (the condition failed on it),
        or ``None`` when no shard holds it (deleted meanwhile; the pin is kept)."""
        pinned = (self._physical_shard, self._pinned_basis)
        self._forget_shard()
        shard, _ = self._locate(self._candidate_shards())
        if shard is None:
            self._physical_shard, self._pinned_basis = pinned
            return None
        self._pin_shard(shard)
        return shard

    def _guarded(self, condition: Condition | None) -> Condition | None:
        """The condition of a write to this item where a job may move it from: it must still be
        there, else the write would recreate it beside its moved copy."""
        exists = self._hash_attr().exists()
        return exists if condition is None else condition & exists

    def _save_moving(
        self, stored: int, target: int, condition: Condition | None, add_version_condition: bool,
        *, target_free: bool = False,
    ) -> dict[str, Any]:
        """Put this item in ``target`` and delete its copy in ``stored``, in one transaction.

        ``condition`` and the version check apply to the stored copy, as they would on an
        unsharded table; the delete also requires that copy to still exist, so a concurrent
        move or delete makes the transaction fail instead of leaving two copies. With
        ``target_free`` the put also requires ``target`` to hold nothing (else
        :class:`_TargetTaken`).
        """
        cls = type(self)
        connection = self._get_connection()
        hash_attr = self._hash_attr()
        range_value = self._range_value()
        range_ser = self._serialize_range(range_value)
        version_check = version_condition(self) if add_version_condition else None
        delete_condition: Condition = hash_attr.exists()
        for extra in (rewrite_condition(cls, condition, Usage.ITEM, lambda: stored), version_check):
            if extra is not None:
                delete_condition &= extra
        before = (self._physical_shard, self._pinned_basis)
        old_physical = self._shard_manager().codec.encode(self.logical_hash_key(), stored)
        self._pin_shard(target)
        attributes, range_key = save_arguments(self)
        put = connection.get_operation_kwargs(
            self._physical_hash_key(target), range_key=range_key, key=ITEM, attributes=attributes,
            condition=hash_attr.does_not_exist() if target_free else None,
        )
        delete = connection.get_operation_kwargs(old_physical, range_key=range_ser, condition=delete_condition)
        try:
            data: dict[str, Any] = connection.connection.transact_write_items(
                condition_check_items=[], delete_items=[delete], put_items=[put], update_items=[],
                client_request_token=str(uuid.uuid4()),
            )
        except TransactWriteError as exc:
            self._physical_shard, self._pinned_basis = before  # nothing moved
            reasons = exc.cancellation_reasons or []
            codes = [reason.code if reason is not None else None for reason in reasons] + [None, None]
            if codes[0] == "ConditionalCheckFailed":
                raise condition_failed(PutError, "put item", "PutItem", cls.Meta.table_name, exc) from exc
            if codes[1] == "ConditionalCheckFailed" and target_free:
                raise _TargetTaken from exc
            raise PutError(f"Failed to put item: {exc.cause}", exc.cause) from exc
        self._pin_shard(target)
        bump_local_version(self)
        return data

    # update, delete, refresh and the transaction kwargs go through
    # _get_hash_range_key_serialized_values, which locates the item's shard.

    # -- conditions on the hash key: see conditions.py -----------------------------------------

    def _item_condition(self, condition: Condition | None) -> Condition | None:
        """``condition`` rewritten for the physical key this item's requests address."""
        return rewrite_condition(type(self), condition, Usage.ITEM, self._addressed_shard)

    def _addressed_shard(self) -> int:
        physical, _ = self._get_hash_range_key_serialized_values()
        return self._shard_manager().codec.decode(physical)[1]

    def _get_save_args(
        self, condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> tuple[Iterable[Any], dict[str, Any]]:
        # Model.save and TransactWrite.save build their request here; the hash key in args is
        # the physical key the put addresses, so the condition is rewritten for its shard.
        cls = type(self)
        check_item_condition(cls, condition)  # before serialize picks a new item's shard
        raw_args, kwargs = super()._get_save_args(condition, add_version_condition=add_version_condition)
        args = tuple(raw_args)
        physical = args[0]
        shard = self._shard_manager().codec.decode(physical)[1]
        kwargs["condition"] = rewrite_condition(cls, kwargs["condition"], Usage.ITEM, lambda: shard)
        if shard != LEGACY_SHARD and self._shard_manager().misplaced(self, shard):
            # A transaction's put of an item where a job may move it from (save() moves it
            # instead): it must still be there, else the transaction fails rather than leave a
            # second copy beside the moved one.
            kwargs["condition"] = self._guarded(kwargs["condition"])
        return args, kwargs

    def update(
        self, actions: list[Action], condition: Condition | None = None, *, add_version_condition: bool = True,
    ) -> Any:
        """PynamoDB's ``update``; refuses actions on attributes the item's shard is derived from.

        Raises:
            ShardingError: an action sets or removes such an attribute: the item would stay in
                a shard its new value does not select (set the attribute and call ``save()``).
        """
        with regions.routed(self._write_route("update", condition, add_version_condition)):
            if self._time_partitioned is not None:
                return partitioned.write(
                    self, lambda: self.update(actions, condition, add_version_condition=add_version_condition),
                )
            self._check_actions(actions)
            return self._write_in_place(
                lambda guarded: Model.update(self, actions, guarded, add_version_condition=add_version_condition),
                condition, UpdateError, "update item", "UpdateItem",
            )

    def delete(self, condition: Condition | None = None, *, add_version_condition: bool = True) -> Any:
        with regions.routed(self._write_route("delete", condition, add_version_condition)):
            if self._time_partitioned is not None:
                return partitioned.write(
                    self, lambda: self.delete(condition, add_version_condition=add_version_condition),
                )
            return self._write_in_place(
                lambda guarded: Model.delete(self, guarded, add_version_condition=add_version_condition),
                condition, DeleteError, "delete item", "DeleteItem",
            )

    def _write_in_place(
        self, send: Callable[[Condition | None], _R], condition: Condition | None,
        error: type[PynamoDBException], action: str, operation: str,
    ) -> _R:
        """Send an update or delete of this item where it is stored.

        Where a job may move the item (:meth:`ShardManager.misplaced`), the request also
        requires it to still be there; when a job moved it meanwhile, the request is sent again
        where it is now; when it was deleted meanwhile, it is sent where the layout writes the
        item, so DynamoDB answers as it would on an unsharded table (an update creates the
        item, a delete does nothing, a condition sees no item).
        """
        manager = self._shard_manager()
        for _ in range(_MAX_RELOCATIONS + 1):
            stored = self._locate_for_write()
            if not manager.misplaced(self, stored):
                return send(self._item_condition(condition))
            try:
                return send(self._guarded(self._item_condition(condition)))
            except error as exc:
                if getattr(exc, "cause_response_code", None) != "ConditionalCheckFailedException":
                    raise
                where = self._relocate(stored)
                if where == stored:  # the condition or the version check failed there
                    raise
                if where is None:  # deleted meanwhile
                    self._pin_shard(manager.move_targets(self, stored)[0])
                    return send(self._item_condition(condition))
        raise self._kept_moving(action)

    def _kept_moving(self, action: str) -> ShardMoveError:
        cls = type(self)
        msg = (
            f"{cls.__name__}.{cls._hash_keyname}: the item {self.logical_hash_key()!r} with range key "
            f"{self._range_value()!r} moved between shards {_MAX_RELOCATIONS + 1} times while this "
            f"{action} followed it (jobs running at once?); nothing was written. Try again."
        )
        return ShardMoveError(msg)

    def _addresses_misplaced(self) -> bool:
        """Whether this item's requests address a shard a job may move it from."""
        return self._shard_manager().misplaced(self, self._locate_for_write())

    def _check_actions(self, actions: Any) -> None:
        if self._sharded_indexes and isinstance(actions, list):
            check_index_actions(type(self), actions)
        derived = set(self._shard_manager().derived_attributes)
        if not derived or not isinstance(actions, list):
            return
        attributes = self.get_attributes()
        names = {attributes[name].attr_name: name for name in derived}
        for action in actions:
            path = action.values[0] if getattr(action, "values", None) else None
            top = getattr(path, "path", [None])[0]
            if top in names:
                cls = type(self)
                msg = (
                    f"{cls.__name__}.{names[top]}: {cls.__name__}'s shard is derived from {names[top]!r}, "
                    f"so an update of it would leave the item in a shard its new value does not select; "
                    f"set item.{names[top]} and call item.save(), which moves the item in one transaction."
                )
                raise DerivedAttributeUpdateError(msg)

    def get_update_kwargs_from_instance(
        self,
        actions: list[Action],
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> dict[str, Any]:
        if self._time_partitioned is not None:
            with partitioned.as_period_item(self):
                return self.get_update_kwargs_from_instance(
                    actions, condition, return_values_on_condition_failure, add_version_condition=add_version_condition,
                )
        self._check_actions(actions)
        condition = self._item_condition(condition)
        if self._addresses_misplaced():  # moved meanwhile: the transaction fails, never recreates it
            condition = self._guarded(condition)
        kwargs: dict[str, Any] = super().get_update_kwargs_from_instance(
            actions, condition, return_values_on_condition_failure,
            add_version_condition=add_version_condition,
        )
        return kwargs

    def get_delete_kwargs_from_instance(
        self,
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> dict[str, Any]:
        if self._time_partitioned is not None:
            with partitioned.as_period_item(self):
                return self.get_delete_kwargs_from_instance(
                    condition, return_values_on_condition_failure, add_version_condition=add_version_condition,
                )
        condition = self._item_condition(condition)
        if self._addresses_misplaced():
            condition = self._guarded(condition)
        return super().get_delete_kwargs_from_instance(
            condition, return_values_on_condition_failure,
            add_version_condition=add_version_condition,
        )

    def get_save_kwargs_from_instance(
        self,
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
    ) -> dict[str, Any]:
        if self._time_partitioned is not None:
            with partitioned.as_period_item(self):
                return self.get_save_kwargs_from_instance(condition, return_values_on_condition_failure)
        kwargs: dict[str, Any] = super().get_save_kwargs_from_instance(condition, return_values_on_condition_failure)
        return kwargs

    def refresh(self, consistent_read: bool = False) -> None:
        if self._time_partitioned is not None:
            with partitioned.as_period_item(self) as model:
                try:
                    return self.refresh(consistent_read=consistent_read)
                except PynamoDBException as error:
                    if not partitioned.is_missing_period_table(model, error):
                        raise
            raise self.DoesNotExist("This item does not exist in the table.")
        known = self._known_shard()
        if known is not None and self._shard_manager().misplaced(self, known):
            self._forget_shard()  # a job may have moved it since: look again
        if self._known_shard() is None:
            if self._moved_from() is not None:
                raise self._move_refused("refreshed")
            if self._derives_from_other_attributes() and self._derived_attributes_set():
                # One GetItem where this instance's user_id puts the item; the key is stored
                # once, so a hit is the item. A miss looks in every shard of the key.
                self._pin_shard(self._shard_manager().write_shard(self))
                try:
                    return super().refresh(consistent_read=consistent_read)
                except self.DoesNotExist:
                    self._forget_shard()
            candidates = self._candidate_shards()
            if len(candidates) > 1:
                _, raw = self._locate(candidates)
                if raw is None:
                    raise self.DoesNotExist("This item does not exist in the table.")
                self.deserialize(raw)
                return
            self._pin_shard(candidates[0])
        super().refresh(consistent_read=consistent_read)

    # -- outside DynamoDB ----------------------------------------------------------------------

    def to_dynamodb_dict(self) -> dict[str, dict[str, Any]]:
        """The item as DynamoDB stores it, with its physical key, in DynamoDB JSON.

        :meth:`from_dynamodb_dict` and :meth:`from_raw_data` read it back as the same item, in
        the same shard, so items cached outside DynamoDB (Redis, a queue message) are saved,
        updated and deleted where they are stored. An item not written yet is assigned its
        write shard here, as :meth:`serialize` does.
        """
        if self._time_partitioned is not None:
            with partitioned.as_period_item(self):
                return self.to_dynamodb_dict()
        data = super().to_dynamodb_dict()
        shard = self._known_shard()
        if shard is None:
            shard = self._new_item_shard()
        data[self._hash_attr().attr_name] = {"S": self._physical_hash_key(shard)}
        if self._sharded_indexes:
            self._store_index_values(data)
        return data

    def from_dynamodb_dict(self, d: dict[str, dict[str, Any]]) -> None:
        """Set attributes from :meth:`to_dynamodb_dict`'s output; the item keeps its shard."""
        super().from_dynamodb_dict(d)
        self._adopt_physical_key(d)

    # -- point reads ---------------------------------------------------------------------------

    @classmethod
    def get(
        cls: type[_T],
        hash_key: Any,
        range_key: Any = None,
        consistent_read: bool = False,
        attributes_to_get: Sequence[str] | None = None,
    ) -> _T:
        """Read one item: one GetItem when its shard is computable, else one batched read."""
        if cls._time_partitioned is not None:
            model = partitioned.period_model(cls, partitioned.declaration(cls).period_of(range_key))
            try:
                found = model.get(hash_key, range_key, consistent_read, attributes_to_get)
            except PynamoDBException as error:
                if not partitioned.is_missing_period_table(model, error):
                    raise
                raise cls.DoesNotExist() from error
            return partitioned.as_declared(found, cls)
        probe = cls._key_item(hash_key, range_key)
        candidates = probe._candidate_shards()
        if len(candidates) == 1:
            data = cls._get_connection().get_item(
                probe._physical_hash_key(candidates[0]),
                range_key=cls._serialize_range(range_key),
                consistent_read=consistent_read,
                attributes_to_get=with_key_attributes(attributes_to_get, cls._key_names()),
            )
            item_data = data.get(ITEM) if data else None
            if not item_data:
                raise cls.DoesNotExist()
            raw = item_data
        else:
            _, raw = probe._locate(candidates, consistent_read=consistent_read, attributes_to_get=attributes_to_get)
            if raw is None:
                raise cls.DoesNotExist()
        item = cls.from_raw_data(raw)
        return item._marked_partial() if leaves_out_keys(attributes_to_get, cls._key_names()) else item

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
        if cls._time_partitioned is not None:
            pairs = [cls._batch_key(item) for item in items]
            for period, period_keys in partitioned.group_keys(cls, pairs).items():
                model = partitioned.period_model(cls, period)
                try:
                    for found in model.batch_get(period_keys, consistent_read, attributes_to_get):
                        yield partitioned.as_declared(found, cls)
                except PynamoDBException as error:
                    if not partitioned.is_missing_period_table(model, error):
                        raise
            return
        keys: list[tuple[str, int, Any]] = []
        seen: set[tuple[Any, Any]] = set()
        for item in items:
            hash_key, range_key = cls._batch_key(item)
            probe = cls._key_item(hash_key, range_key)
            # Any key sequence PynamoDB accepts (tuples, lists): one request per distinct key.
            identity = (probe.logical_hash_key(), cls._serialize_range(range_key))
            if identity in seen:
                continue
            seen.add(identity)
            keys.extend((identity[0], shard, range_key) for shard in probe._candidate_shards())
        partial = leaves_out_keys(attributes_to_get, cls._key_names())
        for _, raw in read_physical(cls, keys, consistent_read=consistent_read,
                                         attributes_to_get=attributes_to_get):
            item = cls.from_raw_data(raw)
            yield item._marked_partial() if partial else item

    @classmethod
    def _batch_key(cls, item: Any) -> tuple[Any, Any]:
        """``(hash key, range key)`` of one key given to ``batch_get``, refused as PynamoDB refuses it."""
        if cls._range_keyname is None:
            return item, None
        if isinstance(item, str):
            raise ValueError(
                f"Invalid key value {item!r}: expected non-str iterable with exactly 2 elements "
                "(hash key, range key)"
            )
        try:
            hash_key, range_key = item
        except (TypeError, ValueError):
            raise ValueError(
                f"Invalid key value {item!r}: expected iterable with exactly 2 elements "
                "(hash key, range key)"
            ) from None
        return hash_key, range_key

    @classmethod
    def get_operation_kwargs_from_class(
        cls,
        hash_key: str,
        range_key: Any = None,
        condition: Condition | None = None,
    ) -> dict[str, Any]:
        """Request arguments for one item (``TransactGet.get``, ``TransactWrite.condition_check``)."""
        if cls._time_partitioned is not None:
            model = partitioned.period_model(cls, partitioned.declaration(cls).period_of(range_key))
            return model.get_operation_kwargs_from_class(hash_key, range_key, condition)
        probe = cls._key_item(hash_key, range_key)
        check_item_condition(cls, condition)  # before locating the item reads
        shard = probe._locate_for_write()
        range_ser = cls._serialize_range(range_key)
        return cls._get_connection().get_operation_kwargs(
            hash_key=probe._physical_hash_key(shard),
            range_key=range_ser,
            condition=rewrite_condition(cls, condition, Usage.ITEM, lambda: shard),
        )

    # -- table management ----------------------------------------------------------------------

    @classmethod
    def _get_schema(cls) -> Any:
        # PynamoDB builds CreateTable and its own key metadata from this schema: add the shard
        # attribute of each layout="multi_attribute" index (tested by creating such a table).
        return add_shard_attributes(cls, super()._get_schema())

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
        if cls._time_partitioned is not None:
            billing: dict[str, Any] = {"read_capacity_units": read_capacity_units,
                                       "write_capacity_units": write_capacity_units, "billing_mode": billing_mode}
            if billing_mode is None and read_capacity_units is None and write_capacity_units is None:
                billing = partitioned.billing_arguments(cls)  # Meta's, else on-demand, as rotate() does
            return partitioned.period_model(cls, partitioned.declaration(cls).current()).create_table(
                wait=wait, ignore_update_ttl_errors=ignore_update_ttl_errors, **billing,
            )
        result = super().create_table(
            wait=wait,
            read_capacity_units=read_capacity_units,
            write_capacity_units=write_capacity_units,
            billing_mode=billing_mode,
            ignore_update_ttl_errors=ignore_update_ttl_errors,
        )
        for companion in cls.companion_models():
            if not companion.exists():
                companion.create_table(wait=wait)
        return result

    @classmethod
    def delete_table(cls, *, wait: bool = False) -> Any:
        """Delete this model's table; a time-partitioned model deletes every period's table."""
        if cls._time_partitioned is not None:
            for period in partitioned.existing_periods(cls):
                partitioned.period_model(cls, period).delete_table(wait=wait)
            return None
        return super().delete_table(wait=wait)

    @classmethod
    def exists(cls) -> bool:
        """Whether the table exists; for a time-partitioned model, the current period's."""
        if cls._time_partitioned is not None:
            return partitioned.period_model(cls, partitioned.declaration(cls).current()).exists()
        return super().exists()

    @classmethod
    def describe_table(cls) -> Any:
        """``DescribeTable`` of the table; for a time-partitioned model, the current period's."""
        if cls._time_partitioned is not None:
            return partitioned.period_model(cls, partitioned.declaration(cls).current()).describe_table()
        return super().describe_table()

    @classmethod
    def batch_write(cls: type[_T], auto_commit: bool = True) -> Any:
        """PynamoDB's ``batch_write``; a time-partitioned model's writes each item to its period's table."""
        if cls._time_partitioned is not None:
            return partitioned.PeriodBatchWrite(cls, auto_commit=auto_commit)
        return ShardedBatchWrite(cls, auto_commit=auto_commit)

    def _batch_alone(self, put: bool, batch_route: regions.Route | None = None) -> bool:
        """Whether a batch put (``put``) or delete of this item must be sent on its own, by
        :meth:`save` or :meth:`delete`: a job may be moving it (see :mod:`pynamodb_sharding.batch`),
        or its write goes to another region than the batch (``batch_route``).

        A put of a new instance is assigned its shard here (reading where its key is stored, as
        :meth:`serialize` would), so the batch reads nothing twice.
        """
        if self._write_route("save" if put else "delete", None, False) != batch_route:
            return True
        manager = self._shard_manager()
        if not put:
            return manager.misplaced(self, self._locate_for_write())
        known = self._known_shard()
        if known is None:
            if self._moved_from() is not None:
                return False  # serialize refuses it: save() moves it (see _new_item_shard)
            known = self._new_item_shard()
        # A legacy item's put shadows its bare copy where a move puts it (see serialize).
        return known != LEGACY_SHARD and manager.misplaced(self, known)

    # -- fan-out reads -------------------------------------------------------------------------

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

        .. versionchanged:: 0.4.0
           PynamoDB's own query of the table of a model that shards only an index.
        """
        from pynamodb_sharding.fanout import merged_query

        if cls._time_partitioned is not None:
            return cls._query_periods(  # type: ignore[return-value]  # the same surface, over periods
                hash_key, range_key_condition, filter_condition, consistent_read, index_name,
                scan_index_forward, limit, last_evaluated_key, attributes_to_get, page_size, rate_limit,
            )
        if cls._index_only and sharded_index(cls, index_name) is None:
            # The table (or an unsharded index) of a model that shards only an index: PynamoDB's
            # own query, its cursor and pages, with conditions on sharded index attributes rewritten.
            return super().query(  # type: ignore[return-value]  # PynamoDB's ResultIterator
                hash_key,
                range_key_condition=rewrite_condition(cls, range_key_condition, Usage.KEY),
                filter_condition=rewrite_condition(cls, filter_condition, Usage.FILTER),
                consistent_read=consistent_read,
                index_name=index_name,
                scan_index_forward=scan_index_forward,
                limit=limit,
                last_evaluated_key=last_evaluated_key,  # type: ignore[arg-type]  # a key, as PynamoDB's
                attributes_to_get=attributes_to_get,
                page_size=page_size,
                rate_limit=rate_limit,
            )
        return merged_query(
            cls,
            hash_key,
            range_key_condition=range_key_condition,
            filter_condition=filter_condition,
            consistent_read=consistent_read,
            index_name=index_name,
            scan_index_forward=scan_index_forward,
            limit=limit,
            last_evaluated_key=last_evaluated_key,
            attributes_to_get=attributes_to_get,
            page_size=page_size,
            rate_limit=rate_limit,
        )

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
        if cls._time_partitioned is not None:
            def scan_period(model: Any, cursor: Any, left: int | None) -> Any:
                return model.scan(filter_condition, segment, total_segments, left, cursor, page_size,
                                  consistent_read, index_name, rate_limit, attributes_to_get)

            periods = partitioned.periods_to_read(cls, None, what="scan")
            return partitioned.PeriodResultIterator(  # type: ignore[return-value]  # ResultIterator's surface
                cls, periods, scan_period, limit=limit, given=last_evaluated_key, tokens=False,
            )
        if cls._shard_manager().legacy_unsharded:
            return cls._scan_current(filter_condition, segment, total_segments, limit, last_evaluated_key,
                                     page_size, consistent_read, index_name, rate_limit, attributes_to_get)
        return super().scan(
            filter_condition=rewrite_condition(cls, filter_condition, Usage.FILTER),
            segment=segment,
            total_segments=total_segments,
            limit=limit,
            last_evaluated_key=last_evaluated_key,
            page_size=page_size,
            consistent_read=consistent_read,
            index_name=index_name,
            rate_limit=rate_limit,
            attributes_to_get=attributes_to_get,
        )

    @classmethod
    def _scan_current(
        cls: type[_T],
        filter_condition: Condition | None,
        segment: int | None,
        total_segments: int | None,
        limit: int | None,
        last_evaluated_key: dict[str, dict[str, Any]] | None,
        page_size: int | None,
        consistent_read: bool | None,
        index_name: str | None,
        rate_limit: float | None,
        attributes_to_get: Sequence[str] | None,
    ) -> ResultIterator[_T]:
        """PynamoDB's scan of a ``legacy_unsharded`` model, without the stale bare copies of
        items a shard also holds (a scan may meet the two in different pages or segments)."""
        discriminator = discriminator_attribute(cls)
        filter_condition = rewrite_condition(cls, filter_condition, Usage.FILTER)
        if discriminator:  # as Model.scan: a polymorphic model reads items of its own classes
            filter_condition &= discriminator.is_in(*discriminator.get_registered_subclasses(cls))
        connection = cls._get_connection()

        def scan_page(*args: Any, **kwargs: Any) -> dict[str, Any]:
            data: dict[str, Any] = connection.scan(*args, **kwargs)
            items = data.get(ITEMS)
            if items:
                kept = without_stale_bare_copies(cls, items, consistent_read=consistent_read)
                if len(kept) != len(items):
                    count = data.get(CAMEL_COUNT, len(items)) - len(items) + len(kept)
                    data = {**data, ITEMS: kept, CAMEL_COUNT: count}
            return data

        return ResultIterator(
            scan_page,
            (),
            {
                "filter_condition": filter_condition, "exclusive_start_key": last_evaluated_key,
                "segment": segment, "limit": page_size if page_size is not None else limit,
                "total_segments": total_segments, "consistent_read": consistent_read,
                "index_name": index_name, "attributes_to_get": attributes_to_get,
            },
            map_fn=cls.from_raw_data,
            limit=limit,
            rate_limit=rate_limit,
        )

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
        if cls._time_partitioned is not None:
            return cls._count_periods(hash_key, range_key_condition, filter_condition, consistent_read,
                                      index_name, limit, rate_limit)
        if hash_key is None:
            total: int = super().count(None, range_key_condition, filter_condition, consistent_read,
                                       index_name, limit, rate_limit)
            return total
        if cls._index_only and sharded_index(cls, index_name) is None:  # PynamoDB's, as in query
            counted: int = super().count(hash_key, rewrite_condition(cls, range_key_condition, Usage.KEY),
                                         rewrite_condition(cls, filter_condition, Usage.FILTER), consistent_read,
                                         index_name, limit, rate_limit)
            return counted
        from pynamodb_sharding.fanout import merged_count

        return merged_count(
            cls,
            hash_key,
            range_key_condition=range_key_condition,
            filter_condition=filter_condition,
            consistent_read=consistent_read,
            index_name=index_name,
            limit=limit,
            rate_limit=rate_limit,
        )

    # -- time-partitioned reads ----------------------------------------------------------------

    @classmethod
    def _query_periods(
        cls: type[_T],
        hash_key: Any,
        range_key_condition: Condition | None,
        filter_condition: Condition | None,
        consistent_read: bool,
        index_name: str | None,
        scan_index_forward: bool | None,
        limit: int | None,
        last_evaluated_key: Any,
        attributes_to_get: Iterable[str] | None,
        page_size: int | None,
        rate_limit: float | None,
    ) -> partitioned.PeriodResultIterator[_T]:
        """A query of a time-partitioned model: the periods it touches, one after the other."""
        declared = partitioned.declaration(cls)
        assert declared is not None
        if index_name is not None:
            index = indexes(cls).get(index_name)
            sort = index_range_attribute(index) if index is not None else None
            if sort is not None and sort.attr_name != cls.get_attributes()[declared.attribute].attr_name:
                msg = (
                    f"{cls.__name__}.query: index {index_name!r} sorts by {sort.attr_name!r}, not by "
                    f"{declared.attribute!r}, so the items of several periods' tables cannot come in its "
                    f"order; query one period with {cls.__name__}.period_model(period).query(..., "
                    f"index_name={index_name!r})."
                )
                raise PeriodRangeError(msg)
        forward = scan_index_forward is not False
        periods = partitioned.periods_to_read(cls, range_key_condition, forward=forward)

        def query_period(model: Any, cursor: Any, left: int | None) -> Any:
            return model.query(hash_key, range_key_condition, filter_condition, consistent_read, index_name,
                               scan_index_forward, left, cursor, attributes_to_get, page_size, rate_limit)

        return partitioned.PeriodResultIterator(cls, periods, query_period, limit=limit,
                                                given=last_evaluated_key, forward=forward, page_size=page_size,
                                                filtered=filter_condition is not None, ends_as_one_query=True)

    @classmethod
    def _count_periods(
        cls,
        hash_key: Any,
        range_key_condition: Condition | None,
        filter_condition: Condition | None,
        consistent_read: bool,
        index_name: str | None,
        limit: int | None,
        rate_limit: float | None,
    ) -> int:
        """A count of a time-partitioned model: the sum over the periods it touches."""
        total = 0
        for period in partitioned.periods_to_read(cls, range_key_condition if hash_key is not None else None,
                                                  what="count"):
            left = None if limit is None else limit - total
            if left is not None and left <= 0:
                break
            model = partitioned.period_model(cls, period)
            try:
                total += model.count(
                    hash_key, range_key_condition, filter_condition, consistent_read, index_name, left, rate_limit,
                )
            except PynamoDBException as error:
                if not partitioned.is_missing_period_table(model, error):
                    raise
        return total


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
