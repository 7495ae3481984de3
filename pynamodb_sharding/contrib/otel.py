"""OpenTelemetry metrics and spans for sharded models (``pip install 'pynamodb-sharding[otel]'``).

:func:`instrument` connects the library to OpenTelemetry until :func:`uninstrument`:

* metrics (meter ``pynamodb_sharding``):

  - ``pynamodb_sharding.throttles`` (counter): throttled writes of dynamic keys, by ``model``,
    ``kind`` (``key_range``, ``table``, ``index``) and ``reason`` (DynamoDB's first throttling
    reason, or the error code);
  - ``pynamodb_sharding.shard_count.changes`` (counter): count changes, by ``model`` and
    ``reason`` (``throttle``, ``grow``, ``shrink``);
  - ``pynamodb_sharding.shard_count`` (histogram): the new count at each change, by ``model``;
  - ``pynamodb_sharding.fanout.width`` (histogram): shards read by a merged query or count;
  - ``pynamodb_sharding.merged_read.duration`` (histogram, seconds): from the start of a merged
    query or count to its end (exhausted, ``limit`` reached, closed or dropped);

* spans (tracer ``pynamodb_sharding``): ``pynamodb_sharding.query`` or
  ``pynamodb_sharding.count`` per merged read, with a child ``pynamodb_sharding.shard_request``
  per shard request (attribute ``pynamodb_sharding.shard``, or ``pynamodb_sharding.unsharded``
  true for the bare key of a ``legacy_unsharded`` model), parented correctly although the
  requests run on the fan-out pool's threads.

Attributes name the model, table and index, never a key value: keys are unbounded in number
(one metric series each) and often personal data (user ids, paths). Without the extra, nothing
of OpenTelemetry is imported by the library.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from pynamodb_sharding import _fanout as fanout
from pynamodb_sharding._keys import LEGACY_SHARD
from pynamodb_sharding.signals import shard_count_changed, throttle_observed

__all__ = ["Instrumentation", "instrument", "uninstrument"]

_T = TypeVar("_T")


def _shard_attribute(shard: int) -> dict[str, Any]:
    # The bare key of a legacy_unsharded model is numbered internally, never shown as a shard.
    return {"pynamodb_sharding.unsharded": True} if shard == LEGACY_SHARD else {"pynamodb_sharding.shard": shard}
_SCOPE = "pynamodb_sharding"
_lock = threading.Lock()
_active: Instrumentation | None = None


class _ReadTrace:
    """One merged read: its span, its start time, its children's parent context."""

    def __init__(self, owner: Instrumentation, model: type[Any], index: str | None, shards: int,
                 operation: str) -> None:
        self._owner = owner
        self._attributes = owner.attributes(model, index)
        self._start = time.perf_counter()
        self._span = owner.tracer.start_span(
            f"pynamodb_sharding.{operation}",
            attributes={**self._attributes, "pynamodb_sharding.shards": shards},
        )
        self._context = trace.set_span_in_context(self._span)
        self._ended = False
        self._lock = threading.Lock()
        owner.fanout_width.record(shards, self._attributes)

    def shard_request(self, shard: int, call: Callable[[], _T]) -> _T:
        token = otel_context.attach(self._context)  # on a pool thread: under the read's span
        try:
            with self._owner.tracer.start_as_current_span(
                "pynamodb_sharding.shard_request",
                attributes={**self._attributes, **_shard_attribute(shard)},
            ):
                return call()
        finally:
            otel_context.detach(token)

    def end(self, error: BaseException | None = None) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        if error is not None:
            self._span.record_exception(error)
            self._span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        self._owner.duration.record(time.perf_counter() - self._start, self._attributes)
        self._span.end()


class Instrumentation:
    """The instruments :func:`instrument` created, and the hooks it installed.

    .. versionadded:: 0.1.0
    """

    def __init__(self, meter_provider: Any = None, tracer_provider: Any = None) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(_SCOPE)
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_SCOPE)
        self.throttles = meter.create_counter(
            "pynamodb_sharding.throttles", unit="{throttle}", description="Throttled writes of dynamic keys.")
        self.changes = meter.create_counter(
            "pynamodb_sharding.shard_count.changes", unit="{change}", description="Shard count changes.")
        self.shard_count = meter.create_histogram(
            "pynamodb_sharding.shard_count", unit="{shard}", description="The shard count after a change.")
        self.fanout_width = meter.create_histogram(
            "pynamodb_sharding.fanout.width", unit="{shard}", description="Shards read by a merged read.")
        self.duration = meter.create_histogram(
            "pynamodb_sharding.merged_read.duration", unit="s", description="Duration of a merged read.")

    @staticmethod
    def attributes(model: type[Any], index: str | None = None) -> dict[str, str]:
        values = {"pynamodb_sharding.model": model.__name__,
                  "pynamodb_sharding.table": str(getattr(model.Meta, "table_name", ""))}
        if index is not None:
            values["pynamodb_sharding.index"] = index
        return values

    def on_throttle(self, sender: type[Any], *, throttle: Any, **_: Any) -> None:
        reasons = getattr(throttle, "reasons", ())
        reason = reasons[0].reason if reasons else (getattr(throttle, "code", None) or "unknown")
        self.throttles.add(1, {**self.attributes(sender), "pynamodb_sharding.kind": throttle.kind.value,
                               "pynamodb_sharding.reason": reason})

    def on_change(self, sender: type[Any], *, new: int, reason: str, **_: Any) -> None:
        attributes = self.attributes(sender)
        self.changes.add(1, {**attributes, "pynamodb_sharding.change": reason})
        self.shard_count.record(new, attributes)

    def start_read(self, model: type[Any], index: str | None, shards: int, operation: str) -> _ReadTrace:
        return _ReadTrace(self, model, index, shards, operation)


def instrument(*, meter_provider: Any = None, tracer_provider: Any = None) -> Instrumentation:
    """Export the library's metrics and spans through OpenTelemetry (the global providers, or
    the ones given) until :func:`uninstrument`; instrumenting again replaces the previous one.

    .. versionadded:: 0.1.0
    """
    global _active
    with _lock:
        _disconnect()
        active = Instrumentation(meter_provider, tracer_provider)
        throttle_observed.connect(active.on_throttle, weak=False)
        shard_count_changed.connect(active.on_change, weak=False)
        fanout.query_observer = active.start_read
        _active = active
        return active


def uninstrument() -> None:
    """Stop exporting; what was recorded stays with the providers.

    .. versionadded:: 0.1.0
    """
    with _lock:
        _disconnect()


def _disconnect() -> None:
    global _active
    if _active is None:
        return
    throttle_observed.disconnect(_active.on_throttle)
    shard_count_changed.disconnect(_active.on_change)
    fanout.query_observer = None
    _active = None
