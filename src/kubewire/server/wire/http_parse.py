"""Bytes to requests, without I/O: the reading half of HTTP/1.1 (httptools parses, this frames).

``RequestParser`` is fed the bytes of one connection, in any pieces, and reports what it read to
a ``ParseSink`` (the connection): a head has begun, a head is whole, a body of a known (or
unknown, chunked) size is coming, a request is whole. ``feed`` returns what ended the reading
of HTTP on this connection, if anything did: ``Refused`` (an answer to send, after which nothing
more is parsed), ``Upgraded`` (the request switches protocols; where its head ended),
``CLOSED`` (a ``Connection: close`` request was read). The decisions made here are the ones a
request's bytes alone decide, as Go's net/http makes them:

- a head over ``Limits.max_head_bytes`` plus Go's 4 KiB: Go's bare 431;
- a target that is neither origin-form nor a URL: 400 ``malformed request target``;
- bytes that are not HTTP: 400 ``malformed HTTP request``;
- an ``Expect`` other than ``100-continue``: 417 with no body;
- a body announced or grown over ``Limits.max_body_bytes``: kube's 413 Status;
- the server's ``head_check`` (authentication) refusing a request whose head announces a body:
  its answer, before any body byte is kept.

Timers, the body budget, queueing, back-pressure and writing stay with the connection
(``http.py``); it reads ``body_bytes``, ``body_left``, ``reading_head`` and ``reading_body``
to decide them. httptools does the byte-level parsing (C, llhttp); this class keeps only the
request being read, so an idle connection's parser holds nothing but httptools' state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httptools

from kubewire.server.wire.http_input import (
    HEAD_SLACK_BYTES,
    HEAD_TOO_LARGE_ANSWER,
    InvalidTarget,
    expects_continue,
    has_body,
)
from kubewire.server.wire.http_messages import (
    HeadCheck,
    Limits,
    Request,
    RequestChannel,
    plain_answer,
    render_head,
    render_response,
    too_large_answer,
)

log = logging.getLogger(__name__)
_REQUEST_LINE_BYTES = 16  # what a request line adds to its target ("GET ", " HTTP/1.1\r\n"...)
# Between requests (never written to: ``on_message_begin`` gives each request its own).
_NO_HEADERS: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Refused:
    """Answer ``answer`` and parse nothing more on this connection; ``unread`` is what the
    refused request's Content-Length still announces (-1: unknown, chunked or none read yet),
    which decides whether the rest is drained (``http.HTTPConnection._answer_last``)."""

    answer: bytes
    unread: int = -1


@dataclass(frozen=True, slots=True)
class Upgraded:
    """The request just read asked to switch protocols; the bytes from ``offset`` of the data
    fed on are not HTTP (None: nothing came after its head)."""

    offset: int | None


class Closed:
    """A request with ``Connection: close`` was read: nothing after it is parsed."""

    __slots__ = ()


CLOSED = Closed()
Outcome = Refused | Upgraded | Closed | None


class ParseSink(Protocol):
    """What a parser tells its connection, in the order it happens for each request."""

    def head_started(self) -> None:
        """A request's first byte was read (its head's time starts)."""

    def head_read(self) -> None:
        """Its head is whole (its head's time stops)."""

    def body_expected(self, size: int, send_continue: bool) -> None:
        """Its head announced a body of ``size`` bytes (-1: chunked) and passed every check;
        ``send_continue``: the client waits for ``100 Continue`` (HTTP/1.1 and ``Expect``)."""

    def request_read(self, request: Request, had_body: bool, closing: bool) -> None:
        """The request is whole (``body`` set); ``closing``: nothing after it is parsed."""


def malformed_answer() -> bytes:
    return plain_answer(400, b"malformed HTTP request")


def expectation_failed_answer() -> bytes:
    """Go's sendExpectationFailed: no body, no content type, and the connection closes."""
    return render_head(417, [("Connection", "close"), ("Content-Length", "0")])


class _Stop(Exception):
    """Raised from a parser callback to stop httptools; ``outcome`` says why."""

    def __init__(self, outcome: Refused | Closed) -> None:
        self.outcome = outcome


class RequestParser:
    """The parse state of one connection's input: httptools and the request being read."""

    __slots__ = ("_body", "_channel", "_clock", "_head_bytes", "_head_check", "_headers",
                 "_limits", "_parser", "_repeated", "_request", "_sink", "_url", "body_bytes",
                 "body_left", "in_message", "reading_body", "reading_head")

    def __init__(self, sink: ParseSink, channel: RequestChannel, limits: Limits,
                 head_check: HeadCheck | None, clock: Callable[[], float]) -> None:
        self._sink = sink
        self._channel = channel  # what each Request answers through
        self._limits = limits
        self._head_check = head_check
        self._clock = clock  # a request's ``received`` time
        self._parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._headers = _NO_HEADERS
        self._repeated: dict[str, list[str]] | None = None  # values of repeated headers
        self._head_bytes = 0
        self._request: Request | None = None  # head complete, body being read
        # One piece as it came; more grow one bytearray, whose large buffer gets a mapping of
        # its own and goes back to the system when freed (a list of pieces left the heap full
        # of holes after many large bodies: +40 MB of RSS kept after an attack, +9 MB this way).
        self._body: bytes | bytearray = b""
        self.body_bytes = 0  # of the body being read
        self.body_left = -1  # what Content-Length still announces; -1: unknown (chunked)
        self.in_message = False  # inside a request (the parser cannot be replaced)
        self.reading_head = False  # a head has begun and not completed
        self.reading_body = False  # a body is being read

    def feed(self, data: memoryview | bytes) -> Outcome:
        """Parse ``data``; None while HTTP may go on, else what ended it (see the module)."""
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # The request was completed (and reported) first; no more HTTP on this connection.
            return Upgraded(upgrade.args[0] if upgrade.args else None)
        except httptools.HttpParserCallbackError as exc:  # a callback raised inside httptools
            stop = exc.__context__
            if isinstance(stop, _Stop):
                return stop.outcome
            log.error("HTTP parser callback failed", exc_info=stop)
            return Refused(malformed_answer())
        except httptools.HttpParserError:
            return Refused(malformed_answer())
        return None

    @property
    def http_version(self) -> str:
        return str(self._parser.get_http_version())

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.in_message = True
        self.reading_head = True
        self._sink.head_started()
        self._url = b""
        self._headers = {}
        self._repeated = None
        self._head_bytes = _REQUEST_LINE_BYTES
        self._body = b""
        self.body_bytes = 0

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
        self.reading_head = False
        self._sink.head_read()
        request = self._head_request()
        expect = request.headers.get("expect")
        if expect is not None and not expects_continue(expect):
            raise _Stop(Refused(expectation_failed_answer()))
        if has_body(request.headers):
            length = request.headers.get("content-length", "")
            size = int(length) if length.isdigit() else -1
            check = self._head_check
            refusal = None if check is None else check(request)
            if refusal is not None:
                raise _Stop(Refused(render_response(refusal, closing=True), size))
            if size > self._limits.max_body_bytes:
                raise _Stop(Refused(too_large_answer(self._limits), size))
            self.reading_body = True
            self.body_left = size
            self._sink.body_expected(size, expect is not None and self.http_version == "1.1")
        self._request = request

    def on_body(self, body: bytes) -> None:
        n = len(body)
        if self.body_bytes + n > self._limits.max_body_bytes:
            left = self.body_left - n if self.body_left >= 0 else -1
            raise _Stop(Refused(too_large_answer(self._limits), left))
        self.body_bytes += n
        if self.body_left > 0:
            self.body_left -= n
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
        request = self._request
        assert request is not None  # inside feed_data, head done
        body = self._body
        # The request owns these now; the parser keeps none of them while it is served.
        self._request, self._body = None, b""
        if body:
            request.body = bytes(body) if isinstance(body, bytearray) else body
        self.body_bytes = 0
        self.in_message = False
        had_body = self.reading_body
        if had_body:
            self.reading_body = False
            self.body_left = -1
        parser = self._parser
        closing = not parser.should_keep_alive() and not parser.should_upgrade()
        self._sink.request_read(request, had_body, closing)
        if closing:  # Go reads nothing after a Connection: close request
            raise _Stop(CLOSED)

    # -- the head --------------------------------------------------------------------------
    def _head_request(self) -> Request:
        url, headers, repeated = self._url, self._headers, self._repeated
        self._url, self._headers, self._repeated = b"", _NO_HEADERS, None
        if repeated is not None:
            for key, values in repeated.items():
                headers[key] = ", ".join(values)
        try:
            request = Request(self._channel, self._parser.get_method().decode("latin-1"), url,
                              headers, self._clock())
        except InvalidTarget:
            raise _Stop(Refused(plain_answer(400, b"malformed request target"))) from None
        request.repeated = repeated
        return request

    def _count_head(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > self._limits.max_head_bytes + HEAD_SLACK_BYTES:
            raise _Stop(Refused(HEAD_TOO_LARGE_ANSWER))
