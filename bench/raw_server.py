"""The raw-socket reference: a minimal asyncio server writing pre-serialized chunked events.

``GET <any path>?watch...`` subscribes the connection: a chunked 200 head, then events.
``POST /go?n=N&batch=B`` with an event line as its body publishes N copies of that line, B per
loop turn, as fast as the readers take them (the fan-out limit): the fan-out benchmarks send the
line kubewire itself sent, so both servers' readers scan the same bytes. Without a body it
publishes ``bench.wire.event_line`` padded to ``size=S`` bytes.
``POST /publish`` with a Pod name as body publishes one event line naming it and answers 201
after writing it to every subscriber (the write-to-watcher latency floor).
With ``--tls-cert``/``--tls-key``/``--client-ca`` it serves TLS (a standard server context).

Each subscriber is a cursor into one list of published lines; all lines pending for it go out
as one chunk, one write per subscriber per turn (the same lines are framed once for everyone
caught up). A subscriber whose transport is over the high-water mark is skipped until it
drains, then catches up in writes of at most ``CATCH_UP_EVENTS`` lines: kubewire's policy
without storage, routing, filters or HTTP parsing beyond the request line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ssl
from urllib.parse import parse_qs, urlsplit

from bench.wire import EVENT_BYTES, event_line
from bench.worker import new_event_loop, ready_until_signalled

HIGH_WATER_BYTES = 256 * 1024  # as kubewire's Limits.write_high_water_bytes
CATCH_UP_EVENTS = 256  # as kubewire's PUMP_BATCH_EVENTS
MAX_HEAD_BYTES = 64 * 1024
WATCH_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
MAX_GO_EVENTS = 10_000_000


def frame(lines: list[bytes]) -> bytes:
    data = b"".join(lines)
    return b"%x\r\n%b\r\n" % (len(data), data)


class Feed:
    """Published lines and the cursors reading them."""

    def __init__(self) -> None:
        self.base = 0  # sequence number of lines[0]
        self.lines: list[bytes] = []
        self.subscribers: set[Connection] = set()

    @property
    def end(self) -> int:
        return self.base + len(self.lines)

    def publish(self, lines: list[bytes]) -> None:
        start = self.end
        self.lines.extend(lines)
        shared = frame(lines)
        for sub in self.subscribers:
            if sub.paused or sub.transport is None:
                continue
            if sub.cursor == start:
                sub.cursor = self.end
                sub.transport.write(shared)
            else:
                self.catch_up(sub)
        self._trim()

    def catch_up(self, sub: Connection) -> None:
        while sub.cursor < self.end and not sub.paused and sub.transport is not None:
            stop = min(self.end, sub.cursor + CATCH_UP_EVENTS)
            chunk = self.lines[sub.cursor - self.base:stop - self.base]
            sub.cursor = stop
            sub.transport.write(frame(chunk))

    def _trim(self) -> None:
        oldest = min((s.cursor for s in self.subscribers), default=self.end)
        if oldest > self.base + 4096:
            del self.lines[:oldest - self.base]
            self.base = oldest


class Connection(asyncio.Protocol):
    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.cursor = 0
        self.paused = False
        self.watching = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=HIGH_WATER_BYTES)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self.feed.subscribers.discard(self)
        self.transport = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.watching:
            self.feed.catch_up(self)

    def data_received(self, data: bytes) -> None:
        if self.watching:
            return
        self.buffer += data
        while not self.watching:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES and self.transport is not None:
                    self.transport.close()
                return
            head = self.buffer[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            method, target = head[0].split(" ")[:2]
            self.answer(method, target, body)

    def answer(self, method: str, target: str, body: bytes) -> None:
        assert self.transport is not None
        url = urlsplit(target)
        query = parse_qs(url.query)
        if method == "GET" and "watch" in query:
            self.watching = True
            self.cursor = self.feed.end
            self.feed.subscribers.add(self)
            self.transport.write(WATCH_HEAD)
        elif method == "POST" and url.path == "/go":
            n = min(int(query["n"][0]), MAX_GO_EVENTS)
            batch = int(query.get("batch", ["64"])[0])
            line = body or event_line("raw", size=int(query.get("size", [str(EVENT_BYTES)])[0]))
            asyncio.get_running_loop().create_task(produce(self.feed, n, batch, line))
            self.reply(202, b'{"started":true}')
        elif method == "POST" and url.path == "/publish":
            name = body.decode()
            self.feed.publish([event_line(name)])
            self.reply(201, b'{"metadata":{"name":"%b"}}' % body)
        else:
            self.reply(200, b'{"status":"ok"}')

    def reply(self, status: int, body: bytes) -> None:
        assert self.transport is not None
        self.transport.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%b" % (status, len(body), body))


async def produce(feed: Feed, n: int, batch: int, line: bytes) -> None:
    """Publish ``n`` copies of one pre-serialized ``line``, ``batch`` per loop turn."""
    done = 0
    while done < n:
        count = min(batch, n - done)
        feed.publish([line] * count)
        done += count
        await asyncio.sleep(0)


def tls_context(cert: str, key: str, client_ca: str) -> ssl.SSLContext:
    """A standard TLS server context: TLS 1.2+, client certificates verified when offered."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(client_ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


async def serve(port: int, context: ssl.SSLContext | None = None) -> None:
    feed = Feed()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(feed), "127.0.0.1", port,
                                      reuse_address=True, backlog=2048, ssl=context)
    await ready_until_signalled(server.sockets[0].getsockname()[1])
    server.close()
    for sub in list(feed.subscribers):
        if sub.transport is not None:
            sub.transport.abort()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert", help="serve TLS with this certificate (default: plain)")
    parser.add_argument("--tls-key")
    parser.add_argument("--client-ca", help="CA that verifies client certificates (with TLS)")
    args = parser.parse_args()
    context = (tls_context(args.tls_cert, args.tls_key, args.client_ca) if args.tls_cert
               else None)
    loop = new_event_loop()
    with contextlib.closing(loop):
        loop.run_until_complete(serve(args.port, context))


if __name__ == "__main__":
    main()
