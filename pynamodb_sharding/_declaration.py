"""Checking and binding a sharded model's declaration, once, when its class is defined.

:func:`declare` is what ``ShardedModel``'s metaclass runs for every subclass: it finds the
``Sharding`` descriptor (or gives a model that shards only an index a one-shard table layout),
refuses what cannot work with a message naming the model, the attribute and the fix, binds the
class's :class:`~pynamodb_sharding.ShardManager` and sharded indexes, and chooses
how its requests are routed (:mod:`~pynamodb_sharding._routes`).
"""

from __future__ import annotations

from typing import Any

from pynamodb.attributes import UnicodeAttribute, UTCDateTimeAttribute

from pynamodb_sharding import _partitioned as partitioned
from pynamodb_sharding import _regions as regions
from pynamodb_sharding import _replicas as replicas
from pynamodb_sharding._descriptor import Sharding, ShardManager, register_model
from pynamodb_sharding._exceptions import ShardingDefinitionError
from pynamodb_sharding._host import discriminator_attribute, discriminator_root, hash_keyname, range_keyname
from pynamodb_sharding._indexes import bind_sharded_indexes, declares_sharded_index
from pynamodb_sharding._keys import MAX_TRANSACTION_ITEMS
from pynamodb_sharding._periods import is_time_partitioned
from pynamodb_sharding._routes import TableRoutes, bind_routes
from pynamodb_sharding._strategies import UnshardedKeys

__all__ = ["TABLE_KEYS", "declare"]

#: Where the one-shard table layout of a model that shards only an index is declared.
TABLE_KEYS = "_table_keys"


def declare(model: type[Any]) -> TableRoutes | None:
    """Check and bind ``model``'s declaration; its routes, or ``None`` for an abstract base.

    Raises:
        ShardingDefinitionError: the declaration cannot work; the message says how to fix it.
    """
    name = model.__name__
    # The one-shard layout given to a model that shards only an index is not a declaration.
    declared = sorted({attr for klass in model.__mro__ for attr, value in vars(klass).items()
                       if isinstance(value, Sharding) and not isinstance(value.strategy, UnshardedKeys)})
    if len(declared) > 1:
        msg = (
            f"{name}: has {len(declared)} Sharding descriptors ({', '.join(declared)}); a model "
            f"shards one hash key: keep one, overriding the inherited one under the same name."
        )
        raise ShardingDefinitionError(msg)
    hash_name = hash_keyname(model)
    if hash_name is None:
        return None  # an abstract base without a hash key: nothing to shard yet
    if not declared and not getattr(getattr(model, "Meta", None), "table_name", None):
        return None  # an abstract base (no table): its concrete subclasses declare the Sharding
    index_only = False
    if not declared:
        if not declares_sharded_index(model):
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
        layout.__set_name__(model, TABLE_KEYS)
        setattr(model, TABLE_KEYS, layout)
        declared = [TABLE_KEYS]
        index_only = True
    attribute = model.get_attributes()[hash_name]
    if not isinstance(attribute, UnicodeAttribute):
        if index_only:
            msg = (
                f"{name}.{hash_name}: the hash key is a {type(attribute).__name__}; a ShardedModel "
                f"that shards only an index keeps the table's keys as they are, but needs them to be "
                f"strings (UnicodeAttribute) in this release; declare the index on a model whose hash "
                f"key is a UnicodeAttribute."
            )
            raise ShardingDefinitionError(msg)
        msg = (
            f"{name}.{hash_name}: the hash key is a {type(attribute).__name__}, but sharding appends a "
            f"suffix to it; declare it as a UnicodeAttribute (string keys)."
        )
        raise ShardingDefinitionError(msg)
    sharding = next(vars(klass)[declared[0]] for klass in model.__mro__ if declared[0] in vars(klass))
    if sharding.layout != "suffixed":
        msg = (
            f"{name}.{declared[0]}: layout={sharding.layout!r} is for the Sharding of a "
            f"GlobalSecondaryIndex; a table's hash key is always stored suffixed: remove layout."
        )
        raise ShardingDefinitionError(msg)
    _check_discriminator_root(model)
    regions.check_declaration(model)
    manager = register_model(model, declared[0])  # binds the class: its key space and its one codec
    manager.validate()
    if manager.unique_keys:
        _check_unique_keys(model, manager)
    if manager.written_at is not None:
        _check_written_at(model, manager)
    bind_sharded_indexes(model)
    replicas.check_declaration(model)
    if is_time_partitioned(model):
        partitioned.check_declaration(model)
    return bind_routes(model)


def _check_discriminator_root(model: type[Any]) -> None:
    """Refuse a sharded class of a PynamoDB discriminator hierarchy whose root is a plain model:
    the root's reads (``Root.query``, ``Root.scan``, ``Root.get``) return every class's items, and
    would return this class's with their physical keys, or miss them."""
    root = discriminator_root(model)
    if root is None or getattr(root, "_is_sharded_model", False):
        return
    name = discriminator_attribute(model).attr_name
    msg = (
        f"{model.__name__}: its discriminator {name!r} is declared on {root.__name__}, a plain Model, whose "
        f"reads ({root.__name__}.query, scan, get) return every class's items and would return "
        f"{model.__name__}'s with their physical keys; shard the hierarchy at its root: derive "
        f"{root.__name__} from ShardedModel (with its Sharding, or one on an index), so every class "
        f"reads one layout. See 'Sharding a model of an existing hierarchy' in the adoption docs."
    )
    raise ShardingDefinitionError(msg)


def _check_unique_keys(model: type[Any], manager: ShardManager[Any]) -> None:
    """``Sharding(unique_keys=True)``: every save of a new instance checks the other shards of
    its key in one transaction, which holds at most :data:`MAX_TRANSACTION_ITEMS` actions."""
    keys = set(manager.key_attributes)
    if manager.keeps_keys_unique and all(name in keys for name in manager.derived_attributes):
        return  # one shard per key: nothing to check, a save is one PutItem as without the flag
    shards = manager.strategy.max_shards + (1 if manager.legacy_unsharded else 0)
    if shards > MAX_TRANSACTION_ITEMS:
        msg = (
            f"{model.__name__}.{manager.attribute}: Sharding(..., unique_keys=True) makes every save of a "
            f"new instance one transaction that checks each shard its key may be in, and "
            f"{manager.strategy!r} may put a key in {shards} shards"
            f"{' (counting the bare legacy key)' if manager.legacy_unsharded else ''}, more than one "
            f"transaction holds ({MAX_TRANSACTION_ITEMS}); lower the strategy's shard count (max_shards) "
            f"to {MAX_TRANSACTION_ITEMS - (1 if manager.legacy_unsharded else 0)} or fewer, or use "
            f"HashedShards, whose keys are unique without it."
        )
        raise ShardingDefinitionError(msg)


def _check_written_at(model: type[Any], manager: ShardManager[Any]) -> None:
    """Refuse a ``Sharding(written_at=...)`` that is not the range key, not a time, or on a
    strategy whose shards do not change over time (nothing could ever be skipped)."""
    written = manager.written_at
    assert written is not None
    where = f"{model.__name__}.{written.attribute}"
    attribute = model.get_attributes().get(written.attribute)
    range_name = range_keyname(model)
    if attribute is None or written.attribute != range_name:
        msg = (
            f"{where}: Sharding(written_at={written.attribute!r}) must name {model.__name__}'s range key "
            f"({range_name!r}), the attribute a query's key condition limits."
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
