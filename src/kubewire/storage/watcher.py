"""One watcher: a filter, a sink, and a cursor into its kind's history.

A watcher owns no copy of events and no queue. It is in exactly one state:

- ``LIVE``: caught up; the cache's dispatcher writes each new batch to it directly.
- ``INITIAL``: writing the synthetic ADDED snapshot (then the initial-events-end bookmark): it
  walks the cache by key, holding only the last key it sent (``WatchCache.snapshot_page``).
- ``LAGGING``: its cursor is behind the ring's end (it started from an older revision, or its
  sink was paused); ``pump`` copies from the ring until paused or caught up.
- ``REPLAY``: its start revision is older than the in-memory ring but still in the durable
  change log; a task reads the log page by page, then hands over to the ring.
- ``FUTURE``: it asked for a revision the store has not reached; it waits for it.
- ``CLOSED``.

Guarantees (tests/unit/test_watch_cache.py, tests/integration/test_watch_*.py):
- every event with revision > the start revision that matches the filter is written once, in
  revision order; events before it never are;
- a watcher whose sink is paused stops consuming; if the ring overwrites its cursor meanwhile it
  is closed (the client resumes from its last revision, served from the durable log), so a stuck
  peer can never grow memory or slow the others.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from kubewire.resources import Resource
from kubewire.storage.cached import (
    ADDED,
    CachedObject,
    HistoryRing,
    WatchFilter,
    bookmark_line,
    event_line,
)
from kubewire.storage.deadlines import Deadline, call_later
from kubewire.storage.size_tally import SizeTally

log = logging.getLogger(__name__)
T = TypeVar("T")

PUMP_BATCH_EVENTS = 256  # events per write while catching up: bounds one write's size
# ... and about this many bytes per write (at least one event): a sink is only written while
# under its high-water mark, so a stuck watcher holds at most that mark plus one such write.
PUMP_BATCH_BYTES = 64 * 1024


class Sink(Protocol):
    """Where a watcher's bytes go (a chunked HTTP body, a WebSocket)."""

    closed: bool
    on_resume: Callable[[], None] | None
    on_close: Callable[[], None] | None
    framing: str  # watchers with equal filters and framing share encoded payloads

    @property
    def is_paused(self) -> bool: ...

    def frame(self, lines: list[bytes]) -> bytes: ...

    def write_framed(self, framed: bytes) -> None: ...

    def close(self) -> None: ...


class WrappingSink:
    """A ``Sink`` over ``inner`` that rewrites what it sends (Tables, converted objects): flow
    control, closing and the callbacks are ``inner``'s unless a subclass says otherwise. Its
    ``framing`` is unique, so the cache never shares its payloads with other watchers."""

    __slots__ = ("framing", "inner")
    _ids = itertools.count(1)

    def __init__(self, inner: Sink, tag: str) -> None:
        self.inner = inner
        self.framing = f"{inner.framing}+{tag}#{next(WrappingSink._ids)}"

    @property
    def closed(self) -> bool:
        return self.inner.closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self.inner.closed = value

    @property
    def on_resume(self) -> Callable[[], None] | None:
        return self.inner.on_resume

    @on_resume.setter
    def on_resume(self, callback: Callable[[], None] | None) -> None:
        self.inner.on_resume = callback

    @property
    def on_close(self) -> Callable[[], None] | None:
        return self.inner.on_close

    @on_close.setter
    def on_close(self, callback: Callable[[], None] | None) -> None:
        self.inner.on_close = callback

    @property
    def is_paused(self) -> bool:
        return self.inner.is_paused

    def frame(self, lines: list[bytes]) -> bytes:
        return self.inner.frame(lines)

    def write_framed(self, framed: bytes) -> None:
        self.inner.write_framed(framed)

    def close(self) -> None:
        self.inner.close()


class State(enum.Enum):
    LIVE = "live"
    INITIAL = "initial"
    LAGGING = "lagging"
    REPLAY = "replay"
    FUTURE = "future"
    CLOSED = "closed"


class WatchSource(Protocol):
    """What a watcher needs of the cache it reads (``WatchCache``): its history ring, the
    snapshot walk, and the sets that say where the watcher stands. Declared here so that the
    watcher depends on this, not on the cache module that creates watchers."""

    resource: Resource
    ring: HistoryRing
    lagging: set[Watcher]
    events_sent: int
    event_sizes: SizeTally

    def start_walk(self, watcher: Watcher, snapshot_rev: int) -> None: ...

    def end_walk(self, watcher: Watcher) -> None: ...

    def snapshot_page(self, prefix: str, after: str, snapshot_rev: int,
                      version: Resource | None) -> tuple[list[CachedObject], str | None]: ...

    def attach_live(self, watcher: Watcher) -> None: ...

    def detach(self, watcher: Watcher) -> None: ...


class Watcher:
    """A cursor plus a filter; see the module docstring for the states."""

    __slots__ = ("_initial_end_rev", "_resumed", "_timer", "_walk_after", "_walk_prefix",
                 "bookmarks", "cache", "cursor", "deadline", "filter", "key", "next_bookmark",
                 "progress_rev", "sink", "skip_initial_end", "start_rev", "state")

    def __init__(self, cache: WatchSource, sink: Sink, watch_filter: WatchFilter,
                 start_rev: int, bookmarks: bool) -> None:
        self.cache = cache
        self.sink = sink
        self.filter = watch_filter
        self.key = (watch_filter.key, sink.framing)
        self.start_rev = start_rev  # deliver only events with revision > start_rev
        self.progress_rev = start_rev  # every matching event <= this has been written
        self.bookmarks = bookmarks
        self.next_bookmark = 0.0
        self.deadline = float("inf")  # time.monotonic() at which the watch ends
        self.state = State.LAGGING
        self.cursor = 0
        self._walk_prefix = ""  # the snapshot walk's key prefix ...
        self._walk_after = ""  # ... and the last key it visited ("" before the first)
        self._initial_end_rev: int | None = None
        self.skip_initial_end = False  # a fault suppresses the initial-events-end bookmark
        self._timer: Deadline | None = None
        self._resumed: asyncio.Event | None = None
        sink.on_resume = self._on_resume
        sink.on_close = self._on_sink_closed

    # -- starting ----------------------------------------------------------------------------
    def begin_initial(self, prefix: str, snapshot_rev: int, end_bookmark: bool) -> None:
        """Send the objects under ``prefix`` as they are at ``snapshot_rev`` (the cache's
        revision now) as ADDED events, then continue after ``snapshot_rev``."""
        self._walk_prefix = prefix
        self._walk_after = ""
        self._initial_end_rev = snapshot_rev if end_bookmark else None
        self.start_rev = self.progress_rev = snapshot_rev
        self.cursor = self.cache.ring.end
        self.state = State.INITIAL
        self.cache.lagging.add(self)
        self.cache.start_walk(self, snapshot_rev)
        self._hold_unsent(True)
        self.pump()

    def begin_at_cursor(self, cursor: int) -> None:
        self.cursor = cursor
        self.state = State.LAGGING
        self.cache.lagging.add(self)
        self.pump()

    def set_deadline(self, now: float, timeout_s: float) -> None:
        """End the stream cleanly after ``timeout_s`` (kube sends no final event, §3.4)."""
        self.deadline = now + timeout_s
        # one loop timer for all watches (storage/deadlines.py): ~0.5 KB less per watch
        self._timer = call_later(max(timeout_s, 0.0), self)

    # -- writing -----------------------------------------------------------------------------
    def pump(self) -> None:
        """Write from the snapshot or the ring until paused, caught up or closed."""
        while self.state in (State.INITIAL, State.LAGGING) and not self.sink.is_paused:
            if self.state is State.INITIAL:
                self._pump_initial()
            else:
                self._pump_ring()

    def _pump_initial(self) -> None:
        chunk, after = self.cache.snapshot_page(
            self._walk_prefix, self._walk_after, self.start_rev, self.filter.version)
        self.write_lines([event_line(ADDED, o.value) for o in chunk if self.filter.matches(o)])
        if after is not None:
            self._walk_after = after
        else:
            self.cache.end_walk(self)
            self._hold_unsent(False)
            if self._initial_end_rev is not None and not self.skip_initial_end:
                line = bookmark_line(self.filter.version or self.cache.resource,
                                     self._initial_end_rev, initial_events_end=True)
                self.sink.write_framed(self.sink.frame([line]))
            if self.state is State.INITIAL:  # not closed meanwhile
                self.state = State.LAGGING

    def _pump_ring(self) -> None:
        ring = self.cache.ring
        if self.cursor < ring.start:
            log.info("closing watcher that fell behind the %s history", self.cache.resource.plural)
            self.close()
            return
        if self.cursor >= ring.end:
            self.state = State.LIVE
            self.cache.lagging.discard(self)
            self.cache.attach_live(self)
            return
        window = _prefix_of_bytes(ring.slice(self.cursor, self.cursor + PUMP_BATCH_EVENTS),
                                  lambda e: len(e.obj.value))
        events = [e for e in window if e.revision > self.start_rev]
        self.cursor += len(window)
        self.write_lines(self.filter.lines(events))
        # Every event up to the window's end is written (or predates the start): the
        # dispatcher skips what this covers if it goes live before they were dispatched.
        self.progress_rev = max(self.progress_rev, window[-1].revision)

    def _hold_unsent(self, hold: bool) -> None:
        """While it walks a snapshot, the sink counts as paused whenever a write was not wholly
        taken by the socket, and resumes once all is sent: a snapshot is written only as fast
        as the client reads it, so the server holds at most one piece per walker (the rest
        waits in the kernel's socket buffers, or was not read yet). Live watchers keep the
        usual high-water mark. Sinks without the setting (Tables) keep that mark too."""
        setter = getattr(self.sink, "set_write_high_water", None)
        if setter is not None:
            setter(1 if hold else None)  # 1, not 0: TLS would pause an empty buffer

    def fall_behind(self, cursor: int) -> None:
        """Called by the dispatcher when this live watcher's sink paused."""
        self.state = State.LAGGING
        self.cursor = cursor
        self.cache.lagging.add(self)

    def write_lines(self, lines: list[bytes]) -> None:
        if lines and not self.sink.closed:
            self.sink.write_framed(self.sink.frame(lines))
            self.cache.events_sent += len(lines)
            self.cache.event_sizes.add(lines)

    def send_bookmark(self, revision: int) -> None:
        if revision > self.progress_rev and not self.sink.is_paused:
            self.progress_rev = revision
            self.write_lines([bookmark_line(self.filter.version or self.cache.resource, revision)])

    def fail(self, error_line: bytes) -> None:
        """Write an ERROR event and end the stream (kube: in-stream errors close the watch)."""
        self.write_lines([error_line])
        self.close()

    # -- durable replay ----------------------------------------------------------------------
    async def wait_writable(self) -> bool:
        """Wait until the sink can take more; False if the watcher closed meanwhile."""
        while self.sink.is_paused and self.state is not State.CLOSED:
            self._resumed = asyncio.Event()
            await self._resumed.wait()
        return self.state is not State.CLOSED

    # -- ending ------------------------------------------------------------------------------
    def close(self) -> None:
        if self.state is State.CLOSED:
            return
        self._detach()
        self.sink.close()

    def _on_sink_closed(self) -> None:
        self._detach()

    def _detach(self) -> None:
        if self.state is State.CLOSED:
            return
        if self.state is State.INITIAL:  # the connection may serve more requests
            self._hold_unsent(False)
        self.state = State.CLOSED
        if self._timer is not None:
            self._timer.cancel()
        self.cache.detach(self)
        if self._resumed is not None:
            self._resumed.set()

    def _on_resume(self) -> None:
        if self._resumed is not None:
            self._resumed.set()
        if self.state in (State.INITIAL, State.LAGGING):
            self.pump()


def _prefix_of_bytes(items: list[T], size: Callable[[T], int]) -> list[T]:
    """The shortest prefix of ``items`` of at least ``PUMP_BATCH_BYTES`` (all if smaller)."""
    total = 0
    for n, item in enumerate(items, 1):
        total += size(item)
        if total >= PUMP_BATCH_BYTES:
            return items[:n]
    return items
