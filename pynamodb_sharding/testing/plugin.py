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
    after the test, when every ``Meta`` is restored.

``dynamodb_models_module`` (module), ``dynamodb_models_session`` (session)
    The same, with tables kept for the module or the session: a
    :class:`~pynamodb_sharding.testing.binding.ModelBinding`, callable like
    ``dynamodb_models``, whose ``truncate()`` empties the tables between tests (much faster
    than creating new ones). Use them from fixtures of the same or a wider scope.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol

import pytest
from pynamodb.models import Model

from pynamodb_sharding.testing.binding import ModelBinding
from pynamodb_sharding.testing.local import DynamoDBLocal, DynamoDBLocalError, running_dynamodb_local

__all__ = ["BindModels", "dynamodb_local", "dynamodb_models", "dynamodb_models_module", "dynamodb_models_session"]


class BindModels(Protocol):
    """What the ``dynamodb_models`` fixture returns."""

    def __call__(self, *models: type[Model]) -> dict[type[Model], str]:
        """Bind the models and their companions; return each bound model's table name."""


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    """The DynamoDB Local server of this test session (or of this xdist worker)."""
    with contextlib.ExitStack() as stack:
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
    with ModelBinding(dynamodb_local) as binding:
        yield binding.bind


@pytest.fixture(scope="module")
def dynamodb_models_module(dynamodb_local: DynamoDBLocal) -> Iterator[ModelBinding]:
    """Bind model classes with tables kept for this test module (``truncate()`` empties them)."""
    with ModelBinding(dynamodb_local) as binding:
        yield binding


@pytest.fixture(scope="session")
def dynamodb_models_session(dynamodb_local: DynamoDBLocal) -> Iterator[ModelBinding]:
    """Bind model classes with tables kept for the whole session (``truncate()`` empties them)."""
    with ModelBinding(dynamodb_local) as binding:
        yield binding
