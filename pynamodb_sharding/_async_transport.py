"""The asyncio side's transport: the library's own request code, run on an event loop.

The async methods (``aquery``, ``ascan``, ``acount``, ``aget``, ``abatch_get``, ``asave``,
``aupdate``, ``adelete``, ``arefresh``, the batch writes and transactions) run exactly the code
the sync methods run: the same planning, shard choice, metadata reads, growth, merge, cursor,
PynamoDB's request building and botocore's serialization, signing, retries, event hooks and
parsing. Only two things differ, and both live here:

- **Where the code runs.** Each call runs in a greenlet driven by a task of the caller's event
  loop (the way SQLAlchemy's asyncio extension runs its sync core): where the sync code would
  block (an HTTP round trip, a pause between retries, a wait on another caller's request), the
  greenlet hands an awaitable to its task, which awaits it and resumes the greenlet with the
  result. The "threads" of a merged query are tasks of the same loop
  (:func:`pynamodb_sharding._pool.set_event_loop_bridge`): no thread per request.
- **How bytes are sent.** A botocore client used from the loop sends each request over a
  connection of that loop (:func:`pynamodb_sharding._host.route_http_sends`,
  :mod:`pynamodb_sharding._async_http`): botocore prepares and signs the request, the loop
  writes its bytes and httptools reads the reply, botocore parses it and decides on retries as
  it always does. A call from a thread that is not on the loop uses the client's own HTTP
  session, unchanged.

aiobotocore is not used: its releases pin botocore to three patch versions (aiobotocore 3.10:
``botocore>=1.43.115,<1.43.118``), which no project using boto3 1.44 could install, and its
client would need PynamoDB's request building redone beside it. greenlet and httptools pin
nothing of botocore's. Both come with the ``[async]`` extra; the bare install imports neither.

Requests in flight on one event loop are capped at :data:`DEFAULT_ASYNC_REQUESTS` (or the
environment variable ``PYNAMODB_SHARDING_ASYNC_REQUESTS``); those of one merged query at its
``max_workers``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

try:
    import greenlet
    import httptools  # noqa: F401  (used by _async_http; imported here for the message)
except ImportError as error:  # pragma: no cover - the bare install
    msg = (
        "pynamodb_sharding's async methods (aquery, aget, asave, aupdate...) need greenlet and "
        f"httptools, and {error.name or 'one of them'} is not installed: pip install 'pynamodb-sharding[async]'."
    )
    raise ImportError(msg) from error
from botocore.awsrequest import AWSResponse

from pynamodb_sharding import _async_http, _pool
from pynamodb_sharding._host import (
    RawExchange,
    add_client_hook,
    botocore_client,
    http_proxies,
    http_verify,
    route_http_sends,
)

__all__ = [
    "DEFAULT_ASYNC_REQUESTS",
    "WouldBlockError",
    "arm",
    "arm_clients",
    "begin",
    "close_sessions",
    "no_sends",
    "run",
    "run_to_completion",
    "wait_on_loop",
]

_T = TypeVar("_T")

#: Requests in flight at once on one event loop, unless ``PYNAMODB_SHARDING_ASYNC_REQUESTS`` says.
#: One loop's thread sends a merged query's shard requests on their fast path (about 0.3 ms of
#: CPU each, :mod:`pynamodb_sharding._wire`; botocore's path, for the other requests, about 2 ms),
#: so 128 in flight keep it busy for round trips of 40 ms and more; more would only hold more
#: requests' state at once (memory, and the garbage collector's time scanning it: 256 cost about
#: a fifth more CPU per request in ``benchmarks/bench_async.py`` on botocore's path).
DEFAULT_ASYNC_REQUESTS = 128
_ENVIRONMENT = "PYNAMODB_SHARDING_ASYNC_REQUESTS"


class WouldBlockError(Exception):
    """Code on the event loop's own thread, outside a greenlet of this module, would have to
    wait for a request (which would stop the loop)."""


class _Slots:
    """The request slots of one event loop: the shard requests of merged reads run at most
    :data:`DEFAULT_ASYNC_REQUESTS` at once. A call over the limit waits in a queue as a plain
    callable (no task, no greenlet, no stack) until a slot is handed to it."""

    def __init__(self, limit: int) -> None:
        self.free = limit
        self.pid = os.getpid()
        self._queue: deque[Callable[[], None]] = deque()
        # Reads waiting to start (see enter), and whether one was let in and has not yet sent
        # its first requests (it is let in alone: what it sends is counted before the next).
        self._entries: deque[asyncio.Future[None]] = deque()
        self._entering = False
        self._backlog = max(1, limit // 2)

    async def enter(self) -> None:
        """Wait until a new read may start: while this loop's queue of shard requests waiting
        for a slot is at least half the limit long, reads start in the order they came, each
        once the queue is shorter again. Call :meth:`entered` once it has sent its first requests.

        Without it, 500 merged queries started at once would each plan their merge and queue
        its 16 shard requests before the first page returned: their state held at once, their
        pages answered round-robin, every query done near the end of the burst. Let in as the
        queue drains, they run a few dozen at a time and end one after another.
        """
        if not self._entries and not self._entering and len(self._queue) < self._backlog:
            self._entering = True
            return
        entry = asyncio.get_running_loop().create_future()
        self._entries.append(entry)
        try:
            await entry
        except BaseException:
            if entry.done() and not entry.cancelled():  # let in, then cancelled: the next goes
                self.entered()
            raise

    def entered(self) -> None:
        """The read let in last has sent its first requests (or ended): let in the next."""
        self._entering = False
        self._let_in()

    def _let_in(self) -> None:
        while not self._entering and self._entries and len(self._queue) < self._backlog:
            entry = self._entries.popleft()
            if not entry.done():  # not cancelled while it waited
                entry.set_result(None)
                self._entering = True

    def start_or_queue(self, start: Callable[[], None]) -> None:
        """Call ``start`` (which then holds a slot) now if a slot is free, else when one is."""
        if self.free > 0:
            self.free -= 1
            start()
        else:
            self._queue.append(start)

    def release(self) -> None:
        """Hand a slot to the first in line, or free it."""
        if self._queue:
            self._queue.popleft()()
            if self._entries:
                self._let_in()
        else:
            self.free += 1
            if self._entries:
                self._let_in()

    async def acquire(self) -> None:
        """Take a slot back (a greenlet that waited for another task): before the queued calls."""
        if self.free > 0:
            self.free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if waiter.done():  # cancelled meanwhile: the slot goes on
                self.release()
            else:
                waiter.set_result(None)

        self._queue.appendleft(wake)
        try:
            await waiter
        except BaseException:
            # Handed a slot (wake ran), then cancelled before this task resumed (a merged
            # query's shard request cancelled once the query has its limit): the slot goes on.
            if waiter.done() and not waiter.cancelled():
                self.release()
            raise


class _Slot:
    """One slot of :class:`_Slots`, held by a greenlet while it runs and given back while it
    waits for another task's result."""

    def __init__(self, slots: _Slots, *, held: bool) -> None:
        self.slots = slots
        self.held = held

    async def take(self) -> None:
        await self.slots.acquire()
        self.held = True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self.slots.release()


class _Bridged(greenlet.greenlet):
    """A greenlet running sync library code for a task of ``loop``."""

    def __init__(self, run: Callable[[], Any], parent: greenlet.greenlet, loop: asyncio.AbstractEventLoop,
                 slot: _Slot | None) -> None:
        super().__init__(run, parent)
        self.loop = loop
        self.slot = slot


def _current() -> _Bridged | None:
    current = greenlet.getcurrent()
    return current if isinstance(current, _Bridged) else None


def _await(awaitable: Awaitable[_T]) -> _T:
    """From sync code in a bridged greenlet: await ``awaitable`` on the loop, return its result."""
    current = _current()
    if current is None:
        raise WouldBlockError("only code run by pynamodb_sharding._async_transport.run can await")
    parent = current.parent
    assert parent is not None  # the greenlet of the task that runs it
    result: _T = parent.switch(awaitable)
    return result


def wait_on_loop(awaitable: Awaitable[_T]) -> _T:
    """From sync code run on an event loop by this module: await ``awaitable`` there, keeping
    what the caller holds meanwhile (its request slot), as a request in flight keeps it."""
    return _await(awaitable)


async def run(call: Callable[[], _T], slot: _Slot | None = None,
              started: Callable[[], None] | None = None) -> _T:
    """Run the sync ``call`` on this event loop, awaiting wherever it would block (holding
    ``slot`` while it runs, if given; calling ``started`` once it first waits or ends).

    A cancellation of the awaiting task is raised inside ``call`` where it waits (an HTTP request
    in flight is abandoned), and from here.
    """
    loop = asyncio.get_running_loop()
    bridged = _Bridged(call, greenlet.getcurrent(), loop, slot)
    bridged.gr_context = contextvars.copy_context()  # the caller's context vars (write routes)
    try:
        sent: Any = bridged.switch()
    finally:
        if started is not None:
            started()
    while not bridged.dead:
        try:
            value = await sent
        except BaseException as exc:  # handed to the code that waited, which decides
            sent = bridged.throw(exc)
        else:
            sent = bridged.switch(value)
    result: _T = sent
    return result


async def begin(call: Callable[[], _T]) -> _T:
    """:func:`run` for a read's first step (planning a merged query, sending its first pages),
    once this loop lets a new read in (:meth:`_Slots.enter`)."""
    slots = _slots(asyncio.get_running_loop())
    await slots.enter()
    return await run(call, started=slots.entered)


async def run_to_completion(call: Callable[[], _T]) -> _T:
    """:func:`run`, finished even when the awaiting task is cancelled meanwhile (writes: an
    item is never left half-written); the cancellation is raised once ``call`` has returned."""
    task = asyncio.ensure_future(run(call))
    _keep(task)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result


# --------------------------------------------------------------------------------------------
# The merged reads' "threads": tasks of the loop
# --------------------------------------------------------------------------------------------

#: Tasks started for futures, kept until done (the loop keeps only weak references).
_running: set[asyncio.Future[Any]] = set()


def _keep(task: asyncio.Future[Any]) -> None:
    _running.add(task)
    task.add_done_callback(_running.discard)


def forget_closed_loops() -> None:
    """Let go of the tasks of loops closed while they were pending (a loop closed with a
    result's pages in flight): they never finish, and would be kept for the process's life."""
    for task in [task for task in _running if task.get_loop().is_closed()]:
        _running.discard(task)


_CONDITION = threading.Condition()


class _LoopFuture(Future[Any]):
    """A future computed by a task of an event loop: ``result()`` in a bridged greenlet yields
    to the loop until it is done; ``cancel()`` cancels the task even once it runs."""

    def __init__(self) -> None:  # Future.__init__ without its condition
        # One condition for all: only the loop's thread uses these futures, and a condition
        # each (a lock, a deque, bound methods) would be most of a merged query's memory and a
        # good part of its CPU.
        self._condition = _CONDITION
        self._state = "PENDING"
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Callable[[Future[Any]], object]] = []
        self.task: asyncio.Future[Any] | None = None
        self.inner: _LoopFuture | None = None

    def cancel(self) -> bool:
        cancelled = super().cancel()
        for future in (self, self.inner):
            task = future.task if future is not None else None
            # Only a task that has started is cancelled: one that has not runs none of its code
            # when cancelled (what it holds would stay held: a request slot, a place in a merged
            # query's count of requests running), and finds its future cancelled when it starts.
            if task is not None and not task.done() and future is not None and future.running():
                if task.get_loop().is_closed():
                    continue  # its loop was closed with it pending: it never runs again
                task.cancel()
        return cancelled

    def _wait(self) -> None:
        if self.done():
            return
        current = _current()
        if current is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:  # another thread: wait for it (the shared condition may wake early)
                concurrent.futures.wait([self])
                return
            raise WouldBlockError("a request of the event loop is still in flight")
        loop = current.loop
        waiter = loop.create_future()

        def wake(_: Future[Any]) -> None:
            try:
                on_loop = asyncio.get_running_loop() is loop
            except RuntimeError:
                on_loop = False
            if on_loop:  # set by another task of the loop: no need to wake the loop's selector
                _settle(waiter)
            else:
                loop.call_soon_threadsafe(_settle, waiter)

        self.add_done_callback(wake)
        # A greenlet waiting for another task's result gives its slot back meanwhile: that task
        # may be waiting for a slot, and a waiting greenlet sends nothing.
        slot = current.slot
        if slot is not None:
            slot.give_back()
        try:
            _await(waiter)
        finally:
            if slot is not None:
                _await(slot.take())

    def result(self, timeout: float | None = None) -> Any:
        self._wait()
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait()
        return super().exception(timeout)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_slot_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Slots] = weakref.WeakKeyDictionary()


def _slots(loop: asyncio.AbstractEventLoop) -> _Slots:
    slots = _slot_pools.get(loop)
    if slots is None or slots.pid != os.getpid():  # a forked child: the parent's requests never end here
        slots = _slot_pools[loop] = _Slots(_limit())
    return slots


async def _fill(future: _LoopFuture, call: Callable[[], Any], slot: _Slot) -> None:
    try:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = await run(call, slot)
        except BaseException as exc:  # the future's owner raises it
            future.set_exception(exc)
            return
        future.set_result(result)
    finally:
        slot.give_back()


class _LoopExecutor(Executor):
    """Runs each call as a task of ``loop``, in a bridged greenlet of its own, once it has
    one of the loop's request slots."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        future = _LoopFuture()
        slots = _slots(self._loop)

        def start() -> None:
            slot = _Slot(slots, held=True)
            if future.cancelled():  # cancelled while it waited for its slot
                slot.give_back()
                return
            task = self._loop.create_task(_fill(future, lambda: fn(*args, **kwargs), slot))
            # _fill gives the slot back as it ends; a task cancelled before its first step runs
            # none of _fill (_LoopFuture.cancel leaves such tasks be, but code that cancels the
            # loop's tasks may not): then the slot is given back as the task ends.
            task.add_done_callback(lambda _: slot.give_back())
            future.task = task
            _keep(task)

        slots.start_or_queue(start)
        return future


_executors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopExecutor] = weakref.WeakKeyDictionary()


class _Bridge:
    """:class:`pynamodb_sharding._pool.EventLoopBridge` over this module's greenlets."""

    def executor(self) -> Executor | None:
        current = _current()
        if current is None:
            return None
        executor = _executors.get(current.loop)
        if executor is None:
            executor = _executors[current.loop] = _LoopExecutor(current.loop)
        return executor

    def future(self) -> Future[Any]:
        return _LoopFuture()

    def sleep(self, seconds: float) -> None:
        _await(asyncio.sleep(seconds))

    def link(self, outer: Future[Any], inner: Future[Any]) -> None:
        if isinstance(outer, _LoopFuture) and isinstance(inner, _LoopFuture):
            outer.inner = inner

    def lock(self) -> _LoopLock:
        return _LoopLock()

    def hedging_scheduler(self) -> _LoopScheduler:
        return _HEDGING


class _LoopLock:
    """A lock for the greenlets of one event loop (``rate_limit``'s pacing): waiting for it
    yields to the loop, where a thread lock held across a yield would block the loop's thread."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    def __enter__(self) -> None:
        _await(self._lock.acquire())

    def __exit__(self, *_: object) -> None:
        self._lock.release()


async def _attempt(future: _LoopFuture, call: Callable[[], Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = await run(call)
    except BaseException as exc:  # the hedged call raises it (a cancellation included)
        future.set_exception(exc)
        return
    future.set_result(result)


class _LoopScheduler:
    """:class:`pynamodb_sharding._hedging.Scheduler` of ``Sharding(hedged_requests=True)`` on an
    event loop: each attempt of a hedged shard request is a task of the caller's loop (in a
    greenlet of its own), and the wait for the first answer or the hedge delay yields to the
    loop. The caller keeps its request slot meanwhile (one shard request, sent once or twice).
    A cancellation of the caller cancels its attempts, and so does a first answer the slower
    one (the sync path lets its thread finish; its answer is discarded there too)."""

    def now(self) -> float:
        return time.perf_counter()

    def start(self, call: Callable[[], _T]) -> Future[_T]:
        current = _current()
        if current is None:
            raise WouldBlockError("a hedged request can only start from code run by this module")
        future = _LoopFuture()
        task = current.loop.create_task(_attempt(future, call))
        future.task = task
        _keep(task)
        return future

    def wait_first(self, futures: Collection[Future[_T]], timeout: float | None) -> set[Future[_T]]:
        done = {future for future in futures if future.done()}
        if done:
            return done
        current = _current()
        if current is None:
            raise WouldBlockError("a hedged request can only wait from code run by this module")
        loop = current.loop
        waiter = loop.create_future()
        for future in futures:
            future.add_done_callback(lambda _: _settle_from_any_thread(loop, waiter))
        timer = None if timeout is None else loop.call_later(max(0.0, timeout), _settle, waiter)
        try:
            _await(waiter)
        except BaseException:
            for future in futures:  # cancelled: abandon the attempts in flight
                future.cancel()
            raise
        finally:
            if timer is not None:
                timer.cancel()
        done = {future for future in futures if future.done()}
        if any(not future.cancelled() and future.exception() is None for future in done):
            # hedged() returns the first answer that succeeded: the other attempt is not needed
            # (the sync path cannot stop its thread; a task can stop, freeing its connection).
            for future in futures:
                if not future.done():
                    future.cancel()
        return done


_HEDGING = _LoopScheduler()


def _settle_from_any_thread(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[None]) -> None:
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        _settle(waiter)
    else:
        loop.call_soon_threadsafe(_settle, waiter)


_pool.set_event_loop_bridge(_Bridge())


# --------------------------------------------------------------------------------------------
# Sending: botocore's requests over the loop's connections
# --------------------------------------------------------------------------------------------

#: Set while the async results answer a property: a request then raises instead of blocking.
_no_sends: contextvars.ContextVar[bool] = contextvars.ContextVar("pynamodb_sharding_no_sends", default=False)


class no_sends:  # used as a context manager, like contextlib's
    """Within it, code on the loop's thread that would send a request raises :class:`WouldBlockError`."""

    def __enter__(self) -> None:
        self._token = _no_sends.set(True)

    def __exit__(self, *_: object) -> None:
        _no_sends.reset(self._token)


def _limit() -> int:
    text = os.environ.get(_ENVIRONMENT)
    if text is None:
        return DEFAULT_ASYNC_REQUESTS
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit < 1:
        msg = f"{_ENVIRONMENT}={text!r}: expected a positive number of requests, e.g. {DEFAULT_ASYNC_REQUESTS}."
        raise ValueError(msg)
    return limit


async def close_sessions() -> None:
    """Close this event loop's HTTP connections (at shutdown; the next request opens new ones).
    In a forked child, the parent's connections are left alone."""
    _async_http.close_pool(asyncio.get_running_loop())


def _route(client: Any) -> Callable[[Any], AWSResponse | None]:
    config = client.meta.config
    connect, read = config.connect_timeout, config.read_timeout
    # botocore's ``verify`` (a client made with verify=False, or a CA bundle's path), and its
    # proxies (Config(proxies=...), else HTTP(S)_PROXY and NO_PROXY for the client's endpoint).
    verify = http_verify(client)
    proxy_of = _async_http.proxies_of(http_proxies(client))

    def route(request: Any) -> AWSResponse | None:
        current = _current()
        if current is None:
            if _no_sends.get():
                raise WouldBlockError("a property of an async result would have sent a request")
            return None  # a thread's request: the client's own session
        pool = _async_http.pool_of(current.loop, _limit)
        response: AWSResponse = _await(_async_http.send(pool, request, connect, read, verify, proxy_of(request.url)))
        return response

    return route


def _exchange(client: Any) -> RawExchange:
    config = client.meta.config
    connect, read = config.connect_timeout, config.read_timeout
    verify = http_verify(client)
    proxy_of = _async_http.proxies_of(http_proxies(client))

    def exchange(url: str, headers: Mapping[str, str], body: bytes) -> tuple[int, dict[str, str], bytes] | None:
        current = _current()
        if current is None:
            return None  # off the loop: botocore's path, which says why it cannot send from here
        pool = _async_http.pool_of(current.loop, _limit)
        status, reply_headers, content = _await(
            _async_http.exchange(pool, "POST", url, headers, body, connect, read, verify, proxy_of(url)))
        return status, {name.lower(): value for name, value in reply_headers}, content

    return exchange


def _arm_client(client: Any) -> None:
    route_http_sends(client, _route(client), _pool.pause, _exchange(client))


add_client_hook(_arm_client)


def arm(models: Any) -> None:
    """Route the clients of ``models`` (model classes) through the event loops that use them."""
    arm_clients(botocore_client(model) for model in models)


def arm_clients(clients: Any) -> None:
    """Route botocore ``clients`` (a transaction's connection's) through the event loops that use them."""
    for client in clients:
        _arm_client(client)
