"""Per-request bookkeeping around the handlers: admission limits and metrics.

- Requests in flight are bounded as kube-apiserver's max-in-flight filter does: read-only and
  mutating requests separately, long-running ones (watches) not at all, ``system:masters`` never;
  over the bound the answer is kube's plain-text 429 with ``Retry-After: 1``.
- Watches are bounded per user (kubewire's own limit: one client cannot hold every socket); over
  it the answer is a 429 ``Status``.
- Each finished request is counted and timed with kube-apiserver's metric names and labels;
  GET and LIST answers' sizes are observed, open watches counted until their streams end, and
  the store's requests timed (``store_request``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubewire.resources import Resource
from kubewire.server.access.authn import UserInfo
from kubewire.server.context import DATABASE_NAME, ServerConfig, ServerContext
from kubewire.server.observe.metrics import (
    HistogramSample,
    LabelValues,
    LiveSources,
    Sample,
    ServerMetrics,
)
from kubewire.server.observe.runtime_metrics import runtime_metrics
from kubewire.server.request.routes import Route
from kubewire.server.wire.http_messages import Request, Response
from kubewire.status import StatusError, TooManyRequests
from kubewire.storage.cache import WatchCache

if TYPE_CHECKING:
    from kubewire.server.observe.audit_log import AuditRecord

MASTERS = "system:masters"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_REPORTED_VERBS = {"list": "LIST", "watch": "WATCH", "get": "GET", "create": "POST",
                   "update": "PUT", "patch": "PATCH", "delete": "DELETE",
                   "deletecollection": "DELETE"}


@dataclass(slots=True)
class RequestInfo:
    """What routing learned about a request, for limits, metrics and the audit log."""

    route: Route | None = None
    user: UserInfo | None = None  # who the request runs as (the impersonated user, if any)
    verb: str = ""
    code: int = 0
    error: StatusError | None = None  # the Status answered, if the request failed with one
    audit: AuditRecord | None = None  # set only when the request is audited
    fault: str = ""  # the faults injected into it (server/faults), comma-separated
    aborted: bool = False  # its connection was aborted with no answer (a fault): code 0

    def answered_code(self, response: Response | None) -> int:
        """The code the request was answered with: the response's, a streamed answer's
        (``code``, 200 unless set), or 0 when no answer was sent (``aborted``)."""
        if self.aborted:
            return 0
        return response.status if response is not None else (self.code or 200)


class TooManyInFlight(Exception):
    """maxinflight.go ``tooManyRequests``: plain text, not a Status."""

    def response(self) -> Response:
        return Response(429, b"Too many requests, please try again later.\n",
                        "text/plain; charset=utf-8", [("Retry-After", "1")])


class Observer:
    def __init__(self, ctx: ServerContext, config: ServerConfig) -> None:
        self.ctx = ctx
        self.limits = config.limits
        self.in_flight = {"readOnly": 0, "mutating": 0}
        self.watches: Tally[str] = Tally()
        self.longrunning: Tally[LabelValues] = Tally()
        self.database = config.data_dir / DATABASE_NAME
        self.storage_cluster_id = hashlib.sha256(
            str(self.database.absolute()).encode()).hexdigest()[:16]
        self._store_types: dict[str, str] = {}  # storage id -> kube's resource label
        # the store's size in bytes where it has no file (the memory store's ``size_bytes``)
        self.storage_size_of: Callable[[], int] | None = None
        # etcd: each member's database size by endpoint, as last polled (the etcd store's)
        self.storage_db_sizes_of: Callable[[], dict[str, int]] | None = None
        self.metrics = ServerMetrics(LiveSources(
            watchers=self._watchers, objects=self._objects, inflight=self._inflight,
            events_sent=self._events_sent, terminated=self._terminated,
            event_sizes=self._event_sizes, longrunning=self._longrunning,
            storage_size=self._storage_size, storage_db_sizes=self._storage_db_sizes))
        for metric in runtime_metrics():
            self.metrics.registry.add(metric)

    # --- admission ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def admit(self, request: Request, info: RequestInfo) -> Iterator[None]:
        if info.user is not None and MASTERS in info.user.groups:
            yield  # maxinflight.go: the privileged group is never throttled
            return
        if info.verb == "watch":
            self._admit_watch(info)
            try:
                yield
            finally:
                self._track_watch(request, info)
            return
        kind = "mutating" if request.method in MUTATING else "readOnly"
        limit = (self.limits.max_mutating_requests_inflight if kind == "mutating"
                 else self.limits.max_requests_inflight)
        if limit and self.in_flight[kind] >= limit:
            raise TooManyInFlight
        self.in_flight[kind] += 1
        try:
            yield
        finally:
            self.in_flight[kind] -= 1

    def _admit_watch(self, info: RequestInfo) -> None:
        limit = self.limits.max_watches_per_user
        name = info.user.name if info.user else ""
        if limit and self.watches[name] >= limit:
            raise TooManyRequests(f"too many watches open for user {name!r}: the limit is "
                                  f"{limit}", {"retryAfterSeconds": 1})

    def _track_watch(self, request: Request, info: RequestInfo) -> None:
        stream = request.stream
        if stream is None or stream.closed:
            return
        name = info.user.name if info.user else ""
        self.watches[name] += 1
        previous = stream.on_close

        def closed() -> None:
            self.watches[name] -= 1
            if self.watches[name] <= 0:
                del self.watches[name]
            if previous is not None:
                previous()

        stream.on_close = closed

    # --- metrics -----------------------------------------------------------------------------

    def finished(self, request: Request, info: RequestInfo, response: Response | None,
                 seconds: float) -> str:
        """Count and time a served request; its verb as kube reports it (``LIST``, ...)."""
        code = info.answered_code(response)
        route = info.route
        if route is None:
            labels = (request.method.upper(), "", "", "", "", "", "apiserver")
        else:
            verb = _REPORTED_VERBS.get(info.verb, info.verb.upper())
            if verb == "PATCH" and request.header("content-type").startswith(
                    "application/apply-patch"):
                verb = "APPLY"
            resource = route.resource
            labels = (verb, resource.group, resource.version, resource.plural,
                      route.subresource, _scope(route), "apiserver")
        self.metrics.requests.inc((*labels, str(code)))
        if info.verb == "watch":
            self._track_longrunning(request, labels)
            return labels[0]
        self.metrics.latency.observe(labels, seconds)
        if response is not None and labels[0] in ("GET", "LIST"):
            self.metrics.response_sizes.observe(labels, float(len(response.body)))
        return labels[0]

    def _track_longrunning(self, request: Request, labels: LabelValues) -> None:
        """``apiserver_longrunning_requests``: the watch counts while its stream is open."""
        stream = request.stream
        if stream is None or stream.closed:
            return
        self.longrunning[labels] += 1
        previous = stream.on_close

        def closed() -> None:
            self.longrunning[labels] -= 1
            if self.longrunning[labels] <= 0:
                del self.longrunning[labels]
            if previous is not None:
                previous()

        stream.on_close = closed

    def store_request(self, operation: str, key: str, seconds: float) -> None:
        """The store's ``on_request``: ``etcd_request_duration_seconds{operation,type}``."""
        storage_id = key[:key.find("/", key.find("/") + 1)]  # "core/pods/ns/name": "core/pods"
        kind = self._store_types.get(storage_id)
        if kind is None:
            group, _, plural = storage_id.partition("/")
            kind = plural if group == "core" else f"{plural}.{group}"
            if len(self._store_types) < 1024:  # the registry's kinds; bounded all the same
                self._store_types[storage_id] = kind
        self.metrics.etcd_latency.observe((operation, kind), seconds)

    def _stored_caches(self) -> Iterable[tuple[Resource, WatchCache]]:
        """Each stored kind once (another version of a kind is a view on the same cache)."""
        for resource in self.ctx.registry.stored():
            cache = self.ctx.caches.for_resource(resource)
            if isinstance(cache, WatchCache):
                yield resource, cache

    def _watchers(self) -> Iterable[Sample]:
        for resource, cache in self._stored_caches():
            yield (resource.group, resource.version, resource.kind), float(len(cache.watchers))

    def _objects(self) -> Iterable[Sample]:
        for resource, cache in self._stored_caches():
            yield (resource.group_resource,), float(len(cache.objects))

    def _events_sent(self) -> Iterable[Sample]:
        for resource, cache in self._stored_caches():
            yield (resource.group, resource.version, resource.kind), float(cache.events_sent)

    def _terminated(self) -> Iterable[Sample]:
        for resource, cache in self._stored_caches():
            yield (resource.group_resource,), float(cache.watchers_terminated)

    def _event_sizes(self) -> Iterable[HistogramSample]:
        for resource, cache in self._stored_caches():
            tally = cache.event_sizes
            if tally.total or any(tally.counts):
                yield ((resource.group, resource.version, resource.kind), list(tally.counts),
                       tally.total)

    def _longrunning(self) -> Iterable[Sample]:
        return [(labels, float(n)) for labels, n in self.longrunning.items()]

    def _storage_size(self) -> Iterable[Sample]:
        if self.storage_size_of is not None:
            return [((self.storage_cluster_id,), float(self.storage_size_of()))]
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += os.stat(f"{self.database}{suffix}").st_blocks * 512
        return [((self.storage_cluster_id,), float(size))]

    def _storage_db_sizes(self) -> Iterable[Sample]:
        if self.storage_db_sizes_of is None:
            return []
        return [((endpoint,), float(size))
                for endpoint, size in sorted(self.storage_db_sizes_of().items())]

    def _inflight(self) -> Iterable[Sample]:
        return [((kind,), float(n)) for kind, n in self.in_flight.items()]


def _scope(route: Route) -> str:
    if route.name:
        return "resource"
    return "namespace" if route.namespace else "cluster"
