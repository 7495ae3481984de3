"""tie_streams: which stream of a resumed query holds the place a cursor's tie was read from."""

from __future__ import annotations

from pynamodb_sharding._cursor import CursorScope
from pynamodb_sharding._fanout import tie_streams
from pynamodb_sharding._keys import FIRST_READ, LEGACY_SHARD
from pynamodb_sharding._merge import UNKNOWN_PLACE
from pynamodb_sharding._query_plan import QueryPlan

SCOPE = CursorScope("Log", "log", {"S": "hot"}, None, True)


def plan(hash_values: dict[int, str], first_reads: frozenset[int] = frozenset()) -> QueryPlan:
    return QueryPlan(SCOPE, "sensor", hash_values, ("sensor", "at"), "at", lambda shard: f"hot_{shard}",
                     first_reads=first_reads)


def tie(value: object) -> dict[str, dict[str, object]]:
    return {"sensor": {"S": value} if isinstance(value, str) else {"N": str(value)}, "at": {"N": "13"}}


def test_a_shard_of_the_plan_is_its_stream() -> None:
    stream_of = tie_streams(plan({1: "hot_1", 2: "hot_2", LEGACY_SHARD: "hot"}), "sensor")
    assert stream_of(tie("hot_2")) == 2
    assert stream_of(tie("hot")) == LEGACY_SHARD


def test_a_shard_the_plan_reads_no_more_has_no_stream() -> None:
    assert tie_streams(plan({1: "hot_1"}), "sensor")(tie("hot_4")) is None


def test_a_shard_read_first_and_again_is_its_first_read() -> None:
    # A key grown again before its compaction ended: shard 2 is read first and read again.
    both = plan({1: "hot_1", 2: "hot_2", FIRST_READ + 2: "hot_2"}, frozenset({FIRST_READ + 2}))
    assert tie_streams(both, "sensor")(tie("hot_2")) == FIRST_READ + 2


def test_a_key_that_is_no_shard_s_is_unknown() -> None:
    assert tie_streams(plan({1: "hot_1"}), "sensor")(tie(7)) == UNKNOWN_PLACE
    assert tie_streams(plan({1: "hot_1"}), "sensor")({"at": {"N": "1"}}) == UNKNOWN_PLACE
