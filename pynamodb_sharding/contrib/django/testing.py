"""Django's test runner on DynamoDB Local: one server per test run, fresh tables per test.

.. code-block:: python

    from django.test import SimpleTestCase
    from pynamodb_sharding.contrib.django.testing import DynamoDBTestMixin

    class AuditLogTests(DynamoDBTestMixin, SimpleTestCase):
        dynamodb_models = [AuditLog]

        def test_save(self):
            AuditLog("/f", 1, user_id="u").save()

The first test that needs it starts DynamoDB Local (or uses ``DYNAMODB_LOCAL_ENDPOINT``) and the
process stops it when it exits; each test gets new tables for ``dynamodb_models`` (and their
companion models), deleted afterwards with every ``Meta`` put back as it was.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Sequence
from typing import ClassVar

from pynamodb.models import Model

from pynamodb_sharding.testing.binding import ModelBinding
from pynamodb_sharding.testing.local import DynamoDBLocal, running_dynamodb_local

__all__ = ["DynamoDBTestMixin", "dynamodb_local_server"]

_lock = threading.Lock()
_server: DynamoDBLocal | None = None
_stack = contextlib.ExitStack()


def dynamodb_local_server() -> DynamoDBLocal:
    """The DynamoDB Local of this test run, started on first use and stopped at exit."""
    global _server
    with _lock:
        if _server is None:
            _server = _stack.enter_context(running_dynamodb_local())
            atexit.register(_stack.close)
        return _server


class DynamoDBTestMixin:
    """Binds ``dynamodb_models`` to fresh tables on the run's DynamoDB Local for each test."""

    #: The PynamoDB models (sharded or not) each test gets fresh tables for.
    dynamodb_models: ClassVar[Sequence[type[Model]]] = ()

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]  # the TestCase this is mixed into
        binding = ModelBinding(dynamodb_local_server())
        self.addCleanup(binding.close)  # type: ignore[attr-defined]
        binding.bind(*self.dynamodb_models)
