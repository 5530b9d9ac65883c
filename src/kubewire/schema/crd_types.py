"""The schema server-side apply walks for a custom resource, built from its CRD version's
``openAPIV3Schema``.

kube builds the apply type converter of a custom resource from the CRD's schema
(apiextensions-apiserver ``customresource_handler.go`` ``buildOpenAPIModelsForApply``, through
``controller/openapi/builder`` with value validations and ``nullable`` stripped): the root and
each ``x-kubernetes-embedded-resource`` object get ``apiVersion``, ``kind`` (strings) and
``metadata`` (ObjectMeta); the list and map types (``x-kubernetes-list-type``,
``x-kubernetes-list-map-keys``, ``x-kubernetes-map-type``) then decide how fields merge and who
owns what. ``crd_type`` gives the same facts in this package's compact node form, so the
field-ownership walks read a custom resource as they read a built-in kind.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.schema import TypeNode

OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array"})
_COPIED = ("required", "default", "x-kubernetes-preserve-unknown-fields",
           "x-kubernetes-embedded-resource", "x-kubernetes-list-type",
           "x-kubernetes-list-map-keys", "x-kubernetes-map-type")
_TYPE_META: dict[str, JSON] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                               "metadata": {"ref": OBJECT_META}}

__all__ = ["OBJECT_META", "compact", "crd_type"]


def crd_type(schema: Mapping[str, JSON]) -> TypeNode:
    """The root node of a CRD version's ``openAPIV3Schema`` (already valid and structural)."""
    return TypeNode(compact(schema, root=True))


def compact(schema: Mapping[str, JSON], *, root: bool = False) -> dict[str, JSON]:
    """``schema`` in the compact form (``kubewire.schema``'s node JSON)."""
    out: dict[str, JSON] = {}
    declared = schema.get("type")
    if schema.get("x-kubernetes-int-or-string") is True:
        out["type"] = "int-or-string"
    elif isinstance(declared, str) and declared in _TYPES:
        out["type"] = declared
    for key in _COPIED:
        if key in schema:
            out[key] = schema[key]
    properties = schema.get("properties")
    props: dict[str, JSON] = {}
    if isinstance(properties, Mapping):
        props = {name: compact(sub) for name, sub in properties.items()
                 if isinstance(sub, Mapping)}
    if root or schema.get("x-kubernetes-embedded-resource") is True:
        out.setdefault("type", "object")
        props = {**props, **_TYPE_META}  # builder.go: kube's own metadata wins
    if props:
        out["properties"] = props
    items = schema.get("items")
    if isinstance(items, Mapping):
        out["items"] = compact(items)
    values = schema.get("additionalProperties")
    if isinstance(values, Mapping):
        out["additionalProperties"] = compact(values)
    return out
