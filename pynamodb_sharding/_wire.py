"""A merged query's shard requests, sent below PynamoDB and botocore on their happy path.

A merged query sends one DynamoDB Query per shard, all alike but for the shard's key, the start
key and the ``Limit``. Through PynamoDB and botocore each one costs about 1 ms of client CPU
(parameters built and validated, endpoint resolved, events emitted, SigV4 signing key derived
again, urllib3 and ``http.client``'s header parser): a page of 8 shards spent more CPU than a
plain query's round trip. Here each request is:

- its parameters, from PynamoDB's own request for that query (:func:`~pynamodb_sharding._host.query_operation`,
  built once per merged query), with the shard's key, start key and ``Limit`` put in;
- its endpoint, credential scope and User-Agent, as botocore sent them in the client's first
  Query of that table (learned from that request, so a custom endpoint, a FIPS or
  account-based endpoint and the signing region are botocore's own choices);
- signed with SigV4, the signing key kept per day, region and service;
- written and read on a kept-alive connection of this module (HTTP/1.1, TLS verified as
  botocore's ``verify`` says), or on the event loop's connections on the asyncio side;
- parsed with ``json.loads`` (binary values decoded, as botocore's parser does), its CRC32
  checked as botocore checks DynamoDB's.

Anything off the happy path goes through PynamoDB and botocore unchanged: a reply that is not a
200 (an error, a throttle), a failed connection or a timeout is sent again there, with their
retries, error parsing, throttle reasons and events. So is every request of a client whose
events have a handler the fast path cannot stand in for: any but botocore's, PynamoDB's and
this library's own, except handlers of ``after-call`` and ``provide-client-params`` (emitted
as botocore emits them) and ``before-send`` handlers that only observe requests, marked with
:data:`OBSERVER` (emitted; ``pynamodb_sharding.testing``'s latency and request recorders are);
and so is every request while botocore's ``BaseClient._make_api_call`` is wrapped (an
OpenTelemetry or other instrumentation of botocore), of a client whose endpoint is reached
through a proxy or with a client certificate. PynamoDB's send signals are sent around the
request, as PynamoDB sends them. ``PYNAMODB_SHARDING_FAST_QUERIES=0`` turns the fast path off.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import hmac
import json
import os
import socket
import ssl
import threading
import time
import uuid
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import attrs
from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HeadersDict

from pynamodb_sharding._fastparse import decode_binary_values
from pynamodb_sharding._forks import at_fork
from pynamodb_sharding._hedging import mark_sent
from pynamodb_sharding._host import (
    dynamodb_send_signals,
    event_handlers,
    event_registry,
    extra_headers,
    frozen_credentials,
    http_proxies,
    http_verify,
    instrumented,
    query_operation,
    routed_exchange,
    routed_send,
    tls_context,
)
from pynamodb_sharding._locals import ContextLocal
from pynamodb_sharding._pool import on_event_loop

__all__ = ["OBSERVER", "QueryWire", "fast_queries_enabled", "observes_only", "sent"]

#: Shard requests sent since the process started, by the way they went: ``"fast"`` (this
#: module), or why not (``"events"``, ``"learning"``, ``"proxy"``, ``"reply"``...). Approximate
#: under threads (diagnostics and tests).
sent: collections.Counter[str] = collections.Counter()

#: The attribute that marks a botocore ``before-send`` handler as one that only observes the
#: requests (it returns ``None`` and changes nothing): merged queries keep their fast path and
#: emit ``before-send`` to it. :func:`observes_only` sets it.
OBSERVER = "pynamodb_sharding_observer"

_H = TypeVar("_H", bound=Callable[..., Any])
_TARGET = "DynamoDB_20120810.Query"
_CONTENT_TYPE = "application/x-amz-json-1.0"
_EVENTS = (
    "provide-client-params", "before-parameter-build", "before-endpoint-resolution", "before-call",
    "request-created", "choose-signer", "before-sign", "before-send", "before-parse", "needs-retry",
    "after-call", "after-call-error", "response-received",
)
#: The events whose handlers the fast path calls as botocore would (emitted when one of their
#: handlers is not botocore's, PynamoDB's or this library's own).
_EMITTED = frozenset({"provide-client-params", "before-send", "after-call"})
_ENVIRONMENT = "PYNAMODB_SHARDING_FAST_QUERIES"


def observes_only(handler: _H) -> _H:
    """Mark a botocore ``before-send`` handler (a function) as one that only observes the
    requests: it returns ``None`` and changes nothing. A merged query's shard requests then keep
    their fast path and call it; an unmarked one sends them through botocore (a handler that
    may answer instead of DynamoDB, as a stub or a fault injector does, needs botocore's path).

    Use it as a decorator; it returns the handler.

    .. versionadded:: 0.2.0
    """
    setattr(handler, OBSERVER, True)
    return handler


def fast_queries_enabled() -> bool:
    """Whether shard requests may take the fast path (``PYNAMODB_SHARDING_FAST_QUERIES=0``: never)."""
    return os.environ.get(_ENVIRONMENT, "1").strip().lower() not in ("0", "false", "no", "off")


# -- which clients' requests can take it --------------------------------------------------------


def _module_of(handler: Any) -> str:
    owner = getattr(handler, "__self__", None)
    if owner is not None:
        return type(owner).__module__
    module = getattr(handler, "__module__", None)
    return module if isinstance(module, str) else type(handler).__module__


def _stands_in_for(handler: Any) -> bool:
    """Whether the fast path does what ``handler`` does for a successful Query: botocore's own
    handlers (signing, retries, user agent, recursion detection), PynamoDB's (its extra headers)
    and this library's (key guard, fast parse, retry hooks that act on errors only)."""
    module = _module_of(handler)
    if module.startswith(("botocore.", "pynamodb.connection.")):
        return True
    return module.startswith("pynamodb_sharding.") and not module.startswith(
        ("pynamodb_sharding.testing", "pynamodb_sharding.capacity", "pynamodb_sharding.contrib"))


@attrs.frozen
class _Events:
    """What a client's event handlers allow: the fast path, and which events it emits."""

    allowed: bool
    emitted: frozenset[str] = frozenset()


_events: weakref.WeakKeyDictionary[Any, tuple[Any, _Events]] = weakref.WeakKeyDictionary()



def _client_events(client: Any) -> _Events:
    registry = event_registry(client)
    known = _events.get(client)
    if known is not None and known[0] is registry:
        return known[1]
    emitted: set[str] = set()
    allowed = True
    for name in _EVENTS:
        foreign = [handler for handler in event_handlers(client, f"{name}.dynamodb.Query")
                   if not _stands_in_for(handler)]
        if not foreign:
            continue
        if name == "before-send" and not all(getattr(handler, OBSERVER, False) for handler in foreign):
            allowed = False  # a handler that may answer instead of the server: botocore's path
        elif name in _EMITTED:
            emitted.add(name)
        else:
            allowed = False
    answer = _Events(allowed, frozenset(emitted))
    _events[client] = (registry, answer)
    return answer


# -- where and how a client's Query requests go ----------------------------------------------------


@attrs.frozen
class _Endpoint:
    """What botocore chose for a client's Query requests of one table (learned from one)."""

    url: str
    host: str  # the Host header
    path: str
    secure: bool
    address: tuple[str, int]
    region: str | None  # the credential scope's; None: botocore sent the request unsigned
    service: str | None
    user_agent: str | None


def _endpoint_of(request: Any) -> _Endpoint:
    url = str(request.url)
    parts = urlsplit(url)
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    default_port = (secure and port == 443) or (not secure and port == 80)
    host = parts.hostname or ""
    host_header = host if default_port else f"{host}:{port}"
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]" if default_port else f"[{host}]:{port}"
    region = service = None
    authorization = request.headers.get("Authorization")
    if authorization:
        text = authorization.decode() if isinstance(authorization, bytes) else str(authorization)
        credential = text.split("Credential=", 1)[1].split(",", 1)[0] if "Credential=" in text else ""
        scope = credential.split("/")
        if len(scope) == 5:
            region, service = scope[2], scope[3]
    agent = request.headers.get("User-Agent")
    return _Endpoint(url=url, host=host_header, path=parts.path or "/", secure=secure, address=(host, port),
                     region=region, service=service,
                     user_agent=None if agent is None else (agent.decode() if isinstance(agent, bytes) else agent))


#: Per client, per table: where its Query requests go.
_endpoints: weakref.WeakKeyDictionary[Any, dict[str, _Endpoint]] = weakref.WeakKeyDictionary()
_learning = ContextLocal("wire.learning")
_LEARN_ID = "pynamodb_sharding.wire.learn_endpoint"
_hooked: weakref.WeakSet[Any] = weakref.WeakSet()
_hook_lock = threading.Lock()


def _learn(request: Any, **_: Any) -> None:
    """``before-send.dynamodb.Query``: record where botocore sends a table's Query, once."""
    wanted = getattr(_learning, "wanted", None)
    if wanted is None:
        return
    client, table = wanted
    _learning.wanted = None
    _endpoints.setdefault(client, {})[table] = _endpoint_of(request)


def _watch(client: Any) -> None:
    if client in _hooked:
        return
    with _hook_lock:
        if client not in _hooked:
            client.meta.events.register("before-send.dynamodb.Query", _learn, unique_id=_LEARN_ID)
            _hooked.add(client)


# -- SigV4 ----------------------------------------------------------------------------------------

_signing_keys: dict[tuple[str, str, str, str], bytes] = {}


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    cache_key = (secret, day, region, service)
    key = _signing_keys.get(cache_key)
    if key is None:
        key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
        for part in (region, service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        if len(_signing_keys) > 64:
            _signing_keys.clear()
        _signing_keys[cache_key] = key
    return key


def sign(headers: dict[str, str], *, path: str, body: bytes, credentials: Any, region: str, service: str,
         now: float | None = None) -> None:
    """Add SigV4 headers (``X-Amz-Date``, ``X-Amz-Security-Token``, ``Authorization``) to a POST
    of ``body`` to ``path`` whose other headers are ``headers`` (all of them signed)."""
    amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    headers["X-Amz-Date"] = amz_date
    token = credentials.token
    if token:
        headers["X-Amz-Security-Token"] = token
    names = sorted((name.lower(), " ".join(str(value).split())) for name, value in headers.items())
    signed = ";".join(name for name, _ in names)
    canonical = "\n".join([
        "POST", quote(path, safe="/~"), "", *(f"{name}:{value}" for name, value in names), "", signed,
        hashlib.sha256(body).hexdigest(),
    ])
    day = amz_date[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(_signing_key(credentials.secret_key, day, region, service), to_sign.encode(),
                         hashlib.sha256).hexdigest()
    headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")


# -- HTTP/1.1 on kept-alive connections ------------------------------------------------------------


class _Broken(Exception):
    """The connection failed, or its reply was not HTTP the fast path reads: send it the slow way."""


class _Stale(_Broken):
    """A kept-alive connection the server had closed: nothing was read, send again on a new one."""


class _Connection:
    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def exchange(self, data: bytes, timeout: float | None) -> tuple[int, dict[str, str], bytes, bool]:
        """Send one request; the reply's status, headers (lower-case names), body, and whether
        the connection may be kept."""
        sock = self.sock
        sock.settimeout(timeout)
        try:
            sock.sendall(data)
            buffer = bytearray()
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end >= 0:
                    break
                chunk = sock.recv(65536)
                if not chunk:
                    raise _Stale if not buffer else _Broken
                buffer += chunk
        except (BrokenPipeError, ConnectionResetError):
            raise _Stale from None
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
            raise _Broken
        status = int(status_line[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        rest = buffer[end + 4:]
        keep = headers.get("connection", "").lower() != "close" and status_line[0] == "HTTP/1.1"
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(rest) < length:
                chunk = sock.recv(max(65536, length - len(rest)))
                if not chunk:
                    raise _Broken
                rest += chunk
            return status, headers, bytes(rest[:length]), keep
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return status, headers, self._chunked(rest), keep
        while True:  # delimited by the end of the connection
            chunk = sock.recv(65536)
            if not chunk:
                return status, headers, bytes(rest), False
            rest += chunk

    def _chunked(self, rest: bytearray) -> bytes:
        body = bytearray()
        while True:
            while b"\r\n" not in rest:
                rest += self._more()
            size_line, _, after = bytes(rest).partition(b"\r\n")
            rest = bytearray(after)
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                rest += self._more()
            if size == 0:
                return bytes(body)
            body += rest[:size]
            rest = rest[size + 2:]

    def _more(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise _Broken
        return chunk

    def close(self) -> None:
        with suppress(OSError):
            self.sock.close()


class _Pool:
    """Idle kept-alive connections to one endpoint (this process's own: a forked child starts
    without its parent's)."""

    def __init__(self, endpoint: _Endpoint, context: ssl.SSLContext | None, size: int) -> None:
        self.endpoint = endpoint
        self.context = context
        self.size = size
        self.idle: list[_Connection] = []
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def take(self) -> tuple[_Connection | None, bool]:
        with self.lock:
            if self.idle and self.pid == os.getpid():
                return self.idle.pop(), True
        return None, False

    def open(self, connect_timeout: float | None) -> _Connection:
        endpoint = self.endpoint
        try:
            sock = socket.create_connection(endpoint.address, timeout=connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=endpoint.address[0])
        except OSError:
            raise _Broken from None
        return _Connection(sock)

    def give_back(self, connection: _Connection) -> None:
        with self.lock:
            if self.pid == os.getpid() and len(self.idle) < self.size:
                self.idle.append(connection)
                return
        connection.close()


_pools: dict[tuple[Any, ...], _Pool] = {}
_pools_lock = threading.Lock()

def _pool(client: Any, endpoint: _Endpoint) -> _Pool:
    verify = http_verify(client) if endpoint.secure else None
    key = (endpoint.address, endpoint.secure, verify if isinstance(verify, bool | str | None) else id(verify),
           os.getpid())
    pool = _pools.get(key)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                size = int(getattr(client.meta.config, "max_pool_connections", 10) or 10)
                pool = _pools[key] = _Pool(endpoint, tls_context(verify) if endpoint.secure else None, size)
    return pool


def _reset_in_child() -> None:
    """A forked child opens connections of its own (the parent's sockets stay the parent's)."""
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()


at_fork(after_in_child=_reset_in_child)


class _Raw:
    """A reply body as botocore's ``AWSResponse.raw`` gives it."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


# -- one merged query's requests ------------------------------------------------------------------


def _json_default(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    msg = f"a Query parameter of type {type(value).__name__} is not JSON"
    raise TypeError(msg)


class QueryWire:
    """Sends the shard requests of one merged query on the fast path, when it can.

    :meth:`query` answers a Query's parsed reply (as ``TableConnection.query`` returns it), or
    ``None`` where the request must go through PynamoDB and botocore instead (inside
    :meth:`learning`, the first time a client's endpoint for the table is not known yet).
    """

    def __init__(self, table: Any) -> None:
        self._table = table  # PynamoDB's TableConnection
        self._client = table.connection.client
        self._templates: dict[tuple[int, str | None], tuple[dict[str, Any], str | None, Any]] = {}
        self._kept: list[Any] = []  # the kwargs whose id() keys a template stay alive
        self._proxied: dict[str, bool] = {}  # by endpoint URL: a proxy or a client certificate
        _watch(self._client)

    @contextmanager
    def learning(self) -> Iterator[None]:
        """Around a request sent through botocore: learn the table's endpoint from it."""
        client = self._client
        table = self._table.table_name
        if table in _endpoints.get(client, {}):
            yield
            return
        _learning.wanted = (client, table)
        try:
            yield
        finally:
            _learning.wanted = None

    def _template(self, hash_value: Any, kwargs: Mapping[str, Any], index_name: str | None
                  ) -> tuple[dict[str, Any], str | None, Any]:
        """PynamoDB's request for ``kwargs`` (a query of ``hash_value``), the placeholder of its
        hash key value, and that value's type."""
        key = (id(kwargs), index_name)
        template = self._templates.get(key)
        if template is None:
            built = {name: value for name, value in kwargs.items() if name != "limit"}
            if index_name is not None:
                built["index_name"] = index_name
            params = query_operation(self._table, hash_value, **built)
            placeholder, kind = None, None
            for name, value in (params.get("ExpressionAttributeValues") or {}).items():
                if isinstance(value, dict) and len(value) == 1 and next(iter(value.values())) == hash_value:
                    placeholder, kind = name, next(iter(value))
                    break
            template = self._templates[key] = (params, placeholder, kind)
            self._kept.append(kwargs)
        return template

    def query(self, hash_value: Any, exclusive_start_key: Mapping[str, Any] | None, limit: int | None,
              kwargs: Mapping[str, Any], index_name: str | None = None) -> dict[str, Any] | None:
        client = self._client
        events = _client_events(client)
        if not events.allowed or instrumented(client):
            sent["events"] += 1
            return None
        if not isinstance(hash_value, str):
            sent["key type"] += 1
            return None
        endpoint = _endpoints.get(client, {}).get(self._table.table_name)
        if endpoint is None:
            sent["learning"] += 1
            return None  # botocore sends it, and the request teaches the endpoint (learning())
        proxied = self._proxied.get(endpoint.url)
        if proxied is None:  # once per query and endpoint: botocore parses the URL for it
            proxies = http_proxies(client)
            proxied = self._proxied[endpoint.url] = bool(
                (proxies is not None and proxies.proxy_url_for(endpoint.url))
                or getattr(client.meta.config, "client_cert", None))
        if proxied:
            sent["proxy"] += 1
            return None
        params, placeholder, kind = self._template(hash_value, kwargs, index_name)
        if placeholder is None:
            sent["template"] += 1
            return None
        params = dict(params)
        values = dict(params["ExpressionAttributeValues"])
        values[placeholder] = {kind: hash_value}
        params["ExpressionAttributeValues"] = values
        if exclusive_start_key:
            params["ExclusiveStartKey"] = exclusive_start_key
        if limit is not None:
            params["Limit"] = limit
        elif kwargs.get("limit") is not None:
            params["Limit"] = kwargs["limit"]
        if "provide-client-params" in events.emitted:
            client.meta.events.emit("provide-client-params.dynamodb.Query", params=params,
                                    model=client.meta.service_model.operation_model("Query"), context={})
        signals = dynamodb_send_signals()
        request_id = uuid.uuid4() if signals is not None else None
        if signals is not None:
            signals[0].send(self._table.connection, operation_name="Query", table_name=self._table.table_name,
                            req_uuid=request_id)
        data = self._send(client, endpoint, events, params)
        sent["fast" if data is not None else "reply"] += 1
        if signals is not None and data is not None:
            signals[1].send(self._table.connection, operation_name="Query", table_name=self._table.table_name,
                            req_uuid=request_id)
        return data

    def _send(self, client: Any, endpoint: _Endpoint, events: _Events, params: dict[str, Any]) -> dict[str, Any] | None:
        body = json.dumps(params, separators=(",", ":"), default=_json_default).encode()
        headers = {"Host": endpoint.host, "Content-Type": _CONTENT_TYPE, "X-Amz-Target": _TARGET}
        if endpoint.region is not None and endpoint.service is not None:
            credentials = frozen_credentials(client)
            if credentials is None:
                return None
            sign(headers, path=endpoint.path, body=body, credentials=credentials, region=endpoint.region,
                 service=endpoint.service)
        if endpoint.user_agent is not None:
            headers["User-Agent"] = endpoint.user_agent
        headers["Accept-Encoding"] = "identity"  # as http.client asks for botocore's requests
        trace = os.environ.get("_X_AMZN_TRACE_ID") if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else None
        if trace:  # botocore's recursion detection in AWS Lambda
            headers["X-Amzn-Trace-Id"] = quote(trace, safe="-=;:+&[]{}\"',")
        reply = None
        routed = routed_send(client) if on_event_loop() is not None else None
        # On an event loop: the loop's connections, without botocore's request and response
        # objects (built only for the before-send handlers, which observe: see _client_events).
        exchange = routed_exchange(client) if routed is not None else None
        if "before-send" in events.emitted or (routed is not None and exchange is None):
            sent_headers = HeadersDict({**headers, "Content-Length": str(len(body))})
            request = AWSPreparedRequest("POST", endpoint.url, sent_headers, body, False)
            if "before-send" in events.emitted:
                responses = client.meta.events.emit("before-send.dynamodb.Query", request=request)
                reply = next((response for _handler, response in responses if response is not None), None)
            else:
                request.headers.update(extra_headers(self._table.connection) or {})
                mark_sent()
            if reply is None and routed is not None and exchange is None:
                try:
                    reply = routed(request)
                except Exception:  # a lost or refused connection: botocore's path sends it again
                    return None
            headers = {name: value for name, value in request.headers.items() if name.lower() != "content-length"}
        else:
            headers.update(extra_headers(self._table.connection) or {})
            mark_sent()
        if reply is not None:
            status, reply_headers, content = (reply.status_code, {name.lower(): value for name, value in
                                                                   reply.headers.items()}, reply.content)
        elif exchange is not None:
            headers["Content-Length"] = str(len(body))
            try:
                replied = exchange(endpoint.url, headers, body)
            except Exception:  # a lost or refused connection: botocore's path sends it again
                return None
            if replied is None:
                return None
            status, reply_headers, content = replied
        else:
            try:
                status, reply_headers, content = self._exchange(client, endpoint, headers, body)
            except _Broken:
                return None
        if status != 200 or reply_headers.get("content-encoding", "identity") != "identity":
            return None
        crc = reply_headers.get("x-amz-crc32")
        if crc is not None and zlib.crc32(content) & 0xFFFFFFFF != int(crc):
            return None
        try:
            data = json.loads(content)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        if b'"B' in content:
            for item in data.get("Items") or ():
                for value in item.values():
                    decode_binary_values(value)
            for value in (data.get("LastEvaluatedKey") or {}).values():
                decode_binary_values(value)
        data["ResponseMetadata"] = {"RequestId": reply_headers.get("x-amzn-requestid", ""), "HTTPStatusCode": 200,
                                    "HTTPHeaders": reply_headers, "RetryAttempts": 0}
        if "after-call" in events.emitted:
            response = AWSResponse(endpoint.url, status, HeadersDict(reply_headers), _Raw(content))
            client.meta.events.emit("after-call.dynamodb.Query", http_response=response, parsed=data,
                                    model=client.meta.service_model.operation_model("Query"), context={})
        return data

    def _exchange(self, client: Any, endpoint: _Endpoint, headers: dict[str, str], body: bytes
                  ) -> tuple[int, dict[str, str], bytes]:
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        data = (f"POST {endpoint.path} HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
        config = client.meta.config
        pool = _pool(client, endpoint)
        connection, reused = pool.take()
        for _attempt in range(2):
            if connection is None:
                connection, reused = pool.open(config.connect_timeout), False
            try:
                status, reply_headers, content, keep = connection.exchange(data, config.read_timeout)
            except _Stale:
                connection.close()
                if not reused:
                    raise
                connection = None  # the server closed it while it was idle: once more, on a new one
                continue
            except (OSError, ValueError, _Broken):
                connection.close()
                raise _Broken from None
            if keep:
                pool.give_back(connection)
            else:
                connection.close()
            return status, reply_headers, content
        raise _Broken
