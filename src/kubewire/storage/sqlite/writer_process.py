"""The SQLite writer in a process of its own, so that commits never wait for the server's GIL.

In one process, the writer thread releases the GIL for every SQLite step and must win it back
from the event loop, which holds it while it serves requests. Measured at 8 concurrent creates
(bench/FINDINGS.md), a group commit of four creates spent ~1.1 ms of its ~1.6 ms waiting for the
GIL, not in SQLite. Here the same ``Writer`` (group commit, dense revisions, per-write
outcomes, compaction) runs in a child process; the server talks to it over two pipes:

- to the child, one frame per request: a write (its id, the op, the key, the expected revision
  and the object's JSON, which the child stamps with its revision), a compaction, a ping (the
  health check: answered once the writer has handled everything sent before it), or EOF to stop;
- to the server, first ``READY`` (or why the child could not open the database), then one frame
  per committed batch: the changes, each request's outcome, the compacted revision and the
  commit's duration.

A frame is a 4-byte big-endian length and a msgpack array. The server's loop reads the replies
with a pipe transport, so no thread of the server takes part. The child is in its own session and
ignores SIGINT and SIGTERM: it stops when its input ends, after committing everything it read,
which is also what happens when the server is killed.

``ProcessWriter`` here is the server's side; ``writer_child`` is the child's, and holds
the framing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from kubewire.storage.base import (
    Change,
    ChangeType,
    Create,
    Delete,
    JSONObject,
    Retention,
    StorageError,
)
from kubewire.storage.sqlite import writer_child
from kubewire.storage.sqlite.schema import Durability
from kubewire.storage.sqlite.writer import (
    CompactRequest,
    Deliver,
    Outcome,
    PingRequest,
    Request,
    StopRequest,
    writer_stopped,
)
from kubewire.storage.sqlite.writer_child import (
    CHANGE,
    COMPACT,
    FAILED,
    OP_KINDS,
    PING,
    READY,
    VALUE,
    WRITE,
    FrameReader,
    encode_value,
    error_from,
    frame,
    unpack,
)
from kubewire.storage.sqlite.writer_hub import BYE, HELLO, SYNC

log = logging.getLogger(__name__)
_json = msgspec.json.Encoder()
# A row's change type by its number: ``ChangeType(n)`` is an Enum call (~1 µs a change).
_CHANGE_TYPES = {int(t): t for t in ChangeType}


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

    _ended_text = "SQLite writer process exited"

    def __init__(self, path: str | os.PathLike[str], durability: Durability, retention: Retention,
                 loop: asyncio.AbstractEventLoop, deliver: Deliver) -> None:
        self._argv = [sys.executable, "-m", writer_child.__name__, os.fspath(path),
                      durability, _text(retention.max_changes), _text(retention.max_age_s)]
        self._loop = loop
        self._deliver = deliver
        self._process: subprocess.Popen[bytes] | None = None
        self._input: asyncio.WriteTransport | None = None
        self._ready: asyncio.Future[None] = loop.create_future()
        # id -> (future, the write's private object or None)
        self._pending: dict[int, tuple[asyncio.Future[Any], JSONObject | None]] = {}
        self._coerced: dict[int, object] = {}  # ident -> its op's ``coerced`` hint
        self._next_id = 0
        self._outgoing = bytearray()
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
                                   start_new_session=True, env=child_env())
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._input, _ = await self._loop.connect_write_pipe(asyncio.Protocol, process.stdin)
        await self._loop.connect_read_pipe(lambda: _Pipe(self), process.stdout)
        try:
            await self._ready
        except StorageError:
            self._input.close()
            await asyncio.to_thread(process.wait)  # it exits at once; leave no zombie behind
            raise

    def submit(self, request: Request) -> None:
        if self.has_failed or self._input is None:
            if not isinstance(request, StopRequest):
                self._deliver((), [(request.future, writer_stopped())])
            return
        if isinstance(request, StopRequest):
            self._is_stopping = True
            self._send()
            self._input.close()  # EOF: the child commits what it read, then exits
            return
        ident = self._next_id = self._next_id + 1
        if isinstance(request, CompactRequest | PingRequest):
            self._pending[ident] = (request.future, None)
            self._queue(frame([COMPACT if isinstance(request, CompactRequest) else PING, ident]))
            return
        op = request.op
        obj = request.obj
        self._pending[ident] = (request.future, obj)
        coerced = None if isinstance(op, Delete) else op.coerced
        if coerced is not None and obj is not None:
            self._coerced[ident] = coerced
        expected = None if isinstance(op, Create) else op.expected_revision
        self._queue(frame([WRITE, ident, OP_KINDS[type(op)], op.key, expected,
                           None if obj is None else encode_value(obj, _json.encode)]))

    def _queue(self, data: bytes) -> None:
        # One pipe write per loop turn, not per request: a write is a syscall (~10-20 µs on a
        # VM), and the child takes what arrived together as one commit group anyway.
        if not self._outgoing:
            self._loop.call_soon(self._send)
        self._outgoing += data

    def _send(self) -> None:
        if self._outgoing and self._input is not None and not self._input.is_closing():
            self._input.write(bytes(self._outgoing))
        self._outgoing.clear()

    def received(self, body: bytes) -> None:
        message = unpack(body)
        if message == READY:
            self._ready.set_result(None)
            return
        if message[0] == FAILED:
            self._ready.set_exception(StorageError(message[1]))
            return
        seconds, self.compacted_revision, rows, results = message
        answered = [(self._pending.pop(ident), tag, value) for ident, tag, value in results]
        # a write's private copy is its change's hint, stamped as the child stamped its JSON
        hints = {value: obj for (_, obj), tag, value in answered
                 if tag == CHANGE and obj is not None}
        coerced: dict[int, object] = {}  # change row -> its write's ``coerced`` hint
        if self._coerced:
            for ident, tag, value in results:
                codec = self._coerced.pop(ident, None)
                if codec is not None and tag == CHANGE and value in hints:
                    coerced[value] = codec
        changes = [Change(revision=r[0], type=_CHANGE_TYPES[r[1]], key=r[2], value=r[3],
                          prev_value=r[4], timestamp=r[5], obj=_stamped(hints.get(i), r[0]),
                          coerced=coerced.get(i))
                   for i, r in enumerate(rows)]
        outcomes: list[Outcome] = [
            (future, changes[value] if tag == CHANGE
             else value if tag == VALUE else error_from(value))
            for (future, _), tag, value in answered]
        if seconds is not None and self.on_commit is not None:
            try:
                self.on_commit(seconds)
            except Exception:
                log.exception("commit observer failed")
        self._deliver(changes, outcomes)

    def ended(self) -> None:
        """The child's output ended: it stopped, or it died."""
        if not self._is_stopping and _succeeded(self._ready):
            log.error("%s; the store rejects further writes", self._ended_text)
        self.has_failed = True
        error = writer_stopped()
        if not self._ready.done():
            self._ready.set_exception(StorageError("the SQLite writer process did not start"))
        pending, self._pending = self._pending, {}
        self._coerced.clear()
        self._deliver((), [(future, error) for future, _ in pending.values()])
        if self._input is not None:
            self._input.close()
        if not self.stopped.done():
            self.stopped.set_result(None)

    def join(self) -> None:
        """Wait for the child to exit (blocking: call it from a thread)."""
        if self._process is not None:
            self._process.wait()


class HubWriter(ProcessWriter):
    """A worker store's handle on the writer hub (``writer_hub``): the same frames over a Unix
    socket, after the hub's ``[HELLO, revision, compacted revision]``. Batches other stores
    committed arrive too, their changes without the in-process ``obj`` hint. ``on_lost`` is
    called when the hub drops the connection or dies (not when the store closes it)."""

    _ended_text = "the SQLite writer hub closed this store's connection (dropped it, or died)"

    def __init__(self, socket_path: str, loop: asyncio.AbstractEventLoop,
                 deliver: Deliver) -> None:
        super().__init__("", "full", Retention(), loop, deliver)
        self._socket_path = socket_path
        self.revision = 0  # the hub's, when this store connected
        self.on_lost: Callable[[], None] | None = None

    async def start(self) -> None:
        """Connect and wait for the hub's greeting."""
        try:
            transport, _ = await self._loop.create_unix_connection(lambda: _Pipe(self),
                                                                   self._socket_path)
        except OSError as exc:
            raise StorageError(f"cannot reach the SQLite writer hub at {self._socket_path}: "
                               f"{exc.strerror or exc}") from exc
        self._input = transport
        await self._ready

    def received(self, body: bytes) -> None:
        if self._ready.done():
            super().received(body)
            return
        message = unpack(body)
        if isinstance(message, list) and message and message[0] == HELLO:
            _, self.revision, self.compacted_revision = message
            self._ready.set_result(None)
        else:
            self._ready.set_exception(StorageError("the SQLite writer hub did not greet"))

    def submit(self, request: Request) -> None:
        if isinstance(request, StopRequest) and not self.has_failed and self._input is not None:
            # leave: the hub answers after everything sent before, then closes the connection
            self._is_stopping = True
            ident = self._next_id = self._next_id + 1
            bye: asyncio.Future[None] = self._loop.create_future()
            self._pending[ident] = (bye, None)
            self._queue(frame([BYE, ident]))
            return
        super().submit(request)

    def sync(self, future: asyncio.Future[None]) -> None:
        """Resolve ``future`` once every batch the hub delivered before it read this has been
        delivered here (``writer_hub``'s SYNC)."""
        if self.has_failed or self._input is None or self._is_stopping:
            self._deliver((), [(future, writer_stopped())])
            return
        ident = self._next_id = self._next_id + 1
        self._pending[ident] = (future, None)
        self._queue(frame([SYNC, ident]))

    def ended(self) -> None:
        lost = not self._is_stopping and _succeeded(self._ready)
        super().ended()
        if lost and self.on_lost is not None:
            self.on_lost()


def _succeeded(future: asyncio.Future[None]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _text(bound: float | None) -> str:
    """A retention bound as an argument: "" for None (no bound); 0 is a bound."""
    return "" if bound is None else repr(bound)


def child_env() -> dict[str, str]:
    """This environment, with this kubewire's directory first on the child's import path (the
    server may have found it through a ``sys.path`` the child would not inherit)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))  # src/, above kubewire/
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here if not path else here + os.pathsep + path}


def _stamped(obj: JSONObject | None, revision: int) -> JSONObject | None:
    if obj is not None:
        obj["metadata"]["resourceVersion"] = str(revision)
    return obj
