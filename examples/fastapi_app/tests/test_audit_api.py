"""The FastAPI example against DynamoDB Local, through httpx's AsyncClient (and once through
FastAPI's TestClient): concurrent writes spread over shards, pages come back newest first with
page tokens, forged tokens are a 400; users are created, read, counted at login and looked up by
scan; an item a handler returns is encoded as a plain PynamoDB item is; the lifespan creates the
tables it finds missing."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import httpx
import pytest
from audit_api import PAGE_SIZE, AuditLog, User, UserOut, create_app, lifespan, users
from fastapi.encoders import jsonable_encoder
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model


class PlainUser(Model):
    """The reference: ``User`` as a plain PynamoDB model (the app before it was sharded)."""

    class Meta:
        table_name = "fastapi_plain_user"

    email = UnicodeAttribute(hash_key=True)
    name = UnicodeAttribute()
    logins = NumberAttribute(default=0)


@pytest.fixture
def app(dynamodb_models: Any) -> Any:
    dynamodb_models(AuditLog, User, PlainUser)  # fresh tables on the plugin's DynamoDB Local for this test
    return create_app(secret="test secret")


async def _call(app: Any, requests: Any) -> Any:
    async with lifespan(app), httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                                base_url="http://audit") as client:
        return await requests(client)


def test_pages_come_back_newest_first_across_shards(app: Any) -> None:
    async def requests(client: httpx.AsyncClient) -> tuple[list[int], list[int], int, int]:
        posted = await asyncio.gather(*(
            client.post("/files/shared/firetvGen2.txt/log", json={"user_id": f"user{n % 3}"}) for n in range(45)))
        assert {response.status_code for response in posted} == {201}
        seen: list[int] = []
        token = None
        pages = 0
        while True:
            response = await client.get("/files/shared/firetvGen2.txt/log", params={"page": token} if token else {})
            assert response.status_code == 200
            body = response.json()
            seen += [entry["accessed_at"] for entry in body["entries"]]
            pages += 1
            token = body["next"]
            if token is None:
                break
            assert len(token) < 400
        counted = (await client.get("/files/shared/firetvGen2.txt/count")).json()["accesses"]
        # ?page= left empty is the first page, as no page parameter is.
        first = (await client.get("/files/shared/firetvGen2.txt/log")).json()
        assert (await client.get("/files/shared/firetvGen2.txt/log?page=")).json() == first
        assert [entry["accessed_at"] for entry in first["entries"]] == seen[:PAGE_SIZE]
        return [response.json()["accessed_at"] for response in posted], seen, pages, counted

    stamps, seen, pages, counted = asyncio.run(_call(app, requests))
    assert seen == sorted(stamps, reverse=True)
    assert pages == -(-45 // PAGE_SIZE)
    assert counted == 45

    # The table itself: 45 items, spread over several physical keys of the one logical key.
    meta = AuditLog.Meta
    raw = boto3.client("dynamodb", endpoint_url=meta.host, region_name=meta.region,
                       aws_access_key_id=meta.aws_access_key_id, aws_secret_access_key=meta.aws_secret_access_key)
    items = raw.scan(TableName=meta.table_name)["Items"]
    assert len(items) == 45
    assert len({item["file_path"]["S"] for item in items}) > 1


def test_a_forged_or_foreign_token_is_a_400(app: Any) -> None:
    async def requests(client: httpx.AsyncClient) -> list[int]:
        for _ in range(25):
            await client.post("/files/a.txt/log", json={"user_id": "u"})
        token = (await client.get("/files/a.txt/log")).json()["next"]
        forged = token[:5] + ("B" if token[5] == "A" else "A") + token[6:]
        return [
            (await client.get("/files/b.txt/log", params={"page": token})).status_code,
            (await client.get("/files/a.txt/log", params={"page": forged})).status_code,
            (await client.post("/files/a.txt/log", json={"user_id": ""})).status_code,
            (await client.get("/files/a.txt/log", params={"page": token})).status_code,
        ]

    assert [400, 400, 400, 200] == asyncio.run(_call(app, requests))


def test_users_are_created_read_counted_and_looked_up(app: Any) -> None:
    async def requests(client: httpx.AsyncClient) -> list[Any]:
        created = await client.post("/users", json={"email": "ann@example.com", "name": "Ann"})
        again = await client.post("/users", json={"email": "ann@example.com", "name": "Other"})
        await client.post("/users", json={"email": "bob@example.com", "name": "Bob"})
        await client.post("/users", json={"email": "ann2@example.com", "name": "Ann"})
        logins = [(await client.post("/users/ann@example.com/login")).json() for _ in range(2)]
        return [
            (created.status_code, created.json()), again.status_code, logins,
            (await client.get("/users/ann@example.com")).json(),
            (await client.get("/users/nobody@example.com")).status_code,
            (await client.post("/users/nobody@example.com/login")).status_code,
            sorted(user["email"] for user in (await client.get("/users", params={"name": "Ann"})).json()),
        ]

    assert [
        (201, {"email": "ann@example.com", "name": "Ann", "logins": 0}), 409, [{"logins": 1}, {"logins": 2}],
        {"email": "ann@example.com", "name": "Ann", "logins": 2}, 404, 404,
        ["ann2@example.com", "ann@example.com"],
    ] == asyncio.run(_call(app, requests))
    assert User.count() == 3  # the login of nobody@example.com created no item


def test_an_item_encodes_as_a_plain_pynamodb_item(app: Any) -> None:
    """``jsonable_encoder`` (what FastAPI does with a handler's return value), ``vars()`` and
    pydantic read a sharded item as they read the plain model's: the shard bookkeeping is not in
    the item's ``__dict__``. New, saved, read back, queried and scanned items, and a handler
    returning the item itself. The item still remembers its shard: saved again, it stays one item."""
    sharded, plain = User("ann@example.com", name="Ann"), PlainUser("ann@example.com", name="Ann")
    assert jsonable_encoder(sharded) == jsonable_encoder(plain) == {
        "attribute_values": {"email": "ann@example.com", "name": "Ann", "logins": 0}}
    sharded.save()
    plain.save()
    read_back = [(User.get("ann@example.com"), PlainUser.get("ann@example.com")),
                 (next(iter(User.query("ann@example.com"))), next(iter(PlainUser.query("ann@example.com")))),
                 (next(iter(User.scan())), next(iter(PlainUser.scan())))]
    for item, reference in [(sharded, plain), *read_back]:
        assert item.shards is not None  # the shard it is stored in, remembered
        assert jsonable_encoder(item) == jsonable_encoder(reference)
        assert vars(item) == vars(reference)
        assert UserOut.model_validate(item) == UserOut.model_validate(reference)
    loaded = read_back[0][0]
    loaded.logins = 5
    loaded.save()
    assert [raw["logins"] for raw in _raw_scan(User)] == [{"N": "5"}]

    # No response model: FastAPI encodes what the handler returns with jsonable_encoder.
    @app.get("/raw/{email}", response_model=None)
    async def raw_user(email: str) -> Any:
        return await User.aget(email)

    @app.get("/plain/{email}", response_model=None)
    async def plain_user(email: str) -> Any:
        return PlainUser.get(email)

    async def requests(client: httpx.AsyncClient) -> tuple[Any, Any]:
        sharded_response = await client.get("/raw/ann@example.com")
        plain_response = await client.get("/plain/ann@example.com")
        assert (sharded_response.status_code, plain_response.status_code) == (200, 200)
        return sharded_response.json(), plain_response.json()

    sharded_json, plain_json = asyncio.run(_call(app, requests))
    assert sharded_json == {"attribute_values": {"email": "ann@example.com", "name": "Ann", "logins": 5}}
    assert plain_json == {"attribute_values": {"email": "ann@example.com", "name": "Ann", "logins": 0}}


def _raw_scan(model: Any) -> list[dict[str, Any]]:
    meta = model.Meta
    raw = boto3.client("dynamodb", endpoint_url=meta.host, region_name=meta.region,
                       aws_access_key_id=meta.aws_access_key_id, aws_secret_access_key=meta.aws_secret_access_key)
    items: list[dict[str, Any]] = raw.scan(TableName=meta.table_name)["Items"]
    return items


def test_a_dependency_gives_the_handlers_another_model(app: Any, dynamodb_models: Any) -> None:
    """The handlers take their model from a dependency: a test (or a tenant) gives another."""

    class Staff(User):
        class Meta:
            table_name = "fastapi_staff"

    dynamodb_models(Staff)
    app.dependency_overrides[users] = lambda: Staff

    async def requests(client: httpx.AsyncClient) -> int:
        await client.post("/users", json={"email": "eve@example.com", "name": "Eve"})
        return (await client.get("/users/eve@example.com")).status_code

    assert asyncio.run(_call(app, requests)) == 200
    assert [user.email for user in Staff.scan()] == ["eve@example.com"]
    assert User.count() == 0


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Starlette's TestClient asks for httpx2
def test_the_test_client_runs_the_lifespan_which_creates_missing_tables(app: Any) -> None:
    """FastAPI's ``TestClient`` runs the app (and its lifespan) on an event loop of its own
    thread: the lifespan creates the tables it finds missing, and the requests work there."""
    from fastapi.testclient import TestClient

    User.delete_table(wait=True)
    assert not User.exists()
    with TestClient(app) as client:
        assert User.exists()
        assert client.post("/users", json={"email": "kim@example.com", "name": "Kim"}).status_code == 201
        assert client.get("/users/kim@example.com").json()["name"] == "Kim"
