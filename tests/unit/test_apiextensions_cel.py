"""CEL validation rules of custom resources: CRD-time compile errors and request-time errors.

Expected texts are kube-apiserver v1.32's (apiextensions-apiserver ``validation.go`` and
``schema/cel/validation.go``; crds.md §1.9, §4.6).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.server.apiextensions.validation_rules import cel_rules
from kubewire.server.apiextensions.validation_rules.cel_cost import cost_error_message
from kubewire.server.apiextensions.validation_rules.cel_env import escape

ROOT = "spec.versions[0].schema.openAPIV3Schema"
SPEC = f"{ROOT}.properties[spec]"


def schema(spec_rules: list[dict[str, Any]] | None = None,
           root_rules: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "object", "properties": {
        "replicas": {"type": "integer"},
        "name": {"type": "string", "maxLength": 10},
        "namespace": {"type": "string", "maxLength": 63},
        "ports": {"type": "array", "maxItems": 5, "items": {"type": "integer"}},
        "ios": {"x-kubernetes-int-or-string": True},
        **extra}}
    if spec_rules is not None:
        spec["x-kubernetes-validations"] = spec_rules
    root: dict[str, Any] = {"type": "object", "properties": {"spec": spec}}
    if root_rules is not None:
        root["x-kubernetes-validations"] = root_rules
    return root


def crd_errors(spec_rules: list[dict[str, Any]], **extra: Any) -> list[str]:
    _, errs = cel_rules.compile_rules(schema(spec_rules, **extra), ROOT)
    return [str(e) for e in errs]


def request_errors(rules_schema: dict[str, Any], spec: dict[str, Any],
                   old_spec: dict[str, Any] | None = None) -> list[str]:
    compiled, errs = cel_rules.compile_rules(rules_schema, ROOT)
    assert errs == []
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
           "spec": spec}
    old = None if old_spec is None else {**obj, "spec": old_spec}
    return [str(e) for e in cel_rules.evaluate(compiled, obj, old)]


def literal(rule: str, message_expression: str = "", reason: bool = False) -> str:
    reason_text = ("(*apiextensions.FieldValueErrorReason)(0xc000000000)" if reason
                   else "(*apiextensions.FieldValueErrorReason)(nil)")
    return (f'apiextensions.ValidationRule{{Rule:"{rule}", Message:"", '
            f'MessageExpression:"{message_expression}", Reason:{reason_text}, FieldPath:"", '
            "OptionalOldSelf:(*bool)(nil)}")


# --- CRD time -------------------------------------------------------------------------------

def test_undefined_field_is_a_compile_error_with_cel_go_text() -> None:
    assert crd_errors([{"rule": "self.foo == 1"}]) == [
        f"{SPEC}.x-kubernetes-validations[0].rule: Invalid value: {literal('self.foo == 1')}: "
        "compilation failed: ERROR: <input>:1:5: undefined field 'foo'\n | self.foo == 1\n"
        " | ....^"]


def test_undefined_field_inside_a_macro_over_typed_items() -> None:
    errs = crd_errors([{"rule": "self.items.all(i, i.nme == 'a')"}], items={
        "type": "array", "maxItems": 3,
        "items": {"type": "object", "properties": {"name": {"type": "string"}}}})
    assert len(errs) == 1
    assert errs[0].endswith("undefined field 'nme'\n | self.items.all(i, i.nme == 'a')\n"
                            " | ...................^")


def test_reserved_and_dashed_names_are_escaped() -> None:
    assert escape("namespace") == "__namespace__"
    assert escape("a-b.c/d") == "a__dash__b__dot__c__slash__d"
    assert escape("a__b") == "a__underscores__b"
    assert escape("1abc") is None
    assert escape("a b") is None
    assert crd_errors([{"rule": "self.__namespace__ != ''"}]) == []
    assert len(crd_errors([{"rule": "self.namespace != ''"}])) == 1


def test_syntax_error_text() -> None:
    assert crd_errors([{"rule": "1 +"}])[0].endswith(
        "compilation failed: ERROR: <input>:1:4: Syntax error: mismatched input '<EOF>' "
        "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, "
        "NUM_UINT, STRING, BYTES, IDENTIFIER}\n | 1 +\n | ...^")


def test_rule_must_evaluate_to_a_bool() -> None:
    assert crd_errors([{"rule": "self.replicas"}]) == [
        f"{SPEC}.x-kubernetes-validations[0].rule: Invalid value: {literal('self.replicas')}: "
        "cel expression must evaluate to a bool"]
    assert crd_errors([{"rule": "'a' + 'b'"}])[0].endswith("cel expression must evaluate to a bool")


def test_message_expression_must_be_a_string() -> None:
    assert crd_errors([{"rule": "true", "messageExpression": "self.replicas"}]) == [
        f"{SPEC}.x-kubernetes-validations[0].messageExpression: Invalid value: "
        f"{literal('true', 'self.replicas')}: messageExpression must evaluate to a string"]


def test_rule_field_checks() -> None:
    at = f"{SPEC}.x-kubernetes-validations"
    assert crd_errors([{"rule": " "}]) == [f"{at}[0].rule: Required value: rule is not specified"]
    assert crd_errors([{"rule": "true", "message": " "}]) == [
        f'{at}[0].message: Invalid value: " ": message must be non-empty if specified']
    assert crd_errors([{"rule": "true", "message": "a\nb"}]) == [
        f'{at}[0].message: Invalid value: "a\\nb": message must not contain line breaks']
    assert crd_errors([{"rule": "true &&\ntrue"}]) == [
        f"{at}[0].message: Required value: message must be specified if rule contains line breaks"]
    assert crd_errors([{"rule": "true", "messageExpression": " "}]) == [
        f"{at}[0].messageExpression: Required value: messageExpression must be non-empty if "
        "specified"]
    assert crd_errors([{"rule": "true", "reason": "Nope"}]) == [
        f'{at}[0].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", '
        '"FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"']
    assert crd_errors([{"rule": "true", "fieldPath": ".nope"}]) == [
        f'{at}[0].fieldPath: Invalid value: ".nope": fieldPath must be a valid path']
    assert crd_errors([{"rule": "true", "fieldPath": ".ports[0]"}]) == [
        f'{at}[0].fieldPath: Invalid value: ".ports[0]": fieldPath must be a valid path']
    assert crd_errors([{"rule": "true", "fieldPath": ".name"}]) == []
    assert crd_errors([{"rule": "true", "fieldPath": "['name']"}]) == []


def test_optional_old_self_needs_old_self() -> None:
    assert crd_errors([{"rule": "self.replicas > 0", "optionalOldSelf": True}]) == [
        f"{SPEC}.x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be "
        "set if oldSelf is not used in rule"]
    assert crd_errors([{"rule": "!oldSelf.hasValue() || oldSelf.value().replicas <= "
                                "self.replicas", "optionalOldSelf": True}]) == []


def test_old_self_under_an_atomic_list_is_uncorrelatable() -> None:
    errs = crd_errors([], items={"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"a": {"type": "string", "maxLength": 5}},
        "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}})
    assert errs == [
        f'{SPEC}.properties[items].items.x-kubernetes-validations[0].rule: Invalid value: '
        f'"self.a == oldSelf.a": oldSelf cannot be used on the uncorrelatable portion of the '
        f"schema within {SPEC}.properties[items]"]
    mapped = crd_errors([], items={
        "type": "array", "maxItems": 3, "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["a"], "items": {
            "type": "object", "required": ["a"],
            "properties": {"a": {"type": "string", "maxLength": 5}},
            "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}})
    assert mapped == []


def test_cost_budget_factor_texts() -> None:
    assert cost_error_message("estimated rule cost", 12_000_000, 10_000_000) == (
        "estimated rule cost exceeds budget by factor of 1.200000x (try simplifying the rule, or "
        "adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are "
        "declared)")
    assert "factor of 2.5x " in cost_error_message("x", 25, 10)
    assert "factor of more than 100x " in cost_error_message("x", 1001, 10)


def test_quadratic_rule_over_an_unbounded_list_exceeds_the_budget() -> None:
    errs = crd_errors([{"rule": "self.names.all(a, self.names.exists_one(b, a == b))"}],
                      names={"type": "array", "items": {"type": "string"}})
    at = f"{SPEC}.x-kubernetes-validations[0].rule"
    assert errs[0] == (
        f"{at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try "
        "simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, "
        "maps, and strings are declared)")
    assert f"{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for "\
           "entire OpenAPIv3 schema" in errs
    assert errs[-1].startswith(f"{ROOT}: Forbidden: x-kubernetes-validations estimated rule cost "
                               "total for entire OpenAPIv3 schema exceeds budget by factor of ")
    bounded = crd_errors([{"rule": "self.names.all(a, self.names.exists_one(b, a == b))"}],
                         names={"type": "array", "maxItems": 10,
                                "items": {"type": "string", "maxLength": 20}})
    assert bounded == []


def test_rules_under_an_unbounded_list_use_the_item_cardinality() -> None:
    item = {"type": "object", "properties": {"v": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.v.matches('^[a-z]+$')"}]}
    errs = crd_errors([], items={"type": "array", "items": item})
    assert errs and errs[0].startswith(
        f"{SPEC}.properties[items].items.x-kubernetes-validations[0].rule: Forbidden: estimated "
        "rule cost exceeds budget by factor of")
    item["properties"] = {"v": {"type": "string", "maxLength": 64}}
    assert crd_errors([], items={"type": "array", "maxItems": 100, "items": item}) == []


def test_schema_errors_skip_compilation() -> None:
    assert crd_errors([{"rule": "self.foo == 1", "reason": "Nope"}]) == [
        f'{SPEC}.x-kubernetes-validations[0].reason: Unsupported value: "Nope": supported '
        'values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", '
        '"FieldValueRequired"']


# --- request time ---------------------------------------------------------------------------

def test_failed_rule_without_and_with_message() -> None:
    rules = schema([{"rule": "self.replicas > 0"},
                    {"rule": "self.replicas < 10", "message": " too many "}])
    assert request_errors(rules, {"replicas": 0}) == [
        'spec: Invalid value: "object": failed rule: self.replicas > 0']
    assert request_errors(rules, {"replicas": 10}) == ['spec: Invalid value: "object": too many']
    assert request_errors(rules, {"replicas": 5}) == []


def test_root_rule_path_is_nil_and_sees_metadata_name() -> None:
    rules = schema(root_rules=[{"rule": "self.metadata.name.size() > 3", "message": "short"}])
    assert request_errors(rules, {}) == ['<nil>: Invalid value: "object": short']


def test_reasons_and_field_path() -> None:
    rules = schema([
        {"rule": "self.name.startsWith('a')", "reason": "FieldValueForbidden",
         "fieldPath": ".name"},
        {"rule": "has(self.replicas)", "reason": "FieldValueRequired", "message": "set it"},
        {"rule": "self.ports.size() < 2", "reason": "FieldValueDuplicate", "message": "dup"},
        {"rule": "self.replicas != 3", "reason": "FieldValueInvalid", "fieldPath": "['replicas']"},
    ])
    assert request_errors(rules, {"name": "b", "ports": [1, 2]}) == [
        "spec.name: Forbidden: failed rule: self.name.startsWith('a')",
        "spec: Required value: set it",
        'spec: Duplicate value: "object"',
        'spec: Invalid value: "object": no such key: replicas evaluating rule: '
        "self.replicas != 3"]
    assert request_errors(rules, {"name": "a", "replicas": 3, "ports": []}) == [
        'spec.replicas: Invalid value: "object": failed rule: self.replicas != 3']


def test_message_expression_and_its_fallbacks() -> None:
    rules = schema([
        {"rule": "self.replicas < 5", "messageExpression": "'got ' + self.name"},
        {"rule": "self.replicas < 6", "message": "static",
         "messageExpression": "self.name + ' '"},
        {"rule": "self.replicas < 7", "messageExpression": "' '"},
    ], name={"type": "string", "maxLength": 10})
    assert request_errors(rules, {"replicas": 9, "name": "n"}) == [
        'spec: Invalid value: "object": got n',
        'spec: Invalid value: "object": n',
        'spec: Invalid value: "object": failed rule: self.replicas < 7']
    # a messageExpression that errors falls back to the message (or to the rule)
    assert request_errors(rules, {"replicas": 9})[:2] == [
        'spec: Invalid value: "object": failed rule: self.replicas < 5',
        'spec: Invalid value: "object": static']


def test_rules_run_per_item_and_per_map_value() -> None:
    rules = schema([], items={"type": "array", "maxItems": 5, "items": {
        "type": "object", "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.n > 0", "message": "positive"}]}},
        labels={"type": "object", "maxProperties": 5, "additionalProperties": {
            "type": "string", "maxLength": 5,
            "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}})
    assert request_errors(rules, {"items": [{"n": 1}, {"n": 0}], "labels": {"a": "ok",
                                                                            "b": "bad"}}) == [
        'spec.items[1]: Invalid value: "object": positive',
        "spec.labels[b]: Invalid value: \"string\": failed rule: self != 'bad'"]


def test_transition_rule_runs_only_on_update() -> None:
    rules = schema([{"rule": "self.replicas == oldSelf.replicas", "message": "immutable"}])
    assert request_errors(rules, {"replicas": 1}) == []
    assert request_errors(rules, {"replicas": 1}, {"replicas": 1}) == []
    assert request_errors(rules, {"replicas": 2}, {"replicas": 1}) == [
        'spec: Invalid value: "object": immutable']


def test_optional_old_self_runs_on_create_with_none() -> None:
    rules = schema([{"rule": "oldSelf.hasValue() ? oldSelf.value().replicas <= self.replicas "
                             ": self.replicas < 3", "optionalOldSelf": True, "message": "m"}])
    assert request_errors(rules, {"replicas": 4}) == ['spec: Invalid value: "object": m']
    assert request_errors(rules, {"replicas": 1}) == []
    assert request_errors(rules, {"replicas": 4}, {"replicas": 5}) == [
        'spec: Invalid value: "object": m']
    assert request_errors(rules, {"replicas": 6}, {"replicas": 5}) == []


def test_list_map_items_correlate_by_key() -> None:
    rules = schema([], items={
        "type": "array", "maxItems": 5, "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["k"], "items": {
            "type": "object", "required": ["k"],
            "properties": {"k": {"type": "string", "maxLength": 5}, "v": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v", "message": "frozen"}]}})
    old = {"items": [{"k": "a", "v": 1}, {"k": "b", "v": 2}]}
    assert request_errors(rules, {"items": [{"k": "b", "v": 2}, {"k": "a", "v": 1},
                                            {"k": "c", "v": 9}]}, old) == []
    assert request_errors(rules, {"items": [{"k": "b", "v": 3}]}, old) == [
        'spec.items[0]: Invalid value: "object": frozen']


def test_runtime_errors() -> None:
    rules = schema([{"rule": "self.ports[3] == 1"},
                    {"rule": "self.replicas == 1", "message": "m"}])
    assert request_errors(rules, {"ports": [1]}) == [
        'spec: Invalid value: "object": index out of bounds: 3 evaluating rule: '
        "self.ports[3] == 1",
        'spec: Invalid value: "object": no such key: replicas evaluating rule: m']


def test_int_or_string_is_dyn() -> None:
    rules = schema([{"rule": "self.ios == 3 || self.ios == '50%'", "message": "bad ios"}])
    assert request_errors(rules, {"ios": 3}) == []
    assert request_errors(rules, {"ios": "50%"}) == []
    assert request_errors(rules, {"ios": 7}) == ['spec: Invalid value: "object": bad ios']
    assert request_errors(rules, {"ios": "5"}) == ['spec: Invalid value: "object": bad ios']


@pytest.mark.parametrize("rule", [
    "self.name.lowerAscii() == 'abc' && self.name.upperAscii() == 'ABC'",
    "self.name.charAt(0) == 'a' && self.name.indexOf('c') == 2 && self.name.substring(1) == 'bc'",
    "'a,b'.split(',') == ['a', 'b'] && ['a', 'b'].join('-') == 'a-b'",
    "' x '.trim() == 'x' && 'aXa'.replace('X', 'y') == 'aya'",
    "[1, 2, 3].isSorted() && [3, 1].sum() == 4 && [3, 1].min() == 1 && [3, 1].max() == 3",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
    "'abc123'.find('[0-9]+') == '123' && 'a1b2'.findAll('[0-9]') == ['1', '2']",
    "sets.contains([1, 2], [2]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 3])",
    "isURL('https://example.com/x') && !isURL('x y')",
    "isIP('10.0.0.1') && isIP('::1') && !isIP('::ffff:10.0.0.1') && isCIDR('10.0.0.0/8')",
    "isQuantity('100Mi') && !isQuantity('1Qi')",
    "self.?replicas.orValue(0) == 0 && optional.of(1).hasValue()",
    "[1, 2, 3].exists_one(x, x > 2) && [1, 2].map(x, x * 2) == [2, 4]",
    "[1, 2, 3].filter(x, x > 1).size() == 2 && {'a': 1}.all(k, k == 'a')",
    "duration('1m') > duration('30s') && timestamp('2024-01-01T00:00:00Z') < "
    "timestamp('2025-01-01T00:00:00Z')",
    "'%s-%d'.format(['a', 1]) == 'a-1' && strings.quote('a') == '\"a\"'",
    "self.name.matches('^[a-z]+$') && size(self.name) == 3",
])
def test_library_functions(rule: str) -> None:
    rules = schema([{"rule": rule}])
    assert request_errors(rules, {"name": "abc"}) == []


@pytest.mark.parametrize("rule", ["'abc'.reverse() == 'cba'", "cel.bind(x, 1, x == 1)",
                                  "math.greatest(1, 2) == 2"])
def test_functions_outside_the_1_32_crd_environment(rule: str) -> None:
    errs = crd_errors([{"rule": rule}])
    assert len(errs) == 1 and "compilation failed: ERROR: <input>:" in errs[0]
