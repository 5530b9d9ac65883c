"""What a write does to a CRD beyond the generic rules (apiextensions-apiserver v1.32
``pkg/registry/customresourcedefinition/strategy.go`` and ``etcd.go``; crds.md §2.1, §2.5).

- create: status cleared to its Go zero value, ``storedVersions`` the storage version;
- update of the main resource: status kept from the stored object, and the current storage
  version appended to ``storedVersions`` when missing (never removed there);
- the first DELETE: deletionTimestamp, the cleanup finalizer and ``Terminating=True
  InstanceDeletionPending`` in one update, answered 200 with the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON

CRD_ID = "apiextensions.k8s.io/customresourcedefinitions"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def storage_version(crd: Mapping[str, Any]) -> str | None:
    """The name of the version marked ``storage: true`` (validation ensures exactly one)."""
    for version in (crd.get("spec") or {}).get("versions") or ():
        if isinstance(version, Mapping) and version.get("storage") is True:
            name = version.get("name")
            return name if isinstance(name, str) else None
    return None


def status_on_create(crd: Mapping[str, Any]) -> dict[str, JSON]:
    """``PrepareForCreate``: the status a new CRD is stored with (acceptedNames' ``plural`` and
    ``kind`` have no omitempty, so the zero value shows them empty)."""
    stored = storage_version(crd)
    return {"acceptedNames": {"plural": "", "kind": ""},
            "storedVersions": [stored] if stored is not None else []}


def status_on_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, JSON]:
    """``PrepareForUpdate``: the stored status, with the new storage version appended to
    ``storedVersions`` when it is not there yet."""
    status = dict(old.get("status") or {})
    stored = list(status.get("storedVersions") or [])
    version = storage_version(new)
    if version is not None and version not in stored:
        stored.append(version)
    status["storedVersions"] = stored
    return status


def set_condition(status: dict[str, JSON], condition: Mapping[str, JSON], now: str) -> None:
    """``SetCRDCondition``: replace the condition of its type; ``lastTransitionTime`` moves only
    when the status flips (or the condition is new)."""
    conditions = [dict(c) for c in status.get("conditions") or () if isinstance(c, Mapping)]
    for existing in conditions:
        if existing.get("type") == condition["type"]:
            flipped = existing.get("status") != condition["status"]
            existing.update(condition)
            if flipped or not existing.get("lastTransitionTime"):
                existing["lastTransitionTime"] = now
            break
    else:
        conditions.append({"type": condition["type"], "status": condition["status"],
                           "lastTransitionTime": now, "reason": condition.get("reason", ""),
                           "message": condition.get("message", "")})
    status["conditions"] = [_ordered_condition(c) for c in conditions]


def _ordered_condition(condition: Mapping[str, JSON]) -> dict[str, JSON]:
    # the v1 struct's field order: type, status, lastTransitionTime, reason, message
    # (the last three with omitempty)
    out = {"type": condition.get("type", ""), "status": condition.get("status", "")}
    for key in ("lastTransitionTime", "reason", "message"):
        if condition.get(key):
            out[key] = condition[key]
    return out


def condition(crd: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for found in (crd.get("status") or {}).get("conditions") or ():
        if isinstance(found, Mapping) and found.get("type") == kind:
            return found
    return None


def is_true(crd: Mapping[str, Any], kind: str) -> bool:
    found = condition(crd, kind)
    return found is not None and found.get("status") == "True"


def mark_deleting(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """``REST.Delete`` on a CRD not yet deleting: the object to store (``crd`` is a copy)."""
    meta = crd.setdefault("metadata", {})
    if not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = now
    finalizers = list(meta.get("finalizers") or [])
    if CLEANUP_FINALIZER not in finalizers:
        meta["finalizers"] = [*finalizers, CLEANUP_FINALIZER]
    status = crd.setdefault("status", {})
    set_condition(status, {"type": "Terminating", "status": "True",
                           "reason": "InstanceDeletionPending",
                           "message": "CustomResourceDefinition marked for deletion; "
                                      "CustomResource deletion will begin soon"}, now)
    return crd
