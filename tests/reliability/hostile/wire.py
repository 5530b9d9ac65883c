"""Raw bytes for the attackers: TLS connections, request heads, answers, WebSocket frames.

Attackers write exactly what they mean (pipelined heads, partial bodies, chunks a byte at a time,
oversized pings) on asyncio streams over TLS, which read and write at once on one connection.
``read_answer`` parses one HTTP answer (a streamed one only up to its head); ``None`` means the
server closed without one. ``exchanges`` runs the same requests on many connections at once and
``summary`` counts what came back, for reports.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import ssl
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.reliability.hostile.server import ATTACKER, HOST, NAMESPACE, HostileServer

CONNECT_TIMEOUT_S = 15.0
OP_TEXT, OP_CLOSE, OP_PING, OP_PONG = 0x1, 0x8, 0x9, 0xA


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def abort(self) -> None:
        """Drop the connection at once (no TLS close_notify to wait for)."""
        self.writer.transport.abort()

    @property
    def unsent(self) -> int:
        """Bytes written but still in our transport's buffer."""
        return self.writer.transport.get_write_buffer_size()


async def connect(server: HostileServer, *, context: ssl.SSLContext | None = None,
                  sndbuf: int | None = None, rcvbuf: int | None = None,
                  limit: int = 1 << 20) -> Conn:
    """A TLS connection; small socket buffers keep what the kernel absorbs small. ``limit``
    bounds what asyncio reads ahead for us (twice it, then it stops reading)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for option, size in ((socket.SO_SNDBUF, sndbuf), (socket.SO_RCVBUF, rcvbuf)):
        if size is not None:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
    sock.setblocking(False)
    try:
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_connect(sock, (HOST, server.port)), CONNECT_TIMEOUT_S)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(sock=sock, ssl=context or server.ssl_context(),
                                    server_hostname=HOST, limit=limit),
            CONNECT_TIMEOUT_S)
    except BaseException:
        sock.close()
        raise
    return Conn(reader, writer)


async def ask(server: HostileServer, data: bytes, timeout: float,
              context: ssl.SSLContext | None = None) -> Answer | None:
    """``data`` on a new connection, and its answer (``None``: closed without one)."""
    conn = await connect(server, context=context)
    try:
        conn.writer.write(data)
        return await read_answer(conn.reader, timeout)
    finally:
        conn.abort()


async def write_or_stall(conn: Conn, data: bytes, stall_s: float) -> str:
    """Write ``data``; ``"sent"`` once our buffer drained, ``"stalled"`` if it did not drain
    within ``stall_s``, ``"closed"`` if the connection ended."""
    try:
        conn.writer.write(data)
        await asyncio.wait_for(conn.writer.drain(), stall_s)
    except TimeoutError:
        return "stalled"
    except (ConnectionError, ssl.SSLError):
        return "closed"
    return "closed" if conn.writer.transport.is_closing() else "sent"


LIVENESS_TIMEOUT_S = 30.0


async def answers(server: HostileServer) -> bool:
    """Whether the server answers a new connection's request: its event loop is running."""
    try:
        return await ask(server, request_head("GET", "/version"), LIVENESS_TIMEOUT_S) is not None
    except (OSError, TimeoutError):
        return False


async def write_until_paused(server: HostileServer, conn: Conn, data: bytes,
                             stall_s: float) -> str:
    """``write_or_stall``, except that a stall counts ("stalled") only if the server answered a
    new request meanwhile and still took nothing more of ours: it stopped reading this
    connection. One that took more was only busy ("sent": write on); one that does not answer
    at all has a blocked loop ("blocked"), which is no pause either."""
    state = await write_or_stall(conn, data, stall_s)
    if state != "stalled":
        return state
    unsent = conn.unsent
    if not await answers(server):
        return "blocked"
    await asyncio.sleep(0.1)
    if conn.writer.transport.is_closing():
        return "closed"
    return "stalled" if conn.unsent >= unsent else "sent"


def request_head(method: str, path: str, headers: Mapping[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", *(f"{k}: {v}" for k, v in
                                                               (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> dict[str, object]:
        try:
            value = json.loads(self.body)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def text(self) -> str:
        """Status code and, for a Status body, its reason and message (for reports)."""
        doc = self.json()
        if doc.get("kind") == "Status":
            return f"{self.status} {doc.get('reason')}: {str(doc.get('message'))[:120]}"
        if doc.get("kind"):
            return f"{self.status} {doc['kind']}"
        return f"{self.status} {self.body[:80]!r}"


async def read_answer(reader: asyncio.StreamReader, timeout: float,
                      body: bool = True) -> Answer | None:
    """One answer; its body too unless it is chunked (a stream) or ``body`` is False.

    ``None`` when the connection ends first; ``TimeoutError`` when nothing came in time, and
    ``ssl.SSLError`` for a TLS alert (a refused handshake shows here with TLS 1.3).
    """
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    answer = Answer(int(lines[0].split(" ", 2)[1]))
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            answer.headers[name.strip().lower()] = value.strip()
    length = answer.headers.get("content-length")
    if body and length is not None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            answer.body = await asyncio.wait_for(reader.readexactly(int(length)), timeout)
    return answer


async def closed_within(reader: asyncio.StreamReader, timeout: float) -> bool:
    """Read and drop everything until the connection ends (True) or ``timeout`` passes with
    nothing more to read (False)."""
    while True:
        try:
            data = await asyncio.wait_for(reader.read(1 << 20), timeout)
        except (ConnectionError, ssl.SSLError):
            return True
        except TimeoutError:
            return False
        if not data:
            return True


def websocket_head(path: str, headers: Mapping[str, str]) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return request_head("GET", path, {"Upgrade": "websocket", "Connection": "Upgrade",
                                      "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13",
                                      **headers})


def client_frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked client frame (RFC 6455 §5.2); the mask is zero, which is allowed and
    leaves the payload as it is (the server unmasks either way)."""
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    return head + b"\0\0\0\0" + payload


async def read_frame(reader: asyncio.StreamReader, timeout: float) -> tuple[int, int] | None:
    """The next server frame's ``(opcode, payload length)`` (payload read and dropped);
    ``None`` when the connection ends."""
    try:
        first = await asyncio.wait_for(reader.readexactly(2), timeout)
        size = first[1] & 0x7F
        if size == 126:
            size = struct.unpack("!H", await reader.readexactly(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", await reader.readexactly(8))[0]
        await asyncio.wait_for(reader.readexactly(size), timeout)
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
        return None
    return first[0] & 0x0F, size


# --- exchanges -----------------------------------------------------------------------------------

ANSWER_TIMEOUT_S = 5.0  # a hardened server answers these in milliseconds
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"

Result = Answer | None | BaseException


def summary(results: Sequence[Result]) -> str:
    """``"8x 400 BadRequest: ...; 1x no answer (TimeoutError)"``, most common first."""
    def text(result: Result) -> str:
        if isinstance(result, Answer):
            return result.text()
        if result is None:
            return "closed without an answer"
        return f"no answer ({type(result).__name__}: {str(result)[:80]})"

    counts = Counter(text(r) for r in results)
    return "; ".join(f"{n}x {what}" for what, n in counts.most_common(4))


async def exchanges(server: HostileServer, connections: int, requests: Sequence[bytes],
                    connect_to: Callable[[], Awaitable[Conn]] | None = None,
                    answer_timeout: float = ANSWER_TIMEOUT_S) -> tuple[list[Result], float]:
    """``requests`` in turn on each of ``connections`` connections at once; every answer (or
    why there was none) and the seconds until the last one."""
    began = time.monotonic()

    async def one() -> list[Result]:
        conn = await (connect_to() if connect_to else connect(server))
        results: list[Result] = []
        try:
            for data in requests:
                conn.writer.write(data)
                answer = await read_answer(conn.reader, answer_timeout)
                results.append(answer)
                if answer is None:
                    break
        finally:
            conn.abort()
        return results

    gathered = await asyncio.gather(*(one() for _ in range(connections)),
                                    return_exceptions=True)
    flat: list[Result] = []
    for each in gathered:
        flat.extend(each if isinstance(each, list) else [each])
    return flat, time.monotonic() - began


def post_request(server: HostileServer, body: bytes, content_type: str) -> bytes:
    return request_head("POST", CONFIGMAPS, {**server.auth(ATTACKER), "Content-Type":
                                             content_type, "Content-Length": str(len(body)),
                                             "Accept": "application/json"}) + body


def get_request(server: HostileServer, path: str, headers: Mapping[str, str]) -> bytes:
    return request_head("GET", path, {"Accept": "application/json", **headers})
