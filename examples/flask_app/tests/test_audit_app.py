"""The Flask example against DynamoDB Local: writes spread over shards, pages come back in order."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from audit_app import PAGE_SIZE, AuditLog, create_app
from flask.testing import FlaskClient


@pytest.fixture
def client(dynamodb_models: Any) -> FlaskClient:
    dynamodb_models(AuditLog)  # a fresh table on the plugin's DynamoDB Local for this test
    return create_app({"TESTING": True, "SECRET_KEY": "test secret"}).test_client()


def test_pages_come_back_newest_first_across_shards(client: FlaskClient) -> None:
    stamps = []
    for n in range(45):
        response = client.post("/files/shared/firetvGen2.txt/log", json={"user_id": f"user{n % 3}"})
        assert response.status_code == 201
        stamps.append(response.get_json()["accessed_at"])

    seen: list[int] = []
    token = None
    pages = 0
    while True:
        response = client.get("/files/shared/firetvGen2.txt/log", query_string={"page": token} if token else {})
        assert response.status_code == 200
        body = response.get_json()
        seen += [entry["accessed_at"] for entry in body["entries"]]
        pages += 1
        token = body["next"]
        if token is None:
            break
        assert len(token) < 400
    assert seen == sorted(stamps, reverse=True)
    assert pages == -(-45 // PAGE_SIZE)

    # The table itself: 45 items, spread over several physical keys of the one logical key.
    meta = AuditLog.Meta
    raw = boto3.client("dynamodb", endpoint_url=meta.host, region_name=meta.region,
                       aws_access_key_id=meta.aws_access_key_id, aws_secret_access_key=meta.aws_secret_access_key)
    items = raw.scan(TableName=meta.table_name)["Items"]
    assert len(items) == 45
    assert len({item["file_path"]["S"] for item in items}) > 1


def test_a_forged_or_foreign_token_is_a_400(client: FlaskClient) -> None:
    for _ in range(25):
        client.post("/files/a.txt/log", json={"user_id": "u"})
    token = client.get("/files/a.txt/log").get_json()["next"]
    assert client.get("/files/b.txt/log", query_string={"page": token}).status_code == 400
    forged = token[:5] + ("B" if token[5] == "A" else "A") + token[6:]
    assert client.get("/files/a.txt/log", query_string={"page": forged}).status_code == 400
    assert client.post("/files/a.txt/log", json={}).status_code == 400
