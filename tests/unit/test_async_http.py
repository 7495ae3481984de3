"""The async transport's HTTP/1.1 (``pynamodb_sharding._async_http``) against scripted servers
on 127.0.0.1: what goes on the wire, which connections are kept, and which of botocore's
errors each failure becomes (the ones urllib3's session raises for it on the sync path).

End to end, every async test on DynamoDB Local goes through this module too.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trustme
from botocore.awsrequest import AWSRequest
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
    SSLError,
)

from pynamodb_sharding import _async_http as http

Reply = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict[str, Any]], Awaitable[bool]]


def ok(body: bytes = b'{"Items": []}', *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/x-amz-json-1.0", f"Content-Length: {len(body)}",
            "x-amzn-RequestId: R1", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Server:
    """A scripted HTTP server: ``reply(reader, writer, request)`` answers each request and says
    whether the connection stays open. Counts connections accepted and open at once."""

    def __init__(self, reply: Reply, context: ssl.SSLContext | None = None) -> None:
        self.reply = reply
        self.context = context
        self.requests: list[dict[str, Any]] = []
        self.accepted = 0
        self.open = 0
        self.most_open = 0
        self.closed = asyncio.Event()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context)
        port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if self.context else 'http'}://127.0.0.1:{port}/"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ")
                headers = [tuple(line.split(": ", 1)) for line in lines[1:] if line]
                length = sum(int(value) for name, value in headers if name.lower() == "content-length")
                body = await reader.readexactly(length)
                request = {"method": method, "target": target, "headers": headers, "body": body}
                self.requests.append(request)
                if not await self.reply(reader, writer, request):
                    return
        finally:
            self.open -= 1
            writer.close()
            self.closed.set()

    async def stop(self) -> None:
        self.server.close()


def prepared(url: str, body: bytes = b'{"TableName": "t"}', **headers: str) -> Any:
    request = AWSRequest(method="POST", url=url, data=body, headers={
        "X-Amz-Target": "DynamoDB_20120810.Query", "Content-Type": "application/x-amz-json-1.0", **headers})
    return request.prepare()


async def send(pool: http.Pool, url: str, *, connect: float | None = 2, read: float | None = 2,
               verify: Any = True, **headers: str) -> Any:
    return await http.send(pool, prepared(url, **headers), connect, read, verify)


def run(test: Callable[[http.Pool], Awaitable[None]], limit: int = 8) -> None:
    async def main() -> None:
        pool = http.Pool(asyncio.get_running_loop(), limit)
        try:
            await test(pool)
        finally:
            pool.close()

    asyncio.run(main())


async def until(condition: Callable[[], bool]) -> None:
    """Wait (on the loop, at most 5 s) until ``condition()`` holds."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition did not come true in 5 s")


async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
    writer.write(ok())
    await writer.drain()
    return True


def test_the_request_goes_as_botocore_prepared_it_and_the_reply_comes_back_as_botocores() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(answer)
        url = await server.start()
        response = await send(pool, url + "path?x=1")
        assert response.status_code == 200
        assert response.headers["x-amzn-requestid"] == "R1"  # botocore's case-insensitive headers
        assert response.content == b'{"Items": []}'
        [request] = server.requests
        assert request["method"] == "POST"
        assert request["target"] == "/path?x=1"
        names = [name.lower() for name, _ in request["headers"]]
        assert names.count("content-length") == 1
        assert names.count("host") == 1
        assert dict(request["headers"])["Host"] == url.split("/")[2]  # 127.0.0.1:port, as urllib3
        assert dict(request["headers"])["X-Amz-Target"] == "DynamoDB_20120810.Query"
        assert request["body"] == b'{"TableName": "t"}'
        await server.stop()

    run(test)


def test_a_connection_is_used_again_for_the_next_request() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(answer)
        url = await server.start()
        for _ in range(5):
            assert (await send(pool, url)).status_code == 200
        assert server.accepted == 1
        assert pool.open == 1
        await server.stop()

    run(test)


def test_a_reply_that_closes_the_connection_is_not_followed_by_another_request_on_it() -> None:
    async def closing(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        writer.write(ok(b"{}", "Connection: close"))
        await writer.drain()
        return False

    async def test(pool: http.Pool) -> None:
        server = Server(closing)
        url = await server.start()
        for _ in range(3):
            assert (await send(pool, url)).content == b"{}"
        assert server.accepted == 3
        await server.stop()

    run(test)


def test_an_idle_connection_the_server_closed_is_dropped_and_the_next_request_opens_one() -> None:
    async def once(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        writer.write(ok())  # keep-alive by HTTP/1.1's default, then closed anyway (an idle timeout)
        await writer.drain()
        return False

    async def test(pool: http.Pool) -> None:
        server = Server(once)
        url = await server.start()
        assert (await send(pool, url)).status_code == 200
        await until(lambda: pool.open == 0)  # the close is seen while idle
        assert (await send(pool, url)).status_code == 200
        assert server.accepted == 2
        await server.stop()

    run(test)


def test_an_idle_connection_older_than_the_keep_alive_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "KEEP_ALIVE", 0.0)

    async def test(pool: http.Pool) -> None:
        server = Server(answer)
        url = await server.start()
        for _ in range(3):
            assert (await send(pool, url)).status_code == 200
        assert server.accepted == 3
        await until(lambda: server.open == 1)  # the old ones were closed
        await server.stop()

    run(test)


def test_a_chunked_reply_is_read_whole() -> None:
    async def chunked(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (b'{"Items"', b": [], ", b'"Count": 0}'):
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def test(pool: http.Pool) -> None:
        server = Server(chunked)
        url = await server.start()
        assert (await send(pool, url)).content == b'{"Items": [], "Count": 0}'
        assert (await send(pool, url)).content == b'{"Items": [], "Count": 0}'
        assert server.accepted == 1
        await server.stop()

    run(test)


@pytest.mark.parametrize(("sent", "stays_open"), [
    pytest.param(ok()[:40], False, id="closed-in-the-middle-of-a-reply"),
    pytest.param(b"SSH-2.0-OpenSSH\r\n\r\n", True, id="not-http"),
])
def test_a_reply_cut_short_or_not_http_is_connection_closed_error(sent: bytes, stays_open: bool) -> None:
    async def reply(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        writer.write(sent)
        await writer.drain()
        return stays_open

    async def test(pool: http.Pool) -> None:
        server = Server(reply)
        url = await server.start()
        with pytest.raises(ConnectionClosedError):
            await send(pool, url)
        assert pool.open == 0
        await server.stop()

    run(test)


async def silent(reader: asyncio.StreamReader, _: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
    await reader.read()  # answers nothing until the client goes
    return False


def test_a_server_that_does_not_answer_is_a_read_timeout_and_the_connection_is_closed() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(silent)
        url = await server.start()
        started = asyncio.get_running_loop().time()
        with pytest.raises(ReadTimeoutError):
            await send(pool, url, read=0.2)
        assert 0.15 <= asyncio.get_running_loop().time() - started < 2
        assert pool.open == 0
        await asyncio.wait_for(server.closed.wait(), 5)  # the server sees it go
        await server.stop()

    run(test)


def test_the_read_timeout_is_between_bytes_as_urllib3s_not_for_the_whole_reply() -> None:
    async def trickle(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        reply = ok(b'{"Items": [], "Count": 0}')
        for start in range(0, len(reply), 10):
            writer.write(reply[start:start + 10])
            await writer.drain()
            # About 16 parts over 1.6 s, each 0.1 s after the last: the whole reply takes twice
            # the read timeout, and a stall of this process up to 0.7 s still fits between two.
            await asyncio.sleep(0.1)
        return True

    async def test(pool: http.Pool) -> None:
        server = Server(trickle)
        url = await server.start()
        started = asyncio.get_running_loop().time()
        assert (await send(pool, url, read=0.8)).content == b'{"Items": [], "Count": 0}'
        assert asyncio.get_running_loop().time() - started > 0.8  # longer than the timeout in all
        await server.stop()

    run(test)


def test_a_closed_port_is_endpoint_connection_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]

    async def test(pool: http.Pool) -> None:
        with pytest.raises(EndpointConnectionError):
            await send(pool, f"http://127.0.0.1:{port}/")
        assert pool.open == 0

    run(test)


def test_a_connection_that_is_not_made_in_time_is_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection that never completes (as to a host that drops the SYN): botocore's
    ``ConnectTimeoutError``, which says the request was not sent."""

    async def test(pool: http.Pool) -> None:
        async def never(*_: Any, **__: Any) -> Any:
            await asyncio.Event().wait()

        monkeypatch.setattr(pool.loop, "create_connection", never)
        with pytest.raises(ConnectTimeoutError):
            await send(pool, "http://127.0.0.1:9/", connect=0.1)
        assert pool.open == 0

    run(test)


def test_a_cancelled_request_closes_its_connection_and_frees_its_place() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(silent)
        url = await server.start()
        task = asyncio.ensure_future(send(pool, url))
        await until(lambda: len(server.requests) == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert pool.open == 0
        await asyncio.wait_for(server.closed.wait(), 5)
        await server.stop()

    run(test)


def test_no_more_connections_than_the_limit_are_open_at_once() -> None:
    async def slow(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        await asyncio.sleep(0.05)
        writer.write(ok())
        await writer.drain()
        return True

    async def test(pool: http.Pool) -> None:
        server = Server(slow)
        url = await server.start()
        replies = await asyncio.gather(*(send(pool, url) for _ in range(12)))
        assert [reply.status_code for reply in replies] == [200] * 12
        assert server.most_open == 3
        assert server.accepted == 3
        await server.stop()

    run(test, limit=3)


def test_a_request_over_the_limit_closes_an_idle_connection_of_another_host() -> None:
    async def test(pool: http.Pool) -> None:
        first, second = Server(answer), Server(answer)
        url_a, url_b = await first.start(), await second.start()
        assert (await send(pool, url_a)).status_code == 200
        assert (await send(pool, url_b)).status_code == 200  # the limit is 1: url_a's is closed
        assert pool.open == 1
        await asyncio.wait_for(first.closed.wait(), 5)
        await first.stop()
        await second.stop()

    run(test, limit=1)


def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    async def test(pool: http.Pool) -> None:
        server = Server(answer)
        url = await server.start()
        with pytest.raises(ValueError, match="Invalid header value"):
            await send(pool, url, **{"X-Injected": "a\r\nX-Other: b"})
        assert server.accepted == 0
        assert pool.open == 0
        await server.stop()

    run(test)


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


def tls_server(authority: trustme.CA) -> Server:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    return Server(answer, context)


def test_tls_with_botocores_verify_setting(authority: trustme.CA, tmp_path: Path) -> None:
    """``verify``: a CA bundle's path trusts the server; ``True`` (botocore's bundle) does not
    know its authority (botocore's ``SSLError``); ``False`` does not check."""
    bundle = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))

    async def test(pool: http.Pool) -> None:
        server = tls_server(authority)
        url = await server.start()
        assert (await send(pool, url, verify=str(bundle))).status_code == 200
        assert (await send(pool, url, verify=False)).status_code == 200
        with pytest.raises(SSLError):
            await send(pool, url, verify=True)
        assert pool.open == 2  # the two that verified, idle; the refused one is gone
        await server.stop()

    run(test)


def test_only_http_and_https_endpoints() -> None:
    async def test(pool: http.Pool) -> None:
        with pytest.raises(ValueError, match="http:// and https://"):
            await send(pool, "ftp://127.0.0.1/")

    run(test)


def test_a_1xx_reply_is_skipped_and_the_final_reply_is_its_requests_not_the_next_ones() -> None:
    """``100 Continue`` (or another 1xx) comes before the reply, as http.client skips it: the
    request's reply is the final one, and the next request on the connection gets its own."""
    go = asyncio.Event()
    continued = asyncio.Event()

    async def informational(_: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> bool:
        if request["body"] == b'{"TableName": "first"}':
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
            continued.set()
            await go.wait()  # the final reply is held until the client has read the 100
            writer.write(ok(b'{"first": 1}'))
        else:
            writer.write(ok(b'{"second": 2}'))
        await writer.drain()
        return True

    async def test(pool: http.Pool) -> None:
        server = Server(informational)
        url = await server.start()
        first = asyncio.ensure_future(http.send(pool, prepared(url, b'{"TableName": "first"}'), 2, 2, True))
        await continued.wait()
        go.set()
        reply = await first
        assert (reply.status_code, reply.content) == (200, b'{"first": 1}')
        reply = await http.send(pool, prepared(url, b'{"TableName": "second"}'), 2, 2, True)
        assert (reply.status_code, reply.content) == (200, b'{"second": 2}')
        await server.stop()

    run(test)


def test_bytes_after_the_reply_in_the_same_read_never_become_part_of_the_next_reply() -> None:
    """What follows a whole reply is nobody's: the connection is not used again (the bytes
    must not be taken as the start of the next request's reply)."""

    async def extra(_: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> bool:
        if request["body"] == b'{"TableName": "first"}':  # a reply, and the start of another, at once
            writer.write(ok(b'{"first": 1}') + b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{")
        else:
            writer.write(ok(b'{"second": 2}'))
        await writer.drain()
        return True

    async def test(pool: http.Pool) -> None:
        server = Server(extra)
        url = await server.start()
        reply = await http.send(pool, prepared(url, b'{"TableName": "first"}'), 2, 2, True)
        assert reply.content == b'{"first": 1}'
        reply = await http.send(pool, prepared(url, b'{"TableName": "second"}'), 2, 2, True)
        assert (reply.status_code, reply.content) == (200, b'{"second": 2}')
        assert pool.open == 1
        await server.stop()

    run(test)


def test_a_reply_without_length_is_read_until_the_server_closes_the_connection() -> None:
    """No ``Content-Length`` nor chunks: the body ends with the connection (as http.client
    reads it), a reply, not ``ConnectionClosedError``; the connection is not used again."""

    async def until_close(_: asyncio.StreamReader, writer: asyncio.StreamWriter, __: dict[str, Any]) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\n\r\n")
        await writer.drain()
        writer.write(b'{"Items": [], ')
        await writer.drain()
        writer.write(b'"Count": 0}')
        await writer.drain()
        return False

    async def test(pool: http.Pool) -> None:
        server = Server(until_close)
        url = await server.start()
        for _ in range(2):
            reply = await send(pool, url)
            assert (reply.status_code, reply.content) == (200, b'{"Items": [], "Count": 0}')
        assert server.accepted == 2
        await until(lambda: pool.open == 0)
        await server.stop()

    run(test)


def test_a_reply_to_head_has_no_body_even_with_a_content_length() -> None:
    async def head(_: asyncio.StreamReader, writer: asyncio.StreamWriter, request: dict[str, Any]) -> bool:
        writer.write(ok(b'{"Items": []}')[:-len(b'{"Items": []}')] if request["method"] == "HEAD" else ok())
        await writer.drain()
        return True

    async def test(pool: http.Pool) -> None:
        server = Server(head)
        url = await server.start()
        request = AWSRequest(method="HEAD", url=url).prepare()
        reply = await http.send(pool, request, 2, 0.5, True)
        assert (reply.status_code, reply.content) == (200, b"")
        assert reply.headers["content-length"] == "13"
        assert (await send(pool, url)).content == b'{"Items": []}'
        await server.stop()

    run(test)


def test_an_idle_connection_whose_close_has_come_but_was_not_read_yet_is_not_used() -> None:
    """The server closed the connection right after its reply, and its close is on the socket
    when the next request starts, before the loop has read it: the request goes on a new
    connection (urllib3 checks the socket the same way), not on the closed one to fail with
    ``ConnectionClosedError``. The server runs in a thread, so that it can close while the
    loop waits (the loop is held until it has)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    asked, go, gone = threading.Event(), threading.Event(), threading.Event()
    accepted: list[int] = []

    def read_request(connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length"))
        while len(body) < length:
            body += connection.recv(65536)

    def serve() -> None:
        with listener:
            for number in range(2):
                connection, _ = listener.accept()
                accepted.append(number)
                with connection:
                    read_request(connection)
                    if number == 0:
                        asked.set()
                        go.wait(5)
                    connection.sendall(ok())  # keep-alive by HTTP/1.1's default, closed anyway
                gone.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    async def test(pool: http.Pool) -> None:
        url = f"http://127.0.0.1:{port}/"
        first = asyncio.ensure_future(send(pool, url))
        await until(asked.is_set)
        go.set()
        assert gone.wait(5)  # the loop held: the reply and the close are both on the socket
        assert (await first).status_code == 200
        assert (await send(pool, url)).status_code == 200
        assert accepted == [0, 1]

    run(test)
    thread.join(5)
