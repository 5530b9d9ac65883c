"""The PV binder's matching and bookkeeping, as kube's pv_controller and pv_helpers tests
state them."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.controllers.volume_rules import (
    bind_claim,
    bind_volume,
    claim_status,
    find_best_match,
    satisfies,
    should_delay,
    unbound_volume,
    volume_phase,
)

Obj = dict[str, Any]


def pv(name: str, size: str, *, modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str =
       "Available", labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"capacity": {"storage": size}, "accessModes": list(modes), **spec},
            "status": {"phase": phase}}


def pvc(size: str, **spec: Any) -> Obj:
    return {"metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}, **spec}}


def name(found: Obj | None) -> str | None:
    return None if found is None else str(found["metadata"]["name"])


def test_smallest_fitting_volume_of_the_fewest_modes() -> None:
    volumes = [pv("a", "10Gi"), pv("b", "2Gi"), pv("c", "1Gi", modes=("ReadWriteOnce",
                                                                         "ReadOnlyMany")),
               pv("d", "1500Mi", phase="Bound"), pv("e", "1Gi", storageClassName="other")]
    assert name(find_best_match(pvc("1Gi"), volumes, False)) == "b"
    assert name(find_best_match(pvc("1Gi", accessModes=["ReadOnlyMany"]), volumes,
                                False)) == "c"
    assert name(find_best_match(pvc("11Gi"), volumes, False)) is None
    assert name(find_best_match(pvc("1Gi", storageClassName="other"), volumes, False)) == "e"
    assert name(find_best_match(pvc("1Gi", volumeMode="Block"), volumes, False)) is None
    labelled = [pv("x", "5Gi", labels={"tier": "gold"}), pv("y", "1Gi")]
    assert name(find_best_match(pvc("1Gi", selector={"matchLabels": {"tier": "gold"}}),
                                labelled, False)) == "x"
    # delayed binding binds only a volume pre-bound to the claim
    prebound = pv("p", "3Gi", claimRef={"namespace": "ns", "name": "c"})
    assert name(find_best_match(pvc("1Gi"), [*volumes, prebound], True)) == "p"
    assert name(find_best_match(pvc("1Gi"), volumes, True)) is None


def test_delay_and_satisfy() -> None:
    classes = {"wait": {"volumeBindingMode": "WaitForFirstConsumer"}, "now": {}}
    assert should_delay(pvc("1Gi", storageClassName="wait"), classes)
    assert not should_delay(pvc("1Gi", storageClassName="now"), classes)
    chosen = pvc("1Gi", storageClassName="wait")
    chosen["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n1"}
    assert not should_delay(chosen, classes)
    assert satisfies(pv("t", "500Mi"), pvc("1Gi")) == "requested PV is too small"
    assert satisfies(pv("t", "5Gi", storageClassName="x"), pvc("1Gi")) == \
        "storageClassName does not match"
    assert satisfies(pv("t", "5Gi"), pvc("1Gi")) is None


def test_binding_writes() -> None:
    volume, claim = pv("v", "2Gi"), pvc("1Gi")
    bound = bind_volume(volume, claim)
    assert bound is not None
    assert bound["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert bound["spec"]["claimRef"]["uid"] == "u1"
    assert bind_volume(bound, claim) is None
    claimed = bind_claim(claim, bound)
    assert claimed is not None and claimed["spec"]["volumeName"] == "v"
    assert claimed["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes",
                                                  "pv.kubernetes.io/bind-completed": "yes"}
    assert bind_claim(claimed, bound) is None
    assert claim_status(claimed, "Bound", bound) == {
        "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "2Gi"}}
    assert volume_phase(bound, "Available", "", "T") is None
    assert volume_phase(bound, "Bound", "", "T") == {"phase": "Bound",
                                                     "lastPhaseTransitionTime": "T"}
    assert "claimRef" not in unbound_volume(bound)["spec"]
