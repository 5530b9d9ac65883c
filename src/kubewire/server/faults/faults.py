"""``Faults``: the running server's faults on demand, and the hooks that act on them.

The decisions (what a spec means, what matches, whether a rate fires) are ``rules``'; this
module keeps the active set and applies it:

- requests: ``APIServer`` calls ``before_request`` only while a request fault is active (one
  attribute check, ``request_faults``, otherwise): it waits out a latency, raises an error's
  Status, or aborts the connection;
- watch streams: dropping closes the matching watchers now (the client sees its stream end: the
  terminating chunk, or a WebSocket close, and resumes); a stall wraps a watcher's sink in a
  ``StalledSink`` that says it is paused, so the cache keeps it as a cursor on the ring, as it
  does a slow client, and a release pumps it from there: nothing is lost while the ring holds
  what it missed (if the ring overwrites its cursor the watcher is closed and its client
  resumes, as for any slow client); bookmarks are held back by the cache's ``bookmark_gate``;
  an expired history sets the caches' ``expired_below``, which watches and lists read (a
  list at an older exact revision, or with an older continue token, gets 410 as after a
  compaction);
- the store: a store failure answers writes 500 and turns the ``etcd`` health checks red.

Every injection is counted in ``kubewire_faults_injected_total{fault}`` and, for a request,
named in ``RequestInfo.fault`` (the request's httplog line carries it). Methods run on the
server's loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

from kubewire.clock import Timer
from kubewire.server.context import ServerContext
from kubewire.server.faults.rules import (
    REQUEST_TYPES,
    STORE_FAILURE_MESSAGE,
    Fault,
    FaultSet,
    error_status,
    parse_fault,
    store_failure_status,
)
from kubewire.server.observe.health import ServerHealth
from kubewire.server.observe.metrics import Counter, Registry
from kubewire.server.observe.per_request import RequestInfo
from kubewire.server.wire.http_messages import Request
from kubewire.storage.cache import WatchCache
from kubewire.storage.watcher import Sink, State, Watcher, WrappingSink

log = logging.getLogger(__name__)

MAX_HELD_BYTES = 1 << 20  # what a stalled stream may hold of writes made past its pause


class StalledSink(WrappingSink):
    """A watcher's sink while a stall fault holds it: always paused. The cache writes nothing
    to a paused watcher; the rare direct write (an ERROR event) is kept for the release, up to
    ``MAX_HELD_BYTES`` (past that the stream is closed and its client resumes)."""

    __slots__ = ("fault_id", "held", "held_bytes")

    def __init__(self, inner: Sink, fault_id: str) -> None:
        super().__init__(inner, "stalled")
        self.fault_id = fault_id
        self.held: list[bytes] = []
        self.held_bytes = 0

    @property
    def is_paused(self) -> bool:
        return True

    def set_write_high_water(self, value: int | None) -> None:
        """The watcher's hold on a snapshot walk reaches the real stream (storage/watcher.py
        ``_hold_unsent``), so ending it while stalled restores the connection's mark."""
        setter = getattr(self.inner, "set_write_high_water", None)
        if setter is not None:
            setter(value)

    def write_framed(self, framed: bytes) -> None:
        self.held_bytes += len(framed)
        if self.held_bytes > MAX_HELD_BYTES:
            self.inner.close()
            return
        self.held.append(framed)


class Faults:
    """The active faults of one server (``APIServer.faults``, ``ServerContext.faults``)."""

    def __init__(self, ctx: ServerContext, health: ServerHealth, metrics: Registry) -> None:
        self.ctx = ctx
        self.health = health
        self.rules = FaultSet()
        self.request_faults = False  # the hot path's one check: any request fault active
        self.injected = Counter("kubewire_faults_injected_total",
                                "Faults kubewire injected, by kind of fault.", ("fault",))
        metrics.add(self.injected)
        self._timers: dict[str, Timer] = {}

    # -- the typed API --------------------------------------------------------------------------
    # Each takes the scope it applies to as keywords (absent: any): ``RequestScope`` for
    # request faults, ``WatchScope`` for watch streams. Kept faults answer their id.
    def drop_watches(self, **scope: Unpack[WatchScope]) -> int:
        """End the matching watch streams now; how many ended."""
        return int(self.add(_spec("dropWatches", scope))["dropped"])

    def expire_history(self) -> str:
        """A watch resuming from a revision older than the current one gets 410 Gone, and so
        does a list at such a revision (``resourceVersionMatch=Exact`` or a continue token)."""
        return self._add_id({"type": "expireHistory"})

    def stall_streams(self, seconds: float | None = None, **scope: Unpack[WatchScope]) -> str:
        """Matching watch streams (open now or opened later) get nothing until the fault is
        cleared or ``seconds`` pass (on the server's clock); then what they missed follows."""
        return self._add_id(_spec("stall", scope, seconds=seconds))

    def suppress_bookmarks(self, initial_events_end: bool = False,
                           **scope: Unpack[WatchScope]) -> str:
        """No periodic bookmarks for matching watches; with ``initial_events_end`` a watch-list
        gets no ``k8s.io/initial-events-end`` bookmark either."""
        return self._add_id(_spec("bookmarks", scope, mode="suppress",
                                  initialEventsEnd=initial_events_end or None))

    def delay_bookmarks(self, seconds: float, **scope: Unpack[WatchScope]) -> str:
        """Each periodic bookmark of a matching watch comes ``seconds`` late."""
        return self._add_id(_spec("bookmarks", scope, mode="delay", seconds=seconds))

    def inject_error(self, code: int, rate: float = 1.0, count: int | None = None,
                     retry_after_seconds: int = 1, **scope: Unpack[RequestScope]) -> str:
        """Matching requests answer ``code`` (429, 500, 503, 504) as kube's Status for it;
        ``rate`` of them (drawn per request), ``count`` times at most."""
        return self._add_id(_spec("error", scope, code=code, rate=rate, count=count,
                                  retryAfterSeconds=retry_after_seconds if code == 429
                                  else None))

    def reset_connections(self, rate: float = 1.0, count: int | None = None,
                          **scope: Unpack[RequestScope]) -> str:
        """Matching requests get no answer: their TCP connection is aborted."""
        return self._add_id(_spec("reset", scope, rate=rate, count=count))

    def add_latency(self, seconds: float, rate: float = 1.0, count: int | None = None,
                    **scope: Unpack[RequestScope]) -> str:
        """Matching requests wait ``seconds`` (real time) before they are served."""
        return self._add_id(_spec("latency", scope, seconds=seconds, rate=rate, count=count))

    def fail_store(self) -> str:
        """Writes answer 500 and ``/readyz`` (``etcd``) fails until ``recover_store``."""
        return self._add_id({"type": "storeFailure"})

    def recover_store(self) -> int:
        """Clear every store failure; how many there were."""
        return sum(self.clear(f.id) for f in self.rules.of_type("storeFailure"))

    def list_faults(self) -> list[dict[str, Any]]:
        """The active faults, as the admin endpoint lists them."""
        return [fault.to_json() for fault in self.rules.faults.values()]

    def clear(self, fault_id: str | None = None) -> int:
        """Clear one fault (by id) or all; how many were cleared."""
        ids = list(self.rules.faults) if fault_id is None else [fault_id]
        cleared = [f for f in (self.rules.remove(i) for i in ids) if f is not None]
        for fault in cleared:
            timer = self._timers.pop(fault.id, None)
            if timer is not None:
                timer.cancel()
        if cleared:
            self._changed()
            for fault in cleared:
                if fault.type == "stall":
                    self._release(fault.id)
        return len(cleared)

    # -- adding from a spec ---------------------------------------------------------------------
    def add(self, spec: object) -> dict[str, Any]:
        """Apply a fault described as JSON (``rules``' module docstring); what was done: the
        kept fault (with its id), or for ``dropWatches`` how many streams ended. A bad spec
        raises kube's 400 and changes nothing."""
        fault = parse_fault(spec)
        if fault.type == "dropWatches":
            dropped = 0
            for _, watcher in self._matching_watchers(fault):
                watcher.close()
                dropped += 1
            if dropped:
                self.injected.inc(("dropWatches",), dropped)
            return {"type": "dropWatches", "dropped": dropped}
        if fault.type == "expireHistory":
            fault.revision = self.ctx.caches.revision
        self.rules.add(fault)
        if fault.type == "expireHistory":
            self.injected.inc(("expireHistory",))
        if fault.type == "stall":
            for cache, watcher in self._matching_watchers(fault):
                self._stall(cache, watcher, fault)
            if fault.seconds:
                fid = fault.id
                self._timers[fid] = self.ctx.clock.call_later(fault.seconds,
                                                              lambda: self.clear(fid))
        self._changed()
        return fault.to_json()

    def _add_id(self, spec: dict[str, Any]) -> str:
        return str(self.add(spec)["id"])

    def _changed(self) -> None:
        """Point the hooks at what is active now (None where nothing is)."""
        faults = self.rules.faults.values()
        self.request_faults = any(f.type in REQUEST_TYPES or f.type == "storeFailure"
                                  for f in faults)
        caches = self.ctx.caches
        caches.expired_below = max((f.revision for f in faults if f.type == "expireHistory"),
                                   default=0)
        watch_faults = any(f.type == "stall" or f.initial_events_end for f in faults)
        caches.on_watch = self._on_watch if watch_faults else None
        bookmarks = any(f.type == "bookmarks" for f in faults)
        caches.bookmark_gate = self._bookmark_gate if bookmarks else None
        failed = any(f.type == "storeFailure" for f in faults)
        self.health.store_fault = (f"store failure injected ({STORE_FAILURE_MESSAGE})"
                                   if failed else None)

    # -- requests -------------------------------------------------------------------------------
    async def before_request(self, request: Request, info: RequestInfo) -> bool:
        """Act on a resource request before it is served (called while ``request_faults``):
        True when the request was answered here (its connection aborted); raises the Status
        of an injected error."""
        route = info.route
        if route is None:
            return False
        resource = route.resource
        before = len(self.rules.faults)
        delay, answer = self.rules.pick_for_request(info.verb, resource.plural, resource.group,
                                                    route.namespace, self.ctx.rng)
        if len(self.rules.faults) != before:
            self._changed()  # a fault's count ran out
        if delay is not None:
            self._mark(info, delay)
            await asyncio.sleep(delay.seconds)
        if answer is None:
            return False
        self._mark(info, answer)
        if answer.type == "reset":
            request.abort_connection()
            info.aborted = True  # recorded and logged with code 0: no answer was sent
            return True
        if answer.type == "storeFailure":
            raise store_failure_status()
        raise error_status(answer)

    def _mark(self, info: RequestInfo, fault: Fault) -> None:
        label = fault.label
        self.injected.inc((label,))
        info.fault = label if not info.fault else f"{info.fault},{label}"

    # -- watches --------------------------------------------------------------------------------
    def _matching_watchers(self, fault: Fault) -> list[tuple[WatchCache, Watcher]]:
        found = []
        for cache in self.ctx.caches.kinds():
            resource = cache.resource
            for watcher in list(cache.watchers):
                if watcher.state is not State.CLOSED and fault.match.watch(
                        resource.plural, resource.group, watcher.filter.namespace,
                        str(watcher.filter.labels)):
                    found.append((cache, watcher))
        return found

    def _on_watch(self, cache: WatchCache, watcher: Watcher) -> None:
        """A new watcher, before it starts: stalled, or without its initial-events-end
        bookmark, if a fault says so."""
        resource = cache.resource
        labels = str(watcher.filter.labels)
        for fault in list(self.rules.faults.values()):
            if fault.type not in ("stall", "bookmarks") or not fault.match.watch(
                    resource.plural, resource.group, watcher.filter.namespace, labels):
                continue
            if fault.type == "stall":
                self._stall(cache, watcher, fault)
            elif fault.initial_events_end and not watcher.skip_initial_end:
                watcher.skip_initial_end = True
                fault.injected += 1
                self.injected.inc(("bookmarks-initial-events-end",))

    def _stall(self, cache: WatchCache, watcher: Watcher, fault: Fault) -> None:
        if isinstance(watcher.sink, StalledSink):
            return  # stalled already, by another fault
        cache.hold(watcher)
        watcher.sink = StalledSink(watcher.sink, fault.id)
        fault.injected += 1
        self.injected.inc(("stall",))

    def _release(self, fault_id: str) -> None:
        """Watchers the stall ``fault_id`` held: on to another stall that matches, else sent
        what was held and pumped from their cursors."""
        stalls = self.rules.of_type("stall")
        for cache in self.ctx.caches.kinds():
            resource = cache.resource
            for watcher in list(cache.watchers):
                sink = watcher.sink
                if not isinstance(sink, StalledSink) or sink.fault_id != fault_id:
                    continue
                labels = str(watcher.filter.labels)
                other = next((f for f in stalls if f.match.watch(
                    resource.plural, resource.group, watcher.filter.namespace, labels)), None)
                if other is not None:
                    sink.fault_id = other.id
                    continue
                inner = sink.inner
                watcher.sink = inner
                for framed in sink.held:
                    if not inner.closed:
                        inner.write_framed(framed)
                if not inner.closed and not inner.is_paused and inner.on_resume is not None:
                    inner.on_resume()  # the watcher's: pump from its cursor, or wake a replay

    def _bookmark_gate(self, cache: WatchCache, watcher: Watcher, now: float) -> bool:
        """Whether a due periodic bookmark goes out now."""
        resource = cache.resource
        labels = str(watcher.filter.labels)
        for fault in self.rules.of_type("bookmarks"):
            if not fault.match.watch(resource.plural, resource.group, watcher.filter.namespace,
                                     labels):
                continue
            if fault.mode == "suppress":  # skipped as if sent: counted once per bookmark
                watcher.next_bookmark = min(now + cache.caches.bookmark_interval_s,
                                            watcher.deadline - 2.0)
                fault.injected += 1
                self.injected.inc(("bookmarks-suppress",))
                return False
            if now < watcher.next_bookmark + fault.seconds:
                return False
            fault.injected += 1
            self.injected.inc(("bookmarks-delay",))
            return True
        return True


class RequestScope(TypedDict, total=False):
    """Which requests a fault applies to (each absent: any)."""

    verb: str  # kube's: get, list, watch, create, update, patch, delete, deletecollection
    resource: str  # the plural
    group: str  # "" for the core group
    namespace: str


class WatchScope(TypedDict, total=False):
    """Which watch streams a fault applies to (each absent: any)."""

    resource: str
    group: str
    namespace: str  # watches of that namespace ("" : across all namespaces)
    label_selector: str  # the selector the watch asked with, as kube prints it


def _spec(kind: str, scope: Mapping[str, object], **fields: object) -> dict[str, Any]:
    """A JSON spec from the typed API's arguments (None: not given)."""
    found = {"labelSelector" if k == "label_selector" else k: v for k, v in scope.items()}
    found.update(fields)
    return {"type": kind, **{k: v for k, v in found.items() if v is not None}}
