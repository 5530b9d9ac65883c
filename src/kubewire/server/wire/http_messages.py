"""HTTP/1.1 messages without I/O: the request a handler sees, the response it returns, and the
bytes a response becomes.

The sans-I/O half of the HTTP layer, after h11's split (``http_parse`` reads bytes into
``Request``s; this module turns ``Response``s into bytes; ``http`` is the asyncio Protocol that
moves both over a socket). Written by hand rather than with h11 because a watch is a chunked
response the watch cache writes to directly (``ChunkedStream``), and because h11's
per-event objects cost more per request than this path is allowed (bench: write path).

- ``Limits``: the bounds of one connection and of the server, kube-apiserver's where it has one;
- ``Request``: one parsed request; it reaches its connection only through ``RequestChannel``
  (start a stream, transport facts), so it can be built and read without one;
- ``Response`` and ``render_response``: a complete answer as bytes, gzipped as kube does (level
  1, above 128 KiB, when accepted), with kube's default ``Cache-Control``; a ``tail`` (the
  newline Go's ``json.Encoder`` ends an API object with, see ``encoding``) is joined to the body
  there, so a shared encoded object is not copied to end it;
- ``render_head``, ``frame_chunk``, ``LAST_CHUNK``, ``CONTINUE``: the framing of heads, chunks
  and interim answers; ``plain_answer``, ``too_large_answer``, ``status_response``: the answers
  the HTTP layer sends on its own.
"""

from __future__ import annotations

import functools
import gzip
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.server.wire.http_input import (
    REQUEST_TIMEOUT_BODY,
    REQUEST_TIMEOUT_CONTENT_TYPE,
    parse_query,
    split_target,
)
from kubewire.server.wire.streams import Connection, EventStream
from kubewire.server.wire.websocket import handshake, is_websocket_request
from kubewire.status import BadRequest, RequestEntityTooLarge, StatusError

if TYPE_CHECKING:
    from kubewire.server.wire.websocket import WebSocketStream

# The value then "\n", in one encode (no copy of the value's bytes to append the newline).
# Always given a list: msgspec 0.22 leaks one iterator per call on any other sequence.
_go_json = GoJSONEncoder()
_encode = _go_json.encode
_encode_line = _go_json.encode_lines
GZIP_THRESHOLD_BYTES = 128 * 1024  # kube's defaultGzipThresholdBytes
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"

REASONS = {
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
    # Written right after ``body`` and part of it on the wire (Content-Length, gzip): the
    # ``\n`` ending a JSON API answer, kept apart when ``body`` is bytes shared with the watch
    # cache (a stored object), which appending would copy once more.
    tail: bytes = b""


class StreamConnection(Connection, Protocol):
    """What a chunked stream needs of its connection beyond an event stream's."""

    def buffered_bytes(self) -> int: ...

    def stream_finished(self, stream: ChunkedStream) -> None: ...


class RequestChannel(Protocol):
    """What a request needs of the connection it came on: to answer it with a stream, and the
    transport's facts."""

    def transport_extra(self, name: str) -> Any: ...

    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> ChunkedStream: ...

    def start_websocket(self, headers: list[tuple[str, str]]) -> WebSocketStream: ...

    def abort(self) -> None: ...


class Request:
    """One parsed request. ``query`` keeps blank values and repeated keys, as Go does.

    ``headers`` joins the values of a repeated header with ", "; ``header_values`` has them
    one by one, as Go's ``Header[name]`` (impersonation reads each ``Impersonate-Group``).
    ``received`` is the loop time its head was read: its deadline counts from there.
    """

    __slots__ = ("_channel", "_query", "answer_headers", "authenticated", "body", "headers",
                 "method", "path", "raw_query", "received", "repeated", "stream")

    def __init__(self, channel: RequestChannel, method: str, url: bytes,
                 headers: dict[str, str], received: float) -> None:
        self.path, self.raw_query = split_target(url)  # InvalidTarget: answered 400
        self._channel = channel
        self._query: dict[str, list[str]] | None = None
        # The values of headers that came more than once (rare), one by one; set by the parser.
        self.repeated: dict[str, list[str]] | None = None
        self.received = received
        # Who the server's head check found the request to be from (before its body was
        # read), kept so that the request is not authenticated again once it is served.
        self.authenticated: object = None
        self.method = method
        self.headers = headers
        self.body = b""  # set once it has been read whole
        self.stream: ChunkedStream | WebSocketStream | None = None
        # Headers every answer to it carries, a stream's head included (kube's Audit-Id).
        self.answer_headers: tuple[tuple[str, str], ...] = ()

    @property
    def query(self) -> dict[str, list[str]]:
        if self._query is None:
            raw = self.raw_query  # most requests have none: parse_qs("") costs ~2.5 µs
            self._query = parse_query(raw) if raw else {}
        return self._query

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name, default)

    def header_values(self, name: str) -> list[str]:
        """Each value of the header ``name`` (lower-case), one per header line."""
        if self.repeated is not None and name in self.repeated:
            return self.repeated[name]
        value = self.headers.get(name)
        return [] if value is None else [value]

    def drop_headers(self, names: list[str]) -> None:
        """Forget headers a filter has consumed (kube deletes impersonation headers)."""
        for name in names:
            self.headers.pop(name, None)
            if self.repeated is not None:
                self.repeated.pop(name, None)

    def extra(self, name: str) -> Any:
        """Transport facts: ``peername``, ``peercert``, ``ssl_object``..."""
        return self._channel.transport_extra(name)

    def abort_connection(self) -> None:
        """Drop the connection at once, unanswered (a TCP reset; faults on demand)."""
        self._channel.abort()

    def start_stream(self, status: int = 200,
                     headers: list[tuple[str, str]] | None = None) -> ChunkedStream:
        """Send the head of a chunked response now and hand back its stream."""
        if self.stream is not None:
            raise RuntimeError("stream already started")
        stream = self._channel.start_stream(status, [*self.answer_headers, *(headers or ())])
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
        stream = self._channel.start_websocket([*self.answer_headers, *headers])
        self.stream = stream
        return stream


Handler = Callable[[Request], Awaitable[Response | None]]
# Called with a request whose head announces a body, before any of the body is read: a
# ``Response`` refuses it (answered at once, the body never buffered), None lets it through.
HeadCheck = Callable[[Request], Response | None]


class ChunkedStream(EventStream):
    """The body of a chunked response, written straight to the connection's transport."""

    __slots__ = ()
    framing = "chunked"
    _conn: StreamConnection

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
        self._conn.write(LAST_CHUNK)
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
    global _date_second, _date_text  # a one-entry cache, read once per answer
    second = int(time.time())
    if second != _date_second:
        _date_text, _date_second = formatdate(second, usegmt=True), second
    return _date_text


_date_second = -1
_date_text = ""


@functools.lru_cache(maxsize=64)
def _status_line(status: int) -> str:
    return f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\n"


def render_head(status: int, headers: list[tuple[str, str]], *, date: bool = True) -> bytes:
    lines = [_status_line(status)]
    lines.extend(f"{k}: {v}\r\n" for k, v in headers)
    if date:
        lines.append(f"Date: {http_date()}\r\n")
    lines.append("\r\n")
    return _head_bytes("".join(lines))


def _head_bytes(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:  # request text in a header (a Warning naming a field): Go sends
        return text.encode("utf-8", "replace")  # its UTF-8 bytes as they are


def stream_head(status: int, headers: list[tuple[str, str]]) -> bytes:
    """The head of a chunked response, with kube's default ``Cache-Control``."""
    all_headers = [*headers, ("Transfer-Encoding", "chunked")]
    if not any(k.lower() == "cache-control" for k, _ in headers):
        all_headers.append(("Cache-Control", "no-cache, private"))
    return render_head(status, all_headers)


_NO_CACHE = "Cache-Control: no-cache, private\r\n"


def render_response(response: Response, *, head_only: bool = False, accept_encoding: str = "",
                    closing: bool = False) -> bytes:
    """``response`` as bytes: its head (and body, unless ``head_only``); ``closing`` adds
    ``Connection: close``. The head's lines in this order: Content-Type, Content-Length (none
    for a 204), the gzip headers, the response's own, kube's default Cache-Control unless it
    set one, Connection, Date (written as one text, not a list of pairs: once per answer)."""
    body, tail = response.body, response.tail
    compressed = False
    # the header is parsed only for the few responses that could be compressed
    if (response.compressible and len(body) + len(tail) > GZIP_THRESHOLD_BYTES
            and accepts_gzip(accept_encoding)):
        # kube's deferredResponseWriter: level 1 (speed over size), only above 128 KiB
        body, tail = gzip.compress(body + tail, compresslevel=1, mtime=0), b""
        compressed = True
    status = response.status
    text = _status_line(status)
    if response.content_type:
        text += f"Content-Type: {response.content_type}\r\n"
    if status != 204:  # RFC 9110 §8.6: a 204 has no Content-Length (Go sends none)
        text += f"Content-Length: {len(body) + len(tail)}\r\n"
    if compressed:
        text += "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n"
    has_cache_control = False
    for k, v in response.headers:
        text += f"{k}: {v}\r\n"
        if not has_cache_control and k.lower() == "cache-control":
            has_cache_control = True
    if not has_cache_control:
        text += _NO_CACHE
    if closing:
        text += "Connection: close\r\n"
    head = _head_bytes(f"{text}Date: {http_date()}\r\n\r\n")
    return head if head_only else b"".join((head, body, tail))


def plain_answer(status: int, text: bytes) -> bytes:
    """A plain-text answer after which the connection closes (a protocol error)."""
    return render_response(Response(status, text, "text/plain; charset=utf-8"), closing=True)


def status_response(exc: StatusError) -> Response:
    """A ``Status`` error as a response, with its ``Retry-After``; the body ends with ``\\n``,
    as kube's ``ErrorNegotiated`` writes it through the JSON serializer's ``json.Encoder``."""
    headers = []
    if exc.retry_after_seconds:
        headers.append(("Retry-After", str(exc.retry_after_seconds)))
    return Response(exc.code, _encode_line([exc.to_status()]), headers=headers)


def too_large_answer(limits: Limits) -> bytes:
    """kube's 413 for a body over ``max_body_bytes``; the connection closes."""
    err = RequestEntityTooLarge(f"Request entity too large: limit is {limits.max_body_bytes}")
    return render_response(status_response(err), closing=True)


def request_timeout_answer() -> bytes:
    """kube's timeout filter, for a body that did not arrive in time; the connection closes."""
    return render_response(Response(504, REQUEST_TIMEOUT_BODY, REQUEST_TIMEOUT_CONTENT_TYPE),
                           closing=True)


def json_response(value: object, status: int = 200) -> Response:
    """A JSON answer of ``value`` (kubewire's own ``/kubewire/`` endpoints)."""
    return Response(status, _encode(value), "application/json")


def json_object_body(request: Request) -> dict[str, Any]:
    """A request's JSON object body ({} when empty); 400 for anything else (kubewire's own
    ``/kubewire/`` endpoints)."""
    if not request.body:
        return {}
    try:
        value = msgspec.json.decode(request.body)
    except msgspec.DecodeError as err:
        raise BadRequest(f"the request body is not JSON: {err}", {}) from err
    if not isinstance(value, dict):
        raise BadRequest("the request body must be a JSON object", {})
    return value


def internal_error() -> Response:
    """The answer to a handler that failed unexpectedly (logged by the caller)."""
    return Response(500, b'{"kind":"Status","apiVersion":"v1","metadata":{},'
                         b'"status":"Failure","message":"internal error",'
                         b'"reason":"InternalError","code":500}\n')
