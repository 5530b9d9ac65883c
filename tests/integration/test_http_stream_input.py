"""What a client sends while a chunked stream (a watch) is open: kept, parsed after the stream.

kube clients do not pipeline behind a watch, but the server must not break if one does: the
bytes wait (the connection holds no parser meanwhile, which keeps an idle watch small), are
parsed once the stream's last chunk is written, and answered in order; garbage is answered 400
after the stream, never inside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from kubewire.server.wire.http import _MAX_HELD_BYTES, HTTPServer
from kubewire.server.wire.http_messages import ChunkedStream, Limits, Request, Response
from tests.integration.test_http_protocol import close, connect, read_response

WAIT_S = 5.0  # bound on waiting for the server; a hang fails the test


class StreamServer:
    """``/stream`` opens a stream that stays open (as a watch) until the test ends it."""

    def __init__(self) -> None:
        self.streams: asyncio.Queue[ChunkedStream] = asyncio.Queue()
        self.http = HTTPServer(self.handle, Limits(max_body_bytes=1024, keepalive_timeout_s=5))
        self.port = 0

    async def handle(self, request: Request) -> Response | None:
        if request.path == "/stream":
            stream = request.start_stream(200, [("Content-Type", "application/json")])
            stream.write(b'{"open":true}\n')
            self.streams.put_nowait(stream)
            return None
        body = f"{request.method} {request.path} {len(request.body)}".encode()
        return Response(200, body, "text/plain")

    async def next_stream(self) -> ChunkedStream:
        return await asyncio.wait_for(self.streams.get(), WAIT_S)

    def only_connection(self) -> object:
        (conn,) = self.http.connections
        return conn


@pytest.fixture
async def srv() -> AsyncIterator[StreamServer]:
    server = StreamServer()
    _, server.port = await server.http.listen("127.0.0.1", 0)
    yield server
    await server.http.close()


async def until(check: Callable[[], bool]) -> None:
    """Wait (bounded) for the server to have read what the client wrote."""
    async with asyncio.timeout(WAIT_S):
        while not check():
            await asyncio.sleep(0.01)


async def read_stream_head(reader: asyncio.StreamReader) -> None:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    assert head.startswith(b"HTTP/1.1 200"), head


async def test_requests_sent_during_a_stream_are_answered_after_it(srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
    stream = await srv.next_stream()
    await read_stream_head(reader)
    # in pieces, one request split across writes, a body included
    pieces = (b"GET /a HTTP/1.1\r\nHo", b"st: t\r\n\r\nPOST /b HTTP/1.1\r\n",
              b"Host: t\r\nContent-Length: 3\r\n\r\nab", b"c")
    for piece in pieces:
        writer.write(piece)
        await writer.drain()
    conn = srv.only_connection()
    await until(lambda: len(conn._held) == len(b"".join(pieces)))  # type: ignore[attr-defined]
    assert conn._parser is None  # type: ignore[attr-defined]  # none while streaming
    stream.write(b'{"more":1}\n')
    stream.close()
    # the stream's body is whole, then the answers follow in order
    assert await read_response_after_head(reader) == b'{"open":true}\n{"more":1}\n'
    assert (await read_response(reader))[2] == b"GET /a 0"
    assert (await read_response(reader))[2] == b"POST /b 3"
    await close(writer)


async def read_response_after_head(reader: asyncio.StreamReader) -> bytes:
    """The body of a chunked response whose head was already read."""
    body = b""
    while True:
        size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), WAIT_S)).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return body
        body += chunk[:-2]


async def test_a_request_pipelined_with_the_stream_request(srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\nGET /next HTTP/1.1\r\nHost: t\r\n\r\n"
                 b"GET /partial HTTP/1.1\r\nHo")
    stream = await srv.next_stream()
    await read_stream_head(reader)
    writer.write(b"st: t\r\n\r\n")
    stream.close()
    assert await read_response_after_head(reader) == b'{"open":true}\n'
    assert (await read_response(reader))[2] == b"GET /next 0"
    assert (await read_response(reader))[2] == b"GET /partial 0"
    await close(writer)


async def test_the_connection_streams_again_after_a_stream(srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    for _ in range(3):
        writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        stream = await srv.next_stream()
        await read_stream_head(reader)
        stream.close()
        assert await read_response_after_head(reader) == b'{"open":true}\n'
        writer.write(b"GET /between HTTP/1.1\r\nHost: t\r\n\r\n")
        assert (await read_response(reader))[2] == b"GET /between 0"
    await close(writer)


async def test_garbage_during_a_stream_is_answered_after_it(srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
    stream = await srv.next_stream()
    await read_stream_head(reader)
    writer.write(b"\x00\x01 nonsense\r\n\r\n")
    conn = srv.only_connection()
    await until(lambda: bool(conn._held))  # type: ignore[attr-defined]
    stream.write(b'{"still":"whole"}\n')
    stream.close()
    assert await read_response_after_head(reader) == b'{"open":true}\n{"still":"whole"}\n'
    status, _, _ = await read_response(reader)
    assert status == 400
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # and the connection closes
    await close(writer)


async def test_much_input_during_a_stream_pauses_reading_and_loses_nothing(
        srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
    stream = await srv.next_stream()
    await read_stream_head(reader)
    one = b"POST /n HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000
    count = 8 * _MAX_HELD_BYTES // len(one)
    writer.write(one * count)
    conn = srv.only_connection()
    await until(lambda: conn._reading_paused)  # type: ignore[attr-defined]
    await asyncio.sleep(0.1)  # a reading connection would take in more meanwhile
    # kept: the bound, plus at most the one read (256 KiB) that crossed it; the kernel has the rest
    assert len(conn._held) <= _MAX_HELD_BYTES + 256 * 1024 < len(one) * count  # type: ignore[attr-defined]
    stream.close()
    assert await read_response_after_head(reader) == b'{"open":true}\n'
    for _ in range(count):
        assert (await read_response(reader))[2] == b"POST /n 1000"
    await writer.drain()
    await close(writer)


async def test_input_after_a_connection_close_stream_is_dropped(srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    stream = await srv.next_stream()
    await read_stream_head(reader)
    writer.write(b"GET /ignored HTTP/1.1\r\nHost: t\r\n\r\n")
    conn = srv.only_connection()
    await until(lambda: bool(conn._held))  # type: ignore[attr-defined]  # read: no RST at close
    stream.close()
    assert await read_response_after_head(reader) == b'{"open":true}\n'
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    await close(writer)


async def test_a_client_closing_during_a_stream_ends_it(srv: StreamServer) -> None:
    reader, writer = await connect(srv.port)
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
    stream = await srv.next_stream()
    await read_stream_head(reader)
    closed = asyncio.Event()
    stream.on_close = closed.set
    writer.write(b"GET /unanswered HTTP/1.1\r\n")
    await close(writer)
    await asyncio.wait_for(closed.wait(), WAIT_S)
    assert stream.closed
