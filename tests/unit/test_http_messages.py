"""kubewire.server.wire.http_messages: responses to bytes, as kube-apiserver's Go server frames
them, without a socket."""

from __future__ import annotations

import gzip
import re

import msgspec
import pytest

from kubewire.server.wire.http_messages import (
    GZIP_THRESHOLD_BYTES,
    Limits,
    Response,
    accepts_gzip,
    frame_chunk,
    internal_error,
    plain_answer,
    render_head,
    render_response,
    request_timeout_answer,
    status_response,
    stream_head,
    too_large_answer,
)
from kubewire.status import TooManyRequests

DATE = re.compile(rb"Date: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n")


def split(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, [tuple(line.split(": ", 1)) for line in lines], body  # type: ignore[misc]


def test_a_response_has_length_type_cache_control_and_date() -> None:
    raw = render_response(Response(201, b'{"a":1}\n', headers=[("Warning", "299 - \"x\"")]))
    status, headers, body = split(raw)
    assert status == "HTTP/1.1 201 Created" and body == b'{"a":1}\n'
    names = [k for k, _ in headers]
    assert names == ["Content-Type", "Content-Length", "Warning", "Cache-Control", "Date"]
    assert dict(headers)["Content-Length"] == "8"
    assert dict(headers)["Cache-Control"] == "no-cache, private"
    assert DATE.search(raw)


def test_a_handlers_cache_control_is_kept_and_closing_adds_connection_close() -> None:
    raw = render_response(Response(200, b"{}", headers=[("cache-control", "public")]),
                          closing=True)
    headers = dict(split(raw)[1])
    assert headers["cache-control"] == "public" and "Cache-Control" not in headers
    assert headers["Connection"] == "close"


def test_head_only_keeps_the_length_of_the_body_it_leaves_out() -> None:
    raw = render_response(Response(200, b"x" * 10), head_only=True)
    _, headers, body = split(raw)
    assert body == b"" and dict(headers)["Content-Length"] == "10"


@pytest.mark.parametrize(("size", "compressible", "accept", "gzipped"), [
    (GZIP_THRESHOLD_BYTES + 1, True, "gzip", True),
    (GZIP_THRESHOLD_BYTES + 1, True, "br, GZIP;q=0.5", True),
    (GZIP_THRESHOLD_BYTES + 1, True, "gzip;q=0", False),
    (GZIP_THRESHOLD_BYTES + 1, True, "gzipx", False),
    (GZIP_THRESHOLD_BYTES, True, "gzip", False),
    (GZIP_THRESHOLD_BYTES + 1, False, "gzip", False),
])
def test_large_api_objects_are_gzipped_when_accepted(size: int, compressible: bool,
                                                     accept: str, gzipped: bool) -> None:
    payload = b"a" * size
    raw = render_response(Response(200, payload, compressible=compressible),
                          accept_encoding=accept)
    _, headers, body = split(raw)
    h = dict(headers)
    assert (h.get("Content-Encoding") == "gzip") is gzipped
    assert (gzip.decompress(body) if gzipped else body) == payload
    assert h["Content-Length"] == str(len(body))
    if gzipped:
        assert h["Vary"] == "Accept-Encoding"


def test_a_tail_is_part_of_the_body_its_length_and_its_compression() -> None:
    shared = b'{"kind":"Pod"}'
    _, headers, body = split(render_response(Response(200, shared, tail=b"\n")))
    assert body == b'{"kind":"Pod"}\n' and dict(headers)["Content-Length"] == "15"
    _, headers, body = split(render_response(Response(200, shared, tail=b"\n"),
                                             head_only=True))
    assert body == b"" and dict(headers)["Content-Length"] == "15"
    # kube's threshold counts the whole first write, the encoder's newline included
    payload = b"a" * GZIP_THRESHOLD_BYTES
    _, headers, body = split(render_response(
        Response(200, payload, compressible=True, tail=b"\n"), accept_encoding="gzip"))
    assert dict(headers)["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == payload + b"\n"
    assert dict(headers)["Content-Length"] == str(len(body))


def test_accepts_gzip_is_kubes_token_rule() -> None:
    assert accepts_gzip("deflate, gzip") and accepts_gzip(" gzip ; q=1")
    assert not accepts_gzip("") and not accepts_gzip("gzip; q=0.000")


def test_heads_are_latin1_or_the_utf8_bytes_of_what_is_not() -> None:
    assert render_head(299, [("X", "é")], date=False) == b"HTTP/1.1 299 Unknown\r\nX: \xe9\r\n\r\n"
    assert render_head(200, [("Warning", "ж")], date=False).endswith(b"Warning: \xd0\xb6\r\n\r\n")


def test_chunks_and_stream_heads() -> None:
    assert frame_chunk(b"hello world, 17 b") == b"11\r\nhello world, 17 b\r\n"
    head = stream_head(200, [("Content-Type", "application/json")])
    status, headers, _ = split(head)
    assert status == "HTTP/1.1 200 OK"
    assert [k for k, _ in headers] == ["Content-Type", "Transfer-Encoding", "Cache-Control",
                                       "Date"]
    assert "Cache-Control: no-cache, private" not in stream_head(
        200, [("Cache-Control", "x")]).decode()


def test_the_answers_the_http_layer_sends_on_its_own() -> None:
    status, headers, body = split(too_large_answer(Limits(max_body_bytes=5)))
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert msgspec.json.decode(body)["message"] == "Request entity too large: limit is 5"
    assert dict(headers)["Connection"] == "close"
    status, headers, body = split(request_timeout_answer())
    assert status == "HTTP/1.1 504 Gateway Timeout" and body.endswith(b'"code":504}\n')
    assert dict(headers)["Content-Type"] == "text/plain; charset=utf-8"
    assert split(plain_answer(400, b"no"))[2] == b"no"
    assert msgspec.json.decode(internal_error().body)["reason"] == "InternalError"
    assert internal_error().body.endswith(b'"code":500}\n')


def test_a_status_error_keeps_its_retry_after() -> None:
    response = status_response(TooManyRequests("slow down", {"retryAfterSeconds": 3}))
    assert response.status == 429 and ("Retry-After", "3") in response.headers
    assert msgspec.json.decode(response.body)["message"] == "slow down"
    # ErrorNegotiated writes through the JSON serializer: json.Encoder's newline ends it
    assert response.body.endswith(b'"code":429}\n') and response.tail == b""
