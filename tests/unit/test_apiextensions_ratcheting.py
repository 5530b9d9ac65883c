"""Validation ratcheting of custom resource updates (``CRDValidationRatcheting``): schema
errors of unchanged values are dropped, failing rules on them become warnings."""

from __future__ import annotations

from typing import Any

from kubewire.server.apiextensions.schemas.openapi_validator import validate_update, validate_value
from kubewire.server.apiextensions.schemas.ratcheting import ABSENT, old_item, unchanged
from kubewire.server.apiextensions.schemas.structural import parse
from kubewire.server.apiextensions.validation_rules import cel_rules

RAW: dict[str, Any] = {
    "type": "object",
    "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "integer", "maximum": 2},
        "b": {"type": "integer", "maximum": 2},
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
                  "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object", "properties": {
                      "name": {"type": "string"}, "port": {"type": "integer", "maximum": 10}}}},
        "name": {"type": "string",
                 "x-kubernetes-validations": [{"rule": "self.startsWith('x')"}]}}}},
}
SCHEMA = parse(RAW)


def test_errors_of_unchanged_values_are_dropped() -> None:
    old = {"spec": {"a": 5, "b": 1}}
    new = {"spec": {"a": 5, "b": 1}, "metadata": {"name": "changed"}}
    assert validate_value(SCHEMA, new) != []
    assert validate_update(SCHEMA, new, old) == []
    new = {"spec": {"a": 5, "b": 6}}
    errors = validate_update(SCHEMA, new, old)
    assert [e.field for e in errors] == ["spec.b"]  # a is unchanged, b is not


def test_map_list_items_correlate_by_key_whatever_their_order() -> None:
    old = {"spec": {"ports": [{"name": "p", "port": 50}, {"name": "q", "port": 1}]}}
    new = {"spec": {"ports": [{"name": "q", "port": 1}, {"name": "p", "port": 50}],
                    "a": 9}}
    assert [e.field for e in validate_update(SCHEMA, new, old)] == ["spec.a"]
    ports = SCHEMA.properties["spec"].properties["ports"]
    assert unchanged(ports, new["spec"]["ports"], old["spec"]["ports"])
    assert old_item(ports, old["spec"]["ports"], {"name": "r"}) is ABSENT


def test_a_failing_rule_on_an_unchanged_value_warns() -> None:
    rules, problems = cel_rules.compile_rules(RAW, "")
    assert problems == []
    old = {"spec": {"name": "y", "a": 1}}
    new = {"spec": {"name": "y", "a": 2}}
    errors, warnings = cel_rules.evaluate_update(rules, SCHEMA, new, old)
    assert errors == []
    assert warnings == ['spec.name: Invalid value: "string": failed rule: '
                        "self.startsWith('x')"]
    errors, warnings = cel_rules.evaluate_update(rules, SCHEMA, {"spec": {"name": "z"}}, old)
    assert [str(e) for e in errors] == ['spec.name: Invalid value: "string": failed rule: '
                                        "self.startsWith('x')"]
    assert warnings == []
