"""Shared test configuration: pytester, for the tests of the pytest plugin itself."""

pytest_plugins = ["pytester"]

# Hypothesis' per-example deadline (200 ms) measures the machine, not the code: on 2 cores
# shared with DynamoDB Local and a second test worker, a pure function's example can take
# longer and fail a run at random. Properties are checked without it.
from hypothesis import settings  # noqa: E402

settings.register_profile("pynamodb-sharding", deadline=None)
settings.load_profile("pynamodb-sharding")


import signal  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def sigint_delivered() -> Iterator[None]:
    """SIGINT delivered to the processes this test starts, as it is to anything started from a
    terminal: a suite started in the background by a non-interactive shell (`nohup make test &`,
    a CI step run with `&`) inherits SIGINT ignored, and so would every process it starts. The
    tests of Ctrl-C (a server stopped by it, pytest interrupted by it) need it; the rest of the
    suite keeps what it was given."""
    previous = signal.getsignal(signal.SIGINT)
    if previous == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
