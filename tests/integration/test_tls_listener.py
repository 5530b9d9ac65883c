"""How TLS connections come in (server/wire/listen.py and http.TLSConnection).

Handshakes begin a few per loop turn however many ClientHellos wait; a connection that sends no
ClientHello is dropped at the handshake timeout; requests over TLS are served, bodies read in
slices; a client that pushes a refused body on after its 401 is cut off at the end of the
linger instead of being read (and decrypted) until its close_notify. Each test runs a real
``HTTPServer`` on a loopback socket with the server PKI kubewire makes, on asyncio's loop and
on uvloop.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop

from kubewire.server.access.chain import TLSFiles, server_ssl_context
from kubewire.server.access.pki import ServerPKI, ensure_server_pki
from kubewire.server.wire import http, listen
from kubewire.server.wire.http import HTTPServer, TLSConnection
from kubewire.server.wire.http_messages import Limits, Request, Response
from tests.integration.test_http_protocol import read_response

WAIT_S = 5.0
UNAUTHORIZED = b'{"kind":"Status","code":401}'


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT_S):
        while not check():
            await asyncio.sleep(0.01)


async def echo(request: Request) -> Response | None:
    return Response(200, f"{request.method} {request.path} {len(request.body)}".encode(),
                    "text/plain")


Run = Callable[[Coroutine[Any, Any, None]], None]
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(params=list(LOOPS))
def run(request: pytest.FixtureRequest) -> Run:
    """Runs a test's body on one loop, then the other: ``kubewire serve`` runs uvloop, an
    embedding program may not, and their TLS transports differ (uvloop's shutdown reads what a
    client sends into the void)."""
    def runner(body: Coroutine[Any, Any, None]) -> None:
        with asyncio.Runner(loop_factory=LOOPS[request.param]) as loop_runner:
            loop_runner.run(body)
    return runner


@pytest.fixture
def pki(tmp_path: Path) -> ServerPKI:
    return ensure_server_pki(tmp_path / "pki")


def server_context(pki: ServerPKI) -> ssl.SSLContext:
    return server_ssl_context(TLSFiles(pki.serving_cert, pki.serving_key, pki.ca_cert, pki))


def client_context(pki: ServerPKI) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki.ca_cert))


async def tls_server(pki: ServerPKI, limits: Limits | None = None) -> tuple[HTTPServer, int]:
    srv = HTTPServer(echo, limits or Limits(), head_check=lambda r: (
        Response(401, UNAUTHORIZED) if r.path == "/refused" else None))
    _, port = await srv.listen("127.0.0.1", 0, server_context(pki))
    return srv, port


def client_hello() -> bytes:
    """The first flight of a TLS client, made without a socket."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    tls = ctx.wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO(), server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return out.read()


async def _the_pacer_runs_a_few_callbacks_per_loop_turn_in_order() -> None:
    ran: list[int] = []
    pacer = listen.Pacer(2)
    for i in range(5):
        pacer.enter(functools.partial(ran.append, i))
    seen = []
    for _ in range(4):
        await asyncio.sleep(0)  # one loop turn
        seen.append(list(ran))
    assert seen == [[0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]


def test_the_pacer_runs_a_few_callbacks_per_loop_turn_in_order(run: Run) -> None:
    run(_the_pacer_runs_a_few_callbacks_per_loop_turn_in_order())


async def _waiting_client_hellos_begin_their_handshakes_a_few_per_loop_turn(
        pki: ServerPKI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty ClientHellos arrive while the loop is busy; the server then answers them
    ``PACED_PER_TURN`` per loop turn (not all in the turn that reads them), and each client
    gets its ServerHello."""
    turn = 0
    begun: list[int] = []
    begin = listen.TLSListener._begin

    def counted(self: listen.TLSListener, waiting: object) -> None:
        begun.append(turn)
        begin(self, waiting)  # type: ignore[arg-type]
    monkeypatch.setattr(listen.TLSListener, "_begin", counted)
    srv, port = await tls_server(pki)
    loop = asyncio.get_running_loop()
    socks = []
    for _ in range(20):
        sock = socket.socket()
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        socks.append(sock)
    await until(lambda: len(srv._tls._waiting) == 20)  # type: ignore[union-attr]
    hello = client_hello()
    for sock in socks:  # no loop turn in between: all wait when the server next polls
        sock.send(hello)
    while len(begun) < 20 and turn < 1000:
        await asyncio.sleep(0)
        turn += 1
    per_turn = [begun.count(t) for t in sorted(set(begun))]
    assert len(begun) == 20 and max(per_turn) <= listen.PACED_PER_TURN, per_turn
    for sock in socks:
        reply = await asyncio.wait_for(loop.sock_recv(sock, 5), WAIT_S)
        assert reply[:1] == b"\x16"  # a handshake record: the ServerHello
        sock.close()
    await srv.close()


def test_waiting_client_hellos_begin_their_handshakes_a_few_per_loop_turn(
        run: Run, pki: ServerPKI, monkeypatch: pytest.MonkeyPatch) -> None:
    run(_waiting_client_hellos_begin_their_handshakes_a_few_per_loop_turn(pki, monkeypatch))


async def _a_connection_without_a_client_hello_is_dropped_at_the_handshake_timeout(
        pki: ServerPKI) -> None:
    srv, port = await tls_server(pki, Limits(header_timeout_s=0.3))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await until(lambda: len(srv._tls._waiting) == 1)  # type: ignore[union-attr]
    assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # closed, nothing sent
    assert not srv._tls._waiting  # type: ignore[union-attr]
    writer.close()
    await srv.close()


def test_a_connection_without_a_client_hello_is_dropped_at_the_handshake_timeout(
        run: Run, pki: ServerPKI) -> None:
    run(_a_connection_without_a_client_hello_is_dropped_at_the_handshake_timeout(pki))


async def _requests_and_a_large_body_are_served_over_tls(pki: ServerPKI) -> None:
    srv, port = await tls_server(pki)
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki),
                                                   server_hostname="localhost")
    body = b"x" * (1 << 20)  # 16 slices of the shared read buffer
    writer.write(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\n"
                 + f"POST /b HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                 + body)
    assert (await read_response(reader))[2] == b"GET /a 0"
    assert (await read_response(reader))[2] == f"POST /b {len(body)}".encode()
    (conn,) = srv.connections
    assert isinstance(conn, TLSConnection)
    writer.close()
    await srv.close()


def test_requests_and_a_large_body_are_served_over_tls(run: Run, pki: ServerPKI) -> None:
    run(_requests_and_a_large_body_are_served_over_tls(pki))


def push_refused_body(pki: ServerPKI, port: int) -> str:
    """A client in a thread of its own: the head of a 50 MiB POST, then body bytes until the
    server stops it, without ever reading (so never answering a close_notify); how it ended."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as raw, \
            client_context(pki).wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(b"POST /refused HTTP/1.1\r\nHost: t\r\nContent-Length: 52428800\r\n\r\n")
        piece = b"x" * (64 * 1024)
        try:
            for _ in range(52428800 // len(piece)):
                tls.sendall(piece)
        except OSError as exc:  # a reset: cut off
            return type(exc).__name__
        return "sent it all"


async def _a_client_pushing_a_refused_body_on_is_cut_off_after_the_linger(
        pki: ServerPKI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 401 on the head of a 50 MiB POST: nothing of the body is drained (Go's tooBig) and,
    the client sending on, the connection is dropped when the linger ends. A graceful TLS
    close would read and decrypt what it sends until its close_notify (asyncio's and uvloop's
    shutdown timeout: 30 s)."""
    monkeypatch.setattr(http, "_LINGER_S", 0.2)
    srv, port = await tls_server(pki)
    pusher = asyncio.ensure_future(asyncio.to_thread(push_refused_body, pki, port))
    await until(lambda: bool(srv.connections))
    (conn,) = srv.connections
    await until(lambda: conn._input_closed)  # the 401 went out
    await until(lambda: not srv.connections)  # dropped, not read on
    assert conn._drained == 0
    assert await asyncio.wait_for(pusher, WAIT_S) != "sent it all"  # a reset or an EOF
    await srv.close()



def test_a_client_pushing_a_refused_body_on_is_cut_off_after_the_linger(
        run: Run, pki: ServerPKI, monkeypatch: pytest.MonkeyPatch) -> None:
    run(_a_client_pushing_a_refused_body_on_is_cut_off_after_the_linger(pki, monkeypatch))
