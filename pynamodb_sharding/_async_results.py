"""The asyncio entry points: ``aquery``, ``acount``, ``aget``, ``asave``, ``adelete``.

Each runs the sync method of the same name on the caller's event loop through
:mod:`~pynamodb_sharding._async_transport`, so its items, order, cursors, page tokens and errors
are the sync method's. A merged query's result is :class:`AsyncMergedResult`: an async iterator
over the same :class:`~pynamodb_sharding._merged_results.MergedResultIterator` the sync ``query``
returns, each ``__anext__`` one ``next()`` of it on the loop.

Cancellation: a cancelled read abandons its requests in flight and closes the merged query (its
prefetched pages are cancelled); a cancelled write finishes first (a move, a growth, a retried
put are never left half-done) and raises ``CancelledError`` once it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pynamodb_sharding import _async_transport as transport
from pynamodb_sharding._exceptions import CursorError
from pynamodb_sharding._periods import is_time_partitioned

if TYPE_CHECKING:
    from pynamodb.models import Model

    from pynamodb_sharding._merged_results import MergedResultIterator

__all__ = ["AsyncMergedResult", "read", "write"]

_M = TypeVar("_M", bound="Model")
_T = TypeVar("_T")

_DONE: Any = object()


def _models(model: type[Any]) -> list[type[Any]]:
    """The model and its companion models, recursively (their clients carry its requests)."""
    seen: list[type[Any]] = []
    pending = [model]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.append(current)
        companions: Callable[[], Iterable[type[Any]]] | None = getattr(current, "companion_models", None)
        if callable(companions):
            pending.extend(companions())
    # A time-partitioned model has no client of its own: each period model's is armed when
    # its connection is made (pynamodb_sharding._host.arm_client).
    return [model for model in seen if not is_time_partitioned(model)]


def _armed_call(model: type[Any], call: Callable[[], _T]) -> Callable[[], _T]:
    def armed() -> _T:
        transport.arm(_models(model))
        return call()

    return armed


async def read(model: type[Any], call: Callable[[], _T]) -> _T:
    """Run a read of ``model`` on the event loop; a cancellation abandons its requests."""
    return await transport.begin(_armed_call(model, call))


async def write(model: type[Any], call: Callable[[], _T]) -> _T:
    """Run a write of ``model`` on the event loop, to completion even when cancelled."""
    return await transport.run_to_completion(_armed_call(model, call))


def _named_async(error: CursorError) -> CursorError:
    """``error`` as the async call raises it: the message names ``aquery``, the call made."""
    message = error.msg.replace(".query(last_evaluated_key=", ".aquery(last_evaluated_key=", 1)
    return type(error)(message, error.cause)


class AsyncMergedResult(Generic[_M]):
    """The result of ``aquery``: model instances in sort-key order, with one cursor.

    ``async for`` it as the sync result is iterated; ``last_evaluated_key`` and
    ``next_page_token`` are the sync result's (a token of either resumes the other). Nothing is
    sent before the first ``__anext__``. ``await result`` reads what is left into a list.
    Close it with ``await result.aclose()`` (or ``async with``) to cancel the prefetched pages
    of a query you stop reading early.

    To say ``None`` exactly where the sync result does, the sync ``last_evaluated_key`` may
    read ahead (one request per shard whose next page is not held) when the pages held cannot
    tell whether an item follows the last one returned. A property cannot await, so
    ``__anext__`` does that read-ahead before it hands such an item over (the merge needs those
    pages for the next item anyway); the properties then answer from what it found, sending
    nothing. A cancellation during it keeps the item back and the cursor before it.

    A result belongs to the event loop of its first ``__anext__`` (its prefetched pages are
    requests of that loop): iterating it on another loop raises ``RuntimeError`` before
    anything is sent; resume there with ``last_evaluated_key``.

    .. versionadded:: 0.2.0
    """

    def __init__(self, model: type[_M], start: Callable[[], MergedResultIterator[_M]],
                 given_cursor: dict[str, Any] | str | None) -> None:
        self._model = model
        self._start = start
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first __anext__
        self._given_cursor = given_cursor
        self._result: MergedResultIterator[_M] | None = None
        # Set when a cancellation took an item that was not handed over: the cursors before it.
        self._cursors_before: tuple[dict[str, Any] | str | None, str | CursorError | None] | None = None

    def __aiter__(self) -> AsyncMergedResult[_M]:
        return self

    async def __anext__(self) -> _M:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise self._other_loop()
        result = self._result
        holds: Callable[[], bool] | None = getattr(result, "holds_next_item", None)
        if result is not None and holds is not None and holds():  # held: no request, no greenlet
            return next(result)
        try:
            if result is None:  # the first call arms the clients and plans the query
                item = await read(self._model, self._next)
            else:
                item = await transport.run(self._next)
        except CursorError as error:
            raise _named_async(error) from error
        except Exception:
            raise  # a request failed: the next __anext__ sends it again, as the sync next() does
        except BaseException:
            self._close()  # cancelled: nothing of this query stays in flight
            raise
        if item is _DONE:
            raise StopAsyncIteration
        taken: _M = item
        return taken

    def _other_loop(self) -> RuntimeError:
        name = self._model.__name__
        msg = (
            f"{name}.aquery: this result was started on another event loop, which its prefetched "
            f"pages belong to; nothing was sent. Iterate it on the loop that started it, or resume "
            f"on this one: {name}.aquery(..., last_evaluated_key=result.last_evaluated_key) with "
            f"the same arguments."
        )
        return RuntimeError(msg)

    def _next(self) -> Any:
        if self._result is None:
            self._result = self._start()
        result = self._result
        may_run_dry: Callable[[], bool] | None = getattr(result, "may_run_dry", None)
        before = self._cursors() if may_run_dry is not None and may_run_dry() else None
        item = next(result, _DONE)
        if item is not _DONE and may_run_dry is not None:
            # The sync cursor may read ahead to tell whether an item follows this one; a property
            # cannot await, so read ahead here, where the next item needs those pages anyway.
            try:
                result.read_ahead_for_cursor()
            except BaseException:
                # Cancelled: the item is not handed over, so the cursor stays before it.
                self._cursors_before = before
                raise
        return item

    def _cursors(self) -> tuple[dict[str, Any] | str | None, str | CursorError | None]:
        """The cursor and page token now (what they stay at if the next item is not handed over)."""
        result = self._result
        assert result is not None
        try:
            token: str | CursorError | None = result.next_page_token
        except CursorError as error:
            token = error
        return result.last_evaluated_key, token

    def __await__(self) -> Generator[Any, None, list[_M]]:
        return self._collect().__await__()

    async def _collect(self) -> list[_M]:
        return [item async for item in self]

    @property
    def last_evaluated_key(self) -> dict[str, Any] | str | None:
        """The cursor to pass back as ``last_evaluated_key`` (sync or async), or ``None``."""
        if self._result is None:
            return self._given_cursor
        if self._cursors_before is not None:
            return self._cursors_before[0]
        with transport.no_sends():
            return self._result.last_evaluated_key

    @property
    def next_page_token(self) -> str | None:
        """The cursor as a compact URL-safe ``str`` (``None`` exactly when
        :attr:`last_evaluated_key` is); pass it back as ``last_evaluated_key``."""
        if self._result is None:
            given = self._given_cursor
            if given is None or isinstance(given, str):
                return given
            msg = (f"{self._model.__name__}.aquery: next_page_token of a query resumed from a dict cursor "
                   f"is known once the first item was read; pass that cursor on as it is.")
            raise CursorError(msg)
        if self._cursors_before is not None:
            token = self._cursors_before[1]
            if isinstance(token, CursorError):
                raise token
            return token
        with transport.no_sends():
            return self._result.next_page_token

    @property
    def total_count(self) -> int:
        """The ``Count`` of every page taken into the merge."""
        return 0 if self._result is None else self._result.total_count

    async def aclose(self) -> None:
        """Stop: cancel the prefetched pages. Iteration then ends."""
        self._close()

    def _close(self) -> None:
        close: Callable[[], None] | None = getattr(self._result, "close", None)
        if close is not None:  # PynamoDB's own ResultIterator (an unsharded table) has none
            close()

    async def __aenter__(self) -> AsyncMergedResult[_M]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

