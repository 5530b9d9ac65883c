"""Validation of embedded resources (``x-kubernetes-embedded-resource``) inside a custom resource.

A port of ``AE:pkg/apiserver/schema/objectmeta/validation.go`` ``Validate`` (resource root not
included: the server validates the root's type and object meta): each embedded object needs
``apiVersion`` and ``kind`` (``Required value: must not be empty``), both strings, ``apiVersion``
a parsable group/version, ``kind`` a DNS-1035 label in lower case (``may have mixed case, but
should otherwise match: ...``); its ``metadata`` is decoded as ``ObjectMeta`` and validated with
``ValidateObjectMeta`` and the path-segment name rule (``name`` may be empty: kube validates it as
``fakename``; a namespace, when set, must be a DNS-1123 label). Of ``ValidateObjectMeta`` this
checks names, namespace, generation, labels and annotations; owner references, finalizers and
managed fields inside embedded metadata are not checked here.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.go_text import go_byte_len
from kubewire.json_types import JSON
from kubewire.names import (
    is_dns1035_label,
    is_dns1123_label,
    is_path_segment_name,
    is_qualified_name,
    is_valid_label_value,
)
from kubewire.server.apiextensions.schemas.go_values import field_value
from kubewire.server.apiextensions.schemas.structural import Structural
from kubewire.status import FieldError, invalid, required

TOTAL_ANNOTATION_SIZE_MAX_BYTES = 256 * 1024  # apimachinery objectmeta.go TotalAnnotationSizeLimitB

# ObjectMeta fields and the Go type encoding/json expects for each (error texts below).
_STRING_FIELDS = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
                  "creationTimestamp", "deletionTimestamp")
_MAP_FIELDS = ("labels", "annotations")
_JSON_KINDS = {str: "string", bool: "bool", int: "number", float: "number", list: "array",
               dict: "object"}


def validate_embedded(schema: Structural, obj: JSON, path: str = "", *,
                      root_embedded: bool = False) -> list[FieldError]:
    """``objectmeta.Validate(<path or nil>, obj, schema, root_embedded)``: ``root_embedded``
    validates ``obj`` itself as a resource too."""
    errors: list[FieldError] = []
    if root_embedded and isinstance(obj, dict) and not schema.embedded_resource:
        errors.extend(_embedded_resource(path, obj))
    _walk(path, obj, schema, errors)
    return errors


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _walk(path: str, x: JSON, s: Structural | None, errors: list[FieldError]) -> None:
    if s is None or not s.has_embedded:
        return
    if isinstance(x, dict):
        if s.embedded_resource:
            errors.extend(_embedded_resource(path, x))
        for k, v in x.items():
            prop = s.properties.get(k)
            if prop is not None:
                _walk(_child(path, k), v, prop, errors)
            elif s.additional_properties is not None:
                _walk(f"{path}[{k}]", v, s.additional_schema, errors)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _walk(f"{path}[{i}]", v, s.items, errors)


def _group_version_error(api_version: str) -> str:
    """``schema.ParseGroupVersion``'s error, or ""."""
    if api_version.count("/") > 1:
        return f"unexpected GroupVersion string: {api_version}"
    return ""


def _type_meta_error(k: str, v: JSON, at: str) -> FieldError | None:
    if not isinstance(v, str):
        return invalid(at, field_value(v), "must be a string")
    if not v:
        return invalid(at, v, "must not be empty")
    if k == "apiVersion":
        problem = _group_version_error(v)
        return invalid(at, v, problem) if problem else None
    problems = is_dns1035_label(v.lower())
    if problems:
        return invalid(at, v, "may have mixed case, but should otherwise match: "
                       + ",".join(problems))
    return None


def _embedded_resource(path: str, x: Mapping[str, JSON]) -> list[FieldError]:
    errors = [required(_child(path, k), "must not be empty")
              for k in ("apiVersion", "kind") if k not in x]
    for k, v in x.items():
        at = _child(path, k)
        if k in ("apiVersion", "kind"):
            error = _type_meta_error(k, v, at)
            if error is not None:
                errors.append(error)
        elif k == "metadata":
            problem = decode_error(v)
            if problem:
                errors.append(invalid(at, field_value(v), problem))
            elif isinstance(v, dict):
                errors.extend(_object_meta(v, at))
    return errors


def decode_error(meta: JSON) -> str:
    """encoding/json's error decoding ``meta`` into a ``metav1.ObjectMeta`` (common cases)."""
    if meta is None:
        return ""
    if not isinstance(meta, dict):
        return (f"json: cannot unmarshal {_JSON_KINDS[type(meta)]} into Go value of type "
                "v1.ObjectMeta")
    for key, value in meta.items():
        if value is not None and (problem := _field_decode_error(key, value)):
            return problem
    return ""


def _unmarshal(value: JSON, field: str, go_type: str) -> str:
    return (f"json: cannot unmarshal {_JSON_KINDS[type(value)]} into Go struct field "
            f"ObjectMeta.{field} of type {go_type}")


def _field_decode_error(key: str, value: JSON) -> str:
    if key in _STRING_FIELDS and not isinstance(value, str):
        return _unmarshal(value, key, "string")
    if key in _MAP_FIELDS:
        if not isinstance(value, dict):
            return _unmarshal(value, key, "map[string]string")
        for item in value.values():
            if item is not None and not isinstance(item, str):
                return _unmarshal(item, key, "string")
    if key == "generation" and (isinstance(value, bool) or not isinstance(value, int)):
        return _unmarshal(value, key, "int64")
    return ""


def _text(meta: Mapping[str, JSON], key: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) else ""


def _object_meta(meta: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateObjectMetaAccessor`` with ``ValidatePathSegmentName`` (name defaulted)."""
    errors: list[FieldError] = []
    generate_name = _text(meta, "generateName")
    if generate_name:
        errors += [invalid(f"{path}.generateName", generate_name, m)
                   for m in is_path_segment_name(generate_name, True)]
    name = _text(meta, "name") or "fakename"
    errors += [invalid(f"{path}.name", name, m) for m in is_path_segment_name(name)]
    namespace = _text(meta, "namespace")
    if namespace:
        errors += [invalid(f"{path}.namespace", namespace, m) for m in is_dns1123_label(namespace)]
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errors.append(invalid(f"{path}.generation", generation,
                              "must be greater than or equal to 0"))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for key, value in labels.items():
            errors += [invalid(f"{path}.labels", key, m) for m in is_qualified_name(key)]
            if isinstance(value, str):
                errors += [invalid(f"{path}.labels", value, m) for m in is_valid_label_value(value)]
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        total = 0
        for key, value in annotations.items():
            errors += [invalid(f"{path}.annotations", key, m)
                       for m in is_qualified_name(key.lower())]
            total += go_byte_len(key) + go_byte_len(value if isinstance(value, str) else "")
        if total > TOTAL_ANNOTATION_SIZE_MAX_BYTES:
            errors.append(FieldError("FieldValueTooLong", f"{path}.annotations", detail=(
                f"may not be more than {TOTAL_ANNOTATION_SIZE_MAX_BYTES} bytes")))
    return errors


__all__ = ["decode_error", "validate_embedded"]
