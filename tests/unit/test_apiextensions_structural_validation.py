"""Request-time validation of custom resources: kube-openapi's messages, kube's field paths.

Expected texts follow ``kube-openapi:pkg/validation/errors/schema.go`` (message formats),
``pkg/validation/validate`` (which checks run, their order, ``MatchCount``) and
``apiextensions-apiserver:pkg/apiserver/validation/validation.go``
``kubeOpenAPIResultToFieldErrors`` (error types and paths), as crds.md §4.5 lists them.
"""

from __future__ import annotations

from typing import Any

from kubewire.server.apiextensions.schemas.schema_validation import (
    validate,
    validate_schema,
    validate_status,
)
from kubewire.server.apiextensions.schemas.structural import parse
from kubewire.status import FieldError


def _spec_schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {
        "spec": {"type": "object", "properties": props}}}


def _texts(schema: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate(parse(schema), obj)]


def test_type_mismatch_is_type_invalid_with_kube_openapi_text() -> None:
    """``typeValidator``: ``InvalidType`` → ``field.TypeInvalid`` (crds.md §4.5 example)."""
    errors = validate(parse(_spec_schema(replicas={"type": "integer"})),
                      {"spec": {"replicas": "3"}})
    assert [str(e) for e in errors] == [
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type '
        'integer: "string"']
    assert errors[0].to_cause() == {
        "reason": "FieldValueTypeInvalid", "field": "spec.replicas",
        "message": 'Invalid value: "string": spec.replicas in body must be of type integer: '
                   '"string"'}


def test_integral_float_is_an_integer_and_integer_a_number() -> None:
    """``isFloatInt``/``isIntFloat`` in ``typeValidator.Validate``."""
    schema = _spec_schema(i={"type": "integer"}, n={"type": "number"})
    assert _texts(schema, {"spec": {"i": 2.0, "n": 3}}) == []
    assert _texts(schema, {"spec": {"i": 2.5}}) == [
        'spec.i: Invalid value: "number": spec.i in body must be of type integer: "number"']


def test_null_on_non_nullable_and_nullable() -> None:
    """``SchemaValidator.Validate`` with nil data runs the type validator: ``"null"``."""
    schema = _spec_schema(a={"type": "string"}, b={"type": "string", "nullable": True})
    assert _texts(schema, {"spec": {"a": None, "b": None}}) == [
        'spec.a: Invalid value: "null": spec.a in body must be of type string: "null"']


def test_int_or_string_type_names_both() -> None:
    """``ConvertJSONSchemaProps``: int-or-string is ``type: [integer, string]``; the anyOf idiom
    then fails too, reported at the nil path with the best branch's error."""
    schema = _spec_schema(port={"x-kubernetes-int-or-string": True,
                                "anyOf": [{"type": "integer"}, {"type": "string"}]})
    assert _texts(schema, {"spec": {"port": 80}}) == []
    assert _texts(schema, {"spec": {"port": "http"}}) == []
    assert _texts(schema, {"spec": {"port": True}}) == [
        'spec.port: Invalid value: "boolean": spec.port in body must be of type '
        'integer,string: "boolean"',
        '<nil>: Invalid value: "": "spec.port" must validate at least one schema (anyOf)',
        'spec.port: Invalid value: "boolean": spec.port in body must be of type integer: '
        '"boolean"']


def test_required_missing_and_present_null() -> None:
    """``objectValidator``: ``Required(path+"."+k)`` only for absent keys; a present null is
    type-checked instead."""
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "required": ["a", "b"],
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}}
    assert _texts(schema, {"spec": {"b": None}}) == [
        'spec.b: Invalid value: "null": spec.b in body must be of type string: "null"',
        "spec.a: Required value"]


def test_required_at_root() -> None:
    """The root's path is "": ``.spec`` with the dot trimmed by kubeOpenAPIResultToFieldErrors."""
    schema = {"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}}
    assert _texts(schema, {"apiVersion": "a/v1"}) == ["spec: Required value"]


def test_enum_quotes_every_supported_value() -> None:
    """EnumFailCode → ``field.NotSupported``; non-strings are ``json.Marshal``ed, then quoted."""
    schema = _spec_schema(mode={"type": "string", "enum": ["a", "b"]},
                          n={"type": "integer", "enum": [1, 2]})
    assert _texts(schema, {"spec": {"mode": "c", "n": 3}}) == [
        'spec.mode: Unsupported value: "c": supported values: "a", "b"',
        'spec.n: Unsupported value: 3: supported values: "1", "2"']


def test_enum_fails_for_null_even_when_nullable() -> None:
    """``basicCommonValidator`` never matches a nil value."""
    schema = _spec_schema(mode={"type": "string", "nullable": True, "enum": ["a"]})
    assert _texts(schema, {"spec": {"mode": None}}) == [
        'spec.mode: Unsupported value: null: supported values: "a"']


def test_pattern_min_length_and_max_length() -> None:
    """``stringValidator``: the first failing of maxLength, minLength, pattern."""
    schema = _spec_schema(name={"type": "string", "pattern": "^[a-z]+$", "minLength": 2,
                                "maxLength": 4})
    assert _texts(schema, {"spec": {"name": "abcdef"}}) == [
        "spec.name: Too long: may not be more than 4 bytes"]
    assert _texts(schema, {"spec": {"name": "a"}}) == [
        'spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long']
    assert _texts(schema, {"spec": {"name": "AB"}}) == [
        "spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"]


def test_lengths_count_characters() -> None:
    """``utf8.RuneCount``: ``é`` is one character."""
    schema = _spec_schema(name={"type": "string", "maxLength": 2})
    assert _texts(schema, {"spec": {"name": "éé"}}) == []


def test_minimum_maximum_inclusive_and_exclusive() -> None:
    """``MinimumNativeType``/``MaximumNativeType`` texts (crds.md §4.5 example)."""
    schema = _spec_schema(replicas={"type": "integer", "minimum": 1, "maximum": 5},
                          x={"type": "integer", "minimum": 1, "exclusiveMinimum": True,
                             "maximum": 5, "exclusiveMaximum": True})
    assert _texts(schema, {"spec": {"replicas": 0, "x": 1}}) == [
        "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or "
        "equal to 1",
        "spec.x: Invalid value: 1: spec.x in body should be greater than 1"]
    assert _texts(schema, {"spec": {"replicas": 6, "x": 5}}) == [
        "spec.replicas: Invalid value: 6: spec.replicas in body should be less than or equal "
        "to 5",
        "spec.x: Invalid value: 5: spec.x in body should be less than 5"]


def test_float_bounds_print_as_go_float64() -> None:
    """Float data compares with the float64 bound, printed with ``%v`` (``1e+06``)."""
    schema = _spec_schema(f={"type": "number", "minimum": 1000000})
    assert _texts(schema, {"spec": {"f": 1.5}}) == [
        "spec.f: Invalid value: 1.5: spec.f in body should be greater than or equal to 1e+06"]


def test_integer_data_truncates_the_bound() -> None:
    """``MinimumNativeType`` for an int64: ``MinimumInt(value, int64(min))``: 1 passes 1.5."""
    schema = _spec_schema(n={"type": "integer", "minimum": 1.5})
    assert _texts(schema, {"spec": {"n": 1}}) == []


def test_multiple_of() -> None:
    """``MultipleOfNativeType``: integer factor for integer data; the float form otherwise."""
    schema = _spec_schema(n={"type": "integer", "multipleOf": 3},
                          f={"type": "number", "multipleOf": 0.5})
    assert _texts(schema, {"spec": {"n": 7, "f": 0.75}}) == [
        "spec.n: Invalid value: 7: spec.n in body should be a multiple of 3",
        "spec.f: Invalid value: 0.75: spec.f in body should be a multiple of 0.5"]
    assert _texts(schema, {"spec": {"n": 9, "f": 1.5}}) == []


def test_items_min_max() -> None:
    """``schemaSliceValidator``: TooFewItems → Invalid, TooManyItems → ``field.TooMany``."""
    schema = _spec_schema(l={"type": "array", "minItems": 2, "maxItems": 3,
                             "items": {"type": "string"}})
    assert _texts(schema, {"spec": {"l": ["a"]}}) == [
        "spec.l: Invalid value: 1: spec.l in body should have at least 2 items"]
    assert _texts(schema, {"spec": {"l": ["a", "b", "c", "d"]}}) == [
        "spec.l: Too many: 4: must have at most 3 items"]
    assert _texts(schema, {"spec": {"l": ["a", 1]}}) == [
        'spec.l[1]: Invalid value: "integer": spec.l[1] in body must be of type string: '
        '"integer"']


def test_properties_min_max() -> None:
    """``objectValidator``: TooFewProperties → Invalid, TooManyProperties → TooMany."""
    schema = _spec_schema(m={"type": "object", "minProperties": 1, "maxProperties": 1,
                             "additionalProperties": {"type": "string"}})
    assert _texts(schema, {"spec": {"m": {}}}) == [
        "spec.m: Invalid value: 0: spec.m in body should have at least 1 properties"]
    assert _texts(schema, {"spec": {"m": {"a": "x", "b": "y"}}}) == [
        "spec.m: Too many: 2: must have at most 1 items"]


def test_additional_properties_values_use_dotted_paths() -> None:
    """``objectValidator``: additionalProperties values at ``o.Path + "." + key``."""
    schema = _spec_schema(m={"type": "object", "additionalProperties": {"type": "integer"}})
    assert _texts(schema, {"spec": {"m": {"k": "v"}}}) == [
        'spec.m.k: Invalid value: "string": spec.m.k in body must be of type integer: '
        '"string"']


def test_formats_checked_and_unsupported_formats_ignored() -> None:
    """``StripUnsupportedFormatsPostProcess``: int32 is dropped; date-time is enforced with the
    format's own name in the message (``FormatOf`` → ``InvalidType``)."""
    schema = _spec_schema(t={"type": "string", "format": "date-time"},
                          i={"type": "integer", "format": "int32"},
                          u={"type": "string", "format": "uuid"})
    assert _texts(schema, {"spec": {"t": "2024-01-02T03:04:05Z", "i": 2**40,
                                    "u": "123e4567-e89b-12d3-a456-426614174000"}}) == []
    assert _texts(schema, {"spec": {"t": "yesterday", "u": "x"}}) == [
        'spec.t: Invalid value: "yesterday": spec.t in body must be of type date-time: '
        '"yesterday"',
        'spec.u: Invalid value: "x": spec.u in body must be of type uuid: "x"']


def test_one_of_and_not_report_at_nil_path() -> None:
    """``schemaPropsValidator``: junctor errors are plain errors → ``field.Invalid(nil, "")``."""
    schema = _spec_schema(x={"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}],
                             "not": {"minimum": 100}})
    assert _texts(schema, {"spec": {"x": 5}}) == [
        '<nil>: Invalid value: "": "spec.x" must validate one and only one schema (oneOf). '
        "Found 2 valid alternatives"]
    assert _texts(schema, {"spec": {"x": 200}}) == [
        '<nil>: Invalid value: "": "spec.x" must not validate the schema (not)']


def test_all_of_lists_branch_errors_then_summary() -> None:
    schema = _spec_schema(x={"type": "integer", "allOf": [{"minimum": 10}]})
    assert _texts(schema, {"spec": {"x": 5}}) == [
        "spec.x: Invalid value: 5: spec.x in body should be greater than or equal to 10",
        '<nil>: Invalid value: "": "spec.x" must validate all the schemas (allOf). '
        "None validated"]


def test_identical_messages_are_reported_once() -> None:
    """``Result.AddErrors`` keeps messages unique."""
    schema = _spec_schema(x={"type": "integer", "allOf": [{"minimum": 10}, {"minimum": 10}]})
    assert len(_texts(schema, {"spec": {"x": 5}})) == 2


def test_root_metadata_name_restrictions_apply() -> None:
    """The whole object, metadata included, goes through the schema (validator.go)."""
    schema = {"type": "object", "properties": {"metadata": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 3}}}}}
    assert _texts(schema, {"metadata": {"name": "long"}}) == [
        "metadata.name: Too long: may not be more than 3 bytes"]


def test_status_endpoint_prefix() -> None:
    """``ValidateStatusUpdate``: status against ``properties.status`` under the path
    ``status``; kube-openapi's own text lacks the prefix (crds.md §4.5)."""
    schema = parse({"type": "object", "properties": {"status": {"type": "object", "properties": {
        "replicas": {"type": "integer", "minimum": 0}}}}})
    assert [str(e) for e in validate_status(schema, {"status": {"replicas": -1}})] == [
        "status.replicas: Invalid value: -1: replicas in body should be greater than or equal "
        "to 0"]
    assert validate_status(schema, {"spec": {}}) == []


def test_embedded_resource_needs_type_meta() -> None:
    """``objectmeta.validateEmbeddedResource``."""
    schema = _spec_schema(t={"type": "object", "x-kubernetes-embedded-resource": True,
                             "x-kubernetes-preserve-unknown-fields": True})
    assert _texts(schema, {"spec": {"t": {"metadata": {"name": "a/b"}}}}) == [
        "spec.t.apiVersion: Required value: must not be empty",
        "spec.t.kind: Required value: must not be empty",
        "spec.t.metadata.name: Invalid value: \"a/b\": may not contain '/'"]
    assert _texts(schema, {"spec": {"t": {"apiVersion": "a/b/c", "kind": "Bad_Kind"}}}) == [
        'spec.t.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c',
        'spec.t.kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise '
        "match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
        "start with an alphabetic character, and end with an alphanumeric character (e.g. "
        "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"]


def test_list_set_and_map_duplicates() -> None:
    """``listtype.ValidateListSetsAndMaps``: the second occurrence only; map keys as Go's
    ``%#v`` of ``map[string]interface {}`` (crds.md §7, §9 item 26)."""
    schema = _spec_schema(
        tags={"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        ports={"type": "array", "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": ["name"],
               "items": {"type": "object", "required": ["name"],
                         "properties": {"name": {"type": "string"}}}},
        pairs={"type": "array", "x-kubernetes-list-type": "map",
               "x-kubernetes-list-map-keys": ["a", "b"],
               "items": {"type": "object", "properties": {"a": {"type": "string"},
                                                          "b": {"type": "integer"}}}})
    obj = {"spec": {"tags": ["a", "b", "a", "a"],
                    "ports": [{"name": "x"}, {"name": "x"}],
                    "pairs": [{"a": "x", "b": 1}, {"b": 1, "a": "x"}]}}
    errors = validate(parse(schema), obj)
    assert [str(e) for e in errors] == [
        'spec.tags[2]: Duplicate value: "a"',
        'spec.ports[1]: Duplicate value: map[string]interface {}{"name":"x"}',
        'spec.pairs[1]: Duplicate value: map[string]interface {}{"a":"x", "b":1}']
    assert errors[0].to_cause()["reason"] == "FieldValueDuplicate"


def test_set_compares_go_types() -> None:
    """Scalars compare as Go interface values: int64 1 and float64 1.5 differ, bools too."""
    schema = _spec_schema(s={"type": "array", "x-kubernetes-list-type": "set",
                             "items": {"x-kubernetes-int-or-string": True}})
    assert [str(e) for e in validate(parse(schema), {"spec": {"s": [1, True, "1"]}})
            if "Duplicate" in str(e)] == []


def test_map_list_item_not_object() -> None:
    schema = _spec_schema(l={"type": "array", "x-kubernetes-list-type": "map",
                             "x-kubernetes-list-map-keys": ["k"],
                             "items": {"type": "object", "properties": {"k": {"type": "string"}}}})
    errors = validate(parse(schema), {"spec": {"l": [{"k": "a"}, "x"]}})
    assert str(errors[-1]) == ('spec.l[1]: Invalid value: "x": must be an object for an array of '
                               "list-type map")


def test_validate_schema_is_the_openapi_part_alone() -> None:
    schema = parse(_spec_schema(s={"type": "array", "x-kubernetes-list-type": "set",
                                   "items": {"type": "string"}}))
    assert validate_schema(schema, {"spec": {"s": ["a", "a"]}}) == []
    assert validate(schema, {"spec": {"s": ["a", "a"]}}) == [
        FieldError("FieldValueDuplicate", "spec.s[1]", "a")]
