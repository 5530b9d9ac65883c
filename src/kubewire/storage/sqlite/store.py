"""The embedded default ``Store``: one SQLite file in WAL mode.

Threads: one writer owns the only writing connection and group-commits (``writer``), in a
thread or, with ``writer_process``, in a child process (``writer_process``). A small pool
of reader threads, each with its own connection, serves get, list and changes_since (WAL lets
them read while the writer commits). SQLite never runs on the event loop. Schema:
``schema``; queries: ``reads``; compaction: ``compaction``.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kubewire.storage.base import (
    Change,
    ChangeListener,
    Create,
    Delete,
    Op,
    Record,
    Retention,
    StorageError,
    Update,
)
from kubewire.storage.sqlite.reads import read_changes, read_list, read_record
from kubewire.storage.sqlite.revision_record import RevisionRecord
from kubewire.storage.sqlite.schema import (
    Durability,
    connect,
    open_for_writing,
)
from kubewire.storage.sqlite.writer import (
    CompactRequest,
    Outcome,
    PingRequest,
    StopRequest,
    Writer,
    WriteRequest,
    copy_for_write,
    writer_stopped,
)
from kubewire.storage.sqlite.writer_process import HubWriter, ProcessWriter

__all__ = ["SQLiteStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
# kube's etcd3 store's operation names (etcd_request_duration_seconds{operation}).
OPERATIONS: dict[type, str] = {Create: "create", Update: "update", Delete: "delete"}

# Reader threads: WAL readers never block each other, but the GIL and a 2-core box gain
# little beyond a few.
READER_THREADS = 4
# Writes queued or in flight at once; further writers wait, so the queue cannot grow unbounded.
MAX_PENDING_WRITES = 10_000
_DEFAULT_RETENTION = Retention()


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen (nobody may be left waiting for it)."""
    if not future.cancelled():
        future.exception()


class _ReaderPool:
    """Reader threads, each with its own read-only connection, all closed together."""

    def __init__(self, path: str | os.PathLike[str], durability: Durability) -> None:
        self._path = path
        self._durability = durability
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(READER_THREADS,
                                            thread_name_prefix="kubewire-sqlite-reader")

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self._path, self._durability, is_reader=True)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    async def run(self, query: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: query(self._connection()))

    def close(self) -> None:
        """Wait for running queries, then close every connection (blocking: run off the loop)."""
        self._executor.shutdown(wait=True)
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()


class SQLiteStore:
    """A ``Store`` in one SQLite database file, with the change log in the same file.

    Durability: with ``"full"`` (``PRAGMA synchronous=FULL``) a write is acknowledged only after
    its commit is fsynced, so it survives power loss. With ``"normal"`` (``synchronous=NORMAL``)
    an acknowledged write survives a crash of the process but the last commits may be lost on
    power loss or an OS crash; the database stays consistent either way.

    Guarantees, beyond the ``Store`` protocol:
    - writes queued while a commit is in flight share the next transaction (group commit); each
      still gets its own revision, in queue order, and its own outcome;
    - revisions are dense: a failed write consumes none;
    - the caller's object is not modified: the store stamps ``metadata.resourceVersion`` on a
      copy, and values are compact JSON with the caller's key order. The caller must not
      modify it either until ``write`` returns: the writer thread encodes it, and the copy
      (sharing everything below the top level and metadata) is the change's ``obj`` hint,
      which listeners read before ``write`` returns;
    - listeners run on the event loop, with each committed batch in revision order, before any
      write of that batch returns; a listener that raises is logged and the store carries on;
    - cancelling ``write`` after it was queued does not cancel the write: it commits (and is
      published), only the caller stops waiting; it holds its place among the
      ``MAX_PENDING_WRITES`` until the writer answers it;
    - every commit's revision is recorded outside the database before it is acknowledged, and
      ``open`` refuses a database that lost revisions (``revision_record``);
    - ``list`` with a ``revision`` above the newest committed one raises ``ValueError``;
    - the change log is also compacted automatically (after every 1000 changes or 60 s), in
      chunks so that writes wait only milliseconds behind it.

    ``clock`` gives change timestamps, which age-based retention is judged by. The store
    expects to be the only process writing its file. With ``writer_process`` the writer runs
    in a child process (``writer_process``) instead of a thread, so its commits do not
    wait for this process's GIL; it then keeps its own clock, ``time.time``.

    With ``hub`` (a Unix socket path) the writer is a hub shared with stores in other
    processes (``writer_hub``; ``serve --workers N``), which opened and checked the database
    and keeps the clock, the retention policy and the value size limit: this store reads the
    file and writes through the hub. Its listeners get every store's changes in revision order
    (others' without the ``obj`` hint), and ``consistent_revision`` asks the hub, so it
    covers writes other stores acknowledged. ``on_writer_lost`` is called if the hub drops it.
    """

    def __init__(self, path: str | os.PathLike[str], *,  # noqa: PLR0913 (keywords only)
                 durability: Durability = "full",
                 retention: Retention = _DEFAULT_RETENTION,
                 clock: Callable[[], float] = time.time, writer_process: bool = False,
                 hub: str | None = None) -> None:
        if (writer_process or hub is not None) and clock is not time.time:
            raise ValueError("a writer process keeps its own clock (time.time)")
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        self._path = path
        self._durability: Durability = durability
        self._retention = retention
        self._clock = clock
        self._listeners: list[ChangeListener] = []
        self._current_revision = 0
        self._writer: Writer | ProcessWriter | None = None
        self._writer_process = writer_process
        self._hub = hub
        self.on_writer_lost: Callable[[], None] | None = None
        self._readers: _ReaderPool | None = None
        self._record: RevisionRecord | None = None
        self._pending: asyncio.Semaphore | None = None
        self._slots: set[asyncio.Future[Any]] = set()  # the futures of writes holding a slot
        self._unpublished = 0  # writes submitted whose outcome has not come back
        self._ping: asyncio.Future[None] | None = None
        self._ping_sent_at = 0.0
        self._is_closing = False
        # Called with each transaction's duration, on the writer thread (or on the loop, with a
        # writer process): metrics only, must not block.
        self.on_commit: Callable[[float], None] | None = None
        # Called on the loop with (operation, key or prefix, seconds) when a write, get or list
        # returns (or fails): kube's etcd_request_duration_seconds. Metrics only.
        self.on_request: Callable[[str, str, float], None] | None = None
        self.max_value_bytes = 0  # encoded object size limit; 0: none

    @property
    def current_revision(self) -> int:
        """The revision of the last write whose change has been published to listeners."""
        return self._current_revision

    @property
    def is_writable(self) -> bool:
        """Open, and its writer alive (False once the writer thread or process has died)."""
        return self._writer is not None and not self._writer.has_failed \
            and not self._is_closing

    @property
    def compacted_revision(self) -> int:
        """The highest revision dropped from the change log (0 if none)."""
        return 0 if self._writer is None else self._writer.compacted_revision

    @property
    def writes_in_flight(self) -> int:
        return self._unpublished

    async def open(self) -> None:
        """Create or open the database, recover the revision counter, start the threads.

        Raises ``StorageError`` if the store is already open or the file has another schema,
        ``RevisionLostError`` if the database ends below the revision its record says was
        committed (``revision_record``), ``StoreInUseError`` while it is being repaired.
        """
        if self._writer is not None or self._is_closing:
            raise StorageError("store is already open (or was closed)")
        record = await asyncio.to_thread(RevisionRecord, self._path)
        try:
            writer = await self._start_writer(record)
        except BaseException:
            record.close()
            raise
        self._record = record  # held (locked) until close: no repair while the store is open
        self._readers = _ReaderPool(self._path, self._durability)
        self._pending = asyncio.Semaphore(MAX_PENDING_WRITES)
        self._writer = writer

    async def _start_writer(self, record: RevisionRecord) -> Writer | ProcessWriter:
        if self._hub is not None:
            hub = HubWriter(self._hub, asyncio.get_running_loop(), self._deliver)
            hub.on_commit = self.on_commit
            hub.on_lost = self._writer_lost
            await hub.start()
            self._current_revision = hub.revision
            return hub
        conn, revision, compacted = await asyncio.to_thread(self._open_writer_connection,
                                                            record)
        self._current_revision = revision
        loop = asyncio.get_running_loop()
        writer: Writer | ProcessWriter
        if self._writer_process:
            conn.close()
            writer = ProcessWriter(self._path, self._durability, self._retention, loop,
                                   self._deliver)
        else:
            writer = Writer(conn, loop, self._retention, self._clock, self._deliver)
            writer.record = record
        writer.on_commit = self.on_commit
        writer.max_value_bytes = self.max_value_bytes
        writer.compacted_revision = compacted
        if isinstance(writer, ProcessWriter):
            await writer.start()
        else:
            writer.start()
        return writer

    def _open_writer_connection(self, record: RevisionRecord,
                                ) -> tuple[sqlite3.Connection, int, int]:
        return open_for_writing(self._path, self._durability, record)

    async def close(self) -> None:
        """Commit every queued write, publish it, stop the threads and close the database.

        Idempotent. Writes attempted after ``close()`` starts raise ``StorageError``.
        """
        writer, readers = self._writer, self._readers
        if self._is_closing or writer is None or readers is None:
            self._is_closing = True
            return
        self._is_closing = True
        writer.submit(StopRequest())
        # The writer's deliveries were scheduled before ``stopped`` resolves, so they have run.
        await asyncio.shield(writer.stopped)
        await asyncio.to_thread(writer.join)
        await asyncio.to_thread(readers.close)
        if self._record is not None:
            self._record.close()

    def _writer_lost(self) -> None:
        if self.on_writer_lost is not None:
            self.on_writer_lost()

    def subscribe(self, listener: ChangeListener) -> None:
        """Call ``listener`` with every committed batch of changes, in revision order."""
        self._listeners.append(listener)

    def _deliver(self, changes: Sequence[Change], outcomes: Sequence[Outcome]) -> None:
        """On the loop: resolve a committed batch's writers, then publish the batch.

        Resolving a future only queues its callbacks, so the subscribers still take the batch
        before any writer resumes (a read after the answer sees the write); and what the
        subscribers queue for later runs after the writers' own callbacks (the watch caches
        write to watchers once the writers have answered: storage/cache.py).
        """
        if changes:
            self._current_revision = changes[-1].revision
        self._unpublished = max(0, self._unpublished - len(outcomes))
        slots = self._slots
        for future, outcome in outcomes:
            if future in slots:  # a write's: its slot is free once the writer answered
                slots.remove(future)
                assert self._pending is not None
                self._pending.release()
            if future.done():  # the caller cancelled its wait
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        if changes:
            for listener in builtins.list(self._listeners):
                try:
                    listener(changes)
                except Exception:
                    log.exception("store listener %r failed", listener)

    def _require_writer(self) -> Writer | ProcessWriter:
        if self._writer is None or self._is_closing:
            raise StorageError("store is not open")
        if self._writer.has_failed:
            raise writer_stopped()
        return self._writer

    async def write(self, op: Op) -> Change:
        """Apply ``op`` atomically in the next group commit and return its change.

        Raises ``KeyExistsError``, ``KeyNotFoundError`` or ``RevisionMismatchError`` when the
        precondition fails (nothing changes), ``StorageError`` if the store is not open or the
        transaction failed.
        """
        self._require_writer()
        obj = copy_for_write(op.obj) if isinstance(op, Create | Update) else None
        pending = self._pending
        assert pending is not None
        await pending.acquire()
        try:
            writer = self._require_writer()  # re-check: close() may have begun while we waited
        except BaseException:
            pending.release()
            raise
        future: asyncio.Future[Change] = asyncio.get_running_loop().create_future()
        # The slot is the writer's until it answers (``_deliver`` gives it back), even if the
        # caller stops waiting (a request timed out on a stalled writer): MAX_PENDING_WRITES
        # bounds what a writer holds.
        self._slots.add(future)
        started = time.perf_counter()
        self._unpublished += 1  # before submit: a writer that cannot take it answers at once
        try:
            writer.submit(WriteRequest(op, obj, future))
        except BaseException:  # not queued (an object that cannot be encoded): no slot held
            if future in self._slots:
                self._slots.remove(future)
                self._unpublished -= 1
                pending.release()
            raise
        try:
            # Not shielded: a caller that stops waiting cancels only ``future``, which the
            # writer does not read; the write commits and ``_deliver`` skips the answer (a
            # shield cost an extra future and two loop callbacks per write).
            return await future
        except asyncio.CancelledError:
            _retrieve(future)  # an outcome that arrived just before is not "never retrieved"
            raise
        finally:
            if self.on_request is not None:
                self.on_request(OPERATIONS[type(op)], op.key, time.perf_counter() - started)

    async def ping(self, timeout_s: float) -> bool:
        """Whether the writer answers within ``timeout_s`` (the health check).

        The ping queues behind the writes already sent, so a writer that is stalled, or so far
        behind that a write would wait longer, fails it. Callers share one ping in flight: while
        it is unanswered for longer than ``timeout_s`` every caller gets False at once.
        """
        if not self.is_writable:
            return False
        loop = asyncio.get_running_loop()
        ping = self._ping
        if ping is None or ping.done():
            ping = self._ping = loop.create_future()
            ping.add_done_callback(_retrieve)
            self._ping_sent_at = loop.time()
            self._require_writer().submit(PingRequest(ping))
        remaining = self._ping_sent_at + timeout_s - loop.time()
        if remaining <= 0:
            return False
        try:
            await asyncio.wait_for(asyncio.shield(ping), remaining)
        except (TimeoutError, StorageError):
            return False
        return True

    async def consistent_revision(self) -> int:
        """``current_revision``: one writer (this store's) commits every change, and its
        listeners have each change before its write returns. On a hub, after a sync: its
        answer follows every batch any store's write was acknowledged in (``writer_hub``)."""
        if self._hub is not None:
            writer = self._require_writer()
            assert isinstance(writer, HubWriter)
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            writer.sync(future)
            await future
        return self.current_revision

    async def get(self, key: str) -> Record | None:
        """The current record of ``key``, or None."""
        started = time.perf_counter()
        try:
            return await self._read(lambda conn: read_record(conn, key))
        finally:
            if self.on_request is not None:
                self.on_request("get", key, time.perf_counter() - started)

    async def list(self, prefix: str, *, revision: int = 0, start: str = "",
                   limit: int = 0) -> tuple[builtins.list[Record], int]:
        """Records under ``prefix`` in key order, at ``revision`` (0 = current).

        ``start`` is an inclusive lower bound on keys; ``limit`` > 0 caps the count. Returns the
        records and the revision they reflect (for ``revision=0``, the newest committed one,
        which may be just ahead of ``current_revision``). Raises ``CompactedError`` below
        ``compacted_revision`` and ``ValueError`` above the newest committed revision.
        """
        started = time.perf_counter()
        try:
            return await self._read(lambda conn: read_list(conn, prefix, revision, start, limit))
        finally:
            if self.on_request is not None:
                self.on_request("list", prefix, time.perf_counter() - started)

    async def changes_since(self, revision: int, prefix: str = "",
                            limit: int = 0) -> builtins.list[Change]:
        """Retained changes with revision > ``revision`` under ``prefix``, ascending.

        ``limit`` > 0 caps the count. Raises ``CompactedError`` if
        ``revision < compacted_revision``.
        """
        return await self._read(lambda conn: read_changes(conn, revision, prefix, limit))

    async def compact(self) -> int:
        """Drop changes outside the retention policy now; return the new ``compacted_revision``.

        Runs in the writer (thread or process) in chunks, with queued writes committed between
        chunks.
        """
        writer = self._require_writer()
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        writer.submit(CompactRequest(future))
        return await future

    async def _read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        if self._readers is None or self._is_closing:
            raise StorageError("store is not open")
        return await self._readers.run(query)
