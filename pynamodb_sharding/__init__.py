"""Write sharding for PynamoDB models."""

from pynamodb_sharding.exceptions import (
    CursorError,
    MetadataError,
    ShardingDefinitionError,
    ShardingError,
    ShardKeyError,
    ShardLocationError,
)

__version__ = "0.1.0"

__all__ = [
    "CursorError",
    "MetadataError",
    "ShardKeyError",
    "ShardLocationError",
    "ShardingDefinitionError",
    "ShardingError",
    "__version__",
]
