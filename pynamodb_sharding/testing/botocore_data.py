"""botocore's data files read once per test session, not once per model a test binds.

Every PynamoDB connection makes a botocore session of its own, and each new session reads and
parses botocore's data files again (the endpoint list, the partitions, DynamoDB's service model
and endpoint rules) before its first request: about 200 ms of CPU on a small machine, where the
client itself takes about 14. A test suite binds its models to fresh tables in every test, so a
suite of a few hundred tests spends minutes there (in this project's own integration tests,
about a quarter of the test processes' CPU; its ``make test`` takes about a third less time
with it).

:func:`shared_botocore_data` makes the sessions created meanwhile share one loader per data path
(``AWS_DATA_PATH`` and the ``data_path`` setting are honoured): what one session has parsed,
the next reuses. The data is what a session would read itself, and botocore already shares a
loader's parsed files among the clients of one session, which only read them. The
``dynamodb_local`` fixture of the pytest plugin turns it on for the session.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import botocore.session

from pynamodb_sharding._host import shared_data_loader

__all__ = ["shared_botocore_data"]

_lock = threading.Lock()
_depth = 0
_original: Any = None


@contextlib.contextmanager
def shared_botocore_data() -> Iterator[None]:
    """While it runs, botocore sessions created in this process share a loader of botocore's
    data files per data path (what one session has parsed, the next reuses, also in a later
    ``with``). Uses may nest; once the last ends, a new session reads the files again, as
    botocore's own do.

    For a suite that binds its models itself (``unittest``, say)::

        def setUpModule():
            unittest.enterModuleContext(shared_botocore_data())
    """
    global _depth, _original
    with _lock:
        if _depth == 0:
            _original = botocore.session.create_loader
            botocore.session.create_loader = _create_loader
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                botocore.session.create_loader = _original
                _original = None


def _create_loader(search_path_string: str | None = None) -> Any:
    # botocore.session.Session registers its data loader as
    # ``lambda: create_loader(self.get_config_variable('data_path'))``. The loaders are the
    # process's, kept for the next ``with``, and the ones the library's derived models share.
    return shared_data_loader(search_path_string)
