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

from kubewire.json_types import JSON
from kubewire.server.apiextensions.crd_internal import as_dict, semantic_equal, storage_version

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
