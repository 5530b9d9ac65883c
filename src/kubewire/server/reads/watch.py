"""The watch endpoint: turn validated ListOptions into a watch-cache cursor on a chunked stream.

Contract (watch-protocol.md §2.2, §3, §5, §6):
- 200, ``Content-Type: application/json``, chunked; the head is flushed before any event;
- RV unset: synthetic ADDED for the current state at the store's current revision, then
  changes; RV "0": the same from the cache's state; RV N: changes after N, from memory or the
  durable log; below the compaction horizon one ERROR 410 Expired and the stream ends;
- ``sendInitialEvents=true`` (also the v1.32 default for RV unset/"0"): the initial ADDED batch
  and, with ``allowWatchBookmarks=true``, the ``k8s.io/initial-events-end`` bookmark;
- the stream ends silently after ``timeoutSeconds`` (absent or 0: random in [1800, 3600) s);
- errors found before streaming are ordinary Status responses; later ones are ERROR events;
- a Table Accept (``kubectl get -w``) makes each ADDED/MODIFIED/DELETED object a one-row
  ``meta.k8s.io`` Table, column definitions on the first only (objects-and-clients.md §5.4);
  order, once-only delivery and slow-consumer closing are the same as for JSON;
- a CRD version served through a conversion webhook converts each flush's objects on the way
  out (``server/conversion/sink.py``).
"""

from __future__ import annotations

import sys

from kubewire.selectors.fields import FieldSelector
from kubewire.selectors.labels import LabelSelector
from kubewire.server.context import ServerContext
from kubewire.server.conversion.objects import needs_webhook
from kubewire.server.conversion.sink import ConvertingSink
from kubewire.server.request.options import ListOptions
from kubewire.server.request.routes import Route
from kubewire.server.tables.output import negotiate_output
from kubewire.server.tables.sink import TableSink
from kubewire.server.wire.http_messages import Request
from kubewire.storage.cached import WatchFilter, WatchStart
from kubewire.storage.watcher import Sink

WATCH_HEADERS = [("Content-Type", "application/json")]
# Most watches select nothing: they share these instead of holding empty selectors of their own.
_ALL_LABELS = LabelSelector()
_ALL_FIELDS = FieldSelector()


def watch_timeout_s(ctx: ServerContext, opts: ListOptions) -> float:
    """``timeoutSeconds`` when > 0 (negative ends at once); else kube's random default."""
    if opts.timeout_seconds:
        return float(opts.timeout_seconds)
    base = ctx.config.min_request_timeout_s
    return base * (1 + ctx.rng.random())


def watch_start(ctx: ServerContext, opts: ListOptions) -> WatchStart:
    rv = opts.resource_version
    if rv == "":
        revision = ctx.store.current_revision  # consistent: at least what is committed now
    elif rv == "0":
        revision = ctx.caches.revision
    else:
        revision = int(rv)
    return WatchStart(revision=revision, initial_events=bool(opts.send_initial_events),
                      bookmarks=opts.allow_watch_bookmarks,
                      timeout_s=watch_timeout_s(ctx, opts))


def watch_filter(route: Route, opts: ListOptions) -> WatchFilter:
    namespace = route.namespace
    if not namespace and route.resource.namespaced:
        namespace = opts.field_selector.exact("metadata.namespace") or ""
    name = opts.field_selector.exact("metadata.name") or ""
    labels = _ALL_LABELS if opts.label_selector.is_empty else opts.label_selector
    fields = _ALL_FIELDS if opts.field_selector.is_empty else opts.field_selector
    # Watchers of one namespace share its name (it lives as long as each watch).
    return WatchFilter(sys.intern(namespace), name, labels, fields)


def is_watch_list(opts: ListOptions) -> bool:
    """kube's ``isListWatchRequest``: initial events ended by a bookmark (never a Table)."""
    return bool(opts.send_initial_events) and opts.allow_watch_bookmarks


async def serve_watch(ctx: ServerContext, request: Request, route: Route,
                      opts: ListOptions) -> None:
    """Start the stream and hand it to the watch cache; the request task then ends.

    Raises kube's 406 for an unacceptable Accept and its 400 for a bad ``includeObject``
    before the head is written.
    """
    table = negotiate_output(request.header("accept"), request.query, watch=True,
                             watch_list=is_watch_list(opts))
    table_request = None if table is None else table.resolve()
    start = watch_start(ctx, opts)
    cache = ctx.caches.for_resource(route.resource)
    sink: Sink = request.start_event_stream(WATCH_HEADERS)
    if table_request is not None:
        sink = TableSink(sink, route.resource, table_request, ctx.now)
    if needs_webhook(route.resource):  # the objects, converted before any Table is made
        sink = ConvertingSink(sink, ctx, route.resource)
    await cache.watch(sink, watch_filter(route, opts), start)
