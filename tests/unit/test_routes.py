"""Path parsing into routes (server/routes.py)."""

from __future__ import annotations

import pytest

from kubewire.resources import REGISTRY
from kubewire.server.request.routes import GroupVersionPath, Route, parse_route
from tests.gateway_api import gateway_registry


def route(path: str) -> Route:
    result = parse_route(gateway_registry(), path)  # a started server's kinds
    assert isinstance(result, Route), result
    return result


@pytest.mark.parametrize(
    ("path", "plural", "namespace", "name", "sub", "watch"),
    [
        ("/api/v1/pods", "pods", "", "", "", False),
        ("/api/v1/namespaces/demo/pods", "pods", "demo", "", "", False),
        ("/api/v1/namespaces/demo/pods/web-0", "pods", "demo", "web-0", "", False),
        ("/api/v1/namespaces/demo/pods/web-0/status", "pods", "demo", "web-0", "status", False),
        ("/api/v1/namespaces", "namespaces", "", "", "", False),
        ("/api/v1/namespaces/demo", "namespaces", "", "demo", "", False),
        ("/api/v1/namespaces/demo/status", "namespaces", "", "demo", "status", False),
        ("/api/v1/namespaces/demo/finalize", "namespaces", "", "demo", "finalize", False),
        ("/api/v1/nodes/n1", "nodes", "", "n1", "", False),
        ("/apis/apps/v1/deployments", "deployments", "", "", "", False),
        ("/apis/apps/v1/namespaces/a/deployments/web/scale", "deployments", "a", "web", "scale",
         False),
        ("/api/v1/watch/pods", "pods", "", "", "", True),
        ("/api/v1/watch/namespaces/demo/pods", "pods", "demo", "", "", True),
        ("/api/v1/watch/namespaces/demo/pods/x", "pods", "demo", "x", "", True),
        ("/api/v1/watch/namespaces/demo", "namespaces", "", "demo", "", True),
        ("/apis/gateway.networking.k8s.io/v1/namespaces/a/httproutes", "httproutes", "a", "", "",
         False),
        ("/apis/events.k8s.io/v1/events", "events", "", "", "", False),
    ],
)
def test_paths_address_resources(path: str, plural: str, namespace: str, name: str, sub: str,
                                 watch: bool) -> None:
    r = route(path)
    assert (r.resource.plural, r.namespace, r.name, r.subresource, r.watch_path) == (
        plural, namespace, name, sub, watch)


def test_trailing_slash_is_ignored() -> None:
    assert route("/api/v1/pods/").resource.plural == "pods"


@pytest.mark.parametrize("path", ["/api/v1/bogus", "/api/v1/namespaces/a/nodes",
                                  "/api/v1/namespaces/a/pods/x/bogus",
                                  "/api/v1/namespaces/a/pods/x/status/extra",
                                  "/api/v1/watch/namespaces/a/pods/x/status",
                                  "/apis/apps/v1/namespaces/a/bogus"])
def test_unknown_resources_under_served_group_versions(path: str) -> None:
    assert isinstance(parse_route(REGISTRY, path), GroupVersionPath)


@pytest.mark.parametrize("path", ["/apis/nope/v1/things", "/api/v2/pods", "/", "/apis",
                                  "/foo/bar"])
def test_unserved_group_versions(path: str) -> None:
    assert parse_route(REGISTRY, path) is None
