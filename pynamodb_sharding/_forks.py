"""The library's fork handlers, registered in one place.

Modules that keep locks, connections, caches or per-process state register what a forked child
(``os.fork``, multiprocessing's ``fork`` start method, gunicorn and uWSGI workers) must reset
here, instead of each calling :func:`os.register_at_fork` in its own way. On a platform that
does not fork (Windows) nothing is registered. Handlers run as ``os.register_at_fork`` runs
them: ``before`` in reverse order of registration, the ``after_*`` ones in order.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["at_fork", "registered"]

_Handler = Callable[[], object]

#: (before, after_in_parent, after_in_child) of each registration, in order.
_REGISTERED: list[tuple[_Handler | None, _Handler | None, _Handler | None]] = []


def at_fork(*, before: _Handler | None = None, after_in_parent: _Handler | None = None,
            after_in_child: _Handler | None = None) -> None:
    """Run ``before`` in the parent before each fork, ``after_in_parent`` in the parent after
    it and ``after_in_child`` in the child (each optional)."""
    if before is None and after_in_parent is None and after_in_child is None:
        msg = "at_fork() needs a handler: before=, after_in_parent= or after_in_child="
        raise TypeError(msg)
    _REGISTERED.append((before, after_in_parent, after_in_child))
    if not hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
        return
    handlers = {"before": before, "after_in_parent": after_in_parent, "after_in_child": after_in_child}
    os.register_at_fork(**{name: handler for name, handler in handlers.items() if handler is not None})


def registered() -> list[tuple[_Handler | None, _Handler | None, _Handler | None]]:
    """What was registered so far, in order (for tests and diagnostics)."""
    return list(_REGISTERED)
