"""Every CEL rule of the Gateway API v1.2.1 standard CRDs compiles, and known-bad objects fail.

The CRDs are read from the shared reference copy (skipped when absent); the package itself never
reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubewire.server.apiextensions.validation_rules import cel_rules

GATEWAY_API = Path("/work/shared/openapi/gateway-api-v1.2.1/standard")
pytestmark = pytest.mark.skipif(not GATEWAY_API.is_dir(), reason="Gateway API CRDs not present")


def crds() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(GATEWAY_API.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found[doc["spec"]["names"]["kind"]] = doc
    return found


def count_rules(schema: Any) -> int:
    """Rules under properties, items and additionalProperties (where kube runs them)."""
    if not isinstance(schema, dict):
        return 0
    total = len(schema.get("x-kubernetes-validations") or [])
    total += sum(count_rules(p) for p in (schema.get("properties") or {}).values())
    return total + count_rules(schema.get("items")) + count_rules(
        schema.get("additionalProperties"))


def compiled(kind: str) -> cel_rules.CompiledRules:
    doc = crds()[kind]
    version = next(v for v in doc["spec"]["versions"] if v["name"] == "v1")
    rules, errs = cel_rules.compile_rules(version["schema"]["openAPIV3Schema"],
                                          "spec.versions[0].schema.openAPIV3Schema")
    assert errs == []
    return rules


def compiled_rules(node: cel_rules.RuleNode | None) -> int:
    if node is None:
        return 0
    total = sum(1 for rule in node.rules if rule.program is not None and not rule.error)
    total += sum(compiled_rules(n) for n in node.properties.values())
    return total + compiled_rules(node.items) + compiled_rules(node.additional)


def test_every_rule_of_every_version_compiles() -> None:
    total = 0
    for kind, doc in crds().items():
        for i, version in enumerate(doc["spec"]["versions"]):
            schema = version["schema"]["openAPIV3Schema"]
            rules, errs = cel_rules.compile_rules(
                schema, f"spec.versions[{i}].schema.openAPIV3Schema")
            assert [str(e) for e in errs] == [], (kind, version["name"])
            assert compiled_rules(rules.root) == count_rules(schema), (kind, version["name"])
            total += compiled_rules(rules.root)
    assert total > 150


def meta(kind: str) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
            "metadata": {"name": "x", "namespace": "default"}}


def test_gateway_class_controller_name_is_immutable() -> None:
    rules = compiled("GatewayClass")
    old = {**meta("GatewayClass"), "spec": {"controllerName": "example.com/a"}}
    new = {**meta("GatewayClass"), "spec": {"controllerName": "example.com/b"}}
    assert cel_rules.evaluate(rules, new, None) == []
    assert cel_rules.evaluate(rules, old, old) == []
    assert [str(e) for e in cel_rules.evaluate(rules, new, old)] == [
        'spec.controllerName: Invalid value: "string": Value is immutable']


def listener(name: str, port: int, protocol: str = "HTTP") -> dict[str, Any]:
    return {"name": name, "port": port, "protocol": protocol,
            "allowedRoutes": {"namespaces": {"from": "Same"}}}


def test_gateway_listener_names_must_be_unique() -> None:
    rules = compiled("Gateway")
    good = {**meta("Gateway"), "spec": {"gatewayClassName": "c",
                                        "listeners": [listener("a", 80), listener("b", 81)]}}
    assert cel_rules.evaluate(rules, good, None) == []
    bad = {**meta("Gateway"), "spec": {"gatewayClassName": "c",
                                       "listeners": [listener("a", 80), listener("a", 81)]}}
    assert [str(e) for e in cel_rules.evaluate(rules, bad, None)] == [
        'spec.listeners: Invalid value: "array": Listener name must be unique within the Gateway']
    tls_on_tcp = {**meta("Gateway"), "spec": {"gatewayClassName": "c", "listeners": [
        {**listener("a", 80, "TCP"), "tls": {"mode": "Terminate"}}]}}
    assert 'spec.listeners: Invalid value: "array": tls must not be specified for protocols '\
           "['HTTP', 'TCP', 'UDP']" in [str(e) for e in cel_rules.evaluate(rules, tls_on_tcp,
                                                                            None)]


def route(path: dict[str, Any], filters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"matches": [{"path": path}]}
    if filters is not None:
        rule["filters"] = filters
    return {**meta("HTTPRoute"), "spec": {"parentRefs": [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}], "rules": [rule]}}


def test_http_route_path_and_filter_rules() -> None:
    rules = compiled("HTTPRoute")
    assert cel_rules.evaluate(rules, route({"type": "PathPrefix", "value": "/a"}), None) == []
    assert [str(e) for e in cel_rules.evaluate(
        rules, route({"type": "PathPrefix", "value": "a"}), None)] == [
        'spec.rules[0].matches[0].path: Invalid value: "object": value must be an absolute path '
        "and start with '/' when type one of ['Exact', 'PathPrefix']"]
    rewrite = {"type": "URLRewrite", "urlRewrite": {"hostname": "h"}}
    errs = [str(e) for e in cel_rules.evaluate(
        rules, route({"type": "PathPrefix", "value": "/a"}, [rewrite, rewrite]), None)]
    assert errs == ['spec.rules[0].filters: Invalid value: "array": URLRewrite filter cannot be '
                    "repeated"]
    mismatched = {"type": "URLRewrite", "requestRedirect": {"scheme": "https"}}
    errs = [str(e) for e in cel_rules.evaluate(
        rules, route({"type": "PathPrefix", "value": "/a"}, [mismatched]), None)]
    assert 'spec.rules[0].filters[0]: Invalid value: "object": filter.requestRedirect must be '\
           "nil if the filter.type is not RequestRedirect" in errs
    assert 'spec.rules[0].filters[0]: Invalid value: "object": filter.urlRewrite must be '\
           "specified for URLRewrite filter.type" in errs
