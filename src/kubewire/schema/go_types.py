"""The Go types behind a builtin kind's fields, compiled once per kind from the schema facts.

A ``GoType`` says how Go's decoders treat a value (``kind``) and what ``reflect.Type.String()``
calls its type (``name``: ``v1.PodSpec``, ``[]v1.Container``, ``map[string]string``, ``int32``,
``resource.Quantity``; through a pointer the element type). Struct, slice and map types follow
from the schema; named non-struct types (``v1.RestartPolicy``, ``types.UID``) come from the
generated ``goTypes`` facts. Nodes of a named type are shared, so the tree is built once.

Kinds: ``struct``, ``map``, ``slice``, ``bytes`` (``[]byte``), the scalars ``string``, ``bool``,
``int32``, ``int64``, ``float64``, the types that decode themselves ``quantity``, ``intstr``,
``time``, ``microtime``, ``raw`` (RawExtension, FieldsV1: any JSON) and ``any``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cache

from kubewire.schema import TypeNode, go_named_field_type, type_for

_MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
_SCALARS = {"boolean": "bool", "number": "float64", "string": "string"}
_SELF_DECODING = {"quantity": "quantity", "int-or-string": "intstr", "any": "any"}


@dataclass(eq=False)
class GoType:
    """One Go type: how it decodes, its printed name, and its fields, items or values."""

    kind: str
    name: str
    struct: str = ""  # the Go struct's own name (``DeploymentSpec``), for struct kinds
    fields: dict[str, GoType] = field(default_factory=dict)
    items: GoType | None = None
    values: GoType | None = None


def _kind(node: TypeNode) -> str:
    compact = node.type
    if compact in _SELF_DECODING:
        return _SELF_DECODING[compact]
    if compact == "string" and node.format == "date-time":
        return "microtime" if node.ref == _MICRO_TIME else "time"
    if compact == "string" and node.format == "byte":
        return "bytes"
    if node.properties:
        return "struct"
    if compact == "object":
        return "map" if node.values is not None else "raw"
    if compact == "array":
        return "slice"
    if compact == "integer":
        return "int32" if node.format == "int32" else "int64"
    return _SCALARS.get(compact, "any")


def _name(node: TypeNode, kind: str, items: GoType | None, values: GoType | None) -> str:
    if node.ref:
        package, _, name = node.ref.rpartition(".")
        return f"{package.rpartition('.')[2]}.{name}"
    if kind == "slice":
        return "[]" + (items.name if items else "interface {}")
    if kind == "map":
        return "map[string]" + (values.name if values else "interface {}")
    return {"bytes": "[]uint8", "any": "interface {}", "raw": "interface {}"}.get(kind, kind)


def _named(go_type: GoType, name: str) -> GoType:
    """``go_type`` as the Go named type ``name`` (``[]v1.Capability`` names its items too)."""
    if not name:
        return go_type
    items = go_type.items
    if items is not None and name.startswith("[]"):
        items = dataclasses.replace(items, name=name[2:])
    return dataclasses.replace(go_type, name=name, items=items)


def _compile(node: TypeNode, memo: dict[str, GoType]) -> GoType:
    if node.ref in memo:
        return memo[node.ref]
    kind = _kind(node)
    out = GoType(kind, "")
    if node.ref:
        memo[node.ref] = out  # before the children: a type may contain itself
    if kind == "slice" and node.items is not None:
        out.items = _compile(node.items, memo)
    if kind == "map" and node.values is not None:
        out.values = _compile(node.values, memo)
    out.name = _name(node, kind, out.items, out.values)
    if kind == "struct":
        type_name = node.target.name
        out.struct = type_name.rpartition(".")[2]
        out.fields = {key: _named(_compile(child, memo), go_named_field_type(type_name, key))
                      for key, child in node.properties.items()}
    return out


@cache
def go_type_of(api_version: str, kind: str) -> GoType:
    """The Go struct of ``kind`` at ``api_version``. Raises KeyError when unknown."""
    return _compile(type_for(api_version, kind), {})


__all__ = ["GoType", "go_type_of"]
