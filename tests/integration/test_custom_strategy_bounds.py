"""A custom strategy that chooses a shard its reads do not cover is refused before sending.

Proves: ``write_shard`` (or ``write``) returning a number outside ``1..max_shards``, or not an
int, raises :class:`ShardKeyError` naming the model, the strategy and its range, for ``save``
and batch writes, and the raw table stays empty (such an item could never be read back).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import ShardedModel, Sharding, ShardKeyError
from pynamodb_sharding._strategies import ItemKey, ShardKey
from tests.raw import raw_items

Bind = Callable[..., Any]


class FixedChoice:
    """Four shards; every write goes to ``choice`` (a bug when it is not in 1..4)."""

    max_shards = 4
    choice: object = 1

    def shard_count(self, key: ShardKey) -> int:
        return 4

    def read_shards(self, key: ShardKey) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    def write_shard(self, item: ItemKey) -> object:
        return self.choice

    def point_shards(self, item: ItemKey) -> tuple[int, ...]:
        return (1, 2, 3, 4)

    def __repr__(self) -> str:
        return "FixedChoice()"


STRATEGY = FixedChoice()


class Download(ShardedModel):
    class Meta:
        table_name = "custom_bounds_download"

    file_path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(STRATEGY)  # type: ignore[arg-type]  # write_shard returns object on purpose


@pytest.mark.parametrize("choice", [5, 0, -1, "2", None, True, 2.0], ids=repr)
def test_out_of_range_choice_is_refused_and_nothing_is_written(
    dynamodb_models: Bind, monkeypatch: pytest.MonkeyPatch, choice: object,
) -> None:
    dynamodb_models(Download)
    monkeypatch.setattr(STRATEGY, "choice", choice)
    with pytest.raises(ShardKeyError) as raised:
        Download("/f", 1).save()
    message = str(raised.value)
    assert message.startswith("Download.file_path: the strategy FixedChoice() chose shard")
    assert "1..4" in message
    assert "nothing was sent" in message
    with pytest.raises(ShardKeyError), Download.batch_write() as batch:
        batch.save(Download("/f", 2))
    assert raw_items(Download) == []


def test_choice_in_range_is_written_and_read_back(dynamodb_models: Bind, monkeypatch: pytest.MonkeyPatch) -> None:
    dynamodb_models(Download)
    monkeypatch.setattr(STRATEGY, "choice", 4)
    Download("/f", 1).save()
    assert [raw["file_path"]["S"] for raw in raw_items(Download)] == ["/f_4"]
    assert [(item.at, item.shards) for item in Download.query("/f")] == [(1, 4)]
