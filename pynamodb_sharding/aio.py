"""The asyncio side's public names (the ``[async]`` extra: ``pip install 'pynamodb-sharding[async]'``).

The async methods themselves are on the models (``Model.aquery``, ``ascan``, ``acount``,
``aget``, ``abatch_get``, ``abatch_write``, ``asave``, ``aupdate``, ``adelete``, ``arefresh``, and
``aquery``/``acount``/``ascan`` of a sharded index); the transactions are
:class:`AsyncTransactWrite` and :class:`AsyncTransactGet`. See :doc:`async`. This module is not
imported by ``import pynamodb_sharding``.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

from pynamodb_sharding._async_results import (
    AsyncBatchWrite,
    AsyncMergedResult,
    AsyncResult,
    AsyncResultIterator,
    AsyncTransactGet,
    AsyncTransactWrite,
)
from pynamodb_sharding._async_transport import DEFAULT_ASYNC_REQUESTS, close_sessions

__all__ = [
    "DEFAULT_ASYNC_REQUESTS",
    "AsyncBatchWrite",
    "AsyncMergedResult",
    "AsyncResult",
    "AsyncResultIterator",
    "AsyncTransactGet",
    "AsyncTransactWrite",
    "close_connections",
]


async def close_connections() -> None:
    """Close the running event loop's HTTP connections: call it when the application stops
    (a FastAPI lifespan, an aiohttp ``on_cleanup``); a later request opens new ones.

    .. versionadded:: 0.2.0
    """
    await close_sessions()
