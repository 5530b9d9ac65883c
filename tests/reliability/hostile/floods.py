"""Attacks by volume and by slowness: pipelined requests never read, bodies that never end.

- ``pipelined_version``: TLS connections with no credentials write megabytes of pipelined
  ``GET /version`` and never read an answer. A hardened server answers a few, then stops
  reading that connection until its answers are read (Go serves one request at a time per
  connection and blocks writing): the attacker's writes stall, and server memory stays flat.
- ``pipelined_lists``: the same from an authenticated user, each request a list answer of
  ~130 KB: a thousand-fold amplification if the server queued the answers.
- ``unauthenticated_bodies``: 100 connections each send the head of a 3 MiB POST without
  credentials, then most of the body, and hold. kube authenticates once the head is read and
  answers 401 without reading the body, so no connection costs the server its body.
- ``trickled_body``: an authenticated chunked POST whose body comes a byte every second (a few
  in the long form) never completes; kube's timeout filter answers 504 after the request
  timeout (``--request-timeout``), body or not.

Each connection's result is one word (``stalled``, ``sent``, ``closed``) or an answer; the
outcome counts them. Attackers write with small socket buffers, so that bytes the server never
read do not hide in the kernel.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from tests.reliability.hostile.harness import Outcome
from tests.reliability.hostile.server import ATTACKER, HostileServer
from tests.reliability.hostile.wire import (
    CONFIGMAPS,
    Answer,
    Conn,
    connect,
    read_answer,
    request_head,
    summary,
    write_or_stall,
    write_until_paused,
)

SOCKET_BUFFER_BYTES = 64 * 1024
STALL_S = 1.0  # a write not drained for this long may mean the server stopped reading
MB = 1 << 20


@dataclass(frozen=True)
class Flood:
    connections: int
    megabytes: float  # per connection, at most
    hold_s: float  # connections stay open, unread, after writing (RSS is sampled meanwhile)


async def _flood(server: HostileServer, conn: Conn, request: bytes, flood: Flood,
                 ) -> tuple[str, int]:
    """Write pipelined ``request``s until ``flood.megabytes`` went or the server stopped
    reading: how it ended, and the bytes written. A stall that drains within ``flood.hold_s``
    was a busy server, not a pause: the flood goes on."""
    batch = request * max(1, 32 * 1024 // len(request))
    written = 0
    while written < flood.megabytes * MB:
        state = await write_until_paused(server, conn, batch, STALL_S)
        written += len(batch)
        if state == "stalled" and await _drains(conn, flood.hold_s):
            continue
        if state != "sent":
            return state, written
    return "sent", written


async def _drains(conn: Conn, within_s: float) -> bool:
    """Whether what we could not write yet is taken within ``within_s``."""
    deadline = time.monotonic() + within_s
    while conn.unsent and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not conn.unsent and not conn.writer.transport.is_closing()


async def pipelined(server: HostileServer, request: bytes, flood: Flood,
                    first: bytes = b"") -> Outcome:
    """Write ``first`` on each connection, flood them all, hold them unread, then see which
    the server left paused ("stalled"), or which took the last of our buffer during the hold
    ("resumed"); a flood the server took whole is "sent"."""
    began = time.monotonic()
    conns: list[Conn] = []
    try:
        for _ in range(flood.connections):
            conns.append(await connect(server, sndbuf=SOCKET_BUFFER_BYTES,
                                       rcvbuf=SOCKET_BUFFER_BYTES, limit=16 * 1024))
            conns[-1].writer.write(first)
        ends = await asyncio.gather(*(_flood(server, conn, request, flood) for conn in conns))
        seconds = time.monotonic() - began
        await asyncio.sleep(flood.hold_s)
        states = [("resumed" if state == "stalled" and not conn.unsent else state,
                   written - conn.unsent) for conn, (state, written) in zip(conns, ends,
                                                                            strict=True)]
    finally:
        for conn in conns:
            conn.abort()
    counts = Counter(state for state, _ in states)
    taken = sorted(n / MB for _, n in states)
    text = (f"{', '.join(f'{n}x {s}' for s, n in counts.items())} (server took "
            f"{taken[0]:.1f}-{taken[-1]:.1f} MB of {flood.megabytes:.0f} MB each)")
    # Every flood ended in a stall of ``hold_s`` (transient ones were written through), far short
    # of its size; "resumed" is a stall that then took the last of our buffer (TLS reads on into
    # its bounded input buffer after the application stops reading).
    paused = counts["stalled"] + counts["resumed"]
    return Outcome(paused == len(states), text, seconds, len(states))


VERSION = request_head("GET", "/version")
VERSION_FLOODS = {False: Flood(4, 16, 1.0), True: Flood(32, 64, 5.0)}


async def pipelined_version(server: HostileServer, long: bool) -> Outcome:
    return await pipelined(server, VERSION, VERSION_FLOODS[long])


async def pipelined_lists(server: HostileServer, long: bool) -> Outcome:
    # Enough that the kernel's socket buffers (several MB each way on loopback) cannot hold it.
    flood = Flood(16, 64, 5.0) if long else Flood(2, 16, 1.0)
    request = request_head("GET", CONFIGMAPS, {**server.auth(ATTACKER),
                                                "Accept": "application/json"})
    return await pipelined(server, request, flood)


# --- bodies ---------------------------------------------------------------------------------------

DECLARED_BODY_BYTES = 3 * MB  # kube's MaxRequestBodyBytes: the largest body not refused at once
PIECE = b"x" * (64 * 1024)


@dataclass
class BodyResult:
    answer: Answer | BaseException | None
    sent_bytes: int  # body bytes written when the answer came (or in all)
    seconds: float


async def _held_body(server: HostileServer, sent_until: int, hold_s: float) -> BodyResult:
    """Head and ``sent_until`` body bytes of a 3 MiB POST without credentials; the answer."""
    began = time.monotonic()
    conn = await connect(server, sndbuf=SOCKET_BUFFER_BYTES)
    sent = 0
    try:
        conn.writer.write(request_head("POST", CONFIGMAPS, {
            "Content-Type": "application/json", "Content-Length": str(DECLARED_BODY_BYTES)}))
        answer = asyncio.ensure_future(read_answer(conn.reader, hold_s + 30))
        while sent < sent_until and not answer.done():
            if await write_or_stall(conn, PIECE, STALL_S) != "sent":
                break
            sent += len(PIECE)
        try:
            got: Answer | BaseException | None = await asyncio.wait_for(answer, hold_s)
        except TimeoutError as exc:
            got = exc
        return BodyResult(got, sent, time.monotonic() - began)
    finally:
        conn.abort()


async def unauthenticated_bodies(server: HostileServer, long: bool) -> Outcome:
    connections, hold_s = (400, 10.0) if long else (100, 3.0)
    sent_until = DECLARED_BODY_BYTES - len(PIECE)  # all but the last piece: never complete
    results = await _each(connections, lambda: _held_body(server, sent_until, hold_s))
    done = [r for r in results if isinstance(r, BodyResult)]
    answers = [r.answer for r in done] + [r for r in results if isinstance(r, BaseException)]
    ok = len(done) == connections and all(
        isinstance(r.answer, Answer) and r.answer.status == 401 for r in done)
    sent = sorted(r.sent_bytes / MB for r in done) or [0.0]
    text = (f"{summary(answers)} (body sent before it: median {sent[len(sent) // 2]:.1f} MB, "
            f"max {sent[-1]:.1f} MB of {DECLARED_BODY_BYTES / MB:.0f} MB)")
    return Outcome(ok, text, max((r.seconds for r in done), default=0.0), connections)


# --- slowness -------------------------------------------------------------------------------------

def request_timeout_s(long: bool) -> float:
    return 60.0 if long else 2.0


def timeout_args(long: bool) -> Sequence[str]:
    return ("--request-timeout", f"{request_timeout_s(long):g}s")


# kube has two texts: its timeout filter's "... within the allotted timeout" (a body still
# arriving at the deadline) and the finisher's "... within requested timeout - context deadline
# exceeded" (a handler waiting on the store); both are its 504 Timeout.
TIMEOUT_MESSAGE = "Timeout: request did not complete within"
SLACK_S = 5.0


async def _trickle(server: HostileServer, interval_s: float, give_up_s: float) -> BodyResult:
    began = time.monotonic()
    conn = await connect(server)
    sent = 0
    try:
        conn.writer.write(request_head("POST", CONFIGMAPS, {
            **server.auth(ATTACKER), "Content-Type": "application/json",
            "Transfer-Encoding": "chunked"}))
        answer = asyncio.ensure_future(read_answer(conn.reader, give_up_s))
        while not answer.done() and time.monotonic() - began < give_up_s:
            conn.writer.write(b"1\r\n \r\n")  # one byte of body (JSON whitespace)
            sent += 1
            await asyncio.wait([answer], timeout=interval_s)
        if not answer.done():
            answer.cancel()
            return BodyResult(TimeoutError("no answer"), sent, time.monotonic() - began)
        return BodyResult(answer.exception() or answer.result(), sent, time.monotonic() - began)
    finally:
        conn.abort()


def _timed_out(result: BodyResult, timeout_s: float) -> bool:
    answer = result.answer
    return (isinstance(answer, Answer) and answer.status == 504
            and answer.json().get("reason") == "Timeout"
            and str(answer.json().get("message")).startswith(TIMEOUT_MESSAGE)
            and 0.9 * timeout_s <= result.seconds <= timeout_s + SLACK_S)


async def trickled_body(server: HostileServer, long: bool) -> Outcome:
    connections, interval_s = (50, 5.0) if long else (4, 1.0)
    timeout_s = request_timeout_s(long)
    results = await _each(connections, lambda: _trickle(server, interval_s,
                                                        timeout_s + SLACK_S))
    done = [r for r in results if isinstance(r, BodyResult)]
    ok = len(done) == connections and all(_timed_out(r, timeout_s) for r in done)
    answers = [r.answer for r in done] + [r for r in results if isinstance(r, BaseException)]
    times = sorted(r.seconds for r in done) or [0.0]
    text = (f"{summary(answers)} after {times[0]:.1f}-{times[-1]:.1f} s "
            f"(request timeout {timeout_s:g} s, a body byte every {interval_s:g} s)")
    return Outcome(ok, text, times[-1], connections)


async def _each(n: int, make: Callable[[], Awaitable[BodyResult]],
                ) -> list[BodyResult | BaseException]:
    return list(await asyncio.gather(*(make() for _ in range(n)), return_exceptions=True))
