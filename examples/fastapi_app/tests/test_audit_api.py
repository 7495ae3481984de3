"""The FastAPI example against DynamoDB Local, through httpx's AsyncClient: concurrent writes
spread over shards, pages come back newest first with page tokens, forged tokens are a 400."""

from __future__ import annotations

import asyncio
from typing import Any

import boto3
import httpx
import pytest
from audit_api import PAGE_SIZE, AuditLog, create_app, lifespan


@pytest.fixture
def app(dynamodb_models: Any) -> Any:
    dynamodb_models(AuditLog)  # a fresh table on the plugin's DynamoDB Local for this test
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
