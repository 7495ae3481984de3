"""An audit-log API on a hot key, with Flask and pynamodb-sharding.

POST /files/<path>/log            records an access (JSON body: {"user_id": "..."})
GET  /files/<path>/log?page=TOKEN  the accesses, newest first, 20 a page, with the next page's token

Every access to one popular file goes to the same logical key; ``RandomShards(8)`` spreads its
writes over eight physical keys, and the GET merges them back in order. The page token is
signed with the app's ``SECRET_KEY``, so a client cannot forge one.
"""

from __future__ import annotations

import os
import time
from typing import Any

from flask import Flask, current_app, jsonify, request
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import CursorError, RandomShards, ShardedModel, Sharding

PAGE_SIZE = 20


def _cursor_secret() -> str:
    secret: str = current_app.config["SECRET_KEY"]
    return secret


class AuditLog(ShardedModel):
    class Meta:
        table_name = os.environ.get("AUDIT_LOG_TABLE", "flask_audit_log")
        host = os.environ.get("DYNAMODB_HOST")  # e.g. http://127.0.0.1:8000 for DynamoDB Local
        region = os.environ.get("AWS_REGION", "us-east-1")
        max_pool_connections = 16

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)  # microseconds since the epoch
    user_id = UnicodeAttribute()
    shards = Sharding(RandomShards(8), cursor_secret=_cursor_secret)


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config["SECRET_KEY"] = os.environ.get("AUDIT_SECRET_KEY", "change me")
    app.config.update(config or {})

    @app.cli.command("create-tables")
    def create_tables() -> None:
        """Create the audit log's table (and its sharding's companion tables, if any)."""
        AuditLog.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        print(f"created {AuditLog.Meta.table_name}")

    @app.post("/files/<path:file_path>/log")
    def record(file_path: str) -> Any:
        body = request.get_json(silent=True) or {}
        user_id = body.get("user_id")
        if not isinstance(user_id, str) or not user_id:
            return jsonify(error="give the user_id as a non-empty string"), 400
        entry = AuditLog(f"/{file_path}", time.time_ns() // 1000, user_id=user_id)
        entry.save()
        return jsonify(file_path=entry.file_path, accessed_at=entry.accessed_at, shard=entry.shards), 201

    @app.get("/files/<path:file_path>/log")
    def read(file_path: str) -> Any:
        try:
            page = AuditLog.query(f"/{file_path}", scan_index_forward=False, limit=PAGE_SIZE,
                                  last_evaluated_key=request.args.get("page"))
        except CursorError:
            return jsonify(error="the page token is not valid for this file; start from the first page"), 400
        entries = [{"accessed_at": entry.accessed_at, "user_id": entry.user_id} for entry in page]
        return jsonify(entries=entries, next=page.next_page_token)

    return app
