"""Metadata items: the ``"<epoch>:<count>"`` history format, distinct lock values, validation.

Proves that history entries survive a round trip, that every change gets a lock value strictly
past the previous one even under a frozen clock, and that corrupt items are refused with a
MetadataError naming the model, the key and the fix.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._exceptions import MetadataError
from pynamodb_sharding._metadata import (
    LOCK_RESOLUTION,
    ShardMetadata,
    ShardState,
    format_history_entry,
    next_lock_value,
    parse_history_entry,
    state_from_item,
)
from pynamodb_sharding._strategies import HistoryEntry


class UnitShards(ShardMetadata):
    class Meta:
        table_name = "unit_shards"


epochs = st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False).map(lambda x: round(x, 3))
counts = st.integers(min_value=1, max_value=10_000)


@settings(max_examples=200)
@given(at=epochs, count=counts)
def test_history_entry_round_trips(at: float, count: int) -> None:
    entry = HistoryEntry(at=at, count=count)
    assert entry == parse_history_entry(format_history_entry(entry))


def test_whole_second_entries_parse() -> None:
    assert HistoryEntry(at=1562858912.0, count=2) == parse_history_entry("1562858912:2")
    assert format_history_entry(HistoryEntry(at=1562858912.0, count=2)) == "1562858912:2"


@pytest.mark.parametrize("text", ["", "12", "abc:2", "12:x", "12:0", "12:-1", "-5:2", "nan:2", "inf:1", "1:2.5"])
def test_unparsable_entries_raise(text: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_history_entry(text)


@settings(max_examples=200)
@given(previous=epochs, now=epochs)
def test_lock_values_strictly_increase(previous: float, now: float) -> None:
    value = next_lock_value(now, previous)
    assert value >= previous + LOCK_RESOLUTION - 1e-6
    assert value >= round(now, 3)
    # The value survives the Number round trip through DynamoDB (json of a float).
    assert value == float(repr(value))


def test_frozen_clock_still_gives_distinct_lock_values() -> None:
    first = next_lock_value(1000.0, None)
    second = next_lock_value(1000.0, first)
    third = next_lock_value(1000.0, second)
    assert [first, second, third] == [1000.0, 1000.001, 1000.002]


def test_read_count_is_the_largest_count_in_the_history() -> None:
    state = ShardState(
        count=2,
        last_updated=30.0,
        history=(HistoryEntry(10.0, 1), HistoryEntry(20.0, 8), HistoryEntry(30.0, 2)),
    )
    assert state.read_count == 8
    assert ShardState(count=3, last_updated=1.0).read_count == 3


def _state(*counts: int) -> ShardState:
    """A state whose history holds ``counts``, oldest first, the last one current."""
    history = tuple(HistoryEntry(float(10 * n), count) for n, count in enumerate(counts, start=1))
    return ShardState(count=counts[-1], last_updated=history[-1].at, history=history)


@pytest.mark.parametrize(("counts", "floor"), [
    ((1, 2, 4, 8), 8),     # grown only: nothing is moved down
    ((8, 2), 2),           # shrunk: the shards above 2 are moved out of
    ((2, 1, 2), 1),        # shrunk, grown again before the compaction trimmed it
    ((8, 4, 2, 4), 2),     # the lowest shrink still in the history counts
    ((1, 4, 2, 8), 2),
    ((4,), 4),             # a trimmed history: its current count only
])
def test_the_moving_floor_is_the_lowest_shrink_left_in_the_history(counts: tuple[int, ...], floor: int) -> None:
    assert _state(*counts).moving_floor == floor


def test_a_state_without_history_has_its_count_as_moving_floor() -> None:
    assert ShardState(count=3, last_updated=1.0).moving_floor == 3


@given(st.lists(counts, min_size=1, max_size=12))
def test_the_moving_floor_never_exceeds_the_count_and_is_a_count_of_the_history(history: list[int]) -> None:
    floor = _state(*history).moving_floor
    assert floor <= history[-1]
    assert floor in history
    if history == sorted(history):
        assert floor == history[-1]  # only growths: nothing to move down


def test_newer_than_orders_by_lock_value() -> None:
    old = ShardState(count=2, last_updated=10.0)
    new = ShardState(count=1, last_updated=10.001)
    assert new.newer_than(old)
    assert not old.newer_than(new)


def test_metadata_subclass_defaults_to_on_demand_billing() -> None:
    assert UnitShards.Meta.billing_mode == "PAY_PER_REQUEST"

    class Provisioned(ShardMetadata):
        class Meta:
            table_name = "provisioned_shards"
            billing_mode = "PROVISIONED"

    assert Provisioned.Meta.billing_mode == "PROVISIONED"


def _item(**attributes: object) -> UnitShards:
    values: dict[str, object] = {
        "number_of_shards": 2,
        "last_updated": 100.0,
        "shard_history": {"50:1", "100:2"},
    }
    values.update(attributes)
    return UnitShards("/shared/firetvGen2.txt", "audit_log", **values)


def test_valid_item_becomes_a_state() -> None:
    state = state_from_item(_item(), owner="AuditLog.file_path", max_shards=8)
    assert ShardState(2, 100.0, (HistoryEntry(50.0, 1), HistoryEntry(100.0, 2))) == state


@pytest.mark.parametrize(
    ("attributes", "problem"),
    [
        ({"number_of_shards": None}, "no number_of_shards"),
        ({"number_of_shards": 0}, "number_of_shards=0"),
        ({"number_of_shards": -3}, "number_of_shards=-3"),
        ({"number_of_shards": 9}, "number_of_shards=9"),
        ({"number_of_shards": 2.5}, "number_of_shards=2.5"),
        ({"last_updated": None}, "no valid last_updated"),
        ({"shard_history": {"yesterday:2"}}, "unparsable shard_history"),
        ({"shard_history": {"100:40"}}, "40 shards in shard_history"),
    ],
)
def test_corrupt_items_raise_metadata_error(attributes: dict[str, object], problem: str) -> None:
    with pytest.raises(MetadataError) as info:
        state_from_item(_item(**attributes), owner="AuditLog.file_path", max_shards=8)
    message = str(info.value)
    assert "AuditLog.file_path" in message
    assert "'/shared/firetvGen2.txt'" in message
    assert problem in message
    assert "fix or delete the item" in message
