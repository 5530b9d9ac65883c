"""The SQLite writer as a hub: one writer for the stores of ``serve --workers N``'s N processes.

One database file has one writer (group commit, dense revisions, the revision record,
compaction: ``writer``). With several worker processes, each with its own ``SQLiteStore``,
watch caches and reader threads on the file (WAL lets them read beside the writer), the
``serve`` parent runs that writer here, in a process of its own, listening on a Unix socket
(mode 0600, in the data directory or, when that path is too long for a socket, a private
temporary directory). A worker's store connects (``writer_process.HubWriter``) and:

- gets ``[HELLO, revision, compacted revision]`` first, sent under the lock every delivery
  takes, so it is followed by exactly the batches committed after ``revision``;
- sends the frames a writer process reads (``writer_child``: writes, compactions, pings), its
  own request ids tagged with its connection, and ``[BYE, id]`` to leave: answered after every
  earlier request of it, then its connection is closed;
- receives every committed batch, in revision order, each with only its own requests'
  outcomes (the same frame as a writer process's);
- may send ``[SYNC, id]``: the hub answers it at once, behind every batch it has delivered.
  A batch is queued to every connection before any of its writes is answered, so the answer
  follows every write any worker had acknowledged before: a store's ``consistent_revision`` is
  a sync, and a read on one worker sees every write another worker acknowledged (as a quorum
  read does on etcd), without waiting for the writer's commit in flight as a ping would.

Bounds: at most ``MAX_CLIENTS`` connections; per connection, what waits to be sent is bounded
(``MAX_BACKLOG_BYTES``) and a send that makes no headway for ``SEND_TIMEOUT_S`` drops the
connection. A dropped worker's store stops taking writes, its server exits and the parent
restarts it (its writes still queued here commit, as a cancelled write does in one server).

The hub ignores SIGINT and SIGTERM and runs until its standard input ends (the parent stops, or
dies): it stops listening, commits everything it read and exits. Its first line on standard
output is ``READY`` or why it cannot open the database (``writer_child``'s frames). No asyncio
here (it only slows the start).

    python -m kubewire.storage.sqlite.writer_hub PATH DURABILITY MAX_CHANGES MAX_AGE_S
                                                 MAX_VALUE_BYTES SOCKET

``HubProcess`` is the parent's handle on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from kubewire.storage.base import Change, Retention, StorageError
from kubewire.storage.sqlite.revision_record import RevisionLostError, RevisionRecord
from kubewire.storage.sqlite.schema import Durability, open_for_writing
from kubewire.storage.sqlite.writer import Outcome, PingRequest, StopRequest, Writer
from kubewire.storage.sqlite.writer_child import (
    FAILED,
    READY,
    VALUE,
    FrameReader,
    StoppedFlag,
    encode_batch,
    frame,
    request_from,
    unpack,
    write_all,
)

log = logging.getLogger(__name__)

HELLO = "hello"
# request kinds beside writer_child's WRITE, COMPACT, PING: leave; and a sync, answered at once
# after every batch delivered so far (unlike a ping, it does not wait for the writer)
BYE, SYNC = 3, 4
MAX_CLIENTS = 256
MAX_BACKLOG_BYTES = 256 << 20
SEND_TIMEOUT_S = 20.0
_SOCKET_NAME = "kubewire-writer.sock"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


class _Client:
    """One worker's connection: a reader thread submits its requests, a sender thread writes
    what ``put`` queued."""

    def __init__(self, hub: Hub, sock: socket.socket) -> None:
        self.hub = hub
        self.sock = sock
        self._cond = threading.Condition()
        self._queue: list[bytes] = []
        self._queued = 0
        self._closing = False  # close once what is queued is sent
        self.dropped = False
        self.bye: int | None = None

    def put(self, data: bytes) -> bool:
        """Queue ``data``; False if the backlog would pass ``MAX_BACKLOG_BYTES``."""
        with self._cond:
            if self.dropped or self._closing:
                return True
            if self._queued + len(data) > MAX_BACKLOG_BYTES:
                return False
            self._queue.append(data)
            self._queued += len(data)
            self._cond.notify()
        return True

    def finish(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self.dropped = True
            self._cond.notify()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def send_loop(self) -> None:
        while True:
            with self._cond:  # never held while taking the hub's lock (``deliver`` nests them)
                while not self._queue and not self._closing and not self.dropped:
                    self._cond.wait()
                is_done = self.dropped or not self._queue  # dropped, or closing and all sent
                data = b"".join(self._queue)
                self._queue.clear()
                self._queued = 0
            if is_done:
                self.hub.drop(self, None)
                break
            try:
                self.sock.sendall(data)
            except OSError as exc:  # a timeout too: it stopped reading
                self.hub.drop(self, f"cannot deliver to it ({exc or type(exc).__name__})")
                break
        with contextlib.suppress(OSError):
            self.sock.close()

    def read_loop(self) -> None:
        decode = msgspec.json.Decoder().decode
        frames = FrameReader()
        writer = self.hub.writer
        assert writer is not None
        while not self.dropped:
            try:
                data = self.sock.recv(1 << 20)
            except TimeoutError:  # idle: the send timeout applies to reads too
                continue
            except OSError:
                data = b""
            if not data:
                break
            for body in frames.feed(data):
                message = unpack(body)
                if message[0] == SYNC:
                    self.hub.sync(self, message[1])
                elif message[0] == BYE:
                    self.bye = message[1]
                    writer.submit(PingRequest((self, message[1])))  # type: ignore[arg-type]
                else:
                    writer.submit(request_from(message, decode,
                                                        lambda ident: (self, ident)))
        if self.bye is None:
            self.hub.drop(self, "its connection ended")


class Hub:
    """The clients, and the ``Writer``'s event loop stand-in: ``deliver`` runs on the writer
    thread, once per committed batch (or answered requests), in order."""

    def __init__(self, revision: int) -> None:
        self.lock = threading.Lock()
        self.clients: list[_Client] = []
        self.revision = revision  # the last delivered batch's
        self.last_commit_seconds: float | None = None
        self.writer: Writer | None = None
        self.stopping = False

    def create_future(self) -> StoppedFlag:
        return StoppedFlag()

    def call_soon_threadsafe(self, callback: Any, *args: Any) -> None:
        callback(*args)

    def deliver(self, changes: Sequence[Change], outcomes: Sequence[Outcome]) -> None:
        rows, results = encode_batch(changes, outcomes)
        seconds, self.last_commit_seconds = self.last_commit_seconds, None
        compacted = 0 if self.writer is None else self.writer.compacted_revision
        answers: dict[int, list[tuple[int, int, Any]]] = {}
        owners: dict[int, _Client] = {}
        for (client, ident), tag, value in results:
            answers.setdefault(id(client), []).append((ident, tag, value))
            owners[id(client)] = client
        slow: list[_Client] = []
        with self.lock:
            if changes:
                self.revision = changes[-1].revision
            for client in self.clients:
                mine = answers.get(id(client), [])
                if not rows and not mine:
                    continue
                if not client.put(frame([seconds if mine else None, compacted, rows, mine])):
                    slow.append(client)
                elif client.bye is not None and any(a[0] == client.bye for a in mine):
                    client.finish()
        for client in slow:
            self.drop(client, f"it fell {MAX_BACKLOG_BYTES >> 20} MiB behind")

    def sync(self, client: _Client, ident: int) -> None:
        """Answer ``client``'s sync behind every batch delivered so far. Each batch is queued
        to every client at once, under the lock, before any of its writes is answered: so the
        answer follows every write any client has had acknowledged before it asked."""
        with self.lock:
            compacted = 0 if self.writer is None else self.writer.compacted_revision
            is_queued = client.put(frame([None, compacted, [], [(ident, VALUE, None)]]))
        if not is_queued:
            self.drop(client, f"it fell {MAX_BACKLOG_BYTES >> 20} MiB behind")

    def add(self, sock: socket.socket) -> None:
        sock.settimeout(SEND_TIMEOUT_S)
        client = _Client(self, sock)
        with self.lock:
            if len(self.clients) >= MAX_CLIENTS or self.stopping or self.writer is None:
                sock.close()
                return
            client.put(frame([HELLO, self.revision, self.writer.compacted_revision]))
            self.clients.append(client)
        threading.Thread(target=client.send_loop, daemon=True).start()
        threading.Thread(target=client.read_loop, daemon=True).start()

    def drop(self, client: _Client, why: str | None) -> None:
        """Forget ``client``; ``why``: it is dropped for it (else it left, or the hub stops)."""
        with self.lock:
            if client not in self.clients:
                return
            self.clients.remove(client)
        if why is not None:
            log.error("SQLite writer hub: dropped a worker's connection: %s", why)
        client.stop()

    def accept_loop(self, listener: socket.socket) -> None:
        while not self.stopping:
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping:
                    return
                time.sleep(0.1)  # out of descriptors, say: try again
                continue
            self.add(sock)

    def close_all(self, timeout_s: float) -> None:
        """Send each client what is queued, then close it (within ``timeout_s``)."""
        with self.lock:
            self.stopping = True
            clients = list(self.clients)
        for client in clients:
            client.finish()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if not self.clients:
                    return
            time.sleep(0.02)
        with self.lock:
            clients = list(self.clients)
        for client in clients:
            self.drop(client, None)


def _listen(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):  # a dead hub's: the parent holds the data dir
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            listener.bind(path)
        finally:
            os.umask(old)
        listener.listen(64)
        listener.settimeout(0.2)  # the accept loop looks at ``stopping`` this often
    except BaseException:
        listener.close()
        raise
    return listener


def serve_hub(argv: Sequence[str]) -> int:
    """The hub's main: open the database, run the ``Writer``, serve clients until stdin ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s writer hub %(name)s: %(message)s")
    path, durability, max_changes, max_age_s, max_value_bytes, socket_path = argv
    retention = Retention(max_changes=int(max_changes) if max_changes else None,
                          max_age_s=float(max_age_s) if max_age_s else None)
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    sys.stdout = sys.stderr  # frames only on the pipe
    try:
        record = RevisionRecord(path)
    except (OSError, StorageError) as exc:
        write_all(stdout, frame([FAILED, f"the SQLite writer cannot open {path}: {exc}"]))
        return 1
    try:
        conn, revision, compacted = open_for_writing(
            path, "full" if durability == "full" else "normal", record)
        listener = _listen(socket_path)
    except (OSError, sqlite3.Error, StorageError) as exc:
        record.close()
        lost = ([exc.path, exc.revision, exc.recorded] if isinstance(exc, RevisionLostError)
                else None)  # the parent says what to do about it (``kubewire repair``)
        write_all(stdout, frame([FAILED, f"the SQLite writer cannot open {path}: {exc}", lost]))
        return 1
    hub = Hub(revision)
    writer = Writer(conn, hub, retention, time.time, hub.deliver)  # type: ignore[arg-type]
    writer.max_value_bytes = int(max_value_bytes)
    writer.compacted_revision = compacted
    writer.record = record
    writer.on_commit = lambda seconds: setattr(hub, "last_commit_seconds", seconds)
    hub.writer = writer
    writer.start()
    accepting = threading.Thread(target=hub.accept_loop, args=(listener,), daemon=True)
    accepting.start()
    write_all(stdout, frame(READY))
    while not writer.has_failed:  # until the parent closes the pipe (it stops, or died)
        readable, _, _ = select.select([stdin], [], [], 1.0)
        if readable and not os.read(stdin, 4096):
            break
    hub.stopping = True
    accepting.join()
    listener.close()
    with contextlib.suppress(OSError):
        os.unlink(socket_path)
    writer.submit(StopRequest())
    writer.join()  # everything read is committed and delivered (queued to its client)
    hub.close_all(SEND_TIMEOUT_S)
    record.close()
    return 1 if writer.has_failed else 0


# -- the parent's side ------------------------------------------------------------------------

def socket_path_for(data_dir: str | os.PathLike[str]) -> tuple[str, str | None]:
    """Where the hub listens, and a private directory made for it (None: the data dir)."""
    path = os.path.join(os.fspath(data_dir), _SOCKET_NAME)
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        return path, None
    private = tempfile.mkdtemp(prefix="kubewire-")  # mode 0700
    return os.path.join(private, _SOCKET_NAME), private


class HubProcess:
    """The parent's handle on the hub process."""

    def __init__(self, db_path: str | os.PathLike[str], durability: Durability,
                 retention: Retention, max_value_bytes: int) -> None:
        self.db_path = os.fspath(db_path)
        self.socket_path, self._private = socket_path_for(os.path.dirname(self.db_path))
        self._argv = [sys.executable, "-m", __name__, self.db_path, durability,
                      _text(retention.max_changes), _text(retention.max_age_s),
                      str(max_value_bytes), self.socket_path]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the hub and wait until it listens; raises ``StorageError`` with its reason."""
        from kubewire.storage.sqlite.writer_process import child_env

        process = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   start_new_session=True, env=child_env())
        self.process = process
        assert process.stdout is not None
        frames = FrameReader()
        bodies: list[bytes] = []
        while not bodies:
            data = os.read(process.stdout.fileno(), 1 << 16)
            if not data:
                break
            bodies = frames.feed(data)
        message = unpack(bodies[0]) if bodies else None
        if message == READY:
            return
        self.stop()
        if isinstance(message, list) and message and message[0] == FAILED:
            if len(message) > 2 and message[2]:
                raise RevisionLostError(*message[2])
            raise StorageError(str(message[1]))
        raise StorageError("the SQLite writer hub did not start")

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """End its input (it commits what it read, then exits) and wait; its exit status."""
        process = self.process
        code = None
        if process is not None:
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            try:
                code = process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.error("the SQLite writer hub did not stop in %.0fs: killed", timeout_s)
                process.kill()
                code = process.wait()
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
        return code


def _text(bound: float | None) -> str:
    return "" if bound is None else repr(bound)


if __name__ == "__main__":
    sys.exit(serve_hub(sys.argv[1:]))
