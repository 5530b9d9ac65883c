"""Finding watch lines in received chunks, and the one-pass shape check of object events."""

from __future__ import annotations

import random

import pytest

from kubewire.client.events import EventType, LineSplitter, object_span, parse_line

LINES = [b'{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a"}}}',
         b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}',
         b"",
         b'{"type":"MODIFIED","object":{"s":"new\\nline"}}',
         b"  ",
         b'{"type":"DELETED","object":{}}']


def lines_of(splitter: LineSplitter, chunk: bytes) -> list[bytes]:
    return [buffer[start:end] for buffer, start, end in splitter.spans(chunk)]


def test_spans_are_the_same_whatever_the_chunk_boundaries() -> None:
    body = b"\n".join(LINES) + b"\n"
    rng = random.Random(5)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randint(0, 12)))
        splitter = LineSplitter()
        got: list[bytes] = []
        for lo, hi in zip([0, *cuts], [*cuts, len(body)], strict=True):
            got += lines_of(splitter, body[lo:hi])
        assert got == LINES
        assert splitter.pending == b""


def test_a_line_split_over_many_chunks_is_joined_once_complete() -> None:
    splitter = LineSplitter()
    for piece in (b'{"type"', b':"ADDED"', b',"object":', b"{}"):
        assert splitter.spans(piece) == []
    assert splitter.pending == b'{"type":"ADDED","object":{}'
    assert lines_of(splitter, b'}\n{"x"') == [b'{"type":"ADDED","object":{}}']
    assert splitter.pending == b'{"x"'


def test_feed_drops_blank_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"\n \n{}\r\n\n") == [b"{}\r"]


def test_a_partial_line_over_the_bound_is_refused_even_across_chunks() -> None:
    splitter = LineSplitter(max_line_bytes=8)
    splitter.spans(b"\nxxxx")
    with pytest.raises(ValueError, match="longer than 8"):
        splitter.spans(b"xxxxx")


@pytest.mark.parametrize("line", [line for line in LINES if line.strip()])
def test_object_span_agrees_with_the_envelope_parse(line: bytes) -> None:
    padded = b"junk\n" + line + b"\nmore"
    span = object_span(padded, 5, 5 + len(line))
    raw = parse_line(line)
    if raw.type == "BOOKMARK":
        assert span is None
        return
    assert span is not None
    event_type, start, end = span
    assert event_type is EventType(raw.type)
    assert padded[start:end] == bytes(raw.object)


@pytest.mark.parametrize("line", [
    b'{"type": "ADDED", "object": {}}',  # spaces: another spelling, parsed in full
    b'{"object":{},"type":"ADDED"}',
    b'{"type":"ADDED","object":{}}\r',
    b'{"type":"ADDED","object":{}} ',
    b'{"type":"ERROR","object":{"kind":"Status","code":410}}',
    b'{"type":"ADDEDX","object":{}}',
    b'{"type":"ADDED"}',
    b'{"type":"',
    b"",
])
def test_other_spellings_take_the_general_path(line: bytes) -> None:
    assert object_span(line, 0, len(line)) is None


def test_lines_before_an_overlong_partial_line_are_handed_out_first() -> None:
    splitter = LineSplitter(max_line_bytes=8)
    assert lines_of(splitter, b"{}\n" + b"x" * 9) == [b"{}"]
    with pytest.raises(ValueError, match="longer than 8"):
        splitter.spans(b"x\n")
