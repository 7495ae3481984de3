"""The pytest plugin: a real DynamoDB Local per test session and a table of its own per test.

Registered through the ``pytest11`` entry point, so installing pynamodb-sharding makes these
fixtures available in any project's tests:

``dynamodb_local`` (session)
    The running server (:class:`~pynamodb_sharding.testing.local.DynamoDBLocal`): started
    once per session (once per xdist worker), stopped at the end, also when the run is
    interrupted. ``DYNAMODB_LOCAL_ENDPOINT`` makes it use a server you already run.

``dynamodb_models`` (function)
    A callable ``bind(*model_classes)`` that points the models (and their companion models)
    at that server with fresh, uniquely named tables, created before it returns and deleted
    after the test, when every ``Meta`` is restored. Classes over one production table (same
    ``Meta.table_name``, host and region) share one test table.

``dynamodb_models_module`` (module), ``dynamodb_models_session`` (session)
    The same, with tables kept for the module or the session: a
    :class:`~pynamodb_sharding.testing.binding.ModelBinding`, callable like
    ``dynamodb_models``, whose ``truncate()`` empties the tables between tests (much faster
    than creating new ones). Use them from fixtures of the same or a wider scope.

``dynamodb_loopback_only`` (function), ``--dynamodb-loopback-only``, ini ``dynamodb_loopback_only``
    The guard: a model class that would send a DynamoDB request to an endpoint that is not
    on this machine (a class the test forgot to bind) raises
    :class:`~pynamodb_sharding.testing.guard.UnboundModelError` before anything is sent; the
    fixture turns it on for the tests that use it, the option and the ini setting for every test.

This module is loaded in every pytest run of a project that installs the package, before the
project's conftest files and test packages: it imports only pytest and the standard library,
and PynamoDB, botocore and the rest of the testing tools are imported when a fixture runs. A
test suite that calls ``gevent.monkey.patch_all()`` in its ``conftest.py`` or its tests'
``__init__.py`` therefore patches ``ssl`` before anything imported it
(``tests/plugin/test_gevent.py`` runs such a suite with gevent's warning as an error).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import pytest

if TYPE_CHECKING:
    from pynamodb.models import Model

    from pynamodb_sharding.testing.binding import ModelBinding
    from pynamodb_sharding.testing.guard import LoopbackGuard
    from pynamodb_sharding.testing.local import DynamoDBLocal

__all__ = [
    "BindModels",
    "dynamodb_local",
    "dynamodb_loopback_only",
    "dynamodb_models",
    "dynamodb_models_module",
    "dynamodb_models_session",
]

_OPTION = "--dynamodb-loopback-only"
_INI = "dynamodb_loopback_only"
#: The run-wide guard of this session (``--dynamodb-loopback-only`` or the ini setting).
_RUN_GUARD = pytest.StashKey["LoopbackGuard"]()


class BindModels(Protocol):
    """What the ``dynamodb_models`` fixture returns."""

    def __call__(self, *models: type[Model]) -> dict[type[Model], str]:
        """Bind the models and their companions; return each bound model's table name."""


def pytest_addoption(parser: pytest.Parser) -> None:
    help_text = (
        "fail any DynamoDB request of a PynamoDB model class to an endpoint that is not on this machine "
        "(a class the test did not bind with dynamodb_models), before it is sent"
    )
    group = parser.getgroup("pynamodb-sharding")
    group.addoption(_OPTION, action="store_true", default=False, dest="dynamodb_loopback_only", help=help_text)
    parser.addini(_INI, help_text, type="bool", default=False)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before the test's fixtures, so that a session or module fixture that writes through an
    # unbound model is refused too; each test covers the model classes defined since the last.
    config = item.config
    if not (config.getoption("dynamodb_loopback_only") or config.getini(_INI)):
        return
    if "pynamodb.models" not in sys.modules:
        return  # no model class exists yet: nothing to guard, and nothing to import early
    guard = config.stash.get(_RUN_GUARD, None)
    if guard is None:
        from pynamodb_sharding.testing.guard import LoopbackGuard

        guard = config.stash[_RUN_GUARD] = LoopbackGuard()
    guard.cover()


def pytest_unconfigure(config: pytest.Config) -> None:
    guard = config.stash.get(_RUN_GUARD, None)
    if guard is not None:
        guard.release()
        del config.stash[_RUN_GUARD]


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    """The DynamoDB Local server of this test session (or of this xdist worker)."""
    from pynamodb_sharding.testing.botocore_data import shared_botocore_data
    from pynamodb_sharding.testing.local import DynamoDBLocalError, running_dynamodb_local

    with contextlib.ExitStack() as stack:
        # The models bound in each test make botocore sessions of their own: they share the
        # parsed data files instead of reading them again (a fifth of a suite's CPU).
        stack.enter_context(shared_botocore_data())
        try:
            server = stack.enter_context(running_dynamodb_local())
        except DynamoDBLocalError as error:
            problem = str(error)
        else:
            yield server
            return
    # A failure, not a skip: a suite that silently skips its DynamoDB tests would pass.
    # Raised outside the except block so the message is not printed twice as a chain.
    pytest.fail(problem, pytrace=False)


@pytest.fixture
def dynamodb_models(dynamodb_local: DynamoDBLocal) -> Iterator[BindModels]:
    """Bind model classes to ``dynamodb_local`` with tables of their own for this test."""
    from pynamodb_sharding.testing.binding import ModelBinding

    with ModelBinding(dynamodb_local) as binding:
        yield binding.bind


@pytest.fixture(scope="module")
def dynamodb_models_module(dynamodb_local: DynamoDBLocal) -> Iterator[ModelBinding]:
    """Bind model classes with tables kept for this test module (``truncate()`` empties them)."""
    from pynamodb_sharding.testing.binding import ModelBinding

    with ModelBinding(dynamodb_local) as binding:
        yield binding


@pytest.fixture(scope="session")
def dynamodb_models_session(dynamodb_local: DynamoDBLocal) -> Iterator[ModelBinding]:
    """Bind model classes with tables kept for the whole session (``truncate()`` empties them)."""
    from pynamodb_sharding.testing.binding import ModelBinding

    with ModelBinding(dynamodb_local) as binding:
        yield binding


@pytest.fixture
def dynamodb_loopback_only() -> Iterator[LoopbackGuard]:
    """Refuse, for this test, every request of a model class to an endpoint off this machine.

    Request it before the fixtures that write (``pytest.mark.usefixtures`` on a module does);
    ``--dynamodb-loopback-only`` or ``dynamodb_loopback_only = true`` guards every test instead.
    """
    from pynamodb_sharding.testing.guard import LoopbackGuard

    guard = LoopbackGuard()
    guard.cover()
    try:
        yield guard
    finally:
        guard.release()
