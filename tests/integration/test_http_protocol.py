"""server/http.py on a real loopback socket: framing, keep-alive, limits, back-pressure."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubewire.server.wire.http import HTTPServer
from kubewire.server.wire.http_messages import Limits, Request, Response

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def handler(request: Request) -> Response | None:
    if request.path == "/stream":
        stream = request.start_stream(200, [("Content-Type", "application/json")])
        stream.write(b'{"a":1}\n')
        stream.write_framed(stream.frame([b'{"b":2}\n', b'{"c":3}\n']))
        stream.close()
        return None
    body = f"{request.method} {request.path} {request.query} {len(request.body)}".encode()
    return Response(200, body, "text/plain")


@pytest.fixture
async def server() -> AsyncIterator[tuple[HTTPServer, int]]:
    srv = HTTPServer(handler, Limits(max_body_bytes=1024, keepalive_timeout_s=5))
    _, port = await srv.listen("127.0.0.1", 0)
    yield srv, port
    await srv.close()


async def connect(port: int) -> Streams:
    return await asyncio.open_connection("127.0.0.1", port)


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:] if line)}
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                return status, headers, body
            body += chunk[:-2]
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    await writer.wait_closed()


async def test_keep_alive_and_pipelining_answer_in_order(server: tuple[HTTPServer, int]) -> None:
    reader, writer = await connect(server[1])
    writer.write(b"GET /a?x=1&x=2&y= HTTP/1.1\r\nHost: t\r\n\r\n"
                 b"POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc")
    status, _, body = await read_response(reader)
    assert status == 200
    assert body == b"GET /a {'x': ['1', '2'], 'y': ['']} 0"
    status, _, body = await read_response(reader)
    assert body == b"POST /b {} 3"
    await close(writer)


async def test_chunked_stream_then_next_request(server: tuple[HTTPServer, int]) -> None:
    reader, writer = await connect(server[1])
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\nGET /after HTTP/1.1\r\nHost: t\r\n\r\n")
    status, headers, body = await read_response(reader)
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-cache, private"
    assert body == b'{"a":1}\n{"b":2}\n{"c":3}\n'
    _, _, body = await read_response(reader)
    assert body.startswith(b"GET /after")
    await close(writer)


async def test_body_over_the_limit_gets_413_status(server: tuple[HTTPServer, int]) -> None:
    reader, writer = await connect(server[1])
    writer.write(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n")
    status, _, body = await read_response(reader)
    assert status == 413
    assert b'"reason":"RequestEntityTooLarge"' in body
    assert b"Request entity too large: limit is 1024" in body
    assert await reader.read() == b""  # connection closed
    await close(writer)


async def test_chunked_upload_over_the_limit_gets_413(server: tuple[HTTPServer, int]) -> None:
    reader, writer = await connect(server[1])
    writer.write(b"POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    writer.write(b"800\r\n" + b"x" * 0x800 + b"\r\n0\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 413
    await close(writer)


async def test_garbage_gets_400_and_close(server: tuple[HTTPServer, int]) -> None:
    reader, writer = await connect(server[1])
    writer.write(b"\x00\x01 nonsense\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 400
    assert await reader.read() == b""
    await close(writer)


async def test_head_is_answered_without_body(server: tuple[HTTPServer, int]) -> None:
    reader, writer = await connect(server[1])
    writer.write(b"HEAD /h HTTP/1.1\r\nHost: t\r\n\r\nGET /g HTTP/1.1\r\nHost: t\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    _, _, body = await read_response(reader)
    assert body.startswith(b"GET /g")
    await close(writer)


async def test_shutdown_ends_open_streams_cleanly() -> None:
    opened = asyncio.Event()

    async def hold(request: Request) -> Response | None:
        request.start_stream(200, [("Content-Type", "application/json")])
        opened.set()
        return None

    srv = HTTPServer(hold)
    _, port = await srv.listen("127.0.0.1", 0)
    reader, writer = await connect(port)
    writer.write(b"GET /w HTTP/1.1\r\nHost: t\r\n\r\n")
    await asyncio.wait_for(opened.wait(), 5)
    await srv.close()
    status, _, body = await read_response(reader)  # the terminating chunk arrives
    assert (status, body) == (200, b"")
    await close(writer)
