"""Injected throttles for the dynamic writer's tests: every request logged, chosen PutItems refused.

:class:`Traffic` is a botocore ``before-send`` handler: it answers the next ``throttle_next``
PutItem requests to a table whose name lacks ``shards`` (the data table, not the metadata
table) with the 400 response DynamoDB sends for a throttle, carrying ``reason``; botocore parses
it and retries as it would a real one.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from botocore.awsrequest import AWSResponse

from tests.faults import INDEX_KEY_RANGE, KEY_RANGE, error_response

__all__ = ["INDEX_KEY_RANGE", "KEY_RANGE", "TABLE_LEVEL", "Traffic"]

TABLE_LEVEL = "TableWriteProvisionedThroughputExceeded"


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
        return error_response(
            request.url, 400, "ProvisionedThroughputExceededException",
            "Throughput exceeds the current capacity for one or more of your partitions.",
            ThrottlingReasons=[{"reason": self.reason, "resource": self.resource}],
        )

    def count(self, entry: str) -> int:
        return self.log.count(entry)
