"""The disruption controller's arithmetic, as kube's disruption_test.go states it."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.cluster.controllers.disruption_rules import (
    Counts,
    ScaleError,
    budget_status,
    cleared_disruption,
    current_healthy,
    disrupted_pods,
    expected_and_desired,
    fail_safe,
    rfc3339,
    stale_disruption_wait,
    uses_scale,
)

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def pdb(**spec: Any) -> Obj:
    return {"metadata": {"name": "b", "namespace": "default", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def pod(name: str, *, ready: bool = True, deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(NOW)
    return {"metadata": meta, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_expected_and_desired() -> None:
    assert expected_and_desired(pdb(minAvailable=2), 5, None) == (5, 2)
    assert not uses_scale(pdb(minAvailable=2))
    assert uses_scale(pdb(minAvailable="50%"))
    assert expected_and_desired(pdb(minAvailable="50%"), 2, 5) == (5, 3)  # rounded up
    assert expected_and_desired(pdb(maxUnavailable=1), 3, 3) == (3, 2)
    assert expected_and_desired(pdb(maxUnavailable="30%"), 3, 3) == (3, 2)  # ceil(0.9) = 1
    assert expected_and_desired(pdb(maxUnavailable=5), 3, 3) == (3, 0)
    with pytest.raises(ScaleError):
        expected_and_desired(pdb(maxUnavailable="x"), 3, 3)


def test_status_and_condition() -> None:
    status = budget_status(pdb(maxUnavailable=1), Counts(3, 2, 3), {}, NOW)
    assert status == {"observedGeneration": 2, "disruptionsAllowed": 1, "currentHealthy": 3,
                      "desiredHealthy": 2, "expectedPods": 3, "conditions": [
                          {"type": "DisruptionAllowed", "status": "True",
                           "observedGeneration": 2, "lastTransitionTime": rfc3339(NOW),
                           "reason": "SufficientPods", "message": ""}]}
    current = {**pdb(maxUnavailable=1), "status": status}
    assert budget_status(current, Counts(3, 2, 3), {}, NOW + 5) is None  # nothing to write
    lower = budget_status(current, Counts(2, 2, 3), {}, NOW + 5)
    assert lower is not None and lower["disruptionsAllowed"] == 0
    assert lower["conditions"][0]["reason"] == "InsufficientPods"
    assert lower["conditions"][0]["lastTransitionTime"] == rfc3339(NOW + 5)
    # nothing expected: nothing allowed, whatever is healthy
    assert (budget_status(pdb(minAvailable=0), Counts(2, 0, 0), {}, NOW) or {}
            )["disruptionsAllowed"] == 0
    failed = fail_safe(current, "found no controllers for pod \"x\"", NOW + 9)
    assert failed["disruptionsAllowed"] == 0
    assert failed["conditions"][0]["reason"] == "SyncFailed"
    assert failed["conditions"][0]["message"] == 'found no controllers for pod "x"'


def test_disrupted_pods_expire_after_two_minutes() -> None:
    budget = {**pdb(minAvailable=1), "status": {"disruptedPods": {
        "a": rfc3339(NOW - 30), "b": rfc3339(NOW - 130), "c": rfc3339(NOW), "gone": rfc3339(NOW)}}}
    pods = [pod("a"), pod("b"), pod("c", deleting=True)]
    kept, recheck, overdue = disrupted_pods(budget, pods, NOW)
    assert kept == {"a": rfc3339(NOW - 30)}
    assert recheck == NOW + 90
    assert [p["metadata"]["name"] for p in overdue] == ["b"]
    # a recently disrupted pod and one being deleted do not count as healthy
    assert current_healthy([*pods, pod("d"), pod("e", ready=False)], kept, NOW) == 2


def test_stale_disruption_target() -> None:
    target = {"metadata": {"name": "p"}, "status": {"phase": "Running", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
         "message": "Eviction API: evicting", "lastTransitionTime": rfc3339(NOW - 100)}]}}
    assert stale_disruption_wait(target, NOW) == 20.0
    assert stale_disruption_wait(target, NOW + 60) == 0.0
    kubelet = {"metadata": {}, "status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]}}
    assert stale_disruption_wait(kubelet, NOW) is None
    assert cleared_disruption(target, NOW) == [
        {"type": "DisruptionTarget", "status": "False", "lastTransitionTime": rfc3339(NOW)}]
