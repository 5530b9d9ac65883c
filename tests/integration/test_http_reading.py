"""How server/http.py reads requests off the wire when clients misbehave (issue 12).

Pipelined requests are parsed only up to a bound, and none is served while answers stay
unread; a head the server refuses is answered before its body is sent; a body must arrive
within the request timeout; bodies are bounded per connection and over all connections; a
request target may be as long as Go's head limit allows. Each test talks to a real
``HTTPServer`` on a loopback socket and looks at the connection only to see whether it reads.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from kubewire.server.wire import http
from kubewire.server.wire.http import HTTPConnection, HTTPServer
from kubewire.server.wire.http_input import HEAD_TOO_LARGE_ANSWER, REQUEST_TIMEOUT_BODY
from kubewire.server.wire.http_messages import Limits, Request, Response
from tests.integration.test_http_protocol import close, connect, read_response

WAIT_S = 5.0  # bound on waiting for the server; a hang fails the test
GET = b"GET /g HTTP/1.1\r\nHost: t\r\n\r\n"
UNAUTHORIZED = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                b'"message":"Unauthorized","reason":"Unauthorized","code":401}')


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_S):
        while not check():
            await asyncio.sleep(0.01)


def only_connection(srv: HTTPServer) -> HTTPConnection:
    (conn,) = srv.connections
    return conn


def is_reading(conn: HTTPConnection) -> bool:
    transport = conn._transport
    return transport is not None and transport.is_reading()


async def echo(request: Request) -> Response | None:
    return Response(200, f"{request.method} {request.path} {len(request.body)}".encode(),
                    "text/plain")


def blocking_echo(release: asyncio.Event) -> Callable[[Request], Awaitable[Response | None]]:
    """``echo``, except that ``/block`` waits for ``release`` (requests queue behind it)."""
    async def handler(request: Request) -> Response | None:
        if request.path == "/block":
            await release.wait()
        return await echo(request)
    return handler


async def start(srv: HTTPServer) -> int:
    _, port = await srv.listen("127.0.0.1", 0)
    return port


# --- pipelining ---------------------------------------------------------------------------------

async def test_pipelined_requests_are_parsed_only_up_to_the_queue_bound() -> None:
    """While one request is served, at most ``max_queued_requests`` wait parsed (plus what one
    parse slice held); reading stops, and every request is still answered, in order."""
    release = asyncio.Event()
    limits = Limits()
    srv = HTTPServer(blocking_echo(release), limits)
    reader, writer = await connect(await start(srv))
    count = 3000
    writer.write(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n" + GET * count)
    conn = only_connection(srv)
    await until(lambda: not is_reading(conn))
    assert len(conn._pending or []) <= limits.max_queued_requests + 4096 // len(GET) + 1
    release.set()
    assert (await read_response(reader))[2] == b"GET /block 0"
    for _ in range(count):
        assert (await read_response(reader))[2] == b"GET /g 0"
    await close(writer)
    await srv.close()


async def test_answers_left_unread_stop_serving_and_reading() -> None:
    """A client that pipelines and never reads gets no more answers than fill the kernel's
    buffers and the transport's high-water mark: the server stops serving it and reading from
    it, and once it reads, everything is answered."""
    served = 0
    answer = b"x" * 65536

    async def handler(request: Request) -> Response | None:
        nonlocal served
        served += 1
        return Response(200, answer, "text/plain")

    limits = Limits()
    srv = HTTPServer(handler, limits)
    reader, writer = await connect(await start(srv))
    count = 600  # ~39 MB of answers
    writer.write(GET * count)
    conn = only_connection(srv)
    await until(lambda: conn.write_paused and not is_reading(conn))
    assert served < count
    assert conn.buffered_bytes() <= limits.write_high_water_bytes + len(answer) + 1024
    for _ in range(count):
        assert (await read_response(reader))[2] == answer
    assert served == count
    await close(writer)
    await srv.close()


async def test_a_connection_whose_answers_stay_unread_is_dropped() -> None:
    """Answers unread for ``request_timeout_s``: the connection and all it holds are dropped."""
    async def handler(request: Request) -> Response | None:
        return Response(200, b"x" * 65536, "text/plain")

    srv = HTTPServer(handler, Limits(request_timeout_s=0.5))
    _, writer = await connect(await start(srv))
    writer.write(GET * 600)
    conn = only_connection(srv)
    await until(lambda: conn.write_paused)
    await until(lambda: not srv.connections)
    assert conn._pending is None and not conn._held and conn._parser is None
    writer.close()
    await srv.close()


async def test_queued_bodies_are_bounded_per_connection() -> None:
    """Pipelined bodies wait parsed only up to ``max_connection_body_bytes`` (3 MiB)."""
    release = asyncio.Event()
    limits = Limits()
    srv = HTTPServer(blocking_echo(release), limits)
    reader, writer = await connect(await start(srv))
    post = (b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n"
            + b"b" * 300000)
    count = 40  # 12 MB
    writer.write(b"GET /block HTTP/1.1\r\nHost: t\r\n\r\n" + post * count)
    conn = only_connection(srv)
    await until(lambda: not is_reading(conn))
    reading = 0 if conn._parser is None else conn._parser.body_bytes
    queued = conn._queued_body_bytes + reading
    assert queued <= limits.max_connection_body_bytes + 300000
    release.set()
    assert (await read_response(reader))[2] == b"GET /block 0"
    for _ in range(count):
        assert (await read_response(reader))[2] == b"POST /p 300000"
    await close(writer)
    await srv.close()


# --- the head check -----------------------------------------------------------------------------

async def test_a_refused_head_is_answered_before_its_body_is_sent() -> None:
    """The 401 comes on the head of a 3 MiB POST; the body is never read or held, and the
    connection closes. With credentials the body is read; a request without one is not checked."""
    checked: list[str] = []
    handled: list[str] = []

    def head_check(request: Request) -> Response | None:
        checked.append(request.path)
        if request.header("authorization") == "Bearer ok":
            return None
        return Response(401, UNAUTHORIZED)

    async def handler(request: Request) -> Response | None:
        handled.append(request.path)
        return await echo(request)

    srv = HTTPServer(handler, Limits(), head_check=head_check)
    port = await start(srv)
    reader, writer = await connect(port)
    writer.write(f"POST /refused HTTP/1.1\r\nHost: t\r\nContent-Length: {3 << 20}\r\n"
                 "Content-Type: application/json\r\n\r\n".encode())
    status, headers, body = await read_response(reader)
    assert (status, body) == (401, UNAUTHORIZED)
    assert headers["connection"] == "close"
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    await close(writer)
    reader, writer = await connect(port)
    writer.write(b"POST /ok HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ok\r\n"
                 b"Content-Length: 3\r\n\r\nabc" + GET)
    assert (await read_response(reader))[2] == b"POST /ok 3"
    assert (await read_response(reader))[2] == b"GET /g 0"
    await close(writer)
    assert checked == ["/refused", "/ok"]
    assert handled == ["/ok", "/g"]
    assert srv.budget.held == 0
    await srv.close()


async def test_a_refusal_behind_pipelined_requests_comes_in_order() -> None:
    srv = HTTPServer(echo, Limits(), head_check=lambda r: Response(401, UNAUTHORIZED))
    reader, writer = await connect(await start(srv))
    writer.write(GET + b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")
    status, headers, body = await read_response(reader)
    assert (status, body) == (200, b"GET /g 0")
    assert "connection" not in headers  # not the last answer
    assert (await read_response(reader))[0] == 401
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    await close(writer)
    await srv.close()


# --- after the last answer ----------------------------------------------------------------------

GO_DRAIN_BYTES = 256 * 1024  # Go's maxPostHandlerReadBytes
STALL_S = 0.3  # the kernel taking nothing of the client's writes this long: the server stopped
PIECE = b"x" * (64 * 1024)
CLIENT_SNDBUF = 64 * 1024
# Four ways to a connection's last answer while the client goes on sending: a refusal on the
# head (401) of a body of announced or unknown size, a body announced over max_body_bytes (413),
# a head that is not HTTP (400). Whether the server drains Go's 256 KiB of what follows: not
# when a Content-Length says that much is still to come (Go's tooBig), else yes.
LAST_ANSWERS = {
    "401-on-the-head": (b"POST /refused HTTP/1.1\r\nHost: t\r\nContent-Length: 52428800\r\n\r\n",
                        401, False),
    "401-on-a-chunked-head": (
        b"POST /refused HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n", 401, True),
    "413-on-content-length": (
        b"POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 52428800\r\n\r\n", 413, False),
    "400-for-a-bad-head": (b"\x00\x01 nonsense\r\n\r\n", 400, True),
}


def refusing_server() -> HTTPServer:
    """``echo``, with /refused refused on its head and bodies over 1 MiB refused by size."""
    return HTTPServer(echo, Limits(max_body_bytes=1 << 20), head_check=lambda r: (
        Response(401, UNAUTHORIZED) if r.path == "/refused" else None))


def kernel_buffers_bytes() -> int:
    """The most loopback can hold of a body no one reads: the receiver's buffer (tcp_rmem's
    largest), the sender's (its SO_SNDBUF, which the kernel doubles) and 4 MiB of slack."""
    try:
        receiver = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        receiver = 64 << 20
    return receiver + 2 * CLIENT_SNDBUF + (4 << 20)


async def connect_small_sndbuf(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CLIENT_SNDBUF)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


async def push_until_stalled(writer: asyncio.StreamWriter, written: int, cap: int) -> int:
    """Write body bytes until the kernel takes none for ``STALL_S`` (or ``cap`` are written);
    how many are written in all (the kernel took that less ``get_write_buffer_size()``)."""
    while written < cap:
        writer.write(PIECE)
        written += len(PIECE)
        try:
            await asyncio.wait_for(writer.drain(), STALL_S)
        except TimeoutError:
            break
    return written


@pytest.mark.parametrize("name", list(LAST_ANSWERS))
async def test_input_after_the_last_answer_is_read_only_up_to_gos_bound(
        monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Go reads at most maxPostHandlerReadBytes (256 KiB) of a body left unread (none when its
    Content-Length says more is to come), and its closeWriteAndWait reads nothing: a client
    that pushes on after its last answer is stopped by the kernel's flow control once the server
    has dropped ~256 KiB (or nothing), not read and dropped at loopback speed until the close.
    It still gets the whole answer."""
    monkeypatch.setattr(http, "_LINGER_S", 10.0)  # the close must not come before the stall
    head, status, drains = LAST_ANSWERS[name]
    srv = refusing_server()
    reader, writer = await connect_small_sndbuf(await start(srv))
    await until(lambda: bool(srv.connections))
    conn = only_connection(srv)
    writer.write(head)
    answer = asyncio.ensure_future(read_response(reader))
    cap = kernel_buffers_bytes() + 2 * GO_DRAIN_BYTES
    written = await push_until_stalled(writer, 0, cap)
    assert written < cap, f"the kernel took all {written} bytes: the server kept reading"
    await until(lambda: not is_reading(conn))  # at once, unless this loop was held up
    written = await push_until_stalled(writer, written, cap)  # what a stall taken too early left
    taken = written - writer.transport.get_write_buffer_size()
    assert taken < cap, f"the kernel took all {taken} bytes: the server kept reading"
    assert conn in srv.connections and not is_reading(conn)  # paused until the linger ends
    if drains:  # one read past the bound at most (asyncio and uvloop read up to 256 KiB)
        assert GO_DRAIN_BYTES <= conn._drained <= 2 * GO_DRAIN_BYTES
    else:  # what came in the read that brought the head is all the server took
        assert conn._drained == 0
    got, headers, body = await answer
    assert got == status and headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body) > 0
    writer.transport.abort()
    await srv.close()


async def test_a_moderate_body_sent_before_reading_gets_the_answer_and_a_clean_close() -> None:
    """A client that sends its whole 200 KiB body before reading the 401 on its head: the
    server reads and drops the body (under Go's 256 KiB), so the close that follows the
    linger leaves nothing unread and is a FIN, not a reset that could drop the answer. (The
    body goes in 8 KiB writes, each read on its own: a smaller bound would leave some unread.)"""
    srv = refusing_server()
    reader, writer = await connect(await start(srv))
    size, piece = 200 * 1024, b"x" * 8192
    writer.write(f"POST /refused HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n"
                 .encode())
    for _ in range(size // len(piece)):
        await asyncio.sleep(0.002)  # the server (this loop) reads what was written
        writer.write(piece)
    await writer.drain()
    status, headers, body = await read_response(reader)
    assert (status, body, headers["connection"]) == (401, UNAUTHORIZED, "close")
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # our FIN, at once
    await until(lambda: not srv.connections)  # the close, after the linger
    await asyncio.sleep(0.05)  # a reset would have arrived by now
    sock = writer.get_extra_info("socket")
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0  # not ECONNRESET
    await close(writer)
    await srv.close()


# --- the request timeout ------------------------------------------------------------------------

async def test_a_trickled_body_gets_kubes_504_after_the_request_timeout() -> None:
    srv = HTTPServer(echo, Limits(request_timeout_s=0.5))
    reader, writer = await connect(await start(srv))
    loop = asyncio.get_running_loop()
    started = loop.time()
    writer.write(b"POST /slow HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")

    async def trickle() -> None:
        while True:
            writer.write(b"1\r\nx\r\n")
            await asyncio.sleep(0.1)

    trickling = asyncio.create_task(trickle())
    try:
        status, headers, body = await read_response(reader)
    finally:
        trickling.cancel()
    assert (status, body) == (504, REQUEST_TIMEOUT_BODY)
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert headers["connection"] == "close"
    assert 0.4 < loop.time() - started < 0.5 + 3
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
    await close(writer)
    await srv.close()


async def test_a_body_in_time_and_a_stream_are_not_timed() -> None:
    """The timer covers the body only: a body sent in pieces within the timeout is served,
    and a stream (a watch) outlives the timeout."""
    streams: list[object] = []

    async def handler(request: Request) -> Response | None:
        if request.path == "/stream":
            streams.append(request.start_stream(200, [("Content-Type", "text/plain")]))
            return None
        return await echo(request)

    srv = HTTPServer(handler, Limits(request_timeout_s=0.5))
    reader, writer = await connect(await start(srv))
    writer.write(b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nab")
    await asyncio.sleep(0.3)
    writer.write(b"cd")
    assert (await read_response(reader))[2] == b"POST /p 4"
    writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT_S)
    assert head.startswith(b"HTTP/1.1 200")
    await asyncio.sleep(1.0)  # twice the request timeout
    assert srv.connections
    await close(writer)
    await srv.close()


# --- the body budget ----------------------------------------------------------------------------

async def test_bodies_over_all_connections_wait_for_the_budget_and_all_finish() -> None:
    """Eight 1 MiB uploads against a 2 MiB budget: at most two bodies are read at a time (the
    others stop reading, holding what one read brought), and every upload finishes."""
    limits = Limits(max_body_bytes=1 << 20, max_pending_body_bytes=2 << 20)
    srv = HTTPServer(echo, limits)
    port = await start(srv)
    clients = [await connect(port) for _ in range(8)]
    head = f"POST /u HTTP/1.1\r\nHost: t\r\nContent-Length: {1 << 20}\r\n\r\n".encode()
    half = b"u" * (1 << 19)
    for _, writer in clients:
        writer.write(head + half)
    await until(lambda: srv.budget.held == 2 << 20 and srv.budget.waiting == 6)
    await until(lambda: sum(not is_reading(c) for c in srv.connections) >= 6)
    for _, writer in clients:
        writer.write(half)
    for reader, writer in clients:
        assert (await read_response(reader))[2] == b"POST /u 1048576"
        await close(writer)
    assert srv.budget.held == 0
    await srv.close()


async def test_a_body_waiting_for_the_budget_is_still_timed() -> None:
    limits = Limits(max_body_bytes=1 << 20, max_pending_body_bytes=1 << 20,
                    request_timeout_s=0.5)
    srv = HTTPServer(echo, limits)
    port = await start(srv)
    _, holder = await connect(port)  # reserves the whole budget and sends nothing more
    holder.write(f"POST /h HTTP/1.1\r\nHost: t\r\nContent-Length: {1 << 20}\r\n\r\n".encode())
    await until(lambda: srv.budget.held == 1 << 20)
    reader, writer = await connect(port)
    writer.write(b"POST /w HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345")
    await until(lambda: srv.budget.waiting == 1)
    status, _, body = await read_response(reader)
    assert (status, body) == (504, REQUEST_TIMEOUT_BODY)
    await until(lambda: srv.budget.held == 0 and srv.budget.waiting == 0)
    await close(writer)
    await close(holder)
    await srv.close()


# --- long request targets -----------------------------------------------------------------------

async def test_a_target_of_200_kib_is_served() -> None:
    srv = HTTPServer(echo)
    reader, writer = await connect(await start(srv))
    query = "labelSelector=" + "a" * (200 * 1024)
    writer.write(f"GET /api/v1/pods?{query} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    status, _, body = await read_response(reader)
    assert (status, body) == (200, b"GET /api/v1/pods 0")
    await close(writer)
    await srv.close()


async def test_a_head_past_gos_limit_gets_gos_431() -> None:
    """Go reads at most MaxHeaderBytes + 4096 of a head, request line included."""
    srv = HTTPServer(echo)
    reader, writer = await connect(await start(srv))
    target = "/x?q=" + "a" * ((1 << 20) + 8192)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    assert await asyncio.wait_for(reader.read(), WAIT_S) == HEAD_TOO_LARGE_ANSWER
    await close(writer)
    await srv.close()
