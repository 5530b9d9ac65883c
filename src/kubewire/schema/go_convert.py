"""The error converting a builtin object from a map into its Go struct gives, or None.

A strategic merge patch's result never becomes JSON: kube-apiserver converts the patched map
straight into the Go struct with ``runtime.DefaultUnstructuredConverter`` (apimachinery
``pkg/runtime/converter.go`` ``fromUnstructured``; handlers/patch.go ``applyPatchToObject``).
Its errors carry no field path, and the first one ends the conversion:

- a struct, map or slice from another JSON kind: ``cannot restore struct from: string``,
  ``cannot restore map from slice``, ``cannot restore slice from map`` (the value's Go kind);
- a scalar: Go conversions between the same groups as JSON. An int64 converts to any number
  (silently truncated) and to no string (``cannot convert int64 to v1.RestartPolicy``); a
  float64 converts to an integer only if integral (``cannot convert float64 to int32``);
  anything else is ``unrecognized type: <destination kind>``;
- Quantity, IntOrString, Time and MicroTime run their ``UnmarshalJSON`` on ``json.Marshal`` of
  the value, so their errors have no field context (``... into Go value of type int32``);
- ``[]byte`` from a string is base64-decoded: ``error decoding from json: illegal base64 ...``.

Fields are visited in the object's key order (Go visits struct fields in declaration order,
which the schema facts do not keep; it matters only when there are several errors).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.schema import JSON, TypeNode, go_named_field_type, type_for
from kubewire.schema.go_decode import go_type_name
from kubewire.schema.go_values import (
    RFC3339,
    RFC3339_MICRO,
    base64_error,
    quantity_error,
    time_error,
)

_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_INT32 = (-(2**31), 2**31 - 1)
_INTEGER_KINDS = frozenset({"int32", "int64", "uint8"})


class _Failed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _go_kind(value: JSON) -> str:
    """``reflect.Kind`` of a decoded JSON value (ints are int64: PreserveInts)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "slice" if isinstance(value, list) else "map"


def _json_misfit(value: JSON) -> str:
    """How ``UnmarshalTypeError`` names the JSON ``json.Marshal`` makes of ``value``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _int32_unmarshal_error(value: JSON) -> str | None:
    """``json.Unmarshal(json.Marshal(value), &int32)``'s error (IntOrString's int half)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if (isinstance(value, float) and not value.is_integer()) or not (
                _INT32[0] <= value <= _INT32[1]):
            text = repr(value) if isinstance(value, float) else str(value)
            return f"json: cannot unmarshal number {text} into Go value of type int32"
        return None
    return f"json: cannot unmarshal {_json_misfit(value)} into Go value of type int32"


def _own_unmarshaler(node: TypeNode, value: JSON) -> bool:
    """Quantity, IntOrString, Time and MicroTime; True if ``node`` is one of them."""
    kind = node.type
    error: str | None = None
    if kind == "quantity":
        # Quantity.UnmarshalJSON parses the JSON text: only a string or a number can pass.
        number = _json_misfit(value) == "number"
        error = quantity_error(value if isinstance(value, str) else
                               str(value) if number else "{}")
    elif kind == "int-or-string":
        error = None if isinstance(value, str) else _int32_unmarshal_error(value)
    elif kind == "string" and node.format == "date-time":
        layout = RFC3339_MICRO if node.ref == _MICRO_TIME else RFC3339
        error = (time_error(value, layout) if isinstance(value, str) else
                 f"json: cannot unmarshal {_json_misfit(value)} into Go value of type string")
    else:
        return False
    if error is not None:
        raise _Failed(error)
    return True


def _scalar_kind(node: TypeNode) -> str:
    if node.type == "integer":
        return "int32" if node.format == "int32" else "int64"
    return {"boolean": "bool", "number": "float64"}.get(node.type, "string")


def _scalar(value: JSON, kind: str, go_type: str) -> None:
    """``fromUnstructured``'s simple-type branch for ``value`` into a ``kind`` Go value."""
    source = _go_kind(value)
    if source == kind or (source == "int64" and kind in (*_INTEGER_KINDS, "float64")):
        return
    if source == "int64" and kind == "string":
        raise _Failed(f"cannot convert int64 to {go_type}")
    if source == "float64" and kind in _INTEGER_KINDS:
        if value.is_integer():
            return
        raise _Failed(f"cannot convert float64 to {go_type}")
    raise _Failed(f"unrecognized type: {kind}")


def _bytes(value: JSON) -> None:
    if isinstance(value, str):
        error = base64_error(value) if value else None
        if error is not None:
            raise _Failed(f"error decoding from json: {error}")
    elif isinstance(value, list):
        for item in value:
            if item is not None:
                _scalar(item, "uint8", "uint8")
    else:
        raise _Failed(f"cannot restore slice from {_go_kind(value)}")


def _struct(node: TypeNode, value: JSON) -> None:
    if not isinstance(value, dict):
        raise _Failed(f"cannot restore struct from: {_go_kind(value)}")
    type_name = node.target.name
    for key, child in value.items():
        prop = node.properties.get(key)
        if prop is not None:
            _convert(prop, child, go_named_field_type(type_name, key))


def _map(node: TypeNode, value: JSON) -> None:
    values = node.values
    if node.preserve_unknown_fields and values is None:
        return  # RawExtension, FieldsV1: any JSON
    if not isinstance(value, dict):
        raise _Failed(f"cannot restore map from {_go_kind(value)}")
    if values is not None:
        for child in value.values():
            _convert(values, child)


def _slice(node: TypeNode, value: JSON, named: str) -> None:
    if not isinstance(value, list):
        raise _Failed(f"cannot restore slice from {_go_kind(value)}")
    items = node.items
    if items is not None:
        item_name = named[2:] if named.startswith("[]") else ""
        for child in value:
            _convert(items, child, item_name)


def _convert(node: TypeNode, value: JSON, named: str = "") -> None:
    if value is None or node.type == "any" or _own_unmarshaler(node, value):
        return
    if node.type == "string" and node.format == "byte":
        _bytes(value)
    elif node.properties:
        _struct(node, value)
    elif node.type == "object":
        _map(node, value)
    elif node.type == "array":
        _slice(node, value, named)
    else:
        _scalar(value, _scalar_kind(node), go_type_name(node, named))


def convert_error(api_version: str, kind: str, obj: Mapping[str, JSON]) -> str | None:
    """The error ``FromUnstructured`` gives for ``obj`` into ``kind``'s Go struct, or None.

    Raises KeyError for a kind without a schema. Custom kinds are not Go structs: do not ask.
    """
    try:
        _convert(type_for(api_version, kind), dict(obj))
    except _Failed as failed:
        return failed.message
    return None


__all__ = ["convert_error"]
