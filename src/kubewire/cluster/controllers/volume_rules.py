"""What the PersistentVolume binder decides (pure), after kube 1.32's
``pkg/controller/volume/persistentvolume`` and ``component-helpers/storage/volume``.

``find_best_match``: the volume for a claim as ``findBestMatchForClaim`` picks it — volume
groups by access modes (those whose modes include all the claim's, fewest modes first), and in
each ``FindMatchingVolume``: a volume pre-bound to the claim wins; otherwise the smallest
Available one with enough capacity, the claim's volumeMode, its class, labels its selector
matches, not being deleted; none for a claim whose binding waits for its first consumer (the
scheduler's part). ``bind_volume``/``bind_claim``/``claim_status``: the objects ``bind``
writes (claimRef and ``pv.kubernetes.io/bound-by-controller``, ``spec.volumeName`` and
``pv.kubernetes.io/bind-completed``, the claim's status from the volume). ``volume_phase``:
``updateVolumePhase`` (with ``lastPhaseTransitionTime``). Annotations are kube's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubewire.cluster.controllers.replica_rules import meta
from kubewire.quantity import parse_quantity
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match

Obj = dict[str, Any]
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"


def notes_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(meta(obj).get("annotations") or {})


def claim_class(claim: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation first, then the field."""
    beta = notes_of(claim).get(BETA_STORAGE_CLASS)
    if beta is not None:
        return beta
    return str((claim.get("spec") or {}).get("storageClassName") or "")


def volume_class(volume: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClass``."""
    beta = notes_of(volume).get(BETA_STORAGE_CLASS)
    if beta is not None:
        return beta
    return str((volume.get("spec") or {}).get("storageClassName") or "")


def storage(obj: Mapping[str, Any], where: str) -> Fraction:
    """``spec.capacity.storage`` (a volume) or ``spec.resources.requests.storage`` (a claim)."""
    spec = obj.get("spec") or {}
    raw = (spec.get("capacity") or {}).get("storage") if where == "capacity" else \
        ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    return parse_quantity(raw) or Fraction(0)


def bound_to_claim(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> bool:
    """``IsVolumeBoundToClaim``: the claimRef names the claim (its uid, when set, too)."""
    ref = (volume.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    if ref.get("name") != meta(claim).get("name") \
            or ref.get("namespace") != meta(claim).get("namespace"):
        return False
    return not ref.get("uid") or ref.get("uid") == meta(claim).get("uid")


def _mode(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("volumeMode") or "Filesystem")


def delay_binding(claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> bool:
    """``IsDelayBindingMode``: the claim's class binds when its first consumer is scheduled."""
    found = classes.get(claim_class(claim))
    return bool(found and found.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER)


def should_delay(claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> bool:
    """``shouldDelayBinding``: delayed until the scheduler picked a node
    (``volume.kubernetes.io/selected-node``)."""
    return SELECTED_NODE not in notes_of(claim) and delay_binding(claim, classes)


def _selector_matches(claim: Mapping[str, Any], volume: Mapping[str, Any]) -> bool:
    raw = (claim.get("spec") or {}).get("selector")
    if raw is None:
        return True
    try:
        selector = label_selector_from_match(raw)
    except SelectorError:
        return False
    return selector.matches(meta(volume).get("labels") or {})


def find_matching(claim: Mapping[str, Any], volumes: Iterable[Mapping[str, Any]],
                  delay: bool) -> Obj | None:
    """``FindMatchingVolume`` without a node (the PV controller's path)."""
    requested = storage(claim, "request")
    wanted_class = claim_class(claim)
    best: Obj | None = None
    best_size = Fraction(0)
    for volume in volumes:
        ref = (volume.get("spec") or {}).get("claimRef")
        if ref and not bound_to_claim(volume, claim):
            continue
        size = storage(volume, "capacity")
        if size < requested or _mode(volume) != _mode(claim) \
                or meta(volume).get("deletionTimestamp"):
            continue
        if bound_to_claim(volume, claim):
            return dict(volume)
        if delay:
            continue
        if (volume.get("status") or {}).get("phase") != "Available" \
                or not _selector_matches(claim, volume) or volume_class(volume) != wanted_class:
            continue
        if best is None or best_size > size:
            best, best_size = dict(volume), size
    return best


def find_best_match(claim: Mapping[str, Any], volumes: Iterable[Mapping[str, Any]],
                    delay: bool) -> Obj | None:
    """``findBestMatchForClaim``: groups of volumes by access modes, fewest modes first."""
    wanted = set((claim.get("spec") or {}).get("accessModes") or [])
    groups: dict[frozenset[str], list[Mapping[str, Any]]] = {}
    for volume in volumes:
        modes = frozenset((volume.get("spec") or {}).get("accessModes") or [])
        groups.setdefault(modes, []).append(volume)
    for modes in sorted((m for m in groups if wanted <= m), key=lambda m: (len(m), sorted(m))):
        found = find_matching(claim, groups[modes], delay)
        if found is not None:
            return found
    return None


def satisfies(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> str | None:
    """``checkVolumeSatisfyClaim``: why a requested volume cannot serve the claim, or None."""
    if storage(volume, "capacity") < storage(claim, "request"):
        return "requested PV is too small"
    if volume_class(volume) != claim_class(claim):
        return "storageClassName does not match"
    if _mode(volume) != _mode(claim):
        return "incompatible volumeMode"
    wanted = set((claim.get("spec") or {}).get("accessModes") or [])
    if not wanted <= set((volume.get("spec") or {}).get("accessModes") or []):
        return "incompatible accessMode"
    return None


def claim_ref(claim: Mapping[str, Any]) -> Obj:
    """``ref.GetReference`` of a claim, as ``bindVolumeToClaim`` stores it."""
    return {"kind": "PersistentVolumeClaim", "namespace": meta(claim).get("namespace", ""),
            "name": meta(claim).get("name", ""), "uid": meta(claim).get("uid", ""),
            "apiVersion": "v1", "resourceVersion": meta(claim).get("resourceVersion", "")}


def bind_volume(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> Obj | None:
    """``bindVolumeToClaim``: the volume with its claimRef set (and
    ``bound-by-controller`` when the controller chose it), or None when nothing changes."""
    spec = dict(volume.get("spec") or {})
    ref = spec.get("claimRef")
    if ref and ref.get("uid") == meta(claim).get("uid") and bound_to_claim(volume, claim):
        return None
    new_meta = dict(meta(volume))
    if not ref or not bound_to_claim(volume, claim):
        new_meta["annotations"] = {**notes_of(volume), BOUND_BY_CONTROLLER: "yes"}
    spec["claimRef"] = claim_ref(claim)
    return {**volume, "metadata": new_meta, "spec": spec}


def bind_claim(claim: Mapping[str, Any], volume: Mapping[str, Any]) -> Obj | None:
    """``bindClaimToVolume``: ``spec.volumeName`` and the annotations, or None when set."""
    spec = dict(claim.get("spec") or {})
    notes = notes_of(claim)
    name = meta(volume).get("name", "")
    changed = False
    if spec.get("volumeName") != name:
        if not spec.get("volumeName"):
            notes[BOUND_BY_CONTROLLER] = "yes"
        spec["volumeName"] = name
        changed = True
    if notes.get(BIND_COMPLETED) != "yes":
        notes[BIND_COMPLETED] = "yes"
        changed = True
    if notes != notes_of(claim):
        changed = True
    if not changed:
        return None
    return {**claim, "metadata": {**meta(claim), "annotations": notes}, "spec": spec}


def claim_status(claim: Mapping[str, Any], phase: str,
                 volume: Mapping[str, Any] | None) -> Obj | None:
    """``updateClaimStatus``: the status to write, or None when it already says so."""
    status = dict(claim.get("status") or {})
    new = dict(status)
    new["phase"] = phase
    if volume is None:
        new.pop("accessModes", None)
        new.pop("capacity", None)
    else:
        spec = volume.get("spec") or {}
        new["accessModes"] = list(spec.get("accessModes") or [])
        if parse_quantity((status.get("capacity") or {}).get("storage")) != \
                parse_quantity((spec.get("capacity") or {}).get("storage")):
            new["capacity"] = dict(spec.get("capacity") or {})
    return None if new == status else new


def volume_phase(volume: Mapping[str, Any], phase: str, message: str, now: str) -> Obj | None:
    """``updateVolumePhase``: the status to write, or None when it is already ``phase``."""
    status = dict(volume.get("status") or {})
    if status.get("phase") == phase and status.get("message", "") == message:
        return None
    new: Obj = {"phase": phase}
    if message:
        new["message"] = message
    new["lastPhaseTransitionTime"] = now if status.get("phase") != phase \
        else status.get("lastPhaseTransitionTime", now)
    return new


def unbound_volume(volume: Mapping[str, Any]) -> Obj:
    """``unbindVolume``: the controller's binding undone (claimRef gone), or a user's
    pre-binding kept without the uid."""
    spec = dict(volume.get("spec") or {})
    notes = notes_of(volume)
    if BOUND_BY_CONTROLLER in notes:
        spec.pop("claimRef", None)
        notes.pop(BOUND_BY_CONTROLLER)
    else:
        ref = dict(spec.get("claimRef") or {})
        ref.pop("uid", None)
        ref.pop("resourceVersion", None)
        spec["claimRef"] = ref
    return {**volume, "metadata": {**meta(volume), "annotations": notes}, "spec": spec}
