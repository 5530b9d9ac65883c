"""WebSocketStream reads client frames with a reader it holds only while a frame is partial,
enforces RFC 6455's control-frame rules and bounds the pongs it owes a client that does not
read."""

from __future__ import annotations

import pytest

from kubewire.server.wire.websocket import (
    CLIENT_BURST_BYTES,
    CLIENT_BYTES_PER_S,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    MAX_CLIENT_FRAME,
    MAX_PONGS_OWED,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    WebSocketStream,
    close_frame,
    frame,
)


class FakeConnection:
    def __init__(self) -> None:
        self.write_paused = False
        self.written: list[bytes] = []
        self.closed = False
        self.aborted = False
        self.throttled: list[float] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def throttle_reading(self, seconds: float) -> None:
        self.throttled.append(seconds)

    def set_write_high_water(self, high: int | None) -> None:
        pass


def masked(opcode: int, payload: bytes, mask: bytes = b"\x01\x02\x03\x04", *,
           fin: bool = True) -> bytes:
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    size = len(payload)
    length = bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + size.to_bytes(2, "big")
    return bytes([(0x80 if fin else 0) | opcode]) + length + mask + body


def test_an_idle_stream_holds_no_reader() -> None:
    stream = WebSocketStream(FakeConnection())
    assert stream._reader is None


def test_a_ping_split_across_reads_is_answered_once_whole() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    wire = masked(OP_PING, b"hello")
    stream.feed(wire[:3])
    assert stream._reader is not None  # the partial frame waits in it
    assert conn.written == []
    stream.feed(wire[3:] + masked(OP_PING, b"again")[:1])
    assert conn.written == [frame(OP_PONG, b"hello")]
    stream.feed(masked(OP_PING, b"again")[1:])
    assert conn.written == [frame(OP_PONG, b"hello"), frame(OP_PONG, b"again")]
    assert stream._reader is None  # nothing partial: dropped again
    assert not stream.closed


def test_a_close_frame_ends_the_stream() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    stream.feed(masked(OP_CLOSE, b"\x03\xe8"))
    assert stream.closed and conn.closed
    assert conn.written == [close_frame()]


def test_an_unmasked_frame_is_a_protocol_error() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    stream.feed(frame(OP_PING, b"x"))
    assert stream.closed and conn.closed
    assert conn.written == [close_frame(CLOSE_PROTOCOL_ERROR)]


@pytest.mark.parametrize("wire", [
    masked(OP_PING, b"x" * 126),  # RFC 6455 5.5: control frames carry at most 125 bytes
    masked(OP_PONG, b"x" * 126),
    masked(OP_CLOSE, b"\x03\xe8" + b"x" * 124),
    masked(OP_PING, b"x", fin=False),  # and are never fragmented
    # the header alone decides: the payload of a 1 MiB ping is never waited for
    bytes([0x89, 0xFF]) + (1 << 20).to_bytes(8, "big") + b"mask",
])
def test_control_frames_breaking_the_rfcs_rules_get_close_1002(wire: bytes) -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    stream.feed(masked(OP_PING, b"p" * 125))  # the largest ping is answered
    assert conn.written == [frame(OP_PONG, b"p" * 125)]
    stream.feed(wire[:14])
    assert stream.closed and conn.closed
    assert conn.written[1:] == [close_frame(CLOSE_PROTOCOL_ERROR)]
    stream.feed(masked(OP_PING, b"late"))
    assert len(conn.written) == 2


def test_client_data_is_dropped_frame_by_frame_and_bounded() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    for _ in range(3):  # fragments are frames of their own, never put together
        stream.feed(masked(OP_TEXT, b"x" * 1000, fin=False))
        assert stream._reader is None and not stream.closed
    stream.feed(bytes([0x81, 0xFF]) + (MAX_CLIENT_FRAME + 1).to_bytes(8, "big") + b"mask")
    assert stream.closed and conn.written == [close_frame(CLOSE_TOO_BIG)]


def test_pongs_owed_to_a_client_that_does_not_read_are_bounded() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    for _ in range(3):  # paused now and then, but reading: every ping answered
        conn.write_paused = True
        stream.feed(masked(OP_PING, b"p") * MAX_PONGS_OWED)
        conn.write_paused = False
        stream.feed(masked(OP_PING, b"p"))
    assert len(conn.written) == 3 * 2  # one write per read, whatever it held
    assert b"".join(conn.written) == frame(OP_PONG, b"p") * (3 * (MAX_PONGS_OWED + 1))
    conn.written.clear()
    conn.write_paused = True  # the client reads nothing: its unsent bytes pile up
    stream.feed(masked(OP_PING, b"p") * MAX_PONGS_OWED)
    assert conn.written == [frame(OP_PONG, b"p") * MAX_PONGS_OWED]  # still answered
    assert not stream.closed
    stream.feed(masked(OP_PING, b"p"))
    assert stream.closed and conn.aborted  # then dropped, not one more pong buffered
    assert conn.written == [frame(OP_PONG, b"p") * MAX_PONGS_OWED]


def test_a_client_past_its_byte_budget_is_not_read_for_a_while() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    ping = masked(OP_PING, b"p" * 125)
    per_read = ping * 512  # ~66 KB a read, pongs answered as read
    sent = 0
    while not conn.throttled:
        stream.feed(per_read)
        sent += len(per_read)
    assert CLIENT_BURST_BYTES <= sent < CLIENT_BURST_BYTES + 2 * len(per_read)
    debt = sent - CLIENT_BURST_BYTES
    assert 0 < conn.throttled[0] <= debt / CLIENT_BYTES_PER_S + 0.05
    assert not stream.closed  # slowed down, not dropped: a ping flood only costs its own time
