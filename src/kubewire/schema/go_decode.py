"""The error kube-apiserver's JSON decoder reports for a builtin object, or None.

kube-apiserver decodes builtin kinds into Go structs with ``sigs.k8s.io/json``
(``UnmarshalCaseSensitivePreserveInts``, a fork of ``encoding/json``; ``internal/golang/
encoding/json/decode.go``), so a wrong JSON type is a decode error, not a validation error. The
decoder walks the document in order:

- a value that does not fit its Go type is skipped and the first such ``UnmarshalTypeError`` is
  kept while decoding goes on (``saveError``): ``json: cannot unmarshal <string|number|number
  1.5|bool|array|object> into Go struct field <innermost struct>.<JSON path without indexes or
  map keys> of type <Go type>``; through a pointer the element type is named;
- an error from a type's own ``UnmarshalJSON`` (Quantity, IntOrString, Time, MicroTime) stops
  decoding and wins over a kept one. Those that come from ``json.Unmarshal`` inside it are
  ``UnmarshalTypeError``s too and get the outer field context (``of type int32`` for an
  IntOrString, ``of type string`` for a Time); the others keep their own text;
- ``[]byte`` takes base64 text and keeps ``base64.CorruptInputError``'s text;
- unknown keys are skipped (strict decoding reports them separately); ``null`` fits anything.

Number texts are the decoded values printed back (``1.5``, ``2147483648``): a JSON literal such
as ``1e3`` was already read as a number and is printed ``1000.0``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubewire.schema import JSON, TypeNode, go_named_field_type, type_for
from kubewire.schema.go_values import (
    RFC3339,
    RFC3339_MICRO,
    base64_error,
    quantity_error,
    time_error,
)

_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
               "uint8": (0, 255)}


class _Stop(Exception):
    """An error returned (not saved) by the decoder: decoding ends with it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Walk:
    """The decoder's error context: innermost struct and field path, and the kept error."""

    struct: str = ""
    fields: list[str] = field(default_factory=list)
    saved: str | None = None

    def type_error(self, value: str, go_type: str) -> str:
        """``UnmarshalTypeError.Error()`` with this context (``addErrorContext``)."""
        if self.struct or self.fields:
            return (f"json: cannot unmarshal {value} into Go struct field "
                    f"{self.struct}.{'.'.join(self.fields)} of type {go_type}")
        return f"json: cannot unmarshal {value} into Go value of type {go_type}"

    def save(self, message: str) -> None:
        if self.saved is None:
            self.saved = message


def _json_kind(value: JSON) -> str:
    """How ``UnmarshalTypeError`` names a JSON value that fits no number type."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _number_text(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def _integer_misfit(value: JSON, go_type: str) -> str | None:
    """What ``literalStore`` calls a value an integer type cannot hold (None if it fits)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _json_kind(value)
    low, high = _INT_RANGES[go_type]
    if isinstance(value, float) or not low <= value <= high:
        return f"number {_number_text(value)}"
    return None


def go_type_name(node: TypeNode, named: str = "") -> str:
    """``reflect.Type.String()`` of the Go type behind ``node`` (``named`` when known)."""
    if named:
        return named
    if node.ref:
        package, _, name = node.ref.rpartition(".")
        return f"{package.rpartition('.')[2]}.{name}"
    kind = node.type
    if kind == "string":
        return "[]uint8" if node.format == "byte" else "string"
    if kind == "integer":
        return "int32" if node.format == "int32" else "int64"
    if kind == "array" and node.items is not None:
        return "[]" + go_type_name(node.items)
    if kind == "object" and node.values is not None:
        return "map[string]" + go_type_name(node.values)
    return {"number": "float64", "boolean": "bool"}.get(kind, "interface {}")


def _primitive(node: TypeNode, value: JSON, walk: _Walk, go_type: str) -> None:
    kind = node.type
    if kind == "integer":
        misfit = _integer_misfit(value, "int32" if node.format == "int32" else "int64")
    elif kind == "number":
        misfit = None if isinstance(value, int | float) and not isinstance(value, bool) else (
            _json_kind(value))
    elif kind == "boolean":
        misfit = None if isinstance(value, bool) else _json_kind(value)
    else:
        misfit = None if isinstance(value, str) else _json_kind(value)
    if misfit is not None:
        walk.save(walk.type_error(misfit, go_type))


def _bytes(value: JSON, walk: _Walk) -> None:
    """``[]byte``: base64 text, or an array of numbers 0..255."""
    if isinstance(value, str):
        error = base64_error(value)
        if error is not None:
            walk.save(error)
    elif isinstance(value, list):
        for item in value:
            misfit = None if item is None else _integer_misfit(item, "uint8")
            if misfit is not None:
                walk.save(walk.type_error(misfit, "uint8"))
    else:
        walk.save(walk.type_error(_json_kind(value), "[]uint8"))


def _own_unmarshaler(node: TypeNode, value: JSON, walk: _Walk) -> bool:
    """Quantity, IntOrString, Time and MicroTime decode themselves; True if ``node`` is one."""
    kind = node.type
    if kind == "quantity":
        text = value if isinstance(value, str) else _literal_text(value)
        error = quantity_error(text)
        if error is not None:
            raise _Stop(error)
        return True
    if kind == "int-or-string":
        misfit = None if isinstance(value, str) else _integer_misfit(value, "int32")
        if misfit is not None:
            raise _Stop(walk.type_error(misfit, "int32"))
        return True
    if kind == "string" and node.format == "date-time":
        if not isinstance(value, str):
            raise _Stop(walk.type_error(_json_kind(value), "string"))
        layout = RFC3339_MICRO if node.ref == _MICRO_TIME else RFC3339
        error = time_error(value, layout)
        if error is not None:
            raise _Stop(error)
        return True
    return False


def _literal_text(value: JSON) -> str:
    """A non-string JSON value as text; only its first character matters to ParseQuantity."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_text(value)
    return "[]" if isinstance(value, list) else "{}"


def _struct(node: TypeNode, value: dict[str, JSON], walk: _Walk) -> None:
    type_name = node.target.name
    struct = type_name.rpartition(".")[2]
    outer = walk.struct
    for key, child in value.items():
        prop = node.properties.get(key)
        if prop is None:
            continue
        walk.fields.append(key)
        walk.struct = struct
        _value(prop, child, walk, go_named_field_type(type_name, key))
        walk.fields.pop()
        walk.struct = outer


def _container(node: TypeNode, value: JSON, walk: _Walk, named: str) -> bool:
    """Decode into a struct, map or slice; False when ``value`` is not of its JSON kind."""
    if node.properties:
        if not isinstance(value, dict):
            return False
        _struct(node, value, walk)
    elif node.type == "object":
        if not isinstance(value, dict):
            return node.preserve_unknown_fields  # RawExtension, FieldsV1: any JSON
        values = node.values
        if values is not None:
            for child in value.values():
                _value(values, child, walk)
    else:
        if not isinstance(value, list):
            return False
        item_name = named[2:] if named.startswith("[]") else ""
        items = node.items
        if items is not None:
            for child in value:
                _value(items, child, walk, item_name)
    return True


def _value(node: TypeNode, value: JSON, walk: _Walk, named: str = "") -> None:
    """Decode ``value`` into ``node``'s Go type: save misfits, raise ``_Stop`` for hard errors."""
    if value is None or node.type == "any" or _own_unmarshaler(node, value, walk):
        return
    if node.type == "string" and node.format == "byte":
        _bytes(value, walk)
    elif node.properties or node.type in ("object", "array"):
        if not _container(node, value, walk, named):
            walk.save(walk.type_error(_json_kind(value), go_type_name(node, named)))
    else:
        _primitive(node, value, walk, go_type_name(node, named))


def decode_error(api_version: str, kind: str, obj: Mapping[str, JSON]) -> str | None:
    """The error decoding ``obj`` into ``kind``'s Go struct gives, or None when it decodes.

    Raises KeyError for a kind without a schema. Custom kinds are not Go structs: do not ask.
    """
    walk = _Walk()
    try:
        _value(type_for(api_version, kind), dict(obj), walk)
    except _Stop as stop:
        return stop.message
    return walk.saved


__all__ = ["decode_error", "go_type_name"]
