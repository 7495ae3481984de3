"""Virtual time for the tests whose load, limits and growth are rates (DynamoDB Local stays real).

A test paced by the wall clock measures the machine: on a loaded CI machine its writers fall
behind the rate it asked for, a stall becomes a burst, and the throttles, reports and growths
it counts change. Here the clock the library (``DynamicShards(clock=, timer=, sleep=)``), the
partition-limit simulator (``clock=``) and the load share is :class:`VirtualClock`: it moves
only when the test moves it, and :func:`paced_writes` moves it by one step once every write
issued for the step is done (or sleeps in virtual time, a backoff). What a step's writes cost
in real time does not matter: the simulator and the library see the same rates, the same
intervals and the same backoffs on an idle machine and under a load average of 20.

Several processes keep one virtual time with :func:`run_in_processes`: each runs its own
clock from the same start and waits for all the others at the end of every step.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import traceback
from collections.abc import Callable
from typing import Any

from pynamodb.models import Model

__all__ = ["VirtualClock", "closed_loop_writes", "paced_writes", "run_in_processes"]

#: Seconds of virtual time per step of :func:`paced_writes`.
STEP = 0.05
#: Real seconds a step, or a barrier between processes, may take before the test fails (a
#: writer that hangs), however slow the machine: far more than a step takes under any load.
STALL_TIMEOUT = 300.0


class VirtualClock:
    """Epoch seconds that move only by :meth:`advance`; :meth:`sleep` waits for them (thread-safe).

    Work counted with :meth:`add_work` / :meth:`done` (a write issued and finished) keeps the
    clock from being advanced by :func:`paced_writes` until it is done; a worker thread that
    sleeps in virtual time meanwhile is not busy until the clock reaches its wake-up time.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start
        self._condition = threading.Condition()
        self._busy = 0
        self._sleepers: list[list[Any]] = []  # [wake-up time, event, counted busy]
        self._working = threading.local()

    def __call__(self) -> float:
        return self.now

    def set(self, now: float) -> None:
        """Start from ``now`` (a spawned process joining its parent's virtual time)."""
        with self._condition:
            self.now = now

    def add_work(self) -> None:
        """One piece of work was handed to a worker: the clock waits for it."""
        with self._condition:
            self._busy += 1

    def working(self) -> None:
        """The calling thread now does the work handed to it (its sleeps free the clock)."""
        self._working.flag = True

    def done(self) -> None:
        """The calling thread finished its piece of work."""
        self._working.flag = False
        with self._condition:
            self._busy -= 1
            self._condition.notify_all()

    def sleep(self, seconds: float) -> None:
        """Wait until the clock has moved ``seconds`` on (``DynamicShards(sleep=...)``)."""
        if seconds <= 0:
            return
        busy = getattr(self._working, "flag", False)
        event = threading.Event()
        with self._condition:
            self._sleepers.append([self.now + seconds, event, busy])
            if busy:
                self._busy -= 1
                self._condition.notify_all()
        if not event.wait(STALL_TIMEOUT):
            msg = f"a sleep of {seconds} virtual seconds did not end within {STALL_TIMEOUT:g} real seconds"
            raise TimeoutError(msg)

    def advance(self, seconds: float) -> None:
        """Move the clock on; sleepers due wake up (busy again at once, before anyone looks)."""
        with self._condition:
            self.now += seconds
            due = [sleeper for sleeper in self._sleepers if sleeper[0] <= self.now]
            self._sleepers = [sleeper for sleeper in self._sleepers if sleeper[0] > self.now]
            for _, event, busy in due:
                if busy:
                    self._busy += 1
                event.set()

    def wait_idle(self) -> None:
        """Until every piece of work handed out is done or sleeping in virtual time."""
        with self._condition:
            if not self._condition.wait_for(lambda: self._busy == 0, STALL_TIMEOUT):
                msg = f"writes still running after {STALL_TIMEOUT:g} real seconds: a writer hangs"
                raise TimeoutError(msg)


def paced_writes(model: Callable[[int], Model], rate: Callable[[float], float], seconds: float, *,
                 clock: VirtualClock, threads: int, base: int = 0,
                 sync: Callable[[], object] | None = None, phase: float = 0.0) -> tuple[list[int], list[str]]:
    """Save ``model(n)`` items at ``rate(t)`` a second of ``clock`` for ``seconds`` of it, from
    ``threads`` threads; return the acknowledged numbers and the failures.

    Each :data:`STEP` of virtual time issues its share of the writes (numbered from ``base +
    1``), waits until all are done (or sleep in virtual time), calls ``sync`` (a barrier
    between processes) and advances the clock by the step. ``phase`` (0 to 1) is the fraction
    of a write already owed at the start: processes in lockstep given different phases issue
    their writes at different steps, as independent processes do, instead of all at once.
    After the last step the clock moves on, alone, until the writes still backing off in
    virtual time end (nobody else would move it: they would sleep until the stall timeout).
    """
    tickets: queue.Queue[int | None] = queue.Queue()
    acks: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()

    def writer() -> None:
        while (ticket := tickets.get()) is not None:
            clock.working()
            try:
                model(ticket).save()
            except Exception as error:  # every failure must fail the test, not end the thread
                with lock:
                    failures.append(repr(error))
            else:
                with lock:
                    acks.append(ticket)
            finally:
                clock.done()

    workers = [threading.Thread(target=writer, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    issued = phase
    serial = base
    try:
        for step in range(round(seconds / STEP)):
            issued += rate(step * STEP) * STEP
            while issued >= 1:
                issued -= 1
                serial += 1
                clock.add_work()
                tickets.put(serial)
            clock.wait_idle()
            if sync is not None:
                sync()
            clock.advance(STEP)
        while True:
            clock.wait_idle()
            with lock:
                if len(acks) + len(failures) == serial - base:
                    break
            clock.advance(STEP)
    finally:
        for _ in workers:
            tickets.put(None)
        for worker in workers:
            worker.join(STALL_TIMEOUT)
    return acks, failures


def closed_loop_writes(model: Callable[[int], Model], seconds: float, *, clock: VirtualClock, writers: int,
                       think: float, base: int = 0, sync: Callable[[], object] | None = None
                       ) -> tuple[list[int], list[str]]:
    """``writers`` threads each saving ``model(n)`` items, one at a time with ``think`` seconds of
    ``clock`` between two, for ``seconds`` of it (a throttled write backs off in virtual time,
    so a writer waits for its write as a hammering client does); the acknowledged numbers
    (``base + writer * 1_000_000 + sequence``) and the failures.

    The clock moves by :data:`STEP` once every writer is thinking or backing off (``sync``
    between processes), for ``seconds``; then on, alone, until the writes in flight end.
    """
    end = clock.now + seconds
    acks: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        clock.working()
        try:
            sequence = 0
            while clock.now < end:
                sequence += 1
                number = base + index * 1_000_000 + sequence
                try:
                    model(number).save()
                except Exception as error:  # every failure must fail the test, not end the thread
                    with lock:
                        failures.append(repr(error))
                else:
                    with lock:
                        acks.append(number)
                clock.sleep(think)
        finally:
            clock.done()

    threads = [threading.Thread(target=writer, args=(index,), daemon=True) for index in range(writers)]
    for thread in threads:
        clock.add_work()
        thread.start()
    for _ in range(round(seconds / STEP)):
        clock.wait_idle()
        if sync is not None:
            sync()
        clock.advance(STEP)
    while any(thread.is_alive() for thread in threads):
        clock.wait_idle()
        clock.advance(STEP)
    for thread in threads:
        thread.join(STALL_TIMEOUT)
    return acks, failures


def _child(target: Callable[..., Any], args: tuple[Any, ...], barrier: Any, results: Any, index: int) -> None:
    def sync() -> None:
        barrier.wait(STALL_TIMEOUT)

    try:
        results.put((index, True, target(*args, sync=sync)))
    except BaseException:
        barrier.abort()  # the others stop waiting for this one
        results.put((index, False, traceback.format_exc()))


def run_in_processes(target: Callable[..., Any], arguments: list[tuple[Any, ...]]) -> list[Any]:
    """Run ``target(*args, sync=...)`` in a spawned process per ``args``, all at once; their
    results in order. ``sync()`` returns once every process has called it (a barrier)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(arguments))
    results = context.Queue()
    processes = [context.Process(target=_child, args=(target, args, barrier, results, index))
                 for index, args in enumerate(arguments)]
    for process in processes:
        process.start()
    collected: dict[int, Any] = {}
    failures = []
    try:
        for _ in processes:
            index, ok, value = results.get(timeout=STALL_TIMEOUT * 2)
            if ok:
                collected[index] = value
            else:
                failures.append(f"process {index}:\n{value}")
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
    if failures:
        raise AssertionError("\n".join(failures))
    return [collected[index] for index in range(len(arguments))]
