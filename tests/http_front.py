"""A small HTTP front on 127.0.0.1 that passes requests on to DynamoDB Local, answering some
Query requests its own way: the faults of a network and a server, made repeatable.

``with HttpFront(upstream, script) as front:`` runs it in threads of its own; ``front.url`` is
its endpoint. ``script`` lists what happens to the Query requests in turn (the others are passed
on): ``"pass"``; ``"throttle"`` (a 400 ``ProvisionedThroughputExceededException``, as DynamoDB
answers a hot partition); ``"drop"`` (the connection is closed before any reply: a lost reply);
``"close"`` (the reply is sent, then the connection is closed without ``Connection: close``, as a
server closes an idle kept-alive connection). Past the script, requests are passed on.
``front.queries`` counts the Query requests it received, ``front.connections`` the connections.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import socketserver
import threading
from collections.abc import Sequence

__all__ = ["HttpFront"]


class HttpFront:
    def __init__(self, upstream: tuple[str, int], script: Sequence[str] = ()) -> None:
        self.upstream = upstream
        self.script = list(script)
        self.queries = 0
        self.connections = 0
        self._lock = threading.Lock()
        front = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                front._serve(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="test-http-front", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HttpFront:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: bytes) -> str:
        with self._lock:
            if b'"KeyConditionExpression"' not in body:
                return "pass"
            self.queries += 1
            return self.script.pop(0) if self.script else "pass"

    def _serve(self, sock: socket.socket) -> None:
        with self._lock:
            self.connections += 1
        upstream = http.client.HTTPConnection(*self.upstream, timeout=30)
        reader = sock.makefile("rb")
        try:
            while True:
                request_line = reader.readline()
                if not request_line:
                    return
                headers: dict[str, str] = {}
                while True:
                    line = reader.readline().decode("latin-1")
                    if line in ("\r\n", "\n", ""):
                        break
                    name, _, value = line.partition(":")
                    headers[name.strip()] = value.strip()
                length = int(next((value for name, value in headers.items() if name.lower() == "content-length"), "0"))
                body = reader.read(length)
                action = self._next(body)
                if action == "drop":
                    return
                if action == "throttle":
                    reply = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#"
                                                  "ProvisionedThroughputExceededException",
                                        "message": "The level of configured provisioned throughput for the table "
                                                   "was exceeded."}).encode()
                    sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\n"
                                 b"x-amzn-RequestId: front\r\nContent-Length: " + str(len(reply)).encode()
                                 + b"\r\n\r\n" + reply)
                    continue
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                forwarded = {name: value for name, value in headers.items()
                             if name.lower() not in ("host", "content-length", "connection")}
                upstream.request(method, path, body=body, headers=forwarded)
                response = upstream.getresponse()
                content = response.read()
                head = [f"HTTP/1.1 {response.status} {response.reason}"]
                head += [f"{name}: {value}" for name, value in response.getheaders()
                         if name.lower() not in ("content-length", "connection", "transfer-encoding")]
                head.append(f"Content-Length: {len(content)}")
                sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + content)
                if action == "close":
                    return
        except OSError:
            return
        finally:
            upstream.close()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def __repr__(self) -> str:
        return f"HttpFront({self.url}, queries={self.queries}, connections={self.connections})"
