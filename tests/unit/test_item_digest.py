"""item_digest: what a cursor keeps of the item a page ended on, to tell its copy (the same item
moved to another shard) from a second item stored under its key."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pynamodb_sharding._cursor import DIGEST_BYTES, item_digest

ITEM: dict[str, Any] = {
    "sensor": {"S": "hot_4"},
    "at": {"N": "13"},
    "value": {"N": "13"},
    "tags": {"SS": ["b", "a"]},
    "sizes": {"NS": ["2", "10"]},
    "blob": {"B": b"\x00\x01"},
    "meta": {"M": {"x": {"S": "1"}, "y": {"L": [{"N": "1"}, {"S": "two"}]}}},
    "seen": {"BOOL": True},
    "gone": {"NULL": True},
}


def test_an_item_and_its_copy_in_another_shard_have_one_digest() -> None:
    moved = {**ITEM, "sensor": {"S": "hot_2"}}
    assert item_digest(moved, "sensor") == item_digest(ITEM, "sensor")
    assert len(item_digest(ITEM, "sensor")) == DIGEST_BYTES


def test_values_dynamodb_holds_equal_have_one_digest() -> None:
    same = {
        **ITEM,
        "value": {"N": "13.0"},                     # a number by value
        "tags": {"SS": ["a", "b"]},                 # sets in any order
        "sizes": {"NS": ["10.00", "2"]},
        "blob": {"B": "AAE="},                      # binary as botocore's bytes or base64 text
        "meta": {"M": {"y": {"L": [{"N": "1.0"}, {"S": "two"}]}, "x": {"S": "1"}}},
    }
    assert item_digest(same, "sensor") == item_digest(ITEM, "sensor")


def test_a_list_in_another_order_is_another_item() -> None:
    other = {**ITEM, "meta": {"M": {"x": {"S": "1"}, "y": {"L": [{"S": "two"}, {"N": "1"}]}}}}
    assert item_digest(other, "sensor") != item_digest(ITEM, "sensor")


def test_a_number_and_a_string_of_one_text_differ() -> None:
    assert item_digest({**ITEM, "value": {"S": "13"}}, "sensor") != item_digest(ITEM, "sensor")


def test_an_attribute_more_or_less_is_another_item() -> None:
    fewer = {name: value for name, value in ITEM.items() if name != "seen"}
    assert item_digest(fewer, "sensor") != item_digest(ITEM, "sensor")
    assert item_digest({**ITEM, "extra": {"S": ""}}, "sensor") != item_digest(ITEM, "sensor")


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(set(ITEM) - {"sensor"})), text=st.text(min_size=1, max_size=8))
def test_any_other_value_of_any_attribute_is_another_item(name: str, text: str) -> None:
    changed = {**ITEM, name: {"S": text}}
    assert item_digest(changed, "sensor") != item_digest(ITEM, "sensor")


@settings(max_examples=200, deadline=None)
@given(first=st.integers(-10**6, 10**6), second=st.integers(-10**6, 10**6))
def test_two_numbers_share_a_digest_exactly_when_they_are_equal(first: int, second: int) -> None:
    one = item_digest({**ITEM, "value": {"N": str(first)}}, "sensor")
    two = item_digest({**ITEM, "value": {"N": f"{second}.0"}}, "sensor")
    assert (one == two) == (first == second)


def test_numbers_of_38_digits_that_differ_in_the_last_one_differ() -> None:
    # DynamoDB keeps 38 significant digits; Python's default context rounds to 28.
    one = item_digest({**ITEM, "big": {"N": "12345678901234567890123456789012345678"}}, "sensor")
    two = item_digest({**ITEM, "big": {"N": "12345678901234567890123456789012345679"}}, "sensor")
    assert one != two
    assert item_digest({**ITEM, "big": {"N": "1234567890123456789012345678901234567.80"}}, "sensor") == \
        item_digest({**ITEM, "big": {"N": "1234567890123456789012345678901234567.8"}}, "sensor")
