"""A tampered, truncated or foreign cursor makes ``query`` raise ``CursorError`` before any request.

The cursors come from real merged queries against DynamoDB Local, then are edited the ways a
stored cursor goes wrong; none of them ever yields a page.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import QueryError
from pynamodb.models import Model

from pynamodb_sharding import CursorError, RandomShards, ShardedModel, Sharding, ShardingError
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels


class Visit(ShardedModel):
    class Meta:
        table_name = "fanout_visit"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


class OtherVisit(ShardedModel):
    """Same schema, other model: its cursors must not be accepted by ``Visit``."""

    class Meta:
        table_name = "fanout_other_visit"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(4))


@contextmanager
def no_requests(model: type[Model]) -> Iterator[None]:
    with record_requests(model) as sent:
        yield
    assert sent.requests == {}


@pytest.fixture
def cursor(dynamodb_models: BindModels) -> dict[str, Any]:
    """A cursor after 5 of 20 items of ``Visit("home")``, through a JSON round trip."""
    dynamodb_models(Visit, OtherVisit)
    for at in range(20):
        Visit("home", at).save()
        OtherVisit("home", at).save()
    page = Visit.query("home", limit=5)
    assert len(list(page)) == 5
    value = page.last_evaluated_key
    assert value is not None
    loaded: dict[str, Any] = json.loads(json.dumps(value))
    return loaded


def edit(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], Any]:
    def apply(cursor: dict[str, Any]) -> Any:
        edited = copy.deepcopy(cursor)
        change(edited)
        return edited

    return apply


def set_sort_key(cursor: dict[str, Any]) -> None:
    value = cursor["after"]["value"]
    value["N"] = str(int(value["N"]) + 1000)  # always a change


def truncate_fields(cursor: dict[str, Any]) -> Any:
    return {name: value for name, value in cursor.items() if name != "checksum"}


CASES: list[Any] = [
    pytest.param(edit(set_sort_key), {}, "checksum", id="edited-value"),
    pytest.param(edit(lambda c: c.update(checksum="f" * 16)), {}, "checksum", id="bad-checksum"),
    pytest.param(truncate_fields, {}, "truncated", id="truncated"),
    pytest.param(edit(lambda c: c["after"]["ties"].pop()), {}, "checksum", id="truncated-ties"),
    pytest.param(json.dumps, {}, "json.loads", id="not-a-dict"),
    pytest.param(lambda c: c, {"hash_key": "about"}, "hash key", id="other-key"),
    pytest.param(lambda c: c, {"scan_index_forward": False}, "other direction", id="other-direction"),
]


@pytest.mark.parametrize(("spoil", "query_kwargs", "fragment"), CASES)
def test_spoiled_cursor_is_refused(cursor: dict[str, Any], spoil: Callable[[dict[str, Any]], Any],
                                   query_kwargs: dict[str, Any], fragment: str) -> None:
    kwargs = {"hash_key": "home", **query_kwargs}
    with no_requests(Visit), pytest.raises(CursorError, match=fragment) as caught:
        Visit.query(last_evaluated_key=spoil(cursor), **kwargs)
    assert isinstance(caught.value, ShardingError)
    assert "Visit.query(last_evaluated_key=...)" in str(caught.value)
    assert "restart the query without last_evaluated_key" in str(caught.value)


def test_cursor_of_another_model_is_refused(cursor: dict[str, Any]) -> None:
    with no_requests(OtherVisit), pytest.raises(CursorError, match="belongs to Visit"):
        OtherVisit.query("home", last_evaluated_key=cursor)


def test_unspoiled_cursor_resumes(cursor: dict[str, Any]) -> None:
    assert [int(v.at) for v in Visit.query("home", last_evaluated_key=cursor)] == list(range(5, 20))


class PlainVisit(Model):
    class Meta:
        table_name = "fanout_plain_visit"

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)


def test_cursor_under_another_range_condition_behaves_as_pynamodb(dynamodb_models: BindModels) -> None:
    """Documented in concepts.rst: DynamoDB refuses a start key outside the new range, and
    resumes after it inside it, for a merged query as for PynamoDB's own."""
    dynamodb_models(Visit, PlainVisit)
    outcomes: dict[str, list[Any]] = {}
    for model in (Visit, PlainVisit):
        for at in range(20):
            model("home", at).save()
        first = model.query("home", limit=5)
        assert len(list(first)) == 5
        start = json.loads(json.dumps(first.last_evaluated_key))
        with pytest.raises(QueryError) as raised:
            list(model.query("home", model.at > 10, last_evaluated_key=start))
        inside = [int(v.at) for v in model.query("home", model.at < 8, last_evaluated_key=start)]
        outcomes[model.__name__] = [raised.value.cause_response_code, inside]
    assert outcomes["Visit"] == outcomes["PlainVisit"] == ["ValidationException", [5, 6, 7]]
