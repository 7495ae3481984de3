"""Write sharding for PynamoDB models."""

from pynamodb_sharding.descriptor import Sharding, ShardManager, shard_manager
from pynamodb_sharding.dynamic import DynamicShards
from pynamodb_sharding.exceptions import (
    CursorError,
    HostContractError,
    IndexThrottleError,
    MetadataError,
    MetadataRequestError,
    ShardConditionError,
    ShardingDefinitionError,
    ShardingError,
    ShardKeyError,
    ShardLocationError,
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
    "CursorError",
    "DynamicShards",
    "FanoutPoolWarning",
    "HashedShards",
    "HistoryEntry",
    "HostContractError",
    "IndexThrottleError",
    "ItemKey",
    "KeySpace",
    "MergedPageIterator",
    "MergedResultIterator",
    "MetadataError",
    "MetadataRequestError",
    "RandomShards",
    "ResizableShardStrategy",
    "ShardConditionError",
    "ShardKey",
    "ShardKeyError",
    "ShardLocationError",
    "ShardManager",
    "ShardMetadata",
    "ShardStrategy",
    "ShardedModel",
    "Sharding",
    "ShardingDefinitionError",
    "ShardingError",
    "Throttle",
    "ThrottleKind",
    "ThrottleReason",
    "__version__",
    "classify",
    "classify_response",
    "shard_manager",
]
