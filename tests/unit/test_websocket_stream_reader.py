"""WebSocketStream reads client frames with a reader it holds only while a frame is partial."""

from __future__ import annotations

from kubewire.server.websocket import (
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    WebSocketStream,
    close_frame,
    frame,
)


class FakeConnection:
    def __init__(self) -> None:
        self.write_paused = False
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True


def masked(opcode: int, payload: bytes, mask: bytes = b"\x01\x02\x03\x04") -> bytes:
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + body


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


def test_an_unmasked_frame_aborts() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    stream.feed(frame(OP_PING, b"x"))
    assert stream.closed and conn.closed
    assert conn.written == []


def test_frames_after_a_close_in_the_same_read_get_no_answer() -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    stream.feed(masked(OP_CLOSE, b"") + masked(OP_PING, b"late"))
    assert conn.written == [close_frame()]
