"""Test support: DynamoDB Local (install, serve), model binding, the partition-limit simulator,
latency injection, a global-tables replicator, and the pytest plugin."""

from pynamodb_sharding.testing.binding import ModelBinding, bound_models
from pynamodb_sharding.testing.latency import LatencyInjector, inject_latency, record_requests
from pynamodb_sharding.testing.local import (
    DynamoDBLocal,
    DynamoDBLocalError,
    DynamoDBLocalWarning,
    ServerProcess,
    install,
    running_dynamodb_local,
    serve,
)
from pynamodb_sharding.testing.replication import Replicator
from pynamodb_sharding.testing.simulator import PartitionLimitSimulator, simulate_partition_limits

__all__ = [
    "DynamoDBLocal",
    "DynamoDBLocalError",
    "DynamoDBLocalWarning",
    "LatencyInjector",
    "ModelBinding",
    "PartitionLimitSimulator",
    "Replicator",
    "ServerProcess",
    "bound_models",
    "inject_latency",
    "install",
    "record_requests",
    "running_dynamodb_local",
    "serve",
    "simulate_partition_limits",
]
