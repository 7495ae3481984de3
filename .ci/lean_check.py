"""Run by `make check-lean` in a venv holding the package without extras, at its lowest versions.

Checks what a user who runs `pip install pynamodb-sharding` gets: importing the library loads
none of the tooling (click, rich, matplotlib, pytest, hypothesis, opentelemetry), and a sharded save, get and
merged query work against DynamoDB Local (started here by the library's own launcher).
"""

from __future__ import annotations

import sys
import uuid
from importlib.metadata import version

from pynamodb.attributes import NumberAttribute, UnicodeAttribute

import pynamodb_sharding
from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.testing.local import running_dynamodb_local

TOOLING = ("click", "rich", "matplotlib", "pytest", "hypothesis", "boto3", "opentelemetry")

loaded = sorted(name for name in TOOLING if name in sys.modules)
print("versions:", *(f"{name}=={version(name)}" for name in ("pynamodb", "attrs", "cachetools", "botocore")))
print("tooling loaded by `import pynamodb_sharding`:", loaded)
if loaded:
    sys.exit(f"import pynamodb_sharding {pynamodb_sharding.__version__} loaded {loaded}")


class Event(ShardedModel):
    class Meta:
        table_name = f"lean_check_{uuid.uuid4().hex[:8]}"

    stream = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


with running_dynamodb_local() as server:
    Event.Meta.host = server.endpoint
    Event.Meta.region = server.region
    Event.Meta.aws_access_key_id = server.aws_access_key_id
    Event.Meta.aws_secret_access_key = server.aws_secret_access_key
    Event.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
    for seq in range(20):
        Event("s", seq).save()
    assert Event.get("s", 7).seq == 7
    assert [item.seq for item in Event.query("s")] == list(range(20))
    assert {item.shards for item in Event.query("s")} <= {1, 2, 3, 4}
print("save/get/query on DynamoDB Local without extras: ok")
