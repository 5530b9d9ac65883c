"""Parsing request paths into what they address: a kind, a namespace, a name, a subresource.

Pure: a path in, a ``Route`` (or None) out. The registry decides what exists; URL shapes follow
kube-apiserver's installer (``/api/v1``, ``/apis/<group>/<version>``, the deprecated ``/watch/``
prefix, namespaced and all-namespaces collections; watch-protocol.md §1.1). ``is_watch`` says
whether a request on a route is served as a watch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubewire.resources import Registry, Resource
from kubewire.server.request.query_params import Query, optional_bool


@dataclass(frozen=True, slots=True)
class Route:
    resource: Resource
    namespace: str  # "" for cluster-scoped kinds and all-namespaces collections
    name: str  # "" for collections
    subresource: str  # "" or "status", "scale", "finalize"
    watch_path: bool  # the legacy /watch/ prefix: forces watch mode

    @property
    def is_collection(self) -> bool:
        return not self.name


@dataclass(frozen=True, slots=True)
class GroupVersionPath:
    """A path under a served group/version that names no known resource (404 with Status)."""

    group: str
    version: str


def split_group_version(path: str) -> tuple[str, str, list[str]] | None:
    """``/api/v1/x/y`` -> ("", "v1", ["x", "y"]); ``/apis/g/v/...`` -> (g, v, [...])."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


# Routes of recent paths, for the registry they were parsed with: a client asks the same paths
# again and again (every create of a kind posts to one collection), and a route is immutable.
# Only the server's current registry is kept (one swapped in for a CRD starts afresh); only
# short paths, and at most _ROUTES_KEPT of them (then the table starts afresh).
_ROUTES_KEPT = 4096
_ROUTE_PATH_CHARS = 256
_routes_registry: Registry | None = None
_routes: dict[str, Route | GroupVersionPath | None] = {}


def parse_route(registry: Registry, path: str) -> Route | GroupVersionPath | None:
    """The route a resource path addresses; None when the group/version is not served."""
    global _routes_registry  # the table's owner, checked on every call
    if registry is _routes_registry:
        try:
            return _routes[path]
        except KeyError:
            pass
    else:
        _routes_registry = registry
        _routes.clear()
    route = _parse_route(registry, path)
    if len(path) <= _ROUTE_PATH_CHARS:
        if len(_routes) >= _ROUTES_KEPT:
            _routes.clear()
        _routes[path] = route
    return route


def _parse_route(registry: Registry, path: str) -> Route | GroupVersionPath | None:
    gv = split_group_version(path)
    if gv is None:
        return None
    group, version, rest = gv
    if not registry.serves(group, version):
        return None
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    route = _match(registry, group, version, rest, watch_path)
    return route if route is not None else GroupVersionPath(group, version)


def _match(registry: Registry, group: str, version: str, rest: list[str],
           watch_path: bool) -> Route | None:
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns_kind = registry.lookup(group, version, rest[2])
        if ns_kind is not None and ns_kind.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    resource = registry.lookup(group, version, rest[0])
    if resource is None or (namespace and not resource.namespaced):
        return None
    name = rest[1] if len(rest) >= 2 else ""
    sub = rest[2] if len(rest) == 3 else ""
    if sub and (sub not in resource.subresources or watch_path):
        return None
    return Route(resource, namespace, name, sub, watch_path)


def is_watch(method: str, route: Route, query: Query) -> bool:
    """requestinfo.go: a GET of a collection whose ``watch`` parameter reads true as the list
    options read it (``parse_bool``: anything but ``0`` and ``false``, even empty), or any GET
    under the legacy ``/watch/`` prefix; a GET that names an object is a ``get`` whatever its
    ``watch`` says. The one decision: the verb (authorization, the watch limit) and the
    deadline both ask it."""
    if method not in ("GET", "HEAD"):
        return False
    return route.watch_path or (route.is_collection and bool(optional_bool(query, "watch")))
