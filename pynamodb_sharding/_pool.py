"""The one process-wide thread pool that runs the shard requests of every merged read.

Every merged query and count submits its shard requests to one bounded pool shared by the
whole process, so a web server answering many requests at once runs at most
:func:`fanout_threads` fan-out threads, however many queries are in flight. Each query keeps its
own cap (``Sharding(max_workers=...)``, default ``min(32, shards)``): a
:class:`BoundedSubmitter` lets at most that many of its requests run at a time and queues the
rest itself, so one 64-shard query cannot take every thread from the others.

The tasks only send requests: none waits for another task of the pool, so a full pool delays
queries but never deadlocks them. After ``fork`` (gunicorn or uWSGI with a preloaded app) the
child never touches the parent's pool, whose threads do not exist there: it starts a pool of
its own on first use.

No PynamoDB import: the merge and the counts use it on plain callables.

The asyncio entry points (``aquery``, ``acount``... see :mod:`pynamodb_sharding._async_transport`)
run the same code on an event loop. While they do, the "threads" of this module are tasks of
that loop: :func:`fanout_executor` and :class:`BoundedSubmitter` start each call as a task, the
futures they return wait by yielding to the loop, and :func:`new_future` and :func:`pause` do
the same for the code that waits on another caller's request or sleeps. The loop side registers
itself with :func:`set_event_loop_bridge`; without it nothing here changes.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from pynamodb_sharding._forks import at_fork

__all__ = [
    "DEFAULT_FANOUT_THREADS",
    "BoundedSubmitter",
    "declare_workers",
    "fanout_executor",
    "fanout_size_source",
    "fanout_submit",
    "fanout_threads",
    "hedging_scheduler",
    "new_future",
    "new_lock",
    "on_event_loop",
    "pause",
    "set_event_loop_bridge",
    "set_fanout_threads",
]

_T = TypeVar("_T")

#: Threads of the shared pool unless :func:`set_fanout_threads` or the environment variable
#: ``PYNAMODB_SHARDING_FANOUT_THREADS`` says otherwise.
DEFAULT_FANOUT_THREADS = 32
_ENVIRONMENT = "PYNAMODB_SHARDING_FANOUT_THREADS"

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_executor_pid = 0
_size: int | None = None
#: The largest ``Sharding(max_workers=...)`` of the models declared in this process.
_declared = 0


class EventLoopBridge(Protocol):
    """What runs this module's calls as tasks of an event loop (the asyncio entry points)."""

    def executor(self) -> Executor | None:
        """The executor of the caller's event loop; ``None`` when the caller is not on one."""

    def future(self) -> Future[Any]:
        """A future whose ``result()`` waits by yielding to the event loop."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` by yielding to the event loop."""

    def link(self, outer: Future[Any], inner: Future[Any]) -> None:
        """Cancelling ``outer`` cancels the task that runs ``inner``."""

    def lock(self) -> AbstractContextManager[Any]:
        """A lock of the caller's event loop: waiting for it yields to the loop."""

    def hedging_scheduler(self) -> Any:
        """A :class:`pynamodb_sharding._hedging.Scheduler` over the caller's event loop: its
        attempts are tasks of the loop and its waits yield to the loop."""


_bridge: EventLoopBridge | None = None


def set_event_loop_bridge(bridge: EventLoopBridge) -> None:
    """Let calls made from the asyncio entry points run on their event loop (set once, on import)."""
    global _bridge
    _bridge = bridge


def on_event_loop() -> Executor | None:
    """The event loop's executor when the caller runs on the asyncio bridge, else ``None``."""
    bridge = _bridge
    return None if bridge is None else bridge.executor()


def new_future() -> Future[Any]:
    """A future for a result another caller computes: its ``result()`` yields to the event loop
    on the asyncio bridge, where blocking the thread would stop the loop."""
    bridge = _bridge
    if bridge is not None and bridge.executor() is not None:
        return bridge.future()
    return Future()


_K = TypeVar("_K")
_V = TypeVar("_V")


def single_flight(lock: AbstractContextManager[Any], flights: dict[_K, Future[_V]], key: _K,
                  call: Callable[[], _V], keep: Callable[[_V], _V],
                  kept: Callable[[], _V | None] = lambda: None) -> _V:
    """Run ``call`` once for every caller asking for ``key`` at the same time: the first runs it
    (``flights`` holds its future meanwhile, under ``lock``), the others wait for its result
    (yielding on the asyncio bridge). ``keep(result)`` runs under ``lock`` as the flight ends
    (caching it) and gives what every caller gets; an exception is raised to them all.

    ``kept()`` (under ``lock``) gives what a flight that ended since the caller last looked kept,
    or ``None``: a caller that missed the cache just before a flight ended takes its result
    instead of starting another."""
    mine: Future[_V] = new_future()
    with lock:
        ready = kept()
        if ready is not None:
            return ready
        flight = flights.setdefault(key, mine)
    if flight is not mine:
        return flight.result()
    try:
        result = call()
    except BaseException as exc:
        with lock:
            flights.pop(key, None)
        mine.set_exception(exc)
        raise
    with lock:
        flights.pop(key, None)
        result = keep(result)
    mine.set_result(result)
    return result


def new_lock() -> AbstractContextManager[Any]:
    """A ``threading.Lock``, or on the asyncio bridge a lock whose wait yields to the event loop
    (the greenlets of one loop share its thread: a thread lock held across a yield would block
    the loop)."""
    bridge = _bridge
    if bridge is not None and bridge.executor() is not None:
        return bridge.lock()
    return threading.Lock()


def hedging_scheduler() -> Any | None:
    """On the asyncio bridge, the event loop's hedging scheduler; else ``None`` (threads)."""
    bridge = _bridge
    if bridge is not None and bridge.executor() is not None:
        return bridge.hedging_scheduler()
    return None


#: What :func:`pause` sleeps with off the asyncio bridge (``None``: ``time.sleep``); the fleet
#: simulator sets its virtual clock's sleep here while it runs.
_sleep: Callable[[float], None] | None = None


def pause(seconds: float) -> None:
    """``time.sleep``, or a wait that yields to the event loop on the asyncio bridge."""
    bridge = _bridge
    if bridge is not None and bridge.executor() is not None:
        bridge.sleep(seconds)
    else:
        (_sleep or time.sleep)(seconds)


def _explicit_size() -> int | None:
    """The pool size set by :func:`set_fanout_threads` or the environment variable, else ``None``."""
    if _size is not None:
        return _size
    text = os.environ.get(_ENVIRONMENT)
    if text is None or not text.strip():  # unset, or left empty (an .env template's blank)
        return None
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < 1:
        msg = f"{_ENVIRONMENT}={text!r}: expected a positive number of threads, e.g. {DEFAULT_FANOUT_THREADS}."
        raise ValueError(msg)
    return size


def _configured_size() -> int:
    explicit = _explicit_size()
    return explicit if explicit is not None else max(DEFAULT_FANOUT_THREADS, _declared)


def fanout_size_source() -> str | None:
    """What set the pool's size: ``"set_fanout_threads"``, the environment variable's name, or
    ``None`` when it is the default (32, or the largest ``max_workers`` declared)."""
    if _size is not None:
        return "set_fanout_threads"
    return None if _explicit_size() is None else _ENVIRONMENT


def declare_workers(threads: int) -> None:
    """A model declared ``Sharding(max_workers=threads)``: unless its size was set, the shared
    pool grows to at least that many threads, so that one of its queries can run them all at
    once, as declared (a 64-shard page in one round, not two)."""
    global _declared, _executor
    with _lock:
        if threads <= _declared:
            return
        _declared = threads
        try:
            explicit = _explicit_size()
        except ValueError:
            return  # a malformed environment variable: the first merged read raises, naming it
        if explicit is not None or threads <= DEFAULT_FANOUT_THREADS:
            return
        old, _executor = _executor, None
    if old is not None and _executor_pid == os.getpid():
        old.shutdown(wait=False)  # its queued and running requests still complete


def fanout_threads() -> int:
    """The size of the shared fan-out pool: the most threads all merged reads use at once.

    What :func:`set_fanout_threads` or ``PYNAMODB_SHARDING_FANOUT_THREADS`` set; otherwise 32,
    or the largest ``Sharding(max_workers=...)`` of the models declared so far when that is more.

    .. versionadded:: 0.1.0
    """
    return _configured_size()


def set_fanout_threads(threads: int | None) -> None:
    """Set the size of the shared fan-out pool (by default ``PYNAMODB_SHARDING_FANOUT_THREADS``,
    else 32 grown to the largest ``max_workers`` declared).

    Call it at start-up (e.g. in a Django ``AppConfig.ready`` or a Flask app factory). Requests
    already started finish on the previous pool; every later one, also of a query already
    running, goes to a pool of the new size. A size
    set here is kept even below a model's ``Sharding(max_workers=...)``: that model's queries then
    run at most this many requests at once, and warn once (``FanoutPoolWarning``). ``None``
    goes back to the default: the environment variable, else 32 or the largest ``max_workers``
    declared.

    Raises:
        ValueError: ``threads`` is not a positive int or ``None``.

    .. versionadded:: 0.1.0
    """
    global _size, _executor
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        msg = f"set_fanout_threads({threads!r}): expected a positive int, e.g. {DEFAULT_FANOUT_THREADS}, or None."
        raise ValueError(msg)
    with _lock:
        _size = threads
        old, _executor = _executor, None
    if old is not None and _executor_pid == os.getpid():
        old.shutdown(wait=False)  # its queued and running requests still complete


def fanout_executor() -> Executor:
    """The shared pool of this process, created on first use (again in a forked child); on the
    asyncio bridge, the executor of the caller's event loop.

    .. versionadded:: 0.1.0
    """
    global _executor, _executor_pid
    on_loop = on_event_loop()
    if on_loop is not None:
        return on_loop
    pid = os.getpid()
    executor = _executor
    if executor is not None and _executor_pid == pid:
        return executor
    with _lock:
        if _executor is None or _executor_pid != pid:
            # In a forked child the parent's pool is dropped untouched: its threads are gone.
            _executor = ThreadPoolExecutor(_configured_size(), thread_name_prefix="pynamodb-sharding-fanout")
            _executor_pid = pid
        return _executor


def fanout_submit(function: Callable[..., _T], *args: Any) -> Future[_T]:
    """``fanout_executor().submit(function, *args)``, made again on the new pool when the pool
    was replaced meanwhile (:func:`set_fanout_threads`, a model declaring a larger
    ``max_workers``: :func:`declare_workers`), whose predecessor refuses new work once shut
    down. Raises what ``submit`` raises when the pool was not replaced (the interpreter is
    shutting down)."""
    for _ in range(8):
        executor = fanout_executor()
        try:
            return executor.submit(function, *args)
        except RuntimeError:
            if fanout_executor() is executor:
                raise
    return fanout_executor().submit(function, *args)  # replaced 8 times meanwhile: once more


class BoundedSubmitter:
    """Runs callables on the shared pool, at most ``limit`` of them at a time.

    What is over the limit waits in this submitter's own queue (not in a pool thread), and
    starts when one of its running calls ends. The futures it returns can be cancelled until
    their call starts. Create a new one in a forked child (its lock may have been held at the
    fork).

    .. versionadded:: 0.1.0
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._lock = threading.Lock()
        self._running = 0
        self._queue: deque[tuple[Future[Any], Callable[[], Any]]] = deque()

    def submit(self, function: Callable[..., _T], *args: Any) -> Future[_T]:
        """Schedule ``function(*args)``; returns its future."""
        future: Future[_T] = new_future()
        with self._lock:
            if self._running >= self.limit:
                self._queue.append((future, lambda: function(*args)))
                return future
            self._running += 1
        self._start(future, lambda: function(*args))
        return future

    def _start(self, future: Future[Any], call: Callable[[], Any]) -> None:
        try:
            inner = fanout_submit(self._run, future, call)
            if _bridge is not None:
                _bridge.link(future, inner)
        except BaseException as exc:  # the interpreter is shutting down
            self._finished()
            if future.set_running_or_notify_cancel():
                future.set_exception(exc)

    def _run(self, future: Future[Any], call: Callable[[], Any]) -> None:
        try:
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        finally:
            self._finished()

    def _finished(self) -> None:
        with self._lock:
            if not self._queue:
                self._running -= 1
                return
            future, call = self._queue.popleft()
        self._start(future, call)

    def cancel_queued(self) -> None:
        """Cancel every call that has not started."""
        with self._lock:
            queued, self._queue = list(self._queue), deque()
        for future, _call in queued:
            future.cancel()


def _after_fork_in_child() -> None:
    global _lock, _executor
    _lock = threading.Lock()  # replaced, not released: a parent's thread may have held it
    _executor = None


at_fork(after_in_child=_after_fork_in_child)
