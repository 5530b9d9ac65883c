"""The CustomResourceDefinition strategy: what a write does to the object before validation.

Source: ``apiextensions-apiserver:pkg/registry/customresourcedefinition/strategy.go`` (crds.md
§2.1). The generic write pipeline has already reset ``metadata.generation`` to the stored value
on update (``rest.BeforeUpdate``) when these run.

- create: status cleared, generation 1, ``storedVersions`` = [storage version];
- update: status copied from the stored object, generation +1 iff the spec changed, the storage
  version appended to ``storedVersions`` if missing (never removed);
- ``/status`` update: spec reset to the stored spec; metadata is *not* reset (kube passes the new
  object twice to ``ResetObjectMetaForStatus``), which is how a controller drops the cleanup
  finalizer through ``/status``.

A reset status is written in the v1 type's field order with its non-omitempty fields
(``conditions``, ``acceptedNames.{plural,kind}``, ``storedVersions``) as Go encodes them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubewire.json_types import JSON
from kubewire.server.apiextensions.crd import naming
from kubewire.server.apiextensions.crd.crd_internal import (
    as_dict,
    semantic_equal,
    storage_version,
)

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


def _append_storage_version(crd: dict[str, JSON]) -> None:
    version = storage_version(crd)
    if version is None:
        return
    status = crd.setdefault("status", {})
    stored = status.get("storedVersions")
    if not isinstance(stored, list):
        stored = []
    if version not in stored:
        status["storedVersions"] = [*stored, version]


def prepare_for_create(crd: dict[str, JSON]) -> None:
    """``strategy.PrepareForCreate``, in place."""
    crd["status"] = {"conditions": None, "acceptedNames": {"plural": "", "kind": ""},
                     "storedVersions": None}
    meta = crd.get("metadata")
    if isinstance(meta, dict):
        meta["generation"] = 1
    _append_storage_version(crd)


def prepare_for_update(crd: dict[str, JSON], old: Mapping[str, JSON]) -> None:
    """``strategy.PrepareForUpdate``, in place (``crd``'s generation is the stored one)."""
    if "status" in old:
        crd["status"] = copy.deepcopy(old["status"])
    else:
        crd.pop("status", None)
    if not semantic_equal(as_dict(crd.get("spec")), as_dict(old.get("spec"))):
        meta, old_meta = crd.get("metadata"), as_dict(old.get("metadata"))
        if isinstance(meta, dict):
            generation = old_meta.get("generation")
            meta["generation"] = (generation if isinstance(generation, int) else 0) + 1
    _append_storage_version(crd)


def prepare_for_status_update(crd: dict[str, JSON], old: Mapping[str, JSON]) -> None:
    """``statusStrategy.PrepareForUpdate``, in place: the spec is the stored one."""
    if "spec" in old:
        crd["spec"] = copy.deepcopy(old["spec"])
    else:
        crd.pop("spec", None)


# --- what the write path and the CRD controller ask (kubewire's wiring) ----------------------

CRD_ID = "apiextensions.k8s.io/customresourcedefinitions"


def status_on_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, JSON]:
    """``PrepareForUpdate``'s status: the stored one, the new storage version appended to
    ``storedVersions`` when missing (the generic update path bumps generation)."""
    merged: dict[str, JSON] = {"spec": new.get("spec"), "status": copy.deepcopy(
        old.get("status") or {})}
    _append_storage_version(merged)
    status = merged["status"]
    assert isinstance(status, dict)
    return status


def set_condition(status: dict[str, JSON], condition: Mapping[str, JSON], now: str) -> None:
    """``SetCRDCondition`` on ``status`` in place (``naming.set_condition``'s rules)."""
    current = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    status["conditions"] = naming.set_condition(current, condition, now)


def mark_deleting(crd: dict[str, Any], now: str) -> dict[str, Any]:
    """``REST.Delete`` on a CRD not yet deleting (etcd.go): deletionTimestamp, the cleanup
    finalizer and ``Terminating=True InstanceDeletionPending`` in one update (``crd`` is a
    copy, changed and returned)."""
    meta = crd.setdefault("metadata", {})
    if not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = now
    finalizers = list(meta.get("finalizers") or [])
    if CLEANUP_FINALIZER not in finalizers:
        meta["finalizers"] = [*finalizers, CLEANUP_FINALIZER]
    set_condition(crd.setdefault("status", {}), naming.terminating_condition(
        "InstanceDeletionPending"), now)
    return crd
