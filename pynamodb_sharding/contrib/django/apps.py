"""The Django app configuration of the integration."""

from __future__ import annotations

from django.apps import AppConfig


class PynamoDBShardingConfig(AppConfig):  # type: ignore[misc]  # Django ships no type hints
    """Registers the ``pynamodb_sharding`` management command."""

    name = "pynamodb_sharding.contrib.django"
    label = "pynamodb_sharding"
    verbose_name = "pynamodb-sharding"
