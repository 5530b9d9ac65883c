"""OpenAPI v3 and v2 documents built from a CRD (server/apiextensions/crd/openapi_docs.py), as
apiextensions-apiserver v1.32's builder.go builds them, and their place in ``/openapi/v3`` and
``/openapi/v2`` (server/discovery).

The Gateway API CRDs a server pre-installs are served through it (their documents are the
builder's, with kube's operation names). A hand-written CRD covers status and scale, cluster
scope and every schema rewrite.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from kubewire.resources import REGISTRY, Registry, Resource
from kubewire.schema.openapi_operations import component_schemas
from kubewire.schema.swagger_operations import definitions
from kubewire.server.apiextensions.crd.gateway_crds import gateway_crds
from kubewire.server.apiextensions.crd.openapi_docs import (
    openapi_v2_paths_and_definitions,
    openapi_v3_paths_and_schemas,
)
from kubewire.server.discovery.openapi import build_document, openapi_response
from kubewire.server.discovery.openapi_v2 import build_swagger, swagger_for
from tests.gateway_api import gateway_registry
from tests.gnostic_wire import Doc

GROUP = "gateway.networking.k8s.io"
BASE = f"/apis/{GROUP}/v1"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
V3_REF = "#/components/schemas/"
V2_REF = "#/definitions/"
CR_MEDIA = ["application/json", "application/yaml"]
PATCH_MEDIA = ["application/apply-patch+yaml", "application/json-patch+json",
               "application/merge-patch+json"]
LIST_PARAMS = ["allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit",
               "resourceVersion", "resourceVersionMatch", "sendInitialEvents",
               "timeoutSeconds", "watch"]
METHODS = ("get", "put", "post", "patch", "delete")


def _crd(kind: str) -> dict[str, Any]:
    return next(c for c in gateway_crds() if c["spec"]["names"]["kind"] == kind)  # type: ignore


def _ops(item: Mapping[str, Any]) -> dict[str, Any]:
    return {m: op for m, op in item.items() if m in METHODS}


def _names(params: list[Any] | None) -> list[str]:
    return [p["name"] for p in params or ()]


# --- the Gateway API, as the pre-installed CRDs serve it ----------------------------------------

def test_the_gateway_api_documents_are_the_crds() -> None:
    """A started server serves ``gateway.networking.k8s.io`` from its pre-installed CRDs: the
    group-version's documents are the CRD builder's, with kube's operation names."""
    registry = gateway_registry()
    v3_paths: dict[str, Any] = {}
    v3_schemas: dict[str, Any] = {}
    for crd in gateway_crds():
        if any(v["name"] == "v1" for v in crd["spec"]["versions"]):  # type: ignore[index]
            paths, schemas = openapi_v3_paths_and_schemas(crd, "v1")
            v3_paths.update(paths)
            v3_schemas.update(schemas)
    served = build_document(registry, GROUP, "v1")
    assert served["paths"] == v3_paths and served["components"]["schemas"] == v3_schemas
    ops = {(path, method): op["operationId"] for path, item in served["paths"].items()
           for method, op in _ops(item).items()}
    assert ops[(f"{BASE}/namespaces/{{namespace}}/gateways", "get")] == \
        "listGatewayNetworkingV1NamespacedGateway"
    assert ops[(f"{BASE}/namespaces/{{namespace}}/httproutes/{{name}}/status", "patch")] == \
        "patchGatewayNetworkingV1NamespacedHTTPRouteStatus"
    assert ops[(f"{BASE}/gatewayclasses/{{name}}", "put")] == \
        "replaceGatewayNetworkingV1GatewayClass"
    assert ops[(f"{BASE}/grpcroutes", "get")] == \
        "listGatewayNetworkingV1GRPCRouteForAllNamespaces"
    swagger = build_swagger(registry)
    for crd in gateway_crds():
        for version in crd["spec"]["versions"]:  # type: ignore[index]
            if version["served"]:
                paths, defs = openapi_v2_paths_and_definitions(crd, version["name"])
                assert {p: swagger["paths"][p] for p in paths} == paths
                assert {d: swagger["definitions"][d] for d in defs} == defs
    spec = v3_schemas["io.k8s.networking.gateway.v1.Gateway"]["properties"]["spec"]
    assert spec["description"].startswith("Spec defines the desired state of")
    assert "x-kubernetes-validations" in json.dumps(spec)  # the CRD's own rules, published


def test_junctors_are_v3_only() -> None:
    _, schemas = openapi_v3_paths_and_schemas(_crd("Gateway"), "v1")
    _, defs = openapi_v2_paths_and_definitions(_crd("Gateway"), "v1")
    address = ("properties", "spec", "properties", "addresses", "items")
    v3_node, v2_node = schemas["io.k8s.networking.gateway.v1.Gateway"], \
        defs["io.k8s.networking.gateway.v1.Gateway"]
    for key in address:
        v3_node, v2_node = v3_node[key], v2_node[key]
    upstream = _crd("Gateway")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for key in address:
        upstream = upstream[key]
    assert v3_node["oneOf"] == upstream["oneOf"]
    assert "oneOf" not in v2_node


def test_defaults_are_v3_only() -> None:
    _, schemas = openapi_v3_paths_and_schemas(_crd("Gateway"), "v1")
    _, defs = openapi_v2_paths_and_definitions(_crd("Gateway"), "v1")
    assert '"default"' in json.dumps(schemas["io.k8s.networking.gateway.v1.Gateway"])
    assert '"default"' not in json.dumps(defs["io.k8s.networking.gateway.v1.Gateway"])


def test_every_served_version_of_the_standard_channel() -> None:
    for crd in gateway_crds():
        kind = crd["spec"]["names"]["kind"]  # type: ignore[index]
        for version in crd["spec"]["versions"]:  # type: ignore[index]
            name = f"io.k8s.networking.gateway.{version['name']}.{kind}"
            paths, schemas = openapi_v3_paths_and_schemas(crd, version["name"])
            _, defs = openapi_v2_paths_and_definitions(crd, version["name"])
            assert schemas[name]["x-kubernetes-group-version-kind"] == [
                {"group": GROUP, "kind": kind, "version": version["name"]}]
            assert defs[name + "List"]["properties"]["items"]["items"] == {
                "$ref": V2_REF + name}
            status = any(p.endswith("/status") for p in paths)
            assert status == ("status" in version.get("subresources", {})), name


# --- a hand-written CRD: status, scale, and every schema rewrite ---------------------------------

WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string", "description": "replaced by TypeMeta's"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string",
                                                               "maxLength": 20}}},
        "spec": {
            "type": "object", "required": ["color", "note"],
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= 5", "message": "", "reason": "FieldValueForbidden"}],
            "properties": {
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red",
                          "description": "The colour."},
                "size": {"x-kubernetes-int-or-string": True},
                "port": {"x-kubernetes-int-or-string": True,
                         "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "note": {"type": "string", "nullable": True},
                "replicas": {"type": "integer", "format": "int32", "minimum": 0,
                             "maximum": 10.0, "exclusiveMinimum": False},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "x-kubernetes-preserve-unknown-fields": True},
                "pod": {"type": "object", "x-kubernetes-embedded-resource": True,
                        "required": ["spec"], "properties": {"spec": {"type": "object"}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                          "properties": {"a": {"type": "string"}}},
                "tags": {"type": "array", "items": {"type": "string"},
                         "x-kubernetes-list-type": "set", "uniqueItems": False,
                         "example": ["x"]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    }}
WIDGETS: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "listKind": "WidgetList"},
        "versions": [
            {"name": "v1beta1", "served": True, "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}},
            {"name": "v1", "served": True, "storage": True,
             "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                      "statusReplicasPath": ".status.replicas"}},
             "selectableFields": [{"jsonPath": ".spec.color"}],
             "schema": {"openAPIV3Schema": WIDGET_SCHEMA}}]}}
GVK = [{"group": "example.com", "kind": "Widget", "version": "v1"}]
SELECTABLE = [{"fieldPath": "spec.color"}]
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def _type_meta(ref: str) -> dict[str, Any]:
    return {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"$ref": ref + META + "ObjectMeta"}}


def test_v3_schema_of_a_crd() -> None:
    _, schemas = openapi_v3_paths_and_schemas(WIDGETS, "v1")
    embedded = {"x-kubernetes-embedded-resource": True, "type": "object"}
    assert schemas["com.example.v1.Widget"] == {
        "type": "object", "x-kubernetes-group-version-kind": GVK,
        "x-kubernetes-selectable-fields": SELECTABLE,
        "properties": {
            **_type_meta(V3_REF),
            "spec": {
                "type": "object", "required": ["color", "note"],
                "x-kubernetes-validations": [{"rule": "self.replicas <= 5",
                                              "reason": "FieldValueForbidden"}],
                "properties": {
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red",
                              "description": "The colour."},
                    "size": {"x-kubernetes-int-or-string": True, "anyOf": INT_OR_STRING},
                    "port": {"x-kubernetes-int-or-string": True, "anyOf": INT_OR_STRING},
                    "note": {"type": "string", "nullable": True},
                    "replicas": {"type": "integer", "format": "int32", "minimum": 0,
                                 "maximum": 10},
                    "template": {**embedded, "x-kubernetes-preserve-unknown-fields": True,
                                 "properties": _type_meta(V3_REF),
                                 "required": ["kind", "apiVersion"]},
                    "pod": {**embedded, "required": ["spec", "kind", "apiVersion"],
                            "properties": {"spec": {"type": "object"}, **_type_meta(V3_REF)}},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                              "properties": {"a": {"type": "string"}}},
                    "tags": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-list-type": "set"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                }},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }}
    assert schemas["com.example.v1.WidgetList"] == {
        "type": "object", "required": ["items"],
        "x-kubernetes-group-version-kind": [{**GVK[0], "kind": "WidgetList"}],
        "x-kubernetes-selectable-fields": SELECTABLE,
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "items": {"type": "array",
                                 "items": {"$ref": V3_REF + "com.example.v1.Widget"}},
                       "metadata": {"$ref": V3_REF + META + "ListMeta"}}}
    assert WIDGETS["spec"]["versions"][1]["schema"]["openAPIV3Schema"] is WIDGET_SCHEMA
    assert "anyOf" not in WIDGET_SCHEMA["properties"]["spec"]["properties"]["size"]  # unchanged
    assert sorted(schemas) == sorted([
        "com.example.v1.Widget", "com.example.v1.WidgetList",
        "io.k8s.api.autoscaling.v1.Scale", "io.k8s.api.autoscaling.v1.ScaleSpec",
        "io.k8s.api.autoscaling.v1.ScaleStatus",
        *(META + t for t in ("DeleteOptions", "FieldsV1", "ListMeta", "ManagedFieldsEntry",
                             "ObjectMeta", "OwnerReference", "Patch", "Preconditions", "Status",
                             "StatusCause", "StatusDetails", "Time"))])
    assert schemas["io.k8s.api.autoscaling.v1.Scale"] == component_schemas(
        ["io.k8s.api.autoscaling.v1.Scale"])["io.k8s.api.autoscaling.v1.Scale"]


def test_v2_schema_of_a_crd() -> None:
    _, defs = openapi_v2_paths_and_definitions(WIDGETS, "v1")
    assert defs["com.example.v1.Widget"] == {
        "type": "object", "x-kubernetes-group-version-kind": GVK,
        "x-kubernetes-selectable-fields": SELECTABLE,
        "properties": {
            **_type_meta(V2_REF),
            "spec": {
                "type": "object", "required": ["color"],  # nullable "note" leaves required
                "x-kubernetes-validations": [{"reason": "FieldValueForbidden",
                                              "rule": "self.replicas <= 5"}],
                "properties": {
                    "color": {"type": "string", "enum": ["red", "blue"],  # default pruned
                              "description": "The colour."},
                    "size": {"x-kubernetes-int-or-string": True},  # no anyOf in v2
                    "port": {"x-kubernetes-int-or-string": True},
                    "note": {},  # nullable: no type
                    "replicas": {"type": "integer", "format": "int32", "minimum": 0,
                                 "maximum": 10},
                    # preserve-unknown-fields: no type object, properties, nor TypeMeta
                    "template": {"x-kubernetes-embedded-resource": True,
                                 "x-kubernetes-preserve-unknown-fields": True},
                    "pod": {"type": "object", "x-kubernetes-embedded-resource": True,
                            "required": ["spec", "kind", "apiVersion"],
                            "properties": {**_type_meta(V2_REF), "spec": {"type": "object"}}},
                    "extra": {"x-kubernetes-preserve-unknown-fields": True},
                    "tags": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-list-type": "set"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                }},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }}
    assert list(defs["com.example.v1.Widget"]) == sorted(defs["com.example.v1.Widget"])
    assert defs["io.k8s.api.autoscaling.v1.Scale"] == definitions(
        ["io.k8s.api.autoscaling.v1.Scale"])["io.k8s.api.autoscaling.v1.Scale"]


def test_a_root_that_preserves_unknown_fields() -> None:
    _, schemas = openapi_v3_paths_and_schemas(WIDGETS, "v1beta1")
    _, defs = openapi_v2_paths_and_definitions(WIDGETS, "v1beta1")
    gvk = [{**GVK[0], "version": "v1beta1"}]
    assert schemas["com.example.v1beta1.Widget"] == {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "properties": _type_meta(V3_REF), "x-kubernetes-group-version-kind": gvk,
        "x-kubernetes-selectable-fields": []}
    assert defs["com.example.v1beta1.Widget"] == {
        "type": "object", "x-kubernetes-group-version-kind": gvk,
        "x-kubernetes-selectable-fields": []}


def _summary(paths: Mapping[str, Any], ref: str) -> dict[str, Any]:
    """path -> (path parameters, {method: (operationId, action, kind, query parameters,
    body type, {code: answer type})})."""
    out: dict[str, Any] = {}
    for path, item in paths.items():
        ops: dict[str, Any] = {}
        for method, op in _ops(item).items():
            params = op.get("parameters", ())
            body = next(iter(op.get("requestBody", {}).get("content", {}).values()), None)
            body = body or next((p for p in params if p["in"] == "body"), None)
            answers = {}
            for code, answer in op["responses"].items():
                schema = answer.get("schema") or next(iter(answer.get("content", {}).values()),
                                                      {}).get("schema")
                answers[code] = schema["$ref"].rsplit(".", 1)[1] if schema else None
            ops[method] = (op["operationId"], op["x-kubernetes-action"],
                           op["x-kubernetes-group-version-kind"]["kind"],
                           [p["name"] for p in params if p["in"] == "query"],
                           body["schema"]["$ref"].removeprefix(ref).rsplit(".", 1)[1]
                           if body else None, answers)
        out[path] = (_names(item["parameters"]), ops)
    return out


WRITE = ["dryRun", "fieldManager", "fieldValidation"]
PATCH = [*WRITE, "force"]
DELETE = ["dryRun", "gracePeriodSeconds", "orphanDependents", "propagationPolicy"]


def _object(kind: str, sub: str, answer: str) -> dict[str, Any]:
    return {"get": (f"readExampleComV1{kind}{sub}", "get", "Widget", ["resourceVersion"], None,
                    {"200": answer, "401": None}),
            "put": (f"replaceExampleComV1{kind}{sub}", "put", "Widget", WRITE, answer,
                    {"200": answer, "201": answer, "401": None}),
            "patch": (f"patchExampleComV1{kind}{sub}", "patch", "Widget", PATCH, "Patch",
                      {"200": answer, "401": None})}


def _expected_paths(namespaced: bool) -> dict[str, Any]:
    kind = "NamespacedWidget" if namespaced else "Widget"
    ns = ["namespace"] if namespaced else []
    coll = "/apis/example.com/v1/" + ("namespaces/{namespace}/widgets" if namespaced
                                      else "widgets")
    item = sorted(["name", *ns, "pretty"])
    out = {
        coll: (sorted([*ns, "pretty"]), {
            "get": (f"listExampleComV1{kind}", "list", "Widget", LIST_PARAMS, None,
                    {"200": "WidgetList", "401": None}),
            "post": (f"createExampleComV1{kind}", "post", "Widget", WRITE, "Widget",
                     {"200": "Widget", "201": "Widget", "202": "Widget", "401": None}),
            "delete": (f"deleteExampleComV1Collection{kind}", "deletecollection", "Widget",
                       LIST_PARAMS, None, {"200": "Status", "401": None})}),
        coll + "/{name}": (item, {
            **_object(kind, "", "Widget"),
            "delete": (f"deleteExampleComV1{kind}", "delete", "Widget", DELETE,
                       "DeleteOptions", {"200": "Status", "202": "Status", "401": None})}),
        coll + "/{name}/status": (item, _object(kind, "Status", "Widget")),
        coll + "/{name}/scale": (item, _object(kind, "Scale", "Scale")),
    }
    if namespaced:
        out["/apis/example.com/v1/widgets"] = (sorted([*LIST_PARAMS, "pretty"]), {
            "get": ("listExampleComV1WidgetForAllNamespaces", "list", "Widget", [], None,
                    {"200": "WidgetList", "401": None})})
    return out


@pytest.mark.parametrize("namespaced", [True, False])
def test_paths_with_status_and_scale(namespaced: bool) -> None:
    crd = copy.deepcopy(WIDGETS)
    crd["spec"]["scope"] = "Namespaced" if namespaced else "Cluster"
    v3_paths, _ = openapi_v3_paths_and_schemas(crd, "v1")
    v2_paths, _ = openapi_v2_paths_and_definitions(crd, "v1")
    expected = _expected_paths(namespaced)
    assert _summary(v3_paths, V3_REF) == expected
    assert _summary(v2_paths, V2_REF) == expected
    assert list(v3_paths) == sorted(v3_paths)
    for item in v3_paths.values():
        for method, op in _ops(item).items():
            assert op["tags"] == ["exampleCom_v1"]
            assert all(sorted(a["content"]) == CR_MEDIA
                       for c, a in op["responses"].items() if c != "401")
            if "requestBody" in op:
                assert sorted(op["requestBody"]["content"]) == (
                    PATCH_MEDIA if method == "patch" else CR_MEDIA)
                assert op["requestBody"].get("required") is (None if method == "delete"
                                                             else True)
    for item in v2_paths.values():
        for method, op in _ops(item).items():
            assert op["consumes"] == (PATCH_MEDIA if method == "patch" else CR_MEDIA)
            assert op["produces"] == CR_MEDIA and op["schemes"] == ["https"]
            assert op["responses"]["401"] == {"description": "Unauthorized"}


def test_without_subresources_or_a_version() -> None:
    crd = copy.deepcopy(WIDGETS)
    del crd["spec"]["versions"][1]["subresources"]
    paths, _ = openapi_v3_paths_and_schemas(crd, "v1")
    assert not [p for p in paths if p.endswith(("/status", "/scale"))]
    _, schemas = openapi_v3_paths_and_schemas(crd, "v1")
    assert "io.k8s.api.autoscaling.v1.Scale" not in schemas
    with pytest.raises(KeyError):
        openapi_v3_paths_and_schemas(crd, "v2")
    with pytest.raises(KeyError):
        openapi_v2_paths_and_definitions(crd, "v2")


# --- in the served documents --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _CRDEntry(Resource):
    """A registry entry served from a CRD (``crd``), until ``Resource`` has the field."""

    crd: Mapping[str, Any] | None = None


def _registry() -> Registry:
    widgets = [_CRDEntry("example.com", v, "Widget", "widgets", "widget", namespaced=True,
                         subresources=("status", "scale") if v == "v1" else (),
                         is_custom=True, crd=WIDGETS) for v in ("v1", "v1beta1")]
    return Registry([*(r for r in REGISTRY if r.group == ""), *widgets])


def test_the_served_documents_take_a_crds() -> None:
    registry = _registry()
    v1 = build_document(registry, "example.com", "v1")
    paths, schemas = openapi_v3_paths_and_schemas(WIDGETS, "v1")
    assert v1["paths"] == paths and v1["components"]["schemas"] == schemas
    answer = openapi_response(registry, "/openapi/v3/apis/example.com/v1beta1", {})
    assert answer is not None and answer.status == 200
    assert "com.example.v1beta1.Widget" in json.loads(answer.body)["components"]["schemas"]
    root = openapi_response(registry, "/openapi/v3", {})
    assert root is not None and "apis/example.com/v1" in json.loads(root.body)["paths"]
    # the core group-version's document is unchanged by the CRD beside it
    assert build_document(registry, "", "v1") == build_document(REGISTRY, "", "v1")


def test_the_swagger_document_merges_each_served_version() -> None:
    registry = _registry()
    swagger = build_swagger(registry)
    for version in ("v1", "v1beta1"):
        paths, defs = openapi_v2_paths_and_definitions(WIDGETS, version)
        assert {p: swagger["paths"][p] for p in paths} == paths
        assert {d: swagger["definitions"][d] for d in defs} == defs
    assert "/apis/example.com/v1/widgets" in swagger["paths"]
    doc = Doc(swagger_for(registry).protobuf.plain)  # kubectl's form of it
    widget = doc.definitions["com.example.v1.Widget"]
    assert doc.schema_extensions(widget)["x-kubernetes-selectable-fields"] == SELECTABLE
    spec = doc.properties(widget)["spec"]
    assert doc.schema_extensions(spec)["x-kubernetes-validations"] == [
        {"reason": "FieldValueForbidden", "rule": "self.replicas <= 5"}]
    op = doc.operation("/apis/example.com/v1/namespaces/{namespace}/widgets/{name}", "patch")
    assert doc.operation_id(op) == "patchExampleComV1NamespacedWidget"
    assert "fieldValidation" in doc.query_parameter_names(op)
