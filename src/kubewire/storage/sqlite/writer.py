"""The SQLite store's writer thread: group commit, ordered delivery, background compaction.

One thread owns the only writing connection. It takes every request queued while its previous
transaction was in flight and commits them as one batch: each write gets its own revision (in
queue order) and its own outcome; a write whose precondition fails is skipped without consuming
a revision and without affecting the others. Only an SQLite error fails the whole batch, which
is then rolled back entirely.

After each commit the thread records the batch's last revision outside the database
(``revision_record``), then schedules one callback on the event loop with the batch's
changes and outcomes; callbacks run in commit order, so the store can publish changes in revision
order and resolve waiting writers after their changes are published. A ``PingRequest`` is
answered once everything queued before it has been handled: the store's health check.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder, go_escaped
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
from kubewire.storage.sqlite.compaction import compact_chunk
from kubewire.storage.sqlite.revision_record import RevisionRecord
from kubewire.storage.sqlite.schema import read_meta_int, resource_of, write_meta

if TYPE_CHECKING:  # the writer process imports this module, and asyncio costs it ~50 ms
    import asyncio

log = logging.getLogger(__name__)

# Writes per transaction: bounds one commit's lock time and the memory of one delivery.
MAX_BATCH_OPS = 1024
# Compact after this many committed changes or this long, whichever comes first.
AUTO_COMPACT_EVERY_CHANGES = 1_000
AUTO_COMPACT_INTERVAL_S = 60.0

_encoder = GoJSONEncoder()
_decoder = msgspec.json.Decoder()

_INSERT_CHANGE = ("INSERT INTO changes (revision, key, resource, type, value, prev_value,"
                  " prev_revision, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


@dataclass(slots=True)
class WriteRequest:
    """One write; ``obj`` is the store's private copy of ``op.obj`` (None for Delete).

    ``encoded``, when set, is the object already encoded by the store (``writer_process``, with
    msgspec, without Go's escapes) as ``(json, start, end)``: ``json[start:end]`` is the text of
    ``metadata.resourceVersion``'s string, which the writer replaces with the revision's digits
    (then escapes) instead of decoding and encoding the object again (``obj`` is then not read).
    """

    op: Op
    obj: JSONObject | None
    future: asyncio.Future[Change]
    encoded: tuple[bytes, int, int] | None = None


@dataclass(slots=True)
class CompactRequest:
    """Compact now; ``future`` gets the resulting ``compacted_revision``."""

    future: asyncio.Future[int]


@dataclass(slots=True)
class PingRequest:
    """Answer ``future`` (with None) once every request queued before it has been handled."""

    future: asyncio.Future[None]


class StopRequest:
    """Queued last by ``close()``: everything before it is committed, then the thread exits."""


Request = WriteRequest | CompactRequest | PingRequest | StopRequest
# A future and what to resolve it with: a result, or an exception to raise.
Outcome = tuple["asyncio.Future[Any]", object]
Deliver = Callable[[Sequence[Change], Sequence[Outcome]], None]


def copy_for_write(obj: JSONObject) -> JSONObject:
    """A copy the writer may stamp with a revision without touching the caller's object."""
    return {**obj, "metadata": dict(obj.get("metadata") or {})}


def encode_at(obj: JSONObject, revision: int) -> bytes:
    """Set ``metadata.resourceVersion`` to ``revision`` (in place) and encode compactly."""
    metadata = obj.setdefault("metadata", {})
    metadata["resourceVersion"] = str(revision)
    return _encoder.encode(obj)


class Writer:
    """The writer thread. Create it on the event loop thread, then ``start()`` it."""

    def __init__(self, conn: sqlite3.Connection, loop: asyncio.AbstractEventLoop,
                 retention: Retention, clock: Callable[[], float], deliver: Deliver) -> None:
        self._conn = conn
        self._loop = loop
        self._retention = retention
        self._clock = clock
        self._deliver = deliver
        self._queue: queue.SimpleQueue[Request] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="kubewire-sqlite-writer",
                                        daemon=True)
        self._compact_waiters: list[asyncio.Future[Any]] = []
        self._is_compacting = False
        self._changes_since_compaction = 0
        self._next_compaction_at = time.monotonic() + AUTO_COMPACT_INTERVAL_S
        self.compacted_revision = 0  # the store sets it from the database before start()
        self.on_commit: Callable[[float], None] | None = None  # transaction seconds
        self.max_value_bytes = 0  # 0: no limit; the store sets it before start()
        self.record: RevisionRecord | None = None  # the store sets it before start()
        self._is_record_failing = False
        self.has_failed = False
        self.stopped: asyncio.Future[None] = loop.create_future()

    def start(self) -> None:
        self._thread.start()

    def submit(self, request: Request) -> None:
        """Queue a request; if the thread has died, fail it (the loop-side check is racy)."""
        self._queue.put(request)
        if self.has_failed and not isinstance(request, StopRequest):
            self._schedule((), [(request.future, writer_stopped())])

    def join(self) -> None:
        self._thread.join()

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as exc:
            log.exception("SQLite writer thread failed; the store rejects further writes")
            self.has_failed = True
            self._fail_queued(exc)
        finally:
            self._conn.close()
            self._call_soon(self._set_stopped)

    def _set_stopped(self) -> None:
        if not self.stopped.done():
            self.stopped.set_result(None)

    def _serve(self) -> None:
        while True:
            requests = self._take(0.0 if self._is_compacting else self._seconds_to_compaction())
            writes = [r for r in requests if isinstance(r, WriteRequest)]
            if writes:
                self._commit(writes)
            self._compact_waiters.extend(
                r.future for r in requests if isinstance(r, CompactRequest))
            if self._compact_waiters or self._is_compaction_due():
                self._is_compacting = True
            if self._is_compacting:
                self._compact_step()
            pings = [(r.future, None) for r in requests if isinstance(r, PingRequest)]
            if pings:
                self._schedule((), pings)
            if any(isinstance(r, StopRequest) for r in requests):
                self._finish_compaction()
                return

    def _take(self, timeout: float) -> list[Request]:
        """Block up to ``timeout`` for one request, then take what else is queued (bounded)."""
        try:
            first = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return []
        requests = [first]
        while len(requests) < MAX_BATCH_OPS and not isinstance(requests[-1], StopRequest):
            try:
                requests.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return requests

    def _seconds_to_compaction(self) -> float:
        return max(self._next_compaction_at - time.monotonic(), 0.001)

    def _is_compaction_due(self) -> bool:
        return (self._changes_since_compaction >= AUTO_COMPACT_EVERY_CHANGES
                or time.monotonic() >= self._next_compaction_at)

    def _compact_step(self) -> None:
        self.compacted_revision, is_done = compact_chunk(self._conn, self._retention,
                                                         self._clock())
        if is_done:
            self._finish_compaction()

    def _finish_compaction(self) -> None:
        self._is_compacting = False
        self._changes_since_compaction = 0
        self._next_compaction_at = time.monotonic() + AUTO_COMPACT_INTERVAL_S
        if self._compact_waiters:
            outcomes = [(f, self.compacted_revision) for f in self._compact_waiters]
            self._compact_waiters = []
            self._schedule((), outcomes)

    def _commit(self, writes: list[WriteRequest]) -> None:
        """Commit one batch and schedule its delivery; an SQLite error fails the whole batch."""
        conn = self._conn
        started = time.perf_counter()
        try:
            conn.execute("BEGIN IMMEDIATE")
            changes, outcomes = self._apply_all(writes)
            if changes:
                write_meta(conn, "revision", changes[-1].revision)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.exception("SQLite write transaction failed; %d writes rejected", len(writes))
            self._abort(writes, exc)
            return
        except BaseException as exc:
            self._abort(writes, exc)
            raise
        if changes:
            self._note_revision(changes[-1].revision)
        if self.on_commit is not None:
            try:  # observation only: it must never stand between a commit and its delivery
                self.on_commit(time.perf_counter() - started)
            except Exception:
                log.exception("commit observer failed")
        self._changes_since_compaction += len(changes)
        self._schedule(changes, outcomes)

    def _note_revision(self, revision: int) -> None:
        """Record the committed revision before anyone learns of it. Failing to is logged (once
        per run of failures) and not fatal: it only weakens the check for a lost WAL."""
        if self.record is None:
            return
        try:
            self.record.write(revision)
        except OSError as exc:
            if not self._is_record_failing:
                log.error("cannot update the revision record %s: %s", self.record.path, exc)
            self._is_record_failing = True
            return
        self._is_record_failing = False

    def _abort(self, writes: list[WriteRequest], exc: BaseException) -> None:
        self._schedule((), [(w.future, _batch_error(exc)) for w in writes])
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def _apply_all(self, writes: list[WriteRequest]) -> tuple[list[Change], list[Outcome]]:
        # Read the counter inside the write lock: it is the truth even if another process wrote.
        base = read_meta_int(self._conn, "revision")
        now = self._clock()
        changes: list[Change] = []
        outcomes: list[Outcome] = []
        for write in writes:
            try:
                change = self._apply(write, base + len(changes) + 1, now)
            except sqlite3.Error:
                raise
            except Exception as exc:  # a failed precondition or bad input: this write only
                outcomes.append((write.future, exc))
                continue
            changes.append(change)
            outcomes.append((write.future, change))
        return changes, outcomes

    def _apply(self, write: WriteRequest, revision: int, now: float) -> Change:
        """Check the precondition, then write the object row and its change row.

        Everything that can fail for this write alone happens before the first statement that
        modifies the database, so a failure leaves the transaction as it was.
        """
        op = write.op
        if isinstance(op, Create):
            return self._create(write, op.key, revision, now)
        row = self._conn.execute("SELECT revision, value FROM objects WHERE key = ?",
                                 (op.key,)).fetchone()
        match op:
            case Update() | Delete():
                if row is None:
                    raise KeyNotFoundError(op.key)
                stored_rev, stored = row[0], bytes(row[1])
                if op.expected_revision is not None and op.expected_revision != stored_rev:
                    raise RevisionMismatchError(op.key, op.expected_revision, stored_rev)
                if isinstance(op, Delete):
                    return self._remove(op.key, (stored_rev, stored), (revision, now))
                value = self._checked(op.key, _encode_obj(write, revision))
                return self._put(op.key, (value, write.obj), (stored_rev, stored),
                                 (revision, now))
        raise TypeError(f"not a store operation: {op!r}")

    def _create(self, write: WriteRequest, key: str, revision: int, now: float) -> Change:
        """Insert the object row without looking it up first: the primary key's check is the
        existence check, and a statement that fails a constraint is undone by itself (SQLite's
        default ``ON CONFLICT ABORT``), leaving the transaction as it was."""
        value = _encode_obj(write, revision)
        if self.max_value_bytes and len(value) > self.max_value_bytes and self._exists(key):
            raise KeyExistsError(key)  # as before: an existing key is reported first
        self._checked(key, value)
        try:
            self._conn.execute("INSERT INTO objects (key, revision, value) VALUES (?, ?, ?)",
                               (key, revision, value))
        except sqlite3.IntegrityError:
            if self._exists(key):
                raise KeyExistsError(key) from None
            raise
        return self._recorded(key, (value, write.obj), None, (revision, now))

    def _exists(self, key: str) -> bool:
        return self._conn.execute("SELECT 1 FROM objects WHERE key = ?",
                                  (key,)).fetchone() is not None

    def _checked(self, key: str, value: bytes) -> bytes:
        if self.max_value_bytes and len(value) > self.max_value_bytes:
            raise ValueTooLargeError(key, len(value), self.max_value_bytes)
        return value

    def _put(self, key: str, new: tuple[bytes, JSONObject | None],
             prev: tuple[int, bytes] | None, stamp: tuple[int, float]) -> Change:
        # ``new``: the encoded value and the object it encodes (the change's in-process hint:
        # the store's private copy, which nothing modifies after ``encode_at``).
        self._conn.execute("INSERT OR REPLACE INTO objects (key, revision, value) VALUES (?, ?, ?)",
                           (key, stamp[0], new[0]))
        return self._recorded(key, new, prev, stamp)

    def _recorded(self, key: str, new: tuple[bytes, JSONObject | None],
                  prev: tuple[int, bytes] | None, stamp: tuple[int, float]) -> Change:
        """The change row of an object row just written (``_put``'s arguments)."""
        value, obj = new
        revision, now = stamp
        change_type = ChangeType.ADDED if prev is None else ChangeType.MODIFIED
        prev_rev, prev_value = prev if prev is not None else (None, None)
        self._conn.execute(_INSERT_CHANGE, (revision, key, resource_of(key), change_type, value,
                                            prev_value, prev_rev, now))
        return Change(revision=revision, type=change_type, key=key, value=value,
                      prev_value=prev_value, timestamp=now, obj=obj)

    def _remove(self, key: str, prev: tuple[int, bytes], stamp: tuple[int, float]) -> Change:
        revision, now = stamp
        prev_rev, prev_value = prev
        obj = _decoder.decode(prev_value)
        if not isinstance(obj, dict):
            raise StorageError(f"stored value of {key} is not a JSON object")
        value = encode_at(obj, revision)
        self._conn.execute("DELETE FROM objects WHERE key = ?", (key,))
        self._conn.execute(_INSERT_CHANGE, (revision, key, resource_of(key), ChangeType.DELETED,
                                            value, prev_value, prev_rev, now))
        return Change(revision=revision, type=ChangeType.DELETED, key=key, value=value,
                      prev_value=prev_value, timestamp=now, obj=obj)

    def _schedule(self, changes: Sequence[Change], outcomes: Sequence[Outcome]) -> None:
        self._call_soon(self._deliver, tuple(changes), tuple(outcomes))

    def _call_soon(self, callback: Callable[..., None], *args: object) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: nobody is left to tell
            log.warning("event loop closed; dropped a SQLite store notification")

    def _fail_queued(self, exc: BaseException) -> None:
        outcomes: list[Outcome] = [(f, _batch_error(exc)) for f in self._compact_waiters]
        while True:
            try:
                request = self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(request, StopRequest):
                outcomes.append((request.future, _batch_error(exc)))
        self._schedule((), outcomes)


def _encode_obj(write: WriteRequest, revision: int) -> bytes:
    if write.encoded is not None:
        data, start, end = write.encoded
        return go_escaped(b"%b%d%b" % (data[:start], revision, data[end:]))
    if write.obj is None:
        raise TypeError(f"{type(write.op).__name__} carries no object")
    return encode_at(write.obj, revision)


def writer_stopped() -> StorageError:
    """What a write gets once the writer (thread or process) has died."""
    return StorageError("the store's writer has stopped")


def _batch_error(exc: BaseException) -> StorageError:
    error = StorageError(f"write not committed: {exc}")
    error.__cause__ = exc
    return error
