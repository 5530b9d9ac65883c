"""Server-side apply (``application/apply-patch+yaml``) as pure functions.

``apply_config`` merges an applied configuration into the live object (or into nothing, for a
create), prunes what the applier owned last time and no longer applies, detects conflicts with
other managers and returns the object to store with its new ``metadata.managedFields``.

Semantics follow structured-merge-diff ``merge/update.go`` (``Updater.Apply``: merge, prune,
then ``update`` with the conflict check) and apimachinery ``pkg/util/managedfields/internal``
(``versioncheck.go``, ``structuredmerge.go``, ``conflict.go``, ``managedfieldsupdater.go``):

- the applier's entry becomes exactly the applied configuration's field set (minus server-set
  metadata and the endpoint's reset fields);
- a field, map entry or list item the applier owned before and omits now is removed, unless
  the new configuration or another *applier* still owns it or something below it;
- a field another manager owns that the apply adds or changes is a conflict: 409 with kube's
  message and one ``FieldManagerConflict`` cause per field, unless ``force``, which moves
  ownership to the applier;
- a no-op apply keeps the entry's time (kube stamps time only when the object changed);
- kubectl's own apply (manager ``kubectl``) may take fields its last client-side apply set
  without a conflict, and keeps that annotation current (``lastappliedmanager.go``,
  ``lastappliedupdater.go``);
- a configuration that does not fit the schema is 400 with structured-merge-diff's words.

Decoding the request body and the strict-YAML check live in ``apply_request``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from kubewire.go_print import go_json
from kubewire.go_text import go_quote
from kubewire.json_copy import copy_json
from kubewire.json_types import JSON
from kubewire.schema import TypeNode
from kubewire.server.patch.field_paths import (
    FieldSet,
    FieldSetError,
    MissingKeyError,
    NodeKind,
    Path,
    compare,
    element_order,
    field_set,
    index_items,
    list_element,
    node_kind,
    path_text,
)
from kubewire.server.patch.managed_fields import (
    Managed,
    ManagedSet,
    ManagerKey,
    decode_managed,
    encode_managed,
    endpoint_fields,
    manager_key,
)
from kubewire.server.patch.strategic import without_nulls
from kubewire.status import BadRequest, Conflict

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
KUBECTL_MANAGER = "kubectl"  # only kubectl's own applies touch its annotation (lastapplied*.go)

__all__ = ["ApplyRequest", "apply_config", "apply_conflict", "check_applied_type", "merge",
           "prune"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplyRequest:
    """One apply: who applies, through which endpoint, whether to force, and the time."""

    manager: str
    api_version: str
    kind: str
    now: str
    force: bool = False
    subresource: str = ""
    is_custom: bool = False
    has_status: bool = False


def check_applied_type(config: dict[str, JSON], request: ApplyRequest) -> None:
    """``versionCheckManager``: the configuration names exactly the endpoint's kind."""
    api_version, kind = config.get("apiVersion"), config.get("kind")
    if api_version == request.api_version and kind == request.kind:
        return
    group, _, version = str(api_version or "").rpartition("/")
    raise BadRequest(f"invalid object type: {group}/{version}, Kind={kind or ''}")


def apply_config(live: dict[str, JSON] | None, config: dict[str, JSON],
                 schema: TypeNode | None, request: ApplyRequest) -> dict[str, JSON]:
    """The object to store after applying ``config`` to ``live`` (None: nothing there yet).

    Raises BadRequest (wrong kind, managedFields in the configuration, a map-list item without
    its keys) or Conflict (another manager owns a field the apply changes, without force).
    """
    check_applied_type(config, request)
    meta = config.get("metadata")
    if isinstance(meta, dict) and meta.get("managedFields") is not None:
        raise BadRequest("metadata.managedFields must be nil")
    base = _without_managed_fields(live or {})
    managed = decode_managed(((live or {}).get("metadata") or {}).get("managedFields")) or {}
    key = manager_key(request.manager, "Apply", request.api_version, request.subresource)
    try:
        applied = endpoint_fields(field_set(config, schema), request.subresource,
                                  request.has_status)
        merged = merge(base, config, schema)
        previous = managed.get(key)
        if previous is not None:
            others = [s.fields for k, s in managed.items() if k != key and k.operation == "Apply"]
            keep = applied.union(*others)
            merged = prune(merged, previous.fields - keep, keep, schema)
        changes = compare(base, merged, schema, is_custom=request.is_custom)
        # Comparison.FilterFields: the endpoint's reset fields never conflict nor change hands.
        touched = endpoint_fields(frozenset(changes.added | changes.modified),
                                  request.subresource, request.has_status)
        removed = endpoint_fields(frozenset(changes.removed), request.subresource,
                                  request.has_status)
        conflicts = {k: s.fields & touched for k, s in managed.items() if k != key}
        conflicts = {k: paths for k, paths in conflicts.items() if paths}
        if conflicts and not request.force:
            _raise_unexplained(conflicts, base, schema, request)
    except (FieldSetError, MissingKeyError) as exc:
        # kube answers 500 here (kubernetes/kubernetes#139253): it is the client's mistake.
        raise BadRequest(f"failed to create typed patch object ({_object_name(config)}; "
                         f"{_gvk_text(request)}): {exc}") from None
    result: Managed = {}
    for other, owned in managed.items():
        remaining = owned.fields - removed - (touched if other in conflicts else set())
        if other != key and remaining:
            result[other] = replace(owned, fields=remaining)
    if applied:
        # managedFieldsUpdater: the time moves only when the object changed.
        time = request.now if not changes.is_same else previous.time if previous else None
        result[key] = ManagedSet(applied, request.api_version, time)
    return _sync_last_applied(_with_managed_fields(merged, result), config, request)


# --- kubectl's client-side apply annotation -------------------------------------------------------

def _raise_unexplained(conflicts: dict[ManagerKey, FieldSet], live: dict[str, JSON],
                       schema: TypeNode | None, request: ApplyRequest) -> None:
    """Raise the conflicts, less those kubectl's last client-side apply explains
    (``lastAppliedManager``: moving an object from ``kubectl apply`` to ``--server-side``)."""
    if request.manager == KUBECTL_MANAGER:
        allowed = _last_applied_fields(live, schema, request)
        conflicts = {k: paths - allowed for k, paths in conflicts.items()}
        conflicts = {k: paths for k, paths in conflicts.items() if paths}
    if conflicts:
        raise apply_conflict(conflicts)


def _last_applied_fields(live: dict[str, JSON], schema: TypeNode | None,
                         request: ApplyRequest) -> FieldSet:
    """Fields the last-applied annotation set that still hold those values."""
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(LAST_APPLIED_ANNOTATION) if isinstance(annotations, dict) else None
    try:
        last = json.loads(text) if isinstance(text, str) and text else None
    except ValueError:
        return frozenset()
    if not isinstance(last, dict) or last.get("apiVersion") != request.api_version:
        return frozenset()
    try:
        changed = compare(last, live, schema, is_custom=request.is_custom)
        return field_set(last, schema) - changed.modified - changed.added - changed.removed
    except (FieldSetError, MissingKeyError):
        return frozenset()  # an annotation that does not fit the schema explains nothing


def _sync_last_applied(obj: dict[str, JSON], config: dict[str, JSON],
                       request: ApplyRequest) -> dict[str, JSON]:
    """``lastAppliedUpdater``: kubectl's server-side apply keeps an existing last-applied
    annotation equal to what it applied, so a later client-side apply diffs correctly."""
    annotations = obj.get("metadata", {}).get("annotations")
    if request.manager != KUBECTL_MANAGER or not isinstance(annotations, dict) \
            or not annotations.get(LAST_APPLIED_ANNOTATION):
        return obj
    applied = copy_json(config)
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict) and isinstance(applied_meta.get("annotations"), dict):
        applied_meta["annotations"].pop(LAST_APPLIED_ANNOTATION, None)
    # buildLastApplied: json.Encoder of the configuration sigs.k8s.io/yaml decoded (numbers
    # float64), with Encode's newline
    annotations[LAST_APPLIED_ANNOTATION] = go_json(applied, float64_numbers=True) + "\n"
    return obj


def _object_name(config: dict[str, JSON]) -> str:
    meta = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _gvk_text(request: ApplyRequest) -> str:
    group, _, version = request.api_version.rpartition("/")
    return f"{group}/{version}, Kind={request.kind}"


def _without_managed_fields(obj: dict[str, JSON]) -> dict[str, JSON]:
    out = copy_json(obj)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return out


def _with_managed_fields(obj: dict[str, JSON], managed: Managed) -> dict[str, JSON]:
    meta = obj.setdefault("metadata", {})
    if managed:
        meta["managedFields"] = encode_managed(managed)
    else:
        meta.pop("managedFields", None)
    return obj


# --- merge --------------------------------------------------------------------------------------

def merge(live: JSON, config: JSON, node: TypeNode | None) -> JSON:
    """``TypedValue.Merge``: maps and keyed lists merge, everything else is replaced; a ``null``
    in the configuration leaves the field unset. Inputs are not mutated."""
    kind = node_kind(node, config)
    if isinstance(config, dict) and isinstance(live, dict) and kind in ("struct", "map"):
        # live's fields in live's order: those the configuration names are merged below (or
        # dropped), so only the others are copied
        out = {name: value if name in config else copy_json(value)
               for name, value in live.items()}
        for name, value in config.items():
            if value is None:
                out.pop(name, None)
                continue
            child = _child_node(node, name)
            out[name] = merge(live.get(name), value, child)
        return out
    if isinstance(config, list) and isinstance(live, list) and node is not None \
            and kind in ("map-list", "set-list"):
        return _merge_lists(live, config, node, kind)
    return without_nulls(config)


def _child_node(node: TypeNode | None, name: str) -> TypeNode | None:
    if node is None or node.type != "object":
        return None
    return node.child(name)


def _merge_lists(live: list[JSON], config: list[JSON], node: TypeNode,
                 kind: NodeKind) -> list[JSON]:
    """structured-merge-diff ``visitListItems``: the configuration's order wins for shared
    items, live-only items keep their place."""
    lhs, rhs = index_items(node, kind, live), index_items(node, kind, config)
    lhs_order, rhs_order = list(lhs), list(rhs)
    shared = [pe for pe in rhs_order if pe in lhs]
    next_shared = shared.pop(0) if shared else None
    out: list[JSON] = []
    li = ri = 0
    while li < len(lhs_order) or ri < len(rhs_order):
        if li < len(lhs_order) and ri < len(rhs_order):
            pe = lhs_order[li]
            if pe == rhs_order[ri]:
                out.append(merge(lhs[pe], rhs[pe], node.items))
                li, ri = li + 1, ri + 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in rhs and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lhs_order) and lhs_order[li] not in rhs:
            out.append(copy_json(lhs[lhs_order[li]]))
            li += 1
            continue
        if ri < len(rhs_order):
            pe = rhs_order[ri]
            out.append(merge(lhs[pe], rhs[pe], node.items) if pe in lhs
                       else without_nulls(rhs[pe]))
            ri += 1
            if next_shared == pe:
                next_shared = shared.pop(0) if shared else None
            continue
        li += 1  # a shared item already merged at the configuration's position
    return out


# --- prune --------------------------------------------------------------------------------------

def prune(obj: dict[str, JSON], stale: FieldSet, keep: FieldSet,
          schema: TypeNode | None) -> dict[str, JSON]:
    """Remove each stale path (with its subtree) unless something below it is kept; a map or
    list this leaves empty goes too, unless it is kept itself."""
    out = copy_json(obj)
    for path in sorted(stale, key=len):
        if any(len(k) > len(path) and k[:len(path)] == path for k in keep):
            continue
        if _delete(out, path, schema):
            _drop_emptied(out, path[:-1], keep, schema)
    return out


def _delete(obj: JSON, path: Path, schema: TypeNode | None) -> bool:
    located = _locate(obj, path[:-1], schema)
    if located is None:
        return False
    parent, node = located
    element = path[-1]
    if isinstance(parent, dict) and element.startswith("f:"):
        return parent.pop(element[2:], _ABSENT) is not _ABSENT
    if isinstance(parent, list) and node is not None:
        index = _find_item(parent, element, node)
        if index is not None:
            del parent[index]
            return True
    return False


_ABSENT: Any = object()


def _drop_emptied(obj: JSON, path: Path, keep: FieldSet, schema: TypeNode | None) -> None:
    while path and path not in keep:
        located = _locate(obj, path, schema)
        if located is None or located[0] not in ({}, []):
            return
        _delete(obj, path, schema)
        path = path[:-1]


def _locate(obj: JSON, path: Path, schema: TypeNode | None) -> tuple[JSON, TypeNode | None] | None:
    """The value at ``path`` and its schema node, or None when it is not there."""
    value, node = obj, schema
    for element in path:
        if isinstance(value, dict) and element.startswith("f:"):
            name = element[2:]
            if name not in value:
                return None
            value, node = value[name], _child_node(node, name)
        elif isinstance(value, list) and node is not None:
            index = _find_item(value, element, node)
            if index is None:
                return None
            value, node = value[index], node.items
        else:
            return None
    return value, node


def _find_item(items: list[JSON], element: str, node: TypeNode) -> int | None:
    kind = node_kind(node, items)
    if kind not in ("map-list", "set-list"):
        return None
    for index, item in enumerate(items):
        try:
            if list_element(node, kind, item) == element:
                return index
        except MissingKeyError:
            continue
    return None


# --- conflicts ----------------------------------------------------------------------------------

def _manager_text(key: ManagerKey) -> str:
    """``printManager``: the name, its subresource, and for updaters the apiVersion."""
    text = go_quote(key.manager)
    if key.subresource:
        text += f" with subresource {go_quote(key.subresource)}"
    if key.operation == "Update":
        text += f" using {key.api_version}"
    return text


def _set_order(path: Path) -> tuple[tuple[int, Any], ...]:
    # fieldpath.Set.Iterate: a level's members before its children, each in element order.
    last = len(path) - 1
    return tuple((0 if i == last else 1, element_order(e)) for i, e in enumerate(path))


def apply_conflict(conflicts: dict[ManagerKey, FieldSet]) -> Conflict:
    """``NewConflictError``: 409 Conflict, kube's message, one cause per conflicting field."""
    managers = sorted(conflicts, key=lambda k: (k.manager, k.operation, k.api_version,
                                                k.subresource))
    pairs = [(k, p) for k in managers for p in sorted(conflicts[k], key=_set_order)]
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {_manager_text(k)}",
               "field": path_text(p)} for k, p in pairs]
    if len(pairs) == 1:
        key, path = pairs[0]
        message = (f"Apply failed with 1 conflict: conflict with {_manager_text(key)}: "
                   f"{path_text(path)}")
    else:
        lines = []
        for key in managers:
            lines.append(f"conflicts with {_manager_text(key)}:")
            lines += [f"- {path_text(p)}" for p in sorted(conflicts[key], key=_set_order)]
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return Conflict(message, {"causes": causes})

