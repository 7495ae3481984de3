"""The async methods go through the proxy botocore's own session uses (DynamoDB Local).

PynamoDB's clients take their proxy from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``,
``NO_PROXY``, read by botocore when it makes a client). Here DynamoDB Local is named
``dynamodb-local.test``, a name only the test's proxy resolves: every request of the sync
methods (PynamoDB, the reference) and of the async ones must go through that proxy to arrive at
all. ``https://``: a TLS front before DynamoDB Local, reached through a ``CONNECT`` tunnel, its
certificate trusted through ``AWS_CA_BUNDLE``. ``NO_PROXY`` naming the endpoint: neither goes
through the proxy.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import attrs
import pytest
from pynamodb.attributes import NumberAttribute, UnicodeAttribute

from pynamodb_sharding import HashedShards, ShardedModel, Sharding
from pynamodb_sharding.testing import bound_models
from pynamodb_sharding.testing.local import DynamoDBLocal
from tests.async_loop import Loop
from tests.proxy import HttpProxy, TlsFront, tls_pair

NAME = "dynamodb-local.test"
KEY = "/proxied"


class ProxiedLog(ShardedModel):
    class Meta:
        table_name = "proxied_log"

    path = UnicodeAttribute(hash_key=True)
    at = NumberAttribute(range_key=True)
    shards = Sharding(HashedShards(4))


@pytest.fixture
def proxy_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
                 "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _port(endpoint: str) -> int:
    port = urllib.parse.urlsplit(endpoint).port
    assert port is not None
    return port


def _both_ways(loop: Loop) -> tuple[list[int], int, list[int]]:
    """Write through the sync and the async methods; read back both ways."""
    ProxiedLog(KEY, 1).save()

    async def go() -> tuple[list[int], int]:
        await ProxiedLog(KEY, 2).asave()
        return [int(item.at) async for item in ProxiedLog.aquery(KEY)], await ProxiedLog.acount(KEY)

    read, count = loop.run(go())
    return read, count, [int(item.at) for item in ProxiedLog.query(KEY)]


def test_http_proxy_from_the_environment(dynamodb_local: DynamoDBLocal, loop: Loop,
                                         proxy_environment: pytest.MonkeyPatch) -> None:
    port = _port(dynamodb_local.endpoint)
    with HttpProxy({NAME: ("127.0.0.1", port)}) as proxy:
        proxy_environment.setenv("HTTP_PROXY", proxy.url)
        server = attrs.evolve(dynamodb_local, endpoint=f"http://{NAME}:{port}", pid=None)
        with bound_models(server, ProxiedLog):
            before = len(proxy.targets("POST"))
            assert ([1, 2], 2, [1, 2]) == _both_ways(loop)
        # The sync and the async requests, each sent to the proxy with its absolute URL: a put
        # and a query of each of the 4 shards each way, and the async count's 4 queries.
        sent = proxy.targets("POST")[before:]
        assert len(sent) >= 2 + 4 + 4 + 4
        assert {f"http://{NAME}:{port}/"} == set(sent)


def test_https_proxy_tunnels_from_the_environment(dynamodb_local: DynamoDBLocal, loop: Loop, tmp_path: Path,
                                                  proxy_environment: pytest.MonkeyPatch) -> None:
    authority, context = tls_pair([NAME])
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    with TlsFront(("127.0.0.1", _port(dynamodb_local.endpoint)), context) as front, \
            HttpProxy({NAME: ("127.0.0.1", front.port)}) as proxy:
        proxy_environment.setenv("HTTPS_PROXY", proxy.url)
        proxy_environment.setenv("AWS_CA_BUNDLE", str(bundle))
        server = attrs.evolve(dynamodb_local, endpoint=f"https://{NAME}:{front.port}", pid=None)
        with bound_models(server, ProxiedLog):
            tunnels = len(proxy.targets("CONNECT"))
            assert ([1, 2], 2, [1, 2]) == _both_ways(loop)
        # The async requests opened tunnels of their own (the loop's connections).
        assert len(proxy.targets("CONNECT")) > tunnels
        assert {f"{NAME}:{front.port}"} == set(proxy.targets("CONNECT"))
        assert [] == proxy.targets("POST")  # inside the tunnels, unseen


def test_no_proxy_naming_the_endpoint_sends_around_the_proxy_both_ways(
        dynamodb_local: DynamoDBLocal, loop: Loop, proxy_environment: pytest.MonkeyPatch) -> None:
    with HttpProxy() as proxy:
        proxy_environment.setenv("HTTP_PROXY", proxy.url)
        proxy_environment.setenv("NO_PROXY", "127.0.0.1")
        with bound_models(dynamodb_local, ProxiedLog):
            assert ([1, 2], 2, [1, 2]) == _both_ways(loop)
        assert [] == proxy.seen
