"""Messages about items still under a bare legacy key say "unsharded (bare) key", never "shard -1".

A ``legacy_unsharded`` model numbers the bare key -1 internally; users never see that number.
Proves, on DynamoDB Local with raw items written as the application wrote them before the
adoption: a write refused for an item read from the bare key names the bare key, and a cursor
whose bare-key position was edited (checksum recomputed) is refused naming the bare key; nothing
is written.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import CursorError, HashedShards, RandomShards, ShardedModel, Sharding, ShardMoveError
from pynamodb_sharding._cursor import _checksum
from tests.raw import put_raw, raw_items

Bind = Callable[..., Any]


class Visit(ShardedModel):
    """Shards derived from the user: a changed user_id selects another shard."""

    class Meta:
        table_name = "legacy_messages_visits"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    user_id = UnicodeAttribute()
    shards = Sharding(HashedShards(4, attributes=("user_id",)), legacy_unsharded=True)


class Reading(ShardedModel):
    class Meta:
        table_name = "legacy_messages_readings"

    sensor = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(8), legacy_unsharded=True)


BARE_VISIT = {"page": {"S": "/top"}, "at": {"N": "1"}, "user_id": {"S": "u1"}}


def test_a_refused_write_names_the_bare_key(dynamodb_models: Bind) -> None:
    dynamodb_models(Visit)
    put_raw(Visit, [BARE_VISIT])
    item = Visit.get("/top", 1)
    assert item.shards is None  # read from the bare key
    item.user_id = "u2"
    with pytest.raises(ShardMoveError) as raised:
        item.delete()
    message = str(raised.value)
    assert message.startswith("Visit.page: this item was read from the unsharded (bare) key, but its user_id "
                              "changed since, which selects another shard")
    assert "-1" not in message
    with (pytest.raises(ShardMoveError, match=r"read from the unsharded \(bare\) key, .* cannot be batch-written"),
          Visit.batch_write() as batch):
        batch.save(item)
    assert raw_items(Visit) == [BARE_VISIT]


def test_an_edited_cursor_names_the_bare_key(dynamodb_models: Bind) -> None:
    dynamodb_models(Reading)
    put_raw(Reading, [{"sensor": {"S": "s"}, "at": {"N": str(n)}} for n in range(3)])
    result = Reading.query("s", limit=2)
    assert [item.at for item in result] == [0, 1]
    cursor = result.last_evaluated_key
    assert isinstance(cursor, dict)
    edited = copy.deepcopy(cursor)
    # The position in the merged order is all this cursor needs; a cursor names the streams' own
    # positions only where more items share its sort value than it can name. Add one for the bare
    # key, for another key, as someone forging a cursor on purpose would.
    assert edited["after"]["value"] == {"N": "1"}
    edited["positions"] = [{"shard": -1, "start_key": {"sensor": {"S": "t"}, "at": {"N": "1"}}}]
    body = {name: value for name, value in edited.items() if name != "checksum"}
    edited["checksum"] = _checksum(body)  # as someone forging a cursor on purpose would
    with pytest.raises(CursorError) as raised:
        list(Reading.query("s", last_evaluated_key=edited))
    assert "has a start key for the unsharded (bare) key whose sensor is 't', not that key 's'" in str(raised.value)
    assert "-1" not in str(raised.value).split("(see")[0]
