"""A small HTTP proxy on 127.0.0.1 for the proxy tests, in a thread of its own (its own event loop).

It does what corporate proxies do for botocore: opens ``CONNECT`` tunnels (for ``https://``
endpoints) and forwards requests sent to it with their absolute URL (``http://`` endpoints).
``hosts`` maps host names that only the proxy can resolve to ``(address, port)``: an endpoint
named by one of them is reachable through the proxy only, so a request that went around the
proxy fails instead of passing unnoticed. With ``credentials`` (``"user:password"``) a request
without that ``Proxy-Authorization`` is answered ``407``. With ``context`` the proxy itself is
reached over TLS (an ``https://`` proxy).
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HttpProxy", "TlsFront", "tls_pair"]

_REQUEST_LINE = re.compile(rb"(?:^|\r\n)([A-Z]+) (\S+) HTTP/1\.1\r\n")


class HttpProxy:
    """``with HttpProxy(...) as proxy:`` runs it; ``proxy.url`` is its URL, ``proxy.seen`` the
    ``(method, target)`` of every request it was sent (each ``CONNECT``, each forwarded request)
    and ``proxy.headers`` the headers of each connection's first request."""

    def __init__(self, hosts: Mapping[str, tuple[str, int]] | None = None, *, credentials: str | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        self.hosts = dict(hosts or {})
        self.credentials = credentials
        self.context = context
        self.seen: list[tuple[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-http-proxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        scheme = "https" if self.context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def __enter__(self) -> HttpProxy:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.context), self._loop)
        self._server = started.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def _record(self, method: str, target: str) -> None:
        with self._lock:
            self.seen.append((method, target))

    def _where(self, host: str, port: int) -> tuple[str, int]:
        return self.hosts.get(host, (host, port))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = dict(entry.split(": ", 1) for entry in lines if entry)
        self._record(method, target)
        with self._lock:
            self.headers.append(headers)
        if self.credentials is not None:
            expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
            if headers.get("Proxy-Authorization") != expected:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n"
                             b"Content-Length: 0\r\nConnection: close\r\n\r\n")
                await writer.drain()
                writer.close()
                return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            address = self._where(host.strip("[]"), int(port))
            first = b""
        else:
            parts = urlsplit(target)
            assert parts.hostname is not None, target  # a proxy is sent absolute URLs
            address = self._where(parts.hostname, parts.port or 80)
            first = head
        try:
            up_reader, up_writer = await asyncio.open_connection(*address)
        except OSError:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(first)
        await asyncio.gather(self._pipe(reader, up_writer, forwarded=method != "CONNECT"),
                             self._pipe(up_reader, writer, forwarded=False), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, forwarded: bool) -> None:
        try:
            while data := await reader.read(65536):
                if forwarded:  # the next requests a client sends on a forwarded connection
                    for match in _REQUEST_LINE.finditer(data):
                        self._record(match[1].decode(), match[2].decode())
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def targets(self, method: str) -> list[str]:
        with self._lock:
            return [target for seen, target in self.seen if seen == method]

    def __repr__(self) -> str:
        return f"HttpProxy({self.url}, seen={self.seen!r})"


class TlsFront(HttpProxy):
    """A TLS server on 127.0.0.1 that passes each connection's bytes on to ``upstream``: an
    ``https://`` endpoint in front of DynamoDB Local (which speaks plain HTTP only)."""

    def __init__(self, upstream: tuple[str, int], context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self.upstream = upstream

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer, forwarded=False),
                             self._pipe(up_reader, writer, forwarded=False), return_exceptions=True)


def tls_pair(names: list[str]) -> tuple[Any, ssl.SSLContext]:
    """A test certificate authority (trustme) and a server context with its certificate for ``names``."""
    import trustme

    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(*names).configure_cert(context)
    return authority, context
