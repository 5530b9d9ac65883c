"""``access.chain.unrouted_attributes``: a path no route serves, read as kube's
``RequestInfoFactory`` reads it (cases after kube's requestinfo_test.go)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubewire.server.access.authn import UserInfo
from kubewire.server.access.chain import unrouted_attributes
from kubewire.server.wire.http_messages import Request

ME = UserInfo("me", groups=("system:authenticated",))


def info(method: str, url: str) -> tuple[bool, str, str, str, str, str, str, str]:
    attrs = unrouted_attributes(ME, Request(cast(Any, None), method, url.encode(), {}, 0.0))
    return (attrs.resource_request, attrs.verb, attrs.api_group, attrs.api_version,
            attrs.namespace, attrs.resource, attrs.name, attrs.subresource)


@pytest.mark.parametrize(("method", "url", "expected"), [
    ("GET", "/api/v1/namespaces", (True, "list", "", "v1", "", "namespaces", "", "")),
    ("GET", "/api/v1/namespaces/other", (True, "get", "", "v1", "other", "namespaces",
                                         "other", "")),
    ("GET", "/api/v1/namespaces/other/pods", (True, "list", "", "v1", "other", "pods", "", "")),
    ("GET", "/api/v1/namespaces/other/pods/foo", (True, "get", "", "v1", "other", "pods", "foo",
                                                  "")),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", (True, "get", "", "v1", "other", "pods",
                                                   "foo", "")),
    ("GET", "/api/v1/pods", (True, "list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods?watch=1", (True, "watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/pods?watch=false", (True, "list", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3Dfoo",
     (True, "list", "", "v1", "other", "pods", "foo", "")),
    ("GET", "/api/v1/watch/pods", (True, "watch", "", "v1", "", "pods", "", "")),
    ("GET", "/api/v1/watch/namespaces/other/pods/foo", (True, "watch", "", "v1", "other", "pods",
                                                        "foo", "")),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo/a/b", (True, "proxy", "", "v1", "other",
                                                            "pods", "foo", "")),
    ("GET", "/api/v1/namespaces/other/pods/foo/status", (True, "get", "", "v1", "other", "pods",
                                                         "foo", "status")),
    ("PUT", "/api/v1/namespaces/other/finalize", (True, "update", "", "v1", "other",
                                                  "namespaces", "other", "finalize")),
    ("POST", "/api/v1/namespaces/other/pods", (True, "create", "", "v1", "other", "pods", "",
                                               "")),
    ("DELETE", "/api/v1/namespaces/other/pods", (True, "deletecollection", "", "v1", "other",
                                                 "pods", "", "")),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", (True, "delete", "", "v1", "other", "pods",
                                                     "foo", "")),
    ("OPTIONS", "/api/v1/pods", (True, "", "", "v1", "", "pods", "", "")),
    ("GET", "/apis/extensions/v1beta1/namespaces/other/deployments/foo/scale",
     (True, "get", "extensions", "v1beta1", "other", "deployments", "foo", "scale")),
    ("GET", "/apis/example.com/v1/widgets", (True, "list", "example.com", "v1", "", "widgets",
                                             "", "")),
])
def test_resource_requests(method: str, url: str,
                           expected: tuple[bool, str, str, str, str, str, str, str]) -> None:
    assert info(method, url) == expected


@pytest.mark.parametrize(("method", "url", "verb"), [
    ("GET", "/", "get"), ("GET", "/api", "get"), ("GET", "/api/v1", "get"),
    ("GET", "/apis", "get"), ("GET", "/apis/apps", "get"), ("GET", "/apis/apps/v1", "get"),
    ("POST", "/apis/apps/v1", "post"), ("HEAD", "/healthz", "get"),
    ("GET", "/livez/ping", "get"), ("GET", "/openapi/v3/apis/apps/v1", "get"),
    ("GET", "/other/v1/pods", "get"),
    ("GET", "/api/v1/watch", "get"),  # kube: "unable to determine kind and namespace"
])
def test_non_resource_paths(method: str, url: str, verb: str) -> None:
    attrs = unrouted_attributes(ME, Request(cast(Any, None), method, url.encode(), {}, 0.0))
    assert (attrs.resource_request, attrs.verb, attrs.path) == (False, verb, url)
