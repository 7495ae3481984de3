"""HTTP/1.1 for the async transport: botocore's prepared requests sent over keep-alive
connections of the event loop, their replies read by httptools.

botocore has already done everything above the bytes: the URL, the headers (``Content-Length``
included), the signature, the body. What is left is to write those bytes on a connection of
the loop, read the reply, and hand botocore an ``AWSResponse`` as its own urllib3 session would,
raising botocore's errors where urllib3's session raises them. httptools (the bindings of
Node's llhttp that uvicorn parses with) reads the reply; the connections are asyncio's.

A general HTTP client (aiohttp, which this module replaced) did about a fifth of the loop's
work per request in ``benchmarks/bench_async.py`` on what botocore has already done or never
asks for: headers merged, cookies, redirects, tracing, URL checks.

Proxies are botocore's (``Config(proxies=..., proxies_config=...)``, else ``HTTP_PROXY``,
``HTTPS_PROXY`` and ``NO_PROXY`` as botocore read them for the client's endpoint), used as
urllib3 uses them: an ``https://`` endpoint through a ``CONNECT`` tunnel (TLS to the endpoint
inside it), an ``http://`` one by sending the request, with its absolute URL, to the proxy; the
proxy's credentials in its URL go as ``Proxy-Authorization``; an ``https://`` proxy is reached
over TLS (``proxies_config``'s ``proxy_ca_bundle`` and ``proxy_client_cert``, and
``proxy_use_forwarding_for_https``). A proxy that cannot be reached or refuses the tunnel is
botocore's ``ProxyConnectionError``, as on the sync path.

Connections are kept per event loop (and process: a forked child opens its own) and per
scheme, host and port, at most :func:`limit` at once on one loop, idle ones for up to
:data:`KEEP_ALIVE` seconds. A request whose connection fails or times out closes it; only a
connection whose reply was read whole, and that the server did not ask to close, is used again.
"""

from __future__ import annotations

import asyncio
import os
import select
import ssl
import weakref
from base64 import b64encode
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import httptools
from botocore.awsrequest import AWSResponse, HeadersDict
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ProxyConnectionError,
    ReadTimeoutError,
)
from botocore.exceptions import SSLError as BotocoreSSLError
from botocore.httpsession import mask_proxy_url

from pynamodb_sharding._host import tls_context

__all__ = ["KEEP_ALIVE", "Pool", "Proxy", "Target", "close_pool", "proxies_of", "send"]

#: Seconds an idle connection is kept for the next request (aiohttp's and many servers' own
#: keep-alive is about this; a connection the server closes meanwhile is dropped when it does).
KEEP_ALIVE = 15.0
_DEFAULT_PORTS = {"http": 80, "https": 443}


class Target:
    """Where a request URL goes: the connection it needs and the start of its request head."""

    __slots__ = ("absolute", "host", "key", "port", "prefix", "tls")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            msg = f"the async methods send to http:// and https:// endpoints only, not {url!r}"
            raise ValueError(msg)
        self.host = parts.hostname
        self.port = parts.port or _DEFAULT_PORTS[scheme]
        self.tls = scheme == "https"
        self.key = (scheme, self.host, self.port)
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.port != _DEFAULT_PORTS[scheme]:
            host = f"{host}:{self.port}"
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        #: The request line after the method, and the ``Host`` header (which urllib3 adds, and
        #: botocore signs from the URL without setting it).
        self.prefix = f" {target} HTTP/1.1\r\nHost: {host}\r\n".encode("latin-1")
        #: The same for a proxy that forwards the request: the URL whole (urllib3's request target then).
        self.absolute = f" {url} HTTP/1.1\r\nHost: {host}\r\n".encode("latin-1")

    @property
    def authority(self) -> str:
        """``host:port``, as a ``CONNECT`` request names it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class Proxy:
    """A proxy botocore sends a client's requests through, and how (see the module docstring).

    Raises:
        HTTPClientError: ``url`` is not an ``http://`` or ``https://`` proxy (what botocore's
            own session raises for one, from urllib3's error).
    """

    __slots__ = ("context", "forwards_https", "headers", "host", "key", "masked", "port", "tls")

    def __init__(self, url: str, headers: Mapping[str, str] | None = None,
                 settings: Mapping[str, Any] | None = None) -> None:
        self.masked = mask_proxy_url(url)
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            problem = ValueError(f"proxy {self.masked!r}: the async methods reach a proxy over http:// or https:// "
                                 f"only, as botocore does; name one in HTTPS_PROXY / HTTP_PROXY or Config(proxies=...)")
            raise HTTPClientError(error=problem)
        self.host = parts.hostname
        self.port = parts.port or _DEFAULT_PORTS[scheme]
        self.tls = scheme == "https"
        if headers is None:  # botocore's ProxyConfiguration.proxy_headers_for, for a URL alone
            headers = {}
            if parts.username is not None and parts.password is not None:
                pair = f"{unquote(parts.username)}:{unquote(parts.password)}".encode()
                headers = {"Proxy-Authorization": f"Basic {b64encode(pair).decode()}"}
        self.headers = b"".join(f"{name}: {value}\r\n".encode("latin-1") for name, value in headers.items())
        settings = settings or {}
        self.forwards_https = bool(settings.get("proxy_use_forwarding_for_https"))
        #: The TLS context of an https:// proxy when proxies_config names a CA bundle or a client
        #: certificate; ``None``: the endpoint's own (botocore's ``verify``).
        self.context = _proxy_ssl_context(settings) if self.tls else None
        #: What a connection through it depends on: a connection is used again for the same only.
        self.key = (url, settings.get("proxy_ca_bundle"), repr(settings.get("proxy_client_cert")), self.forwards_https)

    def tunnels(self, target: Target) -> bool:
        """Whether requests to ``target`` go through a ``CONNECT`` tunnel (else the proxy forwards them)."""
        return target.tls and not (self.tls and self.forwards_https)


def _proxy_ssl_context(settings: Mapping[str, Any]) -> ssl.SSLContext | None:
    bundle, certificate = settings.get("proxy_ca_bundle"), settings.get("proxy_client_cert")
    if bundle is None and certificate is None:
        return None
    context = ssl.create_default_context(cafile=bundle)
    if isinstance(certificate, tuple):
        context.load_cert_chain(certificate[0], keyfile=certificate[1])
    elif isinstance(certificate, str):
        context.load_cert_chain(certificate)
    return context


def proxies_of(config: Any) -> Callable[[str], Proxy | None]:
    """The proxy of each request URL under botocore's ``ProxyConfiguration`` ``config`` (``None``:
    no proxies), found once per URL scheme: botocore names one proxy per scheme."""
    found: dict[str, Proxy | None] = {}

    def proxy_of(url: str) -> Proxy | None:
        scheme = url.partition(":")[0]
        try:
            return found[scheme]
        except KeyError:
            pass
        proxy_url = config.proxy_url_for(url) if config is not None else None
        proxy = (Proxy(proxy_url, config.proxy_headers_for(proxy_url), config.settings)
                 if proxy_url else None)
        found[scheme] = proxy
        return proxy

    return proxy_of


#: Targets by URL: an endpoint sends most requests to a few URLs.
_targets: dict[str, Target] = {}


def _target(url: str) -> Target:
    target = _targets.get(url)
    if target is None:
        target = Target(url)
        if len(_targets) < 256:  # URLs that vary (presigned, per item): parse each, keep none
            _targets[url] = target
    return target


def _head(method: str, prefix: bytes, headers: Any, extra: bytes = b"") -> bytes:
    parts = [method.encode("ascii"), prefix, extra]
    # botocore's headers are an email.message.Message: raw_items() gives them as set, without
    # the header policy items() runs on each (a good part of the cost of sending a request).
    raw_items = getattr(headers, "raw_items", None)
    for name, value in (raw_items() if raw_items is not None else headers.items()):
        if name.lower() == "host":
            continue  # the URL's, as urllib3 sends it
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8")
        if b"\n" in raw or b"\r" in raw:
            msg = f"Invalid header value {raw!r}"  # http.client's words, for urllib3's path
            raise ValueError(msg)
        parts += [name.encode("latin-1"), b": ", raw, b"\r\n"]
    parts.append(b"\r\n")
    return b"".join(parts)


def _body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    read = getattr(body, "read", None)
    if read is not None:
        data = read()
        return data.encode("utf-8") if isinstance(data, str) else bytes(data)
    msg = f"the async methods cannot send a request body of type {type(body).__name__}"
    raise TypeError(msg)


class _Lost(Exception):
    """The connection ended, or sent what is not HTTP, before the whole reply was read."""


class _ReadTimeout(Exception):
    """No byte of the reply came for the read timeout."""


class _ProxyFailed(Exception):
    """The proxy could not be reached, or did not open the tunnel."""


class _TunnelReply(asyncio.Protocol):
    """Reads the proxy's reply to ``CONNECT``: its status line, up to the end of its head."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.status: asyncio.Future[tuple[int, str]] = loop.create_future()
        self._data = b""

    def data_received(self, data: bytes) -> None:
        if self.status.done():
            return
        self._data += data
        if b"\r\n\r\n" not in self._data:
            if len(self._data) > 65536:
                self.status.set_exception(_ProxyFailed("the proxy's reply to CONNECT has no end"))
            return
        line = self._data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            self.status.set_exception(_ProxyFailed(f"the proxy answered CONNECT with {line[:100]!r}"))
            return
        self.status.set_result((int(parts[1]), parts[2] if len(parts) > 2 else ""))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.status.done():
            self.status.set_exception(_ProxyFailed(exc or "the proxy closed the connection before the tunnel opened"))


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: one request at a time."""

    def __init__(self, pool: Pool, key: tuple[Any, ...]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.discarded = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._reply: asyncio.Future[tuple[int, list[tuple[str, str]], bytes, bool]] | None = None
        self._headers: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self._timer: asyncio.TimerHandle | None = None
        self._read_timeout: float | None = None
        self._last_read = 0.0
        #: The request is a ``HEAD``: its reply has no body, whatever its headers say.
        self._head = False
        #: The reply's body ends with the connection (neither a length nor chunks).
        self._until_close = False

    # -- asyncio's side ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._stop_timer()
        reply = self._reply
        if reply is not None and not reply.done():
            if exc is None and self._until_close:  # the close ends the body, as http.client reads it
                reply.set_result((self._parser.get_status_code(), self._headers, b"".join(self._body), False))
            else:
                reply.set_exception(_Lost(exc or "the server closed the connection"))
        self.pool.lost(self)

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def data_received(self, data: bytes) -> None:
        reply = self._reply
        if reply is None or reply.done():  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        self._last_read = self.pool.loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if not reply.done():
                reply.set_exception(_Lost(exc))
            self.close()

    # -- httptools' side -----------------------------------------------------------------------

    def on_message_begin(self) -> None:
        reply = self._reply
        if reply is not None and reply.done():
            # A message after the reply (in the same read): nobody's. The parser is in it now,
            # so the connection is closed rather than have it start the next request's reply.
            self.close()
        self._headers = []
        self._body = []
        self._until_close = False

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:
            return  # 1xx: informational, without a body (llhttp completes it), the reply follows
        reply = self._reply
        if self._head:
            # No body follows, but llhttp (which does not know the method) would wait for the one
            # the headers announce: the reply is whole here, and the connection is not used again.
            if reply is not None and not reply.done():
                self._stop_timer()
                reply.set_result((status, self._headers, b"", False))
            return
        if status in (204, 304):
            return
        # Neither a length nor chunks: llhttp reads the body until the connection ends, but
        # httptools cannot tell it the end came (no llhttp_finish); connection_lost completes it.
        names = [name.lower() for name, _ in self._headers]
        codings = [value for name, value in self._headers if name.lower() == "transfer-encoding"]
        chunked = bool(codings) and codings[-1].rsplit(",", 1)[-1].strip().lower() == "chunked"
        self._until_close = not chunked and (bool(codings) or "content-length" not in names)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self._parser.get_status_code() < 200 and not self._parser.should_upgrade():
            return  # an interim reply (``100 Continue``): the request's own follows
        self._stop_timer()
        reply = self._reply
        if reply is not None and not reply.done():
            body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
            reply.set_result((self._parser.get_status_code(), self._headers, body,
                              self._parser.should_keep_alive()))

    # -- the sender's side ---------------------------------------------------------------------

    def usable(self, now: float) -> bool:
        """Whether the idle connection can take a request: open, not idle too long, and
        nothing on its socket that the loop has not read yet (a server's close, most often;
        on an idle connection anything is unusable) as urllib3 checks before it reuses one."""
        if self.lost or now - self.idle_since >= KEEP_ALIVE:
            return False
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return True
        try:
            return not _readable(sock.fileno())
        except (OSError, ValueError):  # closed meanwhile
            return False

    def request(self, data: bytes, read_timeout: float | None, head: bool = False
                ) -> asyncio.Future[tuple[int, list[tuple[str, str]], bytes, bool]]:
        """Send ``data`` (a whole request, a ``HEAD`` if ``head``); the future is its reply."""
        assert self.transport is not None
        loop = self.pool.loop
        self._reply = reply = loop.create_future()
        self._head = head
        self._read_timeout = read_timeout
        self._last_read = loop.time()
        if read_timeout is not None:
            self._timer = loop.call_at(self._last_read + read_timeout, self._check_read)
        self.transport.write(data)
        return reply

    def _check_read(self) -> None:
        self._timer = None
        timeout = self._read_timeout
        reply = self._reply
        if timeout is None or reply is None or reply.done():
            return
        due = self._last_read + timeout
        if self.pool.loop.time() < due:  # bytes came meanwhile: wait from the last
            self._timer = self.pool.loop.call_at(due, self._check_read)
            return
        reply.set_exception(_ReadTimeout(f"no data for {timeout:g} seconds"))
        self.close()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Close the connection (at once: nothing is left to send on it)."""
        self.lost = True
        if self.transport is not None:
            self.transport.abort()
        self.pool.lost(self)


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read (or its end), without waiting."""
    if hasattr(select, "poll"):  # any descriptor number (select() takes those below 1024)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])


class Pool:
    """The connections of one event loop in one process: at most ``limit`` open at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int) -> None:
        self.loop = loop
        self.limit = limit
        self.pid = os.getpid()
        self.open = 0
        self.closed = False
        self._idle: dict[tuple[Any, ...], deque[Connection]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, target: Target, connect_timeout: float | None, verify: Any,
                      proxy: Proxy | None = None) -> Connection:
        # A TLS connection is made for one ``verify``: another client's may not trust the same;
        # and a connection through a proxy serves that proxy's requests only.
        key = (*target.key, _verify_key(verify)) if target.tls or proxy is not None else target.key
        if proxy is not None:
            key = (*key, proxy.key)
        while True:
            idle = self._idle.get(key)
            now = self.loop.time()
            while idle:
                connection = idle.pop()  # the most recently used
                if connection.usable(now):
                    return connection
                connection.close()
            if self.open < self.limit:
                break
            if self._close_an_idle_connection():
                continue
            waiter = self.loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():  # woken, then cancelled: pass it on
                    self._wake()
                raise
        self.open += 1
        connection = Connection(self, key)
        try:
            await self._connect(connection, target, connect_timeout, verify, proxy)
        except BaseException:
            connection.close()  # counted out once, a waiter woken
            raise
        return connection

    async def _connect(self, connection: Connection, target: Target, connect_timeout: float | None,
                       verify: Any, proxy: Proxy | None) -> None:
        opening: Any
        if proxy is None:
            context = tls_context(verify) if target.tls else None
            opening = self.loop.create_connection(lambda: connection, target.host, target.port, ssl=context,
                                                  server_hostname=target.host if context is not None else None)
        else:
            opening = self._through(connection, target, verify, proxy)
        if connect_timeout is None:
            await opening
        else:
            await asyncio.wait_for(opening, connect_timeout)

    async def _through(self, connection: Connection, target: Target, verify: Any, proxy: Proxy) -> None:
        """Connect ``connection`` to ``target`` through ``proxy``: to the proxy itself when it
        forwards the requests, else through a ``CONNECT`` tunnel with TLS to ``target`` in it."""
        context = (proxy.context or tls_context(verify)) if proxy.tls else None
        server_hostname = proxy.host if context is not None else None
        tunnel = proxy.tunnels(target)
        reply = _TunnelReply(self.loop)
        protocol: asyncio.Protocol = reply if tunnel else connection
        try:
            transport, _ = await self.loop.create_connection(lambda: protocol, proxy.host, proxy.port, ssl=context,
                                                             server_hostname=server_hostname)
        except (OSError, ssl.SSLError) as exc:  # urllib3's ProxyError: the proxy is not reached
            raise _ProxyFailed(exc) from exc
        if not tunnel:
            return
        try:
            transport.write(f"CONNECT {target.authority} HTTP/1.1\r\nHost: {target.authority}\r\n".encode("latin-1")
                            + proxy.headers + b"\r\n")
            status, reason = await reply.status
            if not 200 <= status < 300:
                raise _ProxyFailed(f"Tunnel connection failed: {status} {reason}".strip())
            inner = await self.loop.start_tls(transport, connection, tls_context(verify),
                                              server_hostname=target.host)
        except BaseException:
            transport.abort()
            raise
        if inner is None:  # the loop closed meanwhile
            raise _ProxyFailed("the tunnel closed before TLS began")
        connection.connection_made(inner)

    def release(self, connection: Connection, reusable: bool) -> None:
        """Take ``connection`` back after a request: idle if ``reusable``, else closed."""
        if not reusable or connection.lost or self.closed:
            connection.close()
            return
        connection.idle_since = self.loop.time()
        idle = self._idle.get(connection.key)
        if idle is None:
            idle = self._idle[connection.key] = deque()
        idle.append(connection)
        self._wake()

    def lost(self, connection: Connection) -> None:
        """``connection`` is closed: it no longer counts (once), nor waits idle."""
        if connection.discarded:
            return
        connection.discarded = True
        self.open -= 1
        idle = self._idle.get(connection.key)
        if idle is not None and connection in idle:
            idle.remove(connection)
        self._wake()

    def _close_an_idle_connection(self) -> bool:
        for idle in self._idle.values():
            if idle:
                idle.popleft().close()  # the least recently used of its host
                return True
        return False

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        self.closed = True
        for idle in list(self._idle.values()):
            while idle:
                idle.popleft().close()


def _verify_key(verify: Any) -> bool | str:
    return verify if isinstance(verify, (bool, str)) else str(verify)


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Pool] = weakref.WeakKeyDictionary()
#: In a forked child, the pools of the parent's loops: their sockets are the parent's too, so
#: the child never sends on them nor closes them (a close could end the parent's TLS stream);
#: they are kept here so that garbage collection does not close them either.
_inherited: list[Pool] = []


def pool_of(loop: asyncio.AbstractEventLoop, limit: Callable[[], int]) -> Pool:
    """The connections of ``loop`` in this process (new in a forked child, or after a close,
    for at most ``limit()`` connections)."""
    pool = _pools.get(loop)
    if pool is not None and pool.pid != os.getpid():
        _inherited.append(pool)
        pool = None
    if pool is None or pool.closed:
        pool = _pools[loop] = Pool(loop, limit())
    return pool


def close_pool(loop: asyncio.AbstractEventLoop) -> None:
    """Close ``loop``'s idle connections in this process (those in use close when their request
    ends); the parent's, in a forked child, are left alone."""
    pool = _pools.pop(loop, None)
    if pool is None:
        return
    if pool.pid != os.getpid():
        _inherited.append(pool)
        return
    pool.close()


async def send(pool: Pool, request: Any, connect_timeout: float | None, read_timeout: float | None,
               verify: Any, proxy: Proxy | None = None) -> AWSResponse:
    """Send botocore's prepared ``request`` on a connection of ``pool`` (through ``proxy``, if
    given); its reply, or botocore's error for what urllib3's session would raise."""
    status, headers, body = await exchange(pool, request.method, request.url, request.headers,
                                           _body(request.body), connect_timeout, read_timeout, verify, proxy,
                                           request=request)
    return AWSResponse(request.url, status, HeadersDict(headers), _Reply(body))


async def exchange(pool: Pool, method: str, url: str, headers: Any, body: bytes, connect_timeout: float | None,
                   read_timeout: float | None, verify: Any, proxy: Proxy | None = None, *, request: Any = None
                   ) -> tuple[int, list[tuple[str, str]], bytes]:
    """Send ``method url`` with ``headers`` (botocore's, or a plain mapping that has
    ``Content-Length``) and ``body`` on a connection of ``pool``: the reply's status, headers
    and body, or botocore's error for what urllib3's session would raise. The merged queries'
    fast path sends its requests here without building botocore's request and response."""
    target = _target(url)
    if proxy is not None and not proxy.tunnels(target):  # the proxy forwards it: the URL whole
        head = _head(method, target.absolute, headers, proxy.headers)
    else:
        head = _head(method, target.prefix, headers)
    data = head + body
    try:
        connection = await pool.acquire(target, connect_timeout, verify, proxy)
    except _ProxyFailed as exc:
        assert proxy is not None
        raise ProxyConnectionError(proxy_url=proxy.masked, error=exc.__cause__ or exc) from exc
    except TimeoutError as exc:
        raise ConnectTimeoutError(endpoint_url=url, error=exc) from exc
    except ssl.SSLError as exc:
        raise BotocoreSSLError(endpoint_url=url, error=exc) from exc
    except OSError as exc:
        raise EndpointConnectionError(endpoint_url=url, error=exc) from exc
    try:
        status, reply_headers, reply_body, keep_alive = await connection.request(data, read_timeout,
                                                                                    method.upper() == "HEAD")
    except BaseException as exc:  # a cancellation included: the reply may still come on it
        connection.close()
        if isinstance(exc, _ReadTimeout):
            raise ReadTimeoutError(endpoint_url=url, error=exc) from exc
        if isinstance(exc, _Lost):
            raise ConnectionClosedError(endpoint_url=url, request=request, error=exc) from exc
        raise
    pool.release(connection, keep_alive)
    return status, reply_headers, reply_body


class _Reply:
    """A reply body already read, in the shape botocore's ``AWSResponse`` reads it from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body
