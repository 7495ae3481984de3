"""The partition-limit simulator throttles like DynamoDB, against DynamoDB Local.

Proves: a hot partition key over its limit is refused while a cold key beside it is not; writes
cost one unit per started KB and reads one per started 4 KB (half when eventually consistent,
charged on what the response returned); buckets refill with (injected) time and burst one
second; a table-level limit gives the table reason, ``capacity_limit`` picks which one
(provisioned, account quota, on-demand maximum, each in the error type DynamoDB uses) and
``set_limits`` changes it; queries of a global index are charged to its partitions and index-wide
limits refuse with the index reasons and ARN; the error reaching user code is PynamoDB's
own, after botocore's own retries, and ``classify`` reads it; batches forward what fits and
hand back the rest as unprocessed, which PynamoDB resends; transactions are cancelled with
``ThrottlingError``; concurrent writers never get more than the limit; exit leaves the client's
handlers exactly as they were.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, GetError, PutError, QueryError, TransactWriteError, UpdateError
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_sharding._throttling import UNPROCESSED_ITEMS, ThrottleKind, ThrottleReason, classify
from pynamodb_sharding.testing.latency import inject_latency
from pynamodb_sharding.testing.simulator import item_size, read_units, simulate_partition_limits
from tests.clock import Clock

PTEE = "ProvisionedThroughputExceededException"
KEY_RANGE_WRITE = "TableWriteKeyRangeThroughputExceeded"
KEY_RANGE_READ = "TableReadKeyRangeThroughputExceeded"
TABLE_WRITE = "TableWriteProvisionedThroughputExceeded"

BindModels = Callable[..., dict[type[Model], str]]


class Log(Model):
    class Meta:
        table_name = "simulator_log"
        max_retry_attempts = 0

    pk = UnicodeAttribute(hash_key=True)
    sk = NumberAttribute(range_key=True)
    body = UnicodeAttribute(null=True)


class ByTag(GlobalSecondaryIndex["Tagged"]):
    class Meta:
        index_name = "by_tag"
        projection = AllProjection()

    tag = UnicodeAttribute(hash_key=True)


class Tagged(Model):
    class Meta:
        table_name = "simulator_tagged"
        max_retry_attempts = 0

    pk = UnicodeAttribute(hash_key=True)
    tag = UnicodeAttribute()
    by_tag = ByTag()


class Audit(Model):
    class Meta:
        table_name = "simulator_audit"
        max_retry_attempts = 0

    key = UnicodeAttribute(hash_key=True, attr_name="k")


def _kb_body(kilobytes: int) -> str:
    """A body that makes a Log item just under ``kilobytes`` KB, so it costs exactly that many units."""
    overhead = item_size(Log("p", 1, body="").serialize())
    return "x" * (kilobytes * 1024 - overhead - 8)


def _partition_count(pk: str) -> int:
    return Log.count(pk, consistent_read=True)


@pytest.fixture
def clock() -> Clock:
    return Clock(100.0)


@pytest.fixture
def table(dynamodb_models: BindModels) -> str:
    return dynamodb_models(Log)[Log]


class TestPartitionLimit:
    """One bucket per physical partition key: the hot one throttles, the cold one does not."""

    def test_hot_key_throttles_and_cold_key_does_not(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=5, clock=clock) as simulator:
            for sk in range(5):
                Log("hot", sk).save()
            with pytest.raises(PutError):
                Log("hot", 5).save()
            Log("cold", 0).save()
        assert simulator.write_units == {(table, "hot"): 5.0, (table, "cold"): 1.0}
        assert simulator.throttles == {ThrottleKind.KEY_RANGE: 1}
        assert simulator.throttles_by_reason == {KEY_RANGE_WRITE: 1}
        assert simulator.requests == {"PutItem": 7}
        assert (_partition_count("hot"), _partition_count("cold")) == (5, 1)

    def test_user_code_gets_pynamodb_put_error_that_classifies_as_key_range(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=1, clock=clock):
            Log("hot", 0).save()
            with pytest.raises(PutError) as caught:
                Log("hot", 1).save()
        assert caught.value.cause_response_code == PTEE
        throttle = classify(caught.value)
        resource = f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}"
        assert throttle.reasons == (ThrottleReason(KEY_RANGE_WRITE, resource),)
        assert (throttle.kind, throttle.code, throttle.operation) == (ThrottleKind.KEY_RANGE, PTEE, "PutItem")
        assert throttle.grows_shards

    def test_update_and_delete_are_charged_to_the_partition(self, table: str, clock: Clock) -> None:
        Log("hot", 0).save()
        with simulate_partition_limits(Log, write_units=2, clock=clock) as simulator:
            item = Log.get("hot", 0)
            item.update(actions=[Log.body.set("b")])
            item.delete()
            with pytest.raises(UpdateError):
                item.update(actions=[Log.body.set("c")])
            with pytest.raises(DeleteError):
                item.delete()
        assert simulator.write_units == {(table, "hot"): 2.0}
        assert simulator.throttles == {ThrottleKind.KEY_RANGE: 2}

    def test_limits_change_while_active(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=1, clock=clock) as simulator:
            Log("hot", 0).save()
            with pytest.raises(PutError):
                Log("hot", 1).save()
            simulator.set_limits(write_units=None)
            for sk in range(1, 20):
                Log("hot", sk).save()
            simulator.set_limits(write_units=1)
            clock.advance(5)
            Log("hot", 20).save()
            with pytest.raises(PutError):
                Log("hot", 21).save()
        assert _partition_count("hot") == 21

    def test_non_positive_limit_is_refused(self, table: str) -> None:
        with pytest.raises(ValueError, match="not positive"), simulate_partition_limits(Log, write_units=0):
            pass


class TestUnits:
    """Writes cost one unit per started KB; reads one per started 4 KB, half when eventually consistent."""

    def test_a_3_kb_item_costs_3_units(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=5, clock=clock) as simulator:
            Log("hot", 0, body=_kb_body(3)).save()
            assert simulator.write_units == {(table, "hot"): 3.0}
            with pytest.raises(PutError):
                Log("hot", 1, body=_kb_body(3)).save()  # 2 units left
            Log("hot", 2, body=_kb_body(2)).save()
        assert simulator.write_units == {(table, "hot"): 5.0}

    def test_a_byte_over_a_kb_costs_the_next_unit(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=10, clock=clock) as simulator:
            Log("a", 0, body=_kb_body(1) + "x" * 20).save()
        assert simulator.write_units == {(table, "a"): 2.0}

    def test_reads_cost_half_a_unit_eventually_consistent_and_one_strongly(self, table: str, clock: Clock) -> None:
        Log("hot", 0).save()
        with simulate_partition_limits(Log, read_units=2, clock=clock) as simulator:
            Log.get("hot", 0)
            Log.get("hot", 0)
            Log.get("hot", 0, consistent_read=True)
            with pytest.raises(GetError) as caught:
                Log.get("hot", 0)
        assert simulator.read_units == {(table, "hot"): 2.0}
        assert classify(caught.value).reasons[0].reason == KEY_RANGE_READ

    def test_query_is_charged_on_the_items_it_returned_and_may_overdraw(self, table: str, clock: Clock) -> None:
        items = [Log("q", sk, body=_kb_body(4)) for sk in range(3)]
        for item in items:
            item.save()
        expected = read_units(sum(item_size(item.serialize()) for item in items), consistent=False)
        with simulate_partition_limits(Log, read_units=1, clock=clock) as simulator:
            assert len(list(Log.query("q"))) == 3  # admitted on its 0.5-unit minimum
            assert simulator.read_units == {(table, "q"): expected}
            with pytest.raises(QueryError):  # the bucket is in debt: 1 - 1.5
                list(Log.query("q"))
            clock.advance(0.5)
            with pytest.raises(QueryError):  # 0 left: still short of the minimum
                list(Log.query("q"))
            clock.advance(1)
            assert len(list(Log.query("q"))) == 3
        assert expected == 1.5


class TestRefill:
    """Buckets refill at the limit per second, up to one second of burst."""

    def test_bucket_refills_with_time(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=5, clock=clock):
            for sk in range(5):
                Log("hot", sk).save()
            with pytest.raises(PutError):
                Log("hot", 5).save()
            clock.advance(0.4)  # 2 units
            Log("hot", 6).save()
            Log("hot", 7).save()
            with pytest.raises(PutError):
                Log("hot", 8).save()
            clock.advance(60)  # capped at one second: 5 units
            for sk in range(9, 14):
                Log("hot", sk).save()
            with pytest.raises(PutError):
                Log("hot", 14).save()
        assert _partition_count("hot") == 12


class TestTableLimit:
    """A table-level limit refuses with the table reason, which does not grow shards."""

    def test_table_limit_gives_the_table_reason(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, table_write_units=3, clock=clock) as simulator:
            for pk in ("a", "b", "c"):
                Log(pk, 0).save()
            with pytest.raises(PutError) as caught:
                Log("d", 0).save()
        throttle = classify(caught.value)
        assert throttle.kind == ThrottleKind.TABLE
        assert [reason.reason for reason in throttle.reasons] == [TABLE_WRITE]
        assert not throttle.grows_shards
        assert simulator.throttles == {ThrottleKind.TABLE: 1}


class TestCapacityLimit:
    """``capacity_limit`` says which whole-table limit is short: its reason and its error code."""

    def test_an_unknown_capacity_limit_is_refused(self, table: str) -> None:
        with pytest.raises(ValueError, match="capacity_limit 'reserved' is not one of"), \
                simulate_partition_limits(Log, capacity_limit="reserved"):  # type: ignore[arg-type]
            pass

    @pytest.mark.parametrize(
        "limits", [{"index_read_units": 0}, {"index_table_write_units": -1}, {"index_table_read_units": 0.0}], ids=str
    )
    def test_non_positive_index_limits_are_refused(self, table: str, limits: dict[str, float]) -> None:
        with pytest.raises(ValueError, match="not positive"), simulate_partition_limits(Log, **limits):
            pass

    def test_set_limits_changes_the_reason_and_the_error_code(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, table_write_units=1, clock=clock) as simulator:
            assert simulator.capacity_limit == "provisioned"
            Log("a", 0).save()
            with pytest.raises(PutError) as provisioned:
                Log("b", 0).save()
            simulator.set_limits(capacity_limit="on_demand_maximum")
            with pytest.raises(PutError) as maximum:
                Log("b", 0).save()
            simulator.set_limits(capacity_limit="account")
            with pytest.raises(PutError) as account:
                Log("b", 0).save()
            with pytest.raises(ValueError, match="capacity_limit"):
                simulator.set_limits(capacity_limit="none")  # type: ignore[arg-type]
            assert simulator.capacity_limit == "account"
        codes = [
            (classify(caught.value).code, [reason.reason for reason in classify(caught.value).reasons])
            for caught in (provisioned, maximum, account)
        ]
        assert codes == [
            (PTEE, [TABLE_WRITE]),
            ("ThrottlingException", ["TableWriteMaxOnDemandThroughputExceeded"]),
            ("RequestLimitExceeded", ["TableWriteAccountLimitExceeded"]),
        ]
        assert simulator.throttles == {ThrottleKind.TABLE: 3}
        assert _partition_count("b") == 0

    def test_partition_limits_keep_the_key_range_reason(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=1, capacity_limit="account", clock=clock) as simulator:
            Log("hot", 0).save()
            with pytest.raises(PutError) as caught:
                Log("hot", 1).save()
        assert caught.value.cause_response_code == PTEE
        assert simulator.throttles_by_reason == {KEY_RANGE_WRITE: 1}


class TestIndexLimits:
    """Queries of a global index are charged to its partitions; index-wide limits refuse with the
    index's reasons and ARN; neither touches the table's buckets."""

    @pytest.fixture
    def tagged(self, dynamodb_models: BindModels) -> str:
        name = dynamodb_models(Tagged)[Tagged]
        for pk, tag in (("a", "hot"), ("b", "hot"), ("c", "cold")):
            Tagged(pk, tag=tag).save()
        return name

    def test_index_reads_are_charged_per_index_partition(self, tagged: str, clock: Clock) -> None:
        with simulate_partition_limits(Tagged, read_units=0.5, index_read_units=1, clock=clock) as simulator:
            for _ in range(2):  # eventually consistent: half a unit each
                assert sorted(item.pk for item in Tagged.by_tag.query("hot")) == ["a", "b"]
            with pytest.raises(QueryError) as caught:
                list(Tagged.by_tag.query("hot"))
            assert [item.pk for item in Tagged.by_tag.query("cold")] == ["c"]  # its own partition
            simulator.set_limits(index_read_units=None)
            assert len(list(Tagged.by_tag.query("hot"))) == 2
        throttle = classify(caught.value)
        assert [(r.reason, r.resource) for r in throttle.reasons] == [(
            "IndexReadKeyRangeThroughputExceeded",
            f"arn:aws:dynamodb:{Tagged.Meta.region}:000000000000:table/{tagged}/index/by_tag",
        )]
        assert throttle.kind == ThrottleKind.INDEX
        assert simulator.read_units == {(f"{tagged}/index/by_tag", "hot"): 1.5, (f"{tagged}/index/by_tag", "cold"): 0.5}

    def test_index_wide_write_limit_and_lifting_it(self, tagged: str, clock: Clock) -> None:
        with simulate_partition_limits(Tagged, index_table_write_units=2, clock=clock) as simulator:
            Tagged("d", tag="x").save()
            Tagged("e", tag="y").save()
            with pytest.raises(PutError) as caught:
                Tagged("f", tag="z").save()
            simulator.set_limits(index_table_write_units=None)
            Tagged("f", tag="z").save()
        throttle = classify(caught.value)
        assert [(r.reason, r.index_name) for r in throttle.reasons] == [
            ("IndexWriteProvisionedThroughputExceeded", "by_tag")
        ]
        assert throttle.kind == ThrottleKind.TABLE
        assert simulator.throttles_by_reason == {"IndexWriteProvisionedThroughputExceeded": 1}

    def test_index_wide_read_limit_with_the_on_demand_maximum(self, tagged: str, clock: Clock) -> None:
        with simulate_partition_limits(
            Tagged, index_table_read_units=0.5, capacity_limit="on_demand_maximum", clock=clock
        ) as simulator:
            assert [item.pk for item in Tagged.by_tag.query("cold")] == ["c"]
            with pytest.raises(QueryError) as caught:
                list(Tagged.by_tag.query("hot"))  # another partition, the same index
            assert Tagged.get("a").tag == "hot"  # the table's own reads are not limited
        throttle = classify(caught.value)
        assert (throttle.code, [r.reason for r in throttle.reasons]) == (
            "ThrottlingException", ["IndexReadMaxOnDemandThroughputExceeded"]
        )
        assert simulator.throttles_by_reason == {"IndexReadMaxOnDemandThroughputExceeded": 1}


class TestBotocoreRetries:
    """The simulated response goes through botocore's parser and retry logic like a real one."""

    def test_a_throttled_write_is_retried_by_botocore(
        self, dynamodb_models: BindModels, clock: Clock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Log.Meta, "max_retry_attempts", 1)
        dynamodb_models(Log)
        with simulate_partition_limits(Log, write_units=1, clock=clock) as simulator:
            Log("hot", 0).save()
            with pytest.raises(PutError) as caught:
                Log("hot", 1).save()
        original = caught.value.cause.__cause__  # type: ignore[union-attr]
        metadata = original.response["ResponseMetadata"]
        assert (metadata["RetryAttempts"], metadata["MaxAttemptsReached"]) == (1, True)
        assert simulator.requests == {"PutItem": 3}
        assert simulator.throttles == {ThrottleKind.KEY_RANGE: 2}

    def test_a_retry_succeeds_when_the_bucket_refilled_meanwhile(
        self, dynamodb_models: BindModels, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Log.Meta, "max_retry_attempts", 1)
        dynamodb_models(Log)
        clock = Clock(100.0)
        # A fake one-second round trip: the bucket has refilled by the time botocore retries.
        with (
            simulate_partition_limits(Log, write_units=1, clock=clock) as simulator,
            inject_latency(Log, 1.0, sleep=clock.advance),
        ):
            Log("hot", 0).save()
            clock.now -= 1  # the save above refilled nothing: undo its round trip
            Log("hot", 1).save()
        assert simulator.requests == {"PutItem": 3}
        assert _partition_count("hot") == 2


class TestBatches:
    """Batches forward what fits and return the rest unprocessed, as DynamoDB does."""

    def test_batch_write_resends_unprocessed_items_until_all_are_written(
        self, dynamodb_models: BindModels, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Log.Meta, "max_retry_attempts", 3)
        table = dynamodb_models(Log)[Log]
        clock = Clock(100.0)
        with (
            simulate_partition_limits(Log, write_units=5, clock=clock) as simulator,
            inject_latency(Log, 1.0, sleep=clock.advance),  # a second passes between resends
            Log.batch_write() as batch,
        ):
            for sk in range(10):
                batch.save(Log("hot", sk))
        assert simulator.requests == {"BatchWriteItem": 2}
        assert simulator.throttles == {ThrottleKind.KEY_RANGE: 5}
        assert simulator.write_units == {(table, "hot"): 10.0}
        assert _partition_count("hot") == 10

    def test_batch_write_gives_up_after_max_retry_attempts(
        self, dynamodb_models: BindModels, clock: Clock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(Log.Meta, "max_retry_attempts", 1)
        dynamodb_models(Log)
        batch = Log.batch_write(auto_commit=False)
        with simulate_partition_limits(Log, write_units=3, clock=clock) as simulator:
            for sk in range(5):
                batch.save(Log("hot", sk))
            batch.save(Log("cold", 0))
            with pytest.raises(PutError) as caught:
                batch.commit()
        throttle = classify(caught.value)
        assert (throttle.kind, throttle.code) == (ThrottleKind.KEY_RANGE, UNPROCESSED_ITEMS)
        assert len(batch.failed_operations) == 2
        # 3 hot items and the cold one written, 2 unprocessed; PynamoDB gives up at once, as
        # it counts its first resend as a retry too.
        assert simulator.requests == {"BatchWriteItem": 1}
        assert (_partition_count("hot"), _partition_count("cold")) == (3, 1)

    def test_batch_get_returns_unprocessed_keys_that_pynamodb_resends(self, table: str) -> None:
        for sk in range(6):
            Log("hot", sk).save()
        Log("cold", 0).save()
        clock = Clock(100.0)
        with (
            simulate_partition_limits(Log, read_units=1, clock=clock) as simulator,
            inject_latency(Log, 1.0, sleep=clock.advance),
        ):
            keys = [("hot", sk) for sk in range(6)] + [("cold", 0)]
            items = list(Log.batch_get(keys))
        assert sorted((item.pk, item.sk) for item in items) == sorted(keys)
        # 0.5 units per eventually consistent key, 1 unit/s: two hot keys per request.
        assert simulator.requests == {"BatchGetItem": 3}
        assert simulator.throttles == {ThrottleKind.KEY_RANGE: 4 + 2}
        assert simulator.read_units == {(table, "hot"): 3.0, (table, "cold"): 0.5}


def _save_in_transaction(*items: Log) -> None:
    with TransactWrite(connection=Log._get_connection().connection) as transaction:
        for item in items:
            transaction.save(item)


class TestTransactions:
    """A transaction over a partition's limit is cancelled as a whole with ThrottlingError."""

    def test_transaction_is_cancelled_and_writes_nothing(self, table: str, clock: Clock) -> None:
        with simulate_partition_limits(Log, write_units=4, clock=clock) as simulator:
            _save_in_transaction(Log("hot", 0), Log("cold", 0))  # 2 x 2 units
            with pytest.raises(TransactWriteError) as caught:
                _save_in_transaction(Log("cold", 1), Log("hot", 1), Log("hot", 2))
        reasons = [reason.code if reason else None for reason in caught.value.cancellation_reasons]
        assert reasons == [None, "ThrottlingError", "ThrottlingError"]
        assert classify(caught.value).kind == ThrottleKind.KEY_RANGE
        assert simulator.write_units == {(table, "hot"): 2.0, (table, "cold"): 2.0}
        assert (_partition_count("hot"), _partition_count("cold")) == (1, 1)


class TestConcurrency:
    """Concurrent writers to one hot key never get more than the bucket holds."""

    def test_threads_share_the_bucket_exactly(self, table: str, clock: Clock) -> None:
        outcomes: list[bool] = []
        lock = threading.Lock()

        def write(worker: int) -> None:
            for n in range(5):
                try:
                    Log("hot", worker * 100 + n).save()
                    ok = True
                except PutError:
                    ok = False
                with lock:
                    outcomes.append(ok)

        with simulate_partition_limits(Log, write_units=10, clock=clock) as simulator:
            threads = [threading.Thread(target=write, args=(worker,)) for worker in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert (outcomes.count(True), outcomes.count(False)) == (10, 30)
        assert simulator.write_units == {(table, "hot"): 10.0}
        assert simulator.throttles == {ThrottleKind.KEY_RANGE: 30}


class TestModels:
    """Extra models share the simulator; attribute names are DynamoDB's, not Python's."""

    def test_extra_model_with_renamed_hash_key(self, dynamodb_models: BindModels, clock: Clock) -> None:
        tables = dynamodb_models(Log, Audit)
        with simulate_partition_limits(Log, write_units=1, clock=clock, extra_models=[Audit]) as simulator:
            Audit("hot").save()
            with pytest.raises(PutError):
                Audit("hot").save()
        assert simulator.write_units == {(tables[Audit], "hot"): 1.0}


def _handlers(model: type[Model]) -> dict[str, list[Any]]:
    emitter = model._get_connection().connection.client.meta.events._emitter
    events = ("before-sign.dynamodb.PutItem", "before-send.dynamodb.PutItem", "after-call.dynamodb.PutItem")
    return {event: list(emitter._handlers.prefix_search(event)) for event in events}


class TestRestore:
    """Leaving the block removes every handler it added, even when the block raises."""

    def test_exit_restores_the_client(self, table: str, clock: Clock) -> None:
        before = _handlers(Log)
        with simulate_partition_limits(Log, write_units=1, clock=clock):
            during = _handlers(Log)
            Log("hot", 0).save()
        assert _handlers(Log) == before
        assert during != before
        for sk in range(1, 5):  # over the old limit: nothing throttles any more
            Log("hot", sk).save()
        assert _partition_count("hot") == 5

    def test_exit_restores_the_client_when_the_block_raises(self, table: str, clock: Clock) -> None:
        before = _handlers(Log)
        with pytest.raises(PutError), simulate_partition_limits(Log, write_units=1, clock=clock):
            Log("hot", 0).save()
            Log("hot", 1).save()
        assert _handlers(Log) == before
