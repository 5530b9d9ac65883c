"""The in-memory ``Store``: no file, no writer thread or process; for tests that want
milliseconds.

Everything lives in one ``MemoryData`` (the current objects in a dict plus a sorted key list, and
the change log as a list whose index is the revision minus the compacted revision, since
revisions are dense). A write runs on the event loop from start to end without awaiting, so it is
atomic by construction and writes are ordered by the order they are called in; its listeners are
called before it returns. Written by hand rather than with a library: the contract (one global
revision, a change log with ``prev_value``, historical lists) is etcd's MVCC, which no
in-memory Python mapping offers.
"""

from __future__ import annotations

import builtins
import logging
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from kubewire.go_json_bytes import GoJSONEncoder
from kubewire.storage.base import (
    Change,
    ChangeListener,
    ChangeType,
    CompactedError,
    Create,
    Delete,
    KeyExistsError,
    KeyNotFoundError,
    Op,
    Record,
    Retention,
    RevisionMismatchError,
    StorageError,
    Update,
    ValueTooLargeError,
)

__all__ = ["MemoryData", "MemoryStore"]

log = logging.getLogger(__name__)

# Compact after this many changes or this long, whichever comes first (as the SQLite store).
AUTO_COMPACT_EVERY_CHANGES = 1_000
AUTO_COMPACT_INTERVAL_S = 60.0
# kube's etcd3 store's operation names (etcd_request_duration_seconds{operation}).
OPERATIONS: dict[type, str] = {Create: "create", Update: "update", Delete: "delete"}

_encoder = GoJSONEncoder()
_decode = msgspec.json.Decoder(dict[str, Any]).decode
_DEFAULT_RETENTION = Retention()


class MemoryData:
    """What a memory store holds; a second ``MemoryStore`` given the same data sees it all, as a
    second SQLite store opened on the same file does (one store open on it at a time).

    ``changes[i]`` has revision ``compacted + 1 + i``; ``prev_revisions[i]`` is the revision of
    the value it replaced (0 for ADDED).
    """

    __slots__ = ("changes", "compacted", "keys", "objects", "prev_revisions", "revision",
                 "value_bytes")

    def __init__(self) -> None:
        # bytes of the current values and of the retained changes' values and previous values
        # (what ``MemoryStore.size_bytes`` reports as the store's size)
        self.value_bytes = 0
        self.objects: dict[str, tuple[int, bytes]] = {}
        self.keys: list[str] = []  # the keys of ``objects``, sorted (code point order)
        self.changes: list[Change] = []
        self.prev_revisions: list[int] = []
        self.revision = 0
        self.compacted = 0

    def keys_from(self, prefix: str, start: str) -> Iterator[str]:
        """The current keys under ``prefix`` that are >= ``start``, in order."""
        keys = self.keys
        for i in range(bisect_left(keys, max(prefix, start)), len(keys)):
            key = keys[i]
            if not key.startswith(prefix):
                return
            yield key


class MemoryStore:
    """A ``Store`` in this process's memory.

    What the SQLite store's extras mean here, with no writer:

    - durability: none. ``write`` returns once the change is applied in memory and published;
      everything is lost with the process (or with the ``MemoryData``). A closed store's data
      stays in ``data`` and can be opened again by a new ``MemoryStore(data=...)``.
    - ``ping``: there is no writer to stall, so it answers True at once while the store is open
      (False once closed): the health checks are green exactly while writes are accepted.
    - ``is_writable``: open and not closed.
    - ``on_commit``: called with each write's duration (applying it in memory, listeners
      excluded), on the loop; there is no transaction, so this is the whole cost of a commit.
    - ``on_request``: as the SQLite store's, (operation, key or prefix, seconds) for writes,
      gets and lists.
    - ``max_value_bytes``: the same limit on an encoded object (``ValueTooLargeError``).
    - compaction: the same retention policy, run in one step (no chunks: dropping a prefix of a
      list costs microseconds), by ``compact()`` and after every 1000 changes or 60 s.

    Guarantees, beyond the ``Store`` protocol: revisions are dense (a failed write consumes
    none); the caller's object is not modified (the store stamps a copy, which becomes the
    change's ``obj`` hint, with the write's ``coerced`` hint); listeners are called with each
    change as a batch of one, in revision order, before ``write`` returns; a listener that
    raises is logged and the store carries on; ``list`` above the current revision raises
    ``ValueError``. Not thread-safe: use it from its event loop only.
    """

    def __init__(self, *, retention: Retention = _DEFAULT_RETENTION,
                 clock: Callable[[], float] = time.time, data: MemoryData | None = None) -> None:
        self.data = MemoryData() if data is None else data
        self._retention = retention
        self._clock = clock
        self._listeners: list[ChangeListener] = []
        self._is_open = False
        self._is_closed = False
        self._changes_since_compaction = 0
        self._next_compaction_at = time.monotonic() + AUTO_COMPACT_INTERVAL_S
        self.on_commit: Callable[[float], None] | None = None
        self.on_request: Callable[[str, str, float], None] | None = None
        self.max_value_bytes = 0  # encoded object size limit; 0: none

    @property
    def current_revision(self) -> int:
        return self.data.revision

    @property
    def compacted_revision(self) -> int:
        return self.data.compacted

    @property
    def writes_in_flight(self) -> int:
        return 0  # a write is published before ``write`` returns

    @property
    def is_writable(self) -> bool:
        return self._is_open and not self._is_closed

    async def open(self) -> None:
        """Start accepting calls; ``StorageError`` if already open or closed."""
        if self._is_open or self._is_closed:
            raise StorageError("store is already open (or was closed)")
        self._is_open = True

    async def close(self) -> None:
        """Stop accepting calls (idempotent); the data stays in ``data``."""
        self._is_closed = True

    async def ping(self, timeout_s: float) -> bool:
        """True while open: there is no writer that could fail to answer."""
        return self.is_writable

    def subscribe(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def _require_open(self) -> None:
        if not self._is_open or self._is_closed:
            raise StorageError("store is not open")

    async def write(self, op: Op) -> Change:
        """Apply ``op`` now and publish it; raises ``KeyExistsError``, ``KeyNotFoundError``,
        ``RevisionMismatchError`` or ``ValueTooLargeError`` (nothing changes then), or
        ``StorageError`` when the store is not open."""
        self._require_open()
        started = time.perf_counter()
        try:
            change = self._apply(op)
        finally:
            if self.on_request is not None:
                self.on_request(OPERATIONS[type(op)], op.key, time.perf_counter() - started)
        if self.on_commit is not None:
            try:  # observation only
                self.on_commit(time.perf_counter() - started)
            except Exception:
                log.exception("commit observer failed")
        batch = (change,)
        for listener in builtins.list(self._listeners):
            try:
                listener(batch)
            except Exception:
                log.exception("store listener %r failed", listener)
        self._changes_since_compaction += 1
        if (self._changes_since_compaction >= AUTO_COMPACT_EVERY_CHANGES
                or time.monotonic() >= self._next_compaction_at):
            self._compact()
        return change

    def _apply(self, op: Op) -> Change:
        data = self.data
        key = op.key
        found = data.objects.get(key)
        revision = data.revision + 1
        if isinstance(op, Create):
            if found is not None:
                raise KeyExistsError(key)
            obj, value = self._encoded(key, op.obj, revision)
            change = Change(revision=revision, type=ChangeType.ADDED, key=key, value=value,
                            prev_value=None, timestamp=self._clock(), obj=obj,
                            coerced=op.coerced)
            insort(data.keys, key)
            prev_revision = 0
        elif isinstance(op, Update | Delete):
            if found is None:
                raise KeyNotFoundError(key)
            prev_revision, prev_value = found
            if op.expected_revision is not None and op.expected_revision != prev_revision:
                raise RevisionMismatchError(key, op.expected_revision, prev_revision)
            if isinstance(op, Update):
                obj, value = self._encoded(key, op.obj, revision)
                change = Change(revision=revision, type=ChangeType.MODIFIED, key=key,
                                value=value, prev_value=prev_value, timestamp=self._clock(),
                                obj=obj, coerced=op.coerced)
            else:
                obj = _decode(prev_value)
                obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
                value = _encoder.encode(obj)
                change = Change(revision=revision, type=ChangeType.DELETED, key=key,
                                value=value, prev_value=prev_value, timestamp=self._clock(),
                                obj=obj)
        else:
            raise TypeError(f"not a store operation: {op!r}")
        # Nothing above changed the data: a failed precondition leaves it as it was.
        if change.type == ChangeType.DELETED:
            del data.objects[key]
            del data.keys[bisect_left(data.keys, key)]
            data.value_bytes -= len(change.prev_value or b"")
        else:
            data.objects[key] = (revision, value)
            data.value_bytes += len(value) - (len(found[1]) if found is not None else 0)
        data.value_bytes += _change_bytes(change)
        data.changes.append(change)
        data.prev_revisions.append(prev_revision)
        data.revision = revision
        return change

    def _encoded(self, key: str, obj: dict[str, Any], revision: int,
                 ) -> tuple[dict[str, Any], bytes]:
        """A stamped copy of ``obj`` (the caller's stays as it is) and its bytes."""
        copy = {**obj, "metadata": {**(obj.get("metadata") or {}),
                                    "resourceVersion": str(revision)}}
        value = _encoder.encode(copy)
        if self.max_value_bytes and len(value) > self.max_value_bytes:
            raise ValueTooLargeError(key, len(value), self.max_value_bytes)
        return copy, value

    async def consistent_revision(self) -> int:
        """``current_revision``: only this store writes its data."""
        return self.data.revision

    async def get(self, key: str) -> Record | None:
        self._require_open()
        started = time.perf_counter()
        found = self.data.objects.get(key)
        if self.on_request is not None:
            self.on_request("get", key, time.perf_counter() - started)
        return None if found is None else Record(key, found[0], found[1])

    async def list(self, prefix: str, *, revision: int = 0, start: str = "",
                   limit: int = 0) -> tuple[builtins.list[Record], int]:
        """Records under ``prefix`` in key order at ``revision`` (0 = current), from ``start``
        (inclusive), at most ``limit`` (0: all). ``CompactedError`` below the compacted
        revision, ``ValueError`` above the current one."""
        self._require_open()
        started = time.perf_counter()
        try:
            return self._list(prefix, revision, start, limit)
        finally:
            if self.on_request is not None:
                self.on_request("list", prefix, time.perf_counter() - started)

    def _list(self, prefix: str, revision: int, start: str,
              limit: int) -> tuple[builtins.list[Record], int]:
        data = self.data
        current = data.revision
        if revision in (0, current):
            objects = data.objects
            out: builtins.list[Record] = []
            for key in data.keys_from(prefix, start):
                rev, value = objects[key]
                out.append(Record(key, rev, value))
                if len(out) == limit:
                    break
            return out, current
        if revision > current:
            raise ValueError(f"revision {revision} is newer than the current revision {current}")
        if revision < data.compacted:
            raise CompactedError(revision, data.compacted)
        return self._list_historical(prefix, revision, start, limit), revision

    def _list_historical(self, prefix: str, revision: int, start: str,
                         limit: int) -> builtins.list[Record]:
        """The current state under the prefix with every change after ``revision`` undone,
        newest first: an ADDED key did not exist, a MODIFIED or DELETED one held its
        ``prev_value`` (at its previous revision)."""
        data = self.data
        lower = max(prefix, start)
        state: dict[str, tuple[int, bytes] | None] = {
            key: data.objects[key] for key in data.keys_from(prefix, start)}
        first = revision - data.compacted  # index of the first change after ``revision``
        changes, prev_revisions = data.changes, data.prev_revisions
        for i in range(len(changes) - 1, first - 1, -1):
            change = changes[i]
            key = change.key
            if key < lower or not key.startswith(prefix):
                continue
            if change.type == ChangeType.ADDED or change.prev_value is None:
                state[key] = None
            else:
                state[key] = (prev_revisions[i], change.prev_value)
        out: builtins.list[Record] = []
        for key in sorted(state):
            found = state[key]
            if found is None:
                continue
            out.append(Record(key, found[0], found[1]))
            if len(out) == limit:
                break
        return out

    async def changes_since(self, revision: int, prefix: str = "",
                            limit: int = 0) -> builtins.list[Change]:
        """Retained changes with revision > ``revision`` under ``prefix``, ascending;
        ``CompactedError`` if ``revision < compacted_revision``."""
        self._require_open()
        data = self.data
        if revision < data.compacted:
            raise CompactedError(revision, data.compacted)
        tail = data.changes[max(revision - data.compacted, 0):]
        if prefix:
            tail = [change for change in tail if change.key.startswith(prefix)]
        return tail[:limit] if limit > 0 else tail

    @property
    def size_bytes(self) -> int:
        """What the store holds, in encoded bytes: current objects and retained history (the
        memory store's ``apiserver_storage_size_bytes``; a SQLite store's is its file's)."""
        return self.data.value_bytes

    async def compact(self) -> int:
        """Drop changes outside the retention policy now; return the new compacted revision."""
        self._require_open()
        return self._compact()

    def _compact(self) -> int:
        data = self.data
        self._changes_since_compaction = 0
        self._next_compaction_at = time.monotonic() + AUTO_COMPACT_INTERVAL_S
        upper = data.revision - 1  # the newest change is never dropped
        horizon = data.compacted
        retention = self._retention
        if retention.max_changes is not None:
            horizon = max(horizon, min(upper, data.revision - retention.max_changes))
        if retention.max_age_s is not None:
            oldest_kept = self._clock() - retention.max_age_s
            young = upper
            for change in data.changes:  # judged in revision order, up to the first young one
                if change.timestamp >= oldest_kept:
                    young = change.revision - 1
                    break
            horizon = max(horizon, min(upper, young))
        if horizon > data.compacted:
            drop = horizon - data.compacted
            data.value_bytes -= sum(_change_bytes(change) for change in data.changes[:drop])
            del data.changes[:drop]
            del data.prev_revisions[:drop]
            data.compacted = horizon
        return data.compacted


def _change_bytes(change: Change) -> int:
    return len(change.value) + len(change.prev_value or b"")
