"""The watch cache: per kind, the current objects, a history ring, and watcher cursors.

The store's change feed is the cache's only input; the cache is the only place events fan out.

Guarantees:
- Total order: changes enter every kind's ring in global revision order (the store publishes in
  order), and each watcher receives them in that order, each at most once.
- Exactly once from a start revision: a watch from revision R gets every matching change with
  revision > R: from the ring when R is inside it, from the durable change log when R is older
  but not compacted; below the compaction horizon it gets one ERROR 410 Expired and ends.
- Encode once: an event's line is built once per event type variant and the same bytes go to
  every watcher; live watchers with equal filters share one framed payload per dispatch.
- Answer, then fan out: committed batches enter the objects and rings in the store's feed,
  before any writer resumes, so a write is answered once reads (and watches from its
  revision) see it; live watchers are written to after the answers, by paced flushes that each
  carry every batch committed since the previous one in one write per watcher
  (``WatchCaches._schedule_flush``: the pause between flushes is twice the previous flush's
  CPU time, at most ``MAX_FLUSH_GAP_S``). A writer may thus get its answer before a watcher got
  the event, as with kube-apiserver, whose watch cache trails the commit.
- Initial events stream by key: a ``sendInitialEvents`` watcher keeps only the last key it
  sent; objects changed after its snapshot revision are read as they were at it from the
  states the cache keeps, while any snapshot walk runs, of keys changed since the oldest one.
- Bounded: the ring has a fixed capacity; a paused watcher only holds a cursor, and is closed
  when the ring overwrites it.
- Versions: a resource served at another version (``Resource.stored_as``) has no cache of its
  own; ``for_resource`` answers a ``VersionView`` of the stored kind's cache, whose watchers
  share that ring and get each line encoded once per version (storage/version_view.py).
- Lists read only what they return: a page walks the sorted keys from its start and stops
  after ``limit + 1`` matches; the count of what remains is two bisections of the sorted keys;
  a ``metadata.name`` selector is one key lookup (one per namespace across namespaces), and a
  label equality reads that label's index (storage/label_index.py). Live watchers are indexed
  by namespace and name, as kube's cacher indexes them (``indexedWatchers``), so an event is
  matched only against the watchers that may want it.
- Bookmarks carry the store's global revision (progress of the whole store), about once per
  ``bookmark_interval_s`` per watcher that asked, only when it advanced; the ticker flushes
  first, so a bookmark never passes an event its watcher was not written yet.
- Fault hooks (server/faults): ``WatchCaches.on_watch`` sees each new watcher before it
  starts, ``bookmark_gate`` may hold a periodic bookmark back, ``expired_below`` answers 410 to
  a resume from an older revision, and ``WatchCache.hold`` takes a live watcher off the live
  index (a stalled stream). All are None or 0 unless a fault is active: the dispatch path does
  not look at them.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import msgspec

from kubewire.go_json_bytes import go_escaped
from kubewire.resources import Registry, Resource
from kubewire.status import StatusError, too_large_resource_version, too_old_resource_version
from kubewire.storage.base import Change, ChangeType, CompactedError, Record, Store
from kubewire.storage.cached import (
    CachedEvent,
    CachedObject,
    HistoryRing,
    WatchFilter,
    WatchStart,
    event_line,
)
from kubewire.storage.label_index import LabelIndexes
from kubewire.storage.past_view import PastOverlay, PastView, after_prefix
from kubewire.storage.size_tally import SizeTally
from kubewire.storage.version_view import VersionView
from kubewire.storage.watcher import (
    PUMP_BATCH_BYTES,
    PUMP_BATCH_EVENTS,
    Sink,
    State,
    Watcher,
)

log = logging.getLogger(__name__)
K = TypeVar("K")

DEFAULT_RING_CAPACITY = 4096  # events per kind in memory; older ones come from the durable log
DEFAULT_BOOKMARK_INTERVAL_S = 60.0  # kube: one bookmark about every minute (cacher.go)
# Past revisions whose overlays a kind keeps for lists at them (``WatchCache.at``): the pages of
# a few walks at once pay for each change once.
PAST_OVERLAYS = 4
REPLAY_PAGE = 500  # changes read from the durable log per query, at most
# A replaying watcher holds about this many bytes of the log at a time: pages are sized from
# the previous page's change sizes (the first page is small) and written in slices, each only
# when the sink takes more, so a stuck watcher resuming from far back cannot grow memory.
REPLAY_PAGE_BYTES = 1 << 20
REPLAY_FIRST_PAGE = 16
REPLAY_SLICE_BYTES = 64 * 1024
FRESHNESS_WAIT_S = 3.0  # kube's blockTimeout for "not older than" reads (watch_cache.go)
# The pause between two flushes to live watchers is ``FLUSH_PAUSE_PER_COST`` times the previous
# flush's CPU time, at most ``MAX_FLUSH_GAP_S`` (``WatchCaches._schedule_flush``): a flush to
# 1,000 watchers takes ~5-15 ms, so the bound binds only beyond a couple of thousand. Pauses
# shorter than ``MIN_TIMED_GAP_S`` are not timed.
FLUSH_PAUSE_PER_COST = 2.0
MAX_FLUSH_GAP_S = 0.05
MIN_TIMED_GAP_S = 0.001
# A due flush waits for the writes this process has in flight only when its pause would be at
# least this long, i.e. the flush costs 5 ms or more (hundreds of watchers; ``_hold_for_writes``).
MIN_HOLD_S = 0.01
# Batches of loop callbacks from a feed delivery to an unpaced flush: the writers' answers go
# first (``WatchCaches._schedule_flush``).
ANSWER_TURNS = 2


class WatchCache:
    """One kind: current objects in key order, the history ring, and its watchers."""

    def __init__(self, caches: WatchCaches, resource: Resource, capacity: int,
                 floor_rev: int) -> None:
        self.caches = caches
        self.resource = resource
        self.ring = HistoryRing(capacity, floor_rev)
        self.objects: dict[str, CachedObject] = {}
        self.last_change_rev = floor_rev  # newest revision that touched this kind
        self.flush_cost = 0.0  # the loop's CPU seconds in this kind's part of the last flush
        # The keys of ``objects``, sorted, except the keys added since the last read of the
        # order (``_sorted_keys``): those wait in ``_added`` and are merged in once, when the
        # order is next needed, instead of one list insertion (a move of n pointers) per create.
        self._keys: list[str] = []
        self._added: list[str] = []
        # Snapshot walks (sendInitialEvents) in progress: watcher -> snapshot revision; while
        # there are any, every change records the key's state before it, so a walker reads each
        # key as it was at its snapshot revision without holding a snapshot of its own.
        self._walkers: dict[Watcher, int] = {}
        self._before: dict[str, list[tuple[int, CachedObject | None]]] = {}
        self._before_keys: list[str] = []  # the keys of ``_before``, sorted
        # Live watchers by scope, as kube's cacher (``indexedWatchers.allWatchers``): of every
        # namespace, of one namespace, and of one name (in a namespace, or "" for all).
        self._live_all: set[Watcher] = set()
        self._live_ns: dict[str, set[Watcher]] = {}
        self._live_named: dict[tuple[str, str], set[Watcher]] = {}
        self._labels = LabelIndexes()  # built when a list first selects on a label key
        self._past: dict[int, PastOverlay] = {}  # revision -> its overlay, oldest use first
        self._future: set[Watcher] = set()
        self.lagging: set[Watcher] = set()  # INITIAL or LAGGING: they hold a ring cursor
        # Counters read by /metrics: events written to watchers, watchers closed for lagging.
        # The sizes of those events, as sent (apiserver_watch_events_sizes).
        self.events_sent = 0
        self.event_sizes = SizeTally()
        self.watchers_terminated = 0
        self.watchers: set[Watcher] = set()
        self._dispatched = 0  # ring sequence up to which live watchers have been served

    # -- state -------------------------------------------------------------------------------
    def load(self, records: Iterable[tuple[str, int, bytes]]) -> None:
        for key, revision, value in records:
            self.objects[key] = CachedObject.decode(key, revision, value, self.resource)
        self._keys = sorted(self.objects)
        self._added = []
        self._labels = LabelIndexes()  # rebuilt on demand from the loaded objects
        self._past.clear()

    def _sorted_keys(self) -> list[str]:
        """The keys of ``objects`` in order (merging the keys added since the last call)."""
        if self._added:
            self._keys.extend(self._added)
            self._keys.sort()  # one sorted run plus a short tail: a merge, not a full sort
            self._added.clear()
        return self._keys

    def apply(self, change: Change) -> None:
        """Fold one committed change into the objects and the ring (no dispatch yet)."""
        key = change.key
        prev = self.objects.get(key)
        # The writer's decoded object when the change carries it, else a decode of the value.
        obj = CachedObject.of_change(change, self.resource)
        if change.type == ChangeType.DELETED:
            if self.objects.pop(key, None) is not None:
                keys = self._sorted_keys()
                del keys[bisect.bisect_left(keys, key)]
            if self._labels and prev is not None:
                self._labels.update(key, prev.labels, None)
        else:
            if prev is None:
                self._added.append(key)
            self.objects[key] = obj
            if self._labels:
                self._labels.update(key, None if prev is None else prev.labels, obj.labels)
        if self._walkers:
            history = self._before.get(key)
            if history is None:
                self._before[key] = [(change.revision, prev)]
                bisect.insort(self._before_keys, key)
            else:
                history.append((change.revision, prev))
        self.ring.append(CachedEvent(change.revision, change.type, obj, prev))
        self.last_change_rev = change.revision

    def get(self, key: str) -> CachedObject | None:
        return self.objects.get(key)

    def scan(self, prefix: str, start: str = "") -> list[CachedObject]:
        """Objects whose key starts with ``prefix`` (and is >= ``start``), in key order (as
        ``range``, without a generator: admission scans a few small kinds per create, and
        most often finds the kind has no object at all: answered without sorting or bisecting)."""
        if not self.objects:
            return []
        keys, lo, hi = self._bounds(prefix, start)
        objects = self.objects
        return [objects[key] for key in keys[lo:hi]]

    # -- lists: what a page reads (read each result before the next change) ----------------
    def range(self, prefix: str, start: str = "") -> Iterator[CachedObject]:
        """``scan``, lazily: a page takes only what it returns."""
        keys, lo, hi = self._bounds(prefix, start)
        objects = self.objects
        for i in range(lo, hi):
            yield objects[keys[i]]

    def count(self, prefix: str, start: str = "") -> int:
        """How many keys start with ``prefix`` and are >= ``start`` (two bisections)."""
        _, lo, hi = self._bounds(prefix, start)
        return max(0, hi - lo)

    def _bounds(self, prefix: str, start: str) -> tuple[list[str], int, int]:
        """The sorted keys and the index span of those starting with ``prefix`` and >=
        ``start`` (two bisections)."""
        keys = self._sorted_keys()
        return keys, bisect.bisect_left(keys, max(prefix, start)), _upper(keys, prefix)

    def named(self, prefix: str, name: str, start: str = "") -> list[CachedObject]:
        """The objects named ``name`` under ``prefix`` with keys >= ``start``, in key order:
        one lookup in a namespace (or a cluster-scoped kind); across namespaces, one per
        namespace, found by jumping from each namespace's first key past its last."""
        if not self.resource.namespaced or prefix != self.resource.storage_prefix():
            obj = self.objects.get(prefix + name)
            return [] if obj is None or obj.key < start else [obj]
        keys, out = self._sorted_keys(), []
        i, n = bisect.bisect_left(keys, prefix), len(keys)
        while i < n and keys[i].startswith(prefix):
            ns_prefix = keys[i][:keys[i].index("/", len(prefix)) + 1]
            obj = self.objects.get(ns_prefix + name)
            if obj is not None and obj.key >= start:
                out.append(obj)  # namespaces are visited in key order, so the keys are too
            i = bisect.bisect_left(keys, after_prefix(ns_prefix), i)
        return out

    def at(self, revision: int, version: Resource | None = None) -> PastView | None:
        """This kind as it was at ``revision`` (older than the newest change) for a list, served
        as ``version``; None when the ring no longer holds every change after it
        (storage/past_view.py)."""
        ring = self.ring
        if revision < ring.floor_rev:
            return None
        past = self._past.pop(revision, None)
        if past is None or past.seq_end < ring.start:
            past = PastOverlay(revision, ring.seq_after(revision))
        past.extend(ring.slice(past.seq_end, ring.end), ring.end)
        for old in [rev for rev in self._past if rev < ring.floor_rev]:
            del self._past[old]
        self._past[revision] = past  # the most recently used last
        while len(self._past) > PAST_OVERLAYS:
            del self._past[next(iter(self._past))]
        return PastView(past, self._sorted_keys(), self.objects, self.named, version)

    def label_count(self, label: str, value: str) -> int:
        """How many objects have ``label`` = ``value`` (builds the label's index if needed)."""
        return len(self._labels.keys_for(label, value, self._label_sets()))

    def labelled(self, prefix: str, start: str, label: str,
                 value: str) -> Iterator[CachedObject] | None:
        """Objects under ``prefix`` (keys >= ``start``) with ``label`` = ``value``, in key
        order, from the label's index."""
        keys, objects = self._labels.keys_for(label, value, self._label_sets()), self.objects
        lo, hi = bisect.bisect_left(keys, max(prefix, start)), _upper(keys, prefix)
        return (objects[keys[i]] for i in range(lo, hi))

    def _label_sets(self) -> Iterator[tuple[str, dict[str, str]]]:
        return ((key, obj.labels) for key, obj in self.objects.items())

    # -- snapshot walks (initial events) -----------------------------------------------------
    def start_walk(self, watcher: Watcher, snapshot_rev: int) -> None:
        """From now on keep the states ``watcher`` needs to read keys as at ``snapshot_rev``
        (every later change has a later revision, so none is missed)."""
        self._walkers[watcher] = snapshot_rev

    def end_walk(self, watcher: Watcher) -> None:
        if self._walkers.pop(watcher, None) is None:
            return
        if not self._walkers:
            self._before.clear()
            self._before_keys.clear()
            return
        # States before changes at or below the oldest remaining snapshot are never read again.
        oldest = min(self._walkers.values())
        stale = [k for k, h in self._before.items() if h[-1][0] <= oldest]
        for key in stale:
            del self._before[key]
        if stale:
            self._before_keys = sorted(self._before)

    def snapshot_page(self, prefix: str, after: str, snapshot_rev: int,
                      version: Resource | None) -> tuple[list[CachedObject], str | None]:
        """The objects under ``prefix`` with keys past ``after`` ("" = from the start), as they
        were at ``snapshot_rev`` (the caller is a walker from it), in key order: one write's
        worth (``PUMP_BATCH_EVENTS``, about ``PUMP_BATCH_BYTES``). Also the last key visited,
        to continue after, or None when the walk is complete."""
        keys, gone = self._sorted_keys(), self._before_keys
        if after:
            i, j = bisect.bisect_right(keys, after), bisect.bisect_right(gone, after)
        else:
            i, j = bisect.bisect_left(keys, prefix), bisect.bisect_left(gone, prefix)
        out: list[CachedObject] = []
        size = 0
        key = after
        # Merge the current keys with the keys changed since the walk began (deleted ones are
        # only there); a key in both is visited once.
        while len(out) < PUMP_BATCH_EVENTS and size < PUMP_BATCH_BYTES:
            a = keys[i] if i < len(keys) else None
            b = gone[j] if j < len(gone) else None
            if a is None or (b is not None and b < a):
                if b is None:
                    return out, None
                key, j = b, j + 1
            else:
                key, i = a, i + 1
                if b == a:
                    j += 1
            if not key.startswith(prefix):
                return out, None
            obj = self._state_at(key, snapshot_rev)
            if obj is not None:
                obj = obj.as_version(version)
                out.append(obj)
                size += len(obj.value)
        if i >= len(keys) and j >= len(gone):
            return out, None
        return out, key

    def _state_at(self, key: str, revision: int) -> CachedObject | None:
        """The object at ``key`` as it was at ``revision`` (a running walk's snapshot)."""
        history = self._before.get(key)
        if history:
            for change_rev, before in history:
                if change_rev > revision:
                    return before  # the state the first later change replaced
        obj = self.objects.get(key)
        # Unchanged since ``revision``; a newer object without history cannot happen while
        # this walk runs, and would not have existed at ``revision``.
        return obj if obj is not None and obj.revision <= revision else None

    # -- watchers ----------------------------------------------------------------------------
    def attach_live(self, watcher: Watcher) -> None:
        ns, name = watcher.filter.namespace, watcher.filter.name
        if name:
            self._live_named.setdefault((ns, name), set()).add(watcher)
        elif ns:
            self._live_ns.setdefault(ns, set()).add(watcher)
        else:
            self._live_all.add(watcher)

    def _detach_live(self, watcher: Watcher) -> None:
        ns, name = watcher.filter.namespace, watcher.filter.name
        if name:
            _discard(self._live_named, (ns, name), watcher)
        elif ns:
            _discard(self._live_ns, ns, watcher)
        else:
            self._live_all.discard(watcher)

    def hold(self, watcher: Watcher) -> None:
        """A live watcher leaves the live index, its cursor after what it was written (its
        sink now says it is paused: a stalled stream); a pump resumes it."""
        if watcher.state is State.LIVE:
            self._detach_live(watcher)
            watcher.fall_behind(self.ring.seq_after(max(watcher.progress_rev,
                                                        self.ring.floor_rev)))

    def detach(self, watcher: Watcher) -> None:
        self._detach_live(watcher)
        self._future.discard(watcher)
        self.lagging.discard(watcher)
        self.watchers.discard(watcher)
        self.end_walk(watcher)

    @property
    def undispatched(self) -> int:
        """Events in the ring that live watchers have not been served yet."""
        return self.ring.end - self._dispatched

    def dispatch(self) -> None:
        """Serve live watchers every event appended since the last dispatch (one write each)."""
        start, stop = self._dispatched, self.ring.end
        if start == stop:
            return
        self._dispatched = stop
        if not self.watchers:  # nobody to serve (a create with no watches open stops here)
            _forget_lines(self.ring.slice(start, stop))
            return
        if start < self.ring.start:
            self._overrun(start)
            return
        events = self.ring.slice(start, stop)
        first, newest = events[0].revision, events[-1].revision
        payloads: dict[Any, list[Any]] = {}
        for watcher in self._live_targets(events):
            if watcher.progress_rev < first:
                self._write_shared(watcher, events, payloads)
            elif watcher.progress_rev < newest:
                # It went live between a commit and this dispatch, already past some of these
                # events (it started from, or caught up to, a later revision): only the rest.
                watcher.write_lines(watcher.filter.lines(
                    [e for e in events if e.revision > watcher.progress_rev]))
            else:
                continue
            # Everything up to ``newest`` is written: a bookmark must carry a later revision.
            watcher.progress_rev = newest
            if watcher.sink.is_paused:
                self._detach_live(watcher)
                watcher.fall_behind(stop)
        self._count_sizes(payloads)
        self._close_overtaken()
        for watcher in [w for w in self._future if w.start_rev <= newest]:
            self._future.discard(watcher)
            watcher.begin_at_cursor(self.ring.seq_after(watcher.start_rev))
        _forget_lines(events)

    def _count_sizes(self, payloads: dict[Any, list[Any]]) -> None:
        """Each shared payload's event sizes, once per watcher it was written to."""
        for _, _, lines, receivers in payloads.values():
            if receivers:
                self.event_sizes.add(lines, receivers)

    def _write_shared(self, watcher: Watcher, events: list[CachedEvent],
                      payloads: dict[Any, list[Any]]) -> None:
        """Write ``events`` as ``watcher`` sees them, framed once per (filter, framing)
        (``payloads``: framed bytes, event count, lines, watchers written to)."""
        found = payloads.get(watcher.key)
        if found is None:
            lines = watcher.filter.lines(events)
            found = payloads[watcher.key] = [
                watcher.sink.frame(lines) if lines else b"", len(lines), lines, 0]
        framed = found[0]
        if framed:
            watcher.sink.write_framed(framed)
            self.events_sent += found[1]
            found[3] += 1

    def _overrun(self, start: int) -> None:
        """One batch overwrote events no live watcher got yet: they cannot get them now, so
        they are closed like any overtaken watcher (clients resume from the durable log)."""
        for watcher in self._live_targets(()):
            self._detach_live(watcher)
            watcher.fall_behind(start)
        self._close_overtaken()

    def _close_overtaken(self) -> None:
        """A lagging watcher whose cursor the ring overwrote can never catch up: close it now
        (it holds at most one transport buffer until then); the client resumes from its
        last revision, which the durable log serves."""
        for watcher in [w for w in self.lagging if w.cursor < self.ring.start]:
            if watcher.state is State.LAGGING or watcher.state is State.INITIAL:
                log.info("closing a %s watcher that fell behind the history ring",
                         self.resource.plural)
                self.watchers_terminated += 1
                watcher.close()

    def _live_targets(self, events: Sequence[CachedEvent]) -> list[Watcher]:
        """Live watchers that may want ``events`` (all of them when ``events`` is empty)."""
        targets = list(self._live_all)
        if not events:
            for members in self._live_ns.values():
                targets.extend(members)
            for members in self._live_named.values():
                targets.extend(members)
            return targets
        namespaces = {e.obj.namespace for e in events}
        for ns in namespaces:
            group = self._live_ns.get(ns)
            if group:
                targets.extend(group)
        if self._live_named:
            # kube's scopes: (namespace, name) and, for watchers of all namespaces, ("", name).
            # An update keeps its key, so the new object's name and namespace are the prev's.
            scopes = {(e.obj.namespace, e.obj.name) for e in events}
            scopes |= {("", name) for _, name in scopes}
            for scope in scopes:
                group = self._live_named.get(scope)
                if group:
                    targets.extend(group)
        return targets

    def bookmark(self, now: float, revision: int, interval_s: float) -> None:
        gate = self.caches.bookmark_gate
        for watcher in list(self.watchers):
            if watcher.bookmarks and watcher.state is State.LIVE and now >= watcher.next_bookmark:
                if gate is not None and not gate(self, watcher, now):
                    continue  # a fault holds it back (it stays due)
                # kube: next at min(now + 60 s, deadline - 2 s) (cache_watcher.go nextBookmarkTime)
                watcher.next_bookmark = min(now + interval_s, watcher.deadline - 2.0)
                if watcher.next_bookmark <= now:
                    watcher.next_bookmark = float("inf")
                watcher.send_bookmark(revision)

    # -- starting a watch --------------------------------------------------------------------
    async def watch(self, sink: Sink, watch_filter: WatchFilter, start: WatchStart) -> Watcher:
        """Register a watcher according to ``start``; errors become an in-stream ERROR event."""
        watcher = Watcher(self, sink, watch_filter, start.revision, start.bookmarks)
        self.watchers.add(watcher)
        if self.caches.on_watch is not None:
            self.caches.on_watch(self, watcher)
        now = time.monotonic()
        if start.timeout_s is not None:
            watcher.set_deadline(now, start.timeout_s)
        watcher.next_bookmark = min(now + self.caches.bookmark_interval_s, watcher.deadline - 2.0)
        try:
            await self._begin(watcher, start)
        except StatusError as err:
            watcher.fail(error_event(err))
        return watcher

    async def _begin(self, watcher: Watcher, start: WatchStart) -> None:
        if start.revision < self.caches.expired_below and not start.initial_events:
            raise too_old_resource_version(start.revision, self.caches.expired_below)
        if start.initial_events:
            if start.revision > self.caches.revision:
                await self.caches.wait_for_revision(start.revision)
            if watcher.state is State.CLOSED:
                return
            watcher.begin_initial(self._walk_prefix(watcher.filter), self.caches.revision,
                                  start.bookmarks)
        elif start.revision >= self.caches.revision:
            if start.revision == self.caches.revision:
                watcher.begin_at_cursor(self.ring.end)
            else:
                watcher.state = State.FUTURE
                self._future.add(watcher)
        elif start.revision >= self.ring.floor_rev:
            watcher.begin_at_cursor(self.ring.seq_after(start.revision))
        else:
            await self._replay(watcher, start.revision)

    def _walk_prefix(self, watch_filter: WatchFilter) -> str:
        """The key prefix a snapshot walk for ``watch_filter`` covers: with a name in a
        namespace (or of a cluster-scoped kind), the object's key (keys extending it are
        walked too, and the filter drops them), so the walk does not visit the collection."""
        prefix = self.resource.storage_prefix(watch_filter.namespace)
        if watch_filter.name and (watch_filter.namespace or not self.resource.namespaced):
            return prefix + watch_filter.name
        return prefix

    async def _replay(self, watcher: Watcher, revision: int) -> None:
        """Serve a start revision older than the ring from the durable change log."""
        store = self.caches.store
        if revision < store.compacted_revision:
            raise too_old_resource_version(revision, store.compacted_revision)
        watcher.state = State.REPLAY
        prefix = self.resource.storage_prefix(watcher.filter.namespace)
        limit = REPLAY_FIRST_PAGE
        while revision < self.ring.floor_rev:
            try:
                changes = await store.changes_since(revision, prefix, limit)
            except CompactedError as exc:
                raise too_old_resource_version(revision, exc.compacted) from exc
            changes = [c for c in changes if c.revision <= self.ring.floor_rev]
            if not changes:
                break
            size = sum(_change_bytes(c) for c in changes)
            limit = max(1, min(REPLAY_PAGE, REPLAY_PAGE_BYTES * len(changes) // max(size, 1)))
            for piece in _slices(changes, REPLAY_SLICE_BYTES):
                if not await watcher.wait_writable():
                    return
                watcher.write_lines(watcher.filter.lines(
                    [self._replayed_event(c) for c in piece]))
                revision = piece[-1].revision
                watcher.progress_rev = revision
        if watcher.state is State.REPLAY:
            watcher.begin_at_cursor(self.ring.seq_after(max(revision, self.ring.floor_rev)))

    def _replayed_event(self, change: Change) -> CachedEvent:
        obj = CachedObject.decode(change.key, change.revision, change.value, self.resource)
        prev = None
        if change.prev_value is not None and change.type == ChangeType.MODIFIED:
            prev = CachedObject.decode(change.key, 0, change.prev_value, self.resource)
        return CachedEvent(change.revision, change.type, obj, prev)


def _discard(groups: dict[K, set[Watcher]], scope: K, watcher: Watcher) -> None:
    group = groups.get(scope)
    if group is not None:
        group.discard(watcher)
        if not group:
            del groups[scope]


def _upper(keys: list[str], prefix: str) -> int:
    """The index past the last of sorted ``keys`` that starts with ``prefix``."""
    return bisect.bisect_left(keys, after_prefix(prefix))


def _forget_lines(events: list[CachedEvent]) -> None:
    for event in events:
        event.forget_lines()


def _change_bytes(change: Change) -> int:
    return len(change.value) + len(change.prev_value or b"")


def _slices(changes: list[Change], max_bytes: int) -> list[list[Change]]:
    """Consecutive runs of ``changes`` of about ``max_bytes`` each (at least one change)."""
    out: list[list[Change]] = [[]]
    size = 0
    for change in changes:
        if out[-1] and size >= max_bytes:
            out.append([])
            size = 0
        out[-1].append(change)
        size += _change_bytes(change)
    return out


def error_event(err: StatusError) -> bytes:
    return event_line(b"ERROR", go_escaped(msgspec.json.encode(err.to_status())))


class WatchCaches:
    """All kinds' caches, fed by one store subscription."""

    def __init__(self, store: Store, registry: Registry, *,
                 ring_capacity: int = DEFAULT_RING_CAPACITY,
                 bookmark_interval_s: float = DEFAULT_BOOKMARK_INTERVAL_S) -> None:
        self.store = store
        self.registry = registry
        self.ring_capacity = ring_capacity
        self.bookmark_interval_s = bookmark_interval_s
        self.revision = 0
        self._caches: dict[str, WatchCache] = {}
        self._views: dict[tuple[str, str, str], VersionView] = {}
        self._revision_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._ticker: asyncio.Task[None] | None = None
        self._dirty: dict[str, WatchCache] = {}  # caches with events live watchers lack
        # Kinds being added while the server runs (custom resources): id -> the changes
        # committed while their objects were read, applied once the read is in.
        self._loading: dict[str, list[Change]] = {}
        self._flush_handle: asyncio.Handle | None = None
        self._next_flush_at = 0.0  # time.monotonic() before which no paced flush starts
        # While a due flush waits for this process's writes in flight: when it stops waiting,
        # and whether ``_flush_handle`` is that wait's timer.
        self._hold_until: float | None = None
        self._holding = False
        # Requests waiting to begin until the due flush has run (``due_flush``).
        self._flush_waiter: asyncio.Future[None] | None = None
        # Fault hooks (server/faults; see the module docstring): unset unless a fault is on.
        self.on_watch: Callable[[WatchCache, Watcher], None] | None = None
        self.bookmark_gate: Callable[[WatchCache, Watcher, float], bool] | None = None
        self.expired_below = 0  # a watch resuming from a revision below this gets 410

    async def start(self) -> None:
        """Load every kind's objects, subscribe to the store, start the bookmark ticker.

        Every kind is read at one revision, and the changes committed meanwhile (by another
        replica of a shared store, say) are applied after the reads, as ``add_kind`` does."""
        stored = [r for r in self.registry.stored() if r.is_stored_version]  # others: views
        for resource in stored:
            self._loading[resource.id] = []
        self.store.subscribe(self._on_changes)
        self.revision = revision = self.store.current_revision
        try:
            for resource in stored:
                records, _ = await self.store.list(resource.storage_prefix(), revision=revision)
                self._caches[resource.id] = self._loaded(resource, records, revision, revision)
        finally:
            for resource in stored:
                self._loading.pop(resource.id, None)
        self._ticker = asyncio.get_running_loop().create_task(self._tick_bookmarks())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        self.flush()  # committed changes reach their watchers before the streams end
        for cache in self._caches.values():
            for watcher in list(cache.watchers):
                watcher.close()

    async def add_kind(self, resource: Resource) -> None:
        """Start caching a stored kind the server begins to serve while it runs (a custom
        resource whose CRD was established): its objects are read from the store, and the
        changes committed during that read are applied after it, so none is lost or doubled.
        ``resource`` replaces the entry of a kind cached already (same id) once the new cache
        is loaded, so requests meanwhile are served by the old one; its watchers are closed at
        the swap (``remove_kind``)."""
        self._loading[resource.id] = []
        try:
            records, revision = await self.store.list(resource.storage_prefix())
        except BaseException:
            del self._loading[resource.id]
            raise
        cache = self._loaded(resource, records, revision, max(revision, self.revision))
        self.remove_kind(resource.id)
        self._caches[resource.id] = cache

    def _loaded(self, resource: Resource, records: Sequence[Record], revision: int,
                start: int) -> WatchCache:
        """A cache of ``resource`` (ring starting at ``start``) holding ``records``, read at
        ``revision``, and the changes after it that came while they were read."""
        cache = WatchCache(self, resource, self.ring_capacity, start)
        cache.load((r.key, r.revision, r.value) for r in records)
        for change in self._loading.pop(resource.id):
            if change.revision > revision:
                cache.apply(change)
        return cache

    def refresh_kinds(self, entries: Sequence[Resource]) -> None:
        """Give the caches of ``entries`` (kinds cached already) their new registry entries:
        the same storage served with new facts (a CRD's conditions changed), so the objects
        and watchers stay."""
        for resource in entries:
            cache = self._caches.get(resource.id)
            if cache is None:
                continue
            if resource.is_stored_version:
                cache.resource = resource
            self._views = {path: view for path, view in self._views.items()
                           if view.cache is not cache}

    def remove_kind(self, resource_id: str, *, only: object | None = None) -> None:
        """Stop caching a kind no longer served (its CRD was deleted, or its serving state is
        rebuilt after a spec change): its watch streams end, as kube-apiserver's do when it
        destroys a custom resource's storage (the response just finishes, no ERROR event).
        With ``only``, nothing happens unless that is the kind's cache still."""
        if resource_id not in self._caches or (
                only is not None and self._caches[resource_id] is not only):
            return
        # Everything committed before the kind went reaches every watcher first, as if the
        # paced flush had run: a CRD's cleanup deletes its resources, then the CRD, and their
        # watchers see each DELETED, and the CRD's watchers its DELETED, before these streams
        # end (with a store that writes without waiting, no flush may have run in between).
        self.flush()
        cache = self._caches.pop(resource_id)
        self._views = {path: view for path, view in self._views.items()
                       if view.cache is not cache}
        for watcher in list(cache.watchers):
            watcher.close()

    def kinds(self) -> list[WatchCache]:
        """Every stored kind's cache."""
        return list(self._caches.values())

    def for_resource(self, resource: Resource) -> WatchCache | VersionView:
        """The kind's cache; for another version of a stored kind, a view converting to it."""
        cache = self._caches[resource.id]
        if resource.is_stored_version:
            return cache
        path = (resource.group, resource.version, resource.plural)
        view = self._views.get(path)
        if view is None:
            view = self._views[path] = VersionView(cache, resource)
        return view

    def watcher_count(self) -> int:
        return sum(len(c.watchers) for c in self._caches.values())

    def _on_changes(self, changes: Sequence[Change]) -> None:
        # The objects, rings and revision take the batch now, before its writers resume: a
        # write is answered only once reads and new watchers see it. Live watchers get it
        # after the answers, in a paced ``flush`` (see ``_schedule_flush``).
        for change in changes:
            group, plural = change.key.split("/", 2)[:2]
            kind_id = f"{group}/{plural}"
            cache = self._caches.get(kind_id)
            if self._loading:  # a cache being loaded (perhaps to replace ``cache``)
                loading = self._loading.get(kind_id)
                if loading is not None:
                    loading.append(change)
            if cache is not None:
                cache.apply(change)
                self._dirty[cache.resource.id] = cache
                if cache.undispatched > cache.ring.capacity // 2:
                    # Serve live watchers before the ring could overwrite what they lack.
                    self._flush_cache(cache)
            self.revision = max(self.revision, change.revision)
        # A shared store's revision also moves with writes to keys no kind here holds: an
        # empty batch says so (and lets readers waiting for that revision go).
        self.revision = max(self.revision, self.store.current_revision)
        if self._dirty:
            if self._flush_handle is None:
                self._schedule_flush()
            elif self._holding and not self.store.writes_in_flight:
                # the writes the due flush waited for are in: it follows their answers
                self._holding = False
                self._flush_handle.cancel()
                self._flush_handle = asyncio.get_running_loop().call_soon(
                    self._flush_after_turns, ANSWER_TURNS - 1)
        if self._revision_waiters:
            self._wake_revision_waiters()

    def _schedule_flush(self) -> None:
        """Arrange the next flush to live watchers: answer first, then fan out, paced.

        - Answer first: the flush runs ``ANSWER_TURNS`` batches of loop callbacks after the
          delivery. The store resolves a batch's futures just before this feed; a writer
          awaiting ``Store.write`` resumes in the first batch after it (the SQLite store's
          ``write`` awaits its future) or the second (a store that shields the future: its
          done callback, then ``asyncio.shield``'s), ahead of the flush, and its handler runs on to
          its answer in that step: the writers have answered before their watchers are written
          to. That is kube-apiserver's order too: its watch cache trails the commit.
          (tests/unit/test_watch_cache_streaming.py pins it.)
        - Paced: after a flush that cost ``d`` seconds of the loop's CPU, the next one starts
          no sooner than ``min(FLUSH_PAUSE_PER_COST * d, MAX_FLUSH_GAP_S)`` after it ended,
          and carries every batch committed since. Why: a flush costs mostly one transport
          write per watcher, whatever it carries, so events per write decide fan-out; answered
          writers send their next writes at once, and the pause lets the loop serve them, so
          each write to a watcher carries what was committed while the previous one was being
          written and during the pause. Under a load of writes the fan-out thus takes about a
          third of the loop. The factor is measured (bench/FINDINGS.md, 2026-11-26 evening):
          with 16 writers merge-patching and 1,000 watchers, twice the cost carries ~40 events
          a write against ~17 and delivers ~3% more events/s (events per second against the
          ideal server 0.94-0.96 against 0.89-0.93; 1.5x and 3x read 0.93 and 0.95), and with
          64 creators as many (0.98-1.02x); the write->watch p99 at 1,000 writes/s and 100
          watchers stays under 3 ms. The delay is bounded: an event reaches a live watcher at
          most one pause plus one flush (and the loop work queued ahead of it) after its
          commit, and one more pause when the flush waits for writes in flight
          (``_hold_for_writes``). The pause is a fraction of a millisecond with tens of
          watchers, a millisecond or two with 100, and with thousands never more than
          ``MAX_FLUSH_GAP_S``. A pause under
          ``MIN_TIMED_GAP_S`` is not timed (uvloop's timers count whole milliseconds and run
          shorter delays as ``call_soon``): the flush just follows the answers. A kind whose
          ring is half undelivered is flushed at once (``_on_changes``).
        """
        loop = asyncio.get_running_loop()
        delay = self._next_flush_at - time.monotonic()
        if delay >= MIN_TIMED_GAP_S:
            self._flush_handle = loop.call_later(delay, self._scheduled_flush)
        else:
            self._flush_handle = loop.call_soon(self._flush_after_turns, ANSWER_TURNS - 1)

    def due_flush(self) -> asyncio.Future[None] | None:
        """A future done once the pending flush has run, if that flush is due (its pause is
        over and it is not waiting for writes in flight), for a request to await before it
        begins; None when no flush is due.

        Why: a due flush is a loop callback queued behind whatever the loop took up before
        it, and one batch of callbacks can begin ten creates (~10 ms of work) when a flush to
        100 watchers costs ~1 ms; under 1,000 creates/s that wait was most of the tail of the
        write->watch lag (bench/FINDINGS.md, 2026-11-27). A request that waits for the flush
        begins a batch or two later, after it; the writers still answer first, so the order
        stays kube's (answer, then fan out). A flush that then decides to wait for writes in
        flight lets the waiting requests go (``_hold_for_writes``): its pause is what lets
        the loop serve new writes."""
        if (self._flush_handle is None or self._holding
                or time.monotonic() < self._next_flush_at):
            return None
        if self._flush_waiter is None:
            self._flush_waiter = asyncio.get_running_loop().create_future()
        return self._flush_waiter

    def _release_waiting(self) -> None:
        waiter, self._flush_waiter = self._flush_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _flush_after_turns(self, turns: int) -> None:
        if turns > 0:
            self._flush_handle = asyncio.get_running_loop().call_soon(
                self._flush_after_turns, turns - 1)
        else:
            self._scheduled_flush()

    def _scheduled_flush(self) -> None:
        self._flush_handle = None
        self._holding = False
        if not self._hold_for_writes():
            self.flush()

    def _hold_for_writes(self) -> bool:
        """Whether a due flush waits: while this process has writes in flight in the store
        (handed to it, their batch not yet published), for at most one pause after it fell
        due (``FLUSH_PAUSE_PER_COST`` times what the kinds to flush cost in their previous
        flushes, ``MAX_FLUSH_GAP_S`` at most); the delivery that leaves none in flight ends
        the wait (``_on_changes``).

        Why: a burst of writes reaches the store in more than one commit (the first is taken
        alone while the rest are still being handled), and a flush of the first alone costs
        every watcher a write for one event: with 64 creators and 1,000 watchers the first
        write to each watcher carried 1-3 events and the later ones 22-151, where the raw
        limit sends 64 each (bench/FINDINGS.md, 2026-11-26 night). Only a flush whose pause
        would be ``MIN_HOLD_S`` or more waits: with 100 watchers a flush costs about a
        millisecond, and holding those added 5-10 ms to the write->watch p50 at 1,000
        writes/s (durability full: there is nearly always a write in flight, and a held
        flush carries more, costs more and is held longer), for writes that cost little to
        send apart. A write on an idle server has nothing in flight beside it
        and is flushed at once."""
        expected = sum(cache.flush_cost for cache in self._dirty.values())
        hold = min(FLUSH_PAUSE_PER_COST * expected, MAX_FLUSH_GAP_S)
        if hold < MIN_HOLD_S or not self.store.writes_in_flight:
            return False
        now = time.monotonic()
        if self._hold_until is None:
            self._hold_until = now + hold
        if now >= self._hold_until:
            return False
        self._flush_handle = asyncio.get_running_loop().call_later(
            self._hold_until - now, self._scheduled_flush)
        self._holding = True
        self._release_waiting()
        return True

    def flush(self) -> None:
        """Serve every live watcher the events committed since the last flush, now."""
        self._release_waiting()  # the waiting requests' callbacks run after this flush
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._hold_until, self._holding = None, False
        dirty, self._dirty = self._dirty, {}
        if not dirty:
            return
        # The flush's cost is the loop's CPU time in it (wall time would count the moments
        # the process waited for a core, and pause the next flush for them).
        cost = 0.0
        for cache in dirty.values():
            began = time.thread_time()
            self._flush_cache(cache)
            cache.flush_cost = time.thread_time() - began
            cost += cache.flush_cost
        self._next_flush_at = time.monotonic() + min(FLUSH_PAUSE_PER_COST * cost,
                                                      MAX_FLUSH_GAP_S)

    def _flush_cache(self, cache: WatchCache) -> None:
        try:
            cache.dispatch()
        except Exception:
            log.exception("dispatch failed for %s", cache.resource.plural)

    async def wait_for_revision(self, revision: int) -> None:
        """Wait until the cache has seen ``revision``; 504 Too large resource version after 3 s."""
        if revision <= self.revision:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._revision_waiters.append((revision, future))
        try:
            await asyncio.wait_for(future, FRESHNESS_WAIT_S)
        except TimeoutError as exc:
            raise too_large_resource_version(revision, self.revision) from exc

    def _wake_revision_waiters(self) -> None:
        keep = []
        for revision, future in self._revision_waiters:
            if revision <= self.revision:
                if not future.done():
                    future.set_result(None)
            else:
                keep.append((revision, future))
        self._revision_waiters = keep

    async def _tick_bookmarks(self) -> None:
        tick = min(1.0, self.bookmark_interval_s / 2)
        while True:
            await asyncio.sleep(tick)
            self.flush()  # a bookmark's revision must not pass events not yet written
            now = time.monotonic()
            for cache in self._caches.values():
                if cache.resource.has_watch_cache or cache.watchers:
                    cache.bookmark(now, self.revision, self.bookmark_interval_s)
