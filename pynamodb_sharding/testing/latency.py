"""Add a fixed round-trip latency to a model's DynamoDB requests, and count them.

DynamoDB Local answers in about a millisecond on the same machine, so the benefit of querying
shards in parallel stays invisible against it. :func:`inject_latency` makes every request of
a model's botocore client wait ``seconds`` before it is sent (a ``before-send`` handler that
sleeps and lets the request proceed), the way a network round trip to DynamoDB would, and
counts the requests sent per operation for the benchmarks' "requests sent" column.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

from pynamodb.models import Model

from pynamodb_sharding._host import botocore_client
from pynamodb_sharding._model import with_companions
from pynamodb_sharding._pool import on_event_loop, pause
from pynamodb_sharding._wire import observes_only

__all__ = ["LatencyInjector", "inject_latency", "network_pause", "record_requests"]

_instances = itertools.count(1)


class _Alarms:
    """A thread that ends the injected waits of event loops on time: when a wait's delay is over
    it sets the wait's future through the loop's ``call_soon_threadsafe``, which wakes the loop at
    once, as a reply arriving on a socket does. A loop's own timers (``asyncio.sleep``) wake it up
    to a millisecond late on Linux, because epoll waits in whole milliseconds, rounded up; no
    network adds that to a request."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._due: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._condition = threading.Condition()
        threading.Thread(target=self._run, name="pynamodb-sharding-latency", daemon=True).start()

    def at(self, deadline: float, loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
        with self._condition:
            heapq.heappush(self._due, (deadline, next(self._order), loop, waiter))
            self._condition.notify()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._condition.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, loop, waiter = heapq.heappop(self._due)
            with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
                loop.call_soon_threadsafe(_settle, waiter)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # not cancelled meanwhile
        waiter.set_result(None)


_alarms: _Alarms | None = None
_alarms_lock = threading.Lock()


def network_pause(seconds: float) -> None:
    """Wait ``seconds`` as a request waits for a network round trip: ``time.sleep`` in a thread;
    on an event loop (the async methods), a wait that yields to the loop, holding what the
    request holds meanwhile (its place among the requests in flight), and ends when a timer
    thread says so, so that the loop wakes on time (see :class:`_Alarms`).
    """
    if on_event_loop() is None:
        pause(seconds)
        return
    # On the asyncio bridge the async extra is installed.
    from pynamodb_sharding._async_transport import wait_on_loop

    global _alarms
    with _alarms_lock:
        if _alarms is None or _alarms.pid != os.getpid():  # a forked child has no such thread
            _alarms = _Alarms()
        alarms = _alarms
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    alarms.at(time.monotonic() + seconds, loop, waiter)
    wait_on_loop(waiter)


class LatencyInjector:
    """The state of one :func:`inject_latency` block: the delay and the requests counted.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        seconds: float,
        operations: Collection[str] | None,
        sleep: Callable[[float], None],
        record_bodies: bool = False,
    ) -> None:
        self.seconds = seconds
        self.operations = frozenset(operations) if operations is not None else None
        self._sleep = sleep
        self._lock = threading.Lock()
        self._requests: Counter[str] = Counter()
        self._record_bodies = record_bodies
        self._sent: list[tuple[str, bytes]] = []
        self.unique_id = f"pynamodb_sharding.latency.{next(_instances)}"

    def bodies(self, operation: str | None = None) -> list[dict[str, Any]]:
        """The JSON bodies of the requests sent (of ``operation`` only, if given), in order.

        Only recorded by :func:`record_requests`.
        """
        with self._lock:
            sent = list(self._sent)
        return [json.loads(body) for name, body in sent if operation is None or name == operation]

    @property
    def requests(self) -> dict[str, int]:
        """Requests sent per operation (every attempt, retries included), delayed or not."""
        with self._lock:
            return dict(self._requests)

    @property
    def total_requests(self) -> int:
        """All requests sent while the injector was active."""
        with self._lock:
            return sum(self._requests.values())

    @observes_only  # it only observes: merged queries keep their fast path
    def _on_before_send(self, event_name: str, request: Any = None, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        with self._lock:
            self._requests[operation] += 1
            if self._record_bodies and request is not None:
                self._sent.append((operation, bytes(request.body or b"{}")))
        if self.seconds > 0 and (self.operations is None or operation in self.operations):
            # Sleeping outside the lock: concurrent requests wait side by side, as they would
            # on concurrent connections.
            self._sleep(self.seconds)


def clients_of(models: Iterable[type[Model]]) -> list[Any]:
    """The distinct botocore clients of the models and of their companion models."""
    clients: list[Any] = []
    for model in with_companions(models):
        client = botocore_client(model)
        if not any(client is known for known in clients):
            clients.append(client)
    return clients


@contextlib.contextmanager
def inject_latency(
    model: type[Model],
    seconds: float,
    *,
    operations: Collection[str] | None = None,
    extra_models: Iterable[type[Model]] = (),
    sleep: Callable[[float], None] = network_pause,
    record_bodies: bool = False,
) -> Iterator[LatencyInjector]:
    """Delay every request of ``model``'s client by ``seconds`` and count requests.

    Hooks the botocore client of ``model``, of its companion models and of ``extra_models``;
    leaves every client as it was on exit. Enter it after the models are bound to their server.

    Args:
        model: The model whose requests are delayed.
        seconds: The delay added before each request is sent.
        operations: Only delay these operations (``"Query"``, ``"PutItem"``...); all by default.
            Every request is counted either way.
        extra_models: More models whose clients get the same delay and counter.
        sleep: How to wait (default :func:`network_pause`: ``time.sleep``, and on an event
            loop, for the async methods, a wait that yields to the loop and wakes it on time,
            as a reply on a socket would); inject one to observe delays without waiting.
        record_bodies: Keep every request's body for :meth:`LatencyInjector.bodies` (tests;
            a benchmark sending many requests should not).

    Yields:
        The :class:`LatencyInjector`, whose ``requests`` counts the requests sent.

    Raises:
        ValueError: ``seconds`` is negative.

    .. versionadded:: 0.1.0
    """
    if not seconds >= 0:
        msg = f"inject_latency: a delay of {seconds!r} seconds is not possible; pass 0 or more"
        raise ValueError(msg)
    injector = LatencyInjector(seconds, operations, sleep, record_bodies)
    hooked: list[Any] = []
    try:
        for client in clients_of([model, *extra_models]):
            hooked.append(client)
            client.meta.events.register("before-send.dynamodb", injector._on_before_send, unique_id=injector.unique_id)
        yield injector
    finally:
        for client in hooked:
            client.meta.events.unregister("before-send.dynamodb", unique_id=injector.unique_id)


@contextlib.contextmanager
def record_requests(model: type[Model], *, extra_models: Iterable[type[Model]] = ()) -> Iterator[LatencyInjector]:
    """Count, and keep the bodies of, the requests ``model``'s client sends; no delay.

    For tests that prove how many requests an operation costs (``get`` of a hashed key is one
    ``GetItem``) or what it sent. Covers companion models and ``extra_models`` like
    :func:`inject_latency`.

    Yields:
        The :class:`LatencyInjector`: ``requests`` per operation, ``bodies(operation)``.

    .. versionadded:: 0.1.0
    """
    with inject_latency(model, 0.0, extra_models=extra_models, record_bodies=True) as recorder:
        yield recorder
