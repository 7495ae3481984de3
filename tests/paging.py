"""Reading a query page by page, the way a client resuming from each cursor does.

One contract for every test that pages: call ``query(last_evaluated_key=cursor, **kwargs)``,
read the page to its end, take its cursor (``last_evaluated_key``, JSON round-tripped as a
client stores it, or with ``token`` its ``next_page_token``) and go on until there is none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: More pages than any test reads: a cursor still given after them would never end.
MAX_PAGES = 10_000


def _next_cursor(result: Any, token: bool, found: list[tuple[list[Any], Any]], max_pages: int) -> Any:
    cursor = result.next_page_token if token else result.last_evaluated_key
    if cursor is not None and len(found) >= max_pages:
        msg = f"still a cursor after {max_pages} pages: paging would never end (last: {cursor!r})"
        raise AssertionError(msg)
    return cursor if cursor is None or token else json.loads(json.dumps(cursor))


def page_by_page(query: Callable[..., Any], *, token: bool = False, max_pages: int = MAX_PAGES,
                 **kwargs: Any) -> list[tuple[list[Any], Any]]:
    """Each page of ``query`` to the end: its items and its result (read to the end, so its
    ``last_evaluated_key`` and ``next_page_token`` are those of the page). A cursor still given
    after ``max_pages`` pages fails the test."""
    found: list[tuple[list[Any], Any]] = []
    cursor: Any = None
    while True:
        result = query(last_evaluated_key=cursor, **kwargs)
        found.append((list(result), result))
        cursor = _next_cursor(result, token, found, max_pages)
        if cursor is None:
            return found


async def apage_by_page(query: Callable[..., Any], *, token: bool = False, max_pages: int = MAX_PAGES,
                        **kwargs: Any) -> list[tuple[list[Any], Any]]:
    """:func:`page_by_page` of an async query (``aquery``, ``ascan``)."""
    found: list[tuple[list[Any], Any]] = []
    cursor: Any = None
    while True:
        result = query(last_evaluated_key=cursor, **kwargs)
        found.append(([item async for item in result], result))
        cursor = _next_cursor(result, token, found, max_pages)
        if cursor is None:
            return found


def pages(query: Callable[..., Any], *, token: bool = False, max_pages: int = MAX_PAGES, **kwargs: Any) -> list[Any]:
    """Every item of ``query``, read page by page (:func:`page_by_page`)."""
    return [item for items, _ in page_by_page(query, token=token, max_pages=max_pages, **kwargs) for item in items]
