"""The node-lifecycle and taint-eviction controllers' pure decisions, against kube 1.32's
``node_lifecycle_controller.go`` (tryUpdateNodeHealth, the tainting passes, MarkPodsNotReady)
and ``taint_eviction.go`` (getMatchingTolerations, getMinTolerationTime, ToleratesTaint)."""

from __future__ import annotations

from typing import Any

import pytest

from kubewire.cluster.controllers import node_lifecycle_decisions as nl
from kubewire.cluster.controllers.options import seconds
from kubewire.cluster.controllers.taint_eviction_decisions import (
    eviction_delay,
    no_execute_taints,
    tolerates,
)

NOW = "2026-01-01T00:00:00Z"
Obj = dict[str, Any]


def node(conditions: list[Obj], taints: list[Obj] | None = None,
         unschedulable: bool = False) -> Obj:
    spec: Obj = {}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": "n", "creationTimestamp": "2025-12-31T00:00:00Z"},
            "spec": spec, "status": {"conditions": conditions}}


def cond(type_: str, status: str) -> Obj:
    return {"type": type_, "status": status, "reason": "r", "message": "m",
            "lastHeartbeatTime": "2025-12-31T23:59:00Z",
            "lastTransitionTime": "2025-12-31T00:00:00Z"}


def test_silent_node_conditions_become_unknown() -> None:
    got = nl.unknown_conditions(node([cond("Ready", "True"), cond("MemoryPressure", "False"),
                                      cond("NetworkUnavailable", "False")]), NOW)
    assert got is not None
    by_type = {c["type"]: c for c in got}
    assert by_type["Ready"] == {
        "type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": "2025-12-31T23:59:00Z", "lastTransitionTime": NOW}
    assert by_type["MemoryPressure"]["status"] == "Unknown"
    # conditions the kubelet never posted are added as never updated
    assert (by_type["DiskPressure"]["reason"], by_type["DiskPressure"]["message"]) == (
        "NodeStatusNeverUpdated", "Kubelet never posted node status.")
    assert by_type["PIDPressure"]["status"] == "Unknown"
    # kube does not touch conditions outside its list
    assert by_type["NetworkUnavailable"]["status"] == "False"
    # already all Unknown: nothing to write
    assert nl.unknown_conditions({"status": {"conditions": got}}, NOW) is None


@pytest.mark.parametrize(("conditions", "unschedulable", "expected"), [
    ([cond("Ready", "True")], False, set()),
    ([cond("Ready", "False")], False, {nl.NOT_READY}),
    ([cond("Ready", "Unknown")], False, {nl.UNREACHABLE}),
    ([cond("Ready", "True"), cond("MemoryPressure", "True"), cond("DiskPressure", "True"),
      cond("PIDPressure", "True"), cond("NetworkUnavailable", "True")], False,
     {nl.MEMORY_PRESSURE, nl.DISK_PRESSURE, nl.PID_PRESSURE, nl.NETWORK_UNAVAILABLE}),
    ([cond("Ready", "True"), cond("MemoryPressure", "False")], True, {nl.UNSCHEDULABLE}),
])
def test_no_schedule_taints_follow_conditions(conditions: list[Obj], unschedulable: bool,
                                              expected: set[str]) -> None:
    got = nl.no_schedule_taints(node(conditions, unschedulable=unschedulable))
    assert {t["key"] for t in got} == expected
    assert all(t["effect"] == "NoSchedule" and "timeAdded" not in t for t in got)


def test_no_schedule_pass_keeps_foreign_taints_and_drops_stale_ones() -> None:
    mine = {"key": "example.com/x", "value": "y", "effect": "NoSchedule"}
    stale = {"key": nl.NOT_READY, "effect": "NoSchedule"}
    execute = {"key": nl.NOT_READY, "effect": "NoExecute", "timeAdded": NOW}
    got = nl.no_schedule_taints(node([cond("Ready", "True")], [mine, stale, execute]))
    assert got == [mine, execute]


def test_no_execute_taints_swap_and_clear() -> None:
    unknown = nl.no_execute_taints(node([cond("Ready", "Unknown")]), NOW)
    assert unknown == [{"key": nl.UNREACHABLE, "effect": "NoExecute", "timeAdded": NOW}]
    swapped = nl.no_execute_taints(node([cond("Ready", "False")], unknown), "later")
    assert swapped == [{"key": nl.NOT_READY, "effect": "NoExecute", "timeAdded": "later"}]
    kept = nl.no_execute_taints(node([cond("Ready", "False")], swapped), "much later")
    assert kept == swapped  # timeAdded stays
    assert nl.no_execute_taints(node([cond("Ready", "True")], swapped), NOW) == []
    assert nl.taints_differ(swapped, [])
    assert not nl.taints_differ(swapped, [{"key": nl.NOT_READY, "effect": "NoExecute"}])


def test_mark_pod_not_ready() -> None:
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "True"},
                                     {"type": "Ready", "status": "True"}]}}
    got = nl.mark_pod_not_ready(pod, NOW)
    assert got == [{"type": "PodScheduled", "status": "True"},
                   {"type": "Ready", "status": "False", "lastTransitionTime": NOW}]
    assert nl.mark_pod_not_ready({"status": {"conditions": got}}, NOW) is None
    assert nl.mark_pod_not_ready({"status": {}}, NOW) is None


UNREACHABLE_EXEC = {"key": nl.UNREACHABLE, "effect": "NoExecute"}


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    ({"operator": "Exists"}, UNREACHABLE_EXEC, True),  # empty key + Exists: everything
    ({"key": nl.UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"}, UNREACHABLE_EXEC,
     False),
    ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),
    ({"key": "k", "value": "w", "operator": "Equal"},
     {"key": "k", "value": "v", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, UNREACHABLE_EXEC, False),
])
def test_tolerates(toleration: Obj, taint: Obj, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_eviction_delay() -> None:
    default = [{"key": nl.NOT_READY, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300},
               {"key": nl.UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}]
    assert eviction_delay(default, [UNREACHABLE_EXEC]) == 300
    assert eviction_delay(default, []) is None
    assert eviction_delay([], [UNREACHABLE_EXEC]) == 0  # not tolerated: now
    assert eviction_delay(default, [UNREACHABLE_EXEC, {"key": "x", "effect": "NoExecute"}]) == 0
    forever = [{"operator": "Exists"}]
    assert eviction_delay(forever, [UNREACHABLE_EXEC]) is None
    # the first matching toleration of each taint counts; the shortest wins
    both = [{"key": "a", "operator": "Exists", "tolerationSeconds": 20},
            {"key": "b", "operator": "Exists", "tolerationSeconds": 5}]
    assert eviction_delay(both, [{"key": "a", "effect": "NoExecute"},
                                 {"key": "b", "effect": "NoExecute"}]) == 5
    assert eviction_delay([{"operator": "Exists", "tolerationSeconds": -1}],
                          [UNREACHABLE_EXEC]) == 0
    assert no_execute_taints({"spec": {"taints": [UNREACHABLE_EXEC, {
        "key": "s", "effect": "NoSchedule"}]}}) == [UNREACHABLE_EXEC]
    assert no_execute_taints(None) == []


def test_seconds_option() -> None:
    assert seconds(None, "x", 50.0) == 50.0
    assert seconds({"x": 2}, "x", 50.0) == 2.0

    class Options:
        extra = {"x": 1.5}

    assert seconds(Options(), "x", 50.0) == 1.5
    with pytest.raises(ValueError, match="positive"):
        seconds({"x": 0}, "x", 50.0)
