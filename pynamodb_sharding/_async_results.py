"""The asyncio entry points: ``aquery``, ``ascan``, ``acount``, ``aget``, ``abatch_get``,
``asave``, ``aupdate``, ``adelete``, ``arefresh``, ``abatch_write`` and the transactions.

Each runs the sync method of the same name on the caller's event loop through
:mod:`~pynamodb_sharding._async_transport`, so its items, order, cursors, page tokens and errors
are the sync method's. A result that is iterated is an async iterator over the very iterator the
sync method returns, each ``__anext__`` one ``next()`` of it on the loop: :class:`AsyncResult`
(``abatch_get``), :class:`AsyncResultIterator` (``ascan``: PynamoDB's ``ResultIterator``) and
:class:`AsyncMergedResult` (``aquery``: the same
:class:`~pynamodb_sharding._merged_results.MergedResultIterator` the sync ``query`` returns). A batch
write and the transactions are the sync objects, each method that may send awaited.

Cancellation: a cancelled read abandons its requests in flight and closes the merged query (its
prefetched pages are cancelled); a cancelled write finishes first (a move, a growth, a retried
put are never left half-done) and raises ``CancelledError`` once it has.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pynamodb.transactions import TransactGet, TransactWrite

from pynamodb_sharding import _async_transport as transport
from pynamodb_sharding._exceptions import CursorError
from pynamodb_sharding._host import result_holds_next
from pynamodb_sharding._periods import is_time_partitioned

if TYPE_CHECKING:
    from pynamodb.connection import Connection
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.models import Model

    from pynamodb_sharding._host import ModelFuture
    from pynamodb_sharding._merged_results import MergedResultIterator

__all__ = [
    "AsyncBatchWrite",
    "AsyncMergedResult",
    "AsyncResult",
    "AsyncResultIterator",
    "AsyncTransactGet",
    "AsyncTransactWrite",
    "read",
    "write",
]

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


class AsyncResult(Generic[_M]):
    """The result of ``abatch_get``: the items the sync call yields, read on the event loop.

    ``async for`` it as the sync iterator is iterated, or ``await`` it for a list of what is
    left. Nothing is sent before the first ``__anext__``. A result belongs to the event loop of
    its first ``__anext__``: iterating it on another loop raises ``RuntimeError`` before
    anything is sent. ``await result.aclose()`` (or ``async with``) stops it. A result whose read
    raised or was cancelled (a timeout) raises ``RuntimeError`` if iterated further, instead of
    ending as if it had no more items: call ``abatch_get`` again.

    .. versionadded:: 0.2.0
    """

    #: The async method that made the result (named in its messages).
    _method = "abatch_get"

    def __init__(self, model: type[_M], start: Callable[[], Iterator[_M]]) -> None:
        self._model = model
        self._start = start
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop of the first __anext__
        self._result: Iterator[_M] | None = None
        self._closed = False
        # A generator (batch_get's) that raised or was cancelled has ended: it cannot go on.
        self._broken: BaseException | None = None

    def __aiter__(self) -> AsyncResult[_M]:
        return self

    async def __anext__(self) -> _M:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            if self._loop.is_closed():  # its pending pages never finish: let them go
                transport.forget_closed_loops()
            raise self._other_loop()
        if self._closed:
            raise StopAsyncIteration
        if self._broken is not None:
            raise self._ended_early()
        result = self._result
        if result is not None and self._holds_next(result):  # held: no request, no greenlet
            held = next(result, _DONE)
            if held is _DONE:  # the limit was reached
                raise StopAsyncIteration
            item: _M = held
            return item
        try:
            if result is None:  # the first call arms the clients and plans the read
                found = await read(self._model, self._next)
            else:
                found = await transport.run(self._next)
        except Exception as error:
            # A request failed: the next __anext__ asks the sync iterator again, as next() does
            # (a query or a scan sends it again), unless it was a generator, which has ended.
            if inspect.isgenerator(self._result):
                self._broken = error
            raise
        except BaseException as error:
            self._close()  # cancelled: nothing of this read stays in flight
            if inspect.isgenerator(self._result):
                self._broken = error
            raise
        if found is _DONE:
            raise StopAsyncIteration
        taken: _M = found
        return taken

    def _holds_next(self, result: Iterator[_M]) -> bool:
        """Whether ``next(result)`` returns an item without sending anything."""
        return False

    def _other_loop(self) -> RuntimeError:
        name = self._model.__name__
        msg = (
            f"{name}.{self._method}: this result was started on another event loop, which its "
            f"requests belong to; nothing was sent. Iterate it on the loop that started it, or "
            f"call {name}.{self._method}(...) again on this one."
        )
        return RuntimeError(msg)

    def _next(self) -> Any:
        if self._result is None:
            self._result = self._start()
        return next(self._result, _DONE)

    def _ended_early(self) -> RuntimeError:
        name = self._model.__name__
        msg = (
            f"{name}.{self._method}: this result stopped at an error or a cancellation "
            f"({type(self._broken).__name__}) before its last item, and cannot go on; call "
            f"{name}.{self._method}(...) again for the items."
        )
        return RuntimeError(msg)

    def __await__(self) -> Generator[Any, None, list[_M]]:
        return self._collect().__await__()

    async def _collect(self) -> list[_M]:
        return [item async for item in self]

    async def aclose(self) -> None:
        """Stop: cancel what the read has in flight. Iteration then ends."""
        self._closed = True
        self._close()

    def _close(self) -> None:
        close: Callable[[], None] | None = getattr(self._result, "close", None)
        if close is not None:
            close()

    async def __aenter__(self) -> AsyncResult[_M]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class AsyncResultIterator(AsyncResult[_M]):
    """The result of ``ascan``: PynamoDB's ``ResultIterator`` (a time-partitioned model's scan
    over its periods), read on the event loop, with its ``last_evaluated_key`` and
    ``total_count``. Each ``__anext__`` that needs a page sends one request (paced by
    ``rate_limit`` by awaiting); a failed request raises, and the next ``__anext__`` sends it
    again, as the sync ``next()`` does.

    .. versionadded:: 0.2.0
    """

    _method = "ascan"

    def __init__(self, model: type[_M], start: Callable[[], Iterator[_M]], given_cursor: Any) -> None:
        super().__init__(model, start)
        self._given_cursor = given_cursor

    def _other_loop(self) -> RuntimeError:
        name = self._model.__name__
        msg = (
            f"{name}.{self._method}: this result was started on another event loop, which its "
            f"requests belong to; nothing was sent. Iterate it on the loop that started it, or "
            f"resume on this one: {name}.{self._method}(..., last_evaluated_key=result.last_evaluated_key) "
            f"with the same arguments."
        )
        return RuntimeError(msg)

    def _holds_next(self, result: Iterator[_M]) -> bool:
        return result_holds_next(result)  # an item of the page held: no greenlet

    @property
    def last_evaluated_key(self) -> Any:
        """The cursor to pass back as ``last_evaluated_key`` (sync or async), or ``None``."""
        result: Any = self._result  # PynamoDB's ResultIterator, or a period model's scan
        if result is None:
            return self._given_cursor
        with transport.no_sends():
            return result.last_evaluated_key

    @property
    def total_count(self) -> int:
        """The ``Count`` of every page read."""
        result: Any = self._result
        count: int = 0 if result is None else result.total_count
        return count


class AsyncMergedResult(AsyncResultIterator[_M]):
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

    _method = "aquery"

    def __init__(self, model: type[_M], start: Callable[[], MergedResultIterator[_M]],
                 given_cursor: dict[str, Any] | str | None) -> None:
        super().__init__(model, start, given_cursor)
        # Set when a cancellation took an item that was not handed over: the cursors before it.
        self._cursors_before: tuple[dict[str, Any] | str | None, str | CursorError | None] | None = None
        # The merged result's next() of an item it holds, else the sentinel given (a
        # time-partitioned model's result has none).
        self._take_held: Callable[[object], Any] | None = None

    async def __anext__(self) -> _M:
        # An item of a batch already held: handed over at once (the common case of a long read;
        # no request, no greenlet, none of the checks of a first or failed call to repeat).
        take_held = self._take_held
        if (take_held is not None and self._broken is None and not self._closed
                and asyncio.get_running_loop() is self._loop):
            held = take_held(_DONE)
            if held is not _DONE:
                item: _M = held
                return item
            if self._merged().ended():  # the limit reached or the end found: nothing to send
                raise StopAsyncIteration
        try:
            return await super().__anext__()
        except CursorError as error:
            raise _named_async(error) from error

    def _holds_next(self, result: Iterator[_M]) -> bool:
        holds: Callable[[], bool] | None = getattr(result, "holds_next_item", None)
        return holds is not None and holds()

    def _merged(self) -> MergedResultIterator[_M]:
        return cast("MergedResultIterator[_M]", self._result)

    def _next(self) -> Any:
        if self._result is None:
            self._result = self._start()
            self._take_held = getattr(self._result, "next_held", None)
        result = self._merged()
        may_send: Callable[[], bool] | None = getattr(result, "read_ahead_may_send", None)
        # The cursors before the item, kept in case a read-ahead after it is cancelled: only
        # where one may send (encoding them is most of a page's last item otherwise).
        before = self._cursors() if may_send is not None and may_send() else None
        item = next(result, _DONE)
        if item is not _DONE and may_send is not None:
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
        result = self._merged()
        try:
            token: str | CursorError | None = result.next_page_token
        except CursorError as error:
            token = error
        return result.last_evaluated_key, token

    @property
    def last_evaluated_key(self) -> dict[str, Any] | str | None:
        """The cursor to pass back as ``last_evaluated_key`` (sync or async), or ``None``."""
        if self._result is None:
            given: dict[str, Any] | str | None = self._given_cursor
            return given
        if self._cursors_before is not None:
            return self._cursors_before[0]
        with transport.no_sends():
            return self._merged().last_evaluated_key

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
            return self._merged().next_page_token

    async def __aenter__(self) -> AsyncMergedResult[_M]:
        return self


class AsyncBatchWrite(Generic[_M]):
    """The result of ``abatch_write``: the sync ``batch_write`` with each call that may send
    awaited on the event loop::

        async with AuditLog.abatch_write() as batch:
            for entry in entries:
                await batch.save(entry)      # sends a BatchWriteItem each 25 writes
            await batch.delete(old_entry)
        # the rest is sent as the block ends (as the sync one sends it in __exit__)

    ``save``, ``delete`` and ``commit`` run the sync batch's methods, so what is written where,
    the retries of unprocessed items and the errors are the sync batch's. A cancelled call
    finishes first (a request sent is never left half-handled), then raises
    ``CancelledError``; the block's end commits what is pending, as the sync one does.

    .. versionadded:: 0.2.0
    """

    def __init__(self, model: type[_M], batch: Any) -> None:
        self._model = model
        self._batch = batch

    @property
    def pending_operations(self) -> list[dict[str, Any]]:
        """The writes not sent yet (the sync batch's)."""
        pending: list[dict[str, Any]] = self._batch.pending_operations
        return pending

    @property
    def failed_operations(self) -> list[Any]:
        """The sync batch's ``failed_operations``."""
        failed: list[Any] = self._batch.failed_operations
        return failed

    async def save(self, put_item: _M) -> None:
        """``batch.save(put_item)``: adds the put, sending the pending writes when 25 wait."""
        await write(self._model, lambda: self._batch.save(put_item))

    async def delete(self, del_item: _M) -> None:
        """``batch.delete(del_item)``: adds the delete, sending the pending writes when 25 wait."""
        await write(self._model, lambda: self._batch.delete(del_item))

    async def commit(self) -> None:
        """Send every pending write."""
        await write(self._model, self._batch.commit)

    async def __aenter__(self) -> AsyncBatchWrite[_M]:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None,
    ) -> None:
        await self.commit()  # as PynamoDB's BatchWrite.__exit__, whatever ended the block


def _armed_connection_call(connection: Any, call: Callable[[], _T]) -> Callable[[], _T]:
    def armed() -> _T:
        transport.arm_clients([connection.client])
        return call()

    return armed


class _AsyncTransaction:
    """What both async transactions share: the sync transaction, and its commit on the loop."""

    _transaction: TransactGet | TransactWrite

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    async def _run(self, model: type[Any], call: Callable[[], _T]) -> _T:
        return await write(model, call)

    def _commit_call(self) -> Callable[[], None]:
        """The sync commit (the sync block's end), its connection's client routed over the loop."""
        transaction = self._transaction
        def commit() -> None:
            transaction.__exit__(None, None, None)  # type: ignore[no-untyped-call]  # PynamoDB's, untyped

        return _armed_connection_call(self._connection, commit)


class AsyncTransactWrite(_AsyncTransaction):
    """PynamoDB's ``TransactWrite`` on the event loop::

        async with AsyncTransactWrite(connection=connection) as transaction:
            await transaction.save(entry)
            await transaction.update(other, actions=[AuditLog.user_id.set("bob")])
            await transaction.delete(old)
            await transaction.condition_check(AuditLog, key, at, condition=AuditLog.user_id.exists())
        # committed (TransactWriteItems) as the block ends without an exception

    Each method runs the sync transaction's method of the same name (a sharded item's shard is
    found there, which may read), and the commit is the sync commit: the same request, the same
    errors (``TransactWriteError``, ``ShardingError``). The methods and the commit finish when
    cancelled, then raise ``CancelledError``; a block that raised commits nothing.

    .. versionadded:: 0.2.0
    """

    def __init__(
        self,
        connection: Connection,
        client_request_token: str | None = None,
        return_item_collection_metrics: str | None = None,
        return_consumed_capacity: str | None = None,
    ) -> None:
        super().__init__(connection)
        self._transaction: TransactWrite = TransactWrite(
            connection=connection, client_request_token=client_request_token,
            return_item_collection_metrics=return_item_collection_metrics,
            return_consumed_capacity=return_consumed_capacity)

    async def condition_check(self, model_cls: type[_M], hash_key: Any, range_key: Any = None,
                              condition: Condition | None = None) -> None:
        """``TransactWrite.condition_check``."""
        await self._run(model_cls, lambda: self._transaction.condition_check(
            model_cls, hash_key, range_key=range_key, condition=condition))

    async def delete(self, model: Model, condition: Condition | None = None, *,
                     add_version_condition: bool = True) -> None:
        """``TransactWrite.delete``."""
        await self._run(type(model), lambda: self._transaction.delete(
            model, condition=condition, add_version_condition=add_version_condition))

    async def save(self, model: Model, condition: Condition | None = None, return_values: str | None = None) -> None:
        """``TransactWrite.save``."""
        await self._run(type(model), lambda: self._transaction.save(model, condition=condition,
                                                                    return_values=return_values))

    async def update(self, model: Model, actions: list[Action], condition: Condition | None = None,
                     return_values: str | None = None, *, add_version_condition: bool = True) -> None:
        """``TransactWrite.update``."""
        await self._run(type(model), lambda: self._transaction.update(
            model, actions, condition=condition, return_values=return_values,
            add_version_condition=add_version_condition))

    async def __aenter__(self) -> AsyncTransactWrite:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await transport.run_to_completion(self._commit_call())  # finished even when cancelled


class AsyncTransactGet(_AsyncTransaction):
    """PynamoDB's ``TransactGet`` on the event loop::

        async with AsyncTransactGet(connection=connection) as transaction:
            first = await transaction.get(AuditLog, key, at)
            second = await transaction.get(AuditLog, key, at + 1)
        first.get(), second.get()   # read (TransactGetItems) as the block ended

    ``get`` runs the sync transaction's ``get`` (the item's shard is found there, which may
    read) and returns its future; the commit is the sync commit, read on the loop.

    .. versionadded:: 0.2.0
    """

    def __init__(self, connection: Connection, return_consumed_capacity: str | None = None) -> None:
        super().__init__(connection)
        self._transaction: TransactGet = TransactGet(connection=connection,
                                                     return_consumed_capacity=return_consumed_capacity)

    async def _run(self, model: type[Any], call: Callable[[], _T]) -> _T:
        return await read(model, call)

    async def get(self, model_cls: type[_M], hash_key: Any, range_key: Any = None) -> ModelFuture[_M]:
        """``TransactGet.get``: the future of the item, set as the block ends."""
        return await self._run(model_cls, lambda: self._transaction.get(model_cls, hash_key, range_key))

    async def __aenter__(self) -> AsyncTransactGet:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            await transport.begin(self._commit_call())
