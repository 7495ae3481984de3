"""``testing.Replicator`` compares items as DynamoDB does: numbers by value, sets unordered, maps
and lists recursively, binary by bytes.

DynamoDB Local stores a number given to ``UpdateItem`` as it was sent (``12.0``, what PynamoDB
sends for a float) but one given to ``PutItem`` as its value (``12``): a copy made by the
replicator reads back differently from the original. Compared as text, the two copies of one
write look like two writes, one per region; proves, on the raw tables of both servers, that no
such copy counts as an overwrite or goes back over a newer write made in one region only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding.testing import DynamoDBLocal
from pynamodb_sharding.testing.replication import Replicator
from tests.regions import HOME, KEY_ID, OTHER, SECRET, client


def plain_model(region: str, endpoint: str, table: str) -> Any:
    """A plain PynamoDB model of ``table`` in ``region``."""
    return type(f"Score_{region}", (Model,), {
        "Meta": type("Meta", (), {"table_name": table, "host": endpoint, "region": region,
                                  "aws_access_key_id": KEY_ID, "aws_secret_access_key": SECRET}),
        "__module__": __name__,
        "player": UnicodeAttribute(hash_key=True),
        "score": NumberAttribute(null=True),
    })


@pytest.fixture
def scores(dynamodb_local: DynamoDBLocal, second_server: DynamoDBLocal) -> Iterator[tuple[Any, Any, dict[str, Any]]]:
    """The same table in us-east-1 (first) and eu-west-1 (second), and a raw client of each."""
    table = f"scores_{uuid.uuid4().hex[:8]}"
    first = plain_model(HOME, dynamodb_local.endpoint, table)
    second = plain_model(OTHER, second_server.endpoint, table)
    for model in (first, second):
        model.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    clients = {HOME: client(dynamodb_local.endpoint, HOME), OTHER: client(second_server.endpoint, OTHER)}
    yield first, second, clients
    for raw in clients.values():
        raw.delete_table(TableName=table)


def raw_score(raw: Any, table: str, player: str) -> str | None:
    item = raw.get_item(TableName=table, Key={"player": {"S": player}}, ConsistentRead=True).get("Item")
    return None if item is None else str(item["score"]["N"])


def test_a_float_written_in_one_region_is_never_copied_back_over_a_newer_write(
    scores: tuple[Any, Any, dict[str, Any]],
) -> None:
    """eu-west-1 updates a score to 12.0; once the copy reached us-east-1 (where it reads
    ``12``), eu-west-1 updates it to 13.0. Only eu-west-1 ever wrote: 13 must win everywhere."""
    first, second, clients = scores
    table = first.Meta.table_name
    with Replicator(clients, [table], lag=0.0, interval=0.5) as replication:
        second("ann").update(actions=[second.score.set(12.0)])
        assert raw_score(clients[OTHER], table, "ann") == "12.0"  # stored as sent
        deadline = time.monotonic() + 10
        while raw_score(clients[HOME], table, "ann") is None:
            assert time.monotonic() < deadline, "never copied"
            time.sleep(0.01)
        assert raw_score(clients[HOME], table, "ann") == "12"  # the copy reads back by value
        second("ann").update(actions=[second.score.set(13.0)])  # before the next scan (0.5 s)
        replication.settle()
    assert raw_score(clients[OTHER], table, "ann") in ("13", "13.0")
    assert raw_score(clients[HOME], table, "ann") in ("13", "13.0")
    assert second.get("ann").score == 13
    assert first.get("ann").score == 13
    assert replication.overwritten == 0


def test_items_equal_by_value_are_already_replicated(scores: tuple[Any, Any, dict[str, Any]]) -> None:
    """The same item written in both regions in different spellings (``1.00``/``1.0`` in a map,
    ``2.0``/``2`` in a list, sets given in different orders, bytes): nothing to copy, nothing
    overwritten. An item that differs by value is copied."""
    first, _, clients = scores
    table = first.Meta.table_name
    spelled = {
        HOME: {"m": {"M": {"x": {"N": "1.00"}, "l": {"L": [{"N": "2.0"}, {"NS": ["1.50", "3"]}]}}},
               "ss": {"SS": ["b", "a"]}, "bs": {"BS": [b"\x01", b"\x00"]}, "b": {"B": b"\xff"}},
        OTHER: {"m": {"M": {"l": {"L": [{"N": "2"}, {"NS": ["3", "1.5"]}]}, "x": {"N": "1.0"}}},
                "ss": {"SS": ["a", "b"]}, "bs": {"BS": [b"\x00", b"\x01"]}, "b": {"B": b"\xff"}},
    }
    for region, attributes in spelled.items():
        clients[region].put_item(TableName=table, Item={"player": {"S": "bo"}, **attributes})
        clients[region].put_item(TableName=table, Item={"player": {"S": "cy"}, "m": {"M": {
            "x": {"N": "1.00" if region == HOME else "1.01"}}}})
    replicator = Replicator(clients, [table], lag=0.0, interval=0.05)
    with replicator:
        replicator.settle()
    assert replicator.overwritten == 1  # cy: the two regions' values differ
    assert replicator.copied == 1
    cy = [clients[region].get_item(TableName=table, Key={"player": {"S": "cy"}}, ConsistentRead=True)["Item"]
          for region in (HOME, OTHER)]
    assert cy[0] == cy[1]
    bo = clients[HOME].get_item(TableName=table, Key={"player": {"S": "bo"}}, ConsistentRead=True)["Item"]
    assert bo["m"]["M"]["x"] == {"N": "1.00"}  # us-east-1's own spelling: never overwritten
