"""A small HTTP/1.1 server on an asyncio ``Protocol`` (httptools parses, we frame).

Why not aiohttp or an ASGI stack: a watch is a long-lived chunked response that the watch cache
writes to directly, with no task, queue or body-wrapping layer per watcher. Here a streaming
response is a ``ChunkedStream`` over the connection's transport; the transport's own flow
control (``pause_writing``/``resume_writing``) is the back-pressure signal the watch cache reads.

Guarantees:
- requests on one connection are answered in order (pipelined requests wait their turn);
- a handler either returns a ``Response`` or takes over the connection with
  ``Request.start_stream`` and returns ``None``; the connection serves its next request only
  after the stream is closed;
- request heads and bodies are bounded (``Limits``); going over answers 413 (a Status) or Go's
  431 and closes. A head may be as long as Go's (``max_head_bytes`` plus Go's 4 KiB), so a
  URL is not limited to httptools' 64 KiB;
- back-pressure, as Go reads a connection's next request only after answering the last: at
  most ``max_queued_requests`` requests wait parsed behind the one being served, and while the
  client leaves answers unread (the transport is over its high-water mark) no request is
  started or parsed; then the connection stops parsing (bytes already read are kept,
  unparsed) and stops reading. Input is
  parsed in slices so one read cannot queue thousands of small requests. A connection whose
  answers stay unread for ``request_timeout_s`` is dropped (kube's timeout filter kills a
  request whose handler could not finish writing in time);
- request bodies read and not yet handed to a handler are bounded per connection
  (``max_connection_body_bytes``, while another request waits) and server-wide
  (``max_pending_body_bytes``: each body reserves its announced size before it is read, see
  ``http_input.BodyBudget``): past either, the connection stops reading until there is room;
- a request with a body is checked on its head first (``HTTPServer.head_check``: the server
  authenticates there, as kube's filters do before a handler reads the body); a refusal is
  answered at once and the body is never buffered;
- a body must arrive whole within ``Limits.request_timeout_s`` of its head (paused or not), else
  kube's 504 Timeout answer and the connection closes; a request's handler, a watch included,
  is not timed here;
- after a connection's last answer (a refusal, a protocol error, ``Connection: close``) nothing
  more is parsed; what the client still sends is read and dropped and the close waits a moment
  (Go's ``closeWriteAndWait``), so it does not reset the connection under an unread answer;
- a connection idle between requests is closed after ``Limits.keepalive_timeout_s``;
- while a chunked stream is open, bytes the client sends are kept unparsed (reading pauses
  past ``_MAX_HELD_BYTES``) and parsed when the stream ends, as Go reads the next request only
  after a response; the connection holds no HTTP parser meanwhile, so an idle watch costs
  little memory (a WebSocket never returns to HTTP and drops its parser for good);
- a request head (request line and headers) must arrive whole within
  ``Limits.header_timeout_s`` of its first byte (of the connection, for the first request),
  else the connection is closed without an answer, as Go's ``ReadHeaderTimeout`` does: a
  slow-loris client cannot hold a connection by sending its head a byte at a time;
- a lost connection keeps nothing: its parser, held bytes, queued requests and body bytes
  (given back to the budget) go with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any, NoReturn

import httptools

from kubewire.server.wire.http_input import (
    HEAD_SLACK_BYTES,
    HEAD_TOO_LARGE_ANSWER,
    REQUEST_TIMEOUT_BODY,
    REQUEST_TIMEOUT_CONTENT_TYPE,
    BodyBudget,
    InvalidTarget,
    expects_continue,
    has_body,
    parse_query,
    split_target,
)
from kubewire.server.wire.streams import EventStream
from kubewire.server.wire.websocket import WebSocketStream, handshake, is_websocket_request
from kubewire.status import RequestEntityTooLarge, StatusError

log = logging.getLogger(__name__)
GZIP_THRESHOLD_BYTES = 128 * 1024  # kube's defaultGzipThresholdBytes
_MAX_UPGRADE_TAIL = 64 * 1024  # client bytes kept while an upgrade request is being decided
_MAX_HELD_BYTES = 64 * 1024  # client bytes kept during a stream before reading pauses
# Input is parsed this much at a time (more for a body of known length), so that one read of
# tiny pipelined requests queues at most ~230 of them before the queue bound is checked, and
# a body waiting for the budget has at most this much of it parsed.
_PARSE_SLICE_BYTES = 4096
_REQUEST_LINE_BYTES = 16  # what a request line adds to its target ("GET ", " HTTP/1.1\r\n"...)
_LINGER_S = 0.5  # Go's rstAvoidanceDelay: input is read and dropped this long before a close
# Between requests (never written to: ``on_message_begin`` gives each request its own).
_NO_HEADERS: dict[str, str] = {}

_REASONS = {
    101: "Switching Protocols", 200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 406: "Not Acceptable", 409: "Conflict", 410: "Gone",
    413: "Request Entity Too Large", 415: "Unsupported Media Type", 417: "Expectation Failed",
    422: "Unprocessable Entity", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-connection and server-wide bounds. Defaults follow kube-apiserver where it has one."""

    max_body_bytes: int = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes (3 MiB)
    max_head_bytes: int = 1024 * 1024  # Go net/http DefaultMaxHeaderBytes (1 MiB), + Go's 4 KiB
    keepalive_timeout_s: float = 120.0  # idle time between requests before closing
    header_timeout_s: float = 32.0  # kube-apiserver's ReadHeaderTimeout: time to read a head
    write_high_water_bytes: int = 256 * 1024  # transport buffer at which a stream is "paused"
    max_requests_inflight: int = 400  # kube --max-requests-inflight (read-only; 0 = no limit)
    max_mutating_requests_inflight: int = 200  # kube --max-mutating-requests-inflight
    max_watches_per_user: int = 10_000  # kubewire's own bound on one user's open watches
    max_object_bytes: int = 1536 * 1024  # one stored object, encoded (etcd's default 1.5 MiB)
    request_timeout_s: float = 60.0  # kube --request-timeout: a whole non-watch request
    # Pipelined requests parsed ahead of the one being served (Go parses none ahead).
    max_queued_requests: int = 8
    # Body bytes one connection holds, read and not yet handed to a handler, beyond which it
    # stops reading while another request of it waits: one request's worth, as in Go.
    max_connection_body_bytes: int = 3 * 1024 * 1024
    # The same over all connections, each body reserving its announced size before it is read;
    # a body that does not fit waits and its connection stops reading (0: no bound).
    max_pending_body_bytes: int = 64 * 1024 * 1024


@dataclass(slots=True)
class Response:
    """A complete (non-streamed) response."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)
    compressible: bool = False  # an API object response: gzip when large and accepted


class Request:
    """One parsed request. ``query`` keeps blank values and repeated keys, as Go does.

    ``headers`` joins the values of a repeated header with ", "; ``header_values`` has them
    one by one, as Go's ``Header[name]`` (impersonation reads each ``Impersonate-Group``).
    ``received`` is the loop time its head was read: its deadline counts from there.
    """

    __slots__ = ("_conn", "_query", "_repeated", "authenticated", "body", "headers", "method",
                 "path", "raw_query", "received", "stream")

    def __init__(self, conn: HTTPConnection, method: str, url: bytes,
                 headers: dict[str, str], body: bytes) -> None:
        self.path, self.raw_query = split_target(url)  # InvalidTarget: answered 400
        self._conn = conn
        self._query: dict[str, list[str]] | None = None
        # Set by the connection for headers that came more than once (rare).
        self._repeated: dict[str, list[str]] | None = None
        self.received = asyncio.get_running_loop().time()
        # Who the server's head check found the request to be from (before its body was
        # read), kept so that the request is not authenticated again once it is served.
        self.authenticated: object = None
        self.method = method
        self.headers = headers
        self.body = body
        self.stream: ChunkedStream | WebSocketStream | None = None

    @property
    def query(self) -> dict[str, list[str]]:
        if self._query is None:
            self._query = parse_query(self.raw_query)
        return self._query

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name, default)

    def header_values(self, name: str) -> list[str]:
        """Each value of the header ``name`` (lower-case), one per header line."""
        if self._repeated is not None and name in self._repeated:
            return self._repeated[name]
        value = self.headers.get(name)
        return [] if value is None else [value]

    def drop_headers(self, names: list[str]) -> None:
        """Forget headers a filter has consumed (kube deletes impersonation headers)."""
        for name in names:
            self.headers.pop(name, None)
            if self._repeated is not None:
                self._repeated.pop(name, None)

    def extra(self, name: str) -> Any:
        """Transport facts: ``peername``, ``peercert``, ``ssl_object``..."""
        return self._conn.transport_extra(name)

    def start_stream(self, status: int = 200,
                     headers: list[tuple[str, str]] | None = None) -> ChunkedStream:
        """Send the head of a chunked response now and hand back its stream."""
        if self.stream is not None:
            raise RuntimeError("stream already started")
        stream = self._conn.start_stream(status, headers or [])
        self.stream = stream
        return stream

    def start_event_stream(self, headers: list[tuple[str, str]],
                           ) -> ChunkedStream | WebSocketStream:
        """A stream of events: a WebSocket if the request asked to upgrade, else chunked 200.

        Raises ``HandshakeError`` (a raw HTTP answer) before writing anything when the
        WebSocket handshake is malformed.
        """
        if is_websocket_request(self.headers):
            return self.start_websocket(handshake(self.headers).head_headers())
        return self.start_stream(200, headers)

    def start_websocket(self, headers: list[tuple[str, str]]) -> WebSocketStream:
        """Answer 101 with the handshake ``headers``; the connection now carries frames."""
        if self.stream is not None:
            raise RuntimeError("stream already started")
        stream = self._conn.start_websocket(headers)
        self.stream = stream
        return stream


class ChunkedStream(EventStream):
    """The body of a chunked response, written straight to the connection's transport."""

    __slots__ = ()
    framing = "chunked"
    _conn: HTTPConnection

    @staticmethod
    def frame(lines: list[bytes]) -> bytes:
        """All ``lines`` as one chunk: pending events coalesce into one write."""
        return frame_chunk(b"".join(lines))

    def write(self, data: bytes) -> None:
        """Frame ``data`` as one chunk and write it."""
        if not self.closed and data:
            self._conn.write(frame_chunk(data))

    def buffered_bytes(self) -> int:
        return self._conn.buffered_bytes()

    def close(self) -> None:
        """End the body with the zero-length chunk; the connection may serve another request."""
        if self.closed:
            return
        self._conn.write(b"0\r\n\r\n")
        self._finish()
        self._conn.stream_finished(self)


def accepts_gzip(accept_encoding: str) -> bool:
    """kube's ``wantsCompressedResponse``: ``gzip`` as a whole token of Accept-Encoding."""
    for token in accept_encoding.split(","):
        name, _, params = token.strip().partition(";")
        if name.strip().lower() == "gzip":
            return params.replace(" ", "").lower() not in ("q=0", "q=0.0", "q=0.00", "q=0.000")
    return False


def frame_chunk(data: bytes) -> bytes:
    """HTTP/1.1 chunk framing: ``<hex length>\\r\\n<data>\\r\\n``."""
    return b"%x\r\n%b\r\n" % (len(data), data)


def http_date() -> str:
    """The Date header's value, formatted once per second."""
    return _http_date(int(time.time()))


@functools.lru_cache(maxsize=1)
def _http_date(second: int) -> str:
    return formatdate(second, usegmt=True)


def render_head(status: int, headers: list[tuple[str, str]], *, date: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"]
    lines.extend(f"{k}: {v}\r\n" for k, v in headers)
    if date:
        lines.append(f"Date: {http_date()}\r\n")
    lines.append("\r\n")
    text = "".join(lines)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:  # request text in a header (a Warning naming a field): Go sends
        return text.encode("utf-8", "replace")  # its UTF-8 bytes as they are


Handler = Callable[[Request], Awaitable[Response | None]]
# Called with a request whose head announces a body, before any of the body is read: a
# ``Response`` refuses it (answered at once, the body never buffered), None lets it through.
HeadCheck = Callable[[Request], Response | None]


class HTTPConnection(asyncio.Protocol):
    """One client connection: parse requests, run the handler, write responses in order."""

    # An idle watch is mostly this object: slots, and no parser, head or body while streaming.
    __slots__ = ("_body", "_body_bytes", "_body_left", "_feeding", "_head_bytes", "_headers",
                 "_held", "_in_message", "_input_closed", "_keep_alive", "_last_answer",
                 "_limits", "_parser", "_pending", "_queued_body_bytes", "_reading_body",
                 "_reading_head", "_reading_paused", "_repeated", "_request", "_reserved",
                 "_server", "_stream", "_task", "_timer", "_transport", "_upgrade_tail", "_url",
                 "_waiting_budget", "_write_timer", "write_paused")

    def __init__(self, server: HTTPServer) -> None:
        self._server = server
        self._limits = server.limits
        self._transport: asyncio.Transport | None = None
        # None while a stream is open: bytes then wait in ``_held``
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self._held: bytes | bytearray = b""  # read, not parsed yet; a bytearray once kept
        self._reading_paused = False
        self._feeding = False  # inside ``_feed`` (a callback must not feed again)
        # the request being read: its head so far, then (head complete) the Request and body
        self._url = b""
        self._headers = _NO_HEADERS
        self._repeated: dict[str, list[str]] | None = None  # values of repeated headers
        self._head_bytes = 0
        self._request: Request | None = None
        # One piece as it came; more grow one bytearray, whose large buffer gets a mapping of
        # its own and goes back to the system when freed (a list of pieces left the heap full
        # of holes after many large bodies: +40 MB of RSS kept after an attack, +9 MB this way).
        self._body: bytes | bytearray = b""
        self._body_bytes = 0
        self._body_left = -1  # what Content-Length still announces; -1: unknown (chunked)
        self._in_message = False  # the parser is inside a request (it cannot be replaced)
        self._reading_head = False  # a head has begun and not completed (its timer runs)
        self._reading_body = False  # a body is being read (the request timer runs)
        self._pending: list[Request] | None = None  # requests read, not yet started (pipelined)
        self._queued_body_bytes = 0  # bodies of the requests in ``_pending`` (budgeted)
        self._reserved = 0  # budget reserved for the body being read
        self._waiting_budget = False  # that reservation waits: the body is not parsed
        self._task: asyncio.Task[None] | None = None
        self._stream: ChunkedStream | WebSocketStream | None = None
        self._upgrade_tail: bytes | None = None  # client bytes after an Upgrade request's head
        self._keep_alive = True
        self._input_closed = False  # nothing more the client sends is parsed
        self._last_answer: bytes | None = None  # the closing answer, once those ahead are out
        self._timer: asyncio.TimerHandle | None = None  # head, body, keep-alive or linger
        self._write_timer: asyncio.TimerHandle | None = None  # answers left unread too long
        self.write_paused = False

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport
        self._transport = transport  # type: ignore[assignment]
        self.set_write_high_water(None)
        self._server.connections.add(self)
        self._arm_timer(self._limits.header_timeout_s, self.close)

    def data_received(self, data: bytes) -> None:
        if self._upgrade_tail is not None:  # past an Upgrade request: frames, not HTTP
            if isinstance(self._stream, WebSocketStream):
                self._stream.feed(data)
            elif len(self._upgrade_tail) < _MAX_UPGRADE_TAIL:
                self._upgrade_tail += data
            return
        if self._stream is None and self._input_closed:
            return  # read and dropped: a close with unread input would reset the connection
        if self._stream is not None or self._held or not self._may_parse():
            self._hold(data)  # the next request is read after the stream, or once there is room
            return
        self._feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        server = self._server
        server.connections.discard(self)
        self._drop_reservation()
        self._release_queued(self._queued_body_bytes)
        self._cancel_timer()
        self._cancel_write_timer()
        if self._stream is not None and not self._stream.closed:
            self._stream._finish()
        self._stream = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._transport = None
        # Keep nothing: the connection object may outlive the socket (a task, a stream).
        self._parser = None
        self._held = b""
        self._pending = None
        self._request = None
        self._body = b""
        self._last_answer = None

    def pause_writing(self) -> None:
        self.write_paused = True
        if self._stream is None:  # a stream's writer has its own policy (storage/watcher.py)
            self._arm_write_timer()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._cancel_write_timer()
        stream = self._stream
        if stream is not None:
            if stream.on_resume is not None:
                stream.on_resume()
            return
        if self._task is None:  # answers were drained: serve what waits, read on
            self._maybe_start_next()
            self._resume_parsing()

    # -- reading: parse while there is room ------------------------------------------------
    def _may_parse(self) -> bool:
        """Whether more input may be parsed now; if not, it is held and reading pauses."""
        if (self._parser is None or self._stream is not None or self._input_closed
                or self._waiting_budget):
            return False
        limits = self._limits
        pending = self._pending  # room comes when a waiting request starts (answers drained)
        return not pending or not (
            self.write_paused or len(pending) >= limits.max_queued_requests
            or self._queued_body_bytes + self._body_bytes > limits.max_connection_body_bytes)

    def _feed(self, data: bytes | bytearray) -> None:
        """Parse ``data`` a slice at a time while parsing may go on; hold the rest. (Callers
        have checked ``_may_parse``.)"""
        view = memoryview(data)
        at = 0
        self._feeding = True
        try:
            if len(view) <= _PARSE_SLICE_BYTES:  # the usual read: one slice, already allowed
                self._parse(view, 0, len(view))
                return
            while at < len(view):
                if not self._may_parse():
                    if not self._input_closed:
                        self._hold(view[at:])
                    return
                end = at + self._slice_bytes()
                if not self._parse(view, at, end):
                    return
                at = end
        finally:
            self._feeding = False
            if self._reading_body and self._timer is None and not self._input_closed:
                # A body not whole in the read that brought its head: its time runs from now.
                # (Armed here, not per request: most bodies come with their head.)
                self._arm_timer(self._limits.request_timeout_s, self._body_timed_out)

    def _slice_bytes(self) -> int:
        """How much to parse at once: the rest of a body of known length (its budget is
        reserved), otherwise a small slice, so the queue bound is checked every few requests."""
        return max(self._body_left, _PARSE_SLICE_BYTES)

    def _parse(self, view: memoryview, at: int, end: int) -> bool:
        """Feed ``view[at:end]`` to the parser; False once this connection reads no more HTTP."""
        parser = self._parser
        assert parser is not None  # _may_parse checked
        try:
            parser.feed_data(view[at:end])
        except httptools.HttpParserUpgrade as upgrade:
            # The request was completed (and queued) first; no more HTTP on this connection.
            self._upgrade_tail = bytes(view[at + upgrade.args[0]:]) if upgrade.args else b""
            self._keep_alive = False
            self._parser = None
            return False
        except httptools.HttpParserCallbackError as exc:  # a callback raised inside httptools
            if not isinstance(exc.__context__, _Answered):
                log.error("HTTP parser callback failed", exc_info=exc.__context__)
                self._answer_last(self._plain(400, b"malformed HTTP request"))
            return False
        except httptools.HttpParserError:
            self._answer_last(self._plain(400, b"malformed HTTP request"))
            return False
        return not self._input_closed

    def _hold(self, data: bytes | memoryview) -> None:
        """Keep bytes that cannot be parsed yet, and let the kernel hold the rest: at once, or
        during a stream past ``_MAX_HELD_BYTES`` (a watch keeps reading so that a client that
        closes is noticed; one that closes meanwhile is noticed at the next write)."""
        if self._held:
            self._held += data  # in place: many small reads must not copy all that is kept
        else:
            self._held = bytearray(data)
        if self._reading_paused or (self._stream is not None
                                    and len(self._held) < _MAX_HELD_BYTES):
            return
        self._reading_paused = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def _resume_parsing(self) -> None:
        """Parse what was held once nothing blocks parsing, then read from the socket again."""
        if self._feeding or self._transport is None:
            return
        if not self._held and not self._reading_paused and self._parser is not None:
            return  # nothing waits: the usual case after an answer
        if (self._parser is None and self._stream is None and self._upgrade_tail is None
                and not self._input_closed):
            self._parser = httptools.HttpRequestParser(self)  # a stream ended
        if not self._may_parse():
            return
        held, self._held = self._held, b""
        if held:
            self._feed(held)
        if not self._held:
            self._resume_reading()

    def throttle_reading(self, seconds: float) -> None:
        """A WebSocket client over its budget: read nothing from it for ``seconds``."""
        if self._transport is None or self._transport.is_closing():
            return
        if not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        self._arm_timer(seconds, self._resume_reading)

    def _resume_reading(self) -> None:
        if self._reading_paused:
            self._reading_paused = False
            if self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()

    def _budget_granted(self) -> None:
        """The body's reservation was granted: parse it, on the next loop turn."""
        self._waiting_budget = False
        asyncio.get_running_loop().call_soon(self._resume_parsing)

    def _drop_reservation(self) -> None:
        """The body being read is gone: give back (or withdraw) its reservation."""
        if self._waiting_budget:
            self._server.budget.cancel(self._budget_granted)
            self._waiting_budget = False
        elif self._reserved:
            self._server.budget.release(self._reserved)
        self._reserved = 0

    def _settle_reservation(self, size: int) -> None:
        """A body is whole: the budget now counts its ``size`` (a reservation is never less)."""
        budget = self._server.budget
        if self._waiting_budget:  # it was whole within the slice that ended its head
            budget.cancel(self._budget_granted)
            self._waiting_budget = False
            budget.take(size)
        else:
            budget.release(self._reserved - size)
        self._reserved = 0
        self._queued_body_bytes += size

    def _release_queued(self, n: int) -> None:
        """A queued request's body is handed to its handler (or dropped)."""
        if n:
            self._queued_body_bytes -= n
            self._server.budget.release(n)

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._in_message = True
        self._reading_head = True
        self._arm_timer(self._limits.header_timeout_s, self.close)
        self._url = b""
        self._headers = {}
        self._repeated = None
        self._head_bytes = _REQUEST_LINE_BYTES
        self._body = b""
        self._body_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        old = self._headers.get(key)
        if old is None:
            self._headers[key] = text
            return
        # Repeats are joined once the head is complete: joining here, per line, copied the
        # joined value each time (a 1 MiB head of one repeated header held the loop ~1 s).
        if self._repeated is None:
            self._repeated = {}
        values = self._repeated.get(key)
        if values is None:
            self._repeated[key] = [old, text]
        else:
            values.append(text)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        self._cancel_timer()
        request = self._head_request()
        expect = request.headers.get("expect")
        if expect is not None and not expects_continue(expect):
            # Go's sendExpectationFailed: no body, no content type, and the connection closes.
            self._refuse(render_head(417, [("Connection", "close"), ("Content-Length", "0")]))
        if has_body(request.headers):
            self._admit_body(request)
            if expect is not None:
                self._send_continue()
        self._request = request

    def on_body(self, body: bytes) -> None:
        n = len(body)
        if self._body_bytes + n > self._limits.max_body_bytes:
            self._refuse(self._too_large())
        self._body_bytes += n
        if self._body_left > 0:
            self._body_left -= n
        so_far = self._body
        if not so_far:
            self._body = body  # the usual body: one piece, kept without a copy
        elif isinstance(so_far, bytearray):
            so_far += body
        else:
            grown = bytearray(so_far)
            grown += body
            self._body = grown

    def on_message_complete(self) -> None:
        parser = self._parser
        request = self._request
        assert parser is not None and request is not None  # inside its feed_data, head done
        body = self._body
        # The request owns these now; the connection keeps none of them while it is served.
        self._request, self._body = None, b""
        if body:
            request.body = bytes(body) if isinstance(body, bytearray) else body
        self._body_bytes = 0
        self._in_message = False
        if self._reading_body:
            self._reading_body = False
            self._body_left = -1
            self._cancel_timer()
            self._settle_reservation(len(request.body))
        if self._pending is None:
            self._pending = [request]
        else:
            self._pending.append(request)
        closing = not parser.should_keep_alive() and not parser.should_upgrade()
        if closing:  # Go reads nothing after a Connection: close request
            self._keep_alive = False
            self._input_closed = True
            self._parser = None
        self._maybe_start_next()
        if closing:
            raise _Answered  # stops the parser here

    def _head_request(self) -> Request:
        parser = self._parser
        assert parser is not None  # called from inside its feed_data
        url, headers, repeated = self._url, self._headers, self._repeated
        self._url, self._headers, self._repeated = b"", _NO_HEADERS, None
        if repeated is not None:
            for key, values in repeated.items():
                headers[key] = ", ".join(values)
        try:
            request = Request(self, parser.get_method().decode("latin-1"), url, headers, b"")
        except InvalidTarget:
            self._refuse(self._plain(400, b"malformed request target"))
        request._repeated = repeated
        return request

    def _admit_body(self, request: Request) -> None:
        """Before a body is read: the server's check of the head (authentication), the size
        the head announces, and the body's reservation in the budget (if it must wait, the body
        is not parsed meanwhile; the request timer, armed by ``_feed``, runs all the same)."""
        check = self._server.head_check
        refusal = None if check is None else check(request)
        if refusal is not None:
            self._refuse(self._render(refusal, closing=True))
        length = request.headers.get("content-length", "")
        size = int(length) if length.isdigit() else -1
        if size > self._limits.max_body_bytes:
            self._refuse(self._too_large())
        self._reading_body = True
        self._body_left = size
        self._reserved = size if size >= 0 else self._limits.max_body_bytes
        self._waiting_budget = not self._server.budget.reserve(self._reserved,
                                                               self._budget_granted)

    def _send_continue(self) -> None:
        """Go net/http (server.go ``readRequest``): ``100-continue`` on HTTP/1.1 with a body
        gets the interim ``100 Continue`` (curl waits a second for it before sending a body);
        only between responses, so an interim line never lands inside an earlier response."""
        busy = self._task is not None or self._stream is not None or self._pending
        parser = self._parser
        assert parser is not None  # called from inside its feed_data
        if parser.get_http_version() == "1.1" and not busy:
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _count_head(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > self._limits.max_head_bytes + HEAD_SLACK_BYTES:
            self._refuse(HEAD_TOO_LARGE_ANSWER)

    # -- request scheduling ----------------------------------------------------------------
    def _maybe_start_next(self) -> None:
        pending = self._pending
        if (self._task is not None or self._stream is not None or not pending
                or self._transport is None or self.write_paused):
            return
        request = pending.pop(0)
        if not pending:
            self._pending = None
        if request.body:
            self._release_queued(len(request.body))  # the handler holds it now
        self._task = asyncio.get_running_loop().create_task(self._run(request))

    async def _run(self, request: Request) -> None:
        try:
            response = await self._server.handler(request)
        except asyncio.CancelledError:
            raise
        except StatusError as exc:  # the app normally maps these; a fallback keeps it sane
            response = _status_response(exc)
        except Exception:
            log.exception("unhandled error in handler")
            response = Response(500, b'{"kind":"Status","apiVersion":"v1","metadata":{},'
                                     b'"status":"Failure","message":"internal error",'
                                     b'"reason":"InternalError","code":500}')
        finally:
            self._task = None
        if request.stream is None:
            if response is not None:
                self.send_response(response, head_only=request.method == "HEAD",
                                   accept_encoding=request.header("accept-encoding"))
            self._after_response()
        elif request.stream.closed:  # the stream ended before the handler returned
            self._after_response()

    def _after_response(self) -> None:
        if self._server.closing:
            self.close()
            return
        if self._pending:
            self._maybe_start_next()
        elif self._last_answer is not None:
            answer, self._last_answer = self._last_answer, None
            self._write_last(answer)
            return
        elif not self._keep_alive:
            self.close()
            return
        self._resume_parsing()
        if self._task is not None or self._stream is not None or self._input_closed:
            return
        if self.write_paused and self._write_timer is None:
            self._arm_write_timer()  # a stream ended with its answers unread
        if self._timer is None:
            self._arm_next_timer()

    def _arm_next_timer(self) -> None:
        """After an answer (a stream stopped the timers): the bound of what is read now."""
        if self._reading_head:  # a pipelined head: its time starts again now
            self._arm_timer(self._limits.header_timeout_s, self.close)
        elif self._reading_body:
            self._arm_timer(self._limits.request_timeout_s, self._body_timed_out)
        elif not self._pending:
            self._arm_timer(self._limits.keepalive_timeout_s, self.close)

    # -- responses -------------------------------------------------------------------------
    def send_response(self, response: Response, *, head_only: bool = False,
                      accept_encoding: str = "") -> None:
        last = not self._keep_alive and not self._pending and self._last_answer is None
        self.write(self._render(response, head_only=head_only, accept_encoding=accept_encoding,
                                closing=last))

    def _render(self, response: Response, *, head_only: bool = False, accept_encoding: str = "",
                closing: bool = False) -> bytes:
        body = response.body
        extra: list[tuple[str, str]] = []
        # the header is parsed only for the few responses that could be compressed
        if (response.compressible and len(body) > GZIP_THRESHOLD_BYTES
                and accepts_gzip(accept_encoding)):
            # kube's deferredResponseWriter: level 1 (speed over size), only above 128 KiB
            body = gzip.compress(body, compresslevel=1, mtime=0)
            extra = [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
        headers = [("Content-Type", response.content_type),
                   ("Content-Length", str(len(body))), *extra, *response.headers]
        if not any(k.lower() == "cache-control" for k, _ in response.headers):
            headers.append(("Cache-Control", "no-cache, private"))
        if closing:
            headers.append(("Connection", "close"))
        head = render_head(response.status, headers)
        return head if head_only else head + body

    def _plain(self, status: int, text: bytes) -> bytes:
        return self._render(Response(status, text, "text/plain; charset=utf-8"), closing=True)

    def _too_large(self) -> bytes:
        err = RequestEntityTooLarge(
            f"Request entity too large: limit is {self._limits.max_body_bytes}")
        return self._render(_status_response(err), closing=True)

    def _refuse(self, answer: bytes) -> NoReturn:
        """From a parser callback: end the connection with ``answer`` and stop the parser."""
        self._answer_last(answer)
        raise _Answered

    def _answer_last(self, answer: bytes) -> None:
        """End the connection with ``answer``, written after the answers to the requests read
        before it; the request being read is dropped (its body bytes given back), nothing more
        is parsed, and what the client still sends is read and dropped until the close."""
        self._input_closed = True
        self._keep_alive = False
        self._parser = None
        self._held = b""
        self._request = None
        self._body = b""
        self._drop_reservation()
        self._body_bytes = 0
        self._in_message = self._reading_head = self._reading_body = False
        self._cancel_timer()
        self._resume_reading()
        if self._task is None and self._stream is None and not self._pending:
            self._write_last(answer)
        else:
            self._last_answer = answer

    def _write_last(self, answer: bytes) -> None:
        """Go's ``closeWriteAndWait``: the answer, our FIN (plain TCP), and the close a moment
        later; meanwhile the client's input is read and dropped."""
        self.write(answer)
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if transport.can_write_eof():
            transport.write_eof()
        self._arm_timer(_LINGER_S, self.close)

    def _body_timed_out(self) -> None:
        """kube's timeout filter: the handler was still reading the body at the deadline."""
        self._timer = None
        self._answer_last(self._render(
            Response(504, REQUEST_TIMEOUT_BODY, REQUEST_TIMEOUT_CONTENT_TYPE), closing=True))

    # -- streams ---------------------------------------------------------------------------
    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> ChunkedStream:
        all_headers = [*headers, ("Transfer-Encoding", "chunked")]
        if not any(k.lower() == "cache-control" for k, _ in headers):
            all_headers.append(("Cache-Control", "no-cache, private"))
        self.write(render_head(status, all_headers))
        self._stream = ChunkedStream(self)
        # Until the stream ends, nothing the client sends is parsed (see the module docstring):
        # no parser is needed, and none of a pipelined head's timer either.
        if not self._in_message:
            self._parser = None
        self._cancel_timer()
        self._cancel_write_timer()
        return self._stream

    def start_websocket(self, headers: list[tuple[str, str]]) -> WebSocketStream:
        self.write(render_head(101, headers, date=False))
        stream = WebSocketStream(self)
        self._stream = stream
        self._cancel_write_timer()
        tail, self._upgrade_tail = self._upgrade_tail or b"", b""
        if tail:
            stream.feed(tail)
        return stream

    def stream_finished(self, stream: ChunkedStream) -> None:
        if stream is self._stream:
            self._stream = None
            if self._task is None:  # else the handler's task continues the connection
                self._after_response()

    # -- writing and closing ---------------------------------------------------------------
    def write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def buffered_bytes(self) -> int:
        return 0 if self._transport is None else self._transport.get_write_buffer_size()

    def set_write_high_water(self, high: int | None) -> None:
        """Flow control's pause mark for this connection (None: ``Limits``'); see streams.py."""
        if self._transport is not None:
            self._transport.set_write_buffer_limits(
                high=self._limits.write_high_water_bytes if high is None else high)

    def transport_extra(self, name: str) -> Any:
        return None if self._transport is None else self._transport.get_extra_info(name)

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def shutdown(self) -> None:
        """Server stopping: end an open stream cleanly, close an idle connection."""
        if self._stream is not None:
            self._stream.close()
        elif self._task is None:
            self.close()

    # -- timers ----------------------------------------------------------------------------
    def _arm_timer(self, seconds: float, callback: Callable[[], None]) -> None:
        self._cancel_timer()
        self._timer = asyncio.get_running_loop().call_later(seconds, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm_write_timer(self) -> None:
        """Answers unread for ``request_timeout_s``: drop the connection and what it holds."""
        self._cancel_write_timer()
        self._write_timer = asyncio.get_running_loop().call_later(
            self._limits.request_timeout_s, self.abort)

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None


class _Answered(Exception):
    """Raised from a parser callback to stop httptools: the connection has its last answer."""


def _status_response(exc: StatusError) -> Response:
    import msgspec  # local: keeps the module's import surface small for the common path

    headers = []
    if exc.retry_after_seconds:
        headers.append(("Retry-After", str(exc.retry_after_seconds)))
    return Response(exc.code, msgspec.json.encode(exc.to_status()), headers=headers)


class HTTPServer:
    """Listens on a socket and serves ``handler``; ``close()`` ends streams and connections.

    ``head_check`` sees each request whose head announces a body before the body is read.
    """

    def __init__(self, handler: Handler, limits: Limits | None = None,
                 head_check: HeadCheck | None = None) -> None:
        self.handler = handler
        self.limits = limits or Limits()
        self.head_check = head_check
        self.budget = BodyBudget(self.limits.max_pending_body_bytes)
        self.connections: set[HTTPConnection] = set()
        self.closing = False
        self._server: asyncio.Server | None = None

    async def listen(self, host: str, port: int,
                     ssl_context: ssl.SSLContext | None = None) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: HTTPConnection(self),
            host, port, ssl=ssl_context, reuse_address=True, backlog=2048)
        sock = self._server.sockets[0].getsockname()
        return str(sock[0]), int(sock[1])

    async def close(self) -> None:
        self.closing = True
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.shutdown()
        # Python 3.11's wait_closed does not wait for connections, and a TLS close needs a few
        # loop turns for close_notify: give them a moment, then drop whatever is left.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 2.0
        while self.connections and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            conn.abort()
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
