"""The ``Sharding`` descriptor and the ``ShardManager`` it returns on the class."""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import attrs

from pynamodb_sharding.exceptions import ShardingDefinitionError, ShardKeyError
from pynamodb_sharding.keys import DEFAULT_SEPARATOR, KeyCodec, validate_separator
from pynamodb_sharding.strategies import HistoryEntry, ShardStrategy

if TYPE_CHECKING:
    from pynamodb_sharding.model import ShardedModel

__all__ = ["ShardManager", "Sharding"]

_M = TypeVar("_M", bound="ShardedModel")


class Sharding:
    """Declares write sharding of a :class:`~pynamodb_sharding.ShardedModel`'s hash key.

    ``AuditLog.shards`` (on the class) is a :class:`ShardManager`; ``item.shards`` (on an
    instance) is the shard the item lives in, or ``None`` before it is first written.

    Args:
        strategy: how writes pick a shard and which shards reads cover
            (:class:`~pynamodb_sharding.RandomShards`, :class:`~pynamodb_sharding.HashedShards`,
            :class:`~pynamodb_sharding.DynamicShards`).
        separator: put between the logical key and the shard number; must not contain digits.
        max_workers: threads a merged query uses; default ``min(32, number of shards)``.
            Raise ``Meta.max_pool_connections`` to match, or threads wait for connections.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        strategy: ShardStrategy,
        separator: str = DEFAULT_SEPARATOR,
        *,
        max_workers: int | None = None,
    ) -> None:
        given: object = strategy  # checked at run time: a common slip is Sharding(10)
        if not isinstance(given, ShardStrategy):
            msg = (
                f"Sharding(strategy): expected a shard strategy such as RandomShards(10), got "
                f"{strategy!r}; pass RandomShards(n), HashedShards(n) or DynamicShards(Metadata)."
            )
            raise ShardingDefinitionError(msg)
        self.separator = validate_separator(separator, "Sharding(separator=...)")
        if max_workers is not None and (isinstance(max_workers, bool) or not isinstance(max_workers, int)
                                        or max_workers < 1):
            msg = f"Sharding(max_workers=...): expected a positive int or None, got {max_workers!r}."
            raise ShardingDefinitionError(msg)
        self.strategy = strategy
        self.max_workers = max_workers
        self.name = ""
        # One manager per fully defined owner class: item decoding asks for it per item.
        self._managers: weakref.WeakKeyDictionary[type[Any], ShardManager[Any]] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"Sharding({self.strategy!r}, separator={self.separator!r})"

    def __set_name__(self, owner: type[Any], name: str) -> None:
        from pynamodb_sharding.model import ShardedModel

        self.name = name
        if not issubclass(owner, ShardedModel):
            msg = (
                f"{owner.__name__}.{name}: Sharding only works on ShardedModel subclasses; "
                f"derive {owner.__name__} from pynamodb_sharding.ShardedModel instead of Model."
            )
            raise ShardingDefinitionError(msg)

    @overload
    def __get__(self, instance: None, owner: type[_M]) -> ShardManager[_M]: ...

    @overload
    def __get__(self, instance: ShardedModel, owner: type[Any]) -> int | None: ...

    def __get__(self, instance: ShardedModel | None, owner: type[_M]) -> ShardManager[_M] | int | None:
        if instance is None:
            manager = self._managers.get(owner)
            if manager is None:
                manager = ShardManager(owner, self.strategy, self.separator, self.max_workers)
                if "_sharding_attr" in vars(owner):  # set once the metaclass has validated the class
                    self._managers[owner] = manager
            return manager
        return instance._known_shard()

    def __set__(self, instance: ShardedModel, value: object) -> None:
        msg = (
            f"{type(instance).__name__}.{self.name}: the shard of an item is chosen by its "
            f"strategy and cannot be assigned; construct the item and save it."
        )
        raise AttributeError(msg)


@attrs.frozen
class ShardManager(Generic[_M]):
    """Manages the shards of one sharded model class (``AuditLog.shards``).

    .. versionadded:: 0.1.0
    """

    model: type[_M]
    strategy: ShardStrategy
    separator: str = DEFAULT_SEPARATOR
    #: Threads a merged query uses; ``None``: ``min(32, number of shards)``.
    max_workers: int | None = None

    @property
    def attribute(self) -> str:
        """The Python name of the sharded hash-key attribute."""
        name = self.model._hash_keyname
        assert name is not None  # the metaclass refuses sharded models without a hash key
        return name

    @functools.cached_property
    def codec(self) -> KeyCodec:
        return KeyCodec(self.model.__name__, self.attribute, self.separator)

    def _key(self, key: object) -> str:
        return self.codec.check_logical(key)

    def shard_count(self, key: str) -> int:
        """The number of shards new writes of ``key`` spread over."""
        return self.strategy.shard_count(self.model, self._key(key))

    def read_shards(self, key: str) -> tuple[int, ...]:
        """Every shard a read of ``key`` covers, ascending.

        Shards whose physical key would exceed DynamoDB's 2,048-byte limit cannot hold items
        and are left out.

        Raises:
            ShardKeyError: even shard 1 of ``key`` would exceed the limit.
        """
        key = self._key(key)
        return self._possible(key, self.strategy.read_shards(self.model, key))

    def point_shards(self, item: _M) -> tuple[int, ...]:
        """The shards that may hold ``item`` (its primary key, and any attribute its shard is
        derived from, set), ascending; one shard when the strategy computes it."""
        key = item.logical_hash_key()
        return self._possible(key, self.strategy.point_shards(self.model, key, item))

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
        logical = self._key(key)
        highest = self.strategy.max_shards
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

    def grow(self, key: str) -> int:
        """Raise the shard count of ``key`` now (dynamic strategies); returns the new count."""
        return self.strategy.grow(self.model, self._key(key))

    def shrink(self, key: str, to: int) -> int:
        """Lower the write shard count of ``key``; reads keep covering the largest count."""
        return self.strategy.shrink(self.model, self._key(key), to)

    def history(self, key: str) -> list[HistoryEntry]:
        """The shard-count changes of ``key``, oldest first."""
        return self.strategy.history(self.model, self._key(key))

    def describe(self) -> str:
        """One line naming the strategy and its read cost."""
        return self.strategy.describe()
