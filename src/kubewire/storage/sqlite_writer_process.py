"""The SQLite writer in a process of its own, so that commits never wait for the server's GIL.

In one process, the writer thread releases the GIL for every SQLite step and must win it back
from the event loop, which holds it while it serves requests. Measured at 8 concurrent creates
(bench/FINDINGS.md), a group commit of four creates spent ~1.1 ms of its ~1.6 ms waiting for the
GIL, not in SQLite. Here the same ``Writer`` (group commit, dense revisions, per-write
outcomes, compaction) runs in a child process; the server talks to it over two pipes:

- to the child, one frame per request: a write (its id, the op, the key, the expected revision
  and the object's JSON, which the child stamps with its revision), a compaction, or EOF to stop;
- to the server, one frame per committed batch: the changes, each write's outcome, the compacted
  revision and the commit's duration.

A frame is a 4-byte big-endian length and a msgpack array. The server's loop reads the replies
with a pipe transport, so no thread of the server takes part. The child ignores terminal signals
(it is in its own session): it stops when its input ends, after committing everything it read,
which is also what happens when the server is killed.

``python -m kubewire.storage.sqlite_writer_process PATH DURABILITY MAX_CHANGES MAX_AGE_S
MAX_VALUE_BYTES`` is the child; ``ProcessWriter`` is the server's side.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from kubewire.storage.base import (
    Change,
    ChangeType,
    Create,
    Delete,
    JSONObject,
    KeyExistsError,
    KeyNotFoundError,
    Op,
    Retention,
    RevisionMismatchError,
    StorageError,
    Update,
    ValueTooLargeError,
)
from kubewire.storage.sqlite_schema import Durability, connect
from kubewire.storage.sqlite_writer import (
    CompactRequest,
    Deliver,
    Outcome,
    Request,
    StopRequest,
    Writer,
    WriteRequest,
)

log = logging.getLogger(__name__)

_HEADER = struct.Struct(">I")
_OP_KINDS: dict[type, int] = {Create: 0, Update: 1, Delete: 2}
# Outcome tags in a reply: the index of the write's change, a compacted revision, an error.
_CHANGE, _COMPACTED, _ERROR = 0, 1, 2
_READY = "ready"
_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()
_unpack = msgspec.msgpack.Decoder().decode


def frame(message: object) -> bytes:
    body = _msgpack.encode(message)
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Splits a byte stream into frame bodies."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        bodies = []
        start = 0
        while len(self._buffer) - start >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer, start)
            end = start + _HEADER.size + size
            if len(self._buffer) < end:
                break
            bodies.append(bytes(self._buffer[start + _HEADER.size:end]))
            start = end
        del self._buffer[:start]
        return bodies


# -- errors cross the pipe as a name and the constructor's arguments --------------------------

def _error_args(exc: BaseException) -> list[Any]:
    match exc:
        case KeyExistsError() | KeyNotFoundError():
            return [type(exc).__name__, exc.key]
        case RevisionMismatchError():
            return [type(exc).__name__, exc.key, exc.expected, exc.actual]
        case ValueTooLargeError():
            return [type(exc).__name__, exc.key, exc.size, exc.limit]
    return ["StorageError", str(exc)]


_ERRORS: dict[str, Callable[..., StorageError]] = {
    "KeyExistsError": KeyExistsError, "KeyNotFoundError": KeyNotFoundError,
    "RevisionMismatchError": RevisionMismatchError, "ValueTooLargeError": ValueTooLargeError,
    "StorageError": StorageError}


def _error(args: list[Any]) -> StorageError:
    return _ERRORS.get(args[0], StorageError)(*args[1:])


# -- the server's side ----------------------------------------------------------------------------

class _Pipe(asyncio.Protocol):
    def __init__(self, owner: ProcessWriter) -> None:
        self._owner = owner
        self._frames = FrameReader()

    def data_received(self, data: bytes) -> None:
        for body in self._frames.feed(data):
            self._owner.received(body)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.ended()


class ProcessWriter:
    """The server's handle on the writer process: the interface of ``Writer``, over pipes."""

    def __init__(self, path: str | os.PathLike[str], durability: Durability, retention: Retention,
                 loop: asyncio.AbstractEventLoop, deliver: Deliver) -> None:
        self._argv = [sys.executable, "-m", __name__, os.fspath(path), durability,
                      str(retention.max_changes or 0), str(retention.max_age_s or 0)]
        self._loop = loop
        self._deliver = deliver
        self._process: subprocess.Popen[bytes] | None = None
        self._input: asyncio.WriteTransport | None = None
        self._ready: asyncio.Future[None] = loop.create_future()
        # id -> (future, the write's private object or None)
        self._pending: dict[int, tuple[asyncio.Future[Any], JSONObject | None]] = {}
        self._next_id = 0
        self._is_stopping = False
        self.compacted_revision = 0
        self.on_commit: Callable[[float], None] | None = None  # transaction seconds
        self.max_value_bytes = 0
        self.has_failed = False
        self.stopped: asyncio.Future[None] = loop.create_future()

    async def start(self) -> None:
        """Start the child and wait until it has opened the database."""
        argv = [*self._argv, str(self.max_value_bytes), str(self.compacted_revision)]
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   start_new_session=True)
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._input, _ = await self._loop.connect_write_pipe(asyncio.Protocol, process.stdin)
        await self._loop.connect_read_pipe(lambda: _Pipe(self), process.stdout)
        await self._ready

    def submit(self, request: Request) -> None:
        if self.has_failed or self._input is None:
            if not isinstance(request, StopRequest):
                self._deliver((), [(request.future,
                                    StorageError("the store's writer has stopped"))])
            return
        if isinstance(request, StopRequest):
            self._is_stopping = True
            self._input.close()  # EOF: the child commits what it read, then exits
            return
        ident = self._next_id = self._next_id + 1
        if isinstance(request, CompactRequest):
            self._pending[ident] = (request.future, None)
            self._input.write(frame([1, ident]))
            return
        op = request.op
        obj = request.obj
        self._pending[ident] = (request.future, obj)
        expected = None if isinstance(op, Create) else op.expected_revision
        self._input.write(frame([0, ident, _OP_KINDS[type(op)], op.key, expected,
                                 None if obj is None else _json.encode(obj)]))

    def received(self, body: bytes) -> None:
        message = _unpack(body)
        if message == _READY:
            self._ready.set_result(None)
            return
        seconds, self.compacted_revision, rows, results = message
        changes = [Change(revision=r[0], type=ChangeType(r[1]), key=r[2], value=r[3],
                          prev_value=r[4], timestamp=r[5]) for r in rows]
        outcomes: list[Outcome] = []
        for ident, tag, value in results:
            future, obj = self._pending.pop(ident)
            if tag == _CHANGE:
                change = changes[value]
                if obj is not None:  # the private copy, stamped as the child stamped its JSON
                    obj["metadata"]["resourceVersion"] = str(change.revision)
                    changes[value] = change = _with_obj(change, obj)
                outcomes.append((future, change))
            elif tag == _COMPACTED:
                outcomes.append((future, value))
            else:
                outcomes.append((future, _error(value)))
        if seconds is not None and self.on_commit is not None:
            try:
                self.on_commit(seconds)
            except Exception:
                log.exception("commit observer failed")
        self._deliver(changes, outcomes)

    def ended(self) -> None:
        """The child's output ended: it stopped, or it died."""
        if not self._is_stopping:
            log.error("SQLite writer process exited; the store rejects further writes")
        self.has_failed = True
        error = StorageError("the store's writer has stopped")
        if not self._ready.done():
            self._ready.set_exception(StorageError("the SQLite writer process did not start"))
        pending, self._pending = self._pending, {}
        self._deliver((), [(future, error) for future, _ in pending.values()])
        if self._input is not None:
            self._input.close()
        if not self.stopped.done():
            self.stopped.set_result(None)

    def join(self) -> None:
        """Wait for the child to exit (blocking: call it from a thread)."""
        if self._process is not None:
            self._process.wait()


def _with_obj(change: Change, obj: JSONObject) -> Change:
    return Change(revision=change.revision, type=change.type, key=change.key, value=change.value,
                  prev_value=change.prev_value, timestamp=change.timestamp, obj=obj)


# -- the child --------------------------------------------------------------------------------

class _Replies:
    """Stands in for the event loop the ``Writer`` reports to: it writes each batch to stdout."""

    def __init__(self, out: int) -> None:
        self._out = out
        self._lock = threading.Lock()
        self.last_commit_seconds: float | None = None
        self.writer: Writer | None = None

    def create_future(self) -> concurrent.futures.Future[None]:
        return concurrent.futures.Future()

    def call_soon_threadsafe(self, callback: Callable[..., None], *args: Any) -> None:
        callback(*args)

    def deliver(self, changes: Sequence[Change], outcomes: Sequence[Outcome]) -> None:
        index = {id(change): i for i, change in enumerate(changes)}
        results: list[tuple[Any, int, Any]] = []
        for ident, outcome in outcomes:
            if isinstance(outcome, Change):
                results.append((ident, _CHANGE, index[id(outcome)]))
            elif isinstance(outcome, BaseException):
                results.append((ident, _ERROR, _error_args(outcome)))
            else:
                results.append((ident, _COMPACTED, outcome))
        rows = [(c.revision, int(c.type), c.key, c.value, c.prev_value, c.timestamp)
                for c in changes]
        seconds, self.last_commit_seconds = self.last_commit_seconds, None
        compacted = 0 if self.writer is None else self.writer.compacted_revision
        self.send(frame([seconds, compacted, rows, results]))

    def send(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view):]


def _request(message: list[Any], decode: Callable[[bytes], Any]) -> Request:
    if message[0] == 1:
        return CompactRequest(message[1])
    _, ident, kind, key, expected, body = message
    if body is None:
        return WriteRequest(Delete(key, expected), None, ident)
    obj: JSONObject = decode(body)
    op: Op = Create(key, obj) if kind == 0 else Update(key, obj, expected)
    return WriteRequest(op, obj, ident)


def serve_child(argv: Sequence[str]) -> int:
    """The child's main: open the database, run the ``Writer``, read requests until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path, durability, max_changes, max_age_s, max_value_bytes, compacted = argv
    retention = Retention(max_changes=int(max_changes) or None,
                          max_age_s=float(max_age_s) or None)
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    sys.stdout = sys.stderr  # frames only on the pipe
    replies = _Replies(stdout)
    conn = connect(path, "full" if durability == "full" else "normal", is_reader=False)
    writer = Writer(conn, replies, retention, time.time, replies.deliver)  # type: ignore[arg-type]
    writer.max_value_bytes = int(max_value_bytes)
    writer.compacted_revision = int(compacted)
    writer.on_commit = lambda seconds: setattr(replies, "last_commit_seconds", seconds)
    replies.writer = writer
    replies.send(frame(_READY))
    writer.start()
    decode = msgspec.json.Decoder().decode
    frames = FrameReader()
    while True:
        data = os.read(stdin, 1 << 20)
        if not data:
            break
        for body in frames.feed(data):
            writer.submit(_request(_unpack(body), decode))
    writer.submit(StopRequest())
    writer.join()
    return 1 if writer.has_failed else 0


if __name__ == "__main__":
    sys.exit(serve_child(sys.argv[1:]))
