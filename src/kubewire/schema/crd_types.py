"""The schema facts of a kind served from a CustomResourceDefinition, as a ``TypeNode``: its
version's ``openAPIV3Schema`` in the compact form ``tools/gen_schema.py`` gives built-in kinds,
so server-side apply and managedFields walk a custom resource as they walk a built-in one
(list types and map keys, ``x-kubernetes-map-type``, atomic and granular objects).

kube builds the same from the CRD for its field manager (``apiextensions-apiserver``
``customresource_handler.go``: the structural schema to a ``TypeConverter``). The node's
``metadata`` is ``ObjectMeta`` whatever the CRD says of it, as kube publishes it. Pure; each
(uid, generation, version) is converted once.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kubewire.json_types import JSON
from kubewire.schema import TypeNode

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
# Keys copied unchanged when present (facts, not prose): gen_schema.py's list.
_COPIED = ("format", "enum", "nullable", "maxLength", "minLength", "pattern", "maxItems",
           "minItems", "uniqueItems", "maximum", "minimum", "exclusiveMaximum",
           "exclusiveMinimum", "maxProperties", "minProperties", "default",
           "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
           "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource")


def compact(schema: Mapping[str, Any]) -> dict[str, JSON]:
    """One CRD schema node in the compact form (recursing into its sub-schemas)."""
    out: dict[str, JSON] = {"type": _type(schema)}
    for key in _COPIED:
        if key in schema:
            out[key] = schema[key]
    if out["type"] == "int-or-string":
        out.pop("format", None)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {name: compact(sub) for name, sub in properties.items()
                             if isinstance(sub, Mapping)}
    if isinstance(schema.get("required"), list):
        out["required"] = list(schema["required"])
    if isinstance(schema.get("items"), Mapping):
        out["items"] = compact(schema["items"])
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        out["additionalProperties"] = compact(extra)
    elif extra is True:
        out["additionalProperties"] = {"type": "any"}
    return out


def _type(schema: Mapping[str, Any]) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    declared = schema.get("type")
    if isinstance(declared, str) and declared:
        return declared
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    return "any"


def crd_type(crd: Mapping[str, Any], version: str) -> TypeNode | None:
    """The root node of ``version`` of ``crd`` (a stored CRD), or None without a schema."""
    meta = crd.get("metadata") or {}
    return _converted(str(meta.get("uid")), int(meta.get("generation") or 0), version,
                      _Frozen(crd))


class _Frozen:
    """A CRD carried through ``lru_cache`` without taking part in its key."""

    __slots__ = ("crd",)

    def __init__(self, crd: Mapping[str, Any]) -> None:
        self.crd = crd

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen)


@lru_cache(maxsize=256)
def _converted(uid: str, generation: int, version: str, frozen: _Frozen) -> TypeNode | None:
    spec = frozen.crd.get("spec") or {}
    for entry in spec.get("versions") or ():
        if isinstance(entry, Mapping) and entry.get("name") == version:
            raw = (entry.get("schema") or {}).get("openAPIV3Schema")
            break
    else:
        return None
    if not isinstance(raw, Mapping):
        return None
    root = compact(raw)
    properties = root.setdefault("properties", {})
    assert isinstance(properties, dict)
    properties["metadata"] = {"ref": OBJECT_META}
    if root["type"] == "any":
        root["type"] = "object"
    return TypeNode(root)


__all__ = ["crd_type"]
