"""``metadata.managedFields``: decoding, encoding, and the bookkeeping of Update operations.

Entries are keyed as kube keys them (``BuildManagerIdentifier``): manager, operation and
subresource, plus the apiVersion for Update entries (an applier keeps one entry across versions).
The wire form is sorted as ``sortEncodedManagedFields`` sorts: Apply before Update, then time,
manager, apiVersion, subresource. Sources: apimachinery ``pkg/util/managedfields/internal``
(``managedfields.go``, ``managedfieldsupdater.go``, ``stripmeta.go``, ``fieldmanager.go``
``decodeLiveOrNew``) and structured-merge-diff ``merge/update.go`` (``Updater.Update``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from kubewire.json_types import JSON
from kubewire.server.patch.field_paths import (
    Comparison,
    FieldSet,
    Path,
    fields_v1,
    parse_fields_v1,
    without_subtree,
)

Operation = Literal["Apply", "Update"]

# stripmeta.go: server-set metadata is never owned by anyone.
STRIPPED_PATHS: frozenset[Path] = frozenset({
    ("f:apiVersion",), ("f:kind",), ("f:metadata",),
    *(("f:metadata", "f:" + name) for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName",
        "generation", "managedFields", "resourceVersion")),
})
UNKNOWN_MANAGER = "unknown"  # buildmanagerinfo.go: an empty manager name
# capmanagers.go DefaultMaxUpdateManagers: beyond it the oldest Update entries are merged into
# one "ancient-changes" entry per apiVersion, so managedFields stay bounded however many
# different writers (User-Agents) touch an object.
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES_MANAGER = "ancient-changes"


@dataclass(frozen=True, slots=True)
class ManagerKey:
    """One manager identity: an applier has one entry, an updater one per apiVersion."""

    manager: str
    operation: Operation
    api_version: str = ""  # empty for Apply
    subresource: str = ""


@dataclass(frozen=True, slots=True)
class ManagedSet:
    """What one manager owns, at which apiVersion, and when it last changed something."""

    fields: FieldSet
    api_version: str
    time: str | None = None


Managed = dict[ManagerKey, ManagedSet]


def manager_key(manager: str, operation: Operation, api_version: str,
                subresource: str = "") -> ManagerKey:
    """The key kube builds for a request (``buildManagerInfo``)."""
    return ManagerKey(manager or UNKNOWN_MANAGER, operation,
                      "" if operation == "Apply" else api_version, subresource)


def decode_managed(entries: JSON) -> Managed | None:
    """Decoded ``managedFields``; None when malformed (kube then falls back to the live ones)."""
    if not isinstance(entries, list):
        return None
    out: Managed = {}
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        operation, api_version = entry.get("operation"), entry.get("apiVersion")
        if operation not in ("Apply", "Update") or not isinstance(api_version, str) \
                or not api_version or entry.get("fieldsType") != "FieldsV1":
            return None
        key = manager_key(str(entry.get("manager") or ""), operation, api_version,
                          str(entry.get("subresource") or ""))
        time = entry.get("time")
        out[key] = ManagedSet(parse_fields_v1(entry.get("fieldsV1") or {}), api_version,
                              time if isinstance(time, str) else None)
    return out


def encode_managed(managed: Managed) -> list[dict[str, JSON]]:
    """The wire list, in kube's order and field order (``ManagedFieldsEntry``)."""
    entries = []
    for key, owned in managed.items():
        entry: dict[str, JSON] = {"manager": key.manager, "operation": key.operation,
                                  "apiVersion": owned.api_version}
        if owned.time is not None:
            entry["time"] = owned.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = fields_v1(owned.fields)
        if key.subresource:
            entry["subresource"] = key.subresource
        entries.append(entry)
    entries.sort(key=lambda e: (e["operation"], e.get("time") or "", e["manager"],
                                e["apiVersion"], e.get("subresource", "")))
    return entries


def is_reset_request(entries: JSON) -> bool:
    """``managedFields: [{}]`` asks to clear the list (``isResetManagedFields``)."""
    return isinstance(entries, list) and len(entries) == 1 and entries[0] == {}


def endpoint_fields(paths: FieldSet, subresource: str, has_status: bool) -> FieldSet:
    """Reset fields: the main endpoint of a kind with status never owns ``.status``, and the
    status endpoint owns only ``.status`` (the strategies' ``GetResetFields``)."""
    paths = paths - STRIPPED_PATHS
    if subresource == "status":
        return frozenset(p for p in paths if p[:1] == ("f:status",))
    if has_status:
        return without_subtree(paths, ("f:status",))
    return paths


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    """Who wrote (key) and when (``now``, RFC 3339 seconds), and which fields it may own."""

    key: ManagerKey
    now: str
    has_status: bool = False


def record_update(managed: Managed, changes: Comparison, record: UpdateRecord) -> Managed:
    """Managed fields after an Update: the writer takes every field it changed, from everyone
    (``Updater.Update`` runs with force), and removed fields leave every owner.

    The writer's entry gets ``now`` only when it took something (``managedFieldsUpdater``).
    """
    key = record.key
    taken = endpoint_fields(frozenset(changes.added | changes.modified), key.subresource,
                            record.has_status) - changes.removed
    lost = endpoint_fields(frozenset(changes.added | changes.modified | changes.removed),
                           key.subresource, record.has_status)
    out: Managed = {}
    for other, owned in managed.items():
        remaining = owned.fields - lost
        if remaining:
            out[other] = replace(owned, fields=remaining)
    if taken:
        previous = out.get(key)
        fields = taken | previous.fields if previous is not None else taken
        out[key] = ManagedSet(fields, key.api_version, record.now)
    return cap_update_managers(out)


def cap_update_managers(managed: Managed, limit: int = MAX_UPDATE_MANAGERS) -> Managed:
    """``capUpdateManagers``: merge the oldest Update entries (time, then identifier) into
    ``ancient-changes`` buckets per apiVersion until at most ``limit`` remain."""
    updaters = sorted((k for k in managed if k.operation == "Update"),
                      key=lambda k: (managed[k].time or "", _identifier(k)))
    out = dict(managed)
    first_by_version: dict[str, ManagerKey] = {}
    remaining = len(updaters)
    for key in updaters:
        if remaining <= limit:
            break
        owned = out[key]
        first = first_by_version.setdefault(owned.api_version, key)
        if first == key:
            continue
        bucket = ManagerKey(ANCIENT_CHANGES_MANAGER, "Update", owned.api_version)
        if bucket not in out:
            out[bucket] = out.pop(first)
        out[bucket] = ManagedSet(owned.fields | out[bucket].fields, owned.api_version,
                                 owned.time)
        del out[key]
        remaining -= 1
    return out


def _identifier(key: ManagerKey) -> str:
    """``BuildManagerIdentifier``'s JSON, which kube sorts ties by."""
    fields: dict[str, str] = {"manager": key.manager, "operation": key.operation}
    if key.api_version:
        fields["apiVersion"] = key.api_version
    if key.subresource:
        fields["subresource"] = key.subresource
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def live_or_new(live: Mapping[str, JSON] | None, new: Mapping[str, JSON],
                subresource: str) -> tuple[Managed, list[JSON]]:
    """The managed fields an Update starts from (``decodeLiveOrNew``), decoded and encoded: the
    body's own when it carries valid ones on the main endpoint, ``[{}]`` meaning none, else
    the live object's (its stored list, as is)."""
    live_entries = managed_entries(live)
    new_entries = managed_entries(new)
    if not subresource:
        if is_reset_request(new_entries):
            return {}, []
        decoded = decode_managed(new_entries)
        if decoded:  # a client's list comes back in kube's order and form
            return decoded, encode_managed(decoded)
    decoded = decode_managed(live_entries)
    return (decoded, list(live_entries)) if decoded else ({}, [])


def managed_entries(obj: Mapping[str, JSON] | None) -> JSON:
    """``obj``'s ``metadata.managedFields`` as it is (None when absent)."""
    meta = obj.get("metadata") if obj is not None else None
    return meta.get("managedFields") if isinstance(meta, dict) else None

