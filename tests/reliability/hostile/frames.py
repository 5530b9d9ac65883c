"""WebSocket attacks on a watch: control frames that cost the server what the client never pays.

- ``big_pings``: pings of 1 MiB. RFC 6455 §5.5 caps a control frame's payload at 125 bytes; a
  server echoing each in a pong writes a megabyte per ping to a client that need not read it.
  Hardened: the connection is closed (the RFC's "fail the connection"; the issue's choice), or,
  as kube's golang.org/x/net/websocket does, the pong carries at most 125 bytes.
- ``unread_pongs``: many small pings from a client that never reads. Each pong is owed to it;
  hardened: the connection is closed once too many are owed, or the server stops reading it
  (kube's watch writes each pong synchronously, so its reader blocks; kubewire also reads a
  watch's client at most ``CLIENT_BYTES_PER_S`` on average, so the flood costs the loop a bounded
  share): either way owed pongs stay bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from tests.reliability.hostile.floods import MB, SOCKET_BUFFER_BYTES, STALL_S
from tests.reliability.hostile.harness import Outcome
from tests.reliability.hostile.server import ATTACKER, HostileServer
from tests.reliability.hostile.wire import (
    CONFIGMAPS,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    Conn,
    client_frame,
    connect,
    read_answer,
    read_frame,
    websocket_head,
    write_until_paused,
)

MAX_CONTROL_PAYLOAD = 125  # RFC 6455 §5.5
READ_IDLE_S = 3.0  # reading back: nothing more for this long and no close means still open


@dataclass
class PingResult:
    writing: str = "sent"  # "sent", "stalled" (stopped reading), "blocked" or "closed"
    pongs: int = 0
    largest_pong: int = 0
    closed: bool = False
    seconds: float = 0.0
    error: str = ""
    sizes: list[int] = field(default_factory=list)

    def word(self) -> str:
        if self.error:
            return self.error
        end = "closed" if self.closed else "open"
        return f"writes {self.writing}, {end}"


async def open_watch_socket(server: HostileServer, rcvbuf: int | None = None) -> Conn:
    conn = await connect(server, rcvbuf=rcvbuf, sndbuf=SOCKET_BUFFER_BYTES, limit=16 * 1024)
    conn.writer.write(websocket_head(f"{CONFIGMAPS}?watch=1", server.auth(ATTACKER)))
    answer = await read_answer(conn.reader, 10.0, body=False)
    if answer is None or answer.status != 101:
        conn.abort()
        raise ConnectionError(f"no WebSocket: {answer.text() if answer else 'closed'}")
    return conn


async def _read_back(conn: Conn, result: PingResult) -> None:
    """Read frames until the connection ends or goes quiet; count the pongs."""
    while True:
        try:
            frame = await read_frame(conn.reader, READ_IDLE_S)
        except TimeoutError:
            return
        if frame is None:
            result.closed = True
            return
        opcode, size = frame
        if opcode == OP_PONG:
            result.pongs += 1
            result.largest_pong = max(result.largest_pong, size)
        elif opcode == OP_CLOSE:
            result.closed = True
            return


async def _ping(server: HostileServer, frames: bytes, megabytes: float,
                rcvbuf: int | None) -> PingResult:
    """Write ``frames`` over and over, never reading, up to ``megabytes``; then read back."""
    result = PingResult()
    began = time.monotonic()
    try:
        conn = await open_watch_socket(server, rcvbuf)
    except (OSError, TimeoutError) as exc:
        return PingResult(error=f"{type(exc).__name__}: {exc}")
    try:
        written = 0
        while written < megabytes * MB and result.writing == "sent":
            result.writing = await write_until_paused(server, conn, frames, STALL_S)
            written += len(frames)
        await _read_back(conn, result)
    finally:
        conn.abort()
    result.seconds = time.monotonic() - began
    return result


def _summary(results: list[PingResult]) -> str:
    words = Counter(r.word() for r in results)
    pongs = sum(r.pongs for r in results)
    largest = max((r.largest_pong for r in results), default=0)
    return (f"{'; '.join(f'{n}x {w}' for w, n in words.items())}; {pongs} pongs read back "
            f"(largest {largest} bytes)")


async def big_pings(server: HostileServer, long: bool) -> Outcome:
    connections, pings = (32, 16) if long else (4, 4)
    frame = client_frame(OP_PING, b"p" * MB)  # 1 MiB: within the old per-frame bound
    results = await asyncio.gather(*(_ping(server, frame, pings, None)
                                     for _ in range(connections)))
    ok = all(not r.error and (r.closed or r.largest_pong <= MAX_CONTROL_PAYLOAD)
             for r in results)
    return Outcome(ok, _summary(results), max(r.seconds for r in results), connections)


async def unread_pongs(server: HostileServer, long: bool) -> Outcome:
    connections, megabytes = (32, 32.0) if long else (4, 8.0)
    frames = client_frame(OP_PING, b"p" * MAX_CONTROL_PAYLOAD) * 256  # ~33 KB a write
    results = await asyncio.gather(*(_ping(server, frames, megabytes, 4096)
                                     for _ in range(connections)))
    ok = all(not r.error and (r.closed or r.writing == "stalled") for r in results)
    return Outcome(ok, _summary(results), max(r.seconds for r in results), connections)
