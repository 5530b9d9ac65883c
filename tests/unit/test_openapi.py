"""OpenAPI v3 documents and their HTTP answers (server/openapi.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kubewire.resources import REGISTRY, Registry
from kubewire.server.discovery.openapi import (
    OpenAPIDocuments,
    build_document,
    documents_for,
    encode_document,
    openapi_response,
)
from kubewire.server.request.routes import Route, parse_route
from tests.gateway_api import gateway_registry

DOCS = documents_for(REGISTRY)
# kinds with objects: a create-only kind (bindings) has a POST alone, no list, get or patch
DOCUMENTED = list(REGISTRY.stored())
GV_PATHS = [f"apis/{g}/{v}" if g else f"api/{v}" for g, v in REGISTRY.group_versions()]
WRITE_METHODS = ("post", "put", "patch")
MAX_DOCUMENT_BYTES = 512 * 1024  # core/v1 is the largest (~170 KB); upstream's is ~1.9 MB


def document(gv_path: str) -> dict[str, Any]:
    found = DOCS.document(gv_path)
    assert found is not None, gv_path
    decoded: dict[str, Any] = json.loads(found.body)
    return decoded


def gvk(resource_group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": resource_group, "kind": kind, "version": version}


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method != "parameters":
                yield path, method, op


def walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def query_names(op: dict[str, Any]) -> set[str]:
    return {p["name"] for p in op.get("parameters", ()) if p["in"] == "query"}


# --- root --------------------------------------------------------------------------------------

def test_root_lists_every_group_version_with_the_hash_of_its_bytes() -> None:
    root = json.loads(DOCS.root().body)
    assert sorted(root) == ["paths"]
    assert sorted(root["paths"]) == sorted(GV_PATHS)
    for gv_path, entry in root["paths"].items():
        body = DOCS.document(gv_path).body  # type: ignore[union-attr]
        digest = hashlib.sha512(body).hexdigest().upper()
        assert entry == {"serverRelativeURL": f"/openapi/v3/{gv_path}?hash={digest}"}


def test_output_is_deterministic() -> None:
    fresh = OpenAPIDocuments(Registry())
    assert fresh.root().body == DOCS.root().body
    for gv_path in GV_PATHS:
        assert fresh.document(gv_path) == DOCS.document(gv_path)


def test_documents_are_built_once_and_shared() -> None:
    assert documents_for(REGISTRY) is DOCS
    assert DOCS.document("api/v1") is DOCS.document("api/v1")
    assert DOCS.document("apis/nope/v1") is None


def test_document_sizes_stay_bounded() -> None:
    sizes = {gv: len(DOCS.document(gv).body) for gv in GV_PATHS}  # type: ignore[union-attr]
    assert all(0 < size < MAX_DOCUMENT_BYTES for size in sizes.values()), sizes


# --- documents ---------------------------------------------------------------------------------

@pytest.mark.parametrize("gv_path", GV_PATHS)
def test_every_ref_resolves_within_the_document(gv_path: str) -> None:
    doc = document(gv_path)
    schemas = doc["components"]["schemas"]
    # (JSONSchemaProps declares a property named "$ref": its schema is no reference)
    refs = [value for key, value in walk(doc) if key == "$ref" and isinstance(value, str)]
    assert refs
    missing = {ref for ref in refs
               if not ref.startswith("#/components/schemas/")
               or ref.removeprefix("#/components/schemas/") not in schemas}
    assert not missing


@pytest.mark.parametrize("gv_path", GV_PATHS)
def test_no_descriptions_are_copied(gv_path: str) -> None:
    # a field may be named "description" (GatewayClass spec); prose would be a string value
    assert not [v for key, v in walk(document(gv_path)) if key == "description" and
                isinstance(v, str)]


@pytest.mark.parametrize("gv_path", GV_PATHS)
def test_writes_list_dry_run_field_manager_and_field_validation(gv_path: str) -> None:
    """On the operation, or on its path when every operation there lists them (kube-openapi
    ``findCommonParameters``); a ``connect`` POST (exec) is no write."""
    doc = document(gv_path)
    for path, method, op in operations(doc):
        if method in WRITE_METHODS and op["x-kubernetes-action"] != "connect":
            names = query_names(op) | query_names(doc["paths"][path])
            assert {"dryRun", "fieldManager", "fieldValidation"} <= names, (path, method)


@pytest.mark.parametrize("resource", DOCUMENTED, ids=lambda r: f"{r.api_version}/{r.kind}")
def test_every_kind_has_a_patch_operation_with_field_validation(resource: Any) -> None:
    """cli-runtime query_param_verifier_v3.go ``supportsQueryParamV3``: kubectl sends
    fieldValidation=Strict only if a PATCH operation with the kind's GVK lists it."""
    doc = document(resource.base_path.lstrip("/"))
    wanted = gvk(resource.group, resource.version, resource.kind)
    patches = [op for _, method, op in operations(doc)
               if method == "patch" and op["x-kubernetes-group-version-kind"] == wanted]
    assert patches
    assert all("fieldValidation" in query_names(op) for op in patches)


@pytest.mark.parametrize("resource", DOCUMENTED, ids=lambda r: f"{r.api_version}/{r.kind}")
def test_explain_finds_the_kind_schema(resource: Any) -> None:
    """kubectl explain/v2 plaintext.tmpl: GVK from the resource path's operations, then the
    component schema whose GVK list contains it."""
    doc = document(resource.base_path.lstrip("/"))
    path = f"{resource.base_path}/{resource.plural}"
    op_gvk = doc["paths"][path]["get"]["x-kubernetes-group-version-kind"]
    assert op_gvk == gvk(resource.group, resource.version, resource.kind)
    found = [s for s in doc["components"]["schemas"].values()
             if op_gvk in s.get("x-kubernetes-group-version-kind", ())]
    assert len(found) == 1
    assert {"apiVersion", "kind", "metadata"} <= set(found[0]["properties"])


@pytest.mark.parametrize(("gv_path", "name", "kind_gvk"), [
    ("api/v1", "io.k8s.api.core.v1.Pod", gvk("", "v1", "Pod")),
    ("apis/apps/v1", "io.k8s.api.apps.v1.Deployment", gvk("apps", "v1", "Deployment")),
    ("apis/apps/v1", "io.k8s.api.autoscaling.v1.Scale", gvk("autoscaling", "v1", "Scale")),
    ("apis/apps/v1", "io.k8s.apimachinery.pkg.apis.meta.v1.Status", gvk("", "v1", "Status")),
])
def test_kind_schemas_carry_their_gvk(gv_path: str, name: str, kind_gvk: dict[str, str]) -> None:
    schema = document(gv_path)["components"]["schemas"][name]
    assert schema["x-kubernetes-group-version-kind"] == [kind_gvk]
    assert schema["type"] == "object"


def test_meta_and_referenced_types_keep_upstream_names() -> None:
    schemas = document("apis/apps/v1")["components"]["schemas"]
    meta = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]
    assert meta["properties"]["creationTimestamp"] == {
        "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time"}
    core = document("api/v1")["components"]["schemas"]
    assert core["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] == {
        "format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}
    assert core["io.k8s.apimachinery.pkg.api.resource.Quantity"] == {
        "oneOf": [{"type": "string"}, {"type": "number"}]}


def test_patch_extensions_are_kept() -> None:
    schemas = document("apis/apps/v1")["components"]["schemas"]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    strategy = schemas["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"]
    assert strategy == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStrategy"}],
        "x-kubernetes-patch-strategy": "retainKeys"}


def test_collection_item_and_subresource_operations() -> None:
    paths = document("apis/apps/v1")["paths"]
    coll = paths["/apis/apps/v1/namespaces/{namespace}/deployments"]
    assert {m: op["x-kubernetes-action"] for m, op in coll.items() if m != "parameters"} == {
        "get": "list", "post": "post", "delete": "deletecollection"}
    assert {"watch", "labelSelector", "fieldSelector", "resourceVersion", "limit", "continue",
            "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents"} <= query_names(
        coll["get"])
    item = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    assert sorted(item) == ["delete", "get", "parameters", "patch", "put"]
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["put"]["x-kubernetes-group-version-kind"] == gvk("autoscaling", "v1", "Scale")
    assert sorted(paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]) == [
        "get", "parameters", "patch", "put"]
    assert paths["/apis/apps/v1/watch/deployments"]["get"]["x-kubernetes-action"] == "watchlist"


def test_custom_kinds_do_not_offer_strategic_merge_patch() -> None:
    gateway = "/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/gateways/{name}"
    served = build_document(gateway_registry(), "gateway.networking.k8s.io", "v1")
    schema = served["components"]["schemas"]["io.k8s.networking.gateway.v1.Gateway"]
    assert schema["x-kubernetes-group-version-kind"] == [
        gvk("gateway.networking.k8s.io", "v1", "Gateway")]
    media = served["paths"][gateway]["patch"]
    assert "application/strategic-merge-patch+json" not in media["requestBody"]["content"]
    pod = document("api/v1")["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in pod["requestBody"]["content"]


@pytest.mark.parametrize("gv_path", GV_PATHS)
def test_every_documented_path_is_routed(gv_path: str) -> None:
    for path in document(gv_path)["paths"]:
        concrete = path.replace("{namespace}", "ns").replace("{name}", "x")
        assert isinstance(parse_route(REGISTRY, concrete), Route), path


def test_encode_document_hashes_the_bytes() -> None:
    encoded = encode_document({"b": 1, "a": [2]})
    assert encoded.body == b'{"a":[2],"b":1}'
    assert encoded.hash == hashlib.sha512(encoded.body).hexdigest().upper()


def test_encode_document_escapes_as_gos_json_marshal() -> None:
    """handler3 encodes a group-version's document with encoding/json's Marshal: "<", ">",
    "&" and U+2028/U+2029 escaped, other text as it is; the hash is over those bytes."""
    encoded = encode_document({"d": "<a> && b\u2028é"})
    assert encoded.body == '{"d":"\\u003ca\\u003e \\u0026\\u0026 b\\u2028é"}'.encode()
    assert encoded.hash == hashlib.sha512(encoded.body).hexdigest().upper()
    served = documents_for(gateway_registry()).document("apis/gateway.networking.k8s.io/v1")
    assert served is not None and b"<" not in served.body and b"\\u003c" in served.body


def test_build_document_shape() -> None:
    doc = build_document(REGISTRY, "coordination.k8s.io", "v1")
    assert doc["openapi"] == "3.0.0"
    assert doc["info"] == {"title": "Kubernetes", "version": "v1.32.0"}
    assert "io.k8s.api.coordination.v1.Lease" in doc["components"]["schemas"]


# --- HTTP --------------------------------------------------------------------------------------

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)


def answer(path: str, query: dict[str, list[str]] | None = None,
           headers: dict[str, str] | None = None) -> Any:
    return openapi_response(REGISTRY, path, query or {}, headers, now=NOW)


def test_root_response() -> None:
    status, body, content_type, headers = answer("/openapi/v3")
    assert (status, content_type) == (200, "application/json")
    assert body == DOCS.root().body
    assert headers == [("Etag", f'"{DOCS.root().hash}"')]
    assert answer("/openapi/v3", headers={"if-none-match": f'"{DOCS.root().hash}"'})[0] == 304


def test_group_version_response_with_matching_hash_is_immutable() -> None:
    doc = DOCS.document("apis/apps/v1")
    assert doc is not None
    status, body, content_type, headers = answer("/openapi/v3/apis/apps/v1", {"hash": [doc.hash]})
    assert (status, body, content_type) == (200, doc.body, "application/json")
    assert headers == [("Vary", "Accept"), ("Cache-Control", "public, immutable"),
                       ("Expires", "Wed, 04 Mar 2026 05:06:07 UTC"), ("Etag", f'"{doc.hash}"')]


def test_group_version_response_without_hash_is_not_cached_forever() -> None:
    status, _, _, headers = answer("/openapi/v3/api/v1")
    assert status == 200
    assert not any(name == "Cache-Control" for name, _ in headers)


def test_stale_hash_redirects_to_the_current_url() -> None:
    doc = DOCS.document("api/v1")
    assert doc is not None
    status, body, content_type, headers = answer("/openapi/v3/api/v1", {"hash": ["ABC"]})
    url = f"/openapi/v3/api/v1?hash={doc.hash}"
    assert (status, content_type) == (301, "text/html; charset=utf-8")
    assert ("Location", url) in headers
    assert body == f'<a href="{url}">Moved Permanently</a>.\n\n'.encode()


def test_if_none_match_gives_not_modified() -> None:
    doc = DOCS.document("api/v1")
    assert doc is not None
    status, body, _, headers = answer("/openapi/v3/api/v1",
                                      headers={"if-none-match": f'W/"x", "{doc.hash}"'})
    assert (status, body) == (304, b"")
    assert ("Etag", f'"{doc.hash}"') in headers


@pytest.mark.parametrize(("accept", "status"), [
    ("application/json", 200), ("application/json, */*", 200), ("*/*", 200), ("", 200),
    ("application/com.github.proto-openapi.spec.v3.v1.0+protobuf", 406),
    ("application/json;q=0, application/yaml", 406),
])
def test_accept_negotiation(accept: str, status: int) -> None:
    assert answer("/openapi/v3/api/v1", headers={"accept": accept})[0] == status


@pytest.mark.parametrize("path", ["/openapi/v2/", "/openapi/v3/apis/nope/v1", "/openapi/v3/",
                                  "/openapi/v3/api/v1/"])
def test_unknown_openapi_paths_are_not_found(path: str) -> None:
    status, body, content_type, headers = answer(path)
    assert (status, content_type, headers) == (404, "application/json", [])
    assert json.loads(body) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource", "reason": "NotFound",
        "details": {}, "code": 404}


@pytest.mark.parametrize("path", ["/api/v1/pods", "/openapi", "/version", "/openapiv3"])
def test_other_paths_are_not_answered(path: str) -> None:
    assert answer(path) is None


def test_expires_on_leap_day_normalizes_like_go() -> None:
    leap = datetime(2024, 2, 29, 0, 0, 0, tzinfo=UTC)
    doc = DOCS.document("api/v1")
    assert doc is not None
    _, _, _, headers = openapi_response(REGISTRY, "/openapi/v3/api/v1",  # type: ignore[misc]
                                        {"hash": [doc.hash]}, now=leap)
    assert ("Expires", "Sat, 01 Mar 2025 00:00:00 UTC") in headers
