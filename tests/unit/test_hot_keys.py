"""Hot-key hint entries: what a writer may take from one (pure functions)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pynamodb_sharding._hot_keys import HINT_HISTORY, format_entry, parse_entry
from pynamodb_sharding._metadata import ShardState
from pynamodb_sharding._strategies import HistoryEntry

GROWN = ShardState(
    count=16, last_updated=1_700_000_030.5,
    history=(HistoryEntry(1_699_999_000.0, 1), HistoryEntry(1_700_000_010.0, 4), HistoryEntry(1_700_000_030.5, 16)),
)


def test_an_entry_carries_the_count_and_its_changes() -> None:
    text = format_entry(1_700_003_600.0, "/shared/firetvGen2.txt", GROWN)
    assert text == "1700003600:1700000030.5:=1@1699999000,4@1700000010,16@1700000030.5:/shared/firetvGen2.txt"
    entry = parse_entry(text)
    assert entry is not None
    assert entry.key == "/shared/firetvGen2.txt"
    assert entry.expires == 1_700_003_600.0
    assert entry.complete
    assert entry.state.count == 16
    assert entry.state.last_updated == 1_700_000_030.5
    # What a writer with an 11 s growth delay uses at each moment: the count in effect then.
    assert entry.state.count_at(1_700_000_009.0) == 1
    assert entry.state.count_at(1_700_000_020.0) == 4
    assert entry.state.count_at(1_700_000_041.5) == 16


def test_a_key_with_colons_survives() -> None:
    entry = parse_entry(format_entry(10.0, "tenant:42:orders", GROWN))
    assert entry is not None
    assert entry.key == "tenant:42:orders"


def test_a_long_history_keeps_its_latest_changes_and_says_so() -> None:
    history = tuple(HistoryEntry(1000.0 + 10 * n, 2**n) for n in range(7))
    state = ShardState(count=64, last_updated=1060.0, history=history)
    entry = parse_entry(format_entry(5000.0, "k", state))
    assert entry is not None
    assert not entry.complete
    assert [change.count for change in entry.state.history] == [8, 16, 32, 64][-HINT_HISTORY:]
    # From the oldest change kept on, its count_at is the whole history's; before it, unknown.
    assert entry.usable_at(1030.0)
    assert entry.state.count_at(1035.0) == 8
    assert not entry.usable_at(1029.0)


def test_a_count_the_history_does_not_show_is_recorded_from_last_updated() -> None:
    state = ShardState(count=3, last_updated=200.0, history=(HistoryEntry(100.0, 1),))
    entry = parse_entry(format_entry(900.0, "k", state))
    assert entry is not None
    assert entry.state.count == 3
    assert entry.state.count_at(150.0) == 1
    assert entry.state.count_at(200.0) == 3


def test_anything_else_is_no_entry() -> None:
    for text in ("", "123:k", "x:1:=1@1:k", "1:2:1@1:k", "1:2:=:k", "1:2:=0@1:k", "1:2:=1@nan:k", "inf:2:=1@1:k"):
        assert parse_entry(text) is None, text


epochs = st.floats(min_value=0, max_value=4e9, allow_nan=False).map(lambda at: round(at, 3))


@given(
    changes=st.lists(st.tuples(epochs, st.integers(1, 1024)), min_size=1, max_size=10, unique_by=lambda c: c[0]),
    key=st.text(min_size=1, max_size=40),
    probe=epochs,
)
def test_a_usable_entry_answers_as_the_whole_history(changes: list[tuple[float, int]], key: str, probe: float) -> None:
    """Whatever the history, an entry gives the key back, and wherever it says it is usable
    its count_at is the stored state's."""
    history = tuple(sorted(HistoryEntry(at, count) for at, count in changes))
    state = ShardState(count=history[-1].count, last_updated=history[-1].at, history=history)
    entry = parse_entry(format_entry(4e9, key, state))
    assert entry is not None
    assert entry.key == key
    assert entry.complete == (len(history) <= HINT_HISTORY)
    if entry.usable_at(probe):
        assert entry.state.count_at(probe) == state.count_at(probe)
