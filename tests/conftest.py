"""Shared test configuration: pytester, for the tests of the pytest plugin itself."""

pytest_plugins = ["pytester"]

# Hypothesis' per-example deadline (200 ms) measures the machine, not the code: on 2 cores
# shared with DynamoDB Local and a second test worker, a pure function's example can take
# longer and fail a run at random. Properties are checked without it.
from hypothesis import settings  # noqa: E402

settings.register_profile("pynamodb-sharding", deadline=None)
settings.load_profile("pynamodb-sharding")

