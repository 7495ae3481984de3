"""Fixtures of the CLI tests: a user project directory with a models module, and its env."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.raw import local_client

from .console import ModelsModule, user_environment, write_models_module


@pytest.fixture
def cli_env(dynamodb_local: Any) -> dict[str, str]:
    """The environment the command runs in: credentials and region of the test server."""
    return user_environment(dynamodb_local)


@pytest.fixture
def dynamodb(dynamodb_local: Any) -> Any:
    """A raw boto3 client of the test server, to check what the command did."""
    return local_client(dynamodb_local)


@pytest.fixture
def user_credentials(monkeypatch: pytest.MonkeyPatch, cli_env: dict[str, str]) -> None:
    """This process writes with the same credentials the command reads with."""
    for name, value in cli_env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)


@pytest.fixture
def project(tmp_path: Path, dynamodb_local: Any, dynamodb: Any) -> Iterator[ModelsModule]:
    """A models module in a fresh directory; every table it names is deleted afterwards."""
    module = write_models_module(tmp_path, dynamodb_local.endpoint)
    yield module
    for page in dynamodb.get_paginator("list_tables").paginate():
        for name in page["TableNames"]:
            if name.startswith(module.prefix):
                dynamodb.delete_table(TableName=name)
