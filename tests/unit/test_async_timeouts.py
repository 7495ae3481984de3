"""aiohttp's timeouts become botocore's: ``ConnectTimeoutError`` only when no connection was made.

The difference matters: a ``ConnectTimeoutError`` says the request was not sent (a write may be
sent again, pynamodb_sharding._attempts); a ``ReadTimeoutError`` says it may have been applied.
aiohttp 3.10 and later raise ``ConnectionTimeoutError`` for a connect timeout; 3.9 (the async
extra's floor, which ``make test-lowest`` installs) raises ``ServerTimeoutError`` with a message.
"""

from __future__ import annotations

import aiohttp
import pytest
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from pynamodb_sharding._async_transport import timeout_error

URL = "http://127.0.0.1:8000/"


def connect_timeouts() -> list[BaseException]:
    """aiohttp's connect timeouts: 3.9's form, and 3.10's class where it exists."""
    errors: list[BaseException] = [aiohttp.ServerTimeoutError(f"Connection timeout to host {URL}")]
    newer = getattr(aiohttp, "ConnectionTimeoutError", None)
    if newer is not None:
        errors.append(newer(f"Connection timeout to host {URL}"))
    return errors


@pytest.mark.parametrize("error", connect_timeouts())
def test_connect_timeouts_are_connect_timeouts(error: BaseException) -> None:
    assert isinstance(timeout_error(error, URL), ConnectTimeoutError)


@pytest.mark.parametrize("error", [
    aiohttp.ServerTimeoutError("Timeout on reading data from socket"),
    TimeoutError(),
])
def test_other_timeouts_are_read_timeouts(error: BaseException) -> None:
    converted = timeout_error(error, URL)
    assert isinstance(converted, ReadTimeoutError)
    assert not isinstance(converted, ConnectTimeoutError)
