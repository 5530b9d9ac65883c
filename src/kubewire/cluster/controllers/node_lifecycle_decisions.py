"""The node-lifecycle controller's pure decisions (kube 1.32 ``pkg/controller/nodelifecycle``).

Written by hand from ``node_lifecycle_controller.go``:

- ``unknown_conditions`` is ``tryUpdateNodeHealth``'s rewrite of a node whose kubelet stopped
  reporting for longer than the grace period: Ready, MemoryPressure, DiskPressure and PIDPressure
  become ``Unknown`` (``NodeStatusUnknown``, "Kubelet stopped posting node status."; a condition
  the kubelet never posted is added as ``NodeStatusNeverUpdated``, "Kubelet never posted node
  status."), keeping their heartbeat time, with ``lastTransitionTime`` now.
- ``no_schedule_taints`` is ``doNoScheduleTaintingPass``: the NoSchedule taints
  ``nodeConditionToTaintKeyStatusMap`` derives from conditions, plus ``unschedulable`` from
  ``spec.unschedulable``; taints with other keys or effects are kept as they are.
- ``no_execute_taints`` is ``doNoExecuteTaintingPass``: ``not-ready`` for Ready False,
  ``unreachable`` for Ready Unknown, never both, with ``timeAdded``.
- ``mark_pod_not_ready`` is ``MarkPodsNotReady``'s change to one pod's Ready condition.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

Obj = dict[str, Any]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
PID_PRESSURE = "node.kubernetes.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

# nodeConditionToTaintKeyStatusMap: condition type -> {status -> taint key}
CONDITION_TAINTS: dict[str, dict[str, str]] = {
    "Ready": {"False": NOT_READY, "Unknown": UNREACHABLE},
    "MemoryPressure": {"True": MEMORY_PRESSURE},
    "DiskPressure": {"True": DISK_PRESSURE},
    "NetworkUnavailable": {"True": NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": PID_PRESSURE},
}
_CONDITION_TAINT_KEYS = frozenset(k for m in CONDITION_TAINTS.values() for k in m.values())

# tryUpdateNodeHealth's nodeConditionTypes (Ready first)
MONITORED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
STOPPED_REASON = "NodeStatusUnknown"
STOPPED_MESSAGE = "Kubelet stopped posting node status."
NEVER_REASON = "NodeStatusNeverUpdated"
NEVER_MESSAGE = "Kubelet never posted node status."


def condition(obj: Mapping[str, Any], type_: str) -> Obj | None:
    """The status condition of ``type_``, or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def ready_status(node: Mapping[str, Any]) -> str | None:
    """The Ready condition's status (True/False/Unknown), None when the kubelet never posted."""
    cond = condition(node, "Ready")
    return None if cond is None else str(cond.get("status", "Unknown"))


def unknown_conditions(node: Mapping[str, Any], now: str) -> list[Obj] | None:
    """The node's conditions as kube rewrites them for a silent kubelet; None when nothing
    changes (every monitored condition already Unknown)."""
    conditions = [copy.deepcopy(c) for c in (node.get("status") or {}).get("conditions") or []
                  if isinstance(c, dict)]
    changed = False
    for type_ in MONITORED_CONDITIONS:
        found = next((c for c in conditions if c.get("type") == type_), None)
        if found is None:
            created = (node.get("metadata") or {}).get("creationTimestamp") or now
            conditions.append({"type": type_, "status": "Unknown", "reason": NEVER_REASON,
                               "message": NEVER_MESSAGE, "lastHeartbeatTime": created,
                               "lastTransitionTime": now})
            changed = True
        elif found.get("status") != "Unknown":
            found.update(status="Unknown", reason=STOPPED_REASON, message=STOPPED_MESSAGE,
                         lastTransitionTime=now)
            changed = True
    return conditions if changed else None


def _taint_tuple(taint: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(taint.get("key", "")), str(taint.get("value", "")), str(taint.get("effect", "")))


def no_schedule_taints(node: Mapping[str, Any]) -> list[Obj]:
    """``spec.taints`` after the NoSchedule pass (same list, same order, when nothing changes)."""
    wanted: list[str] = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        key = CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
        if key is not None and key not in wanted:
            wanted.append(key)
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.append(UNSCHEDULABLE)
    managed = _CONDITION_TAINT_KEYS | {UNSCHEDULABLE}
    taints: list[Obj] = [t for t in (node.get("spec") or {}).get("taints") or []
                         if not (t.get("effect") == "NoSchedule" and t.get("key") in managed
                                 and t.get("key") not in wanted)]
    present = {t.get("key") for t in taints if t.get("effect") == "NoSchedule"}
    taints.extend({"key": key, "effect": "NoSchedule"} for key in wanted if key not in present)
    return taints


def no_execute_taints(node: Mapping[str, Any], now: str) -> list[Obj]:
    """``spec.taints`` after the NoExecute pass: not-ready or unreachable by the Ready status."""
    status = ready_status(node)
    want = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(status or "")
    taints: list[Obj] = [t for t in (node.get("spec") or {}).get("taints") or []
                         if not (t.get("effect") == "NoExecute"
                                 and t.get("key") in (NOT_READY, UNREACHABLE)
                                 and t.get("key") != want)]
    if want is not None and not any(t.get("effect") == "NoExecute" and t.get("key") == want
                                    for t in taints):
        taints.append({"key": want, "effect": "NoExecute", "timeAdded": now})
    return taints


def taints_differ(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> bool:
    """Whether two taint lists differ as sets of (key, value, effect)."""
    return sorted(map(_taint_tuple, old)) != sorted(map(_taint_tuple, new))


def mark_pod_not_ready(pod: Mapping[str, Any], now: str) -> list[Obj] | None:
    """The pod's conditions with Ready False (``MarkPodsNotReady``), or None when Ready is
    missing or already False."""
    conditions = [copy.deepcopy(c) for c in (pod.get("status") or {}).get("conditions") or []]
    for cond in conditions:
        if cond.get("type") == "Ready":
            if cond.get("status") == "False":
                return None
            cond["status"] = "False"
            cond["lastTransitionTime"] = now
            return conditions
    return None
