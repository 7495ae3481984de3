"""Fixtures shared by the integration tests."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.async_loop import loop  # noqa: F401  (an event loop per test, for the async methods)
from tests.raw import local_client
from tests.regions import second_server  # noqa: F401  (one second server, the other region, per session)


@pytest.fixture
def checkpoint_table(dynamodb_local: Any) -> Iterator[str]:
    """The name of a migration checkpoint table of the test's own; deleted afterwards if a job
    created it."""
    name = f"checkpoints_{uuid.uuid4().hex[:8]}"
    yield name
    client = local_client(dynamodb_local)
    with contextlib.suppress(client.exceptions.ResourceNotFoundException):
        client.delete_table(TableName=name)
