"""An audit-log API on a hot key, with FastAPI and pynamodb-sharding's async methods.

POST /files/{path}/log            records an access (JSON body: {"user_id": "..."})
GET  /files/{path}/log?page=TOKEN  the accesses, newest first, 20 a page, with the next page's token

Every access to one popular file goes to the same logical key; ``HashedShards(8)`` spreads its
writes over eight physical keys (by a hash of each access's time, so that a key is stored once,
as on a plain table: two accesses in one microsecond are one item, not two copies), and the GET
merges them back in order with ``aquery``: the
eight shard requests are tasks of the server's event loop, not threads. The page token is
signed with ``AUDIT_SECRET_KEY``, so a client cannot forge one.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import CursorError, HashedShards, ShardedModel, Sharding
from pynamodb_sharding.aio import close_connections

PAGE_SIZE = 20
SETTINGS = {"secret": os.environ.get("AUDIT_SECRET_KEY", "change me")}


class AuditLog(ShardedModel):
    class Meta:
        table_name = os.environ.get("AUDIT_LOG_TABLE", "fastapi_audit_log")
        host = os.environ.get("DYNAMODB_HOST")  # e.g. http://127.0.0.1:8000 for DynamoDB Local
        region = os.environ.get("AWS_REGION", "us-east-1")

    file_path = UnicodeAttribute(hash_key=True)
    accessed_at = NumberAttribute(range_key=True)  # microseconds since the epoch
    user_id = UnicodeAttribute()
    shards = Sharding(HashedShards(8), cursor_secret=lambda: SETTINGS["secret"])


class Access(BaseModel):
    user_id: str


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    await close_connections()  # the event loop's connections to DynamoDB


def create_app(secret: str | None = None) -> FastAPI:
    if secret is not None:
        SETTINGS["secret"] = secret
    app = FastAPI(lifespan=lifespan)

    @app.post("/files/{file_path:path}/log", status_code=201)
    async def record(file_path: str, access: Access) -> dict[str, Any]:
        if not access.user_id:
            raise HTTPException(400, "give the user_id as a non-empty string")
        entry = AuditLog(f"/{file_path}", time.time_ns() // 1000, user_id=access.user_id)
        await entry.asave()
        return {"file_path": entry.file_path, "accessed_at": entry.accessed_at, "shard": entry.shards}

    @app.get("/files/{file_path:path}/log")
    async def read(file_path: str, page: str | None = None) -> dict[str, Any]:
        result = AuditLog.aquery(f"/{file_path}", scan_index_forward=False, limit=PAGE_SIZE, last_evaluated_key=page)
        try:
            entries = [{"accessed_at": entry.accessed_at, "user_id": entry.user_id} async for entry in result]
        except CursorError:
            raise HTTPException(400, "the page token is not valid for this file; start from the first page") from None
        return {"entries": entries, "next": result.next_page_token}

    @app.get("/files/{file_path:path}/count")
    async def count(file_path: str) -> dict[str, int]:
        return {"accesses": await AuditLog.acount(f"/{file_path}")}

    return app


app = create_app()
