"""Read replicas without a server: their names, their schema, the copy order, which throttles
move a read to another copy, and the declarations refused.

Proves: ``read_replicas=N`` adds ``read-replica-1..N`` to the schema ``create_table`` sends,
keyed like the table (the physical hash and range attributes), projecting every attribute, with
the table's ``Meta`` capacity; each request tries every copy once, from a drawn start; only a
read key-range throttle of the table or of a replica moves a read (not a write, a table-level
shortage, or another index's throttle); bad counts, replicas on an index and an index named
like a replica are refused with messages naming the fix.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding._descriptor import Sharding
from pynamodb_sharding._exceptions import ShardingDefinitionError
from pynamodb_sharding._model import ShardedModel
from pynamodb_sharding._replicas import ReadCopies, moves_to_another_copy, read_copies, replica_names
from pynamodb_sharding._strategies import RandomShards
from pynamodb_sharding._throttling import Throttle, ThrottleKind, ThrottleReason

TABLE_ARN = "arn:aws:dynamodb:us-east-1:000000000000:table/feed"


class Feed(ShardedModel):
    class Meta:
        table_name = "unit_replica_feed"
        read_capacity_units = 7
        write_capacity_units = 3

    feed_id = UnicodeAttribute(hash_key=True, attr_name="fid")
    posted_at = NumberAttribute(range_key=True)
    body = UnicodeAttribute()
    shards = Sharding(RandomShards(8), read_replicas=2)


class TestSchema:
    """``create_table`` sends one global index per replica, keyed and projected as the table."""

    def test_replicas_in_the_schema(self) -> None:
        schema = Feed._get_schema()
        assert schema["global_secondary_indexes"] == [
            {
                "index_name": name,
                "key_schema": [{"KeyType": "HASH", "AttributeName": "fid"},
                               {"KeyType": "RANGE", "AttributeName": "posted_at"}],
                "projection": {"ProjectionType": "ALL"},
                "attribute_definitions": [],
                "provisioned_throughput": {"ReadCapacityUnits": 7, "WriteCapacityUnits": 3},
            }
            for name in ("read-replica-1", "read-replica-2")
        ]

    def test_names(self) -> None:
        assert replica_names(0) == ()
        assert replica_names(3) == ("read-replica-1", "read-replica-2", "read-replica-3")

    def test_consistent_and_index_reads_use_the_table_only(self) -> None:
        assert read_copies(Feed, consistent_read=True, index_name=None) is None
        assert read_copies(Feed, consistent_read=False, index_name="by_day") is None


class TestCopyOrder:
    """A request tries every copy once, the table as ``None``, from the start drawn."""

    def test_known_orders(self) -> None:
        starts = iter([0, 1, 2])
        copies = ReadCopies("Feed", ("read-replica-1", "read-replica-2"), choose=lambda _: next(starts))
        assert copies.order() == (None, "read-replica-1", "read-replica-2")
        assert copies.order() == ("read-replica-1", "read-replica-2", None)
        assert copies.order() == ("read-replica-2", None, "read-replica-1")

    @given(st.integers(min_value=0, max_value=10), st.data())
    def test_every_copy_once(self, count: int, data: st.DataObject) -> None:
        start = data.draw(st.integers(min_value=0, max_value=count))
        order = ReadCopies("Feed", replica_names(count), choose=lambda _: start).order()
        assert sorted(order, key=str) == sorted((None, *replica_names(count)), key=str)
        assert order[0] == (None if start == 0 else f"read-replica-{start}")


def reason(name: str, resource: str = TABLE_ARN) -> ThrottleReason:
    return ThrottleReason(name, resource)


class TestWhichThrottlesMove:
    """Only a read key-range throttle of the table or of a replica moves a read to another copy."""

    @pytest.mark.parametrize(("throttle", "moves"), [
        (Throttle(ThrottleKind.KEY_RANGE, "ProvisionedThroughputExceededException",
                  (reason("TableReadKeyRangeThroughputExceeded"),)), True),
        (Throttle(ThrottleKind.KEY_RANGE, "ProvisionedThroughputExceededException"), True),
        (Throttle(ThrottleKind.INDEX, "ProvisionedThroughputExceededException",
                  (reason("IndexReadKeyRangeThroughputExceeded", f"{TABLE_ARN}/index/read-replica-2"),),
                  "read-replica-2"), True),
        (Throttle(ThrottleKind.INDEX, "ProvisionedThroughputExceededException",
                  (reason("IndexReadKeyRangeThroughputExceeded", f"{TABLE_ARN}/index/by_day"),), "by_day"), False),
        (Throttle(ThrottleKind.KEY_RANGE, "ProvisionedThroughputExceededException",
                  (reason("TableWriteKeyRangeThroughputExceeded"),)), False),
        (Throttle(ThrottleKind.TABLE, "ProvisionedThroughputExceededException",
                  (reason("TableReadProvisionedThroughputExceeded"),)), False),
        (Throttle(ThrottleKind.TABLE, "ThrottlingException"), False),
        (Throttle(ThrottleKind.NOT_THROTTLED, "ValidationException"), False),
    ])
    def test_moves(self, throttle: Throttle, moves: bool) -> None:
        assert moves_to_another_copy(throttle) is moves


class TestRefused:
    """Declarations that cannot work are refused when the class is defined."""

    @pytest.mark.parametrize("count", [-1, 11, True, "2", 1.5])
    def test_bad_count(self, count: object) -> None:
        with pytest.raises(ShardingDefinitionError, match=r"Sharding\(read_replicas=\.\.\.\): expected a number"):
            Sharding(RandomShards(4), read_replicas=count)  # type: ignore[arg-type]

    def test_replicas_on_a_sharded_index(self) -> None:
        class ByDay(GlobalSecondaryIndex["Visit"]):
            class Meta:
                index_name = "by_day"
                projection = AllProjection()

            day = UnicodeAttribute(hash_key=True)
            shards = Sharding(RandomShards(4), read_replicas=1)

        with pytest.raises(ShardingDefinitionError, match=r"Visit\.day: the sharded index 'by_day' takes no "
                                                          r"read_replicas"):
            class Visit(ShardedModel):
                class Meta:
                    table_name = "unit_replica_visit"

                visit_id = UnicodeAttribute(hash_key=True)
                day = UnicodeAttribute()
                by_day = ByDay()

    def test_an_index_named_like_a_replica(self) -> None:
        class Clash(GlobalSecondaryIndex["Clashing"]):
            class Meta:
                index_name = "read-replica-1"
                projection = AllProjection()

            body = UnicodeAttribute(hash_key=True)

        with pytest.raises(ShardingDefinitionError, match=r"Clashing: the index 'read-replica-1' has the name of one "
                                                          r"of its Sharding\(read_replicas=\.\.\.\) replicas"):
            class Clashing(ShardedModel):
                class Meta:
                    table_name = "unit_replica_clash"

                feed_id = UnicodeAttribute(hash_key=True)
                body = UnicodeAttribute()
                by_body = Clash()
                shards = Sharding(RandomShards(4), read_replicas=1)
