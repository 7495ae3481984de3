"""The loopback-only guard: a model class a test forgot to bind fails before it sends anything.

A binding (``dynamodb_models``) points the classes it is given at DynamoDB Local; any other
class keeps its production ``Meta.host`` (or none, which means AWS), and a test that uses it
by mistake would read or write a real table. While a :class:`LoopbackGuard` is on, such a
class raises :class:`UnboundModelError` naming the class, its table and the fix.

How: PynamoDB builds a model's connection in ``Model._get_connection()`` from ``Meta`` and
caches it in the class attribute ``_connection`` (see ``pynamodb_sharding._host``). The guard
puts a descriptor in that attribute of every model class that exists when it covers them,
abstract bases included, so classes defined later under them inherit it: for a class whose
``Meta.host`` is not a loopback address it returns a stand-in connection that raises on any
use, before a botocore client, its credentials or a socket exist; for any other class it
returns ``None``, and PynamoDB builds the real connection as it would without the guard.
Nothing global changes: no PynamoDB or botocore function is replaced, and :meth:`release`
puts every class's own attribute back. Requests sent through a botocore client, a boto3
client or a PynamoDB ``Connection`` made by hand are not model requests and are not checked.
"""

from __future__ import annotations

import ipaddress
import weakref
from collections.abc import Iterator
from typing import Any, NoReturn
from urllib.parse import urlsplit

from pynamodb.models import Model

from pynamodb_sharding._exceptions import ShardingError
from pynamodb_sharding._host import own_connection, restore_connection, set_connection

__all__ = ["LoopbackGuard", "UnboundModelError", "endpoint", "is_loopback"]

_ABSENT = object()


class UnboundModelError(ShardingError):
    """A model class that no test binding points at DynamoDB Local was used under the guard.

    .. versionadded:: 0.1.0
    """

    code = "unbound-model"


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a ``Meta.host`` URL) is on this machine: ``localhost`` or a loopback IP.

    ``None`` (PynamoDB's default, AWS's endpoint for the region) is not. No name is resolved.
    """
    if not host:
        return False
    hostname = urlsplit(host if "//" in host else f"//{host}").hostname
    if hostname is None:
        return False
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False


def endpoint(model: type[Model]) -> str:
    """Where ``model``'s requests go: ``Meta.host``, else AWS's endpoint for ``Meta.region``."""
    meta = model.Meta
    host: str | None = getattr(meta, "host", None)
    if host:
        return host
    return f"https://dynamodb.{getattr(meta, 'region', None) or 'us-east-1'}.amazonaws.com"


class _Refusal:
    """Stands in for a guarded model's ``TableConnection``: any use raises, nothing is sent."""

    def __init__(self, model: type[Model]) -> None:
        self.model = model
        # What PynamoDB compares with Meta.table_name before reusing a cached connection.
        self.table_name = model.Meta.table_name

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(name)  # copy, pickle and hasattr probes are not requests
        model = self.model
        bound_base = any(is_loopback(getattr(getattr(base, "Meta", None), "host", None)) for base in model.__mro__[1:])
        if bound_base:  # a class the library derived from a bound one (a home-region model, say)
            fix = (
                "The class derives from a class bound to DynamoDB Local but its own Meta names another "
                "endpoint (a metadata model's Meta.home_region without Meta.home_host, for example): point "
                "that endpoint at DynamoDB Local too."
            )
        else:
            fix = (
                f"Bind the class to DynamoDB Local in the test: dynamodb_models({model.__name__}) (or "
                f"dynamodb_models_module / dynamodb_models_session)."
            )
        msg = (
            f"{model.__name__} (table {str(model.Meta.table_name)!r}) was about to send a DynamoDB request "
            f"to {endpoint(model)}, which is not on this machine, while requests may only go to loopback "
            f"endpoints (dynamodb_loopback_only); nothing was sent. {fix}"
        )
        raise UnboundModelError(msg)


class _GuardSlot:
    """The descriptor a guard puts in a model class's ``_connection`` (see the module docstring)."""

    #: Read by ``pynamodb_sharding._host.unshared_connection``: the classes the library derives
    #: at run time (period models, home-region metadata models) start with this descriptor.
    follows_subclasses = True

    def __init__(self) -> None:
        self.active = True

    def __get__(self, instance: object, owner: type[Model]) -> _Refusal | None:
        meta = getattr(owner, "Meta", None)
        # Inert once its guard is released (a binding may restore it after that): None makes
        # PynamoDB build the connection from Meta, exactly as when nothing was cached.
        if not self.active or meta is None or is_loopback(getattr(meta, "host", None)):
            return None
        return _Refusal(owner)


def _model_classes() -> Iterator[type[Model]]:
    seen: set[type[Model]] = set()
    pending = list(Model.__subclasses__())
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        yield model
        pending.extend(model.__subclasses__())


class LoopbackGuard:
    """Refuses every request of a model class whose ``Meta.host`` is not a loopback address.

    ``cover()`` guards the model classes that exist at that moment (and the classes defined
    later under them); ``release()`` restores each class's own ``_connection``. The pytest
    plugin covers before every test while ``--dynamodb-loopback-only`` (or the ini setting
    ``dynamodb_loopback_only``) is on, and the ``dynamodb_loopback_only`` fixture for one test.

    .. versionadded:: 0.1.0
    """

    def __init__(self) -> None:
        self._slot = _GuardSlot()
        # Each covered class and its own ``_connection`` before (or _ABSENT), in covering order;
        # weakly, so that a class a test made and dropped is freed during the run (its
        # connection never refers back to it), as it is without the guard.
        self._saved: weakref.WeakKeyDictionary[type[Model], Any] = weakref.WeakKeyDictionary()

    def cover(self) -> list[type[Model]]:
        """Guard every model class not guarded yet; returns the classes covered by this call.

        A class bound to a loopback endpoint keeps its connection; another guard's classes are
        left to it.
        """
        if not self._slot.active:
            msg = "this LoopbackGuard was released; make a new one"
            raise RuntimeError(msg)
        covered = []
        for model in _model_classes():
            own = own_connection(model, _ABSENT)
            if isinstance(own, _GuardSlot) and own.active:
                continue
            meta = getattr(model, "Meta", None)
            if meta is not None and is_loopback(getattr(meta, "host", None)):
                continue
            self._saved.setdefault(model, own)
            set_connection(model, self._slot)  # read through __get__
            covered.append(model)
        return covered

    def release(self) -> None:
        """Put back each covered class's own ``_connection``. Safe to call twice."""
        self._slot.active = False
        for model, own in reversed(list(self._saved.items())):
            restore_connection(model, own, inherited=own is _ABSENT)
        self._saved.clear()
