"""kubewire.server.wire.http_parse: bytes to requests without a socket or an event loop.

The parser is fed bytes in arbitrary pieces and reports to a sink that records what it hears;
each refusal is the exact answer the connection writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.server.wire.http_input import HEAD_TOO_LARGE_ANSWER
from kubewire.server.wire.http_messages import Limits, Request, Response
from kubewire.server.wire.http_parse import (
    CLOSED,
    Outcome,
    Refused,
    RequestParser,
    Upgraded,
    malformed_answer,
)


@dataclass
class Recorder:
    """The connection's side of the parser: what it was told, in order."""

    events: list[tuple[Any, ...]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)

    def head_started(self) -> None:
        self.events.append(("head_started",))

    def head_read(self) -> None:
        self.events.append(("head_read",))

    def body_expected(self, size: int, send_continue: bool) -> None:
        self.events.append(("body_expected", size, send_continue))

    def request_read(self, request: Request, had_body: bool, closing: bool) -> None:
        self.events.append(("request_read", request.method, request.path, had_body, closing))
        self.requests.append(request)

    # RequestChannel: a request answered with a stream would need a connection; none is here.
    def transport_extra(self, name: str) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name)

    def start_stream(self, status: int, headers: list[tuple[str, str]]) -> Any:
        raise AssertionError("no streams in parser tests")

    def start_websocket(self, headers: list[tuple[str, str]]) -> Any:
        raise AssertionError("no streams in parser tests")

    def abort(self) -> None:
        raise AssertionError("no aborts in parser tests")


def parser(limits: Limits | None = None, head_check: Any = None,
           clock: float = 7.5) -> tuple[RequestParser, Recorder]:
    sink = Recorder()
    return RequestParser(sink, sink, limits or Limits(), head_check, lambda: clock), sink


def feed_all(p: RequestParser, data: bytes, piece: int | None = None) -> list[Outcome]:
    piece = piece or len(data) or 1
    outcomes = []
    for at in range(0, len(data), piece):
        outcome = p.feed(memoryview(data)[at:at + piece])
        outcomes.append(outcome)
        if outcome is not None:
            break
    return outcomes


GET = b"GET /api/v1/pods?watch=1&labelSelector=a%3Db HTTP/1.1\r\nHost: x\r\nAccept: a/b\r\n\r\n"


def test_a_get_is_read_with_its_path_query_and_headers() -> None:
    p, sink = parser(clock=12.25)
    assert feed_all(p, GET) == [None]
    assert sink.events == [("head_started",), ("head_read",),
                           ("request_read", "GET", "/api/v1/pods", False, False)]
    (request,) = sink.requests
    assert request.raw_query == "watch=1&labelSelector=a%3Db"
    assert request.query == {"watch": ["1"], "labelSelector": ["a=b"]}
    assert request.headers == {"host": "x", "accept": "a/b"}
    assert request.received == 12.25 and request.body == b""
    assert request.extra("peername") == ("127.0.0.1", 1)
    assert not (p.in_message or p.reading_head or p.reading_body)


@given(st.integers(min_value=1, max_value=40))
def test_pieces_of_any_size_read_the_same_pipelined_requests(piece: int) -> None:
    post = (b"POST /api/v1/namespaces/d/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"
            b"\r\n{\"kind\":1}")
    chunked = (b"PUT /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
    p, sink = parser()
    assert feed_all(p, GET + post + chunked, piece)[-1] is None
    assert [e for e in sink.events if e[0] != "head_started" and e[0] != "head_read"] == [
        ("request_read", "GET", "/api/v1/pods", False, False),
        ("body_expected", 10, False),
        ("request_read", "POST", "/api/v1/namespaces/d/pods", True, False),
        ("body_expected", -1, False),
        ("request_read", "PUT", "/x", True, False)]
    assert [r.body for r in sink.requests] == [b"", b'{"kind":1}', b"abcde"]


def test_the_state_the_connection_reads_while_a_request_arrives() -> None:
    p, _ = parser()
    p.feed(b"POST /p HTTP/1.1\r\nContent-")
    assert p.in_message and p.reading_head and not p.reading_body
    p.feed(b"Length: 10\r\n\r\nabcd")
    assert p.reading_body and not p.reading_head
    assert (p.body_bytes, p.body_left) == (4, 6)
    p.feed(b"efghij")
    assert (p.in_message, p.reading_body, p.body_bytes, p.body_left) == (False, False, 0, -1)


def test_repeated_headers_are_joined_and_kept_one_by_one() -> None:
    p, sink = parser()
    p.feed(b"GET / HTTP/1.1\r\nImpersonate-Group: a\r\nX: 1\r\nimpersonate-group: b\r\n"
           b"Impersonate-Group: c\r\n\r\n")
    (request,) = sink.requests
    assert request.headers["impersonate-group"] == "a, b, c"
    assert request.header_values("impersonate-group") == ["a", "b", "c"]
    assert request.header_values("x") == ["1"] and request.header_values("y") == []
    request.drop_headers(["impersonate-group"])
    assert request.header_values("impersonate-group") == []


def test_a_head_over_the_limit_gets_gos_431() -> None:
    limits = Limits(max_head_bytes=1024)
    p, sink = parser(limits)
    head = b"GET /" + b"a" * (1024 + 4096) + b" HTTP/1.1\r\n\r\n"
    assert feed_all(p, head, 100)[-1] == Refused(HEAD_TOO_LARGE_ANSWER)
    assert not sink.requests
    p2, _ = parser(limits)  # just under: Go's 4 KiB of slack past MaxHeaderBytes
    assert p2.feed(b"GET /" + b"a" * (1024 + 4096 - 40) + b" HTTP/1.1\r\n\r\n") is None


def too_large(limit: int) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"Request entity too large: limit is {limit}",
            "reason": "RequestEntityTooLarge", "code": 413}


def answer_parts(answer: bytes) -> tuple[bytes, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    return status.encode(), dict(line.split(": ", 1) for line in lines), body


@pytest.mark.parametrize("how", ["announced", "chunked"])
def test_a_body_over_the_limit_gets_kubes_413_and_nothing_is_read(how: str) -> None:
    p, sink = parser(Limits(max_body_bytes=100))
    if how == "announced":
        data = b"POST /p HTTP/1.1\r\nContent-Length: 101\r\n\r\n" + b"x" * 101
    else:
        data = b"POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + (
            b"40\r\n" + b"x" * 64 + b"\r\n") * 2
    outcome = feed_all(p, data)[-1]
    assert isinstance(outcome, Refused)
    status, headers, body = answer_parts(outcome.answer)
    assert status == b"HTTP/1.1 413 Request Entity Too Large"
    assert headers["Connection"] == "close" and headers["Content-Type"] == "application/json"
    assert msgspec.json.decode(body) == too_large(100)
    assert not sink.requests


def test_an_unknown_expectation_gets_417_and_100_continue_is_asked_for_on_1_1_only() -> None:
    p, sink = parser()
    outcome = p.feed(b"POST /p HTTP/1.1\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx")
    assert isinstance(outcome, Refused) and not sink.requests
    status, headers, body = answer_parts(outcome.answer)
    assert status == b"HTTP/1.1 417 Expectation Failed" and body == b""
    assert (headers["Connection"], headers["Content-Length"]) == ("close", "0")
    for version, wanted in ((b"1.1", True), (b"1.0", False)):
        p, sink = parser()
        p.feed(b"POST /p HTTP/" + version + b"\r\nExpect: 100-continue\r\nContent-Length: 1\r\n"
               b"\r\n")
        assert sink.events[-1] == ("body_expected", 1, wanted)


def test_the_head_check_refuses_before_any_body_is_kept() -> None:
    seen: list[str] = []

    def check(request: Request) -> Response | None:
        seen.append(request.method)
        if request.headers.get("authorization") != "Bearer ok":
            return Response(401, b'{"code":401}')
        return None

    p, sink = parser(head_check=check)
    outcome = p.feed(b"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello")
    assert isinstance(outcome, Refused)
    status, headers, body = answer_parts(outcome.answer)
    assert (status, headers["Connection"], body) == (b"HTTP/1.1 401 Unauthorized", "close",
                                                     b'{"code":401}')
    assert not sink.requests and ("body_expected", 5, False) not in sink.events
    p, sink = parser(head_check=check)  # a GET has no body: not checked here
    assert p.feed(b"GET /p HTTP/1.1\r\n\r\nPOST /p HTTP/1.1\r\nAuthorization: Bearer ok\r\n"
                  b"Content-Length: 2\r\n\r\nok") is None
    assert [r.body for r in sink.requests] == [b"", b"ok"] and seen == ["POST", "POST"]


@pytest.mark.parametrize(("data", "answer"), [
    (b"GET http://[::1 HTTP/1.1\r\n\r\n", b"malformed request target"),
    (b"NOT HTTP AT ALL\r\n\r\n", b"malformed HTTP request"),
    (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", b"malformed HTTP request"),
])
def test_malformed_input_gets_a_plain_400(data: bytes, answer: bytes) -> None:
    p, sink = parser()
    outcome = p.feed(data)
    assert isinstance(outcome, Refused) and not sink.requests
    status, headers, body = answer_parts(outcome.answer)
    assert (status, body) == (b"HTTP/1.1 400 Bad Request", answer)
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["Connection"] == "close"
    assert malformed_answer().endswith(b"\r\n\r\nmalformed HTTP request")


def test_connection_close_ends_the_reading_after_that_request() -> None:
    p, sink = parser()
    data = b"GET /a HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n"
    assert p.feed(data) is CLOSED
    assert sink.events[-1] == ("request_read", "GET", "/a", False, True)
    assert len(sink.requests) == 1
    p, sink = parser()  # HTTP/1.0 without keep-alive closes too
    assert p.feed(b"GET /a HTTP/1.0\r\n\r\n") is CLOSED


def test_an_upgrade_says_where_the_frames_begin() -> None:
    p, sink = parser()
    head = (b"GET /api/v1/pods?watch=1 HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
    data = b"GET /first HTTP/1.1\r\n\r\n" + head + b"\x81\x80frame"
    outcome = p.feed(data)
    assert isinstance(outcome, Upgraded) and outcome.offset is not None
    assert data[outcome.offset:] == b"\x81\x80frame"
    assert [r.path for r in sink.requests] == ["/first", "/api/v1/pods"]
    assert sink.events[-1][-1] is False  # an upgrade is not a close


def test_a_request_keeps_nothing_of_the_next_one() -> None:
    p, sink = parser()
    p.feed(b"POST /a HTTP/1.1\r\nContent-Length: 3\r\nX: 1\r\n\r\nabcPOST /b HTTP/1.1\r\n"
           b"Content-Length: 3\r\n\r\nde")
    (first,) = sink.requests
    assert first.body == b"abc" and first.headers == {"content-length": "3", "x": "1"}
    p.feed(b"f")
    assert [r.body for r in sink.requests] == [b"abc", b"def"]
    assert sink.requests[1].headers == {"content-length": "3"}
