"""A typed decode that proves a builtin object decodes into its Go struct, in one C pass.

``go_decode.decode_error`` walks an object in Python to find the first error kube's decoder
would report; nearly every object it sees has none. Here each kind's ``GoType`` tree becomes
msgspec types once (Structs whose fields are the Go struct's JSON names, ignoring other keys;
``dict``/``list`` for maps and slices; ``int`` bounded like ``int32``/``int64``/``uint8``;
``float``, ``bool``, ``str``), every field also ``None`` (``null`` fits anything), and the
types that decode themselves (Quantity, IntOrString's string side aside, Time, MicroTime,
``[]byte``) are marker classes checked by ``go_decode``'s own functions in msgspec's
``dec_hook``. ``msgspec.convert`` accepting the object means ``decode_error`` finds nothing
(each accepted value is one that walk accepts); a rejection says nothing, and the caller walks
in Python for kube's exact text. Kinds whose types contain themselves get no typed form.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any

import msgspec

from kubewire.json_types import JSON
from kubewire.quantity import quantity_error
from kubewire.schema.go_types import GoType, go_type_of
from kubewire.schema.go_values import RFC3339, RFC3339_MICRO, base64_error, time_error
from kubewire.schema.msgspec_ready import ready

_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
               "uint8": (0, 255)}


class _Quantity:
    """``resource.Quantity``: text that ``ParseQuantity`` takes."""


class _Time:
    """``metav1.Time``: RFC 3339 text."""


class _MicroTime:
    """``metav1.MicroTime``: RFC 3339 text with microseconds."""


class _Bytes:
    """``[]byte``: base64 text, or an array of bytes."""


class _Recursive(Exception):
    """A type that contains itself: msgspec types cannot be built for it here."""


_ACCEPTED: dict[type, Any] = {cls: cls() for cls in (_Quantity, _Time, _MicroTime, _Bytes)}
_UINT8 = Annotated[int, msgspec.Meta(ge=0, le=255)]


def _dec_hook(kind: type, value: Any) -> Any:
    """The self-decoding types, checked as ``go_decode`` checks them (a ValueError rejects)."""
    if kind is _Time or kind is _MicroTime:
        if not isinstance(value, str) or time_error(
                value, RFC3339_MICRO if kind is _MicroTime else RFC3339) is not None:
            raise ValueError("not a time")
    elif kind is _Quantity:
        if not isinstance(value, str) or quantity_error(value) is not None:
            raise ValueError("not a quantity")  # numbers: left to the walk
    elif kind is _Bytes:
        if isinstance(value, str):
            if base64_error(value) is not None:
                raise ValueError("not base64")
        elif not isinstance(value, list):
            raise ValueError("not bytes")
        else:
            msgspec.convert(value, list[_UINT8 | None])
    else:
        raise NotImplementedError(kind)
    return _ACCEPTED[kind]


class _Builder:
    """msgspec types for one kind's ``GoType`` tree (a Struct per Go struct, shared)."""

    def __init__(self) -> None:
        self.structs: dict[int, Any] = {}
        self.building: set[int] = set()

    def optional(self, go_type: GoType | None) -> Any:
        return Any if go_type is None else self.of(go_type) | None

    def of(self, go_type: GoType) -> Any:
        kind = go_type.kind
        if kind in ("any", "raw"):
            return Any
        if kind in _INT_BOUNDS:
            low, high = _INT_BOUNDS[kind]
            return Annotated[int, msgspec.Meta(ge=low, le=high)]
        if kind == "intstr":
            low, high = _INT_BOUNDS["int32"]
            return str | Annotated[int, msgspec.Meta(ge=low, le=high)]
        simple = {"string": str, "bool": bool, "float64": float, "quantity": _Quantity,
                  "time": _Time, "microtime": _MicroTime, "bytes": _Bytes}.get(kind)
        if simple is not None:
            return simple
        if kind == "map":
            values = self.optional(go_type.values)
            return dict[str, values]  # type: ignore[valid-type]
        if kind == "slice":
            items = self.optional(go_type.items)
            return list[items]  # type: ignore[valid-type]
        if kind == "struct":
            return self.struct(go_type)
        raise _Recursive(kind)  # a kind this module does not know: no typed form

    def struct(self, go_type: GoType) -> Any:
        ident = id(go_type)
        found = self.structs.get(ident)
        if found is not None:
            return found
        if ident in self.building:
            raise _Recursive(go_type.struct)
        self.building.add(ident)
        fields = [(f"f{i}", self.optional(child), msgspec.field(default=None, name=name))
                  for i, (name, child) in enumerate(go_type.fields.items())]
        self.building.discard(ident)
        made = self.structs[ident] = msgspec.defstruct(go_type.struct or "Struct", fields, gc=False)
        return made


@cache
def _typed(api_version: str, kind: str) -> Any:
    """The msgspec type of ``kind``'s Go struct, or None (no schema, or a recursive type)."""
    try:
        return ready(_Builder().of(go_type_of(api_version, kind)))
    except (KeyError, _Recursive):
        return None


def decodes_cleanly(api_version: str, kind: str, obj: Mapping[str, JSON]) -> bool:
    """True when ``obj`` certainly decodes into ``kind``'s Go struct (``decode_error`` would
    give None); False says only that the typed decode could not tell."""
    typed = _typed(api_version, kind)
    if typed is None:
        return False
    try:
        msgspec.convert(obj, typed, dec_hook=_dec_hook)
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError):
        return False
    return True


__all__ = ["decodes_cleanly"]
