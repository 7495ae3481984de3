"""benchmarks/replay_server.py, what bench_page reads its pages through to leave DynamoDB Local's
CPU out: a query asked before is answered from memory, everything else goes to the server."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs
import boto3
import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding.testing import bound_models
from pynamodb_sharding.testing.local import DynamoDBLocal

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "benchmarks"


class Entry(Model):
    class Meta:
        table_name = "replayed_entry"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


@pytest.fixture
def replay(dynamodb_local: DynamoDBLocal) -> Iterator[DynamoDBLocal]:
    process = subprocess.Popen([sys.executable, str(BENCHMARKS / "replay_server.py"), "--upstream",
                                dynamodb_local.endpoint], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        started = re.fullmatch(r"replaying on (http://127\.0\.0\.1:\d+)\n", process.stdout.readline())
        assert started is not None
        yield attrs.evolve(dynamodb_local, endpoint=started[1], pid=None)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_query_asked_again_is_answered_from_memory(dynamodb_local: DynamoDBLocal, replay: DynamoDBLocal) -> None:
    with bound_models(replay, Entry) as tables:
        for at in range(3):
            Entry("/a", at).save()  # through the replay server: forwarded
        assert [entry.at for entry in Entry.query("/a")] == [0, 1, 2]
        client = boto3.client("dynamodb", endpoint_url=dynamodb_local.endpoint, region_name=dynamodb_local.region,
                              aws_access_key_id=dynamodb_local.aws_access_key_id,
                              aws_secret_access_key=dynamodb_local.aws_secret_access_key)
        client.put_item(TableName=tables[Entry], Item={"path": {"S": "/a"}, "at": {"N": "3"}})  # beside it
        assert [entry.at for entry in Entry.query("/a")] == [0, 1, 2]  # the same reply, replayed
        assert Entry.get("/a", 3).at == 3  # a GetItem goes to the server
        assert [entry.at for entry in Entry.query("/a", page_size=10)] == [0, 1, 2, 3]  # another body: asked
