"""The Gateway API kinds as custom resources of their pre-installed CRDs: their defaults,
schema errors and unknown fields through the custom-resource write steps
(``server.writes.custom_resources``), and their schema facts for server-side apply
(``kubewire.schema.crd_types``, through ``patch.field_ownership.resource_schema``).
Before the CRDs, kubewire served Gateway and HTTPRoute from schema facts of its own; these are
the same facts, read from the CRDs.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from kubewire.server.patch.field_ownership import resource_schema
from kubewire.server.writes import custom_resources
from kubewire.server.writes.defaults import apply_kind_defaults
from tests.gateway_api import gateway_resource

GATEWAYS = gateway_resource("gateways")
HTTP_ROUTES = gateway_resource("httproutes")
UNCHECKED_RULES = ('<nil>: Invalid value: "null": some validation rules were not checked '
                   "because the object was invalid; correct the existing errors to complete "
                   "validation")


def _messages(resource: Any, obj: dict[str, Any]) -> list[str]:
    errors, _ = custom_resources.validate(resource, obj, None)
    return [str(e) for e in errors]


def _defaulted(resource: Any, obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    custom_resources.default(resource, out)
    return out


def test_the_crd_schema_facts_keep_defaults_and_list_types() -> None:
    assert GATEWAYS.crd is not None and HTTP_ROUTES.crd is not None
    route = resource_schema(HTTP_ROUTES)
    gateway = resource_schema(GATEWAYS)
    assert route is not None and gateway is not None
    kind = route.at(["spec", "parentRefs", "kind"])
    assert kind is not None and kind.default == "Gateway"
    from_ = gateway.at(["spec", "listeners", "allowedRoutes", "namespaces", "from"])
    assert from_ is not None and from_.type == "string"  # (enums: the structural schema's)
    listeners = gateway.at(["spec", "listeners"])
    assert listeners is not None
    assert (listeners.patch_meta.list_type, listeners.patch_meta.list_map_keys) == (
        "map", ("name",))
    meta = gateway.at(["metadata"])  # ObjectMeta, as kube publishes a CR's metadata
    assert meta is not None and meta.ref == "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    assert resource_schema(replace(GATEWAYS, version="v9")) is None


def test_gateway_types_enums_and_required() -> None:
    gw = {"apiVersion": GATEWAYS.api_version, "kind": "Gateway", "metadata": {"name": "g"},
          "spec": {"listeners": [{"name": "l", "port": "80", "protocol": "HTTP",
                                  "allowedRoutes": {"namespaces": {"from": "Bogus"}}}]}}
    assert _messages(GATEWAYS, gw) == [
        'spec.listeners[0].port: Invalid value: "string": spec.listeners[0].port in body must '
        'be of type integer: "string"',
        'spec.listeners[0].allowedRoutes.namespaces.from: Unsupported value: "Bogus": '
        'supported values: "All", "Selector", "Same"',
        "spec.gatewayClassName: Required value",
        UNCHECKED_RULES,  # a blocking error: the CRD's CEL rules were not run
    ]
    bare = {"apiVersion": GATEWAYS.api_version, "kind": "Gateway", "metadata": {"name": "g"}}
    assert _messages(GATEWAYS, bare) == ["spec: Required value", UNCHECKED_RULES]


def test_unknown_fields_are_pruned_with_a_warning_each() -> None:
    gw: dict[str, Any] = {"apiVersion": GATEWAYS.api_version, "kind": "Gateway",
                          "metadata": {"name": "g"},
                          "spec": {"gatewayClassName": "c", "nope": 1, "listeners": [],
                                   "infrastructure": {"labels": {"free": "x"}}}}
    assert custom_resources.decode(GATEWAYS, gw, "Warn") == ['unknown field "spec.nope"']
    assert "nope" not in gw["spec"]
    assert gw["spec"]["infrastructure"] == {"labels": {"free": "x"}}  # a map: nothing unknown


def test_httproute_defaults() -> None:
    route: dict[str, Any] = {
        "apiVersion": HTTP_ROUTES.api_version, "kind": "HTTPRoute", "metadata": {"name": "r"},
        "spec": {"parentRefs": [{"name": "gw"}],
                 "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}}
    out = _defaulted(HTTP_ROUTES, route)
    assert out["spec"]["parentRefs"] == [
        {"name": "gw", "group": "gateway.networking.k8s.io", "kind": "Gateway"}]
    assert out["spec"]["rules"] == [{
        "backendRefs": [{"name": "svc", "port": 80, "group": "", "kind": "Service",
                         "weight": 1}],
        "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
    }]
    # the write path defaults while decoding, on a copy
    assert apply_kind_defaults(HTTP_ROUTES, route) == out
    assert route["spec"]["parentRefs"] == [{"name": "gw"}]


def test_httproute_rules_default_when_missing() -> None:
    out = _defaulted(HTTP_ROUTES, {"spec": {}})
    assert out["spec"]["rules"] == [{"matches": [{"path": {"type": "PathPrefix",
                                                           "value": "/"}}]}]
    # Defaults apply to present objects only: no spec, nothing to default in it.
    assert "spec" not in _defaulted(HTTP_ROUTES, {"metadata": {"name": "r"}})


def test_gateway_defaults() -> None:
    gw = {"spec": {"gatewayClassName": "c", "addresses": [{"value": "10.0.0.1"}],
                   "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}]}}
    out = _defaulted(GATEWAYS, gw)
    assert out["spec"]["addresses"] == [{"value": "10.0.0.1", "type": "IPAddress"}]
    assert out["spec"]["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "Same"}}
    conditions = out["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Accepted", "Programmed"]
    assert conditions[0] == {"type": "Accepted", "status": "Unknown", "reason": "Pending",
                             "message": "Waiting for controller",
                             "lastTransitionTime": "1970-01-01T00:00:00Z"}


def test_explicit_values_and_non_nullable_nulls() -> None:
    route = {"spec": {"parentRefs": [{"name": "gw", "kind": "Service", "group": None}]}}
    ref = _defaulted(HTTP_ROUTES, route)["spec"]["parentRefs"][0]
    assert ref == {"name": "gw", "kind": "Service", "group": "gateway.networking.k8s.io"}
