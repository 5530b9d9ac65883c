"""Watch over WebSocket (watch-protocol.md §4): same URL, filters and events as chunked HTTP.

A plain WebSocket client (aiohttp's) talks to the real server; each event is one text message
holding exactly one chunked-watch line.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubewire.server.access.users import UserRequest, user_kubeconfig
from tests.integration.harness import ServerThread
from tests.integration.kinds import POD
from tests.integration.wire import call, create, list_rv, watch

Event = dict[str, Any]


def ws_url(server: ServerThread, path: str) -> str:
    return server.url.replace("http", "ws", 1) + path


async def ws_events(server: ServerThread, path: str, count: int, *,
                    protocols: tuple[str, ...] = ()) -> tuple[list[Event], list[bytes]]:
    """Read ``count`` messages; returns the events and the raw payloads."""
    events: list[Event] = []
    raw: list[bytes] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(
            ws_url(server, path), protocols=protocols, autoping=False) as ws:
        while len(events) < count:
            msg = await asyncio.wait_for(ws.receive(), 10)
            assert msg.type == aiohttp.WSMsgType.TEXT, msg
            raw.append(msg.data.encode())
            events.append(json.loads(msg.data))
    return events, raw


def _mutations(server: ServerThread) -> None:
    create(server, POD.collection(), POD.obj("a", {"app": "x"}))
    create(server, POD.collection(), POD.obj("b", {"app": "y"}))
    call(server, "PATCH", POD.item("a"), {"metadata": {"labels": {"app": "y"}}},
         {"Content-Type": "application/merge-patch+json"})
    call(server, "DELETE", POD.item("b"))


async def test_websocket_watch_sees_what_a_chunked_watch_sees(server: ServerThread) -> None:
    rv = list_rv(server, POD.collection())
    path = f"{POD.collection()}?watch=true&resourceVersion={rv}&labelSelector=app%3Dy"
    with watch(server, POD.collection(), resourceVersion=rv, labelSelector="app=y") as chunked:
        reader = asyncio.create_task(ws_events(server, path, 4))
        await asyncio.sleep(0.2)  # both watches are registered before the writes
        await asyncio.to_thread(_mutations, server)
        events, raw = await reader
        expected = [chunked.next_event(10) for _ in range(4)]
    assert events == expected
    # "a" enters the selector by a label change; deleting the unscheduled "b" marks it, then
    # removes it at once (pod strategy: grace 0 without a node).
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("ADDED", "a"), ("MODIFIED", "b"), ("DELETED", "b")]
    assert all(payload.endswith(b"\n") and payload.count(b"\n") == 1 for payload in raw)


async def test_websocket_initial_events_and_bookmark(server: ServerThread) -> None:
    create(server, POD.collection(), POD.obj("one"))
    path = (f"{POD.collection()}?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
            "&resourceVersionMatch=NotOlderThan")
    events, _ = await ws_events(server, path, 2)
    assert events[0]["type"] == "ADDED"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"


async def test_subprotocol_is_echoed_and_pings_answered(server: ServerThread) -> None:
    async with aiohttp.ClientSession() as session, session.ws_connect(
            ws_url(server, f"{POD.collection()}?watch=true"), protocols=("v4.channel.k8s.io",),
            autoping=False) as ws:
        assert ws.protocol == "v4.channel.k8s.io"
        await ws.ping(b"hi")
        msg = await asyncio.wait_for(ws.receive(), 10)
        assert (msg.type, msg.data) == (aiohttp.WSMsgType.PONG, b"hi")


async def test_timeout_ends_with_a_close_frame(server: ServerThread) -> None:
    async with aiohttp.ClientSession() as session, session.ws_connect(
            ws_url(server, f"{POD.collection()}?watch=true&timeoutSeconds=1")) as ws:
        msg = await asyncio.wait_for(ws.receive(), 10)
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == 1000


def _raw_upgrade(server: ServerThread, extra: str) -> bytes:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((f"GET {POD.collection()}?watch=true HTTP/1.1\r\nHost: {host}\r\n"
                      "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Version: 13\r\n{extra}\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data


def _upgraded(server: ServerThread, rcvbuf: int | None = None) -> socket.socket:
    """A raw socket past the 101 of a watch's WebSocket upgrade."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket()
    if rcvbuf is not None:  # before connecting, so the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(10)
    sock.connect((host, int(port)))
    key = base64.b64encode(b"0123456789abcdef").decode()
    sock.sendall((f"GET {POD.collection()}?watch=true HTTP/1.1\r\nHost: {host}\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  f"Sec-WebSocket-Key: {key}\r\n\r\n").encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):  # the server sends nothing more until an event
        byte = sock.recv(1)
        if not byte:
            sock.close()
            raise AssertionError(f"connection closed after {head!r}")
        head += byte
    assert head.startswith(b"HTTP/1.1 101 "), head
    return sock


def _client_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    mask = b"\x0f\x1e\x2d\x3c"
    size = len(payload)
    length = bytes([0x80 | size]) if size < 126 else bytes([0xFE]) + size.to_bytes(2, "big")
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([(0x80 if fin else 0) | opcode]) + length + mask + body


def _read_to_end(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.parametrize("wire", [
    _client_frame(0x9, b"p" * 126),  # RFC 6455 5.5: at most 125 bytes
    _client_frame(0x9, b"p" * 1000),
    _client_frame(0x9, b"p", fin=False),  # never fragmented
])
def test_control_frames_breaking_rfc_6455_get_close_1002(server: ServerThread,
                                                         wire: bytes) -> None:
    with _upgraded(server) as sock:
        sock.sendall(_client_frame(0x9, b"p" * 125))  # the largest ping: answered
        pong = b""
        while len(pong) < 127:
            pong += sock.recv(127 - len(pong))
        assert pong == b"\x8a\x7d" + b"p" * 125
        sock.sendall(wire)
        # a close frame with status 1002 (protocol error), then the server closes
        assert _read_to_end(sock) == b"\x88\x02\x03\xea"
    assert call(server, "GET", POD.collection()).status == 200


def test_a_client_that_pings_and_never_reads_is_dropped(server: ServerThread) -> None:
    """Pongs wait for the client to read them; one that only pings is cut off instead of the
    server buffering its pongs without end (300 one-megabyte pings used to add 283 MB)."""
    ping = _client_frame(0x9, b"p" * 125) * 512  # 67 KB a send
    with _upgraded(server, rcvbuf=4096) as sock, pytest.raises(OSError) as info:
        for _ in range(1000):  # 67 MB of pings at most
            sock.sendall(ping)
    assert isinstance(info.value, ConnectionResetError | BrokenPipeError), info.value
    assert call(server, "GET", POD.collection()).status == 200


def test_handshake_errors_are_plain_http(server: ServerThread) -> None:
    key = base64.b64encode(b"0123456789abcdef").decode()
    reply = _raw_upgrade(server, f"Sec-WebSocket-Key: {key}\r\n"
                                 "Sec-WebSocket-Protocol: a, b\r\n")
    assert reply.startswith(b"HTTP/1.1 400 ")
    reply = _raw_upgrade(server, "Sec-WebSocket-Key: short\r\n")
    assert reply.startswith(b"HTTP/1.1 400 ")
    reply = _raw_upgrade(server, f"Sec-WebSocket-Key: {key}\r\n")
    assert reply.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
    assert b"Sec-WebSocket-Accept: " in reply
    # Query errors come first, as ordinary Status answers.
    bad = call(server, "GET", POD.collection(), headers={
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": key}, params={"watch": "true", "labelSelector": "a b"})
    assert bad.status == 400 and bad.status_object()["reason"] == "BadRequest"


async def test_browser_token_protocol_authenticates(
        make_server: Callable[..., ServerThread], tmp_path: Path) -> None:
    server = make_server(insecure_http=False)
    text = user_kubeconfig(server.config.data_dir,
                           UserRequest("ui", ("system:masters",),
                                       token_file=server.config.data_dir / "tokens.csv"))
    token = text.split("token: ", 1)[1].split()[0]
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    ssl_ctx = ssl.create_default_context(
        cafile=str(server.config.data_dir / "pki/ca.crt"))
    url = server.url.replace("https", "wss", 1) + f"{POD.collection()}?watch=true&timeoutSeconds=1"
    protocols = (f"base64url.bearer.authorization.k8s.io.{encoded}", "base64.binary.k8s.io")
    async with aiohttp.ClientSession() as session, session.ws_connect(
            url, protocols=protocols, ssl=ssl_ctx) as ws:
        assert ws.protocol == "base64.binary.k8s.io"
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url, protocols=("base64.binary.k8s.io",), ssl=ssl_ctx):
            pass
    assert info.value.status == 401
