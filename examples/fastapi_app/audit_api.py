"""An audit-log API on a hot key, and its users, with FastAPI and pynamodb-sharding's async methods.

POST /files/{path}/log             records an access (JSON body: {"user_id": "..."})
GET  /files/{path}/log?page=TOKEN   the accesses, newest first, 20 a page, with the next page's token
GET  /files/{path}/count            how many accesses
POST /users                         creates a user (JSON body: {"email": "...", "name": "..."}); 409 if it exists
GET  /users/{email}                 the user (the item itself, encoded by FastAPI); 404 if none
POST /users/{email}/login           counts a login (an update, no read first)
GET  /users?name=NAME               the users of that name (a scan, as a small app looks users up)

Every access to one popular file goes to the same logical key; ``HashedShards(8)`` spreads its
writes over eight physical keys (by a hash of each access's time, so that a key is stored once,
as on a plain table: two accesses in one microsecond are one item, not two copies), and the GET
merges them back in order with ``aquery``: the eight shard requests are tasks of the server's
event loop, not threads. The page token is signed with ``AUDIT_SECRET_KEY``, so a client cannot
forge one. ``User`` has a hash key and no range key, as a user table has: ``HashedShards`` puts
each e-mail address in one shard, computed from the address, so ``aget`` is one GetItem.

The handlers get the models through FastAPI's dependencies (``Depends(audit_log)``,
``Depends(users)``), so a test can give them others (``app.dependency_overrides``).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError, UpdateError

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


class User(ShardedModel):
    class Meta:
        table_name = os.environ.get("AUDIT_USER_TABLE", "fastapi_audit_user")
        host = os.environ.get("DYNAMODB_HOST")
        region = os.environ.get("AWS_REGION", "us-east-1")

    email = UnicodeAttribute(hash_key=True)  # no range key: one item per address
    name = UnicodeAttribute()
    logins = NumberAttribute(default=0)
    shards = Sharding(HashedShards(4))


class Access(BaseModel):
    user_id: str


class NewUser(BaseModel):
    email: str
    name: str


class UserOut(BaseModel):
    """What GET /users/{email} answers: read from the item's attributes."""

    model_config = ConfigDict(from_attributes=True)

    email: str
    name: str
    logins: int


def audit_log() -> type[AuditLog]:
    """The audit-log model the handlers use (a dependency: tests may give another)."""
    return AuditLog


def users() -> type[User]:
    """The user model the handlers use."""
    return User


Log = Annotated[type[AuditLog], Depends(audit_log)]
Users = Annotated[type[User], Depends(users)]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    # With lifespan=, FastAPI runs no @app.on_event("startup") or ("shutdown") hook: what they
    # did goes here, before and after the yield.
    for model in (AuditLog, User):
        if not await model.aexists():
            await model.acreate_table(billing_mode="PAY_PER_REQUEST", wait=True)
    yield
    await close_connections()  # the event loop's connections to DynamoDB


def create_app(secret: str | None = None) -> FastAPI:
    if secret is not None:
        SETTINGS["secret"] = secret
    app = FastAPI(lifespan=lifespan)

    @app.post("/files/{file_path:path}/log", status_code=201)
    async def record(file_path: str, access: Access, log: Log) -> dict[str, Any]:
        if not access.user_id:
            raise HTTPException(400, "give the user_id as a non-empty string")
        entry = log(f"/{file_path}", time.time_ns() // 1000, user_id=access.user_id)
        await entry.asave()
        return {"file_path": entry.file_path, "accessed_at": entry.accessed_at, "shard": entry.shards}

    @app.get("/files/{file_path:path}/log")
    async def read(file_path: str, log: Log, page: str | None = None) -> dict[str, Any]:
        result = log.aquery(f"/{file_path}", scan_index_forward=False, limit=PAGE_SIZE, last_evaluated_key=page)
        try:
            entries = [{"accessed_at": entry.accessed_at, "user_id": entry.user_id} async for entry in result]
        except CursorError:
            raise HTTPException(400, "the page token is not valid for this file; start from the first page") from None
        return {"entries": entries, "next": result.next_page_token}

    @app.get("/files/{file_path:path}/count")
    async def count(file_path: str, log: Log) -> dict[str, int]:
        return {"accesses": await log.acount(f"/{file_path}")}

    @app.post("/users", status_code=201, response_model=UserOut)
    async def create_user(new: NewUser, model: Users) -> User:
        user = model(new.email, name=new.name)
        try:
            await user.asave(condition=model.email.does_not_exist())
        except PutError as error:
            if error.cause_response_code == "ConditionalCheckFailedException":
                raise HTTPException(409, f"{new.email} exists already") from None
            raise
        return user

    @app.get("/users/{email}", response_model=UserOut)
    async def get_user(email: str, model: Users) -> User:
        try:
            return await model.aget(email)
        except model.DoesNotExist:
            raise HTTPException(404, f"no user {email}") from None

    @app.post("/users/{email}/login")
    async def login(email: str, model: Users) -> dict[str, int]:
        user = model(email)  # built by hand: HashedShards computes its shard, nothing is read
        try:
            await user.aupdate([model.logins.add(1)], condition=model.email.exists())
        except UpdateError as error:
            if error.cause_response_code == "ConditionalCheckFailedException":
                raise HTTPException(404, f"no user {email}") from None
            raise
        return {"logins": user.logins}

    @app.get("/users")
    async def find_users(name: str, model: Users) -> list[UserOut]:
        return [UserOut.model_validate(user) async for user in model.ascan(model.name == name)]

    return app


app = create_app()
