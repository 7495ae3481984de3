"""What users of ``pynamodb_sharding.migration`` see, checked by ``mypy --strict`` (never executed)."""

from __future__ import annotations

from typing import assert_type

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding
from pynamodb_sharding.migration import (
    JobOptions,
    MigrationPlan,
    MigrationReport,
    ReshardJob,
    Snapshot,
    VerifyReport,
    compact,
    compare,
    copy,
    plan,
    reshard,
    snapshot,
    verify,
)
from pynamodb_sharding.migration.spark import JobSpec, ModelSpec


class Legacy(Model):
    class Meta:
        table_name = "legacy"

    key = UnicodeAttribute(hash_key=True)


class Sharded(ShardedModel):
    class Meta:
        table_name = "sharded"

    key = UnicodeAttribute(hash_key=True)
    shards = Sharding(RandomShards(4))


def jobs() -> None:
    options = JobOptions(total_segments=8, workers=2, rate=100.0)
    assert_type(copy(Legacy, Sharded, options), MigrationReport)
    assert_type(reshard(Sharded), MigrationReport)
    assert_type(compact(Sharded, options), MigrationReport)
    assert_type(verify(Legacy, Sharded), VerifyReport)
    assert_type(verify(Legacy, Sharded).ok, bool)
    assert_type(snapshot(Sharded), Snapshot)
    assert_type(compare(snapshot(Legacy), snapshot(Sharded)), VerifyReport)
    assert_type(plan(ReshardJob(Sharded)), MigrationPlan)
    assert_type(JobSpec("copy", (ModelSpec("app.models:Legacy"), ModelSpec("app.models:Sharded"))), JobSpec)
