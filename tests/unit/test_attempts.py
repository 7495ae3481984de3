"""Which write attempts may have been applied, and how tracking records nest.

Proves: a timeout or a closed connection after sending, and any 5xx, may have been applied;
a refused connection, a success and a 4xx were not; the ``needs-retry`` handler marks every
record open on its thread (an outer write containing an ambiguous attempt is ambiguous too)
and nothing outside a tracking block or on another thread.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from pynamodb_sharding import _attempts as attempts
from pynamodb_sharding._attempts import may_have_been_applied, tracking

URL = "http://localhost:8000"


class _Http:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ReadTimeoutError(endpoint_url=URL), True),
        (ConnectionClosedError(endpoint_url=URL), True),
        (EndpointConnectionError(endpoint_url=URL), False),
        (ConnectTimeoutError(endpoint_url=URL), False),
    ],
)
def test_errors(error: BaseException, expected: bool) -> None:
    assert expected == may_have_been_applied(None, error)


@pytest.mark.parametrize(("status", "expected"), [(200, False), (400, False), (500, True), (503, True)])
def test_replies(status: int, expected: bool) -> None:
    assert expected == may_have_been_applied((_Http(status), {}), None)


def test_no_response_and_no_error_is_not_applied() -> None:
    assert may_have_been_applied(None, None) is False


def _ambiguous_attempt(**extra: Any) -> None:
    attempts._record_outcome(response=None, caught_exception=ReadTimeoutError(endpoint_url=URL), **extra)


def test_every_open_record_of_the_thread_is_marked() -> None:
    with tracking() as outer:
        with tracking() as inner:
            _ambiguous_attempt(attempts=1)
        with tracking() as later:
            attempts._record_outcome(response=(_Http(400), {}), caught_exception=None)
    assert (outer.may_have_applied, inner.may_have_applied, later.may_have_applied) == (True, True, False)


def test_outside_a_block_or_on_another_thread_nothing_is_marked() -> None:
    _ambiguous_attempt()  # no open record: ignored
    with tracking() as mine:
        other = threading.Thread(target=_ambiguous_attempt)
        other.start()
        other.join()
    assert mine.may_have_applied is False
