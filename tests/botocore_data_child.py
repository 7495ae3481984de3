"""Run by ``tests/integration/test_period_connections.py`` in a fresh process (no test plugin,
so botocore sessions do not share their data unless the library makes them): writes one item
to each of ``PERIODS`` daily tables of a time-partitioned model on the DynamoDB Local at
``$ENDPOINT``, and prints how many times botocore read DynamoDB's service model from disk."""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import botocore.loaders
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import RandomShards, ShardedModel, Sharding, TimePartitioned

PERIODS = 5
reads: list[str] = []
_load_file = botocore.loaders.JSONFileLoader.load_file


def counting(self: botocore.loaders.JSONFileLoader, file_path: str) -> object:
    if "dynamodb" in file_path and "service-2" in file_path:
        reads.append(file_path)
    return _load_file(self, file_path)


botocore.loaders.JSONFileLoader.load_file = counting  # type: ignore[method-assign]


class DailyVisit(ShardedModel):
    class Meta:
        table_name = TimePartitioned(os.environ["TABLE"] + ".{period}", attribute="at", period="day",
                                     missing="create")
        host = os.environ["ENDPOINT"]
        region = "us-east-1"
        aws_access_key_id = os.environ["KEY_ID"]
        aws_secret_access_key = os.environ["SECRET"]

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(2))


began = time.process_time()
start = dt.datetime(2016, 2, 20, tzinfo=dt.UTC)
for day in range(PERIODS):
    DailyVisit("/home", int((start + dt.timedelta(days=day, hours=1)).timestamp())).save()
found = DailyVisit.count("/home", DailyVisit.at.between(int(start.timestamp()),
                                                          int((start + dt.timedelta(days=PERIODS)).timestamp()) - 1))
print(json.dumps({"items": found, "service_model_reads": len(reads), "cpu_seconds": time.process_time() - began}))
