"""``metadata.managedFields``: decoding, encoding, and the bookkeeping of Update operations.

Entries are keyed as kube keys them (``BuildManagerIdentifier``): manager, operation and
subresource, plus the apiVersion for Update entries (an applier keeps one entry across versions).
The wire form is sorted as ``sortEncodedManagedFields`` sorts: Apply before Update, then time,
manager, apiVersion, subresource. Sources: apimachinery ``pkg/util/managedfields/internal``
(``managedfields.go``, ``managedfieldsupdater.go``, ``stripmeta.go``, ``fieldmanager.go``
``decodeLiveOrNew``) and structured-merge-diff ``merge/update.go`` (``Updater.Update``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Literal

import msgspec

from kubewire.go_print import go_json
from kubewire.json_types import JSON
from kubewire.server.patch.field_paths import (
    Comparison,
    FieldSet,
    Path,
    element_order,
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
    entries = [encode_entry(key, owned) for key, owned in managed.items()]
    entries.sort(key=entry_order)
    return entries


def encode_entry(key: ManagerKey, owned: ManagedSet) -> dict[str, JSON]:
    """One ``ManagedFieldsEntry`` in its field order."""
    entry: dict[str, JSON] = {"manager": key.manager, "operation": key.operation,
                              "apiVersion": owned.api_version}
    if owned.time is not None:
        entry["time"] = owned.time
    entry["fieldsType"] = "FieldsV1"
    entry["fieldsV1"] = fields_v1(owned.fields)
    if key.subresource:
        entry["subresource"] = key.subresource
    return entry


def entry_order(entry: Mapping[str, JSON]) -> tuple[JSON, ...]:
    """``sortEncodedManagedFields``' key: Apply before Update, time, manager, apiVersion,
    subresource."""
    return (entry["operation"], entry.get("time") or "", entry["manager"], entry["apiVersion"],
            entry.get("subresource", ""))


def is_reset_request(entries: JSON) -> bool:
    """``managedFields: [{}]`` asks to clear the list (``isResetManagedFields``)."""
    return isinstance(entries, list) and len(entries) == 1 and entries[0] == {}


def endpoint_fields(paths: FieldSet, subresource: str, has_status: bool) -> FieldSet:
    """Reset fields: the main endpoint of a kind with status never owns ``.status``, and the
    status endpoint owns only ``.status``, a CSR's ``/approval`` only ``.status.conditions``
    (the strategies' ``GetResetFields``)."""
    paths = paths - STRIPPED_PATHS
    if subresource == "status":
        return frozenset(p for p in paths if p[:1] == ("f:status",))
    if subresource == "approval":  # CertificateSigningRequests: only the conditions
        return frozenset(p for p in paths if p[:2] == ("f:status", "f:conditions"))
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
    return go_json(fields, sort_keys=False)  # json.Marshal of the entry: struct order


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



# --- entries as stored: an Update without decoding what it does not change ----------------------

def canonical_keys(entries: JSON) -> list[ManagerKey] | None:
    """The keys of ``entries`` when they are exactly what ``encode_managed(decode_managed(
    entries))`` gives back (each entry in ``encode_entry``'s form and field order, its
    ``fieldsV1`` in ``fields_v1``'s, no key twice, in ``entry_order``), else None.

    What kubewire stores is in that form, so an update can keep such entries as they are and
    decode only those it changes (``record_update_entries``).
    """
    if not isinstance(entries, list) or not entries:
        return None
    keys: list[ManagerKey] = []
    previous: tuple[JSON, ...] | None = None
    try:
        for entry in entries:
            key = _cached_entry_key(entry)
            if key is None:
                return None
            order = entry_order(entry)
            if previous is not None and not previous < order:
                return None
            previous = order
            keys.append(key)
    except TypeError:  # path elements that do not compare: left to the decoding path
        return None
    return keys if len(set(keys)) == len(keys) else None


# Entries (as their JSON text) already judged by _canonical_entry_key: most of an object's
# entries are the same from one write to the next. Emptied when full.
_ENTRY_KEYS: dict[bytes, ManagerKey | None] = {}
ENTRY_KEY_CACHE_SIZE = 4096
_encode = msgspec.json.Encoder().encode


def _cached_entry_key(entry: JSON) -> ManagerKey | None:
    """``_canonical_entry_key`` of an entry decoded from JSON, remembered by its text (which
    tells its key order and every value's type)."""
    if type(entry) is not dict:
        return None
    text = _encode(entry)
    try:
        return _ENTRY_KEYS[text]
    except KeyError:
        pass
    key = _ENTRY_KEYS[text] = _canonical_entry_key(entry)
    if len(_ENTRY_KEYS) > ENTRY_KEY_CACHE_SIZE:
        _ENTRY_KEYS.clear()
    return key


def _canonical_entry_key(entry: JSON) -> ManagerKey | None:
    if type(entry) is not dict:
        return None
    manager, operation = entry.get("manager"), entry.get("operation")
    api_version, time = entry.get("apiVersion"), entry.get("time", None)
    subresource = entry.get("subresource", "")
    if type(manager) is not str or not manager or operation not in ("Apply", "Update") \
            or type(api_version) is not str or not api_version \
            or entry.get("fieldsType") != "FieldsV1" \
            or type(subresource) is not str or ("subresource" in entry and not subresource) \
            or ("time" in entry and type(time) is not str):
        return None
    names = list(entry)
    expected = ["manager", "operation", "apiVersion", *(["time"] if "time" in entry else []),
                "fieldsType", "fieldsV1", *(["subresource"] if subresource else [])]
    if names != expected or not _canonical_tree(entry["fieldsV1"], top=True):
        return None
    return manager_key(manager, operation, api_version, subresource)


def _canonical_tree(tree: JSON, *, top: bool = False) -> bool:
    """``tree`` is what ``fields_v1`` writes: dicts only, ``"."`` (as ``{}``) first and only
    on a member below the top that has children, keys strictly in ``element_order``."""
    if type(tree) is not dict:
        return False
    keys = list(tree)
    if keys and keys[0] == ".":
        dot = tree["."]
        if top or len(keys) == 1 or type(dot) is not dict or dot:
            return False
        keys = keys[1:]
    if len(keys) > 1:
        if all(key[:2] == "f:" for key in keys):  # fields order as their text
            if sorted(keys) != keys:  # dict keys: no two the same
                return False
        else:
            orders = [element_order(key) for key in keys]
            if any(not a < b for a, b in pairwise(orders)):
                return False
    return all(key != "." and _canonical_tree(tree[key]) for key in keys)


def _is_member(tree: dict[str, JSON], path: Path) -> bool:
    """``path`` is in the field set of the canonical ``fieldsV1`` ``tree``."""
    node: JSON = tree
    for element in path:
        node = node.get(element) if isinstance(node, dict) else None
        if node is None:
            return False
    return isinstance(node, dict) and (not node or "." in node)


def _keeps_fields(tree: dict[str, JSON], taken: FieldSet, lost: FieldSet) -> bool:
    """The writer's field set ``P`` (its canonical ``tree``) is the same after the update:
    ``(P - lost) | taken == P``, i.e. it owns every field it takes and none it loses but does
    not take back (a manager writing again the fields it wrote: most updates)."""
    return all(_is_member(tree, path) for path in taken) and not any(
        _is_member(tree, path) for path in lost - taken)


def _entry_with_tree(key: ManagerKey, tree: dict[str, JSON], now: str) -> dict[str, JSON]:
    """``encode_entry`` of the field set whose canonical ``fieldsV1`` is ``tree`` (that tree
    itself, not parsed and encoded again)."""
    entry: dict[str, JSON] = {"manager": key.manager, "operation": key.operation,
                              "apiVersion": key.api_version, "time": now,
                              "fieldsType": "FieldsV1", "fieldsV1": tree}
    if key.subresource:
        entry["subresource"] = key.subresource
    return entry


def record_update_entries(entries: list[dict[str, JSON]], keys: list[ManagerKey],
                          changes: Comparison, record: UpdateRecord,
                          ) -> list[dict[str, JSON]] | None:
    """``encode_managed(record_update(decode_managed(entries), changes, record))`` for entries
    ``canonical_keys`` accepted (``keys``), keeping each entry that loses nothing as it is.

    None when the result would need ``cap_update_managers`` to merge entries (then decode).
    """
    key = record.key
    taken = endpoint_fields(frozenset(changes.added | changes.modified), key.subresource,
                            record.has_status) - changes.removed
    lost = endpoint_fields(frozenset(changes.added | changes.modified | changes.removed),
                           key.subresource, record.has_status)
    out: list[dict[str, JSON]] = []
    previous: FieldSet = frozenset()
    kept_tree: dict[str, JSON] | None = None  # the writer's own fieldsV1, when it stays as is
    for entry, other in zip(entries, keys, strict=True):
        tree = entry["fieldsV1"]
        assert isinstance(tree, dict)
        if not tree:
            continue  # owns nothing: record_update drops it
        if other == key and taken:
            if _keeps_fields(tree, taken, lost):
                kept_tree = tree
            else:
                previous = parse_fields_v1(tree) - lost
            continue
        if not any(_is_member(tree, path) for path in lost):
            out.append(entry)
            continue
        remaining = parse_fields_v1(tree) - lost
        if remaining:
            time = entry.get("time")
            out.append(encode_entry(other, ManagedSet(
                remaining, str(entry["apiVersion"]), time if isinstance(time, str) else None)))
    if kept_tree is not None:
        out.append(_entry_with_tree(key, kept_tree, record.now))
    elif taken:
        out.append(encode_entry(key, ManagedSet(taken | previous, key.api_version, record.now)))
    if sum(1 for entry in out if entry["operation"] == "Update") > MAX_UPDATE_MANAGERS:
        return None
    out.sort(key=entry_order)
    return out
