"""The etcd ``Store``: kube-apiserver's etcd3 storage behind kubewire's ``Store`` contract.

Objects live where kube-apiserver keeps them (``keys``: ``/registry/pods/<ns>/<name>``, JSON as
with ``--storage-media-type application/json``), so ``etcdctl`` and kube's own tools read them,
and the revision is etcd's: an object's resourceVersion is its ``mod_revision``.

- **Writes** are single transactions, as kube's: a create is ``If(mod_revision == 0)
  Then(Put)``, an update or delete ``If(mod_revision == N) Then(...) Else(Get)`` (or "the key
  exists" when no revision is given), so any number of kubewire processes can write to one etcd
  with no other lock. A failed compare changes nothing and consumes no revision.
- **The change feed** is one etcd watch over the whole keyspace (``prev_kv`` on), from the
  revision the store opened at. It turns events under the prefix into ``Change``s and calls the
  listeners with each response's batch, in revision order, whoever wrote them (this process,
  another replica, ``etcdctl``). Watching every key rather than the prefix alone means every
  revision shows up as an event, so ``current_revision`` (the newest revision the feed has
  delivered) reaches any revision etcd reports, and a replay knows when it is complete, without
  trusting etcd's progress replies (3.4.23 can send them ahead of its events, etcd#15220).
- **A write returns once the feed has delivered its change**: the listeners (the watch caches)
  have it before the writer resumes, as the contract asks; ``write`` returns the very ``Change``
  they saw. The feed reconnects by itself from the revision after the last one delivered; if
  etcd compacted past that revision meanwhile, the store fails (``failure``), because changes
  were lost to it, and its health check says so.
- **Reads**: ``get`` is a linearizable range at the latest revision; ``list`` reads at the
  feed's revision (or the one asked for), so a list and the changes after it fit together with
  no gap and no double; ``consistent_revision`` is a quorum read's header revision (kube's
  ``GetCurrentResourceVersionFromStorage``), which a reader waits for the feed to reach.
  ``changes_since`` replays history with a watch from the revision asked for.
- **Compaction** follows the retention policy, coordinated between replicas exactly as kube's
  compactor does: a transaction on ``compact_rev_key`` (outside the prefix; its etcd version is
  a logical clock) decides which replica compacts, and the key's value is the compacted
  revision every replica learns (at open, and from the feed).
- **Timestamps**: etcd keeps no commit times. A ``Change``'s ``timestamp`` is when this store
  saw it (its own writes: when their change arrived; earlier history: when the store opened);
  age-based retention is judged on that timeline.

Extras the server uses, as on the other stores: ``on_commit``, ``on_request`` (kube's etcd3
operation names), ``max_value_bytes``, ``ping`` (a linearizable get of ``<prefix>/health``, as
kube's health check), ``size_bytes`` (etcd's database size, polled), ``last_error``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import grpc

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
    StorageTimeoutError,
    Update,
    ValueTooLargeError,
)

from . import client as etcd
from .client import DELETE, EtcdClient, EtcdConfig, EtcdError
from .keys import EtcdKeys, read_value, stored_value

__all__ = ["COMPACT_REV_KEY", "EtcdStore"]

log = logging.getLogger(__name__)

COMPACT_REV_KEY = b"compact_rev_key"  # kube's (storagebackend/factory/etcd3.go), no prefix
AUTO_COMPACT_EVERY_CHANGES = 1_000  # as the other stores: after this many own writes
AUTO_COMPACT_INTERVAL_S = 60.0  # ... or this long
STATUS_POLL_S = 30.0  # kube's --etcd-db-metric-poll-interval
LIST_PAGE = 10_000  # kube's reflector page against etcd
REPLAY_TIMEOUT_S = 60.0  # bound on one ``changes_since`` replay
MAX_FEED_BACKOFF_S = 2.0
OPERATIONS: dict[type, str] = {Create: "create", Update: "update", Delete: "delete"}
_DEFAULT_RETENTION = Retention()
_ALL_KEYS = b"\x00"  # as key and range end: every key in etcd


def _storage_error(exc: EtcdError) -> StorageError:
    """An etcd failure for the server: etcd's own text (kube relays it unchanged, 500), or
    ``StorageTimeoutError`` when the call's deadline passed, here or at the member, which
    returns its context's error (where kube, which gives etcd calls no deadline of their own,
    would reach the request's: 504)."""
    if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED or \
            "context deadline exceeded" in exc.details:
        return StorageTimeoutError(f"etcd did not answer in time: {exc.details}")
    return StorageError(exc.details or str(exc))


class EtcdStore:
    """A ``Store`` on an etcd v3 cluster; see the module docstring.

    ``prefix`` is kube-apiserver's ``--etcd-prefix``. Not thread-safe: use it from the event
    loop that opened it.
    """

    def __init__(self, config: EtcdConfig, *, prefix: str = "/registry",  # noqa: PLR0913
                 retention: Retention = _DEFAULT_RETENTION,
                 clock: Callable[[], float] = time.time,
                 compaction_key: bytes = COMPACT_REV_KEY,
                 compaction_interval_s: float = AUTO_COMPACT_INTERVAL_S) -> None:
        self.config = config
        self.keys = EtcdKeys(prefix)
        self._retention = retention
        self._clock = clock
        self._compaction_key = compaction_key
        self._compaction_interval_s = compaction_interval_s
        self._client: EtcdClient | None = None
        self._listeners: list[ChangeListener] = []
        self._revision = 0
        self._compacted = 0
        self._compact_version = 0  # compact_rev_key's etcd version as last seen
        self._is_open = False
        self._is_closed = False
        self._tasks: list[asyncio.Task[None]] = []
        # a write's change, handed over from the feed (by revision), and the keys with writes
        # in flight (whose changes are kept in ``_claims`` until their writer takes them)
        self._waiters: dict[int, asyncio.Future[Change]] = {}
        self._inflight: dict[str, int] = {}
        self._claims: dict[int, Change] = {}
        self._claims_of: dict[str, list[int]] = {}
        self._writes = 0
        self._writes_done = asyncio.Event()
        self._compacting = False
        self._changes_since_compaction = 0
        self._next_compaction_at = 0.0
        # when each revision was seen: (revision, time) per feed batch, revisions ascending
        self._seen_revisions: list[int] = []
        self._seen_times: list[float] = []
        self.failure: str | None = None  # why the store cannot go on (its feed lost changes)
        self.last_error: str | None = None  # the last etcd error a health check met
        self.server_version = ""
        self.db_size = 0
        self.db_sizes: dict[str, int] = {}  # endpoint -> its database size (-1: poll failed)
        self.on_commit: Callable[[float], None] | None = None
        self.on_request: Callable[[str, str, float], None] | None = None
        self.max_value_bytes = 0

    # -- state ------------------------------------------------------------------------------

    @property
    def current_revision(self) -> int:
        return self._revision

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    @property
    def writes_in_flight(self) -> int:
        # Not counted: a write's change comes back through etcd's watch, apart from its
        # transaction's answer, so the feed cannot tell which delivery ends which write.
        return 0

    @property
    def is_writable(self) -> bool:
        return self._is_open and not self._is_closed and self.failure is None

    @property
    def size_bytes(self) -> int:
        """etcd's database size as last polled (``apiserver_storage_size_bytes``)."""
        return self.db_size

    @property
    def client(self) -> EtcdClient:
        if self._client is None:
            raise StorageError("store is not open")
        return self._client

    def _require_open(self) -> None:
        if not self._is_open or self._is_closed:
            raise StorageError("store is not open")
        if self.failure is not None:
            raise StorageError(self.failure)

    # -- lifecycle ----------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, learn the revision and the compacted revision, start the feed."""
        if self._is_open or self._is_closed:
            raise StorageError("store is already open (or was closed)")
        client = self._client = EtcdClient(self.config)
        try:
            await client.connect()
            status = await client.status()
            self.server_version, self.db_size = status.version, status.db_size
            found = await client.range(self._compaction_key)
            if found.kvs:
                self._learn_compaction(found.kvs[0])
            self._revision = found.revision
        except EtcdError as exc:
            await client.close()
            self._client = None
            raise StorageError(f"etcd: {exc}") from exc
        self._seen_revisions.append(self._revision)
        self._seen_times.append(self._clock())
        self._next_compaction_at = time.monotonic() + self._compaction_interval_s
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        self._tasks = [loop.create_task(self._run_feed(started), name="etcd-feed"),
                       loop.create_task(self._run_ticker(), name="etcd-ticker")]
        try:
            await started
        except BaseException:
            await self._stop_tasks()
            await client.close()
            self._client = None
            raise
        self._is_open = True

    async def close(self) -> None:
        """Finish the writes in flight (their changes still arrive), then stop; idempotent."""
        if self._is_closed:
            return
        self._is_closed = True
        if self._writes and self.failure is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._writes_done.wait(), self.config.timeout)
        await self._stop_tasks()
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(StorageError("store closed"))
        if self._client is not None:
            await self._client.close()

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    def subscribe(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    async def ping(self, timeout_s: float) -> bool:
        """kube's etcd health check: a linearizable get of ``<prefix>/health`` (a missing key
        is healthy) within ``timeout_s``; ``last_error`` says why not."""
        if not self.is_writable or self._client is None:
            self.last_error = self.failure or "etcd client connection not yet established"
            return False
        try:
            await self._client.range(self.keys.root + b"health", timeout=timeout_s)
        except EtcdError as exc:
            # a deadline reached here is Go's context error in kube's text
            details = ("context deadline exceeded"
                       if exc.code == grpc.StatusCode.DEADLINE_EXCEEDED else exc.details)
            self.last_error = f"error getting data from etcd: {details}"
            return False
        self.last_error = None
        return True

    # -- the feed -----------------------------------------------------------------------------

    async def _run_feed(self, started: asyncio.Future[None]) -> None:
        backoff = 0.05
        client = self.client
        while True:
            try:
                async with client.watch(_ALL_KEYS, _ALL_KEYS, start_revision=self._revision + 1,
                                        prev_kv=True, progress_notify=True) as watch:
                    if not started.done():
                        started.set_result(None)
                    backoff = 0.05
                    async for response in watch:
                        if response.events:
                            self._deliver(response.events)
            except etcd.CompactedError as exc:
                self._fail(f"the store's change feed needs revision {self._revision + 1}, "
                           f"which etcd compacted (oldest kept: {exc.compact_revision})")
                if not started.done():
                    started.set_exception(StorageError(self.failure or ""))
                return
            except EtcdError as exc:
                if not started.done():
                    started.set_exception(StorageError(f"etcd: {exc}"))
                    return
                log.warning("etcd change feed interrupted at revision %d (%s); resuming",
                            self._revision, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_FEED_BACKOFF_S)

    def _fail(self, reason: str) -> None:
        log.error("etcd store failed: %s", reason)
        self.failure = reason
        for future in self._waiters.values():
            if not future.done():
                future.set_exception(StorageError(reason))
        self._waiters.clear()

    def _deliver(self, events: Sequence[Any]) -> None:
        """One watch response: changes under the prefix to the listeners, then to writers."""
        now = self._clock()
        batch: list[Change] = []
        for event in events:
            kv = event.kv
            revision = kv.mod_revision
            if revision > self._revision:
                self._revision = revision
            if kv.key == self._compaction_key and event.type != DELETE:
                self._learn_compaction(kv)
                continue
            key = self.keys.from_etcd(kv.key)
            if key is not None:
                batch.append(self._change_of(event, key, now))
        self._seen_revisions.append(self._revision)
        self._seen_times.append(now)
        # (an empty batch tells the listeners the revision moved on)
        for listener in builtins.list(self._listeners):
            try:
                listener(batch)
            except Exception:
                log.exception("store listener %r failed", listener)
        for change in batch:
            self._hand_over(change)

    def _hand_over(self, change: Change) -> None:
        """To the writer waiting for it, or kept for a writer whose answer is still coming."""
        future = self._waiters.pop(change.revision, None)
        if future is not None:
            if not future.done():
                future.set_result(change)
        elif change.key in self._inflight:
            self._claims[change.revision] = change
            self._claims_of.setdefault(change.key, []).append(change.revision)

    def _change_of(self, event: Any, key: str, timestamp: float) -> Change:
        kv = event.kv
        revision = kv.mod_revision
        prev = event.prev_kv if event.HasField("prev_kv") else None
        prev_value = None if prev is None else read_value(prev.value, prev.mod_revision)[1]
        if event.type == DELETE:
            # kube answers a delete with the last state at the delete's revision (prev_kv)
            obj, value = read_value(prev.value if prev is not None else b"{}", revision)
            return Change(revision, ChangeType.DELETED, key, value, prev_value, timestamp,
                          obj=obj)
        obj, value = read_value(kv.value, revision)
        kind = ChangeType.ADDED if kv.create_revision == revision else ChangeType.MODIFIED
        return Change(revision, kind, key, value, None if kind == ChangeType.ADDED
                      else prev_value, timestamp, obj=obj)

    def _learn_compaction(self, kv: Any) -> None:
        self._compact_version = max(self._compact_version, int(kv.version))
        try:
            self._compacted = max(self._compacted, int(kv.value))
        except ValueError:
            log.warning("%s holds %r, not a revision", self._compaction_key.decode(), kv.value)
        self._trim_timeline()

    def _time_of(self, revision: int) -> float:
        """When this store saw ``revision`` (the first sample at or after it)."""
        i = bisect_left(self._seen_revisions, revision)
        if i >= len(self._seen_times):
            return self._clock()
        return self._seen_times[i]

    # -- writes -------------------------------------------------------------------------------

    def _etcd_key(self, key: str) -> bytes:
        try:
            etcd_key = self.keys.to_etcd(key)
        except ValueError as exc:
            raise StorageError(str(exc)) from None
        if self.keys.from_etcd(etcd_key) != key:
            raise StorageError(f"key {key!r} has no place in kube's etcd layout")
        return etcd_key

    def _stored(self, key: str, obj: dict[str, Any]) -> bytes:
        value = stored_value(obj, custom=self.keys.is_custom(key))
        if self.max_value_bytes and len(value) > self.max_value_bytes:
            raise ValueTooLargeError(key, len(value), self.max_value_bytes)
        return value

    async def write(self, op: Op) -> Change:
        """One transaction; returns the change once the feed has delivered it to the
        listeners. ``KeyExistsError``, ``KeyNotFoundError``, ``RevisionMismatchError``,
        ``ValueTooLargeError`` (nothing changed), or ``StorageError`` (etcd failed: the write
        may or may not have happened, as with kube)."""
        self._require_open()
        key = op.key
        etcd_key = self._etcd_key(key)
        self._inflight[key] = self._inflight.get(key, 0) + 1
        self._writes += 1
        self._writes_done.clear()
        started = time.perf_counter()
        try:
            change = await self._write(op, key, etcd_key)
        finally:
            if self.on_request is not None:
                self.on_request(OPERATIONS[type(op)], key, time.perf_counter() - started)
            self._end_write(key)
        if self.on_commit is not None:
            try:
                self.on_commit(time.perf_counter() - started)
            except Exception:
                log.exception("commit observer failed")
        self._changes_since_compaction += 1
        if (self._changes_since_compaction >= AUTO_COMPACT_EVERY_CHANGES
                or time.monotonic() >= self._next_compaction_at):
            await self._compact_quietly()
        return change

    def _end_write(self, key: str) -> None:
        left = self._inflight[key] - 1
        if left:
            self._inflight[key] = left
        else:
            del self._inflight[key]
            for revision in self._claims_of.pop(key, ()):
                self._claims.pop(revision, None)
        self._writes -= 1
        if not self._writes:
            self._writes_done.set()

    async def _write(self, op: Op, key: str, etcd_key: bytes) -> Change:
        client = self.client
        try:
            if isinstance(op, Create):
                result = await client.txn([etcd.mod_revision_is(etcd_key, 0)],
                                          [etcd.put_op(etcd_key, self._stored(key, op.obj))])
                if not result.succeeded:
                    raise KeyExistsError(key)
            else:
                check = (etcd.exists(etcd_key) if op.expected_revision is None
                         else etcd.mod_revision_is(etcd_key, op.expected_revision))
                action = (etcd.put_op(etcd_key, self._stored(key, op.obj))
                          if isinstance(op, Update) else etcd.delete_op(etcd_key))
                result = await client.txn([check], [action], [etcd.get_op(etcd_key)])
                if not result.succeeded:
                    found = result.range_kvs()
                    if not found:
                        raise KeyNotFoundError(key)
                    raise RevisionMismatchError(key, op.expected_revision or 0,
                                                int(found[0].mod_revision))
        except EtcdError as exc:
            if "request is too large" in exc.details:
                raise ValueTooLargeError(key, 0, 0) from exc
            raise _storage_error(exc) from exc
        return await self._visible(result.revision, key)

    async def _visible(self, revision: int, key: str) -> Change:
        """The change the feed made of this process's write at ``revision``."""
        change = self._claims.pop(revision, None)
        if change is not None:
            return change
        if self.failure is not None:
            raise StorageError(self.failure)
        future: asyncio.Future[Change] = asyncio.get_running_loop().create_future()
        self._waiters[revision] = future
        try:
            return await asyncio.wait_for(future, self.config.timeout)
        except TimeoutError:
            raise StorageError(f"the write of {key} committed at revision {revision}, but the "
                               f"change feed did not deliver it within "
                               f"{self.config.timeout:g}s") from None
        finally:
            self._waiters.pop(revision, None)

    # -- reads --------------------------------------------------------------------------------

    async def get(self, key: str) -> Record | None:
        self._require_open()
        started = time.perf_counter()
        try:
            found = await self.client.range(self._etcd_key(key))
        except EtcdError as exc:
            raise _storage_error(exc) from exc
        finally:
            if self.on_request is not None:
                self.on_request("get", key, time.perf_counter() - started)
        if not found.kvs:
            return None
        kv = found.kvs[0]
        return Record(key, int(kv.mod_revision), read_value(kv.value, kv.mod_revision)[1])

    async def consistent_revision(self) -> int:
        """etcd's current revision by a quorum read (kube's
        ``GetCurrentResourceVersionFromStorage``): a reader that waits for the feed to reach
        it reads everything any replica acknowledged before."""
        self._require_open()
        try:
            found = await self.client.range(self.keys.root, etcd.prefix_end(self.keys.root),
                                            limit=1, keys_only=True)
        except EtcdError as exc:
            raise _storage_error(exc) from exc
        return max(found.revision, self._revision)

    async def list(self, prefix: str, *, revision: int = 0, start: str = "",
                   limit: int = 0) -> tuple[builtins.list[Record], int]:
        """Records under ``prefix`` in key order at ``revision`` (0: the feed's current
        revision), from ``start`` (inclusive), at most ``limit`` (0: all)."""
        self._require_open()
        started = time.perf_counter()
        try:
            return await self._list(prefix, revision, start, limit)
        finally:
            if self.on_request is not None:
                self.on_request("list", prefix, time.perf_counter() - started)

    async def _list(self, prefix: str, revision: int, start: str,
                    limit: int) -> tuple[builtins.list[Record], int]:
        current = self._revision
        if revision > current:
            raise ValueError(f"revision {revision} is newer than the current revision {current}")
        at = revision or current
        if at < self._compacted:
            raise CompactedError(at, self._compacted)
        root, ordered = self.keys.range_of(prefix)
        begin, end = root, etcd.prefix_end(root)
        if ordered:
            if start > prefix:
                if not start.startswith(prefix):
                    return [], at
                begin = self.keys.to_etcd(start)
            kvs = await self._range(begin, end, at, limit)
            records = [Record(prefix + kv.key[len(root):].decode(), int(kv.mod_revision),
                              read_value(kv.value, kv.mod_revision)[1])
                       for kv in kvs]
            return records, at
        out: builtins.list[Record] = []
        for kv in await self._range(begin, end, at, 0):
            key = self.keys.from_etcd(kv.key)
            if key is None or not key.startswith(prefix) or key < start:
                continue
            out.append(Record(key, int(kv.mod_revision), read_value(kv.value,
                                                                    kv.mod_revision)[1]))
        out.sort(key=lambda record: record.key)
        return (out[:limit] if limit else out), at

    async def _range(self, begin: bytes, end: bytes, at: int, limit: int) -> builtins.list[Any]:
        """Every kv in ``[begin, end)`` at ``at`` (at most ``limit``), in pages."""
        out: builtins.list[Any] = []
        try:
            while True:
                page = LIST_PAGE if not limit else min(LIST_PAGE, limit - len(out))
                found = await self.client.range(begin, end, revision=at, limit=page)
                out.extend(found.kvs)
                if not found.more or not found.kvs or (limit and len(out) >= limit):
                    return out
                begin = found.kvs[-1].key + b"\x00"
        except etcd.CompactedError as exc:
            raise CompactedError(at, max(self._compacted, at + 1)) from exc
        except etcd.FutureRevisionError as exc:
            raise ValueError(f"revision {at} is newer than etcd's") from exc
        except EtcdError as exc:
            raise _storage_error(exc) from exc

    async def changes_since(self, revision: int, prefix: str = "",
                            limit: int = 0) -> builtins.list[Change]:
        """Changes after ``revision`` under ``prefix`` up to the current revision, replayed
        from etcd's history; ``CompactedError`` below the compacted revision."""
        self._require_open()
        if revision < self._compacted:
            raise CompactedError(revision, self._compacted)
        target = self._revision
        out: builtins.list[Change] = []
        if revision >= target:
            return out
        try:
            async with asyncio.timeout(REPLAY_TIMEOUT_S), self.client.watch(
                    _ALL_KEYS, _ALL_KEYS, start_revision=revision + 1, prev_kv=True,
                    progress_notify=False) as watch:
                async for response in watch:
                    if self._replayed(response.events, target, prefix, limit, out):
                        return out
        except etcd.CompactedError as exc:
            raise CompactedError(revision, max(self._compacted, exc.compact_revision)) from exc
        except TimeoutError:
            raise StorageError(f"replaying etcd's history after revision {revision} took "
                               f"over {REPLAY_TIMEOUT_S:g}s") from None
        except EtcdError as exc:
            raise _storage_error(exc) from exc
        return out

    def _replayed(self, events: Sequence[Any], target: int, prefix: str, limit: int,
                  out: builtins.list[Change]) -> bool:
        """Add a replayed response's changes under ``prefix`` to ``out``; True once the
        replay is complete (``target`` reached, or ``limit`` changes)."""
        for event in events:
            at = event.kv.mod_revision
            if at > target:
                return True
            key = self.keys.from_etcd(event.kv.key)
            if key is None or not key.startswith(prefix):
                continue
            out.append(self._change_of(event, key, self._time_of(at)))
            if limit and len(out) >= limit:
                return True
        return bool(events) and events[-1].kv.mod_revision >= target

    # -- compaction and the ticker ----------------------------------------------------------

    async def compact(self) -> int:
        """Compact to what the retention policy no longer keeps, if this replica wins kube's
        ``compact_rev_key`` transaction; the compacted revision as known after it."""
        self._require_open()
        self._changes_since_compaction = 0
        self._next_compaction_at = time.monotonic() + self._compaction_interval_s
        client = self.client
        for _ in range(3):
            horizon = self._horizon()
            if horizon <= self._compacted:
                break
            key = self._compaction_key
            seen = self._compact_version
            try:
                result = await client.txn([etcd.version_is(key, seen)],
                                          [etcd.put_op(key, str(horizon).encode())],
                                          [etcd.get_op(key)])
                if not result.succeeded:  # another replica compacted since: learn, retry
                    found = result.range_kvs()
                    if found:
                        self._learn_compaction(found[0])
                    # kube's "t = the key's version": exactly etcd's, never a count of ours
                    self._compact_version = int(found[0].version) if found else 0
                    continue
                # our put's version is seen + 1; the feed may have brought it already (so no
                # "+= 1", which counted it twice and then lost every later compare)
                self._compact_version = max(self._compact_version, seen + 1)
                with contextlib.suppress(etcd.CompactedError):
                    await client.compact(horizon)
            except EtcdError as exc:
                raise _storage_error(exc) from exc
            self._compacted = max(self._compacted, horizon)
            self._trim_timeline()
            break
        return self._compacted

    def _trim_timeline(self) -> None:
        """Forget when compacted revisions were seen (one sample at or before the compacted
        revision stays: the time of the first revision kept)."""
        keep = bisect_left(self._seen_revisions, self._compacted)
        if keep > 1:
            del self._seen_revisions[:keep - 1]
            del self._seen_times[:keep - 1]

    def _horizon(self) -> int:
        """The newest revision the retention policy lets go (the newest is always kept)."""
        upper = self._revision - 1
        horizon = self._compacted
        retention = self._retention
        if retention.max_changes is not None:
            horizon = max(horizon, min(upper, self._revision - retention.max_changes))
        if retention.max_age_s is not None:
            oldest_kept = self._clock() - retention.max_age_s
            young = upper
            for i, seen in enumerate(self._seen_times):
                if seen >= oldest_kept:
                    young = self._seen_revisions[i - 1] if i else horizon
                    break
            horizon = max(horizon, min(upper, young))
        return horizon

    async def _compact_quietly(self) -> None:
        if self._compacting:
            return
        self._compacting = True
        try:
            await self.compact()
        except StorageError as exc:
            log.warning("etcd compaction failed: %s", exc)
        finally:
            self._compacting = False

    async def _run_ticker(self) -> None:
        """Compaction by time and the database size poll, in the background."""
        next_status = time.monotonic()  # at the first tick, then every STATUS_POLL_S
        while True:
            await asyncio.sleep(min(self._compaction_interval_s, STATUS_POLL_S, 5.0))
            if not self._is_open or self._is_closed:
                continue
            if time.monotonic() >= self._next_compaction_at:
                await self._compact_quietly()
            if time.monotonic() >= next_status:
                next_status = time.monotonic() + STATUS_POLL_S
                await self.poll_status()

    async def poll_status(self) -> None:
        """Each member's database size (kube's ``apiserver_storage_db_total_size_in_bytes``
        polls every endpoint; -1 for one that did not answer), and the largest as
        ``db_size``."""
        sizes: dict[str, int] = {}
        for endpoint in self.config.endpoints:
            config = replace(self.config, endpoints=(endpoint,), dial_timeout=2.0)
            try:
                async with EtcdClient(config) as member:
                    sizes[endpoint] = (await member.status(timeout=2.0)).db_size
            except EtcdError as exc:
                log.info("etcd status poll of %s failed: %s", endpoint, exc)
                sizes[endpoint] = -1
        self.db_sizes = sizes
        self.db_size = max(sizes.values(), default=0)
