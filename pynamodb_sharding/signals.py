"""Signals applications connect to in order to log or meter sharding events.

Like :mod:`pynamodb.signals` these are blinker signals when blinker is installed, and silent
no-ops otherwise (connecting to one then raises ``RuntimeError``). They live in their own
namespace, not PynamoDB's::

    from pynamodb_sharding.signals import shard_count_changed

    @shard_count_changed.connect
    def log_growth(sender, key, old, new, reason, **extra):
        logger.info("%s %r: %d -> %d shards (%s)", sender.__name__, key, old, new, reason)

.. versionadded:: 0.1.0
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "home_request_dropped",
    "shard_count_changed",
    "signals_available",
    "throttle_observed",
    "warm_throughput_exceeded",
]


class _FakeSignal:
    """Stands in for a blinker signal when blinker is missing: sending does nothing."""

    def __init__(self, name: str, doc: str | None = None) -> None:
        self.name = name
        self.__doc__ = doc

    def send(self, *args: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        return []

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        msg = "signalling support is unavailable because the blinker library is not installed."
        raise RuntimeError(msg)

    connect = disconnect = has_receivers_for = receivers_for = connected_to = _fail


class _FakeNamespace:
    def signal(self, name: str, doc: str | None = None) -> _FakeSignal:
        return _FakeSignal(name, doc)


signals_available: bool
try:
    from blinker import Namespace
except ImportError:  # pragma: no cover - blinker is a test dependency, optional at run time
    _signals: Any = _FakeNamespace()
    signals_available = False
else:
    _signals = Namespace()
    signals_available = True

#: Sent when this process changes the shard count of a key (growth after a throttle, an
#: explicit ``grow`` or ``shrink``). ``sender`` is the sharded model class; keyword
#: arguments: ``key`` (the logical key), ``old`` and ``new`` (counts), ``reason``
#: (``"throttle"``, ``"grow"`` or ``"shrink"``).
shard_count_changed = _signals.signal(
    "shard_count_changed",
    doc="The shard count of a logical key changed: sender=model, key, old, new, reason.",
)

#: Sent when a write of a dynamically sharded model is throttled. ``sender`` is the model
#: class; keyword arguments: ``key`` (the logical key) and ``throttle`` (a
#: :class:`pynamodb_sharding.Throttle`, whose ``kind`` says whether more shards help).
throttle_observed = _signals.signal(
    "throttle_observed",
    doc="A write was throttled: sender=model, key, throttle.",
)

#: Sent when proactive growth (``DynamicShards(target_utilization=...)``) takes a key past the
#: warm write throughput ``DescribeTable`` reports for the table: ``shards x
#: partition_write_units`` is more than the table can take until it is warmed up
#: (``UpdateTable WarmThroughput``). ``sender`` is the model class; keyword arguments: ``key``,
#: ``shards`` (the new count), ``wanted`` (units/s the shards could take) and
#: ``warm_write_units``.
warm_throughput_exceeded = _signals.signal(
    "warm_throughput_exceeded",
    doc="A key grew past the table's warm write throughput: sender=model, key, shards, wanted, warm_write_units.",
)

#: Sent when a best-effort request to the metadata model's home region (``Meta.home_region``)
#: is given up because the home region cannot be reached: a rate report of proactive growth, or
#: a growth on a throttle; the write that caused it goes on at once with the count it has.
#: ``sender`` is the model class; keyword arguments: ``key``, ``request`` (``"rate report"``
#: or ``"growth"``) and ``error`` (the exception).
home_request_dropped = _signals.signal(
    "home_request_dropped",
    doc="A best-effort request to the unreachable home region was dropped: sender=model, key, request, error.",
)
