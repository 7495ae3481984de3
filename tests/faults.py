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
from collections.abc import Callable, Iterator
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError
from botocore.httpsession import URLLib3Session
from pynamodb.models import Model

__all__ = ["INDEX_KEY_RANGE", "KEY_RANGE", "Faults", "LostReplies", "TableCreation", "error_response"]

KEY_RANGE = "TableWriteKeyRangeThroughputExceeded"
INDEX_KEY_RANGE = "IndexWriteKeyRangeThroughputExceeded"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def error_response(url: str, status: int, code: str, message: str, **extra: Any) -> AWSResponse:
    """The response DynamoDB sends for an error ``code``, with ``extra`` fields in its body."""
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
        body = json.loads(request.body)
        table = (body.get("TableName") or next(iter(body.get("RequestItems", {})), None)  # batch requests
                 or next((action["TableName"] for entry in body.get("TransactItems", [])  # transactions
                          for action in entry.values()), None))
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
            return error_response(
                request.url, 400, "ProvisionedThroughputExceededException",
                "Throughput exceeds the current capacity for one or more of your partitions.",
                ThrottlingReasons=[{"reason": reason, "resource": resource}],
            )
        if fault.startswith("no-reasons:"):
            return error_response(request.url, 400, fault.removeprefix("no-reasons:"),
                                  "throttled, no reasons (injected)")
        if fault == "denied":
            return error_response(request.url, 400, "AccessDeniedException", "not authorized (injected)")
        if fault == "server-error":
            return error_response(request.url, 500, "InternalServerError", "internal server error (injected)")
        msg = f"unknown fault {fault!r}"
        raise AssertionError(msg)


#: Requests DynamoDB refuses with ``ResourceNotFoundException`` while a table is being created.
_ITEM_OPERATIONS = frozenset({
    "PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query", "Scan", "BatchWriteItem", "BatchGetItem",
})


class LostReplies:
    """A ``before-send`` hook on a model's client that sends each request :meth:`lose` picks and
    then loses its reply (``ReadTimeoutError``): applied by the server, unknown to the caller, so
    botocore sends it again. ``lost`` counts them."""

    def __init__(self, model: type[Model]) -> None:
        self.lost = 0
        self._http = URLLib3Session()
        self._lock = threading.Lock()
        model._get_connection().connection.client.meta.events.register_first("before-send.dynamodb", self.before_send)

    def lose(self, operation: str, body: dict[str, Any]) -> bool:
        """Whether to lose the reply to this request (called one request at a time)."""
        raise NotImplementedError

    def before_send(self, request: Any, **_: Any) -> None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        with self._lock:
            if not self.lose(operation, json.loads(request.body)):
                return
            self.lost += 1
        self._http.send(request)  # applied by the server; the reply is dropped
        raise ReadTimeoutError(endpoint_url=request.url)


class TableCreation:
    """Plays DynamoDB's ``CREATING`` state of one table, which DynamoDB Local skips (it creates a
    table at once), through botocore's ``before-send`` hook of the model's client.

    While the table is *creating*, ``DescribeTable`` answers the real description with
    ``TableStatus: CREATING`` and item requests get ``ResourceNotFoundException``, as DynamoDB
    answers for a table being created. The state starts with :meth:`start` or, with
    ``after_create``, when the first ``CreateTable`` of the table is sent; it ends after ``polls``
    ``DescribeTable`` answers, or at :meth:`release` when ``polls`` is ``None``.

    ``barrier``: every ``CreateTable`` of the table waits there before it is sent, so that two
    writers are made to create the table at the same moment. ``created`` records the outcome
    of each ``CreateTable`` (``"ok"`` or the error code), ``refused`` each refused item request;
    ``changed`` is notified on every record.
    """

    def __init__(self, model: type[Model], *, polls: int | None = None, after_create: bool = False,
                 barrier: threading.Barrier | None = None) -> None:
        self.table = model.Meta.table_name
        self.created: list[str] = []
        self.refused: list[str] = []
        self.changed = threading.Condition()
        self._polls = polls
        self._after_create = after_create
        self._barrier = barrier
        self._creating = False
        self._refuse_next = False
        self._polls_left: int | None = None
        self._create_sent = False
        self._http = URLLib3Session()
        events = model._get_connection().connection.client.meta.events
        events.register_first("before-send.dynamodb", self.before_send)
        events.register("after-call.dynamodb.CreateTable", self.after_create_table)

    def start(self, polls: int | None = None) -> None:
        """The table is being created from now on (for ``polls`` describes, else until released)."""
        with self.changed:
            self._creating, self._polls_left = True, polls

    def refuse_next(self) -> None:
        """The next item request is refused as if the table were being created, and the table is
        active by the time the writer asks (it became ACTIVE in between)."""
        with self.changed:
            self._refuse_next = True

    def release(self) -> None:
        """The table is active from now on."""
        with self.changed:
            self._creating = False

    def before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        body = json.loads(request.body)
        table = body.get("TableName") or next(iter(body.get("RequestItems") or {}), None)
        if table != self.table:
            return None
        if operation == "CreateTable":
            if self._barrier is not None:
                self._barrier.wait(timeout=60)
            with self.changed:
                # From the first CreateTable sent, the table exists and is CREATING, as DynamoDB
                # shows it: a writer whose own CreateTable is refused (ResourceInUseException)
                # and describes the table before the creator's reply is parsed sees CREATING too,
                # never ACTIVE first (starting the state at the reply let it see ACTIVE, put, and
                # be refused as if the table were being created: CI failed a test on that).
                if self._after_create and not self._create_sent:
                    self._creating, self._polls_left = True, self._polls
                self._create_sent = True
            return None
        with self.changed:
            if self._refuse_next and operation in _ITEM_OPERATIONS:
                self._refuse_next = False
                self.refused.append(operation)
                self.changed.notify_all()
                return error_response(request.url, 400, "ResourceNotFoundException", "Requested resource not found")
            if not self._creating:
                return None
            if operation in _ITEM_OPERATIONS:
                self.refused.append(operation)
                self.changed.notify_all()
                return error_response(request.url, 400, "ResourceNotFoundException", "Requested resource not found")
            if operation != "DescribeTable":
                return None
            if self._polls_left is not None:
                self._polls_left -= 1
                if self._polls_left <= 0:
                    self._creating = False  # this answer is the last CREATING one
        answer = self._http.send(request)
        if answer.status_code != 200:
            return answer
        description = json.loads(answer.content)
        description["Table"]["TableStatus"] = "CREATING"
        headers = {"x-amzn-requestid": "injected", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 200, headers, _Raw(json.dumps(description).encode()))

    def after_create_table(self, parsed: Any = None, **_: Any) -> None:
        if not isinstance(parsed, dict):
            return
        name = (parsed.get("TableDescription") or {}).get("TableName")
        code = (parsed.get("Error") or {}).get("Code")
        if name != self.table and code is None:
            return
        with self.changed:
            self.created.append(code or "ok")
            self.changed.notify_all()


class OnRequest:
    """Runs ``action`` once, at the given botocore event of ``model``'s client (a context manager
    that registers and unregisters it): the other party of a race, at its exact request."""

    def __init__(self, model: type[Any], event: str, action: Callable[[], Any]) -> None:
        self.events = model._get_connection().connection.client.meta.events
        self.event, self.action, self.fired = event, action, False

    def __call__(self, **_: Any) -> None:
        if not self.fired:
            self.fired = True
            self.action()

    def __enter__(self) -> OnRequest:
        self.events.register(self.event, self)
        return self

    def __exit__(self, *_: object) -> None:
        self.events.unregister(self.event, self)
