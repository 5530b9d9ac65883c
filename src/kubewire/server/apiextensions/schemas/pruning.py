"""Pruning a custom resource: unknown fields, non-nullable nulls, embedded resources' metadata.

``prune`` is what kube's decoder does to every custom resource after parsing its ``metadata``
(``AE:pkg/apiserver/customresource_handler.go`` ``unstructuredSchemaCoercer.apply``), in order:

1. ``prune_unknown``: drop every object key the schema does not declare
   (``AE:pkg/apiserver/schema/pruning/algorithm.go`` ``PruneWithOptions``, ``prune``,
   ``skipPrune``). The root and each ``x-kubernetes-embedded-resource`` keep ``apiVersion``,
   ``kind`` and ``metadata``; ``x-kubernetes-preserve-unknown-fields`` keeps a node's unknown
   keys while its declared properties are still pruned; ``additionalProperties`` values are
   pruned with its schema (with ``additionalProperties: true``, an object value loses every
   key). The paths come back sorted (``sort.Strings``), as kube's ``unknown field "<path>"``
   warnings and strict errors list them.
2. ``prune_nulls``: drop object keys whose value is ``null`` where the schema is not
   ``nullable`` and has no ``default`` (``AE:pkg/apiserver/schema/defaulting/prunenulls.go``
   ``PruneNonNullableNullsWithoutDefaults``); list items are left (they fail validation).
3. ``coerce_embedded_meta``: an embedded resource's ``metadata`` goes through Go's
   ``ObjectMeta`` (``AE:pkg/apiserver/schema/objectmeta/coerce.go`` ``CoerceWithOptions``,
   ``GetObjectMetaWithOptions``, ``SetObjectMeta``): keys ObjectMeta lacks are dropped and
   reported (``spec.template.metadata.foo``, ``spec.m[key].metadata.foo``, sorted), empty
   ``omitempty`` fields and a null ``creationTimestamp`` vanish. The root's own ``metadata`` is
   the server's (kube parses it apart, before this).
"""

from __future__ import annotations

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.structural import Structural

_META_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def prune(schema: Structural, obj: dict[str, JSON]) -> list[str]:
    """Steps 1-3 above on ``obj`` (a whole custom resource), in place; the unknown-field paths
    kube reports: the pruned ones sorted, then those of embedded resources' metadata.

    Steps 1 and 2 are one walk: a key step 1 keeps is the only kind step 2 looks at, and
    each step's verdict on a key depends on the key's schema alone, so pruning each kept null
    where step 1 meets it is what the second walk did."""
    walk = _Walk(nulls=True)
    _prune(obj, schema, "", walk, True)
    walk.out.sort()
    return walk.out + coerce_embedded_meta(schema, obj)


def prune_unknown(schema: Structural | None, obj: JSON, *, root: bool = True) -> list[str]:
    """Step 1 (``PruneWithOptions``); ``root``: ``obj`` is a resource (its meta is kept)."""
    walk = _Walk(nulls=False)
    _prune(obj, schema, "", walk, root)
    walk.out.sort()
    return walk.out


class _Walk:
    """What one pruning walk carries: the unknown paths found, and whether step 2 runs."""

    __slots__ = ("nulls", "out")

    def __init__(self, *, nulls: bool) -> None:
        self.nulls = nulls
        self.out: list[str] = []


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _prune(x: JSON, s: Structural | None, path: str, walk: _Walk, embedded: bool) -> None:
    """Step 1 on ``x`` at ``path`` (and step 2 too when ``walk.nulls``)."""
    if s is not None and s.preserve_unknown_fields:
        _skip_prune(x, s, path, walk, embedded)
        return
    if isinstance(x, dict):
        if s is None:
            walk.out.extend(_child(path, k) for k in x)
            x.clear()
        else:
            _prune_map(x, s, path, walk, embedded or s.embedded_resource)
    elif isinstance(x, list):
        items = s.items if s is not None else None
        for i, v in enumerate(x):
            if isinstance(v, dict | list):
                _prune(v, items, f"{path}[{i}]", walk, False)


def _null_pruned(x: dict[str, JSON], k: str, sub: Structural | None) -> bool:
    """Step 2 for the kept key ``k`` of ``x``, whose schema is ``sub``: dropped when null and
    ``sub`` neither nullable nor defaulted."""
    if x[k] is None and sub is not None and not sub.nullable and not sub.has_default:
        del x[k]
        return True
    return False


def _prune_map(x: dict[str, JSON], s: Structural, path: str, walk: _Walk, embedded: bool,  # noqa: PLR0913
               *, keep_unknown: bool = False) -> None:
    """One object's keys: unknown ones dropped (or, under preserve-unknown-fields, kept and
    not walked: no schema, so no null pruning under them), known ones walked."""
    props, additional = s.properties, s.additional_properties
    for k in list(x):
        if embedded and k in _META_FIELDS:
            if walk.nulls and not _null_pruned(x, k, _field_schema(k, s)):
                prune_nulls(_field_schema(k, s), x[k])
            continue
        prop = props.get(k)
        if prop is None and additional is not None:
            prop = s.additional_schema
        elif prop is None:
            if keep_unknown:
                continue
            if k not in _META_FIELDS or path:
                walk.out.append(_child(path, k))
            del x[k]
            continue
        if walk.nulls and _null_pruned(x, k, prop):
            continue
        v = x[k]
        if isinstance(v, dict | list):  # a scalar has nothing to prune
            _prune(v, prop, _child(path, k), walk, False)


def _skip_prune(x: JSON, s: Structural, path: str, walk: _Walk, embedded: bool) -> None:
    if isinstance(x, dict):
        _prune_map(x, s, path, walk, embedded or s.embedded_resource, keep_unknown=True)
    elif isinstance(x, list) and s.items is not None:
        for i, v in enumerate(x):
            _skip_prune(v, s.items, f"{path}[{i}]", walk, False)


def _field_schema(key: str, s: Structural) -> Structural | None:
    prop = s.properties.get(key)
    return prop if prop is not None else s.additional_schema


def prune_nulls(schema: Structural | None, x: JSON) -> None:
    """Step 2 (``PruneNonNullableNullsWithoutDefaults``), in place. Nothing under a node
    without a schema is pruned (a key is dropped only where its schema says so), so such a
    node (the root's ``metadata`` with its managedFields, preserved unknown fields) is not
    walked."""
    if schema is None:
        return
    if isinstance(x, dict):
        for k in list(x):
            sub = _field_schema(k, schema)
            v = x[k]
            if v is None:
                if sub is not None and not sub.nullable and not sub.has_default:
                    del x[k]
            else:
                prune_nulls(sub, v)
    elif isinstance(x, list):
        items = schema.items
        for v in x:
            prune_nulls(items, v)


# --- embedded ObjectMeta -----------------------------------------------------------------------

# metav1.ObjectMeta's JSON fields and how ToUnstructured leaves out their empty values.
_STRING_META = frozenset({"name", "generateName", "namespace", "selfLink", "uid",
                          "resourceVersion"})
_COLLECTION_META = frozenset({"labels", "annotations", "ownerReferences", "finalizers",
                              "managedFields"})
_OBJECT_META = _STRING_META | _COLLECTION_META | {
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"}


def _coerce_meta(meta: dict[str, JSON], path: str, out: list[str]) -> None:
    """``GetObjectMeta`` then ``SetObjectMeta`` for one embedded ``metadata`` object."""
    for k in list(meta):
        v = meta[k]
        if k not in _OBJECT_META:
            out.append(f"{path}.{k}")
            del meta[k]
        elif (v is None or (k in _STRING_META and v == "")
              or (k in _COLLECTION_META and v in ({}, []))
              or (k == "generation" and v == 0 and not isinstance(v, bool))):
            del meta[k]


def coerce_embedded_meta(schema: Structural, obj: JSON) -> list[str]:
    """Step 3 (``CoerceWithOptions`` with the resource root not coerced); sorted paths."""
    out: list[str] = []
    _coerce(obj, schema, "", out)
    out.sort()
    return out


def _coerce(x: JSON, s: Structural | None, path: str, out: list[str]) -> None:
    if s is None or not s.has_embedded:
        return
    if isinstance(x, dict):
        if s.embedded_resource:
            meta = x.get("metadata")
            if isinstance(meta, dict):
                _coerce_meta(meta, f"{path}.metadata" if path else "metadata", out)
        for k, v in x.items():
            prop = s.properties.get(k)
            if prop is not None:
                _coerce(v, prop, _child(path, k), out)
            elif s.additional_properties is not None:
                _coerce(v, s.additional_schema, f"{path}[{k}]", out)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _coerce(v, s.items, f"{path}[{i}]", out)


__all__ = ["coerce_embedded_meta", "prune", "prune_nulls", "prune_unknown"]
