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


def _number_text(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def _integer_misfit(value: JSON, go_kind: str) -> str | None:
    """What ``literalStore`` calls a value an integer type cannot hold (None if it fits)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return go_json_kind(value)
    low, high = _INT_RANGES[go_kind]
    if isinstance(value, float) or not low <= value <= high:
        return f"number {_number_text(value)}"
    return None


def _scalar_misfit(go_type: GoType, value: JSON) -> str | None:
    kind = go_type.kind
    if kind in _INT_RANGES:
        return _integer_misfit(value, kind)
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    fits = {"float64": is_number, "bool": isinstance(value, bool)}.get(
        kind, isinstance(value, str))
    return None if fits else go_json_kind(value)


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
        walk.save(walk.type_error(go_json_kind(value), "[]uint8"))


def _literal_text(value: JSON) -> str:
    """A non-string JSON value as text; only its first character matters to ParseQuantity."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_text(value)
    return "[]" if isinstance(value, list) else "{}"


def _self_decoding(go_type: GoType, value: JSON, walk: _Walk) -> None:
    """Quantity, IntOrString, Time and MicroTime: their ``UnmarshalJSON`` errors end decoding."""
    kind = go_type.kind
    error: str | None = None
    if kind == "quantity":
        error = quantity_error(value if isinstance(value, str) else _literal_text(value))
    elif kind == "intstr" and not isinstance(value, str):
        misfit = _integer_misfit(value, "int32")
        error = None if misfit is None else walk.type_error(misfit, "int32")
    elif kind in ("time", "microtime"):
        if not isinstance(value, str):
            error = walk.type_error(go_json_kind(value), "string")
        else:
            error = time_error(value, RFC3339_MICRO if kind == "microtime" else RFC3339)
    if error is not None:
        raise _Stop(error)


def _struct(go_type: GoType, value: dict[str, JSON], walk: _Walk) -> None:
    outer = walk.struct
    for key, child in value.items():
        sub = go_type.fields.get(key)
        if sub is None:
            continue
        walk.fields.append(key)
        walk.struct = go_type.struct
        _value(sub, child, walk)
        walk.fields.pop()
        walk.struct = outer


def _container(go_type: GoType, value: JSON, walk: _Walk) -> bool:
    """Decode into a struct, map or slice; False when ``value`` is not of its JSON kind."""
    kind = go_type.kind
    if kind == "struct" and isinstance(value, dict):
        _struct(go_type, value, walk)
    elif kind == "map" and isinstance(value, dict):
        if go_type.values is not None:
            for child in value.values():
                _value(go_type.values, child, walk)
    elif kind == "slice" and isinstance(value, list):
        if go_type.items is not None:
            for child in value:
                _value(go_type.items, child, walk)
    else:
        return False
    return True


_CONTAINERS = frozenset({"struct", "map", "slice"})
_SELF_DECODING = frozenset({"quantity", "intstr", "time", "microtime"})


def _value(go_type: GoType, value: JSON, walk: _Walk) -> None:
    """Decode ``value`` into ``go_type``: save misfits, raise ``_Stop`` for hard errors."""
    kind = go_type.kind
    if value is None or kind in ("any", "raw"):
        return
    if kind in _SELF_DECODING:
        _self_decoding(go_type, value, walk)
    elif kind == "bytes":
        _bytes(value, walk)
    elif kind in _CONTAINERS:
        if not _container(go_type, value, walk):
            walk.save(walk.type_error(go_json_kind(value), go_type.name))
    else:
        misfit = _scalar_misfit(go_type, value)
        if misfit is not None:
            walk.save(walk.type_error(misfit, go_type.name))


def decode_error(api_version: str, kind: str, obj: Mapping[str, JSON]) -> str | None:
    """The error decoding ``obj`` into ``kind``'s Go struct gives, or None when it decodes.

    Raises KeyError for a kind without a schema. Custom kinds are not Go structs: do not ask.
    Most objects decode: a typed decode in C says so first (``go_decode_typed``), and only an
    object it does not accept is walked here.
    """
    if decodes_cleanly(api_version, kind, obj):
        return None
    return walked_decode_error(api_version, kind, obj)


def walked_decode_error(api_version: str, kind: str, obj: Mapping[str, JSON]) -> str | None:
    """``decode_error`` found by the walk alone (what the typed decode must agree with)."""
    walk = _Walk()
    try:
        _value(go_type_of(api_version, kind), dict(obj), walk)
    except _Stop as stop:
        return stop.message
    return walk.saved


__all__ = ["decode_error", "walked_decode_error"]
