"""The watch endpoint: turn validated ListOptions into a watch-cache cursor on a chunked stream.

Contract (watch-protocol.md §2.2, §3, §5, §6):
- 200, ``Content-Type: application/json``, chunked; the head is flushed before any event;
- RV unset: synthetic ADDED for the current state at the store's current revision, then
  changes; RV "0": the same from the cache's state; RV N: changes after N, from memory or the
  durable log; below the compaction horizon one ERROR 410 Expired and the stream ends;
- ``sendInitialEvents=true`` (also the v1.32 default for RV unset/"0"): the initial ADDED batch
  and, with ``allowWatchBookmarks=true``, the ``k8s.io/initial-events-end`` bookmark;
- the stream ends silently after ``timeoutSeconds`` (absent or 0: random in [1800, 3600) s);
- errors found before streaming are ordinary Status responses; later ones are ERROR events.
"""

from __future__ import annotations

from kubewire.server.context import ServerContext
from kubewire.server.encoding import negotiate_json
from kubewire.server.http import Request
from kubewire.server.options import ListOptions
from kubewire.server.routes import Route
from kubewire.storage.cache import WatchStart
from kubewire.storage.cached import WatchFilter

WATCH_HEADERS = [("Content-Type", "application/json")]


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
    return WatchFilter(namespace, name, opts.label_selector, opts.field_selector)


async def serve_watch(ctx: ServerContext, request: Request, route: Route,
                      opts: ListOptions) -> None:
    """Start the stream and hand it to the watch cache; the request task then ends."""
    negotiate_json(request.header("accept"), stream=True)
    start = watch_start(ctx, opts)
    cache = ctx.caches.for_resource(route.resource)
    stream = request.start_stream(200, WATCH_HEADERS)
    await cache.watch(stream, watch_filter(route, opts), start)
