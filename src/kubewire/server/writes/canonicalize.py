"""Strategies' ``Canonicalize``: the form an object is stored in, made after validation.

Only core/v1 Endpoints has one that changes anything (``pkg/registry/core/endpoint``
``Canonicalize``: ``RepackSubsets``, in ``kubewire.endpoints_subsets``); the other kinds'
strategies leave the object as it is. Pure.
"""

from __future__ import annotations

from typing import Any

from kubewire.endpoints_subsets import repack
from kubewire.resources import Resource

ENDPOINTS_ID = "core/endpoints"


def canonicalize(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` in its stored form (changed in place)."""
    if resource.id == ENDPOINTS_ID:
        subsets = obj.get("subsets")
        if isinstance(subsets, list) and subsets:
            obj["subsets"] = repack([s for s in subsets if isinstance(s, dict)])
    return obj
