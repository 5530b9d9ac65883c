"""The resource metrics API (``metrics.k8s.io/v1beta1`` ``pods`` and ``nodes``), answered from
the watch caches of pods and nodes as metrics-server answers it from its informers.

A cluster server serves it (``ServerConfig.cluster``: the registry adds ``METRICS_RESOURCES``)
the way kind with metrics-server does behind kube-aggregator: GET and LIST only, label
selectors and ``metadata.name``/``metadata.namespace`` field selectors, no pagination (the
Lister ignores ``limit``), items sorted by namespace and name. A watch is kube's 405 for a
storage without a Watcher; any other method is go-restful's 405 for a route never installed.
A pod without metrics (not Running) is ``podmetrics.metrics.k8s.io "ns/name" not found``, a
node without (not Ready) ``nodemetrics.metrics.k8s.io "name" not found``; a missing pod or
node is the lister's ``pods "name" not found``. What the objects hold is
``metrics_objects``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from kubewire.resources import Resource
from kubewire.server.context import ServerContext
from kubewire.server.reads import metrics_objects as objects
from kubewire.server.request.options import ListOptions, parse_get_options, parse_list_options
from kubewire.server.request.routes import Route
from kubewire.server.tables.output import negotiate_output
from kubewire.server.wire.encoding import json_response
from kubewire.server.wire.http_messages import Request, Response
from kubewire.status import MethodNotAllowed, NotFound, method_not_supported, not_found
from kubewire.storage.cached import CachedObject
from kubewire.times import format_time

Obj = dict[str, Any]
_NOT_INSTALLED = "the server does not allow this method on the requested resource"
# The group/resource metrics-server's NotFound names (``metrics.Resource("podmetrics")``).
_METRICS_RESOURCE = {"PodMetrics": "podmetrics", "NodeMetrics": "nodemetrics"}


def _source(ctx: ServerContext, plural: str) -> Resource:
    found = ctx.registry.lookup("", "v1", plural)
    if found is None:  # the core kinds are always served
        raise LookupError(plural)
    return found


def _decoded(obj: CachedObject) -> Obj:
    value = msgspec.json.decode(obj.value)
    return value if isinstance(value, dict) else {}


# A pod's usage is a function of the pod: kept per (key, revision), checked against a hash of
# the stored bytes (servers in one process share this memo; the same key and revision on two
# servers with other bytes is a miss), so a list decodes and computes only changed pods.
MEMO_CAPACITY = 100_000
_memo: dict[tuple[str, int], tuple[int, objects.PodUsage]] = {}


def _usage(cached: CachedObject) -> objects.PodUsage:
    slot = (cached.key, cached.revision)
    digest = hash(cached.value)
    found = _memo.get(slot)
    if found is not None and found[0] == digest:
        return found[1]
    usage = objects.pod_usage(_decoded(cached))
    if len(_memo) >= MEMO_CAPACITY:  # the oldest entry goes (insertion order)
        with contextlib.suppress(RuntimeError, KeyError, StopIteration):  # another server's
            del _memo[next(iter(_memo))]                                  # thread got there
    _memo[slot] = (digest, usage)
    return usage


def _pod_meta(cached: CachedObject) -> Obj:
    return {"name": cached.name, "namespace": cached.namespace, "labels": cached.labels}


async def serve_metrics(ctx: ServerContext, request: Request, route: Route) -> Response:
    """GET/LIST of PodMetrics or NodeMetrics."""
    if request.method not in ("GET", "HEAD") or route.subresource:
        raise MethodNotAllowed(_NOT_INSTALLED, {})
    resource = route.resource
    table = negotiate_output(request.header("accept"), request.query)
    now = format_time(ctx.now())
    if route.is_collection or route.watch_path:
        opts = parse_list_options(request.query, resource, force_watch=route.watch_path,
                                  path_name=route.name)
        if opts.watch:
            raise method_not_supported(resource.group, resource.plural, "watch")
        await ctx.caches.wait_for_revision(await ctx.store.consistent_revision())
        items = _pod_items(ctx, route, opts, now) if resource.kind == "PodMetrics" \
            else _node_items(ctx, opts, now)
    else:
        parse_get_options(request.query)
        await ctx.caches.wait_for_revision(await ctx.store.consistent_revision())
        items = [_pod_item(ctx, route, now) if resource.kind == "PodMetrics"
                 else _node_item(ctx, route, now)]
    if table is not None:
        wanted = table.resolve()
        return json_response(200, objects.metrics_table(items, wanted.api_version,
                                                        wanted.include_object))
    if route.is_collection:
        return json_response(200, objects.metrics_list(resource.kind, items))
    return json_response(200, items[0])


def _pods(ctx: ServerContext, namespace: str) -> list[CachedObject]:
    pods = _source(ctx, "pods")
    return list(ctx.caches.for_resource(pods).range(pods.storage_prefix(namespace)))


def _pod_items(ctx: ServerContext, route: Route, opts: ListOptions, now: str) -> list[Obj]:
    namespace = route.namespace or opts.field_selector.exact("metadata.namespace") or ""
    out: list[Obj] = []
    for cached in _pods(ctx, namespace):
        if not opts.label_selector.matches(cached.labels):
            continue
        if not opts.field_selector.matches({"metadata.name": cached.name,
                                            "metadata.namespace": cached.namespace}):
            continue
        usage = _usage(cached)
        if usage.running:
            out.append(objects.pod_metrics(_pod_meta(cached), usage, now))
    out.sort(key=lambda m: (m["metadata"]["namespace"], m["metadata"]["name"]))
    return out


def _pod_item(ctx: ServerContext, route: Route, now: str) -> Obj:
    pods = _source(ctx, "pods")
    cached = ctx.caches.for_resource(pods).get(pods.storage_key(route.namespace, route.name))
    if cached is None:
        raise not_found("", "pods", route.name)
    usage = _usage(cached)
    if not usage.running:
        raise _no_metrics(route.resource, f"{route.namespace}/{route.name}")
    return objects.pod_metrics(_pod_meta(cached), usage, now)


def _no_metrics(resource: Resource, name: str) -> NotFound:
    return not_found(resource.group, _METRICS_RESOURCE[resource.kind], name)


def _usage_by_node(ctx: ServerContext) -> dict[str, list[objects.PodUsage]]:
    by_node: dict[str, list[objects.PodUsage]] = {}
    for cached in _pods(ctx, ""):
        usage = _usage(cached)
        if usage.node and usage.running:
            by_node.setdefault(usage.node, []).append(usage)
    return by_node


def _node_items(ctx: ServerContext, opts: ListOptions, now: str) -> list[Obj]:
    nodes = _source(ctx, "nodes")
    chosen = [node for node in (
        _decoded(n) for n in ctx.caches.for_resource(nodes).range(nodes.storage_prefix())
        if opts.label_selector.matches(n.labels)
        and opts.field_selector.matches({"metadata.name": n.name}))
        if objects.node_has_metrics(node)]
    if not chosen:
        return []
    by_node = _usage_by_node(ctx)
    out = [objects.node_metrics(node, objects.node_usage(
        by_node.get(str(node["metadata"]["name"]), ())), now) for node in chosen]
    out.sort(key=lambda m: m["metadata"]["name"])
    return out


def _node_item(ctx: ServerContext, route: Route, now: str) -> Obj:
    nodes = _source(ctx, "nodes")
    cached = ctx.caches.for_resource(nodes).get(nodes.storage_key("", route.name))
    if cached is None:
        raise not_found("", "nodes", route.name)
    node = _decoded(cached)
    if not objects.node_has_metrics(node):
        raise _no_metrics(route.resource, route.name)
    pods = _usage_by_node(ctx).get(route.name, [])
    return objects.node_metrics(node, objects.node_usage(pods), now)
