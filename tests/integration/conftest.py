"""Fixtures shared by the integration tests."""

from tests.regions import second_server  # noqa: F401  (one second server, the other region, per session)
