"""CRD-time checks of ``openAPIV3Schema``s: kube's paths, texts and order.

Expected texts from ``apiextensions-apiserver`` v0.32: ``pkg/apiserver/schema/validation.go``
(``validateStructuralInvariants``, ``validateStructuralMetadataInvariants``,
``validateNestedValueValidation``; errors sorted by text), ``pkg/apiserver/schema/complete.go``,
``pkg/apiserver/schema/convert.go`` (``NewStructural``),
``pkg/apiserver/schema/defaulting/validation.go`` (``ValidateDefaults``) and
``pkg/apis/apiextensions/validation/validation.go`` (``validateCustomResourceDefinitionValidation``,
``ValidateCustomResourceDefinitionOpenAPISchema``, ``specStandardValidatorV3.validate``,
``validateMapListKeysMapSet``); crds.md §1.5-1.8 and §9 items 4-6.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.schema_rules import schema_errors
from kubewire.status import FieldError, invalid

P = "spec.validation.openAPIV3Schema"


def _errors(schema: dict[str, Any], **kw: Any) -> list[str]:
    return [str(e) for e in schema_errors(schema, P, **kw)]


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_valid_schema_has_no_errors() -> None:
    schema = _obj(spec=_obj(
        replicas={"type": "integer", "minimum": 0, "default": 1},
        port={"x-kubernetes-int-or-string": True,
              "anyOf": [{"type": "integer"}, {"type": "string"}]},
        ports={"type": "array", "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": ["name"],
               "items": _obj(name={"type": "string"}) | {"required": ["name"]}},
        free={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        labels={"type": "object", "additionalProperties": {"type": "string"}}),
        metadata=_obj(name={"type": "string", "maxLength": 10}),
        apiVersion={"type": "string"}, kind={"type": "string"})
    assert _errors(schema) == []


def test_property_without_type() -> None:
    """crds.md §9 item 4 (the single-version path prefix is the caller's)."""
    assert _errors(_obj(foo={})) == [
        f"{P}.properties[foo].type: Required value: must not be empty for specified object "
        "fields"]


def test_type_rules_at_root_and_items() -> None:
    assert _errors({"properties": {}}) == [
        f"{P}.type: Required value: must not be empty at the root"]
    assert _errors({"type": "string"}) == [
        f'{P}.type: Invalid value: "string": must be object at the root']
    assert _errors(_obj(l={"type": "array"}, m={"type": "array", "items": {}})) == [
        f"{P}.properties[l].items: Required value: must be specified",
        f"{P}.properties[m].items.type: Required value: must not be empty for specified array "
        "items"]


def test_structural_errors_sorted_by_text() -> None:
    """``ValidateStructuralWithOptions`` sorts by ``Error()``."""
    assert _errors(_obj(b={}, a={})) == [
        f"{P}.properties[a].type: Required value: must not be empty for specified object fields",
        f"{P}.properties[b].type: Required value: must not be empty for specified object fields"]


def test_unknown_and_null_types() -> None:
    assert _errors(_obj(x={"type": "foo"}, y={"type": "null"})) == [
        f'{P}.properties[x].type: Unsupported value: "foo": supported values: "array", '
        '"boolean", "integer", "number", "object", "string"',
        f'{P}.properties[y].type: Unsupported value: "null": supported values: "array", '
        '"boolean", "integer", "number", "object", "string"',
        f"{P}.properties[y].type: Forbidden: type cannot be set to null, use nullable as an "
        "alternative"]


def test_metadata_may_only_restrict_name_and_generate_name() -> None:
    """crds.md §9 item 5."""
    assert _errors(_obj(metadata=_obj(labels={"type": "object"}))) == [
        f"{P}.properties[metadata]: Forbidden: must not specify anything other than name and "
        "generateName, but metadata is implicitly specified"]
    assert _errors(_obj(metadata=_obj(name={"type": "string"},
                                      generateName={"type": "string"}))) == []
    assert _errors(_obj(metadata={"type": "string"})) == [
        f'{P}.properties[metadata].type: Invalid value: "string": must be object']


def test_type_meta_must_be_strings() -> None:
    assert _errors(_obj(kind={"type": "integer"})) == [
        f'{P}.properties[kind].type: Invalid value: "integer": must be string']


def test_preserve_unknown_fields_false() -> None:
    """crds.md §9 item 6: ``NewStructural`` fails, so only the OpenAPI check reports."""
    assert _errors(_obj(x={"type": "object", "x-kubernetes-preserve-unknown-fields": False})) == [
        f"{P}.properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be "
        "true or undefined"]


def test_conversion_error_shown_only_alone() -> None:
    """``$schema`` is not checked by the OpenAPI validator: ``NewStructural``'s error shows."""
    assert _errors(_obj(x={"type": "string", "$schema": "http://json-schema.org"})) == [
        f"{P}: Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported"]


def test_unsupported_openapi_fields() -> None:
    assert _errors(_obj(x={"type": "string", "$ref": "#/d"},
                        y={"type": "array", "items": [{"type": "string"}]},
                        z={"type": "object", "additionalProperties": {"type": "string"},
                           "properties": {"a": {"type": "string"}}})) == [
        f"{P}.properties[x].$ref: Forbidden: $ref is not supported",
        f"{P}.properties[y].items: Forbidden: items must be a schema object and not an array",
        f"{P}.properties[z].additionalProperties: Forbidden: additionalProperties and "
        "properties are mutual exclusive"]


def test_root_restrictions() -> None:
    assert _errors({"type": "object", "nullable": True, "additionalProperties": True,
                    "properties": {"u": {"type": "array", "uniqueItems": True,
                                         "items": {"type": "string"}}}}) == [
        f"{P}.nullable: Forbidden: nullable cannot be true at the root",
        f"{P}.additionalProperties: Forbidden: must not be used at the root",
        f"{P}.properties[u].uniqueItems: Forbidden: uniqueItems cannot be set to true since "
        "the runtime complexity becomes quadratic"]


def test_nested_value_validations_may_not_carry_structure() -> None:
    assert _errors(_obj(x={"type": "string", "anyOf": [
        {"type": "string", "maxLength": 3, "nullable": True}]})) == [
        f"{P}.properties[x].anyOf[0].nullable: Forbidden: must be false to be structural",
        f"{P}.properties[x].anyOf[0].type: Forbidden: must be empty to be structural"]


def test_int_or_string_idioms_allowed() -> None:
    idiom = [{"type": "integer"}, {"type": "string"}]
    assert _errors(_obj(a={"x-kubernetes-int-or-string": True, "anyOf": idiom},
                        b={"x-kubernetes-int-or-string": True,
                           "allOf": [{"anyOf": idiom}, {"pattern": "^[0-9]"}]})) == []


def test_int_or_string_conflicts() -> None:
    assert _errors(_obj(a={"x-kubernetes-int-or-string": True,
                           "x-kubernetes-preserve-unknown-fields": True})) == [
        f"{P}.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be "
        "false if x-kubernetes-int-or-string is true"]


def test_completeness_of_root_junctors() -> None:
    assert _errors({"type": "object", "anyOf": [{"properties": {"metadata": {}, "q": {}}}]}) == [
        f"{P}.anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested "
        "context",
        f"{P}.properties[metadata]: Required value: because it is defined in "
        f"{P}.anyOf[0].properties[metadata]",
        f"{P}.properties[q]: Required value: because it is defined in {P}.anyOf[0].properties[q]"]


def test_embedded_resource_rules() -> None:
    assert _errors(_obj(e={"x-kubernetes-embedded-resource": True})) == [
        f"{P}.properties[e].properties: Required value: must not be empty if "
        "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        f"{P}.properties[e].type: Required value: must be object if "
        "x-kubernetes-embedded-resource is true"]
    assert _errors(_obj(metadata=_obj(name={"type": "string",
                                            "x-kubernetes-embedded-resource": True}))) == [
        f"{P}.properties[metadata].properties[name].properties: Required value: must not be "
        "empty if x-kubernetes-embedded-resource is true without "
        "x-kubernetes-preserve-unknown-fields",
        f'{P}.properties[metadata].properties[name].type: Invalid value: "string": must be '
        "object if x-kubernetes-embedded-resource is true",
        f"{P}.properties[metadata].properties[name].x-kubernetes-embedded-resource: Forbidden: "
        "must not be used inside of resource meta"]


def test_invalid_pattern_with_go_error_text() -> None:
    assert _errors(_obj(p={"type": "string", "pattern": "(abc"})) == [
        f'{P}.properties[p].pattern: Invalid value: "(abc": must be a valid regular expression, '
        "but isn't: error parsing regexp: missing closing ): `(abc`"]


def test_list_and_map_type_rules() -> None:
    """crds.md §1.8."""
    assert _errors(_obj(
        a={"type": "string", "x-kubernetes-list-type": "set"},
        b={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"},
        c={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["k"]},
        d={"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "map"},
        m={"type": "string", "x-kubernetes-map-type": "loose"})) == [
        f'{P}.properties[a].type: Invalid value: "string": must be array if '
        "x-kubernetes-list-type is specified",
        f'{P}.properties[b].x-kubernetes-list-type: Unsupported value: "bag": supported '
        'values: "atomic", "set", "map"',
        f"{P}.properties[c].x-kubernetes-list-type: Required value: must be map if "
        "x-kubernetes-list-map-keys is non-empty",
        f"{P}.properties[d].x-kubernetes-list-map-keys: Required value: must not be empty if "
        "x-kubernetes-list-type is map",
        f'{P}.properties[d].items.type: Invalid value: "string": must be object if parent '
        "array's x-kubernetes-list-type is map",
        f'{P}.properties[m].type: Invalid value: "string": must be object if '
        "x-kubernetes-map-type is specified",
        f'{P}.properties[m].x-kubernetes-map-type: Unsupported value: "loose": supported '
        'values: "atomic", "granular"']


def test_list_map_keys_rules() -> None:
    assert _errors(_obj(l={
        "type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name", "missing", "obj"],
        "items": {"type": "object", "nullable": True, "properties": {
            "name": {"type": "string", "nullable": True},
            "obj": {"type": "object", "default": {}}}}})) == [
        f'{P}.properties[l].x-kubernetes-list-map-keys: Invalid value: []string{{"name", '
        '"missing", "obj"}: entries must all be names of item properties',
        f'{P}.properties[l].items.properties[obj].type: Invalid value: "object": must be a '
        "scalar type if parent array's x-kubernetes-list-type is map",
        f"{P}.properties[l].items.nullable: Forbidden: cannot be nullable when "
        "x-kubernetes-list-type is map",
        f"{P}.properties[l].items.properties[name].default: Required value: this property is in "
        "x-kubernetes-list-map-keys, so it must have a default or be a required property",
        f"{P}.properties[l].items.properties[name].nullable: Forbidden: this property is in "
        "x-kubernetes-list-map-keys, so it cannot be nullable"]


def test_set_items_must_be_atomic() -> None:
    assert _errors(_obj(s={"type": "array", "x-kubernetes-list-type": "set",
                           "items": {"type": "object"}})) == [
        f"{P}.properties[s].items.x-kubernetes-map-type: Invalid value: null: must be atomic as "
        "item of a list with x-kubernetes-list-type=set"]


def test_defaults_must_be_pruned_and_valid() -> None:
    """crds.md §1.7: ``ValidateDefaults`` (kube-openapi errors under ``.default``)."""
    assert _errors(_obj(spec=_obj(
        d={"type": "object", "default": {"a": "x", "b": 1},
           "properties": {"a": {"type": "string"}}},
        n={"type": "integer", "default": "x"},
        e={"type": "string", "enum": ["a"], "default": "b"}))) == [
        f'{P}.properties[spec].properties[d].default: Invalid value: map[string]interface '
        '{}{"a":"x", "b":1}: must not have unknown fields',
        f'{P}.properties[spec].properties[n].default: Invalid value: "string":  in body must be '
        'of type integer: "string"',
        f'{P}.properties[spec].properties[e].default: Unsupported value: "b": supported '
        'values: "a"']


def test_defaults_forbidden_in_top_level_meta() -> None:
    assert _errors(_obj(metadata=_obj(name={"type": "string", "default": "x"}),
                        kind={"type": "string", "default": "K"})) == [
        f"{P}.properties[metadata].properties[name].default: Forbidden: must not be set in "
        "top-level metadata",
        f"{P}.properties[kind].default: Forbidden: must not be set in top-level kind"]


def test_default_inside_embedded_resource_needs_type_meta() -> None:
    schema = _obj(t={"type": "object", "x-kubernetes-embedded-resource": True,
                     "x-kubernetes-preserve-unknown-fields": True,
                     "default": {"kind": 5}})
    assert _errors(schema) == [
        f"{P}.properties[t].default.kind: Invalid value: 5: must be a string"]


def test_status_subresource_root_fields() -> None:
    assert _errors({"type": "object", "anyOf": [{"required": ["spec"]}],
                    "properties": {"spec": {"type": "object"}}},
                   status_subresource=True)[0].endswith(
        "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum "
        "MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items "
        "Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are "
        "allowed at the root of the schema if the status subresource is enabled")
    assert _errors({"type": "string"}, status_subresource=True)[0] == (
        f'{P}.type: Invalid value: "string": only "object" is allowed as the type at the root '
        "of the schema if the status subresource is enabled")
    assert _errors(_obj(spec={"type": "object"}), status_subresource=True) == []


def test_validation_rules_hook_runs_where_kube_checks_rules() -> None:
    """The CEL module's checks run per node with rules, after the node's own list checks."""
    seen: list[str] = []

    def rules(node: Mapping[str, JSON], path: str) -> list[FieldError]:
        seen.append(path)
        return [invalid(f"{path}.x-kubernetes-validations[0].rule", "x", "bad")]

    schema = _obj(spec=_obj(a={"type": "string", "x-kubernetes-validations": [{"rule": "x"}]}))
    assert [str(e) for e in schema_errors(schema, P, validation_rules=rules)] == [
        f'{P}.properties[spec].properties[a].x-kubernetes-validations[0].rule: Invalid value: '
        '"x": bad']
    assert seen == [f"{P}.properties[spec].properties[a]"]
