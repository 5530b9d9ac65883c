"""Cells of ResourceQuotas, PersistentVolumeClaims, PersistentVolumes and StorageClasses.

Source: ``kubernetes/kubernetes:pkg/printers/internalversion/printers.go``
(``printResourceQuota``, ``printPersistentVolumeClaim``, ``printPersistentVolume``,
``printStorageClass``) and the helpers they call (``GetAccessModesAsString``,
``GetPersistentVolumeClass``/``ClaimClass``, ``storageutil.IsDefaultAnnotation``). Each cell
formatter gets the whole object.
"""

from __future__ import annotations

from datetime import datetime

from kubewire.json_types import JSON
from kubewire.quantity_text import amount_of, canonical
from kubewire.server.tables.cells import Cell, as_dict, as_str

UNSET = "<unset>"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
          ("ReadWriteOncePod", "RWOP"))


def _quantity(value: JSON) -> str:
    """``Quantity.String()`` of a stored quantity; a missing one is Go's zero, ``0``."""
    amount = amount_of(value)
    return canonical(amount) if amount is not None else "0"


def _quota_column(obj: JSON, limits: bool) -> str:
    status = as_dict(as_dict(obj).get("status"))
    hard, used = as_dict(status.get("hard")), as_dict(status.get("used"))
    parts = []
    for name in sorted(hard):
        pieces = name.split(".")
        if (len(pieces) > 1 and pieces[0] == "limits") == limits:
            parts.append(f"{name}: {_quantity(used.get(name))}/{_quantity(hard[name])}")
    return ", ".join(parts)


def quota_request(obj: JSON, now: datetime) -> Cell:
    """REQUEST: ``name: used/hard`` of every hard resource but ``limits.*``, sorted."""
    return _quota_column(obj, limits=False)


def quota_limit(obj: JSON, now: datetime) -> Cell:
    """LIMIT: the same of the ``limits.*`` resources."""
    return _quota_column(obj, limits=True)


def access_modes(value: JSON, now: datetime) -> Cell:
    """``GetAccessModesAsString``: RWO, ROX, RWX, RWOP in that order, joined with commas."""
    modes = value if isinstance(value, list) else []
    return ",".join(short for mode, short in _MODES if mode in modes)


def _terminating_phase(obj: JSON) -> str:
    meta = as_dict(as_dict(obj).get("metadata"))
    if meta.get("deletionTimestamp"):
        return "Terminating"
    return as_str(as_dict(as_dict(obj).get("status")).get("phase"))


def volume_status(obj: JSON, now: datetime) -> Cell:
    """STATUS of claims and volumes: the phase, ``Terminating`` once marked for deletion."""
    return _terminating_phase(obj)


def _class_of(obj: JSON) -> str:
    annotations = as_dict(as_dict(as_dict(obj).get("metadata")).get("annotations"))
    if BETA_CLASS_ANNOTATION in annotations:
        return as_str(annotations[BETA_CLASS_ANNOTATION])
    return as_str(as_dict(as_dict(obj).get("spec")).get("storageClassName"))


def storage_class(obj: JSON, now: datetime) -> Cell:
    """STORAGECLASS: the beta annotation, else ``spec.storageClassName``."""
    return _class_of(obj)


def or_unset(value: JSON, now: datetime) -> Cell:
    """VOLUMEMODE and VOLUMEATTRIBUTESCLASS: the value, ``<unset>`` when absent or empty."""
    return as_str(value) or UNSET


def claim_capacity(obj: JSON, now: datetime) -> Cell:
    """CAPACITY of a claim: its bound volume's capacity from status, "" while unbound."""
    claim = as_dict(obj)
    if not as_str(as_dict(claim.get("spec")).get("volumeName")):
        return ""
    return _quantity(as_dict(as_dict(claim.get("status")).get("capacity")).get("storage"))


def claim_access_modes(obj: JSON, now: datetime) -> Cell:
    """ACCESS MODES of a claim: its status's, "" while unbound."""
    claim = as_dict(obj)
    if not as_str(as_dict(claim.get("spec")).get("volumeName")):
        return ""
    return access_modes(as_dict(claim.get("status")).get("accessModes"), now)


def volume_capacity(value: JSON, now: datetime) -> Cell:
    """CAPACITY of a volume: ``spec.capacity.storage`` (``0`` when unset)."""
    return _quantity(as_dict(value).get("storage"))


def volume_claim(value: JSON, now: datetime) -> Cell:
    """CLAIM: ``namespace/name`` of ``spec.claimRef``, "" without one."""
    if not isinstance(value, dict):
        return ""
    return f"{as_str(value.get('namespace'))}/{as_str(value.get('name'))}"


def class_name(obj: JSON, now: datetime) -> Cell:
    """A StorageClass's NAME, `` (default)`` added for the default class."""
    meta = as_dict(as_dict(obj).get("metadata"))
    annotations = as_dict(meta.get("annotations"))
    name = as_str(meta.get("name"))
    if any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS):
        return name + " (default)"
    return name


def reclaim_policy(value: JSON, now: datetime) -> Cell:
    return as_str(value) if isinstance(value, str) else "Delete"


def binding_mode(value: JSON, now: datetime) -> Cell:
    return as_str(value) if isinstance(value, str) else "Immediate"


def allow_expansion(value: JSON, now: datetime) -> Cell:
    """ALLOWVOLUMEEXPANSION: a bool cell, false when unset."""
    return value is True
