"""CRD-time checks of a version's ``openAPIV3Schema``, with kube's paths, texts and order.

``schema_errors`` is ``AE:pkg/apis/apiextensions/validation/validation.go``
``validateCustomResourceDefinitionValidation`` for one schema, for a new CRD (every "ratchet on
persisted data" option on, as for a create):

1. with the status subresource, the root may only use some fields (``status_subresource``);
2. ``nullable`` at the root;
3. structural rules (``structural_rules``): if ``NewStructural`` fails, its error is held back
   and shown only when nothing else is wrong; else ``ValidateStructural``'s errors, or when there
   are none, ``ValidateDefaults``' (``default_rules``);
4. ``ValidateCustomResourceDefinitionOpenAPISchema`` over every node: unsupported OpenAPI fields
   (``$ref``, ``id``, ``definitions``, ...), ``type`` values, ``default`` where forbidden
   (top-level ``metadata``/``apiVersion``/``kind``, ``additionalProperties`` under resource
   meta), ``uniqueItems``, ``additionalProperties`` with ``properties``,
   ``x-kubernetes-preserve-unknown-fields: false``, map-type and list-type rules
   (``validateMapListKeysMapSet`` too). A node's own checks come after its children's, as
   in kube. Properties are visited in the schema's order (kube's is Go map order).

``x-kubernetes-validations`` rules are the CEL module's: ``validation_rules`` (when given) is
called at each node that has them, at the place kube checks them (after the node's list-type
checks), with the node's JSON and path, and returns their errors.

``path`` is the schema's field path as the caller prints it (``spec.versions[0].schema.
openAPIV3Schema``, or ``spec.validation.openAPIV3Schema`` for kube's hoisted single schema);
children are appended as kube prints them (``.properties[foo].type``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubewire.go_text import GoLiteral, go_string_slice
from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.default_rules import default_errors
from kubewire.server.apiextensions.schemas.structural import parse
from kubewire.server.apiextensions.schemas.structural_rules import (
    conversion_error,
    key,
    structural_errors,
)
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

RuleChecker = Callable[[Mapping[str, JSON], str], list[FieldError]]

OPENAPI_V3_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_META_FIELDS = frozenset({"metadata", "kind", "apiVersion"})
# JSONSchemaProps fields in struct order, with the JSON key of each, and whether the status
# subresource allows it at the root (allowedFieldsAtRootSchema).
_ROOT_FIELDS = (
    ("id", False), ("$schema", False), ("$ref", False), ("description", True), ("type", True),
    ("nullable", False), ("format", True), ("title", True), ("default", False),
    ("maximum", True), ("exclusiveMaximum", True), ("minimum", True),
    ("exclusiveMinimum", True), ("maxLength", True), ("minLength", True), ("pattern", True),
    ("maxItems", True), ("minItems", True), ("uniqueItems", True), ("multipleOf", True),
    ("enum", False), ("maxProperties", False), ("minProperties", False), ("required", True),
    ("items", True), ("allOf", False), ("oneOf", False), ("anyOf", False), ("not", False),
    ("properties", True), ("additionalProperties", False), ("patternProperties", False),
    ("dependencies", False), ("additionalItems", False), ("definitions", False),
    ("externalDocs", True), ("example", True), ("x-kubernetes-preserve-unknown-fields", True),
    ("x-kubernetes-embedded-resource", False), ("x-kubernetes-int-or-string", False),
    ("x-kubernetes-list-map-keys", False), ("x-kubernetes-list-type", False),
    ("x-kubernetes-map-type", False), ("x-kubernetes-validations", True),
)
_ALLOWED_AT_ROOT = ("[Description Type Format Title Maximum ExclusiveMaximum Minimum "
                    "ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems "
                    "MultipleOf Required Items Properties ExternalDocs Example "
                    "XPreserveUnknownFields XValidations]")


def schema_errors(schema: Mapping[str, JSON], path: str, *, root: bool = True,
                  status_subresource: bool = False,
                  validation_rules: RuleChecker | None = None) -> list[FieldError]:
    """Every CRD-time error of ``schema`` (see the module docstring), in kube's order.

    ``status_subresource``: the version enables ``/status`` (root fields restricted).
    ``root=False`` leaves out the rules only a resource's root schema has (``nullable``, the
    status-subresource fields, ``default`` forbidden in top-level meta); the structural rules
    always take ``schema`` as a root, as kube only ever checks whole ``openAPIV3Schema``s.
    """
    errors: list[FieldError] = []
    if root and status_subresource:
        errors.extend(_status_root_errors(schema, path))
    if root and schema.get("nullable") is True:
        errors.append(forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    held_back: list[FieldError] = []
    problem = conversion_error(schema)
    if problem:
        held_back.append(invalid(path, "", problem))
    else:
        structural = structural_errors(schema, path)
        if structural:
            errors.extend(structural)
        else:
            errors.extend(default_errors(parse(schema), path))
    errors.extend(_openapi_errors(schema, path, _Context(), root, validation_rules))
    if not errors:
        errors.extend(held_back)
    return errors


# JSONSchemaProps fields of plain Go string or bool type: "" and false are their zero values;
# every other field is a pointer, slice or map, non-zero whenever the JSON gives it (even ``[]``).
_PLAIN_FIELDS = frozenset({"id", "$schema", "description", "type", "nullable", "format", "title",
                           "exclusiveMaximum", "exclusiveMinimum", "pattern", "uniqueItems",
                           "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"})


def _status_root_errors(schema: Mapping[str, JSON], path: str) -> list[FieldError]:
    """The root fields the status subresource allows (the first offending one, in
    ``JSONSchemaProps`` field order)."""
    for field, allowed in _ROOT_FIELDS:
        value = schema.get(field)
        if value is None or (field in _PLAIN_FIELDS and value in (False, "")):
            continue
        if field == "type":
            if value != "object":
                return [invalid(f"{path}.type", value if isinstance(value, str) else "",
                                'only "object" is allowed as the type at the root of the '
                                "schema if the status subresource is enabled")]
            continue
        if not allowed:
            # kube prints the whole JSONSchemaProps struct (%#v, pointer addresses included)
            return [invalid(path, GoLiteral("apiextensions.JSONSchemaProps{...}"),
                            f"only {_ALLOWED_AT_ROOT} fields are allowed at the root of the "
                            "schema if the status subresource is enabled")]
    return []


class _Context:
    """``specStandardValidatorV3``'s state for one node."""

    __slots__ = ("allow_defaults", "disallow_reason", "inside_meta")

    def __init__(self, allow_defaults: bool = True, disallow_reason: str = "",
                 inside_meta: bool = False) -> None:
        self.allow_defaults = allow_defaults
        self.disallow_reason = disallow_reason
        self.inside_meta = inside_meta

    def forbidding_defaults(self, reason: str) -> _Context:
        return _Context(False, reason, self.inside_meta)

    def in_meta(self) -> _Context:
        return _Context(self.allow_defaults, self.disallow_reason, True)


def _map(value: JSON) -> Mapping[str, JSON]:
    return value if isinstance(value, dict) else {}


def _has(s: Mapping[str, JSON], field: str) -> bool:
    """Whether Go's decoded field is set, for ``specStandardValidatorV3``'s tests."""
    value = s.get(field)
    if field in ("additionalItems", "dependencies", "$ref"):
        return value is not None  # pointers and a map: set even when empty
    if field == "items":
        return isinstance(value, list) and bool(value)
    return bool(value)


_UNSUPPORTED = (("id", "id is not supported"),
                ("additionalItems", "additionalItems is not supported"),
                ("patternProperties", "patternProperties is not supported"),
                ("definitions", "definitions is not supported"),
                ("dependencies", "dependencies is not supported"),
                ("$ref", "$ref is not supported"))


def _standard(s: Mapping[str, JSON], path: str, ctx: _Context) -> list[FieldError]:
    """``specStandardValidatorV3.validate``."""
    errors: list[FieldError] = []
    type_ = s.get("type")
    type_ = type_ if isinstance(type_, str) else ""
    if type_ and type_ not in OPENAPI_V3_TYPES:
        errors.append(not_supported(f"{path}.type", type_, OPENAPI_V3_TYPES))
    if s.get("default") is not None and not ctx.allow_defaults:
        detail = "must not be set" + (f" {ctx.disallow_reason}" if ctx.disallow_reason else "")
        errors.append(forbidden(f"{path}.default", detail))
    errors += [forbidden(f"{path}.{field}", detail) for field, detail in _UNSUPPORTED
               if _has(s, field)]
    if type_ == "null":
        errors.append(forbidden(f"{path}.type",
                                "type cannot be set to null, use nullable as an alternative"))
    if _has(s, "items"):
        errors.append(forbidden(f"{path}.items", "items must be a schema object and not an array"))
    if ctx.inside_meta and s.get("x-kubernetes-embedded-resource") is True:
        errors.append(forbidden(f"{path}.x-kubernetes-embedded-resource",
                                "must not be used inside of resource meta"))
    return errors


def _openapi_errors(s: Mapping[str, JSON], path: str, ctx: _Context, is_root: bool,
                    rules: RuleChecker | None) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionOpenAPISchema`` (its schema errors): the node's
    standard checks, its children's errors, then its extension checks."""
    errors = _standard(s, path, ctx)
    if s.get("uniqueItems") is True:
        errors.append(forbidden(f"{path}.uniqueItems", "uniqueItems cannot be set to true since "
                                                       "the runtime complexity becomes quadratic"))
    properties = {k: v for k, v in _map(s.get("properties")).items() if isinstance(v, dict)}
    additional = s.get("additionalProperties")
    if properties and (additional is False or isinstance(additional, dict)):
        errors.append(forbidden(f"{path}.additionalProperties",
                                "additionalProperties and properties are mutual exclusive"))
    for child, child_path, child_ctx in _children(s, path, ctx, is_root, properties):
        errors += _openapi_errors(child, child_path, child_ctx, False, rules)
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        errors.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", False,
                              "must be true or undefined"))
    errors += _map_type_errors(s, path)
    errors += _list_type_errors(s, path)
    validations = s.get("x-kubernetes-validations")
    if rules is not None and isinstance(validations, list) and validations:
        errors += rules(s, path)
    return errors


_Child = tuple[Mapping[str, JSON], str, _Context]


def _children(s: Mapping[str, JSON], path: str, ctx: _Context, is_root: bool,
              properties: Mapping[str, Mapping[str, JSON]]) -> list[_Child]:
    """The nodes kube recurses into, in its order, each with its path and context."""
    out: list[_Child] = []
    additional = s.get("additionalProperties")
    if isinstance(additional, dict):
        sub = ctx.forbidding_defaults("inside additionalProperties applying to object "
                                      "metadata") if ctx.inside_meta else ctx
        out.append((additional, f"{path}.additionalProperties", sub))
    embedded = s.get("x-kubernetes-embedded-resource") is True
    for name, prop in properties.items():
        sub = ctx
        if (is_root or embedded) and name in _META_FIELDS:
            sub = sub.in_meta()
            if is_root:
                sub = sub.forbidding_defaults(f"in top-level {name}")
        out.append((prop, key(f"{path}.properties", name), sub))
    if isinstance(s.get("not"), dict):
        out.append((s["not"], f"{path}.not", ctx))
    for junctor in ("allOf", "oneOf", "anyOf"):
        value = s.get(junctor)
        out += [(sub_schema, f"{path}.{junctor}[{i}]", ctx)
                for i, sub_schema in enumerate(value if isinstance(value, list) else [])
                if isinstance(sub_schema, dict)]
    out += [(sub_schema, key(f"{path}.definitions", name), ctx)
            for name, sub_schema in _map(s.get("definitions")).items()
            if isinstance(sub_schema, dict)]
    items = s.get("items")
    if isinstance(items, dict):
        out.append((items, f"{path}.items", ctx))
    elif isinstance(items, list):
        out += [(sub_schema, f"{path}.items[{i}]", ctx) for i, sub_schema in enumerate(items)
                if isinstance(sub_schema, dict)]
    out += [(dependency, key(f"{path}.dependencies", name), ctx)
            for name, dependency in _map(s.get("dependencies")).items()
            if isinstance(dependency, dict)]
    return out


def _type_of(s: Mapping[str, JSON]) -> str:
    value = s.get("type")
    return value if isinstance(value, str) else ""


def _must_be_type(path: str, type_: str, detail: str) -> FieldError:
    return required(f"{path}.type", detail) if not type_ else invalid(f"{path}.type", type_,
                                                                      detail)


def _map_type_errors(s: Mapping[str, JSON], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    map_type = s.get("x-kubernetes-map-type")
    if isinstance(map_type, str):
        if _type_of(s) != "object":
            errors.append(_must_be_type(path, _type_of(s),
                                        "must be object if x-kubernetes-map-type is specified"))
        if map_type not in ("atomic", "granular"):
            errors.append(not_supported(f"{path}.x-kubernetes-map-type", map_type,
                                        ("atomic", "granular")))
    return errors


def _set_item_errors(item: Mapping[str, JSON], path: str) -> list[FieldError]:
    """A ``set`` list's items must be atomic (``requireAtomicSetType``)."""
    item_type = item.get("type")
    item_list_type = item.get("x-kubernetes-list-type")
    detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
    if item_type == "array" and isinstance(item_list_type, str) and item_list_type != "atomic":
        return [invalid(f"{path}.items.x-kubernetes-list-type", item_list_type, detail)]
    if item_type == "object" and item.get("x-kubernetes-map-type") != "atomic":
        # kube passes the item's list type as the value (normally unset: null)
        return [invalid(f"{path}.items.x-kubernetes-map-type",
                        item_list_type if isinstance(item_list_type, str) else None, detail)]
    return []


def _list_type_errors(s: Mapping[str, JSON], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    list_type = s.get("x-kubernetes-list-type")
    list_type = list_type if isinstance(list_type, str) else None
    item = s.get("items") if isinstance(s.get("items"), dict) else None
    if list_type is not None and _type_of(s) != "array":
        errors.append(_must_be_type(path, _type_of(s),
                                    "must be array if x-kubernetes-list-type is specified"))
    elif list_type == "set" and item is not None:
        errors += _set_item_errors(item, path)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errors.append(not_supported(f"{path}.x-kubernetes-list-type", list_type,
                                    ("atomic", "set", "map")))
    keys_raw = s.get("x-kubernetes-list-map-keys")
    keys = [k for k in keys_raw if isinstance(k, str)] if isinstance(keys_raw, list) else []
    if keys:
        detail = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            errors.append(required(f"{path}.x-kubernetes-list-type", detail))
        elif list_type != "map":
            errors.append(invalid(f"{path}.x-kubernetes-list-type", list_type, detail))
    if list_type == "map":
        errors += _list_map_errors(s, path, keys)
    if list_type in ("set", "map") and item is not None:
        errors += _map_list_keys_map_set(item, path, list_type, keys)
    return errors


def _list_map_errors(s: Mapping[str, JSON], path: str, keys: list[str]) -> list[FieldError]:
    errors: list[FieldError] = []
    items = s.get("items")
    if not keys:
        errors.append(required(f"{path}.x-kubernetes-list-map-keys",
                               "must not be empty if x-kubernetes-list-type is map"))
    if items is None:
        errors.append(required(f"{path}.items",
                               "must have a schema if x-kubernetes-list-type is map"))
        return errors
    if not isinstance(items, dict):
        return [*errors, invalid(f"{path}.items",
                                 GoLiteral("&apiextensions.JSONSchemaPropsOrArray{...}"),
                                 "must only have a single schema if x-kubernetes-list-type is "
                                 "map")]
    item_type = _type_of(items)
    if item_type != "object":
        return [*errors, invalid(f"{path}.items.type", item_type, "must be object if parent "
                                 "array's x-kubernetes-list-type is map")]
    item_props = _map(items.get("properties"))
    seen: set[str] = set()
    for k in keys:
        prop = item_props.get(k)
        if not isinstance(prop, dict):
            errors.append(invalid(f"{path}.x-kubernetes-list-map-keys", go_string_slice(keys),
                                  "entries must all be names of item properties"))
        elif prop.get("type") in ("array", "object"):
            errors.append(invalid(f"{key(path + '.items.properties', k)}.type", item_type,
                                  "must be a scalar type if parent array's "
                                  "x-kubernetes-list-type is map"))
        if k in seen:
            errors.append(invalid(f"{path}.x-kubernetes-list-map-keys", go_string_slice(keys),
                                  "must not contain duplicate entries"))
        seen.add(k)
    return errors


def _map_list_keys_map_set(item: Mapping[str, JSON], path: str, list_type: str,
                           keys: list[str]) -> list[FieldError]:
    """``validateMapListKeysMapSet``."""
    errors: list[FieldError] = []
    if item.get("nullable") is True:
        errors.append(forbidden(f"{path}.items.nullable",
                                f"cannot be nullable when x-kubernetes-list-type is {list_type}"))
    if list_type == "map":
        required_keys = item.get("required")
        required_keys = set(required_keys) if isinstance(required_keys, list) else set()
        item_props = _map(item.get("properties"))
        for k in keys:
            prop = item_props.get(k)
            if not isinstance(prop, dict):
                continue
            at = key(f"{path}.items.properties", k)
            if k not in required_keys and prop.get("default") is None:
                errors.append(required(f"{at}.default", "this property is in "
                                       "x-kubernetes-list-map-keys, so it must have a default or "
                                       "be a required property"))
            if prop.get("nullable") is True:
                errors.append(forbidden(f"{at}.nullable", "this property is in "
                                        "x-kubernetes-list-map-keys, so it cannot be nullable"))
    return errors


__all__ = ["OPENAPI_V3_TYPES", "RuleChecker", "schema_errors"]
