"""Uniqueness of ``x-kubernetes-list-type: set`` and ``map`` lists in a custom resource.

A port of ``AE:pkg/apiserver/schema/listtype/validation.go`` ``ValidateListSetsAndMaps``: a
``set`` may not hold a value twice, a ``map`` list may not hold two items with the same key
fields. Only the second occurrence of a value is reported (``validateListSet`` counts), as
``<path>[<i>]: Duplicate value: <v>``; for a map list the value is the key as Go's ``%#v`` prints
a ``map[string]interface {}`` (``{"name":"a"}``; ``{}`` for an item without the key). An item of a
map list that is neither an object nor null stops that list's check with ``must be an object for
an array of list-type map``. Scalars are compared as Go compares interface values (the ``int64``
1 and the ``float64`` 1 differ), objects and lists by their ``json.Marshal`` text. Walks only
what the schema declares (properties, ``additionalProperties`` values first, list items).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.go_values import field_value, json_key, scalar_key
from kubewire.server.apiextensions.schemas.structural import Structural
from kubewire.status import FieldError, invalid


def validate_list_types(schema: Structural, obj: Mapping[str, JSON],
                        path: str = "") -> list[FieldError]:
    """``ValidateListSetsAndMaps(<path or nil>, schema, obj)``."""
    errors: list[FieldError] = []
    if schema.has_list_checks:
        _object(path, schema, obj, errors)
    return errors


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _object(path: str, s: Structural, obj: Mapping[str, JSON], errors: list[FieldError]) -> None:
    additional = s.additional_schema
    if additional is not None:
        for k, v in obj.items():
            _value(f"{path}[{k}]", additional, v, errors)
    if s.properties:
        for k, v in obj.items():
            sub = s.properties.get(k)
            if sub is not None:
                _value(_child(path, k), sub, v, errors)


def _value(path: str, s: Structural, obj: JSON, errors: list[FieldError]) -> None:
    if not s.has_list_checks:
        return
    if isinstance(obj, list):
        _array(path, s, obj, errors)
    elif isinstance(obj, dict):
        _object(path, s, obj, errors)


def _duplicate(path: str, value: JSON) -> FieldError:
    return FieldError("FieldValueDuplicate", path, field_value(value))


def _array(path: str, s: Structural, obj: list[JSON], errors: list[FieldError]) -> None:
    if s.list_type == "set":
        errors.extend(_duplicate(f"{path}[{i}]", obj[i]) for i in _non_unique(obj))
    elif s.list_type == "map":
        errors.extend(_list_map(path, s, obj))
    if s.items is not None:
        for i, item in enumerate(obj):
            _value(f"{path}[{i}]", s.items, item, errors)


_UNSPECIFIED = object()  # listtype's unspecifiedKeyValue{}: an item without the key


def _identity(x: JSON) -> object:
    if x is _UNSPECIFIED:
        return x
    if isinstance(x, dict | list):
        return ("compound", json_key(x))
    return scalar_key(x)


def _non_unique(values: list[JSON]) -> list[int]:
    """Indices of each value's second occurrence (``validateListSet``)."""
    if len(values) <= 1:
        return []
    seen: dict[object, int] = {}
    out: list[int] = []
    for i, x in enumerate(values):
        key = _identity(x)
        times = seen.get(key, 0)
        seen[key] = times + 1
        if times == 1:
            out.append(i)
    return out


def _list_map(path: str, s: Structural, obj: list[JSON]) -> list[FieldError]:
    for i, x in enumerate(obj):
        if x is not None and not isinstance(x, dict):
            return [invalid(f"{path}[{i}]", field_value(x),
                            "must be an object for an array of list-type map")]
    if len(obj) <= 1:
        return []
    keys: list[JSON]
    if len(s.list_map_keys) == 1:
        key_field = s.list_map_keys[0]
        keys = [x[key_field] if isinstance(x, dict) and key_field in x else _UNSPECIFIED
                for x in obj]
        return [_duplicate(f"{path}[{i}]",
                           {} if keys[i] is _UNSPECIFIED else {key_field: keys[i]})
                for i in _non_unique(keys)]
    keys = [{k: x[k] for k in s.list_map_keys if k in x} if isinstance(x, dict) else {}
            for x in obj]
    return [_duplicate(f"{path}[{i}]", keys[i]) for i in _non_unique(keys)]


__all__ = ["validate_list_types"]
