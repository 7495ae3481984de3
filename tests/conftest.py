"""Shared test configuration: pytester, for the tests of the pytest plugin itself."""

pytest_plugins = ["pytester"]

# Hypothesis' per-example deadline (200 ms) measures the machine, not the code: on 2 cores
# shared with DynamoDB Local and a second test worker, a pure function's example can take
# longer and fail a run at random. Properties are checked without it.
from hypothesis import settings  # noqa: E402

settings.register_profile("pynamodb-sharding", deadline=None)
settings.load_profile("pynamodb-sharding")


# A suite started in the background by a non-interactive shell (`nohup make test &`, a CI
# step run with `&`) inherits SIGINT ignored, and so would every process it starts: the tests
# of Ctrl-C (a server stopped by it, pytest interrupted by it) send SIGINT to those processes
# and need it delivered, as it is to anything started from a terminal.
import signal  # noqa: E402

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
