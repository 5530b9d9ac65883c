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
- request heads and bodies are bounded (``Limits``); going over answers 413/431 and closes;
- a connection idle between requests is closed after ``Limits.keepalive_timeout_s``;
- while a chunked stream is open, bytes the client sends are kept unparsed (reading pauses
  past ``_MAX_HELD_BYTES``) and parsed when the stream ends, as Go reads the next request only
  after a response; the connection holds no HTTP parser meanwhile, so an idle watch costs
  little memory (a WebSocket never returns to HTTP and drops its parser for good);
- a request head (request line and headers) must arrive whole within
  ``Limits.header_timeout_s`` of its first byte (of the connection, for the first request),
  else the connection is closed without an answer, as Go's ``ReadHeaderTimeout`` does: a
  slow-loris client cannot hold a connection by sending its head a byte at a time.
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
from typing import Any
from urllib.parse import parse_qs, unquote

import httptools

from kubewire.server.streams import EventStream
from kubewire.server.websocket import WebSocketStream, handshake, is_websocket_request
from kubewire.status import RequestEntityTooLarge, StatusError

log = logging.getLogger(__name__)
GZIP_THRESHOLD_BYTES = 128 * 1024  # kube's defaultGzipThresholdBytes
_MAX_UPGRADE_TAIL = 64 * 1024  # client bytes kept while an upgrade request is being decided
_MAX_HELD_BYTES = 64 * 1024  # client bytes kept during a stream before reading pauses
# Between requests (never written to: ``on_message_begin`` gives each request its own).
_NO_HEADERS: dict[str, str] = {}
_NO_BODY: list[bytes] = []

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
    """Per-connection bounds. Defaults follow kube-apiserver where it has one."""

    max_body_bytes: int = 3 * 1024 * 1024  # kube-apiserver's MaxRequestBodyBytes (3 MiB)
    max_head_bytes: int = 1024 * 1024  # Go net/http DefaultMaxHeaderBytes (1 MiB)
    keepalive_timeout_s: float = 120.0  # idle time between requests before closing
    header_timeout_s: float = 32.0  # kube-apiserver's ReadHeaderTimeout: time to read a head
    write_high_water_bytes: int = 256 * 1024  # transport buffer at which a stream is "paused"
    max_requests_inflight: int = 400  # kube --max-requests-inflight (read-only; 0 = no limit)
    max_mutating_requests_inflight: int = 200  # kube --max-mutating-requests-inflight
    max_watches_per_user: int = 10_000  # kubewire's own bound on one user's open watches
    max_object_bytes: int = 1536 * 1024  # one stored object, encoded (etcd's default 1.5 MiB)
    request_timeout_s: float = 60.0  # kube --request-timeout: a whole non-watch request


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
    """

    __slots__ = ("_conn", "_query", "_repeated", "body", "headers", "method", "path",
                 "raw_query", "stream")

    def __init__(self, conn: HTTPConnection, method: str, url: bytes,
                 headers: dict[str, str], body: bytes) -> None:
        parsed = httptools.parse_url(url)
        self._conn = conn
        self._query: dict[str, list[str]] | None = None
        # Set by the connection for headers that came more than once (rare).
        self._repeated: dict[str, list[str]] | None = None
        self.method = method
        self.path = unquote(parsed.path.decode("latin-1"))
        self.raw_query = (parsed.query or b"").decode("latin-1")
        self.headers = headers
        self.body = body
        self.stream: ChunkedStream | WebSocketStream | None = None

    @property
    def query(self) -> dict[str, list[str]]:
        if self._query is None:
            self._query = parse_qs(self.raw_query, keep_blank_values=True)
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


class HTTPConnection(asyncio.Protocol):
    """One client connection: parse requests, run the handler, write responses in order."""

    # An idle watch is mostly this object: slots, and no parser, head or body while streaming.
    __slots__ = ("_body", "_body_bytes", "_head_bytes", "_headers", "_held", "_idle_timer",
                 "_in_message", "_keep_alive", "_limits", "_parser", "_pending", "_reading_head",
                 "_reading_paused", "_rejected", "_repeated", "_server", "_stream", "_task",
                 "_transport", "_upgrade_tail", "_url", "write_paused")

    def __init__(self, server: HTTPServer) -> None:
        self._server = server
        self._limits = server.limits
        self._transport: asyncio.Transport | None = None
        # None while a stream is open: bytes then wait in ``_held``
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self._held: bytes | bytearray = b""  # a bytearray once something is kept
        self._reading_paused = False
        self._url = b""
        self._headers = _NO_HEADERS
        self._repeated: dict[str, list[str]] | None = None  # values of repeated headers
        self._head_bytes = 0
        self._body = _NO_BODY
        self._body_bytes = 0
        self._in_message = False  # the parser is inside a request (it cannot be replaced)
        self._pending: list[Request] | None = None  # requests read, not yet started (pipelined)
        self._task: asyncio.Task[None] | None = None
        self._stream: ChunkedStream | WebSocketStream | None = None
        self._upgrade_tail: bytes | None = None  # client bytes after an Upgrade request's head
        self._keep_alive = True
        self._idle_timer: asyncio.TimerHandle | None = None
        self._reading_head = False  # a head has begun and not completed (its timer runs)
        self.write_paused = False
        self._rejected = False

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport
        self._transport = transport  # type: ignore[assignment]
        self.set_write_high_water(None)
        self._server.connections.add(self)
        self._arm_timer(self._limits.header_timeout_s)

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return
        if self._upgrade_tail is not None:  # past an Upgrade request: frames, not HTTP
            if isinstance(self._stream, WebSocketStream):
                self._stream.feed(data)
            elif len(self._upgrade_tail) < _MAX_UPGRADE_TAIL:
                self._upgrade_tail += data
            return
        parser = self._parser
        if parser is None or self._stream is not None:  # the next request is read after it
            self._hold(data)
            return
        self._feed(parser, data)

    def _feed(self, parser: httptools.HttpRequestParser, data: bytes) -> None:
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # The request was completed (and queued) first; no more HTTP on this connection.
            self._upgrade_tail = data[upgrade.args[0]:] if upgrade.args else b""
            self._keep_alive = False
            self._parser = None
        except httptools.HttpParserCallbackError as exc:  # our callback raised inside httptools
            cause = exc.__context__
            if isinstance(cause, _TooLarge):
                self._reject_status(cause.status)
            elif isinstance(cause, _ExpectationFailed):
                self._reject_expectation()
            else:
                self._reject(400, b"malformed HTTP request")
        except httptools.HttpParserError:
            self._reject(400, b"malformed HTTP request")

    def _hold(self, data: bytes) -> None:
        """Keep bytes sent during a stream; past the bound, let the kernel hold the rest."""
        if self._held:
            self._held += data  # in place: many small reads must not copy all that is kept
        else:
            self._held = bytearray(data)
        if len(self._held) >= _MAX_HELD_BYTES and not self._reading_paused:
            # Until the stream ends; a client that closes meanwhile is noticed at the next write.
            self._reading_paused = True
            if self._transport is not None and not self._transport.is_closing():
                self._transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        self._cancel_idle_timer()
        if self._stream is not None and not self._stream.closed:
            self._stream._finish()
        self._stream = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._transport = None

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        stream = self._stream
        if stream is not None and stream.on_resume is not None:
            stream.on_resume()

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._in_message = True
        self._reading_head = True
        self._arm_timer(self._limits.header_timeout_s)
        self._url = b""
        self._headers = {}
        self._repeated = None
        self._head_bytes = 0
        self._body = []
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
        if self._repeated is not None:
            for key, values in self._repeated.items():
                self._headers[key] = ", ".join(values)
        self._cancel_idle_timer()
        length = self._headers.get("content-length", "")
        if length.isdigit() and int(length) > self._limits.max_body_bytes:
            raise _TooLarge(413)
        expect = self._headers.get("expect")
        if expect is not None:
            self._answer_expect(expect, length)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self._limits.max_body_bytes:
            raise _TooLarge(413)
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self._parser
        assert parser is not None  # called from inside its feed_data
        self._in_message = False
        url, headers, body, repeated = self._url, self._headers, self._body, self._repeated
        # The request owns these now; the connection keeps none of them while it is served.
        self._url, self._headers, self._body, self._repeated = b"", _NO_HEADERS, _NO_BODY, None
        method = parser.get_method().decode("latin-1")
        try:
            request = Request(self, method, url, headers, b"".join(body))
        except httptools.HttpParserInvalidURLError:
            self._reject(400, b"malformed request target")
            return
        request._repeated = repeated
        if not parser.should_keep_alive():
            self._keep_alive = False
        if self._pending is None:
            self._pending = [request]
        else:
            self._pending.append(request)
        self._maybe_start_next()

    # -- request scheduling ----------------------------------------------------------------
    def _maybe_start_next(self) -> None:
        pending = self._pending
        if self._task is not None or self._stream is not None or not pending:
            return
        if self._transport is None:
            return
        request = pending.pop(0)
        if not pending:
            self._pending = None
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

    def send_response(self, response: Response, *, head_only: bool = False,
                      accept_encoding: str = "") -> None:
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
        if not self._keep_alive:
            headers.append(("Connection", "close"))
        head = render_head(response.status, headers)
        self.write(head if head_only else head + body)

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
        self._cancel_idle_timer()
        return self._stream

    def start_websocket(self, headers: list[tuple[str, str]]) -> WebSocketStream:
        self.write(render_head(101, headers, date=False))
        stream = WebSocketStream(self)
        self._stream = stream
        tail, self._upgrade_tail = self._upgrade_tail or b"", b""
        if tail:
            stream.feed(tail)
        return stream

    def stream_finished(self, stream: ChunkedStream) -> None:
        if stream is self._stream:
            self._stream = None
            if self._task is None:  # else the handler's task continues the connection
                self._after_response()

    def _after_response(self) -> None:
        if not self._keep_alive or self._server.closing:
            self.close()
            return
        if self._held or self._parser is None:
            self._read_held()
            if self._rejected or self._task is not None or self._stream is not None:
                return
        if self._reading_head and self._idle_timer is None:
            # a pipelined head whose timer a stream stopped: its time starts again now
            self._arm_timer(self._limits.header_timeout_s)
        if self._pending:
            self._maybe_start_next()
        else:
            self._arm_idle_timer()

    def _read_held(self) -> None:
        """After a stream: parse what the client sent meanwhile, then read on as usual."""
        parser = self._parser
        if parser is None:
            parser = self._parser = httptools.HttpRequestParser(self)
        held, self._held = self._held, b""
        if self._reading_paused:
            self._reading_paused = False
            if self._transport is not None and not self._transport.is_closing():
                self._transport.resume_reading()
        if held:
            self._feed(parser, bytes(held))

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

    def _answer_expect(self, expect: str, length: str) -> None:
        """Go net/http (server.go ``readRequest``): ``100-continue`` on HTTP/1.1 with a body
        gets the interim ``100 Continue`` (curl waits a second for it before sending a body);
        any other expectation is answered 417 with the connection closed."""
        if "100-continue" not in (token.strip().lower() for token in expect.split(",")):
            raise _ExpectationFailed
        busy = self._task is not None or self._stream is not None or self._pending
        # Only between responses: an interim line must not land inside an earlier response.
        parser = self._parser
        assert parser is not None  # called from inside its feed_data
        if parser.get_http_version() == "1.1" and length != "0" and not busy:
            self.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _count_head(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > self._limits.max_head_bytes:
            raise _TooLarge(431)

    def _reject_status(self, status: int) -> None:
        if status == 413:
            err = RequestEntityTooLarge(
                f"Request entity too large: limit is {self._limits.max_body_bytes}")
            self._keep_alive = False
            self._rejected = True
            self.send_response(_status_response(err))
            self.close()
        else:
            self._reject(status, b"request header fields too large")

    def _reject(self, status: int, text: bytes) -> None:
        self._keep_alive = False
        self._rejected = True
        self.send_response(Response(status, text, "text/plain; charset=utf-8"))
        self.close()

    def _reject_expectation(self) -> None:
        # Go's sendExpectationFailed: no body, no content type, and the connection closes.
        self._keep_alive = False
        self._rejected = True
        self.write(render_head(417, [("Connection", "close"), ("Content-Length", "0")]))
        self.close()

    def _arm_idle_timer(self) -> None:
        if not self._reading_head:  # a pipelined head in progress keeps its own deadline
            self._arm_timer(self._limits.keepalive_timeout_s)

    def _arm_timer(self, seconds: float) -> None:
        self._cancel_idle_timer()
        loop = asyncio.get_running_loop()
        self._idle_timer = loop.call_later(seconds, self.close)

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None


class _ExpectationFailed(Exception):
    """An ``Expect`` header other than ``100-continue``."""


class _TooLarge(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _status_response(exc: StatusError) -> Response:
    import msgspec  # local: keeps the module's import surface small for the common path

    headers = []
    if exc.retry_after_seconds:
        headers.append(("Retry-After", str(exc.retry_after_seconds)))
    return Response(exc.code, msgspec.json.encode(exc.to_status()), headers=headers)


class HTTPServer:
    """Listens on a socket and serves ``handler``; ``close()`` ends streams and connections."""

    def __init__(self, handler: Handler, limits: Limits | None = None) -> None:
        self.handler = handler
        self.limits = limits or Limits()
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
