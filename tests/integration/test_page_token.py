"""Page tokens (``next_page_token``) of merged queries on DynamoDB Local.

A token resumes a query exactly like the cursor dict, is compact and URL-safe, names no table
or model, and is refused (as ``CursorError``, before any request) when edited, truncated,
foreign, or signed with another secret. A model with ``cursor_secret`` signs its tokens.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import CursorError, RandomShards, ShardedModel, Sharding, ShardingDefinitionError
from pynamodb_sharding.testing import record_requests
from pynamodb_sharding.testing.plugin import BindModels
from tests.paging import page_by_page
from tests.raw import put_raw

URL_SAFE = re.compile(r"^[A-Za-z0-9_-]+$")


class Visit(ShardedModel):
    class Meta:
        table_name = "token_visit"
        max_pool_connections = 16

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(16))


class SignedVisit(ShardedModel):
    class Meta:
        table_name = "token_signed_visit"
        max_pool_connections = 16

    page = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(RandomShards(16), cursor_secret=["new secret", "old secret"])


def fill(model: type[ShardedModel], key: str, count: int) -> list[int]:
    """``count`` items spread over the 16 shards, with 10-digit timestamps as sort keys."""
    stamps = [1_456_369_200 + n for n in range(count)]
    put_raw(model, [
        {"page": {"S": f"{key}_{n % 16 + 1}"}, "at": {"N": str(stamp)}}
        for n, stamp in enumerate(stamps)
    ])
    return stamps


@pytest.fixture
def visits(dynamodb_models: BindModels) -> list[int]:
    dynamodb_models(Visit, SignedVisit)
    return fill(Visit, "/home", 100)


def read_by_tokens(model: type[ShardedModel], key: str, limit: int, **kwargs: Any) -> tuple[list[int], list[str]]:
    read = page_by_page(model.query, token=True, hash_key=key, limit=limit, **kwargs)
    got = [int(item.at) for items, _ in read for item in items]
    return got, [result.next_page_token for _, result in read[:-1]]


def test_tokens_resume_every_page_in_both_directions(visits: list[int]) -> None:
    for forward in (True, False):
        got, tokens = read_by_tokens(Visit, "/home", 7, scan_index_forward=forward)
        assert got == sorted(visits, reverse=not forward)
        assert len(tokens) == 14
        assert all(URL_SAFE.match(token) for token in tokens)


def test_a_16_shard_token_with_numeric_keys_is_under_400_characters(visits: list[int]) -> None:
    results = Visit.query("/home", limit=50)
    list(results)
    token = results.next_page_token
    assert token is not None
    assert len(token) < 400
    # It names neither the table nor the model nor the key.
    for secret_word in ("token_visit", "Visit", "/home"):
        assert secret_word.encode() not in _unpadded(token)
    cursor = results.last_evaluated_key
    assert isinstance(cursor, dict)
    assert len(token) * 3 < len(str(cursor))


def _unpadded(token: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))


def test_the_token_before_iteration_is_the_given_one_and_none_at_the_end(visits: list[int]) -> None:
    first = Visit.query("/home", limit=30)
    assert first.next_page_token is None  # nothing given, nothing read yet (as last_evaluated_key)
    list(first)
    token = first.next_page_token
    assert token is not None
    resumed = Visit.query("/home", last_evaluated_key=token)
    assert resumed.next_page_token == token
    assert len(list(resumed)) == 70
    assert resumed.next_page_token is None


def test_a_dict_cursor_and_its_token_resume_at_the_same_place(visits: list[int]) -> None:
    results = Visit.query("/home", limit=33)
    list(results)
    cursor, token = results.last_evaluated_key, results.next_page_token
    by_cursor = [int(item.at) for item in Visit.query("/home", last_evaluated_key=cursor)]
    by_token = [int(item.at) for item in Visit.query("/home", last_evaluated_key=token)]
    assert by_cursor == by_token == sorted(visits)[33:]
    assert Visit.query("/home", last_evaluated_key=cursor).next_page_token == token


def tampered(token: str) -> list[str]:
    flipped = token[:10] + ("A" if token[10] != "A" else "B") + token[11:]
    # Not "": an empty token reads from the first item, as PynamoDB's empty cursor does
    # (test_empty_cursor.py).
    return [flipped, token[:-4], token[:20], token + "AAAA", "A", "not a token!", "A" * len(token)]


@pytest.mark.parametrize("model", [Visit, SignedVisit])
def test_edited_truncated_or_foreign_tokens_are_refused_without_a_request(
    visits: list[int], model: type[ShardedModel]
) -> None:
    fill(SignedVisit, "/home", 40)
    results = model.query("/home", limit=5)
    list(results)
    token = results.next_page_token
    assert token is not None
    other = SignedVisit if model is Visit else Visit
    with record_requests(model, extra_models=[other]) as sent:
        for bad in tampered(token):
            with pytest.raises(CursorError, match="query"):
                model.query("/home", last_evaluated_key=bad)
        with pytest.raises(CursorError):  # another key
            model.query("/about", last_evaluated_key=token)
        with pytest.raises(CursorError):  # the other direction
            model.query("/home", scan_index_forward=False, last_evaluated_key=token)
        with pytest.raises(CursorError):  # another model's token
            other.query("/home", last_evaluated_key=token)
    assert sent.requests == {}


def test_signed_tokens(dynamodb_models: BindModels) -> None:
    dynamodb_models(SignedVisit)
    stamps = fill(SignedVisit, "/home", 60)
    got, tokens = read_by_tokens(SignedVisit, "/home", 11)
    assert got == sorted(stamps)
    assert len(tokens) == 5
    results = SignedVisit.query("/home", limit=5)
    list(results)
    # With a secret, last_evaluated_key is the signed token too: no unsigned form to forge.
    assert results.last_evaluated_key == results.next_page_token
    with pytest.raises(CursorError, match="signs its page tokens"):
        SignedVisit.query("/home", last_evaluated_key={"version": 1})


def test_rotation_accepts_a_token_signed_with_the_old_secret(dynamodb_models: BindModels) -> None:
    dynamodb_models(SignedVisit)
    stamps = fill(SignedVisit, "/home", 20)
    manager = SignedVisit.shards
    old_manager_secret = manager.cursor_secret
    try:
        object.__setattr__(manager, "cursor_secret", "old secret")
        results = SignedVisit.query("/home", limit=5)
        list(results)
        token = results.next_page_token
        object.__setattr__(manager, "cursor_secret", old_manager_secret)
        assert [int(item.at) for item in SignedVisit.query("/home", last_evaluated_key=token)] == sorted(stamps)[5:]
        object.__setattr__(manager, "cursor_secret", "a third secret")
        with pytest.raises(CursorError, match="another cursor secret"):
            SignedVisit.query("/home", last_evaluated_key=token)
    finally:
        object.__setattr__(manager, "cursor_secret", old_manager_secret)


@pytest.mark.parametrize("secret", ["", b"", [], 42])
def test_a_bad_secret_is_refused_when_the_model_is_declared(secret: Any) -> None:
    with pytest.raises(ShardingDefinitionError, match="cursor_secret"):
        Sharding(RandomShards(4), cursor_secret=secret)
