"""The demo's exactly-once check fails on every way a read-back can be wrong.

Pure function, no server: proves that the ``check PASSED`` line the demo prints is earned.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding.demo import ReadBackCheck, check_read_back


def test_exact_read_back_passes() -> None:
    """Every acknowledged write once, in order: passed."""
    check = check_read_back([3, 1, 2], [1, 2, 3, 4], [1, 2, 3])
    assert ReadBackCheck(acknowledged=3, read=3, duplicates=0, missing=0, unexpected=0, in_order=True) == check
    assert check.passed


def test_attempted_but_unacknowledged_items_are_not_errors() -> None:
    """A write the client gave up on may still have landed; that is not a failure."""
    assert check_read_back([1, 3], [1, 2, 3], [1, 2, 3]).passed


def test_each_defect_fails() -> None:
    """Missing, duplicated, never-written and out-of-order items each fail the check."""
    assert check_read_back([1, 2, 3], [1, 2, 3], [1, 3]).missing == 1
    assert check_read_back([1, 2, 3], [1, 2, 3], [1, 2, 2, 3]).duplicates == 1
    assert check_read_back([1, 2], [1, 2], [1, 2, 9]).unexpected == 1
    assert not check_read_back([1, 2, 3], [1, 2, 3], [1, 3, 2]).in_order
    for acked, read in (([1, 2, 3], [1, 3]), ([1, 2, 3], [1, 2, 2, 3]), ([1, 2], [1, 2, 9]), ([1, 2, 3], [2, 1, 3])):
        assert not check_read_back(acked, acked, read).passed


@settings(max_examples=50)
@given(st.sets(st.integers(min_value=0, max_value=10_000), min_size=1), st.data())
def test_dropping_any_acknowledged_item_fails(acked: set[int], data: st.DataObject) -> None:
    """Whichever acknowledged item goes missing, the check notices."""
    dropped = data.draw(st.sampled_from(sorted(acked)))
    read = sorted(acked - {dropped})
    check = check_read_back(sorted(acked), sorted(acked), read)
    assert not check.passed
    assert check.missing == 1
