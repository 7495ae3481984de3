"""The async transport through an HTTP proxy (``pynamodb_sharding._async_http.Proxy``), against a
real proxy and scripted servers on 127.0.0.1.

The endpoints are named ``dynamodb.test``, a name only the proxy resolves: a request sent
around the proxy would fail to connect instead of passing. As urllib3 does on the sync path: an
``https://`` endpoint is reached through a ``CONNECT`` tunnel, TLS to the endpoint inside it; an
``http://`` one by sending the request, with its absolute URL, to the proxy; the credentials of
the proxy's URL go as ``Proxy-Authorization``; a proxy that is not reached or refuses is
botocore's ``ProxyConnectionError``.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from botocore.exceptions import HTTPClientError, ProxyConnectionError

from pynamodb_sharding import _async_http as http
from tests.proxy import HttpProxy, tls_pair
from tests.unit.test_async_http import Server, answer, prepared, run

NAME = "dynamodb.test"


def _port(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


def test_an_http_endpoint_is_sent_to_the_proxy_with_its_absolute_url_and_the_proxys_credentials() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(answer)
        port = _port(await server.start())
        with HttpProxy({NAME: ("127.0.0.1", port)}, credentials="alice:p@ss") as proxy:
            through = http.Proxy(proxy.url.replace("://", "://alice:p%40ss@"))
            url = f"http://{NAME}:{port}/"
            for _ in range(2):
                response = await http.send(pool, prepared(url), 10, 10, True, through)
                assert 200 == response.status_code
            assert [("POST", url), ("POST", url)] == proxy.seen
            assert "Basic YWxpY2U6cEBzcw==" == proxy.headers[0]["Proxy-Authorization"]
        assert [url, url] == [request["target"] for request in server.requests]
        assert 1 == server.accepted  # one connection to the proxy, kept alive
        await server.stop()

    run(test)


def test_an_https_endpoint_is_reached_through_one_connect_tunnel(tmp_path: Path) -> None:
    authority, context = tls_pair([NAME])
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))

    async def test(pool: http.Pool) -> None:
        server = Server(answer, context)
        port = _port(await server.start())
        with HttpProxy({NAME: ("127.0.0.1", port)}) as proxy:
            through = http.Proxy(proxy.url)
            for _ in range(3):
                response = await http.send(pool, prepared(f"https://{NAME}:{port}/x"), 10, 10, str(bundle), through)
                assert b'{"Items": []}' == response.content
            assert [("CONNECT", f"{NAME}:{port}")] == proxy.seen  # the proxy never sees the requests
        assert ["/x"] * 3 == [request["target"] for request in server.requests]
        assert 1 == server.accepted
        await server.stop()

    run(test)


def test_an_https_proxy_is_reached_over_tls_and_tunnels_tls_inside(tmp_path: Path) -> None:
    """The proxy's certificate checked against ``proxies_config``'s ``proxy_ca_bundle`` (another
    authority than the endpoint's, which botocore's ``verify`` names)."""
    authority, endpoint_context = tls_pair([NAME])
    proxy_authority, proxy_context = tls_pair(["127.0.0.1"])
    bundle, proxy_bundle = tmp_path / "ca.pem", tmp_path / "proxy-ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    proxy_authority.cert_pem.write_to_path(str(proxy_bundle))

    async def test(pool: http.Pool) -> None:
        server = Server(answer, endpoint_context)
        port = _port(await server.start())
        with HttpProxy({NAME: ("127.0.0.1", port)}, context=proxy_context) as proxy:
            assert proxy.url.startswith("https://")
            through = http.Proxy(proxy.url, None, {"proxy_ca_bundle": str(proxy_bundle)})
            response = await http.send(pool, prepared(f"https://{NAME}:{port}/"), 10, 10, str(bundle), through)
            assert 200 == response.status_code
            with pytest.raises(ProxyConnectionError):  # without it, the proxy's certificate is not trusted
                await http.send(pool, prepared(f"https://{NAME}:{port}/"), 10, 10, str(bundle), http.Proxy(proxy.url))
            assert [("CONNECT", f"{NAME}:{port}")] == proxy.seen
        await server.stop()

    run(test)


def test_a_proxy_that_refuses_the_tunnel_is_proxy_connection_error_with_its_url_masked() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(answer)
        port = _port(await server.start())
        with HttpProxy({NAME: ("127.0.0.1", port)}, credentials="alice:secret") as proxy:
            wrong = http.Proxy(proxy.url.replace("://", "://alice:wrong@"))
            with pytest.raises(ProxyConnectionError) as refused:
                await http.send(pool, prepared(f"https://{NAME}:{port}/"), 10, 10, True, wrong)
            assert "wrong" not in str(refused.value)
            assert "***:***@127.0.0.1" in str(refused.value)
            assert "Tunnel connection failed: 407 Proxy Authentication Required" == str(refused.value.kwargs["error"])
        assert [] == server.requests
        assert 0 == pool.open
        await server.stop()

    run(test)


def test_a_proxy_not_listening_is_proxy_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]

    async def test(pool: http.Pool) -> None:
        for url in (f"http://{NAME}/", f"https://{NAME}/"):
            with pytest.raises(ProxyConnectionError, match=f"127.0.0.1:{closed}"):
                await http.send(pool, prepared(url), 10, 10, True, http.Proxy(f"http://127.0.0.1:{closed}"))
        assert 0 == pool.open

    run(test)


def test_a_proxy_of_another_kind_is_refused_by_name() -> None:
    """As botocore's session refuses it (urllib3's error in an ``HTTPClientError``), naming it."""
    named = re.escape("'socks5://127.0.0.1:1080': the async methods reach a proxy over")
    with pytest.raises(HTTPClientError, match=named):
        http.Proxy("socks5://127.0.0.1:1080")
