"""The hot-key demo behind ``pynamodb-sharding demo`` (a hot audit-log key, with real requests).

Three modules, in the order the demo runs them:

- :mod:`~pynamodb_sharding.demo.scenario`: the unsharded and the dynamic load on DynamoDB
  Local, the samples and the exactly-once read-back check; needs no terminal and neither
  rich nor matplotlib.
- :mod:`~pynamodb_sharding.demo.display`: the live view, the summary table and the verdict
  (rich), and :func:`run_demo`, which ties them together.
- :mod:`~pynamodb_sharding.demo.chart`: the PNG chart of write rate and shard count (matplotlib).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynamodb_sharding.demo.scenario import (
    DemoConfig,
    DemoResult,
    PhaseResult,
    ReadBackCheck,
    ScenarioView,
    SilentView,
    check_read_back,
    run_scenario,
)

if TYPE_CHECKING:
    from pynamodb_sharding.demo.display import run_demo

__all__ = [
    "DemoConfig",
    "DemoResult",
    "PhaseResult",
    "ReadBackCheck",
    "ScenarioView",
    "SilentView",
    "check_read_back",
    "run_demo",
    "run_scenario",
]


def __getattr__(name: str) -> Any:
    # run_demo needs rich and matplotlib (the demo extra): they are imported when it is first
    # asked for, so that the scenario imports and runs without them.
    if name == "run_demo":
        from pynamodb_sharding.demo.display import run_demo

        return run_demo
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
