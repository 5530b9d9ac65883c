"""OpenAPI v3 and v2 documents built from a CRD (server/apiextensions/openapi_docs.py), as
apiextensions-apiserver v1.32's builder.go builds them, and their place in ``/openapi/v3`` and
``/openapi/v2`` (server/discovery).

The Gateway API CRDs are compared with what kubewire serves today for Gateway and HTTPRoute
(built from schema facts of the same CRDs): the same operationIds, actions, GVKs and path
parameters, the same schemas, and the differences kube's CRD builder makes spelled out. A
hand-written CRD covers status and scale, cluster scope and every schema rewrite.
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
from kubewire.server.apiextensions.gateway_crds import gateway_crds
from kubewire.server.apiextensions.openapi_docs import (
    openapi_v2_paths_and_definitions,
    openapi_v3_paths_and_schemas,
)
from kubewire.server.discovery.openapi import build_document, openapi_response
from kubewire.server.discovery.openapi_v2 import build_swagger, swagger_for
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
TODAY_V3 = build_document(REGISTRY, GROUP, "v1")
TODAY_V2 = build_swagger(REGISTRY)


def _crd(kind: str) -> dict[str, Any]:
    return next(c for c in gateway_crds() if c["spec"]["names"]["kind"] == kind)  # type: ignore


def _without_prose(node: Any) -> Any:
    """``node`` less what the schema facts of today do not hold: descriptions, CEL rules,
    the selectable fields extension, and the junctors (``oneOf``...) of value validation."""
    if isinstance(node, Mapping):
        return {k: _without_prose(v) for k, v in node.items()
                if not (k == "description" and isinstance(v, str))
                and k not in ("x-kubernetes-validations", "x-kubernetes-selectable-fields",
                              "oneOf", "anyOf", "allOf", "not")}
    if isinstance(node, list):
        return [_without_prose(item) for item in node]
    return node


def _ops(item: Mapping[str, Any]) -> dict[str, Any]:
    return {m: op for m, op in item.items() if m in METHODS}


def _names(params: list[Any] | None) -> list[str]:
    return [p["name"] for p in params or ()]


def _v3_answer(op: Mapping[str, Any]) -> dict[str, Any]:
    """code -> (media types, the type answered)."""
    out: dict[str, Any] = {}
    for code, answer in op["responses"].items():
        media = answer.get("content", {})
        refs = {m["schema"]["$ref"].removeprefix(V3_REF) for m in media.values()}
        out[code] = (sorted(media), *refs)
    return out


# --- the Gateway API, against what kubewire serves today ---------------------------------------

@pytest.mark.parametrize("kind", ["Gateway", "HTTPRoute"])
def test_v3_paths_are_todays_as_the_crd_builder_lays_them_out(kind: str) -> None:
    paths, _ = openapi_v3_paths_and_schemas(_crd(kind), "v1")
    plural = kind.lower() + "s"
    today = {p: item for p, item in TODAY_V3["paths"].items() if p.endswith(
        (f"/{plural}", f"/{plural}/{{name}}", f"/{plural}/{{name}}/status"))}
    # kube publishes no /watch/ paths for custom resources: a watch is ?watch=true on a list
    assert sorted(paths) == sorted(p for p in today if "/watch/" not in p)
    for path, item in paths.items():
        was = today[path]
        assert _names(item["parameters"]) == _names(was["parameters"]), path
        assert sorted(_ops(item)) == sorted(_ops(was)), path
        for method, op in _ops(item).items():
            old = was[method]
            for key in ("operationId", "tags", "x-kubernetes-action",
                        "x-kubernetes-group-version-kind"):
                assert op[key] == old[key], (path, method, key)
            answers = _v3_answer(op)
            assert {c: a[1:] for c, a in answers.items()} == {
                c: a[1:] for c, a in _v3_answer(old).items() if (method, c) != ("patch", "201")}
            assert all(a[0] == (CR_MEDIA if c != "401" else []) for c, a in answers.items())
            body = op.get("requestBody")
            if method == "patch":
                assert sorted(body["content"]) == PATCH_MEDIA
            elif method in ("put", "post") or (method == "delete" and "{name}" in path):
                assert sorted(body["content"]) == CR_MEDIA
                assert body["content"]["application/json"] == old["requestBody"]["content"]["*/*"]
                assert body.get("required") == old["requestBody"].get("required")
            else:  # get, and deletecollection (ListOptions only, no body)
                assert body is None
            params, old_params = _names(op.get("parameters")), _names(old.get("parameters"))
            if method == "get" and "{name}" in path:
                assert (params, old_params) == (["resourceVersion"], [])  # GetOptions
            elif method == "delete" and "{name}" not in path:
                assert params == LIST_PARAMS
            else:
                assert params == old_params


@pytest.mark.parametrize("kind", ["Gateway", "HTTPRoute"])
def test_v2_paths_are_todays_as_the_crd_builder_lays_them_out(kind: str) -> None:
    paths, _ = openapi_v2_paths_and_definitions(_crd(kind), "v1")
    v3_paths, _ = openapi_v3_paths_and_schemas(_crd(kind), "v1")
    assert sorted(paths) == sorted(v3_paths)
    for path, item in paths.items():
        was = TODAY_V2["paths"][path]
        assert item["parameters"] == was["parameters"], path
        for method, op in _ops(item).items():
            old = was[method]
            for key in ("operationId", "tags", "schemes", "x-kubernetes-action",
                        "x-kubernetes-group-version-kind"):
                assert op[key] == old[key], (path, method, key)
            assert op["produces"] == CR_MEDIA
            assert op["consumes"] == (PATCH_MEDIA if method == "patch" else CR_MEDIA)
            expected = dict(old["responses"])
            if method == "patch":
                del expected["201"]
            assert op["responses"] == expected, (path, method)
            body = [p for p in op.get("parameters", ()) if p["in"] == "body"]
            old_body = [p for p in old.get("parameters", ()) if p["in"] == "body"]
            deletecollection = method == "delete" and "{name}" not in path
            assert body == ([] if deletecollection else old_body), (path, method)


@pytest.mark.parametrize("kind", ["Gateway", "HTTPRoute"])
def test_the_schemas_are_todays_with_the_crds_prose_and_rules(kind: str) -> None:
    name = f"io.k8s.networking.gateway.v1.{kind}"
    list_name = name + "List"
    _, schemas = openapi_v3_paths_and_schemas(_crd(kind), "v1")
    _, defs = openapi_v2_paths_and_definitions(_crd(kind), "v1")
    today_v3, today_v2 = TODAY_V3["components"]["schemas"], TODAY_V2["definitions"]
    for own in (name, list_name):
        assert _without_prose(schemas[own]) == today_v3[own]
        assert _without_prose(defs[own]) == today_v2[own]
        assert schemas[own]["x-kubernetes-selectable-fields"] == []  # none in these CRDs
    # what the schema facts dropped and kube publishes: the CRD's own prose and CEL rules ...
    spec = schemas[name]["properties"]["spec"]
    assert spec["description"].startswith("Spec defines the desired state of")
    assert "x-kubernetes-validations" in json.dumps(spec)
    assert "x-kubernetes-validations" in json.dumps(defs[name])
    # ... and the meta types are the ones built-in documents carry
    for other in set(schemas) - {name, list_name}:
        assert schemas[other] == today_v3[other], other
    for other in set(defs) - {name, list_name}:
        assert defs[other] == today_v2[other], other


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
