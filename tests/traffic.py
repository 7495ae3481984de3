"""Injected throttles for the dynamic writer's tests: every request logged, chosen PutItems refused.

:class:`Traffic` is a botocore ``before-send`` handler: it answers the next ``throttle_next``
PutItem requests to a table whose name lacks ``shards`` (the data table, not the metadata
table) with the 400 response DynamoDB sends for a throttle, carrying ``reason``; botocore parses
it and retries as it would a real one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

from botocore.awsrequest import AWSResponse

__all__ = ["INDEX_KEY_RANGE", "KEY_RANGE", "TABLE_LEVEL", "Traffic"]

KEY_RANGE = "TableWriteKeyRangeThroughputExceeded"
TABLE_LEVEL = "TableWriteProvisionedThroughputExceeded"
INDEX_KEY_RANGE = "IndexWriteKeyRangeThroughputExceeded"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


class Traffic:
    """Logs every request both clients send; answers chosen PutItems to the main table with a throttle."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.throttle_next = 0
        self.reason = KEY_RANGE
        self.resource = "arn:aws:dynamodb:us-east-1:000000000000:table/writes_audit_log"
        self._lock = threading.Lock()

    def before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        operation = request.headers["X-Amz-Target"].decode().split(".")[-1]
        table = json.loads(request.body)["TableName"]
        with self._lock:
            throttle = operation == "PutItem" and "shards" not in table and self.throttle_next > 0
            if throttle:
                self.throttle_next -= 1
            self.log.append(f"{operation}{' throttled' if throttle else ''}")
        if not throttle:
            return None
        body = {
            "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "message": "Throughput exceeds the current capacity for one or more of your partitions.",
            "ThrottlingReasons": [{"reason": self.reason, "resource": self.resource}],
        }
        headers = {"x-amzn-requestid": "injected", "content-type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 400, headers, _Raw(json.dumps(body).encode()))

    def count(self, entry: str) -> int:
        return self.log.count(entry)
