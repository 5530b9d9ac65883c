"""A typed decode that proves a built-in object passes ``validate.check_object``, in one C pass.

``check_object`` walks every write's object in Python for type errors (kube-openapi's), enum
values and unknown fields; nearly every object has none. Here a built-in kind's compiled schema
(``validate.builtin_root``: no ``required``, as built-in kinds are checked) becomes msgspec
types once: per node the JSON types its declared type surely accepts (``str``; ``int`` within
int32 or int64 by format; ``float``, which takes integers as ``number`` does; ``bool``), an
object as a Struct of its properties that forbids other keys (ignores them when the schema
preserves unknown fields) or as a ``dict`` of its additional properties, a list of its items,
``null`` everywhere. ``msgspec.convert`` accepting the object means ``check_object`` would give
``([], [])``; a rejection says nothing (the walk then runs for the errors' text and the unknown
fields' paths). Nodes this cannot express (enums, a map with properties, unknown types) leave
the kind without a typed form.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache, reduce
from operator import or_
from typing import Annotated, Any

import msgspec

from kubewire.json_types import JSON
from kubewire.schema.msgspec_ready import ready
from kubewire.schema.validate import SchemaNode, builtin_root, integer_range


class _Unexpressed(Exception):
    """A schema node msgspec types cannot stand for exactly here."""


class _Builder:
    def __init__(self) -> None:
        self.done: dict[int, Any] = {}
        self.building: set[int] = set()

    def optional(self, node: SchemaNode) -> Any:
        made = self.of(node)
        return made if made is Any else made | None

    def of(self, node: SchemaNode) -> Any:
        if node.type == "any":
            return Any
        if node.enum is not None or not node.declared:
            raise _Unexpressed(node.type)
        if "integer" in node.declared and "number" in node.declared:
            raise _Unexpressed("integer,number")
        return reduce(or_, [self.declared(node, declared) for declared in node.declared])

    def declared(self, node: SchemaNode, declared: str) -> Any:
        """The values of JSON type ``declared`` that ``node`` surely accepts."""
        simple = {"string": str, "number": float, "boolean": bool}.get(declared)
        if simple is not None:
            return simple
        if declared == "integer":
            low, high = integer_range(node)
            return Annotated[int, msgspec.Meta(ge=low, le=high)]
        if declared == "object":
            return self.object(node)
        if declared == "array":
            items = Any if node.items is None else self.optional(node.items)
            return list[items]  # type: ignore[valid-type]
        raise _Unexpressed(declared)

    def object(self, node: SchemaNode) -> Any:
        if node.props and node.values is not None:
            raise _Unexpressed("properties with additionalProperties")
        if not node.props:
            if node.values is not None:
                values = self.optional(node.values)
                return dict[str, values]  # type: ignore[valid-type]
            if node.is_open:
                return dict[str, Any]
        ident = id(node)
        found = self.done.get(ident)
        if found is not None:
            return found
        if ident in self.building:
            raise _Unexpressed("recursive")
        self.building.add(ident)
        fields = [(f"f{i}", self.optional(child), msgspec.field(default=None, name=name))
                  for i, (name, child) in enumerate(node.props.items())]
        self.building.discard(ident)
        made = self.done[ident] = msgspec.defstruct(
            "Object", fields, forbid_unknown_fields=not node.is_open, gc=False)
        return made


@cache
def _typed(api_version: str, kind: str) -> Any:
    """The msgspec type of ``kind``'s schema without ``required``, or None."""
    try:
        return ready(_Builder().of(builtin_root(api_version, kind)))
    except (KeyError, _Unexpressed):
        return None


def checks_cleanly(api_version: str, kind: str, obj: Mapping[str, JSON]) -> bool:
    """True when ``check_object(api_version, kind, obj, schema_required=False)`` certainly
    gives no errors and no unknown fields; False says only that the typed decode could not
    tell."""
    typed = _typed(api_version, kind)
    if typed is None:
        return False
    try:
        msgspec.convert(obj, typed)
    except (msgspec.ValidationError, TypeError, ValueError, RecursionError):
        return False
    return True


__all__ = ["checks_cleanly"]
