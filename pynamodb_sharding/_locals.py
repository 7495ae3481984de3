"""State local to the running thread *and* greenlet: :class:`ContextLocal`, a ``threading.local``
whose attributes live in context variables.

The library keeps per-request state (a write in progress, its attempts, a best-effort metadata
request, the copy a read goes to, a merged query's parsing) where the request is sent. With
threads, ``threading.local`` is that place. The asyncio entry points run the same code in
greenlets on one event-loop thread (``pynamodb_sharding.aio``), as the fleet simulator does,
and there a ``threading.local`` is shared by every greenlet: one request's state would leak
into another's. Context variables are per thread and per greenlet (each greenlet runs in a
context of its own), so each request sees only its own.

No import from the package: every layer may use it.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

__all__ = ["ContextLocal"]

_MISSING = object()


class ContextLocal:
    """Like ``threading.local()``: attributes set here are seen only by the thread, or the
    greenlet, that set them (and by the contexts copied from it afterwards, as a task's is);
    reading one never set raises ``AttributeError``, so ``getattr(local, name, default)`` works.
    """

    __slots__ = ("_lock", "_name", "_vars")

    def __init__(self, name: str = "local") -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_vars", {})
        object.__setattr__(self, "_lock", threading.Lock())

    def _var(self, attribute: str) -> contextvars.ContextVar[Any]:
        variables: dict[str, contextvars.ContextVar[Any]] = object.__getattribute__(self, "_vars")
        found = variables.get(attribute)
        if found is None:
            with object.__getattribute__(self, "_lock"):
                found = variables.setdefault(attribute, contextvars.ContextVar(
                    f"pynamodb_sharding.{object.__getattribute__(self, '_name')}.{attribute}", default=_MISSING,
                ))
        return found

    def __getattr__(self, attribute: str) -> Any:
        value = self._var(attribute).get()
        if value is _MISSING:
            raise AttributeError(attribute)
        return value

    def __setattr__(self, attribute: str, value: Any) -> None:
        self._var(attribute).set(value)

    def __delattr__(self, attribute: str) -> None:
        variable = self._var(attribute)
        if variable.get() is _MISSING:
            raise AttributeError(attribute)
        variable.set(_MISSING)
