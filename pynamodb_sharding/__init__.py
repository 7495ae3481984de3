"""Write sharding for PynamoDB models.

The public names below are loaded when first used (PEP 562 ``__getattr__``), so that
``import pynamodb_sharding`` alone, which every ``pynamodb_sharding.*`` import runs first,
loads neither PynamoDB nor botocore: the pytest plugin (``pynamodb_sharding.testing.plugin``,
loaded in every pytest run of a project that installs the package) must not import botocore,
urllib3 or ssl before the project's own ``gevent.monkey.patch_all()``. Each name stays
importable as before: ``from pynamodb_sharding import ShardedModel`` loads what it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pynamodb_sharding.descriptor import Sharding, ShardManager, shard_manager
    from pynamodb_sharding.dynamic import DynamicShards
    from pynamodb_sharding.exceptions import (
        AmbiguousLegacyKeyError,
        CapacityThrottleError,
        ConsistentIndexReadError,
        CursorError,
        DerivedAttributeUpdateError,
        FixedShardCountError,
        GrowthPolicyError,
        HomeHandoverError,
        HostContractError,
        IndexNotReadyError,
        IndexThrottleError,
        LegacyMoveError,
        LogicalKeyError,
        MetadataError,
        MetadataRequestError,
        PartialItemError,
        PeriodRangeError,
        PeriodTableMissingError,
        ShardConditionError,
        ShardCountConflictError,
        ShardingDefinitionError,
        ShardingError,
        ShardKeyError,
        ShardLocationError,
        ShardMoveError,
        ShrinkTargetError,
        SortKeyTypeError,
        UnknownIndexError,
        WriteRegionError,
    )
    from pynamodb_sharding.fanout import FanoutPoolWarning, MergedPageIterator, MergedResultIterator
    from pynamodb_sharding.metadata import ShardMetadata
    from pynamodb_sharding.model import ShardedModel
    from pynamodb_sharding.periods import PeriodTable, TimePartitioned
    from pynamodb_sharding.pool import fanout_threads, set_fanout_threads
    from pynamodb_sharding.regions import write_connection
    from pynamodb_sharding.strategies import (
        HashedShards,
        HistoryEntry,
        ItemKey,
        KeySpace,
        RandomShards,
        ResizableShardStrategy,
        ShardKey,
        ShardStrategy,
    )
    from pynamodb_sharding.throttling import (
        Throttle,
        ThrottleKind,
        ThrottleReason,
        classify,
        classify_response,
        keep_throttling_reasons,
    )

__version__ = "0.1.0"

__all__ = [
    "AmbiguousLegacyKeyError",
    "CapacityThrottleError",
    "ConsistentIndexReadError",
    "CursorError",
    "DerivedAttributeUpdateError",
    "DynamicShards",
    "FanoutPoolWarning",
    "FixedShardCountError",
    "GrowthPolicyError",
    "HashedShards",
    "HistoryEntry",
    "HomeHandoverError",
    "HostContractError",
    "IndexNotReadyError",
    "IndexThrottleError",
    "ItemKey",
    "KeySpace",
    "LegacyMoveError",
    "LogicalKeyError",
    "MergedPageIterator",
    "MergedResultIterator",
    "MetadataError",
    "MetadataRequestError",
    "PartialItemError",
    "PeriodRangeError",
    "PeriodTable",
    "PeriodTableMissingError",
    "RandomShards",
    "ResizableShardStrategy",
    "ShardConditionError",
    "ShardCountConflictError",
    "ShardKey",
    "ShardKeyError",
    "ShardLocationError",
    "ShardManager",
    "ShardMetadata",
    "ShardMoveError",
    "ShardStrategy",
    "ShardedModel",
    "Sharding",
    "ShardingDefinitionError",
    "ShardingError",
    "ShrinkTargetError",
    "SortKeyTypeError",
    "Throttle",
    "ThrottleKind",
    "ThrottleReason",
    "TimePartitioned",
    "UnknownIndexError",
    "WriteRegionError",
    "__version__",
    "classify",
    "classify_response",
    "fanout_threads",
    "keep_throttling_reasons",
    "set_fanout_threads",
    "shard_manager",
    "write_connection",
]

#: The module of the package that defines each public name (the imports above, for type checkers).
_MODULES: dict[str, tuple[str, ...]] = {
    "descriptor": ("Sharding", "ShardManager", "shard_manager"),
    "dynamic": ("DynamicShards",),
    "exceptions": (
        "AmbiguousLegacyKeyError", "CapacityThrottleError", "ConsistentIndexReadError", "CursorError",
        "DerivedAttributeUpdateError", "FixedShardCountError", "GrowthPolicyError", "HomeHandoverError",
        "HostContractError",
        "IndexNotReadyError", "IndexThrottleError", "LegacyMoveError", "LogicalKeyError", "MetadataError",
        "MetadataRequestError",
        "PartialItemError", "PeriodRangeError", "PeriodTableMissingError", "ShardConditionError",
        "ShardCountConflictError", "ShardingDefinitionError", "ShardingError", "ShardKeyError",
        "ShardLocationError", "ShardMoveError", "ShrinkTargetError", "SortKeyTypeError", "UnknownIndexError",
        "WriteRegionError",
    ),
    "fanout": ("FanoutPoolWarning", "MergedPageIterator", "MergedResultIterator"),
    "metadata": ("ShardMetadata",),
    "model": ("ShardedModel",),
    "periods": ("PeriodTable", "TimePartitioned"),
    "pool": ("fanout_threads", "set_fanout_threads"),
    "regions": ("write_connection",),
    "strategies": (
        "HashedShards", "HistoryEntry", "ItemKey", "KeySpace", "RandomShards", "ResizableShardStrategy",
        "ShardKey", "ShardStrategy",
    ),
    "throttling": ("Throttle", "ThrottleKind", "ThrottleReason", "classify", "classify_response",
                   "keep_throttling_reasons"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later uses find it without this call
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
