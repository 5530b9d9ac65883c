"""Which parts of an updated custom resource are unchanged, for validation ratcheting.

With ``CRDValidationRatcheting`` (beta, on in 1.32) an update does not fail on values the old
object already had: schema errors of a node equal to its correlated old value are dropped
(``AE:pkg/apiserver/validation/ratcheting.go``), and a failing non-transition CEL rule on such
a node becomes a warning (``AE:pkg/apiserver/schema/cel/validation.go`` ``shouldRatchetError``).

Correlation and equality follow ``AS:pkg/cel/common/equality.go`` ``CorrelatedObject``: an
object's field correlates with the old object's field of the same name when the schema declares
it (a property, or ``additionalProperties``); a list item correlates only in a
``list-type: map`` list, with the old item of the same keys. ``CachedDeepEqual``: objects are
equal when they have the same keys, each correlating to an equal value (so an undeclared key
makes them differ); map lists when of the same length with every item correlating to an equal
one (order aside); other lists and scalars by ``reflect.DeepEqual``.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.go_values import go_equal
from kubewire.server.apiextensions.schemas.structural import Structural

ABSENT: JSON = object()  # no correlated old value
"""The old value of a node that does not correlate (a new field, a list item outside a map
list)."""

__all__ = ["ABSENT", "old_field", "old_item", "unchanged"]


def old_field(s: Structural, old: JSON, key: str) -> JSON:
    """``CorrelatedObject.Key``: the old value of field ``key`` of a node of schema ``s``
    (ABSENT when there is none or the schema does not declare the field)."""
    if old is ABSENT or not isinstance(old, dict) or key not in old:
        return ABSENT
    if key in s.properties or s.additional_schema is not None:
        return old[key]
    return ABSENT


def old_item(s: Structural, old: JSON, item: JSON) -> JSON:
    """``CorrelatedObject.Index``: the old item with ``item``'s keys in a ``list-type: map``
    list of schema ``s``; ABSENT for other lists (``MapList.Get``)."""
    if s.list_type != "map" or not s.list_map_keys or not isinstance(old, list) \
            or not isinstance(item, dict) or s.items is None:
        return ABSENT
    wanted = [item.get(k, ABSENT) for k in s.list_map_keys]
    for candidate in old:
        if isinstance(candidate, dict) and all(
                go_equal(candidate.get(k, ABSENT), w) if w is not ABSENT else k not in candidate
                for k, w in zip(s.list_map_keys, wanted, strict=True)):
            return candidate
    return ABSENT


def unchanged(s: Structural | None, new: JSON, old: JSON) -> bool:
    """``CachedDeepEqual`` of a node of schema ``s`` (None: no schema, compared as data)."""
    if old is ABSENT:
        return False
    if new is None or old is None:
        return new is None and old is None
    if s is None:
        return go_equal(new, old)
    if isinstance(new, list) and isinstance(old, list):
        if len(new) != len(old):
            return False
        if s.list_type != "map" or not s.list_map_keys or s.items is None:
            return go_equal(new, old)
        return all(unchanged(s.items, item, old_item(s, old, item)) for item in new)
    if isinstance(new, Mapping) and isinstance(old, Mapping):
        if len(new) != len(old):
            return False
        return all(unchanged(s.properties.get(k) or s.additional_schema, v, old_field(s, old, k))
                   for k, v in new.items())
    return go_equal(new, old)
