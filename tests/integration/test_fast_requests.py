"""Shard requests on the fast path (``pynamodb_sharding._wire``) give what PynamoDB and botocore
give, and step aside where they cannot stand in for them.

Proves, on DynamoDB Local: the same items, pages and cursors with the fast path as without it
(``PYNAMODB_SHARDING_FAST_QUERIES=0``), across the query's options; every handler a user registers
on a Query event sees every shard request (the events the fast path emits, and botocore's path
for the others); a throttle, a lost reply and a kept-alive connection the server closed, made by
a front between the client and the server (``tests/http_front.py``), end in the right items with
the request sent again through botocore (or on a new connection); TLS to an ``https://`` endpoint
verified with the CA bundle botocore would use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, GlobalSecondaryIndex

from pynamodb_sharding import HashedShards, RandomShards, ShardedModel, Sharding
from pynamodb_sharding import _async_http as async_http
from pynamodb_sharding import _wire as wire
from pynamodb_sharding._host import BEFORE_PARSE_HOOK, tls_context
from pynamodb_sharding.testing import bound_models, record_requests
from pynamodb_sharding.testing.local import DynamoDBLocal
from tests.async_loop import Loop
from tests.http_front import HttpFront
from tests.paging import apage_by_page, page_by_page
from tests.proxy import TlsFront, tls_pair

KEY = "/fast"


class ByDay(GlobalSecondaryIndex["FastLog"]):
    class Meta:
        index_name = "by_day"
        projection = AllProjection()

    day = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4, attributes=("path",)))


class FastLog(ShardedModel):
    class Meta:
        table_name = "fast_requests_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    day = UnicodeAttribute()
    note = UnicodeAttribute(null=True)
    by_day = ByDay()
    shards = Sharding(RandomShards(4))


@pytest.fixture
def log(dynamodb_models: Callable[..., Any]) -> None:
    dynamodb_models(FastLog)
    with FastLog.batch_write() as batch:
        for at in range(60):
            batch.save(FastLog(KEY, at, day="d", note="odd" if at % 2 else None))


def pages(query: Callable[..., Any], **kwargs: Any) -> list[tuple[list[tuple[int, Any]], Any]]:
    """Each page's items (number, note) and cursor."""
    return [([(int(item.at), item.note) for item in items], result.last_evaluated_key)
            for items, result in page_by_page(query, **kwargs)]


READS: dict[str, Callable[[], Any]] = {
    "limit": lambda: pages(FastLog.query, hash_key=KEY, limit=7),
    "page_size": lambda: pages(FastLog.query, hash_key=KEY, page_size=5, limit=23),
    "backwards": lambda: pages(FastLog.query, hash_key=KEY, limit=9, scan_index_forward=False),
    "range and filter": lambda: pages(FastLog.query, hash_key=KEY, range_key_condition=FastLog.at.between(10, 40),
                                      filter_condition=FastLog.note.exists(), limit=4),
    "projection": lambda: pages(FastLog.query, hash_key=KEY, attributes_to_get=["note"], limit=11),
    "consistent": lambda: pages(FastLog.query, hash_key=KEY, consistent_read=True, limit=13),
    "index": lambda: pages(FastLog.by_day.query, hash_key="d", limit=8),
    "count": lambda: FastLog.count(KEY, filter_condition=FastLog.note.exists()),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_the_fast_path_gives_what_botocore_gives(log: None, read: str, monkeypatch: pytest.MonkeyPatch) -> None:
    list(FastLog.query(KEY, limit=1))  # the endpoint is learned from a first request through botocore
    before = wire.sent["fast"]
    fast = READS[read]()
    assert wire.sent["fast"] > before  # it was taken
    monkeypatch.setenv("PYNAMODB_SHARDING_FAST_QUERIES", "0")
    before = wire.sent["fast"]
    assert READS[read]() == fast
    assert wire.sent["fast"] == before  # and it was not


def test_the_fast_path_is_taken_with_an_observer_and_not_with_a_handler_that_may_answer(log: None) -> None:
    list(FastLog.query(KEY, limit=1))
    client = FastLog._get_connection().connection.client
    with record_requests(FastLog) as sent:  # an observer: emitted to, on the fast path
        before = wire.sent["fast"]
        # page_size=5: one request per shard whatever shards the random items fell on (a limit
        # alone asks each shard for a share of it, and a page in 20 then reads a shard twice).
        list(FastLog.query(KEY, limit=5, page_size=5))
        assert wire.sent["fast"] - before == 4
    assert sent.requests == {"Query": 4}

    def answers(request: Any, **_: Any) -> None:  # unmarked: it could answer instead of DynamoDB
        return None

    client.meta.events.register("before-send.dynamodb.Query", answers)
    try:
        before = wire.sent["fast"]
        list(FastLog.query(KEY, limit=5))
        assert wire.sent["fast"] == before
    finally:
        client.meta.events.unregister("before-send.dynamodb.Query", answers)


EVENTS = ["provide-client-params", "before-parameter-build", "before-call", "request-created", "before-sign",
          "before-send", "needs-retry", "after-call", "before-parse"]


@pytest.mark.parametrize("event", EVENTS)
def test_every_hook_a_user_registers_sees_every_shard_request(log: None, event: str) -> None:
    list(FastLog.query(KEY, limit=1))
    client = FastLog._get_connection().connection.client
    seen: list[str] = []

    def hook(event_name: str, **_: Any) -> None:
        seen.append(event_name)

    client.meta.events.register(f"{event}.dynamodb.Query", hook)
    try:
        with record_requests(FastLog) as sent:
            assert 60 == len(list(FastLog.query(KEY, page_size=10)))
            assert 60 == len(list(FastLog.by_day.query("d", page_size=10)))
    finally:
        client.meta.events.unregister(f"{event}.dynamodb.Query", hook)
    assert sent.requests["Query"] >= 8 + 8  # every shard's pages, of the table and of the index
    if event == "before-parse" and not BEFORE_PARSE_HOOK:
        assert seen == []  # botocore before 1.36 emits no before-parse, for any request
    else:
        assert sent.requests["Query"] == len(seen)


def _front_model(server: DynamoDBLocal, front_url: str) -> Iterator[None]:
    with bound_models(attrs.evolve(server, endpoint=front_url, pid=None), FastLog):
        with FastLog.batch_write() as batch:
            for at in range(40):
                batch.save(FastLog(KEY, at, day="d"))
        yield


def _port(url: str) -> int:
    return urlsplit(url).port or 80


def test_a_throttle_and_a_lost_reply_on_the_fast_path_are_sent_again_through_botocore(
    dynamodb_local: DynamoDBLocal,
) -> None:
    with HttpFront(("127.0.0.1", _port(dynamodb_local.endpoint))) as front:
        for _ in _front_model(dynamodb_local, front.url):
            list(FastLog.query(KEY, limit=1))  # learned
            front.script[:] = ["throttle", "drop"]
            queries = front.queries
            replies = wire.sent["reply"]
            assert list(range(40)) == [int(item.at) for item in FastLog.query(KEY)]
            # The throttled request is sent again through botocore (its retries and errors). The
            # front drops the next Query it gets: another shard's (sent again by the fast path on a
            # new connection, or through botocore) or the throttled one's resend (which botocore
            # retries), as the threads meet it. Either way each fault costs one more request.
            assert wire.sent["reply"] - replies in (1, 2)
            assert front.queries - queries == 4 + 2


def test_a_kept_alive_connection_the_server_closed_is_replaced(dynamodb_local: DynamoDBLocal) -> None:
    with HttpFront(("127.0.0.1", _port(dynamodb_local.endpoint))) as front:
        for _ in _front_model(dynamodb_local, front.url):
            list(FastLog.query(KEY, limit=1))
            assert list(range(40)) == [int(item.at) for item in FastLog.query(KEY)]  # connections kept
            front.script[:] = ["close"] * 4  # each reply, then its connection closed
            assert list(range(40)) == [int(item.at) for item in FastLog.query(KEY)]
            fast, replies, connections = wire.sent["fast"], wire.sent["reply"], front.connections
            assert list(range(40)) == [int(item.at) for item in FastLog.query(KEY)]
            assert wire.sent["fast"] - fast == 4  # the fast path, on new connections
            assert wire.sent["reply"] == replies
            assert front.connections > connections


def test_tls_is_verified_with_botocore_s_ca_bundle(dynamodb_local: DynamoDBLocal, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    authority, context = tls_pair(["localhost"])
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("AWS_CA_BUNDLE", str(bundle))
    with TlsFront(("127.0.0.1", _port(dynamodb_local.endpoint)), context) as front:
        for _ in _front_model(dynamodb_local, f"https://localhost:{front.port}"):
            list(FastLog.query(KEY, limit=1))
            before = wire.sent["fast"]
            assert list(range(40)) == [int(item.at) for item in FastLog.query(KEY)]
            assert wire.sent["fast"] - before == 4


def test_tls_refuses_a_certificate_the_bundle_does_not_trust(dynamodb_local: DynamoDBLocal, tmp_path: Path) -> None:
    """The fast path's connections verify the server's certificate against the bundle botocore
    would use: one of another authority is refused (the request then goes to botocore, which
    refuses it too)."""
    trusted, _ = tls_pair(["localhost"])
    bundle = tmp_path / "ca.pem"
    trusted.cert_pem.write_to_path(str(bundle))
    _other, context = tls_pair(["localhost"])
    with TlsFront(("127.0.0.1", _port(dynamodb_local.endpoint)), context) as front:
        url = f"https://localhost:{front.port}/"
        endpoint = wire._Endpoint(url=url, host=f"localhost:{front.port}", path="/", secure=True,
                                  address=("localhost", front.port), region=None, service=None, user_agent=None)
        with pytest.raises(wire._Broken):
            wire._Pool(endpoint, tls_context(str(bundle)), 1).open(5.0)
        trusting = tmp_path / "other.pem"
        _other_authority = _other
        _other_authority.cert_pem.write_to_path(str(trusting))
        connection = wire._Pool(endpoint, tls_context(str(trusting)), 1).open(5.0)  # its own CA: verified
        connection.close()


# -- on an event loop: aquery's shard requests on the loop's own connections -----------------------


async def _apages(query: Callable[..., Any], **kwargs: Any) -> list[tuple[list[tuple[int, Any]], Any]]:
    """:func:`pages` of an async query."""
    return [([(int(item.at), item.note) for item in items], result.last_evaluated_key)
            for items, result in await apage_by_page(query, **kwargs)]


ASYNC_READS: dict[str, Callable[[], Any]] = {
    "limit": lambda: _apages(FastLog.aquery, hash_key=KEY, limit=7),
    "backwards": lambda: _apages(FastLog.aquery, hash_key=KEY, limit=9, scan_index_forward=False),
    "range and filter": lambda: _apages(FastLog.aquery, hash_key=KEY, range_key_condition=FastLog.at.between(10, 40),
                                        filter_condition=FastLog.note.exists(), limit=4),
    "index": lambda: _apages(FastLog.by_day.aquery, hash_key="d", limit=8),
}


class _Sends:
    """Counts the requests the event loop's HTTP layer sent as botocore requests (``send``) and
    as requests built below botocore (``exchange``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.botocore = self.below = 0
        send, exchange = async_http.send, async_http.exchange

        async def counted_send(*args: Any, **kwargs: Any) -> Any:
            self.botocore += 1
            return await send(*args, **kwargs)

        async def counted_exchange(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("request") is None:  # not on behalf of send
                self.below += 1
            return await exchange(*args, **kwargs)

        monkeypatch.setattr(async_http, "send", counted_send)
        monkeypatch.setattr(async_http, "exchange", counted_exchange)


@pytest.mark.parametrize("read", sorted(ASYNC_READS))
def test_an_aquery_sends_its_shard_requests_on_the_loop_below_botocore_and_gives_what_query_gives(
    log: None, read: str, loop: Loop, monkeypatch: pytest.MonkeyPatch,
) -> None:
    list(FastLog.query(KEY, limit=1))  # the endpoint is learned from a first request through botocore
    sends = _Sends(monkeypatch)
    found = loop.run(ASYNC_READS[read]())
    assert sends.below > 0
    assert sends.botocore == 0  # not one built as botocore's request and sent as one
    sync = READS[read]()
    assert found == sync
    monkeypatch.setenv("PYNAMODB_SHARDING_FAST_QUERIES", "0")
    below = sends.below
    assert loop.run(ASYNC_READS[read]()) == sync
    assert sends.below == below  # without the fast path: botocore's requests, on the loop too
    assert sends.botocore > 0


def test_an_aquery_with_a_before_send_handler_sends_botocore_s_request_to_it(
    log: None, loop: Loop, monkeypatch: pytest.MonkeyPatch,
) -> None:
    list(FastLog.query(KEY, limit=1))
    client = FastLog._get_connection().connection.client
    seen: list[str] = []

    def answers(request: Any, **_: Any) -> None:  # unmarked: it could answer instead of DynamoDB
        seen.append(request.url)

    sends = _Sends(monkeypatch)
    client.meta.events.register("before-send.dynamodb.Query", answers)
    try:
        with record_requests(FastLog) as sent:
            found = loop.run(_apages(FastLog.aquery, hash_key=KEY, page_size=10))
    finally:
        client.meta.events.unregister("before-send.dynamodb.Query", answers)
    assert [at for page in found for at, _ in page[0]] == list(range(60))
    assert sent.requests["Query"] == len(seen) >= 60 // 10
    assert sends.below == 0


def test_a_throttle_and_a_lost_reply_of_an_aquery_are_sent_again_through_botocore(
    dynamodb_local: DynamoDBLocal, loop: Loop,
) -> None:
    with HttpFront(("127.0.0.1", _port(dynamodb_local.endpoint))) as front:
        for _ in _front_model(dynamodb_local, front.url):
            list(FastLog.query(KEY, limit=1))  # learned

            async def read() -> list[int]:
                return [int(item.at) async for item in FastLog.aquery(KEY)]

            assert list(range(40)) == loop.run(read())
            front.script[:] = ["throttle", "drop"]
            queries = front.queries
            replies = wire.sent["reply"]
            assert list(range(40)) == loop.run(read())
            # The throttled request is sent again through botocore on the loop (its retries and
            # errors). The front drops the next Query it gets: another shard's (sent again through
            # botocore) or the throttled one's resend (which botocore retries), as the tasks meet
            # it. Either way each fault costs one more request.
            assert wire.sent["reply"] - replies in (1, 2)
            assert front.queries - queries == 4 + 2


def test_pynamodb_s_send_signals_are_sent_for_every_shard_request(log: None) -> None:
    """PynamoDB's ``pre_dynamodb_send``/``post_dynamodb_send`` (blinker) fire around each request
    it sends; a receiver gets them for each shard request of a merged query too, fast path or not."""
    from pynamodb.signals import post_dynamodb_send, pre_dynamodb_send

    list(FastLog.query(KEY, limit=1))
    before = wire.sent["fast"]
    seen: list[tuple[str, str, str]] = []

    def pre(_sender: Any, operation_name: str, table_name: str, req_uuid: Any) -> None:
        seen.append(("pre", operation_name, str(req_uuid)))

    def post(_sender: Any, operation_name: str, table_name: str, req_uuid: Any) -> None:
        seen.append(("post", operation_name, str(req_uuid)))

    pre_dynamodb_send.connect(pre)
    post_dynamodb_send.connect(post)
    try:
        with record_requests(FastLog) as sent:
            assert 60 == len(list(FastLog.query(KEY, page_size=10)))
    finally:
        pre_dynamodb_send.disconnect(pre)
        post_dynamodb_send.disconnect(post)
    assert wire.sent["fast"] > before  # the fast path sent them
    assert sent.requests["Query"] == len([event for event in seen if event[0] == "pre"]) >= 60 // 10
    # each request's pair shares its id, as PynamoDB's do
    assert sorted(uuid for kind, _, uuid in seen if kind == "pre") == sorted(uuid for kind, _, uuid in seen
                                                                             if kind == "post")
    assert {name for _, name, _ in seen} == {"Query"}


def test_an_aquery_with_an_observer_keeps_the_loop_s_fast_path_and_the_observer_sees_each_request(
    log: None, loop: Loop, monkeypatch: pytest.MonkeyPatch,
) -> None:
    list(FastLog.query(KEY, limit=1))
    sends = _Sends(monkeypatch)
    with record_requests(FastLog) as sent:  # an observer (observes_only): emitted to, on the fast path
        found = loop.run(_apages(FastLog.aquery, hash_key=KEY, page_size=10))
    assert [at for page in found for at, _ in page[0]] == list(range(60))
    assert sent.requests["Query"] == sends.below >= 60 // 10
    assert sends.botocore == 0
