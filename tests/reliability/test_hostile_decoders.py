"""Fuzz passes over the protobuf body decoder, text that is not UTF-8, and the WebSocket frame
reader.

Protobuf (server/protobuf.py ``decode_protobuf_object``): random bytes and mutations of valid
messages of several kinds (byte flips, insertions, deletions, splices, truncation) give a valid
object or a 400 BadRequest, never another exception; the same bodies over HTTP give a Status.
Text that is not UTF-8: JSON strings holding any bytes are stored as Go's decoder reads them
(one U+FFFD per byte of a bad sequence), through creates and merge patches; YAML bodies with
any bytes spliced in give an object or a 4xx Status, never a 500.
WebSocket (server/websocket.py ``FrameReader`` / ``WebSocketStream.feed``): any bytes, in any
split, give frames or ``FrameError`` (the stream aborts the connection), never another
exception; valid masked frames come back whole whatever the split; a client sending garbage
frames on a live watch is cut off while the server keeps serving.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.go_text import go_utf8
from kubewire.server.context import ServerConfig
from kubewire.server.wire.protobuf import (
    ENVELOPE_PREFIX,
    PROTOBUF_MEDIA_TYPE,
    decode_protobuf_object,
)
from kubewire.server.wire.websocket import (
    MAX_CLIENT_FRAME,
    FrameError,
    FrameReader,
    WebSocketStream,
)
from kubewire.status import BadRequest
from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP, POD
from tests.integration.wire import Session, call, create
from tests.reliability.strategies import HOSTILE, check_status_body
from tests.unit.test_protobuf import REALISTIC, encode_body

# --- protobuf -----------------------------------------------------------------------------------

VALID = [(obj["apiVersion"], obj["kind"], encode_body(obj)) for obj in REALISTIC]


@st.composite
def mutated_messages(draw: st.DrawFn) -> tuple[str, str, bytes]:
    api_version, kind, body = draw(st.sampled_from(VALID))
    data = bytearray(body)
    for _ in range(draw(st.integers(1, 6))):
        how = draw(st.sampled_from(["flip", "set", "insert", "delete", "splice", "varint"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if how == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "set" and data:
            data[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x08, 0x0A, 0x12, 0x1A]))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif how == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif how == "splice":
            _, _, other = draw(st.sampled_from(VALID))
            start = draw(st.integers(0, len(other)))
            data[at:] = other[start:]
        else:  # an overlong or huge varint where a length or tag was
            data[at:at + 1] = draw(st.sampled_from([b"\xff" * 10 + b"\x01", b"\xff" * 11,
                                                    b"\x80" * 9 + b"\x00", b"\xff\xff\xff\x0f"]))
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return api_version, kind, bytes(data)


def decode_or_bad_request(body: bytes, api_version: str, kind: str) -> None:
    try:
        obj = decode_protobuf_object(body, api_version, kind)
    except BadRequest:
        return
    assert isinstance(obj, dict) and isinstance(obj.get("kind"), str), obj


@HOSTILE
@given(message=mutated_messages())
def test_protobuf_mutated_valid_messages(message: tuple[str, str, bytes]) -> None:
    api_version, kind, body = message
    decode_or_bad_request(body, api_version, kind)


@HOSTILE
@given(data=st.binary(max_size=400), target=st.sampled_from(VALID))
def test_protobuf_random_bytes(data: bytes, target: tuple[str, str, bytes]) -> None:
    api_version, kind, _ = target
    decode_or_bad_request(data, api_version, kind)
    decode_or_bad_request(ENVELOPE_PREFIX + data, api_version, kind)


def test_protobuf_deep_nesting_is_bounded() -> None:
    """Nested length-delimited fields a thousand deep are refused, not a RecursionError."""
    payload = b""
    for _ in range(5000):
        payload = b"\x0a" + _varint(len(payload)) + payload
    for body in (ENVELOPE_PREFIX + payload,
                 ENVELOPE_PREFIX + b"\x12" + _varint(len(payload)) + payload):
        decode_or_bad_request(body, "v1", "Pod")


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@pytest.fixture(scope="module")
def proto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    data_dir: Path = tmp_path_factory.mktemp("hostile-proto")
    server = ServerThread(ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0,
                                       insecure_http=True)).start()
    try:
        create(server, CONFIG_MAP.collection(), CONFIG_MAP.obj("existing"))
        yield server
    finally:
        server.stop()


_COLLECTIONS = {
    ("v1", "ConfigMap"): CONFIG_MAP.collection(), ("v1", "Pod"): POD.collection(),
    ("apps/v1", "Deployment"): "/apis/apps/v1/namespaces/default/deployments",
    ("v1", "Secret"): "/api/v1/namespaces/default/secrets",
    ("v1", "Service"): "/api/v1/namespaces/default/services",
}


@HOSTILE
@given(message=mutated_messages())
def test_protobuf_bodies_over_http(proto_server: ServerThread,
                                   message: tuple[str, str, bytes]) -> None:
    api_version, kind, body = message
    path = _COLLECTIONS.get((api_version, kind), CONFIG_MAP.collection())
    with Session(proto_server) as session:
        before = session.call("GET", CONFIG_MAP.collection(None)).json
        reply = session.call("POST", path, body, {"Content-Type": PROTOBUF_MEDIA_TYPE})
        assert reply.status < 500, reply.body[:400]
        if reply.status >= 300:
            check_status_body(reply.status, reply.headers["content-type"], reply.body)
            assert session.call("GET", CONFIG_MAP.collection(None)).json == before


# --- text that is not UTF-8 ---------------------------------------------------------------------

_NAMES = itertools.count()
_BAD_PIECES = st.sampled_from([b"\xff", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf",
                               b"\xf4\x90\x80\x80", b"\xf0\x9f\x98\x80", "\u00e9".encode(),
                               b"\x80\x80"])
_BAD_UTF8 = st.lists(st.one_of(st.binary(max_size=4), _BAD_PIECES), max_size=8).map(b"".join)


def json_string(raw: bytes) -> bytes:
    """A JSON string literal holding ``raw`` as it is (only quote, backslash and controls
    escaped, as Go's scanner requires)."""
    out = bytearray(b'"')
    for byte in raw:
        if byte in b'"\\':
            out += b"\\" + bytes([byte])
        elif byte < 0x20:
            out += b"\\u%04x" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


@HOSTILE
@given(values=st.lists(_BAD_UTF8, min_size=1, max_size=3), patch=_BAD_UTF8)
def test_json_strings_that_are_not_utf8_store_as_go_reads_them(
        proto_server: ServerThread, values: list[bytes], patch: bytes) -> None:
    name = f"bytes-{next(_NAMES)}"
    data = b",".join(b'"k%d":%b' % (i, json_string(v)) for i, v in enumerate(values))
    body = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%b"},"data":{%b}}'
            % (name.encode(), data))
    expected = {f"k{i}": go_utf8(v) for i, v in enumerate(values)}
    with Session(proto_server) as session:
        reply = session.call("POST", CONFIG_MAP.collection(), body,
                             {"Content-Type": "application/json"})
        assert reply.status == 201, reply.body[:400]
        assert reply.json["data"] == expected
        reply = session.call("PATCH", CONFIG_MAP.item(name), b'{"data":{"p":%b}}'
                             % json_string(patch),
                             {"Content-Type": "application/merge-patch+json"})
        assert reply.status == 200, reply.body[:400]
        assert session.call("GET", CONFIG_MAP.item(name)).json["data"] == {
            **expected, "p": go_utf8(patch)}


_YAML_CONFIG_MAP = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yaml-%d\n"
                    b"  labels: &l {a: b}\ndata:\n  k: &v value\n  again: *v\n")


@HOSTILE
@given(at=st.integers(0, len(_YAML_CONFIG_MAP)), junk=st.one_of(_BAD_UTF8, st.binary(max_size=12)))
def test_yaml_bodies_with_bytes_spliced_in_never_fail_the_server(
        proto_server: ServerThread, at: int, junk: bytes) -> None:
    text = _YAML_CONFIG_MAP % next(_NAMES)
    body = text[:at] + junk + text[at:]
    reply = call(proto_server, "POST", CONFIG_MAP.collection(), body,
                 {"Content-Type": "application/yaml"})
    assert reply.status < 500, reply.body[:400]
    if reply.status >= 300:
        check_status_body(reply.status, reply.headers["content-type"], reply.body)
    try:
        readable = not _NOT_YAML_TEXT.search(body.decode("utf-8"))
    except UnicodeDecodeError:
        readable = False
    if not readable:  # go-yaml's reader stops it, whatever else is wrong after
        assert reply.status == 400
        message = reply.status_object()["message"]
        prefix = "the object provided is unrecognized (must be of type ConfigMap): yaml: "
        assert message.startswith(prefix), message
        assert message[len(prefix):].rsplit(" (", 1)[0] in _READER_PROBLEMS, message


_NOT_YAML_TEXT = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_READER_PROBLEMS = {"invalid leading UTF-8 octet", "incomplete UTF-8 octet sequence",
                    "invalid trailing UTF-8 octet", "invalid length of a UTF-8 sequence",
                    "invalid Unicode character", "control characters are not allowed"}


# --- WebSocket frames ---------------------------------------------------------------------------

def client_frame(opcode: int, payload: bytes, mask: bytes, fin: bool = True) -> bytes:
    head = bytes([(0x80 if fin else 0) | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


_MASKS = st.binary(min_size=4, max_size=4)
FRAMES = st.lists(st.one_of(  # valid frames: control ones (opcode 8-F) carry at most 125 bytes
    st.tuples(st.sampled_from([0x0, 0x1, 0x2, 0x3]), st.binary(max_size=300), _MASKS),
    st.tuples(st.sampled_from([0x8, 0x9, 0xA, 0xF]), st.binary(max_size=125), _MASKS)),
    max_size=6)


def _splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@HOSTILE
@given(frames=FRAMES, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_valid_frames_come_back_whole_in_any_split(frames: list[tuple[int, bytes, bytes]],
                                                  cuts: list[int]) -> None:
    got: list[tuple[int, bytes]] = []
    reader = FrameReader(lambda op, payload: got.append((op, payload)))
    wire = b"".join(client_frame(op, payload, mask) for op, payload, mask in frames)
    for piece in _splits(wire, cuts):
        reader.feed(piece)
    assert got == [(op, payload) for op, payload, _ in frames]


@HOSTILE
@given(data=st.one_of(st.binary(max_size=400),
                      st.builds(lambda f, junk: b"".join(client_frame(*x) for x in f) + junk,
                                FRAMES, st.binary(max_size=40))),
       cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_frame_reader_gives_frames_or_frame_error(data: bytes, cuts: list[int]) -> None:
    got: list[tuple[int, bytes]] = []
    reader = FrameReader(lambda op, payload: got.append((op, payload)))
    try:
        for piece in _splits(data, cuts):
            reader.feed(piece)
    except FrameError:
        pass
    assert all(isinstance(op, int) and 0 <= op <= 0xF for op, _ in got)


class FakeConnection:
    def __init__(self) -> None:
        self.write_paused = False
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.written.append(data)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def set_write_high_water(self, high: int | None) -> None:
        pass


@HOSTILE
@given(data=st.one_of(st.binary(max_size=400),
                      st.builds(lambda f: b"".join(client_frame(*x) for x in f), FRAMES)),
       cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_websocket_stream_feed_never_raises(data: bytes, cuts: list[int]) -> None:
    conn = FakeConnection()
    stream = WebSocketStream(conn)
    closes: list[bool] = []
    stream.on_close = lambda: closes.append(True)
    for piece in _splits(data, cuts):
        if conn.closed:
            break
        stream.feed(piece)
    assert len(closes) == (1 if stream.closed else 0)
    assert stream.closed == conn.closed


def test_oversized_frame_header_is_refused_without_buffering() -> None:
    reader = FrameReader(lambda op, payload: None)
    with pytest.raises(FrameError):
        reader.feed(b"\x81\xff" + struct.pack("!Q", MAX_CLIENT_FRAME + 1) + b"mask")
    with pytest.raises(FrameError):
        FrameReader(lambda op, payload: None).feed(b"\x81\x05hello")  # unmasked


async def test_garbage_frames_on_a_live_watch(make_server: Callable[..., ServerThread]) -> None:
    """Clients breaking the framing after the WebSocket handshake are dropped at once; the
    server keeps serving everyone else."""
    server = make_server()
    ws_url = server.url.replace("http", "ws", 1) + CONFIG_MAP.collection() + "?watch=true"
    junk = [b"\x81\x05hello",  # unmasked
            b"\x81\xff" + b"\xff" * 8 + b"mask",  # 2**64-1 bytes announced
            client_frame(0x1, b"hi", b"abcd") + b"\x82\x01x",  # a good frame, then unmasked
            client_frame(0x8, b"", b"mask")]  # a close: answered with a close
    async with aiohttp.ClientSession() as session:
        sockets: list[Any] = []
        for _ in junk:
            sockets.append(await session.ws_connect(ws_url, autoping=False))
        for ws, data in zip(sockets, junk, strict=True):
            # write raw bytes under the client's framing, as a hostile peer would
            ws._writer.transport.write(data)
        for ws in sockets:
            await asyncio.wait_for(ws.receive(), 10)  # a close or an error, promptly
        for ws in sockets:
            await ws.close()
    for i in range(3):
        assert call(server, "POST", CONFIG_MAP.collection(),
                    CONFIG_MAP.obj(f"after-{i}")).status == 201
    assert call(server, "GET", CONFIG_MAP.collection()).status == 200
