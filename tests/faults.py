"""Network faults injected through botocore's own ``before-send`` hook, per table and operation.

Each planned fault answers (or loses the reply of) one attempt, in order:

- ``"lost"``: the request is sent to the server (so it is applied), then the attempt raises
  ``ReadTimeoutError``, as when the reply never arrives;
- ``"closed"``: the same, ending in ``ConnectionClosedError``;
- ``"throttle"``: a key-range ``ProvisionedThroughputExceededException`` (nothing applied);
- ``"index-throttle"``: the same throttle, with a reason naming a GSI;
- ``"no-reasons:<ErrorCode>"``: a throttle with that error code
  (``ProvisionedThroughputExceededException``, ``ThrottlingException``...) and no
  ``ThrottlingReasons``, as DynamoDB Local and DynamoDB before reasons existed answer (every
  reason itself is produced by the partition-limit simulator);
- ``"denied"``: an ``AccessDeniedException`` (nothing applied);
- ``"server-error"``: a 500 ``InternalServerError`` (nothing applied; botocore retries it);
- ``"ok"``: the attempt goes through untouched.

When the plan is used up, attempts go through. botocore parses the answers and retries
exactly as it would for real ones.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError
from botocore.httpsession import URLLib3Session
from pynamodb.models import Model

__all__ = ["Faults"]

KEY_RANGE = "TableWriteKeyRangeThroughputExceeded"
INDEX_KEY_RANGE = "IndexWriteKeyRangeThroughputExceeded"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _error(url: str, status: int, code: str, message: str, **extra: Any) -> AWSResponse:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
    headers = {"x-amzn-requestid": "injected", "content-type": "application/x-amz-json-1.0"}
    return AWSResponse(url, status, headers, _Raw(json.dumps(body).encode()))


class Faults:
    """Plans faults for one operation on one model's table; ``log`` records what was done."""

    def __init__(self, model: type[Model], operation: str) -> None:
        self.model = model
        self.operation = operation
        self.plan: list[str] = []
        self.log: list[str] = []
        self._http = URLLib3Session()
        self._lock = threading.Lock()
        model._get_connection().connection.client.meta.events.register_first(
            "before-send.dynamodb", self.before_send
        )

    def before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        table = json.loads(request.body).get("TableName")
        if operation != self.operation or table != self.model.Meta.table_name:
            return None
        with self._lock:
            fault = self.plan.pop(0) if self.plan else "ok"
            self.log.append(fault)
        if fault == "ok":
            return None
        if fault in ("lost", "closed"):
            self._http.send(request)  # applied by the server; the reply is dropped
            if fault == "lost":
                raise ReadTimeoutError(endpoint_url=request.url)
            raise ConnectionClosedError(endpoint_url=request.url)
        if fault in ("throttle", "index-throttle"):
            resource = f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}"
            reason = KEY_RANGE
            if fault == "index-throttle":
                resource += "/index/by-date"
                reason = INDEX_KEY_RANGE
            return _error(
                request.url, 400, "ProvisionedThroughputExceededException",
                "Throughput exceeds the current capacity for one or more of your partitions.",
                ThrottlingReasons=[{"reason": reason, "resource": resource}],
            )
        if fault.startswith("no-reasons:"):
            return _error(request.url, 400, fault.removeprefix("no-reasons:"), "throttled, no reasons (injected)")
        if fault == "denied":
            return _error(request.url, 400, "AccessDeniedException", "not authorized (injected)")
        if fault == "server-error":
            return _error(request.url, 500, "InternalServerError", "internal server error (injected)")
        msg = f"unknown fault {fault!r}"
        raise AssertionError(msg)
