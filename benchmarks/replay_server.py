"""A server in front of DynamoDB Local that answers repeated queries from memory.

On this machine DynamoDB Local runs on the client's two cores: a page over 64 shards costs it
about 33 ms of CPU, which the page then waits for, and which DynamoDB itself would spend on its
own machines. To see what the client alone adds to a wide page, ``bench_page`` also reads
through this server: every request goes on to DynamoDB Local (``--upstream``) except a
``Query`` it has answered before, byte for byte the same request body, whose reply (status,
headers, body, and so its CRC32) it sends again without asking. A page read twice is then
answered the second time at the cost of parsing the request (about 0.1 ms of this process's
CPU), and the client does all its own work as against DynamoDB: it signs, sends and parses
every request. Replies are only right while the items read do not change: write first, then
read.

Run::

    python benchmarks/replay_server.py --upstream http://127.0.0.1:8000
    # prints: replaying on http://127.0.0.1:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import sys
import threading
import urllib.parse

#: Reply headers not sent again as recorded: the connection's own, and the length (recomputed).
HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "date"})

Reply = tuple[int, str, list[tuple[str, str]], bytes]


class Replayer:
    """Forwards requests to ``upstream`` and remembers the replies to queries."""

    def __init__(self, upstream: str) -> None:
        parts = urllib.parse.urlsplit(upstream)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._replies: dict[bytes, Reply] = {}
        self._local = threading.local()
        self.replayed = self.forwarded = 0

    def _forward(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Reply:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(self._host, self._port, timeout=120)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            connection.endheaders(body)
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            self._local.connection = None
            raise
        kept = [(name, value) for name, value in response.getheaders() if name.lower() not in HOP_HEADERS]
        return response.status, response.reason, kept, data

    async def reply(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> Reply:
        target = next((value for name, value in headers if name.lower() == "x-amz-target"), "")
        key = target.encode() + b"\n" + body if target.endswith(".Query") else None
        if key is not None and key in self._replies:
            self.replayed += 1
            return self._replies[key]
        reply = await asyncio.get_running_loop().run_in_executor(None, self._forward, method, path, headers, body)
        self.forwarded += 1
        if key is not None and reply[0] == 200:
            self._replies[key] = reply
        return reply

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, *lines = head[:-4].decode("latin-1").split("\r\n")
                method, path, _version = request_line.split(" ", 2)
                headers = [(name.strip(), value.strip()) for name, _, value in
                           (line.partition(":") for line in lines)]
                length = next((int(value) for name, value in headers if name.lower() == "content-length"), 0)
                body = await reader.readexactly(length)
                status, reason, reply_headers, data = await self.reply(method, path, headers, body)
                out = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in reply_headers),
                       f"Content-Length: {len(data)}", "", ""]
                writer.write("\r\n".join(out).encode("latin-1") + data)
                await writer.drain()
        finally:
            writer.close()


async def main_async(upstream: str, port: int) -> None:
    replayer = Replayer(upstream)
    server = await asyncio.start_server(replayer.serve, "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"replaying on http://127.0.0.1:{bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="DynamoDB Local's endpoint")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main_async(args.upstream, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
