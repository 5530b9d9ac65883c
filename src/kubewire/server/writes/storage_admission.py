"""The DefaultStorageClass and StorageObjectInUseProtection admission plugins
(``plugin/pkg/admission/storage/storageclass/setdefault/admission.go``,
``plugin/pkg/admission/storage/storageobjectinuseprotection/admission.go``, kube v1.32).

``protect``: a created PersistentVolumeClaim gets the ``kubernetes.io/pvc-protection``
finalizer, a PersistentVolume ``kubernetes.io/pv-protection`` (the protection controllers,
``controllers/storage_protection``, take them off once nothing uses the object).

A PersistentVolumeClaim created without ``spec.storageClassName`` (absent or null: ``""``
asks for no class) and without the beta ``volume.beta.kubernetes.io/storage-class`` annotation
gets the default StorageClass's name: the class annotated
``storageclass.kubernetes.io/is-default-class: "true"`` (or the beta annotation); of several,
the newest, then the first by name (``GetDefaultClass``). ``default_class`` is pure;
``default_claim_class`` reads the StorageClasses from the watch cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubewire.server.context import ServerContext
from kubewire.server.writes.listers import cluster_objects

DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
PROTECTION_FINALIZERS = {"core/persistentvolumeclaims": PVC_PROTECTION,
                         "core/persistentvolumes": PV_PROTECTION}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = _meta(storage_class).get("annotations")
    annotations = annotations if isinstance(annotations, dict) else {}
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def default_class(classes: Iterable[Mapping[str, Any]]) -> str | None:
    """The default class's name: newest first (RFC 3339 times sort as text), then by name."""
    defaults = [c for c in classes if is_default(c)]
    if not defaults:
        return None
    defaults.sort(key=lambda c: str(_meta(c).get("name") or ""))
    defaults.sort(key=lambda c: str(_meta(c).get("creationTimestamp") or ""), reverse=True)
    return str(_meta(defaults[0]).get("name") or "")


def needs_class(claim: Mapping[str, Any]) -> bool:
    spec = claim.get("spec")
    annotations = _meta(claim).get("annotations")
    if isinstance(annotations, dict) and BETA_CLASS_ANNOTATION in annotations:
        return False
    return isinstance(spec, dict) and spec.get("storageClassName") is None


def default_claim_class(ctx: ServerContext, claim: dict[str, Any]) -> None:
    """Admit a claim being created: set the default class's name in place, if it needs one."""
    if not needs_class(claim):
        return
    name = default_class(cluster_objects(ctx, "storage.k8s.io", "storageclasses"))
    if name is not None:
        claim["spec"]["storageClassName"] = name


def protect(resource_id: str, obj: dict[str, Any]) -> None:
    """StorageObjectInUseProtection on a create: the kind's finalizer added once (in place)."""
    finalizer = PROTECTION_FINALIZERS.get(resource_id)
    if finalizer is None:
        return
    meta = obj.setdefault("metadata", {})
    finalizers = meta.get("finalizers")
    finalizers = list(finalizers) if isinstance(finalizers, list) else []
    if finalizer not in finalizers:
        meta["finalizers"] = [*finalizers, finalizer]


__all__ = [
    "PROTECTION_FINALIZERS",
    "PVC_PROTECTION",
    "PV_PROTECTION",
    "default_claim_class",
    "default_class",
    "is_default",
    "needs_class",
    "protect",
]
