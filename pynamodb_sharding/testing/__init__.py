"""Test support: DynamoDB Local (install, serve), model binding, the partition-limit simulator,
the fleet simulator, latency injection, a global-tables replicator, the loopback-only guard, and
the pytest plugin.

The names below are loaded when first used (PEP 562 ``__getattr__``), like the package's own:
the pytest plugin lives in this package, and importing it must not load PynamoDB or botocore
before a test suite's ``gevent.monkey.patch_all()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynamodb_sharding._lazy import lazy_exports

if TYPE_CHECKING:
    from pynamodb_sharding.testing.binding import ModelBinding, SharedTableError, bound_models
    from pynamodb_sharding.testing.botocore_data import shared_botocore_data
    from pynamodb_sharding.testing.fleet import (
        EventLoop,
        Fleet,
        FleetDynamoDB,
        FleetReport,
        Scenario,
        run_scenario,
    )
    from pynamodb_sharding.testing.guard import LoopbackGuard, UnboundModelError
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
    from pynamodb_sharding.testing.simulator import LoadClock, PartitionLimitSimulator, simulate_partition_limits

__all__ = [
    "DynamoDBLocal",
    "DynamoDBLocalError",
    "DynamoDBLocalWarning",
    "EventLoop",
    "Fleet",
    "FleetDynamoDB",
    "FleetReport",
    "LatencyInjector",
    "LoadClock",
    "LoopbackGuard",
    "ModelBinding",
    "PartitionLimitSimulator",
    "Replicator",
    "Scenario",
    "ServerProcess",
    "SharedTableError",
    "UnboundModelError",
    "bound_models",
    "inject_latency",
    "install",
    "record_requests",
    "run_scenario",
    "running_dynamodb_local",
    "serve",
    "shared_botocore_data",
    "simulate_partition_limits",
]

#: The module of this package that defines each public name (the imports above, for type checkers).
_MODULES: dict[str, tuple[str, ...]] = {
    "binding": ("ModelBinding", "SharedTableError", "bound_models"),
    "botocore_data": ("shared_botocore_data",),
    "fleet": ("EventLoop", "Fleet", "FleetDynamoDB", "FleetReport", "Scenario", "run_scenario"),
    "guard": ("LoopbackGuard", "UnboundModelError"),
    "latency": ("LatencyInjector", "inject_latency", "record_requests"),
    "local": (
        "DynamoDBLocal", "DynamoDBLocalError", "DynamoDBLocalWarning", "ServerProcess", "install",
        "running_dynamodb_local", "serve",
    ),
    "replication": ("Replicator",),
    "simulator": ("LoadClock", "PartitionLimitSimulator", "simulate_partition_limits"),
}
__getattr__, __dir__ = lazy_exports(__name__, _MODULES, __all__, globals())
