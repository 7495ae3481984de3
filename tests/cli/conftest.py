"""Fixtures of the CLI tests: a user project directory with a models module, and its env."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from .console import ModelsModule, user_environment, write_models_module


@pytest.fixture
def cli_env(dynamodb_local: Any) -> dict[str, str]:
    """The environment the command runs in: credentials and region of the test server."""
    return user_environment(dynamodb_local)


@pytest.fixture
def dynamodb(dynamodb_local: Any) -> Any:
    """A raw botocore client of the test server, to check what the command did."""
    return boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_local.endpoint,
        region_name=dynamodb_local.region,
        aws_access_key_id=dynamodb_local.aws_access_key_id,
        aws_secret_access_key=dynamodb_local.aws_secret_access_key,
    )


@pytest.fixture
def project(tmp_path: Path, dynamodb_local: Any, dynamodb: Any) -> Iterator[ModelsModule]:
    """A models module in a fresh directory; every table it names is deleted afterwards."""
    module = write_models_module(tmp_path, dynamodb_local.endpoint)
    yield module
    for page in dynamodb.get_paginator("list_tables").paginate():
        for name in page["TableNames"]:
            if name.startswith(module.prefix):
                dynamodb.delete_table(TableName=name)
