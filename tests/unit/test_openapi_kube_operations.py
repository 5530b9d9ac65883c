"""``/openapi/v2`` and ``/openapi/v3`` against kube-apiserver v1.32's own documents on the pod
subresources, ``bindings``, ``serviceaccounts/token`` and paths whose parameters kube hoists.

``kube_operations_v1_32.json`` holds upstream's facts per path (``tools/kube_operations.py``
extracts them from ../shared/openapi): the path's parameters, and per operation its
operationId, ``x-kubernetes-action``, GVK, parameters, request body and response schemas.
Media types are not compared (kubewire lists JSON only), nor prose.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubewire.resources import REGISTRY
from kubewire.server.discovery.openapi import documents_for
from kubewire.server.discovery.openapi_v2 import swagger_for
from tests.gnostic_wire import Doc

KUBE: dict[str, Any] = json.loads(
    (Path(__file__).with_name("kube_operations_v1_32.json")).read_text("utf-8"))
V2: dict[str, Any] = json.loads(swagger_for(REGISTRY).json.plain)
V3: dict[str, Any] = json.loads(documents_for(REGISTRY).document("api/v1").body)  # type: ignore[union-attr]
PATHS = sorted(KUBE["v2"])
METHODS = ("get", "put", "post", "patch", "delete")


def _ref(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None and len(schema.get("allOf", ())) == 1:
        ref = schema["allOf"][0]["$ref"]
    if ref is not None:
        return {"$ref": ref.rsplit("/", 1)[1]}
    return {"type": schema["type"]}


def _param(param: dict[str, Any]) -> list[str]:
    if param["in"] == "body":
        return ["body", param["name"], _ref(param["schema"])["$ref"]]
    return [param["in"], param["name"], param.get("type") or param["schema"]["type"]]


def _responses(responses: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for code, answer in responses.items():
        if "schema" in answer:
            out[code] = _ref(answer["schema"])
        elif answer.get("content"):
            schemas = [_ref(m["schema"]) for m in answer["content"].values()]
            assert all(s == schemas[0] for s in schemas), answer
            out[code] = schemas[0]
        else:
            out[code] = None
    return out


def facts(document: dict[str, Any], path: str) -> dict[str, Any]:
    """kubewire's path in the fixture's shape."""
    item = document["paths"][path]
    out: dict[str, Any] = {"parameters": sorted(map(_param, item.get("parameters", [])))}
    for method in METHODS:
        if method not in item:
            continue
        op = item[method]
        out[method] = {"action": op["x-kubernetes-action"],
                       "gvk": op["x-kubernetes-group-version-kind"],
                       "operationId": op["operationId"],
                       "parameters": sorted(map(_param, op.get("parameters", []))),
                       "responses": _responses(op["responses"])}
        if "requestBody" in op:
            bodies = [_ref(m["schema"]) for m in op["requestBody"]["content"].values()]
            out[method]["requestBody"] = bodies[0]
    return out


@pytest.mark.parametrize("path", PATHS)
def test_v2_operations_are_kube_s(path: str) -> None:
    assert facts(V2, path) == KUBE["v2"][path]


@pytest.mark.parametrize("path", PATHS)
def test_v3_operations_are_kube_s(path: str) -> None:
    assert facts(V3, path) == KUBE["v3"][path]


def test_the_fixture_covers_the_new_paths() -> None:
    pod = "/api/v1/namespaces/{namespace}/pods/{name}"
    wanted = {"/api/v1/namespaces/{namespace}/bindings",
              "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
              *(f"{pod}/{sub}" for sub in ("log", "exec", "attach", "portforward", "binding",
                                           "eviction", "ephemeralcontainers"))}
    assert wanted <= set(PATHS) and set(KUBE["v3"]) == set(PATHS)
    ids = {op["operationId"] for item in KUBE["v2"].values() for m, op in item.items()
           if m != "parameters"}
    assert {"connectCoreV1GetNamespacedPodExec", "connectCoreV1PostNamespacedPodAttach",
            "readCoreV1NamespacedPodLog", "createCoreV1NamespacedPodBinding",
            "createCoreV1NamespacedPodEviction", "createCoreV1NamespacedBinding",
            "patchCoreV1NamespacedPodEphemeralcontainers",
            "createCoreV1NamespacedServiceAccountToken"} <= ids


@pytest.mark.parametrize("name", ["io.k8s.api.core.v1.Binding", "io.k8s.api.policy.v1.Eviction",
                                  "io.k8s.api.authentication.v1.TokenRequest"])
def test_bodies_are_defined_with_their_gvk(name: str) -> None:
    group, version, kind = {"core": ("", "v1", "Binding"), "policy": ("policy", "v1", "Eviction"),
                            "authentication": ("authentication.k8s.io", "v1", "TokenRequest")
                            }[name.split(".")[3]]
    gvk = [{"group": group, "kind": kind, "version": version}]
    for schema in (V2["definitions"][name], V3["components"]["schemas"][name]):
        assert schema["x-kubernetes-group-version-kind"] == gvk
        assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])


@pytest.mark.parametrize("path", PATHS)
def test_protobuf_operations_name_their_parameters_as_the_json(path: str) -> None:
    proto = Doc(swagger_for(REGISTRY).protobuf.plain)
    for method, op in V2["paths"][path].items():
        if method == "parameters":
            continue
        found = proto.operation(path, method)
        assert Doc.operation_id(found) == op["operationId"]
        assert Doc.operation_extensions(found)["x-kubernetes-action"] == op[
            "x-kubernetes-action"]
        assert Doc.query_parameter_names(found) == [
            p["name"] for p in op.get("parameters", ()) if p["in"] == "query"]
