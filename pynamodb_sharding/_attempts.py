"""Whether a write request *may have been applied*: the fact that decides where a retry may go.

A DynamoDB write whose reply never arrived (a read timeout, a closed connection) or that got a
5xx may have been applied; a 4xx error (a throttle, ``ConditionalCheckFailed``, a validation
error) certainly was not. botocore hides this from its callers: it resends such a request by
itself and raises only the last attempt's error. A sharded write that may have been applied
must only ever be retried to the same physical key, or one logical save leaves two copies.

:func:`tracking` opens a record for the current thread; a ``needs-retry`` handler that
:func:`watch` registers once per botocore client sees every attempt botocore makes (including
the last) and marks the open records when an attempt's outcome is unknown. Records nest: an
outer write that contains an ambiguous attempt is itself ambiguous, so every open record of
the thread is marked.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._locals import ContextLocal

__all__ = ["WriteAttempts", "may_have_been_applied", "tracking", "watch"]

_HOOK_EVENT = "needs-retry.dynamodb"
_HOOK_ID = "pynamodb_sharding._attempts.record_outcome"

# Errors raised before a byte of the request reached the server: such an attempt did nothing.
_NOT_SENT = (EndpointConnectionError, ConnectTimeoutError)

_watched: weakref.WeakSet[Any] = weakref.WeakSet()
_watch_lock = threading.Lock()
_open = ContextLocal("attempts.open")


class WriteAttempts:
    """What the attempts made inside one :func:`tracking` block may have done."""

    __slots__ = ("may_have_applied",)

    def __init__(self) -> None:
        #: True once any attempt timed out, lost its connection or got a 5xx reply.
        self.may_have_applied = False

    def __repr__(self) -> str:
        return f"WriteAttempts(may_have_applied={self.may_have_applied})"


def may_have_been_applied(response: Any = None, caught_exception: BaseException | None = None) -> bool:
    """Whether one attempt, as botocore reports it to ``needs-retry`` handlers, may have been applied.

    Args:
        response: ``(http_response, parsed)``, or ``None`` when the attempt raised.
        caught_exception: the error the attempt raised (a timeout, a closed connection...).

    Returns:
        ``True`` for an error other than "could not connect", and for a 5xx reply; ``False``
        for a success or a 4xx reply (DynamoDB rejected it: nothing was written).
    """
    if caught_exception is not None:
        return not isinstance(caught_exception, _NOT_SENT)
    if response is None:
        return False
    status = getattr(response[0], "status_code", None)
    return isinstance(status, int) and status >= 500


def _record_outcome(response: Any = None, caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore ``needs-retry`` handler: mark the thread's open records after an ambiguous attempt."""
    records: list[WriteAttempts] | None = getattr(_open, "records", None)
    if not records or not may_have_been_applied(response, caught_exception):
        return
    for record in records:
        record.may_have_applied = True


def watch(client: Any) -> None:
    """Register the attempt recorder once on a botocore DynamoDB client."""
    if client in _watched:  # every save asks: answer without the lock once registered
        return
    with _watch_lock:
        if client in _watched:
            return
        # First, so it sees the attempt before any handler that raises out of botocore.
        client.meta.events.register_first(_HOOK_EVENT, _record_outcome, unique_id=_HOOK_ID)
        _watched.add(client)


@contextmanager
def tracking() -> Iterator[WriteAttempts]:
    """Record, for the requests this thread sends inside the block, whether any may have been applied.

    The client must be :func:`watch`-ed; requests of other threads are not recorded.
    """
    record = WriteAttempts()
    records: list[WriteAttempts] | None = getattr(_open, "records", None)
    if records is None:
        records = _open.records = []
    records.append(record)
    try:
        yield record
    finally:
        records.pop()


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at fork time; it does not exist here.
    global _watch_lock
    _watch_lock = threading.Lock()


at_fork(after_in_child=_after_fork_in_child)
