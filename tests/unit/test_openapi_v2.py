"""``/openapi/v2`` (server/discovery/openapi_v2.py and openapi_v2_proto.py): the Swagger 2.0
document, its gnostic protobuf form read back with an independent wire reader, and the HTTP
answers of kube-openapi's handler."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubewire.go_json_bytes import go_escaped
from kubewire.resources import REGISTRY
from kubewire.schema.openapi_operations import valid_operation_id
from kubewire.server.discovery.openapi_v2 import (
    PROTOBUF_MEDIA_TYPE,
    build_swagger,
    openapi_v2_response,
    parse_accept,
    swagger_for,
)
from kubewire.server.discovery.openapi_v2_proto import varint, yaml_text
from kubewire.server.request.routes import Route, parse_route
from tests.gateway_api import gateway_registry
from tests.gnostic_wire import Doc, fields, one, text

SWAGGER = swagger_for(REGISTRY)
DOC: dict[str, Any] = json.loads(SWAGGER.json.plain)
KUBECTL_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
MAX_DOCUMENT_BYTES = 1024 * 1024  # ~330 KB today; upstream's full document is ~3.3 MB
SWAGGER2_SCHEMA_KEYS = {
    "$ref", "additionalProperties", "allOf", "default", "description", "discriminator", "enum",
    "example", "exclusiveMaximum", "exclusiveMinimum", "externalDocs", "format", "items",
    "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
    "minProperties", "minimum", "multipleOf", "pattern", "properties", "readOnly", "required",
    "title", "type", "uniqueItems", "xml"}
POD = "io.k8s.api.core.v1.Pod"


def schemas(value: Any) -> Iterator[dict[str, Any]]:
    """Every schema node under a definition (properties, items, additionalProperties)."""
    yield value
    for prop in value.get("properties", {}).values():
        yield from schemas(prop)
    for key in ("items", "additionalProperties"):
        if isinstance(value.get(key), dict):
            yield from schemas(value[key])


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            yield value["$ref"]
        for item in value.values():
            yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


# --- the document ------------------------------------------------------------------------------

def test_top_level_shape_and_order_are_kube_openapi_s() -> None:
    assert list(DOC) == ["swagger", "info", "paths", "definitions", "securityDefinitions",
                         "security"]
    assert DOC["swagger"] == "2.0"
    assert DOC["info"] == {"title": "Kubernetes", "version": "v1.32.0"}
    assert DOC["security"] == [{"BearerToken": []}]
    assert DOC["securityDefinitions"]["BearerToken"]["type"] == "apiKey"


def test_json_bytes_are_marshal_output_and_the_etag_is_their_sha512() -> None:
    body = SWAGGER.json.plain
    assert not body.endswith(b"\n")  # DeterministicMarshal, not json.Encoder
    assert SWAGGER.etag == hashlib.sha512(body).hexdigest().upper()
    assert len(body) < MAX_DOCUMENT_BYTES
    assert json.dumps(build_swagger(REGISTRY), separators=(",", ":")).encode() == body
    # json.Marshal's HTML escapes, which handler.go's output and so its ETag have: the
    # Gateway API's descriptions hold "<" and "&"
    served = swagger_for(gateway_registry()).json.plain
    plain = json.dumps(json.loads(served), separators=(",", ":")).encode()
    assert b"<" in plain and b"&" in plain
    assert go_escaped(plain) == served and b"<" not in served and b"\\u003c" in served


# operationId, x-kubernetes-action per (path, method), from kube-apiserver v1.32's swagger.json
KUBE_OPERATIONS = [
    ("/api/v1/namespaces/{namespace}/pods", "get", "listCoreV1NamespacedPod", "list"),
    ("/api/v1/namespaces/{namespace}/pods", "post", "createCoreV1NamespacedPod", "post"),
    ("/api/v1/namespaces/{namespace}/pods", "delete", "deleteCoreV1CollectionNamespacedPod",
     "deletecollection"),
    ("/api/v1/namespaces/{namespace}/pods/{name}", "get", "readCoreV1NamespacedPod", "get"),
    ("/api/v1/namespaces/{namespace}/pods/{name}", "put", "replaceCoreV1NamespacedPod", "put"),
    ("/api/v1/namespaces/{namespace}/pods/{name}", "patch", "patchCoreV1NamespacedPod", "patch"),
    ("/api/v1/namespaces/{namespace}/pods/{name}", "delete", "deleteCoreV1NamespacedPod",
     "delete"),
    ("/api/v1/namespaces/{namespace}/pods/{name}/status", "patch",
     "patchCoreV1NamespacedPodStatus", "patch"),
    ("/api/v1/pods", "get", "listCoreV1PodForAllNamespaces", "list"),
    ("/api/v1/watch/pods", "get", "watchCoreV1PodListForAllNamespaces", "watchlist"),
    ("/api/v1/watch/namespaces/{namespace}/pods", "get", "watchCoreV1NamespacedPodList",
     "watchlist"),
    ("/api/v1/watch/namespaces/{namespace}/pods/{name}", "get", "watchCoreV1NamespacedPod",
     "watch"),
    ("/api/v1/nodes/{name}/status", "put", "replaceCoreV1NodeStatus", "put"),
    ("/api/v1/watch/nodes", "get", "watchCoreV1NodeList", "watchlist"),
    ("/api/v1/namespaces/{name}/finalize", "put", "replaceCoreV1NamespaceFinalize", "put"),
    ("/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale", "put",
     "replaceAppsV1NamespacedDeploymentScale", "put"),
    ("/apis/networking.k8s.io/v1/watch/ingresses", "get",
     "watchNetworkingV1IngressListForAllNamespaces", "watchlist"),
    ("/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", "get",
     "listDiscoveryV1NamespacedEndpointSlice", "list"),
]


@pytest.mark.parametrize(("path", "method", "operation_id", "action"), KUBE_OPERATIONS)
def test_operations_are_named_as_kube_names_them(path: str, method: str, operation_id: str,
                                                 action: str) -> None:
    op = DOC["paths"][path][method]
    assert (op["operationId"], op["x-kubernetes-action"]) == (operation_id, action)
    assert op["schemes"] == ["https"]
    assert op["responses"]["401"] == {"description": "Unauthorized"}


def test_tags_and_gvks() -> None:
    paths = DOC["paths"]
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["put"]
    assert scale["tags"] == ["apps_v1"]
    assert scale["x-kubernetes-group-version-kind"] == {
        "group": "autoscaling", "kind": "Scale", "version": "v1"}
    # the Gateway API kinds, as their pre-installed CRDs document them
    served = swagger_for(gateway_registry())
    gateway_paths = json.loads(served.json.plain)["paths"]
    route = gateway_paths[
        "/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/httproutes"]["get"]
    assert route["tags"] == ["gatewayNetworking_v1"]
    assert route["x-kubernetes-group-version-kind"] == {
        "group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "version": "v1"}


def test_parameters_sit_where_kube_puts_them() -> None:
    paths = DOC["paths"]
    item = paths["/api/v1/namespaces/{namespace}/pods/{name}"]
    assert [(p["in"], p["name"]) for p in item["parameters"]] == [
        ("path", "name"), ("path", "namespace"), ("query", "pretty")]
    assert "parameters" not in item["get"]
    assert [(p["in"], p["name"]) for p in item["patch"]["parameters"]] == [
        ("body", "body"), ("query", "dryRun"), ("query", "fieldManager"),
        ("query", "fieldValidation"), ("query", "force")]
    watch = paths["/api/v1/watch/namespaces/{namespace}/pods"]
    assert "parameters" not in watch["get"]
    assert {p["name"] for p in watch["parameters"]} >= {"watch", "namespace", "labelSelector"}
    body = item["put"]["parameters"][0]
    assert body == {"in": "body", "name": "body", "required": True,
                    "schema": {"$ref": f"#/definitions/{POD}"}}


def test_every_documented_path_is_routed() -> None:
    for path in DOC["paths"]:
        concrete = path.replace("{namespace}", "ns").replace("{name}", "x")
        assert isinstance(parse_route(REGISTRY, concrete), Route), path


def test_definitions_keep_upstream_names_gvks_and_merge_facts() -> None:
    defs = DOC["definitions"]
    assert defs[POD]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}]
    containers = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers == {
        "items": {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}, "type": "array",
        "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}
    assert defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] == {
        "format": "int-or-string", "type": "string"}
    assert defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] == {"type": "string"}
    assert "io.k8s.networking.gateway.v1.Gateway" not in defs  # served from a CRD, if at all


def test_the_gateway_api_crds_operations_are_named_as_kube_names_them() -> None:
    served = json.loads(swagger_for(gateway_registry()).json.plain)
    item = served["paths"]["/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/"
                           "httproutes/{name}"]
    assert (item["get"]["operationId"], item["get"]["x-kubernetes-action"]) == (
        "readGatewayNetworkingV1NamespacedHTTPRoute", "get")
    assert "io.k8s.networking.gateway.v1.Gateway" in served["definitions"]
    assert "io.k8s.networking.gateway.v1beta1.ReferenceGrant" in served["definitions"]


def test_schemas_are_swagger_2_that_gnostic_and_kubectl_accept() -> None:
    """gnostic refuses unknown schema keys; kube-openapi's proto models refuse a ``$ref`` with a
    type or properties beside it, and arrays without one ``items``. No defaults (kube's v2
    has none) and no descriptions copied."""
    for name, definition in DOC["definitions"].items():
        for node in schemas(definition):
            assert all(k in SWAGGER2_SCHEMA_KEYS or k.startswith("x-") for k in node), name
            assert "default" not in node and "description" not in node, name
            if "$ref" in node:
                assert not {"type", "properties"} & set(node), name
            if node.get("type") == "array":
                assert isinstance(node.get("items"), dict), name


def test_every_ref_resolves() -> None:
    names = set(DOC["definitions"])
    for ref in refs(DOC):
        assert ref.removeprefix("#/definitions/") in names, ref


# --- protobuf ----------------------------------------------------------------------------------

PROTO = Doc(SWAGGER.protobuf.plain)


def test_protobuf_document_holds_what_the_json_holds_in_the_same_order() -> None:
    assert (PROTO.swagger, PROTO.title, PROTO.version) == ("2.0", "Kubernetes", "v1.32.0")
    assert list(PROTO.paths) == list(DOC["paths"])
    assert list(PROTO.definitions) == list(DOC["definitions"])


@pytest.mark.parametrize(("path", "method", "operation_id", "action"), KUBE_OPERATIONS)
def test_protobuf_operations(path: str, method: str, operation_id: str, action: str) -> None:
    op = PROTO.operation(path, method)
    assert Doc.operation_id(op) == operation_id
    assert Doc.operation_extensions(op)["x-kubernetes-action"] == action
    expected = [p["name"] for p in DOC["paths"][path][method].get("parameters", ())
                if p["in"] == "query"]
    assert Doc.query_parameter_names(op) == expected


def test_protobuf_patch_lists_field_validation_for_every_kind() -> None:
    """cli-runtime ``supportsQueryParam``: the patch operation with the kind's GVK extension
    lists a ``fieldValidation`` query parameter."""
    patches = [PROTO.operation(path, "patch") for path, item in PROTO.paths.items()
               if any(number == Doc.PATH_METHODS["patch"] for number, _, _ in fields(item))]
    for resource in REGISTRY.stored():  # a create-only kind has no patch
        want = {"group": resource.group, "kind": resource.kind, "version": resource.version}
        found = [op for op in patches
                 if Doc.operation_extensions(op).get("x-kubernetes-group-version-kind") == want]
        assert found, resource.kind
        assert "fieldValidation" in Doc.query_parameter_names(found[0])


def test_protobuf_definitions_carry_gvk_and_merge_facts_as_yaml() -> None:
    pod = PROTO.definitions[POD]
    assert Doc.schema_extensions(pod)["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Pod", "version": "v1"}]
    spec = PROTO.definitions["io.k8s.api.core.v1.PodSpec"]
    containers = Doc.properties(spec)["containers"]
    assert Doc.schema_extensions(containers) == {
        "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}
    assert text(one(containers, 22), 1) == "array"  # TypeItem
    item = one(one(containers, 23), 1)  # ItemsItem.schema[0]
    assert text(item, 1) == "#/definitions/io.k8s.api.core.v1.Container"
    assert Doc.properties(PROTO.definitions["io.k8s.api.core.v1.Container"])["name"]
    assert one(PROTO.definitions["io.k8s.api.core.v1.Container"], 19) == b"name"  # required


@pytest.mark.parametrize("value", [
    "merge", "", "retainKeys,merge", "true", "1", "2.5", "null", "a: b", "- x", "#x", " x",
    "ünïcode", "line\nbreak", 0, 7, True, None, [], {}, ["name"], ["a", "b"],
    [{"group": "", "kind": "Pod", "version": "v1"}], {"group": "apps", "kind": "Scale"},
    {"a": {"b": ["c", {"d": "e"}]}, "f": []},
])
def test_yaml_text_reads_back_as_the_value(value: Any) -> None:
    assert yaml.safe_load(yaml_text(value)) == value


def test_yaml_text_is_yaml_v3_block_style() -> None:
    assert yaml_text("merge") == "merge\n"
    assert yaml_text("") == '""\n'
    assert yaml_text(["name"]) == "- name\n"
    assert yaml_text([{"group": "", "kind": "Pod", "version": "v1"}]) == (
        '- group: ""\n  kind: Pod\n  version: v1\n')
    assert yaml_text({"a": ["b"]}) == "a:\n    - b\n"


@pytest.mark.parametrize(("value", "encoded"), [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (-1, b"\xff" * 9 + b"\x01")])
def test_varint(value: int, encoded: bytes) -> None:
    assert varint(value) == encoded


# --- HTTP --------------------------------------------------------------------------------------

def answer(headers: dict[str, str] | None = None, path: str = "/openapi/v2") -> Any:
    return openapi_v2_response(REGISTRY, path, headers or {})


@pytest.mark.parametrize(("accept", "status", "content_type"), [
    ("", 200, "application/json"),
    ("*/*", 200, "application/json"),
    ("application/*", 200, "application/json"),
    ("application/json", 200, "application/json"),
    (KUBECTL_ACCEPT, 200, PROTOBUF_MEDIA_TYPE),
    (PROTOBUF_MEDIA_TYPE, 200, PROTOBUF_MEDIA_TYPE),
    (f"{KUBECTL_ACCEPT}, application/json", 200, PROTOBUF_MEDIA_TYPE),
    (f"application/json;q=0.5, {KUBECTL_ACCEPT}", 200, PROTOBUF_MEDIA_TYPE),
    (f"*/*, {KUBECTL_ACCEPT}", 200, PROTOBUF_MEDIA_TYPE),  # specific before */*
    ("application/json;q=0", 200, "application/json"),  # kube-openapi ignores q=0
    ("text/html", 406, "text/plain; charset=utf-8"),
    ("application/yaml", 406, "text/plain; charset=utf-8"),
    ("Application/JSON", 406, "text/plain; charset=utf-8"),  # goautoneg is case-sensitive
    ("application", 406, "text/plain; charset=utf-8"),
])
def test_accept_negotiation(accept: str, status: int, content_type: str) -> None:
    got = answer({"accept": accept} if accept else {})
    assert (got.status, got.content_type) == (status, content_type)
    assert got.headers[:2] == [("Vary", "Accept-Encoding"), ("Vary", "Accept")]
    if status == 406:
        assert got.body == b""


def test_json_and_protobuf_answers_share_the_etag() -> None:
    etag = f'"{SWAGGER.etag}"'
    as_json, as_proto = answer({"accept": "application/json"}), answer({"accept": KUBECTL_ACCEPT})
    assert as_json.body == SWAGGER.json.plain and as_proto.body == SWAGGER.protobuf.plain
    for got in (as_json, as_proto):
        headers = dict(got.headers)
        assert headers["Etag"] == etag
        assert headers["Accept-Ranges"] == "bytes"
        assert headers["Last-Modified"].endswith(" GMT")
        assert "Cache-Control" not in headers and "Expires" not in headers


@pytest.mark.parametrize("if_none_match", ["{etag}", 'W/"x", {etag}', "W/{etag}", "*"])
def test_if_none_match_gives_not_modified(if_none_match: str) -> None:
    value = if_none_match.format(etag=f'"{SWAGGER.etag}"')
    got = answer({"accept": KUBECTL_ACCEPT, "if-none-match": value})
    assert (got.status, got.body) == (304, b"")
    assert got.headers == [("Vary", "Accept-Encoding"), ("Vary", "Accept"),
                           ("Etag", f'"{SWAGGER.etag}"')]


def test_a_stale_etag_gives_the_document() -> None:
    assert answer({"if-none-match": '"ABC"'}).status == 200


def test_if_modified_since() -> None:
    last = dict(answer().headers)["Last-Modified"]
    assert answer({"if-modified-since": last}).status == 304
    assert answer({"if-modified-since": "Mon, 01 Jan 2001 00:00:00 GMT"}).status == 200
    assert answer({"if-modified-since": "garbage"}).status == 200
    # If-None-Match wins over If-Modified-Since (Go's checkPreconditions)
    assert answer({"if-modified-since": last, "if-none-match": '"ABC"'}).status == 200


@pytest.mark.parametrize(("accept_encoding", "gzipped"), [
    ("gzip", True), ("deflate, gzip;q=0.5", True), ("GZIP", True), ("gzip;q=0", False),
    ("", False), ("br", False), ("gzip;q=0, gzip", True), ("gzip;q=x", False)])
def test_gzip_as_gziphandler(accept_encoding: str, gzipped: bool) -> None:
    for accept in ("application/json", KUBECTL_ACCEPT):
        got = answer({"accept": accept, "accept-encoding": accept_encoding})
        plain = answer({"accept": accept}).body
        assert (("Content-Encoding", "gzip") in got.headers) is gzipped
        assert (gzip.decompress(got.body) if gzipped else got.body) == plain


@pytest.mark.parametrize("path", ["/openapi/v2/", "/openapi/v3", "/openapi", "/api/v1"])
def test_other_paths_are_not_answered(path: str) -> None:
    assert answer(path=path) is None


def test_parse_accept_orders_like_goautoneg() -> None:
    clauses = parse_accept("*/*;q=0.8, text/*, application/json;q=0.9, a/b")
    # Go's insertion sort with goautoneg's Less (not a strict order: json q=0.9 passes text/*)
    assert [(c.type, c.subtype) for c in clauses] == [
        ("a", "b"), ("application", "json"), ("text", "*"), ("*", "*")]


@pytest.mark.parametrize(("text_", "want"), [
    ("core", "Core"), ("v1", "V1"), ("gateway.networking", "GatewayNetworking"),
    ("collectionNamespacedPod", "CollectionNamespacedPod"), ("2fast", "Fast")])
def test_valid_operation_id(text_: str, want: str) -> None:
    assert valid_operation_id(text_, True) == want
