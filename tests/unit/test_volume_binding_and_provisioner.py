"""The scheduler's PreBind choices and the simulated provisioner's, without a server."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers.provisioner import (
    default_storage_class,
    deletable,
    provisioned_volume,
    wants_volume,
)
from kubewire.cluster.scheduler.volume_binding import claim_names, is_bound, needs_node

Obj = dict[str, Any]
CLASSES: dict[str, Obj] = {"standard": default_storage_class(),
                           "fast": {"provisioner": "kubewire.io/local-path",
                                    "volumeBindingMode": "Immediate", "reclaimPolicy": "Retain"},
                           "other": {"provisioner": "example.com/csi"}}


def claim(cls: str, **notes: str) -> Obj:
    return {"metadata": {"name": "data", "namespace": "ns", "uid": "u1", "annotations": notes},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "2Gi"}}}}


def test_claims_of_a_pod_and_which_wait_for_a_node() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"volumes": [
        {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
        {"name": "cfg", "configMap": {"name": "x"}}]}}
    assert claim_names(pod) == ["data", "p-scratch"]
    assert needs_node(claim("standard"), CLASSES)
    assert not needs_node(claim("fast"), CLASSES)
    assert not needs_node(claim("standard", **{"volume.kubernetes.io/selected-node": "n"}),
                          CLASSES)
    bound = claim("standard", **{"pv.kubernetes.io/bind-completed": "yes"})
    bound["spec"]["volumeName"] = "v"
    assert is_bound(bound) and not needs_node(bound, CLASSES)


def test_what_the_provisioner_provisions() -> None:
    handed = {"volume.kubernetes.io/storage-provisioner": "kubewire.io/local-path"}
    assert not wants_volume(claim("standard", **handed), CLASSES)  # no node chosen yet
    chosen = claim("standard", **handed, **{"volume.kubernetes.io/selected-node": "n1"})
    assert wants_volume(chosen, CLASSES)
    assert wants_volume(claim("fast", **handed), CLASSES)
    assert not wants_volume(claim("other", **handed), CLASSES)  # another provisioner's class
    assert not wants_volume(claim("fast"), CLASSES)  # the binder has not handed it over
    volume = provisioned_volume(chosen, CLASSES["standard"])
    assert volume["metadata"] == {"name": "pvc-u1", "annotations": {
        "pv.kubernetes.io/provisioned-by": "kubewire.io/local-path"}}
    assert volume["spec"]["capacity"] == {"storage": "2Gi"}
    assert volume["spec"]["claimRef"]["uid"] == "u1"
    assert volume["spec"]["hostPath"]["path"] == "/var/local-path-provisioner/pvc-u1_ns_data"
    assert volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0][
        "matchExpressions"] == [{"key": "kubernetes.io/hostname", "operator": "In",
                                 "values": ["n1"]}]
    assert provisioned_volume(claim("fast", **handed), CLASSES["fast"])["spec"][
        "persistentVolumeReclaimPolicy"] == "Retain"
    released = {**volume, "status": {"phase": "Released"}}
    assert deletable(released)
    assert not deletable(volume)
