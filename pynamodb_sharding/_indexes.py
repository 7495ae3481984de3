"""Sharded global secondary indexes: ``Sharding(...)`` declared on a ``GlobalSecondaryIndex``.

A GSI keyed by an attribute with few values (a day, a status) is hot even when the table is
not. Declaring ``shards = Sharding(HashedShards(8))`` on the index class spreads its entries
over physical index values: the model stores the index's hash-key attribute *suffixed*
(``"20160226_7"``), so DynamoDB files each item under one of eight index partitions, and
every read path gives the logical value back (``"20160226"``). A query of the index is one
query per index shard, merged like a query of a sharded table (:mod:`pynamodb_sharding._fanout`).

The bound :class:`~pynamodb_sharding.ShardManager` of an index
(``AuditLog.by_day.shards``) answers the same questions as a model's, in a key space of its
own (``<table>#<index>``), so a :class:`~pynamodb_sharding.DynamicShards` count of a day on
the index is not the count of a table key spelled the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import PynamoDBException
from pynamodb.expressions.operand import Path, Value
from pynamodb.indexes import GlobalSecondaryIndex

from pynamodb_sharding._descriptor import Sharding, ShardManager, is_global_index_class, register_index_manager
from pynamodb_sharding._exceptions import (
    DerivedAttributeUpdateError,
    IndexNotReadyError,
    ShardingDefinitionError,
    ShardKeyError,
)
from pynamodb_sharding._host import (
    botocore_client,
    hash_keyname,
    index_model,
    index_range_attribute,
    indexes,
    keep_unmodelled_fields,
    range_keyname,
)
from pynamodb_sharding._item import forget_index, index_pin, pin_index
from pynamodb_sharding._keys import LEGACY_SHARD
from pynamodb_sharding._owned import Owned
from pynamodb_sharding._throttling import ThrottleKind, classify

if TYPE_CHECKING:
    from pynamodb.models import Model

__all__ = [
    "ShardedIndex",
    "add_shard_attributes",
    "backfill_pending",
    "bind_sharded_indexes",
    "check_index_actions",
    "check_index_agreement",
    "declares_sharded_index",
    "index_not_ready",
    "index_shard_manager",
    "sharded_index",
    "sharded_indexes",
    "sharded_indexes_of",
    "store_index_values",
    "write_growing_indexes",
]

_R = TypeVar("_R")
_S = TypeVar("_S", bound=Any)


@attrs.frozen
class ShardedIndex:
    """One sharded global secondary index of a model, as the model's reads and writes see it.

    .. versionadded:: 0.1.0
    """

    #: The index's name (``Meta.index_name``).
    index_name: str
    #: The Python name, on the model, of the attribute the index is keyed on.
    attribute: str
    #: The name DynamoDB stores that attribute under.
    attr_name: str
    #: The index's bound shard manager.
    manager: ShardManager[Any] = attrs.field(repr=False)
    #: ``layout="multi_attribute"``: the stored name of the number attribute holding the index
    #: shard, the second attribute of the index's partition key; ``None`` for the suffixed layout.
    shard_attr_name: str | None = None

    def store(self, item: Any, data: dict[str, dict[str, Any]]) -> None:
        """Put the item's index entry into its serialized ``data``: the suffixed value
        (``20160226_7``), or the logical value beside the shard number attribute."""
        value = item.attribute_values.get(self.attribute)
        if value is None:  # not in the index
            if self.shard_attr_name is not None:
                data.pop(self.shard_attr_name, None)
            return
        shard = self.shard_of(item, value)
        if self.shard_attr_name is None:
            data[self.attr_name] = {"S": self.manager.codec.encode(value, shard)}
        else:
            data[self.shard_attr_name] = {"N": str(shard)}

    def adopt(self, item: Any, raw: Mapping[str, Any] | None) -> None:
        """Give a deserialized ``item`` its logical index value; remember its index shard."""
        values = item.attribute_values
        stored = values.get(self.attribute)
        if stored is None:  # not in the index, or projected away
            return
        if self.shard_attr_name is None:
            try:
                logical, shard = self.manager.codec.decode(stored)
            except ShardKeyError:
                raise self._bare_value(item, stored) from None
            values[self.attribute] = logical
            if shard != LEGACY_SHARD:  # a bare value (legacy_unsharded) gets a shard when saved
                pin_index(item, self.index_name, logical, shard)
            return
        number = (raw or {}).get(self.shard_attr_name)
        text = number.get("N") if isinstance(number, Mapping) else None
        if isinstance(text, str) and text.isdecimal():  # else written by another program: drawn anew
            pin_index(item, self.index_name, stored, int(text))

    def _bare_value(self, item: Any, stored: object) -> ShardKeyError:
        """The error of reading an index value stored without an index shard, which an index
        adopted in place would read."""
        model = type(item).__name__
        msg = (
            f"{model}.{self.attribute}: the sharded index {self.index_name!r} reads {stored!r}, which "
            f"has no index shard suffix ({self.manager.separator!r} and a shard number): it was written "
            f"without one, by a plain model or another program. Declare Sharding(..., "
            f"legacy_unsharded=True) on the index, whose reads then cover such values, and rewrite them "
            f"with `pynamodb-sharding migrate reindex MODULE:{model} {self.index_name}`."
        )
        return ShardKeyError(msg)

    def shard_of(self, item: Any, value: str) -> int:
        """The index shard of ``item``: computed for hashed strategies, else the one it was read
        from or last written to while ``value`` is unchanged, else a new draw (then kept)."""
        manager = self.manager
        if manager.keeps_keys_unique:
            return manager.write_shard(item)
        pinned = index_pin(item, self.index_name)
        if pinned is not None and pinned[0] == value:
            return pinned[1]
        manager.check_writable(value)
        shard = manager.write_shard(item)
        pin_index(item, self.index_name, value, shard)
        return shard


def _names_path(node: object, names: set[str]) -> str | None:
    """The stored name among ``names`` that ``node`` (an action, condition or operand) reads or sets."""
    if isinstance(node, Path):
        top = node.path[0] if node.path else None
        return top if top in names else None
    if isinstance(node, Value):
        return None
    inner = getattr(node, "values", None)
    if isinstance(inner, tuple | list):
        for value in inner:
            found = _names_path(value, names)
            if found is not None:
                return found
    return None


def check_index_actions(model: type[Any], actions: list[Any]) -> None:
    """Refuse update actions that set, remove or read a sharded index's attribute, or set or
    remove an attribute its index shard is derived from, before anything is sent.

    Raises:
        DerivedAttributeUpdateError: such an action.
    """
    attributes = model.get_attributes()
    for index in sharded_indexes_of(model).values():
        derived = {attributes[name].attr_name: name for name in index.manager.derived_attributes}
        for action in actions:
            found = _names_path(action, {index.attr_name})
            if found is not None:
                stored = ("with an index shard suffix" if index.shard_attr_name is None
                          else f"with its index shard in {index.shard_attr_name!r}")
                msg = (
                    f"{model.__name__}.{index.attribute}: the index {index.index_name!r} is sharded, so "
                    f"{index.attribute!r} is stored {stored}, which an update action cannot keep right; "
                    f"set item.{index.attribute} and call item.save(). Nothing was sent."
                )
                raise DerivedAttributeUpdateError(msg)
            values = getattr(action, "values", None)
            target = _names_path(values[0], set(derived)) if values else None
            if target is not None:
                msg = (
                    f"{model.__name__}.{derived[target]}: the shard of the index {index.index_name!r} "
                    f"is derived from {derived[target]!r}, so an update of it would leave the index "
                    f"entry in a shard its new value does not select; set item.{derived[target]} and "
                    f"call item.save(). Nothing was sent."
                )
                raise DerivedAttributeUpdateError(msg)


def _throttled_index(exc: BaseException, table: str, growing: dict[str, ShardedIndex]) -> ShardedIndex | None:
    """The growing index of ``table`` that a key-range throttle in ``exc`` names, if any."""
    throttle = classify(exc)
    if throttle.kind is not ThrottleKind.INDEX:
        return None
    for reason in throttle.reasons:
        resource = reason.resource or ""
        name = reason.index_name
        if (reason.kind is ThrottleKind.INDEX and name in growing and reason.reason.startswith("IndexWrite")
                and resource.split(":", 5)[-1] == f"table/{table}/index/{name}"):
            return growing[name]
    return None


def write_growing_indexes(item: Any, send: Callable[[], _R]) -> _R:
    """Send a write of ``item``; when a sharded index whose strategy grows (``DynamicShards``)
    throttles it with ``IndexWriteKeyRangeThroughputExceeded`` naming that index, grow the
    index's count for the item's value (waiting as the strategy says) and send again, with a
    new index shard, up to the strategy's ``max_attempts``.

    Any other error, including a throttle naming the table or another index, is raised as it is.
    """
    growing = {name: index for name, index in sharded_indexes_of(type(item)).items()
               if callable(getattr(index.manager.strategy, "throttled", None))}
    if not growing:
        return send()
    # The index's ARN comes with the throttling reasons, which an older botocore drops.
    keep_unmodelled_fields(botocore_client(type(item)))
    table = type(item).Meta.table_name
    attempt = 0
    while True:
        attempt += 1
        try:
            return send()
        except PynamoDBException as exc:
            index = _throttled_index(exc, table, growing)
            if index is None:
                raise
            strategy = index.manager.strategy
            if attempt >= int(getattr(strategy, "max_attempts", 10)):
                raise
            value = item.attribute_values.get(index.attribute)
            strategy.throttled(index.manager.key(value), attempt)  # type: ignore[attr-defined]
            forget_index(item, index.index_name)


def _index_sharding(index: GlobalSecondaryIndex[Any]) -> Sharding | None:
    found = [value for klass in type(index).__mro__ for value in vars(klass).values() if isinstance(value, Sharding)]
    return found[0] if found else None


def declares_sharded_index(model: type[Model]) -> bool:
    """Whether a global secondary index of ``model`` declares a ``Sharding``."""
    return any(is_global_index_class(type(index)) and _index_sharding(index) is not None
               for index in indexes(model).values())


def sharded_indexes(model: type[Model]) -> dict[str, ShardedIndex]:
    """Bind and validate the sharded global secondary indexes of ``model``, by index name.

    Raises:
        ShardingDefinitionError: a sharded index is keyed on an attribute that is not a
            ``UnicodeAttribute`` of the model, or is keyed on the table's own hash key.
    """
    found: dict[str, ShardedIndex] = {}
    for index_name, index in indexes(model).items():
        if not is_global_index_class(type(index)):
            continue
        sharding = _index_sharding(index)
        if sharding is None:
            continue
        manager: ShardManager[Any] = ShardManager(model, sharding.strategy, sharding.separator,
                                                  sharding.max_workers, index_name=index_name,
                                                  first_shard=sharding.first_shard,
                                                  legacy_unsharded=sharding.legacy_unsharded)
        attribute = manager.attribute
        model_attribute = model.get_attributes()[attribute]
        where = f"{model.__name__}.{attribute}"
        if sharding.cursor_secret is not None:
            msg = (
                f"{where}: the sharded index {index_name!r} takes no cursor_secret (its queries are "
                f"the model's: set cursor_secret on the model's Sharding); remove it from the index."
            )
            raise ShardingDefinitionError(msg)
        if sharding.unique_keys:
            msg = (
                f"{where}: the sharded index {index_name!r} takes no unique_keys (index values are not "
                f"unique: many items share one); declare Sharding(..., unique_keys=True) on the model, "
                f"whose primary keys it keeps unique."
            )
            raise ShardingDefinitionError(msg)
        if sharding.read_replicas:
            msg = (
                f"{where}: the sharded index {index_name!r} takes no read_replicas (a global index "
                f"cannot have indexes of its own, and its queries are spread over its shards already); "
                f"remove read_replicas from the index, or raise its shard count for more read capacity."
            )
            raise ShardingDefinitionError(msg)
        if not isinstance(model_attribute, UnicodeAttribute):
            msg = (
                f"{where}: the sharded index {index_name!r} is keyed on a {type(model_attribute).__name__}, "
                f"but sharding appends a suffix to it; declare it as a UnicodeAttribute on the model "
                f"and on the index."
            )
            raise ShardingDefinitionError(msg)
        if attribute == hash_keyname(model):
            msg = (
                f"{where}: the index {index_name!r} is keyed on the table's hash key, which the "
                f"model's own Sharding already shards; remove the Sharding from the index."
            )
            raise ShardingDefinitionError(msg)
        multi = sharding.layout == "multi_attribute"
        if attribute == range_keyname(model) and not multi:
            msg = (
                f"{where}: the index {index_name!r} is keyed on the table's range key, which would "
                f"then be stored suffixed; key the index on an attribute of its own, or use "
                f"layout='multi_attribute', which stores it unchanged."
            )
            raise ShardingDefinitionError(msg)
        shard_attr_name = None
        if multi:
            shard_attr_name = sharding.shard_attribute or f"{model_attribute.attr_name}_shard"
            taken = {attr.attr_name for attr in model.get_attributes().values()}
            taken |= {other.shard_attr_name for other in found.values() if other.shard_attr_name}
            if shard_attr_name in taken:
                msg = (
                    f"{where}: the index {index_name!r} stores its shard in {shard_attr_name!r}, which "
                    f"{model.__name__} already uses; pass Sharding(..., shard_attribute=...) a name of "
                    f"its own."
                )
                raise ShardingDefinitionError(msg)
        for other_name, other in indexes(model).items():
            other_keys = {key.attr_name for key in other.Meta.attributes.values()}
            if other_name != index_name and model_attribute.attr_name in other_keys and not multi:
                msg = (
                    f"{where}: the sharded index {index_name!r} stores {attribute!r} suffixed, but the "
                    f"index {other_name!r} is keyed on it too and would see suffixed values; give "
                    f"each sharded index a key attribute of its own."
                )
                raise ShardingDefinitionError(msg)
        known = model.get_attributes()
        for name in manager.derived_attributes:
            if name not in known:
                msg = (
                    f"{where}: the index {index_name!r}'s shard is derived from {name!r}, which is "
                    f"not an attribute of {model.__name__}; name attributes of the model."
                )
                raise ShardingDefinitionError(msg)
        # Its metadata model (DynamicShards) talks to the model's endpoint, as the table's does.
        manager.bind_companions()
        found[index_name] = ShardedIndex(index_name, attribute, model_attribute.attr_name, manager,
                                         shard_attr_name)
    return found


def add_shard_attributes(model: type[Model], schema: _S) -> _S:
    """Add the shard attribute of each ``layout="multi_attribute"`` index of ``model`` to a
    PynamoDB model schema: an ``N`` attribute definition, and a second ``HASH`` entry after the
    index's own in its key schema (DynamoDB's multi-attribute partition key)."""
    bound = sharded_indexes_of(model)
    multi = {name: index for name, index in bound.items() if index.shard_attr_name is not None}
    if not multi:
        return schema
    definitions = schema["attribute_definitions"]
    for index_schema in schema["global_secondary_indexes"]:
        index = multi.get(index_schema["index_name"])
        if index is None or index.shard_attr_name is None:
            continue
        keys = list(index_schema["key_schema"])
        position = next(n for n, key in enumerate(keys) if key["KeyType"] == "HASH") + 1
        keys.insert(position, {"AttributeName": index.shard_attr_name, "KeyType": "HASH"})
        index_schema["key_schema"] = keys
        if all(entry["AttributeName"] != index.shard_attr_name for entry in definitions):
            definitions.append({"AttributeName": index.shard_attr_name, "AttributeType": "N"})
    return schema


def _key_schema_text(model: type[Model], index: ShardedIndex) -> str:
    """The key schema a ``layout="multi_attribute"`` index needs, as messages show it."""
    keys = [f"{index.attr_name} HASH", f"{index.shard_attr_name} HASH"]
    sort = index_range_attribute(indexes(model)[index.index_name])
    if sort is not None:
        keys.append(f"{sort.attr_name} RANGE")
    return "[" + ", ".join(keys) + "]"


def backfill_pending(model: type[Model], index: ShardedIndex) -> IndexNotReadyError:
    """The error of a query of a ``layout="multi_attribute"`` index still declared
    ``legacy_unsharded``: items written before it have no shard attribute, so the table's index
    does not list them and the query would miss them."""
    msg = (
        f"{model.__name__}.{index.attribute}: the index {index.index_name!r} is declared "
        f"layout='multi_attribute' with legacy_unsharded=True: items written before it hold no "
        f"{index.shard_attr_name!r} yet, so the table's index does not list them and a query would "
        f"miss them; nothing was sent. Query the index the application used before meanwhile, run "
        f"`pynamodb-sharding migrate reindex MODULE:{model.__name__} {index.index_name}` to backfill "
        f"{index.shard_attr_name!r}, then remove legacy_unsharded from the index."
    )
    return IndexNotReadyError(msg)


def index_not_ready(model: type[Model], index_name: str | None, cause: Exception) -> IndexNotReadyError | None:
    """After DynamoDB refused a query of a ``layout="multi_attribute"`` index
    (``ValidationException``): the error that says why, when the table's index does not exist,
    is not ``ACTIVE`` or lacks the shard attribute in its key schema; ``None`` otherwise (one
    ``DescribeTable``)."""
    index = sharded_index(model, index_name)
    if index is None or index.shard_attr_name is None:
        return None
    table = str(model.Meta.table_name)
    try:
        described = botocore_client(model).describe_table(TableName=table)["Table"]
    except Exception:  # the query's own error is the one to raise then
        return None
    found = next((entry for entry in described.get("GlobalSecondaryIndexes", ())
                  if entry.get("IndexName") == index.index_name), None)
    schema = _key_schema_text(model, index)
    where = f"{model.__name__}.{index.attribute}"
    if found is None:
        why = (
            f"the table {table!r} has no index {index.index_name!r} yet; create it with UpdateTable "
            f"(key schema {schema}, see the 'Sharded global secondary indexes' docs) and backfill "
            f"{index.shard_attr_name!r} with `pynamodb-sharding migrate reindex`"
        )
    elif found.get("IndexStatus") != "ACTIVE" or found.get("Backfilling"):
        why = (
            f"the table's index {index.index_name!r} is {found.get('IndexStatus')} (DynamoDB is still "
            f"building it); query it once DescribeTable shows it ACTIVE"
        )
    elif index.shard_attr_name not in {key.get("AttributeName") for key in found.get("KeySchema", ())}:
        keys = ", ".join(f"{key.get('AttributeName')} {key.get('KeyType')}" for key in found.get("KeySchema", ()))
        why = (
            f"the table's index {index.index_name!r} is keyed on [{keys}], without "
            f"{index.shard_attr_name!r}, and an existing index's key schema cannot change; create a "
            f"new index under another name with the key schema {schema}, declare the sharded index "
            f"under that name and keep the old one as a plain GlobalSecondaryIndex until it is dropped"
        )
    else:
        return None
    msg = f"{where}: the sharded index {index.index_name!r} cannot be queried: {why}."
    # Keep botocore's error as the cause, as PynamoDB's QueryError does (cause_response_code).
    botocore_error = cause.cause if isinstance(cause, PynamoDBException) and cause.cause is not None else cause
    return IndexNotReadyError(msg, botocore_error)


def index_shard_manager(index: GlobalSecondaryIndex[Any]) -> ShardManager[Any]:
    """The bound shard manager of a sharded index (``AuditLog.by_day.shards``).

    Raises:
        ShardingDefinitionError: the index is not declared on a ``ShardedModel``.
    """
    model = index_model(index)
    name = index.Meta.index_name
    bound = sharded_indexes_of(model) if model is not None else {}
    if name not in bound:
        msg = (
            f"{type(index).__name__}({name!r}): a sharded index works on a ShardedModel only; "
            f"declare it on a ShardedModel subclass (e.g. `{name} = {type(index).__name__}()`)."
        )
        raise ShardingDefinitionError(msg)
    return bound[name].manager


def sharded_index(model: type[Any], index_name: str | None) -> ShardedIndex | None:
    """The sharded index ``index_name`` of ``model``, ``None`` when it is not one."""
    if index_name is None:
        return None
    return sharded_indexes_of(model).get(index_name)


#: Each model class's bound sharded indexes (see :func:`bind_sharded_indexes`).
_BOUND: Owned[dict[str, ShardedIndex]] = Owned("sharded_indexes")


def bind_sharded_indexes(model: type[Any]) -> dict[str, ShardedIndex]:
    """Bind and validate ``model``'s sharded indexes (:func:`sharded_indexes`) and remember them:
    what the model's reads and writes find with :func:`sharded_indexes_of`. Called once per class,
    when a sharded model is defined."""
    bound = sharded_indexes(model)
    _BOUND[model] = bound
    for name, index in bound.items():
        register_index_manager(indexes(model)[name], index.manager)
    return bound


def sharded_indexes_of(model: type[Any]) -> dict[str, ShardedIndex]:
    """The sharded indexes of ``model`` by name (empty for a model without any)."""
    return _BOUND.get(model) or {}


def store_index_values(item: Any, data: dict[str, dict[str, Any]]) -> None:
    """Put each sharded index's entry (physical value, or shard attribute) in serialized ``data``."""
    bound = sharded_indexes_of(type(item))
    if bound:
        check_index_agreement(type(item))
    for index in bound.values():
        index.store(item, data)


#: The table (name, host, region) each model was last found to agree on its indexes with every
#: other sharded model of that table (see check_index_agreement).
_AGREED: Owned[tuple[Any, ...]] = Owned("index_agreement")


def _table_identity(model: type[Any]) -> tuple[Any, ...]:
    meta = getattr(model, "Meta", None)
    return (getattr(meta, "table_name", None), getattr(meta, "host", None), getattr(meta, "region", None))


def _layout(index: ShardedIndex) -> tuple[Any, ...]:
    """What decides where an index's entries are stored and read (``legacy_unsharded`` aside: a
    model may stop reading bare values before another)."""
    manager = index.manager
    return (repr(manager.strategy), manager.separator, manager.first_shard, index.shard_attr_name, index.attr_name)


def _describe_layout(index: ShardedIndex) -> str:
    manager = index.manager
    where = f"layout='multi_attribute' ({index.shard_attr_name!r})" if index.shard_attr_name else "suffixed"
    return (f"Sharding({manager.strategy!r}, separator={manager.separator!r}, first_shard={manager.first_shard}) "
            f"{where} on {index.attr_name!r}")


def check_index_agreement(model: type[Any]) -> None:
    """Refuse a sharded index of ``model`` that another sharded model of the same table (the same
    ``table_name``, ``host`` and ``region`` now) declares sharded another way: one index's
    entries are stored and read one way, or the models miss each other's entries and a
    ``migrate reindex`` of one rewrites the other's. Checked once per model and table, at the
    model's first write or index query.

    Raises:
        ShardingDefinitionError: two declarations disagree; nothing was sent.
    """
    bound = sharded_indexes_of(model)
    if not bound:
        return
    identity = _table_identity(model)
    if _AGREED.get(model) == identity:
        return
    for other, theirs in list(_BOUND.items()):
        if other is model or _table_identity(other) != identity:
            continue
        for name, index in bound.items():
            their_index = theirs.get(name)
            if their_index is None or _layout(their_index) == _layout(index):
                continue
            msg = (
                f"{model.__name__}.{index.attribute}: {model.__name__} and {other.__name__} both use the "
                f"index {name!r} of table {identity[0]!r}, sharded differently: {_describe_layout(index)} "
                f"against {_describe_layout(their_index)}. An index's entries are stored and read one way, "
                f"else each model misses the other's and `migrate reindex` of one rewrites the other's; "
                f"declare the same Sharding on both (one GlobalSecondaryIndex class they share), or keep "
                f"the index plain in one of them; nothing was sent."
            )
            raise ShardingDefinitionError(msg)
    _AGREED[model] = identity

