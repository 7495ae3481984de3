"""Test support: DynamoDB Local (install, serve), model binding, and the pytest plugin."""

from pynamodb_sharding.testing.binding import ModelBinding, bound_models
from pynamodb_sharding.testing.local import (
    DynamoDBLocal,
    DynamoDBLocalError,
    DynamoDBLocalWarning,
    ServerProcess,
    install,
    running_dynamodb_local,
    serve,
)

__all__ = [
    "DynamoDBLocal",
    "DynamoDBLocalError",
    "DynamoDBLocalWarning",
    "ModelBinding",
    "ServerProcess",
    "bound_models",
    "install",
    "running_dynamodb_local",
    "serve",
]
