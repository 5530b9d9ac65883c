"""Pure rules of the issue-20 kinds: PodDisruptionBudgets against a pod (eviction.go),
PriorityClasses (the Priority plugin), the default IngressClass."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubewire.server.writes.disruption_budgets import (
    decremented,
    matching_budgets,
    plan_for,
)
from kubewire.server.writes.ingress_classes import admit_ingress, default_class
from kubewire.server.writes.priority_classes import (
    PodPriority,
    global_default_conflict,
    known_system_class_error,
    priority_for_pod,
)
from kubewire.status import Forbidden, TooManyRequests

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
POD = {"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
       "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def _budget(name: str, selector: Any, namespace: str = "ns", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"selector": selector}, "status": status}


def test_only_non_empty_valid_selectors_in_the_pods_namespace_match() -> None:
    budgets = [_budget("a", {"matchLabels": {"app": "web"}}), _budget("empty", {}),
               _budget("nil", None), _budget("other-ns", {"matchLabels": {"app": "web"}}, "x"),
               _budget("bad", {"matchExpressions": [{"key": "app", "operator": "Nope"}]}),
               _budget("miss", {"matchLabels": {"app": "db"}})]
    assert [b["metadata"]["name"] for b in matching_budgets(POD, budgets)] == ["a"]


def test_decrement_records_the_pod_and_the_condition() -> None:
    budget = _budget("a", {}, observedGeneration=1, disruptionsAllowed=1, currentHealthy=2,
                     desiredHealthy=1)
    after = decremented(budget, "p", NOW)
    assert after["status"]["disruptionsAllowed"] == 0
    assert after["status"]["disruptedPods"] == {"p": "2026-01-02T03:04:05Z"}
    assert after["status"]["conditions"] == [{
        "type": "DisruptionAllowed", "status": "False", "observedGeneration": 1,
        "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "InsufficientPods",
        "message": ""}]
    assert budget["status"]["disruptionsAllowed"] == 1  # the input is left alone


def test_refusals() -> None:
    behind = _budget("a", {}, disruptionsAllowed=3)
    with pytest.raises(TooManyRequests) as caught:
        decremented(behind, "p", NOW)
    assert caught.value.retry_after_seconds == 10
    exhausted = _budget("a", {}, observedGeneration=1, disruptionsAllowed=0, currentHealthy=3,
                        desiredHealthy=3)
    with pytest.raises(TooManyRequests) as caught:
        decremented(exhausted, "p", NOW)
    assert caught.value.details == {"causes": [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget a needs 3 healthy pods and has 3 currently"}]}
    negative = _budget("a", {}, observedGeneration=1, disruptionsAllowed=-1)
    with pytest.raises(Forbidden, match="pdb disruptions allowed is negative"):
        decremented(negative, "p", NOW)


def test_unready_pods_under_each_policy() -> None:
    unready = {**POD, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    met = _budget("a", {}, currentHealthy=2, desiredHealthy=2)
    unmet = _budget("a", {}, currentHealthy=1, desiredHealthy=2)
    assert not plan_for(unready, met).decrement
    assert plan_for(unready, unmet).decrement
    unmet["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
    assert plan_for(unready, unmet).pin_pod_version
    assert plan_for(POD, unmet).decrement  # a ready pod always counts


def _pc(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "value": value, **fields}


def test_priority_resolution_and_the_global_default() -> None:
    classes = {"low": _pc("low", 5, preemptionPolicy="Never"),
               "a": _pc("a", 20, globalDefault=True), "b": _pc("b", 10, globalDefault=True)}
    assert priority_for_pod("low", classes) == PodPriority("low", 5, "Never")
    assert priority_for_pod("", classes) == PodPriority("b", 10, None)  # the lowest default
    assert priority_for_pod("", {}) == PodPriority("", 0, "PreemptLowerPriority")
    assert priority_for_pod("gone", classes) == "no PriorityClass with name gone was found"
    refused = global_default_conflict(_pc("c", 1, globalDefault=True), classes.values(),
                                      creating=True)
    assert refused is not None and "PriorityClass b is already marked as default" in str(refused)
    assert global_default_conflict(_pc("b", 10, globalDefault=True), classes.values(),
                                   creating=False) is None
    assert known_system_class_error("system-node-critical", 2000001000, False) == ""
    assert known_system_class_error("system-node-critical", 1, False) == (
        "value of system-node-critical PriorityClass must be 2000001000")


def test_default_ingress_class_is_the_newest_marked() -> None:
    def ic(name: str, created: str, default: str = "true") -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created,
                             "annotations": {"ingressclass.kubernetes.io/is-default-class":
                                             default}}}
    classes = [ic("old", "2026-01-01T00:00:00Z"), ic("b", "2026-01-02T00:00:00Z"),
               ic("a", "2026-01-02T00:00:00Z"), ic("off", "2026-01-03T00:00:00Z", "false")]
    assert default_class(classes) == "a"
    ingress: dict[str, Any] = {"metadata": {}, "spec": {}}
    admit_ingress(ingress, classes)
    assert ingress["spec"] == {"ingressClassName": "a"}
    legacy: dict[str, Any] = {"metadata": {"annotations": {"kubernetes.io/ingress.class": "x"}},
                              "spec": {}}
    admit_ingress(legacy, classes)
    assert legacy["spec"] == {}
