"""The Django example's tests pass under Django's own runner and under pytest-django, against
the session's DynamoDB Local.

``python manage.py test audit`` runs in a subprocess (Django's settings stay out of this test
session) with ``DYNAMODB_LOCAL_ENDPOINT`` pointing at the plugin's server, the way a project
reuses a running DynamoDB Local; it exercises the view, the app's management command,
``manage.py pynamodb_sharding status`` on a models module that also holds an ORM model, and
:class:`~pynamodb_sharding.contrib.django.testing.DynamoDBTestMixin`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3

APP = Path(__file__).resolve().parents[2] / "examples" / "django_app"


def app_environment(server: Any) -> dict[str, str]:
    return {
        **{name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "DJANGO_"))},
        "DYNAMODB_LOCAL_ENDPOINT": server.endpoint,
        "AWS_ACCESS_KEY_ID": server.aws_access_key_id,
        "AWS_SECRET_ACCESS_KEY": server.aws_secret_access_key,
    }


def test_manage_py_test_passes(dynamodb_local: Any) -> None:
    env = app_environment(dynamodb_local)
    done = subprocess.run(
        [sys.executable, "manage.py", "test", "audit", "-v", "2"],
        cwd=APP, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 3 tests" in done.stderr
    assert "\nOK" in done.stderr
    # The mixin gave each test tables of its own and deleted them afterwards.
    client = boto3.client(
        "dynamodb", endpoint_url=dynamodb_local.endpoint, region_name=dynamodb_local.region,
        aws_access_key_id=dynamodb_local.aws_access_key_id, aws_secret_access_key=dynamodb_local.aws_secret_access_key,
    )
    assert not [name for name in client.list_tables()["TableNames"] if name.startswith("django_audit_log")]


def test_pytest_django_passes(dynamodb_local: Any) -> None:
    """The same tests collected by pytest with pytest-django (the example's pytest.ini)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=APP, env=app_environment(dynamodb_local), capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
