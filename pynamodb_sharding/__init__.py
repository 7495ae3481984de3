"""Write sharding for PynamoDB models."""

from pynamodb_sharding.descriptor import Sharding, ShardManager, shard_manager
from pynamodb_sharding.dynamic import DynamicShards
from pynamodb_sharding.exceptions import (
    ConsistentIndexReadError,
    CursorError,
    DerivedAttributeUpdateError,
    FixedShardCountError,
    GrowthPolicyError,
    HostContractError,
    IndexThrottleError,
    LogicalKeyError,
    MetadataError,
    MetadataRequestError,
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
)
from pynamodb_sharding.fanout import FanoutPoolWarning, MergedPageIterator, MergedResultIterator
from pynamodb_sharding.metadata import ShardMetadata
from pynamodb_sharding.model import ShardedModel
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
from pynamodb_sharding.throttling import Throttle, ThrottleKind, ThrottleReason, classify, classify_response

__version__ = "0.1.0"

__all__ = [
    "ConsistentIndexReadError",
    "CursorError",
    "DerivedAttributeUpdateError",
    "DynamicShards",
    "FanoutPoolWarning",
    "FixedShardCountError",
    "GrowthPolicyError",
    "HashedShards",
    "HistoryEntry",
    "HostContractError",
    "IndexThrottleError",
    "ItemKey",
    "KeySpace",
    "LogicalKeyError",
    "MergedPageIterator",
    "MergedResultIterator",
    "MetadataError",
    "MetadataRequestError",
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
    "UnknownIndexError",
    "__version__",
    "classify",
    "classify_response",
    "shard_manager",
]
