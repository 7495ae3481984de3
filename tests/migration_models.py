"""Models the Spark adapter's test names as ``module:Class``, importable on Spark's Python workers."""

from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_sharding import RandomShards, ShardedModel, Sharding


class SparkReadings(Model):
    class Meta:
        table_name = "spark_readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()


class SparkRandomReadings(ShardedModel):
    class Meta:
        table_name = "spark_random_readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    value = UnicodeAttribute()
    shards = Sharding(RandomShards(8))
