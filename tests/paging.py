"""Reading a query page by page, the way a client resuming from each cursor does."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def pages(query: Callable[..., Any], *, token: bool = False, **kwargs: Any) -> list[Any]:
    """Read ``query(last_evaluated_key=..., **kwargs)`` to the end, one call per page, resuming
    from each page's cursor (JSON round-tripped, as a client stores it) or, with ``token``, from
    its ``next_page_token``."""
    items: list[Any] = []
    cursor: Any = None
    while True:
        page = query(last_evaluated_key=cursor, **kwargs)
        items.extend(page)
        cursor = page.next_page_token if token else page.last_evaluated_key
        if cursor is None:
            return items
        if not token:
            cursor = json.loads(json.dumps(cursor))
