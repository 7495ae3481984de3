"""Run a function in a forked child of the test process, with a bound on how long it may take.

The child inherits everything the parent holds (threads excepted), which is the point: a test
starts something in the parent, forks, and checks that the child can carry on. The child
reports through a pipe (its result as JSON) and its exit code; it is killed when it hangs, so
a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any


class ChildFailed(AssertionError):
    """The child raised, hung past its deadline or died."""


class Child:
    """A forked child running one function; :meth:`result` waits for it, within a deadline."""

    def __init__(self, pid: int, read_end: int, timeout: float) -> None:
        self.pid = pid
        self._read_end = read_end
        self._deadline = time.monotonic() + timeout
        self._timeout = timeout

    def result(self) -> Any:
        """The function's return value in the child (through JSON).

        Raises:
            ChildFailed: the child raised, was killed after the deadline, or died otherwise.
        """
        try:
            status = self._wait()
            chunks = []
            while chunk := os.read(self._read_end, 65536):
                chunks.append(chunk)
        finally:
            os.close(self._read_end)
        if status is None:
            msg = f"the forked child hung: killed after {self._timeout} s"
            raise ChildFailed(msg)
        report = json.loads(b"".join(chunks) or b"{}")
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or "result" not in report:
            msg = f"the forked child failed (wait status {status}): {report.get('error', 'no report')}"
            raise ChildFailed(msg)
        return report["result"]

    def _wait(self) -> int | None:
        while True:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return status
            if time.monotonic() > self._deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                return None
            time.sleep(0.02)


def fork_running(work: Callable[[], Any], *, timeout: float = 30.0) -> Child:
    """Fork; the child runs ``work()`` and exits, the parent returns at once with the :class:`Child`.

    The child never returns into the test (it leaves with ``os._exit``) and kills itself by
    ``SIGALRM`` shortly after ``timeout`` in case the parent is gone.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_end)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(int(timeout) + 5)
            try:
                report: dict[str, Any] = {"result": work()}
                code = 0
            except BaseException:  # every failure is reported to the parent
                report = {"error": traceback.format_exc()}
            data = json.dumps(report).encode()
            while data:
                data = data[os.write(write_end, data):]
        finally:
            os._exit(code)
    os.close(write_end)
    return Child(pid, read_end, timeout)
