"""Write sharding for PynamoDB models: the public names, re-exported from the private modules
that implement them (``pynamodb_sharding._model``, ``._strategies``, ``._exceptions`` ...).

The names are loaded when first used (PEP 562 ``__getattr__``), so that ``import
pynamodb_sharding`` alone, which every ``pynamodb_sharding.*`` import runs first, loads neither
PynamoDB nor botocore: the pytest plugin (``pynamodb_sharding.testing.plugin``, loaded in every
pytest run of a project that installs the package) must not import botocore, urllib3 or ssl
before the project's own ``gevent.monkey.patch_all()``. ``from pynamodb_sharding import
ShardedModel`` loads what it needs. The public modules beside this one are ``migration``,
``legacy``, ``rotation``, ``capacity``, ``signals``, ``testing``, ``recipes`` and ``contrib``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynamodb_sharding._lazy import lazy_exports

if TYPE_CHECKING:
    from pynamodb_sharding._descriptor import Sharding, ShardManager, shard_manager
    from pynamodb_sharding._dynamic import DynamicShards
    from pynamodb_sharding._exceptions import (
        AmbiguousLegacyKeyError,
        ArchiveError,
        CapacityThrottleError,
        ConsistentIndexReadError,
        CursorError,
        DeliveryConflictError,
        DeliveryDataError,
        DeliveryError,
        DeliveryExistsError,
        DeliveryInputError,
        DeliveryNotFoundError,
        DeliveryNotReadyError,
        DerivedAttributeUpdateError,
        FixedShardCountError,
        FleetProtocolError,
        GrowthPolicyError,
        HomeHandoverError,
        HostContractError,
        IndexNotReadyError,
        IndexThrottleError,
        ItemLocationError,
        LegacyItemError,
        LegacyMoveError,
        LogicalKeyError,
        MetadataError,
        MetadataRequestError,
        MigrationError,
        PartialItemError,
        PeriodRangeError,
        PeriodsMissingError,
        PeriodsMissingWarning,
        PeriodTableMissingError,
        PeriodTableNotActiveError,
        ShardConditionError,
        ShardCountConflictError,
        ShardCountLoweredError,
        ShardingDefinitionError,
        ShardingError,
        ShardKeyError,
        ShardLocationError,
        ShardMoveError,
        ShardRequestError,
        ShrinkTargetError,
        SortKeyTypeError,
        UnknownIndexError,
        WriteRegionError,
    )
    from pynamodb_sharding._fanout import FanoutPoolWarning
    from pynamodb_sharding._fleet import fleet_protocol, store_fleet_protocol
    from pynamodb_sharding._home import HomeMove, move_home
    from pynamodb_sharding._merged_results import MergedPageIterator, MergedResultIterator
    from pynamodb_sharding._metadata import ShardCountsKeptWarning, ShardMetadata
    from pynamodb_sharding._model import ShardedIndex, ShardedModel
    from pynamodb_sharding._periods import PeriodTable, TimePartitioned
    from pynamodb_sharding._pool import fanout_threads, set_fanout_threads
    from pynamodb_sharding._protocol import FleetProtocol, StoredProtocol
    from pynamodb_sharding._regions import write_connection
    from pynamodb_sharding._replicas import add_read_replicas
    from pynamodb_sharding._schedule import Schedule
    from pynamodb_sharding._strategies import (
        HashedShards,
        HistoryEntry,
        ItemKey,
        KeySpace,
        RandomShards,
        ResizableShardStrategy,
        ShardKey,
        ShardStrategy,
    )
    from pynamodb_sharding._throttling import (
        Throttle,
        ThrottleKind,
        ThrottleReason,
        classify,
        classify_response,
        keep_throttling_reasons,
    )
    from pynamodb_sharding._wire import observes_only

__version__ = "0.2.0"

__all__ = [
    "AmbiguousLegacyKeyError",
    "ArchiveError",
    "CapacityThrottleError",
    "ConsistentIndexReadError",
    "CursorError",
    "DeliveryConflictError",
    "DeliveryDataError",
    "DeliveryError",
    "DeliveryExistsError",
    "DeliveryInputError",
    "DeliveryNotFoundError",
    "DeliveryNotReadyError",
    "DerivedAttributeUpdateError",
    "DynamicShards",
    "FanoutPoolWarning",
    "FixedShardCountError",
    "FleetProtocol",
    "FleetProtocolError",
    "GrowthPolicyError",
    "HashedShards",
    "HistoryEntry",
    "HomeHandoverError",
    "HomeMove",
    "HostContractError",
    "IndexNotReadyError",
    "IndexThrottleError",
    "ItemKey",
    "ItemLocationError",
    "KeySpace",
    "LegacyItemError",
    "LegacyMoveError",
    "LogicalKeyError",
    "MergedPageIterator",
    "MergedResultIterator",
    "MetadataError",
    "MetadataRequestError",
    "MigrationError",
    "PartialItemError",
    "PeriodRangeError",
    "PeriodTable",
    "PeriodTableMissingError",
    "PeriodTableNotActiveError",
    "PeriodsMissingError",
    "PeriodsMissingWarning",
    "RandomShards",
    "ResizableShardStrategy",
    "Schedule",
    "ShardConditionError",
    "ShardCountConflictError",
    "ShardCountLoweredError",
    "ShardCountsKeptWarning",
    "ShardKey",
    "ShardKeyError",
    "ShardLocationError",
    "ShardManager",
    "ShardMetadata",
    "ShardMoveError",
    "ShardRequestError",
    "ShardStrategy",
    "ShardedIndex",
    "ShardedModel",
    "Sharding",
    "ShardingDefinitionError",
    "ShardingError",
    "ShrinkTargetError",
    "SortKeyTypeError",
    "StoredProtocol",
    "Throttle",
    "ThrottleKind",
    "ThrottleReason",
    "TimePartitioned",
    "UnknownIndexError",
    "WriteRegionError",
    "__version__",
    "add_read_replicas",
    "classify",
    "classify_response",
    "fanout_threads",
    "fleet_protocol",
    "keep_throttling_reasons",
    "move_home",
    "observes_only",
    "set_fanout_threads",
    "shard_manager",
    "store_fleet_protocol",
    "write_connection",
]

#: The private module that defines each public name (the imports above, for type checkers).
_MODULES: dict[str, tuple[str, ...]] = {
    "_descriptor": ("Sharding", "ShardManager", "shard_manager",),
    "_dynamic": ("DynamicShards",),
    "_exceptions": (
        "AmbiguousLegacyKeyError", "ArchiveError", "CapacityThrottleError", "ConsistentIndexReadError",
        "CursorError", "DeliveryConflictError", "DeliveryDataError", "DeliveryError", "DeliveryExistsError",
        "DeliveryInputError", "DeliveryNotFoundError", "DeliveryNotReadyError", "DerivedAttributeUpdateError",
        "FixedShardCountError", "FleetProtocolError", "GrowthPolicyError", "HomeHandoverError", "HostContractError",
        "IndexNotReadyError",
        "IndexThrottleError",
        "ItemLocationError", "LegacyItemError", "LegacyMoveError", "LogicalKeyError", "MetadataError",
        "MetadataRequestError",
        "MigrationError", "PartialItemError", "PeriodRangeError", "PeriodsMissingError", "PeriodsMissingWarning",
        "PeriodTableMissingError", "PeriodTableNotActiveError", "ShardConditionError", "ShardCountConflictError",
        "ShardCountLoweredError", "ShardingDefinitionError", "ShardingError", "ShardKeyError", "ShardLocationError",
        "ShardMoveError",
        "ShardRequestError", "ShrinkTargetError", "SortKeyTypeError", "UnknownIndexError",
        "WriteRegionError",
    ),
    "_fanout": ("FanoutPoolWarning",),
    "_fleet": ("fleet_protocol", "store_fleet_protocol",),
    "_merged_results": ("MergedPageIterator", "MergedResultIterator",),
    "_home": ("HomeMove", "move_home",),
    "_metadata": ("ShardCountsKeptWarning", "ShardMetadata",),
    "_model": ("ShardedIndex", "ShardedModel"),
    "_periods": ("PeriodTable", "TimePartitioned",),
    "_pool": ("fanout_threads", "set_fanout_threads",),
    "_protocol": ("FleetProtocol", "StoredProtocol",),
    "_regions": ("write_connection",),
    "_replicas": ("add_read_replicas",),
    "_schedule": ("Schedule",),
    "_strategies": (
        "HashedShards", "HistoryEntry", "ItemKey", "KeySpace", "RandomShards", "ResizableShardStrategy", "ShardKey",
        "ShardStrategy",
    ),
    "_wire": ("observes_only",),
    "_throttling": (
        "Throttle", "ThrottleKind", "ThrottleReason", "classify", "classify_response", "keep_throttling_reasons",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES, __all__, globals())
