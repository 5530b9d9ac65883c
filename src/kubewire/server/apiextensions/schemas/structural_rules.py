"""Whether an ``openAPIV3Schema`` is structural: kube's ``NewStructural``, ``ValidateStructural``.

Ports, working on the schema's JSON:

- ``conversion_error``: the first error of ``AE:pkg/apiserver/schema/convert.go``
  ``NewStructural`` (``OpenAPIV3Schema '$ref' is not supported``, items given as an array,
  ``x-kubernetes-preserve-unknown-fields: false``), found in its walk order;
- ``structural_errors``: ``AE:pkg/apiserver/schema/validation.go`` ``ValidateStructural``
  (``validateStructuralInvariants``, ``validateStructuralMetadataInvariants``,
  ``validateNestedValueValidation``) plus ``complete.go`` ``validateStructuralCompleteness``
  (which starts from the root's junctors only), sorted by their full text as kube sorts them.

The nodes under ``allOf``/``anyOf``/``oneOf``/``not`` are kube's ``NestedValueValidation``: they
may not carry generic fields or extensions (``must be empty to be structural`` and friends), except
the int-or-string idiom ``anyOf: [{type: integer}, {type: string}]`` (alone or as ``allOf[0]``).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.regexes import pattern_error
from kubewire.status import FieldError, forbidden, invalid, required

_ROOT, _ITEM, _FIELD = range(3)
_UNSUPPORTED = (("id", "id"), ("$schema", "schema"), ("$ref", "$ref"),
                ("patternProperties", "patternProperties"), ("dependencies", "dependencies"),
                ("additionalItems", "additionalItems"), ("definitions", "definitions"))
# NestedValueValidation fields whose JSON ``[]`` is nil in Go (built by append).
_APPENDED = frozenset({"enum", "allOf", "anyOf", "oneOf", "x-kubernetes-validations"})


def _map(value: JSON) -> Mapping[str, JSON]:
    return value if isinstance(value, dict) else {}


def _str(node: Mapping[str, JSON], key: str) -> str:
    value = node.get(key)
    return value if isinstance(value, str) else ""


def _list(node: Mapping[str, JSON], key: str) -> list[JSON]:
    value = node.get(key)
    return value if isinstance(value, list) else []


def _present(node: Mapping[str, JSON], key: str) -> bool:
    """Whether Go's decoded field is non-zero for ``validateUnsupportedFields``' tests."""
    value = node.get(key)
    if key in ("$ref", "additionalItems"):
        return value is not None and (key != "$ref" or value != "")
    return bool(value)


def key(path: str, name: str) -> str:
    """``fldPath.Child(...).Key(name)`` rendering: ``<path>[<name>]``."""
    return f"{path}[{name}]"


# --- NewStructural -----------------------------------------------------------------------------

def conversion_error(node: Mapping[str, JSON]) -> str:
    """``NewStructural``'s error for ``node``, or ""."""
    return _convert(node, nested=False)


def _children_in_order(node: Mapping[str, JSON]) -> list[Mapping[str, JSON]]:
    """The junctor nodes in ``newValueValidation``'s order: not, allOf, anyOf, oneOf."""
    out = [node["not"]] if isinstance(node.get("not"), dict) else []
    for junctor in ("allOf", "anyOf", "oneOf"):
        out += [sub for sub in _list(node, junctor) if isinstance(sub, dict)]
    return out


def _convert(node: Mapping[str, JSON], nested: bool) -> str:
    for field, name in _UNSUPPORTED:
        if _present(node, field):
            return f"OpenAPIV3Schema '{name}' is not supported"
    for sub in _children_in_order(node):
        if err := _convert(sub, True):
            return err
    return _convert_structure(node, nested)


def _convert_structure(node: Mapping[str, JSON], nested: bool) -> str:
    if node.get("x-kubernetes-preserve-unknown-fields") is False:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    items = node.get("items")
    if isinstance(items, list) and items:
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    if isinstance(items, dict) and (err := _convert(items, nested)):
        return err
    for sub in _map(node.get("properties")).values():
        if isinstance(sub, dict) and (err := _convert(sub, nested)):
            return err
    additional = node.get("additionalProperties")
    if isinstance(additional, dict) and (err := _convert(additional, nested)):
        return err
    return ""


# --- ValidateStructural ------------------------------------------------------------------------

def structural_errors(root: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateStructural(path, NewStructural(root))``: invariants and completeness, sorted."""
    errors: list[FieldError] = []
    _invariants(root, _ROOT, path, errors)
    _completeness(root, root, path, path, errors)
    errors.sort(key=str)
    return errors


def _is_only_type(node: JSON, type_name: str) -> bool:
    """A nested node equal to ``NestedValueValidation{ForbiddenGenerics: {Type: type_name}}``."""
    if not isinstance(node, dict) or node.get("type") != type_name:
        return False
    for k, v in node.items():
        if k == "type" or v is None or v is False or v == "":
            continue
        if k in _APPENDED and v == []:
            continue
        return False
    return True


def _int_or_string_any_of(any_of: list[JSON]) -> bool:
    return (len(any_of) == 2 and _is_only_type(any_of[0], "integer")
            and _is_only_type(any_of[1], "string"))


def _invariants(s: Mapping[str, JSON], level: int, path: str, errors: list[FieldError]) -> None:
    type_ = _str(s, "type")
    items = s.get("items")
    if type_ == "array" and not isinstance(items, dict):
        errors.append(required(f"{path}.items", "must be specified"))
    if isinstance(items, dict):
        _invariants(items, _ITEM, f"{path}.items", errors)
    properties = {k: v for k, v in _map(s.get("properties")).items() if isinstance(v, dict)}
    for name, prop in properties.items():
        _invariants(prop, _FIELD, key(f"{path}.properties", name), errors)
    additional = s.get("additionalProperties")
    has_additional = isinstance(additional, dict | bool)
    if has_additional:
        if level == _ROOT:
            errors.append(forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(additional, dict):
            _invariants(additional, _FIELD, f"{path}.additionalProperties", errors)
    embedded = s.get("x-kubernetes-embedded-resource") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    _extension_invariants(s, path, errors)
    all_of = _list(s, "allOf")
    skip_any_of = _int_or_string_any_of(_list(s, "anyOf"))
    skip_first_all_of_any_of = bool(all_of) and isinstance(all_of[0], dict) and \
        _int_or_string_any_of(_list(all_of[0], "anyOf"))
    _value_validation(s, (skip_any_of, skip_first_all_of_any_of), path, errors)
    _type_invariants(s, level, path, errors, has_additional)
    _meta_invariants(properties, level == _ROOT or embedded, level, path, errors)
    if embedded and not preserve and not properties:
        errors.append(required(f"{path}.properties", "must not be empty if "
                               "x-kubernetes-embedded-resource is true without "
                               "x-kubernetes-preserve-unknown-fields"))


def _extension_invariants(s: Mapping[str, JSON], path: str, errors: list[FieldError]) -> None:
    """``validateExtensions``."""
    if s.get("x-kubernetes-int-or-string") is not True:
        return
    if s.get("x-kubernetes-preserve-unknown-fields") is True:
        errors.append(invalid(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                              "must be false if x-kubernetes-int-or-string is true"))
    if s.get("x-kubernetes-embedded-resource") is True:
        errors.append(invalid(f"{path}.x-kubernetes-embedded-resource", True,
                              "must be false if x-kubernetes-int-or-string is true"))


def _meta_invariants(properties: Mapping[str, Mapping[str, JSON]], check_metadata: bool,
                     level: int, path: str, errors: list[FieldError]) -> None:
    for name in ("kind", "apiVersion"):
        if check_metadata and name in properties and _str(properties[name], "type") != "string":
            errors.append(invalid(f"{key(path + '.properties', name)}.type",
                                  _str(properties[name], "type"), "must be string"))
    if "metadata" in properties:
        _metadata_invariants(properties["metadata"], check_metadata, level,
                             key(f"{path}.properties", "metadata"), errors)


def _type_invariants(s: Mapping[str, JSON], level: int, path: str, errors: list[FieldError],
                     has_additional: bool) -> None:
    type_ = _str(s, "type")
    embedded = s.get("x-kubernetes-embedded-resource") is True
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    if embedded and type_ != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        errors.append(required(f"{path}.type", detail) if not type_
                      else invalid(f"{path}.type", type_, detail))
    elif not type_ and not int_or_string and not preserve:
        detail = ("must not be empty at the root", "must not be empty for specified array items",
                  "must not be empty for specified object fields")[level]
        errors.append(required(f"{path}.type", detail))
    if embedded and has_additional:
        errors.append(forbidden(f"{path}.additionalProperties",
                                "must not be used if x-kubernetes-embedded-resource is set"))
    if level == _ROOT and type_ and type_ != "object":
        errors.append(invalid(f"{path}.type", type_, "must be object at the root"))


# Keys of a root ``metadata`` schema that do not count against it (validateStructural-
# MetadataInvariants resets type and default, and Go's zero values are no restriction).
_METADATA_IGNORED = frozenset({"type", "default"})


def _metadata_invariants(s: Mapping[str, JSON], check_metadata: bool, level: int, path: str,
                         errors: list[FieldError]) -> None:
    if check_metadata and _str(s, "type") != "object":
        errors.append(invalid(f"{path}.type", _str(s, "type"), "must be object"))
    if level != _ROOT:
        return
    properties = _map(s.get("properties"))
    names = set(properties)
    only_names = bool(names) and names <= {"name", "generateName"}
    for k, v in s.items():
        if k in _METADATA_IGNORED or v is None or v is False or v == "":
            continue
        if k == "properties" and (only_names or not properties):
            continue
        if k in _APPENDED and v == []:
            continue
        errors.append(forbidden(path, "must not specify anything other than name and "
                                      "generateName, but metadata is implicitly specified"))
        return


def _value_validation(v: Mapping[str, JSON], skips: tuple[bool, bool], path: str,
                      errors: list[FieldError]) -> None:
    """``validateValueValidation``: the junctors' nested nodes, then ``pattern``; ``skips``:
    (the anyOf is the int-or-string idiom, so is allOf[0]'s anyOf)."""
    skip_any_of, skip_all_of_any_of = skips
    if not skip_any_of:
        for i, sub in enumerate(_list(v, "anyOf")):
            _nested(_map(sub), False, f"{path}.anyOf[{i}]", errors)
    for i, sub in enumerate(_list(v, "allOf")):
        _nested(_map(sub), skip_all_of_any_of and i == 0, f"{path}.allOf[{i}]", errors)
    for i, sub in enumerate(_list(v, "oneOf")):
        _nested(_map(sub), False, f"{path}.oneOf[{i}]", errors)
    if isinstance(v.get("not"), dict):
        _nested(v["not"], False, f"{path}.not", errors)
    pattern = _str(v, "pattern")
    if pattern and (problem := pattern_error(pattern)):
        errors.append(invalid(f"{path}.pattern", pattern,
                              f"must be a valid regular expression, but isn't: {problem}"))


_NESTED_FORBIDDEN = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
    ("x-kubernetes-validations", "must be empty to be structural"),
)


def _nested_set(v: Mapping[str, JSON], field: str) -> bool:
    value = v.get(field)
    if field == "additionalProperties":
        return isinstance(value, dict) or value is True
    if field in ("x-kubernetes-list-type", "x-kubernetes-map-type"):
        return isinstance(value, str)
    if field in ("x-kubernetes-list-map-keys", "x-kubernetes-validations"):
        return isinstance(value, list) and bool(value)
    if field in ("nullable", "x-kubernetes-preserve-unknown-fields",
                 "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"):
        return value is True
    if field == "default":
        return value is not None
    return isinstance(value, str) and bool(value)


def _nested(v: Mapping[str, JSON], skip_any_of: bool, path: str,
            errors: list[FieldError]) -> None:
    """``validateNestedValueValidation``."""
    _value_validation(v, (skip_any_of, False), path, errors)
    if isinstance(v.get("items"), dict):
        _nested(v["items"], False, f"{path}.items", errors)
    properties = _map(v.get("properties"))
    for name, prop in properties.items():
        if isinstance(prop, dict):
            _nested(prop, False, key(f"{path}.properties", name), errors)
    for field, detail in _NESTED_FORBIDDEN:
        if _nested_set(v, field):
            errors.append(forbidden(f"{path}.{field}", detail))
    if "metadata" in properties:
        errors.append(forbidden(key(f"{path}.properties", "metadata"),
                                "must not be specified in a nested context"))


def _completeness(v: Mapping[str, JSON], s: Mapping[str, JSON] | None, s_path: str, v_path: str,
                  errors: list[FieldError]) -> None:
    """``validateValueValidationCompleteness``: junctors of ``v`` against structure ``s``."""
    if isinstance(v.get("not"), dict):
        _nested_completeness(v["not"], s, s_path, f"{v_path}.not", errors)
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(_list(v, junctor)):
            _nested_completeness(_map(sub), s, s_path, f"{v_path}.{junctor}[{i}]", errors)


def _nested_completeness(v: Mapping[str, JSON], s: Mapping[str, JSON] | None, s_path: str,
                         v_path: str, errors: list[FieldError]) -> None:
    if s is None:
        errors.append(required(s_path, f"because it is defined in {v_path}"))
        return
    _completeness(v, s, s_path, v_path, errors)
    if isinstance(v.get("items"), dict):
        items = s.get("items")
        _nested_completeness(v["items"], items if isinstance(items, dict) else None,
                             f"{s_path}.items", f"{v_path}.items", errors)
    s_props = _map(s.get("properties"))
    for name, prop in _map(v.get("properties")).items():
        if not isinstance(prop, dict):
            continue
        if name not in s_props or not isinstance(s_props[name], dict):
            errors.append(required(key(f"{s_path}.properties", name),
                                   f"because it is defined in {key(v_path + '.properties', name)}"))
        else:
            _nested_completeness(prop, s_props[name], key(f"{s_path}.properties", name),
                                 key(f"{v_path}.properties", name), errors)


__all__ = ["conversion_error", "key", "structural_errors"]
