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

from kubewire.go_text import go_json_kind
from kubewire.json_types import JSON
from kubewire.quantity import quantity_error
from kubewire.schema.go_decode_typed import decodes_cleanly
from kubewire.schema.go_types import GoType, go_type_of
from kubewire.schema.go_values import (
    RFC3339,
    RFC3339_MICRO,
    base64_error,
    time_error,
)

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


def _int32_unmarshal_error(value: JSON) -> str | None:
    """``json.Unmarshal(json.Marshal(value), &int32)``'s error (IntOrString's int half)."""
    if go_json_kind(value) != "number":
        return f"json: cannot unmarshal {go_json_kind(value)} into Go value of type int32"
    if (isinstance(value, float) and not value.is_integer()) or not (
            _INT32[0] <= value <= _INT32[1]):
        text = repr(value) if isinstance(value, float) else str(value)
        return f"json: cannot unmarshal number {text} into Go value of type int32"
    return None


def _self_decoding(go_type: GoType, value: JSON) -> None:
    """Quantity, IntOrString, Time, MicroTime: ``UnmarshalJSON`` of ``json.Marshal(value)``."""
    kind = go_type.kind
    error: str | None = None
    if kind == "quantity":
        # Quantity.UnmarshalJSON parses the JSON text: only a string or a number can pass.
        number = go_json_kind(value) == "number"
        error = quantity_error(value if isinstance(value, str) else
                               str(value) if number else "{}")
    elif kind == "intstr":
        error = None if isinstance(value, str) else _int32_unmarshal_error(value)
    elif not isinstance(value, str):
        error = f"json: cannot unmarshal {go_json_kind(value)} into Go value of type string"
    else:
        error = time_error(value, RFC3339_MICRO if kind == "microtime" else RFC3339)
    if error is not None:
        raise _Failed(error)


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


def _container(go_type: GoType, value: JSON) -> None:
    kind = go_type.kind
    if kind == "struct":
        if not isinstance(value, dict):
            raise _Failed(f"cannot restore struct from: {_go_kind(value)}")
        for key, child in value.items():
            sub = go_type.fields.get(key)
            if sub is not None:
                _convert(sub, child)
        return
    expected = dict if kind == "map" else list
    if not isinstance(value, expected):
        raise _Failed(f"cannot restore {kind} from {_go_kind(value)}")
    element = go_type.values if kind == "map" else go_type.items
    if element is not None:
        for child in value.values() if isinstance(value, dict) else value:
            _convert(element, child)


def _convert(go_type: GoType, value: JSON) -> None:
    kind = go_type.kind
    if value is None or kind in ("any", "raw"):
        return
    if kind in ("quantity", "intstr", "time", "microtime"):
        _self_decoding(go_type, value)
    elif kind == "bytes":
        _bytes(value)
    elif kind in ("struct", "map", "slice"):
        _container(go_type, value)
    else:
        _scalar(value, kind, go_type.name)


def convert_error(api_version: str, kind: str, obj: Mapping[str, JSON]) -> str | None:
    """The error ``FromUnstructured`` gives for ``obj`` into ``kind``'s Go struct, or None.

    Raises KeyError for a kind without a schema. Custom kinds are not Go structs: do not ask.
    Most objects convert: the typed decode (``go_decode_typed``, one C pass) says so first,
    and only an object it does not accept is walked here. What JSON decoding accepts, this
    conversion accepts too: the same fields by exact name, strings and booleans alike, an
    integer field given an in-range integer (the conversion also takes integral floats and
    truncates), the self-decoding types checked by the same functions.
    """
    if decodes_cleanly(api_version, kind, obj):
        return None
    return walked_convert_error(api_version, kind, obj)


def walked_convert_error(api_version: str, kind: str, obj: Mapping[str, JSON]) -> str | None:
    """``convert_error`` found by the walk alone (what the typed decode must agree with)."""
    try:
        _convert(go_type_of(api_version, kind), dict(obj))
    except _Failed as failed:
        return failed.message
    return None


__all__ = ["convert_error", "walked_convert_error"]
