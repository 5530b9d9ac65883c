"""Structural defaulting of a custom resource, in place.

A port of ``AE:pkg/apiserver/schema/defaulting/algorithm.go`` ``Default``: for each declared
property with a ``default``, the default (deep-copied) is set where the key is absent or holds
``null`` on a non-nullable property; then every present value is defaulted with its schema
(properties, ``additionalProperties`` values and list items, where a non-nullable ``null`` takes
the ``items``/``additionalProperties`` default). ``nullable: true`` keeps a ``null``. Defaults of
nested objects apply only where the parent exists, or was itself just defaulted (recursion runs
after setting). Run after ``pruning.prune`` (whose null pruning leaves exactly the nulls that have
a default). Subtrees without any default are not walked (``Structural.has_defaults``).
"""

from __future__ import annotations

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.go_values import deep_copy
from kubewire.server.apiextensions.schemas.structural import Structural


def apply_defaults(schema: Structural, obj: dict[str, JSON]) -> None:
    """Fill ``obj``'s missing defaulted fields from ``schema`` (kube's ``Default``)."""
    _default(obj, schema)


def _non_nullable_null(x: JSON, s: Structural | None) -> bool:
    return x is None and s is not None and not s.nullable


def _default(x: JSON, s: Structural | None) -> None:
    if s is None or not s.has_defaults:
        return
    if isinstance(x, dict):
        _default_map(x, s)
    elif isinstance(x, list):
        items = s.items
        for i, v in enumerate(x):
            if items is not None and _non_nullable_null(v, items):
                x[i] = v = deep_copy(items.default)
            _default(v, items)


def _default_map(x: dict[str, JSON], s: Structural) -> None:
    props = s.properties
    for k, declared in props.items():
        if declared.has_default and (k not in x or _non_nullable_null(x[k], declared)):
            x[k] = deep_copy(declared.default)
    additional = s.additional_schema
    for k, v in x.items():
        prop = props.get(k)
        if prop is not None:
            if prop.has_defaults and isinstance(v, dict | list):  # else nothing to default
                _default(v, prop)
        elif s.additional_properties is not None:
            if additional is not None and _non_nullable_null(v, additional):
                x[k] = v = deep_copy(additional.default)
            _default(v, additional)


__all__ = ["apply_defaults"]
