"""Pod cells: READY, STATUS, RESTARTS, the wide columns and the row's ``Completed`` condition.

One walk over the container statuses (``printPod`` in
``kubernetes/kubernetes:pkg/printers/internalversion/printers.go``) yields a ``PodSummary``;
each column formatter reads the part it prints. Pure; nothing raises on odd input.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubewire.json_types import JSON
from kubewire.server.tables.cells import (
    NONE,
    Cell,
    as_dict,
    as_int,
    as_str,
    dicts,
    human_duration,
)
from kubewire.times import parse_time_or_none

_TERMINAL_PHASES = ("Succeeded", "Failed")
NODE_LOST_REASON = "NodeLost"  # pkg/util/node NodeUnreachablePodReason
ROW_COMPLETED = {
    "Succeeded": {"type": "Completed", "status": "True", "reason": "Succeeded",
                  "message": "The pod has completed successfully."},
    "Failed": {"type": "Completed", "status": "True", "reason": "Failed",
               "message": "The pod failed."},
}


@dataclass(slots=True)
class PodSummary:
    """What ``printPod`` accumulates while walking container statuses."""

    reason: str
    ready: int = 0
    total: int = 0
    restarts: int = 0
    last_restart: datetime | None = None
    initializing: bool = False


def _later(current: datetime | None, status: dict[str, JSON]) -> datetime | None:
    """The later of ``current`` and this container's last termination."""
    terminated = as_dict(as_dict(status.get("lastState")).get("terminated"))
    finished = parse_time_or_none(terminated.get("finishedAt")) if terminated else None
    if finished is None or (current is not None and finished <= current):
        return current
    return finished


def _is_restartable(container: JSON) -> bool:
    """A sidecar: an init container with ``restartPolicy: Always``."""
    return as_dict(container).get("restartPolicy") == "Always"


def _condition_true(pod: dict[str, JSON], kind: str) -> bool:
    for cond in dicts(as_dict(pod.get("status")).get("conditions")):
        if cond.get("type") == kind:
            return cond.get("status") == "True"
    return False


def _terminated_text(terminated: dict[str, JSON], prefix: str) -> str:
    if as_str(terminated.get("reason")):
        return prefix + as_str(terminated.get("reason"))
    signal = as_int(terminated.get("signal"))
    if signal:
        return f"{prefix}Signal:{signal}"
    return f"{prefix}ExitCode:{as_int(terminated.get('exitCode'))}"


def _init_reason(index: int, status: dict[str, JSON], sidecar: bool,
                 summary: PodSummary, init_count: int) -> str | None:
    """The STATUS an init container imposes, or None when the walk goes on past it."""
    state = as_dict(status.get("state"))
    terminated, waiting = state.get("terminated"), state.get("waiting")
    if isinstance(terminated, dict) and as_int(terminated.get("exitCode")) == 0:
        return None
    if sidecar and status.get("started") is True:
        summary.ready += status.get("ready") is True
        return None
    if isinstance(terminated, dict):
        return _terminated_text(terminated, "Init:")
    reason = as_str(as_dict(waiting).get("reason"))
    if reason and reason != "PodInitializing":
        return "Init:" + reason
    return f"Init:{index}/{init_count}"


def _walk_init(pod: dict[str, JSON], summary: PodSummary) -> tuple[int, datetime | None]:
    """Init containers; returns the sidecars' restarts and last restart."""
    spec, status = as_dict(pod.get("spec")), as_dict(pod.get("status"))
    init_specs = dicts(spec.get("initContainers"))
    inits = {as_str(c.get("name")): c for c in init_specs}
    sidecar_restarts, sidecar_last = 0, None
    for index, cstatus in enumerate(dicts(status.get("initContainerStatuses"))):
        sidecar = _is_restartable(inits.get(as_str(cstatus.get("name"))))
        count = as_int(cstatus.get("restartCount"))
        summary.restarts += count
        summary.last_restart = _later(summary.last_restart, cstatus)
        if sidecar:
            sidecar_restarts += count
            sidecar_last = _later(sidecar_last, cstatus)
        reason = _init_reason(index, cstatus, sidecar, summary, len(init_specs))
        if reason is not None:
            summary.reason, summary.initializing = reason, True
            break
    return sidecar_restarts, sidecar_last


def _walk_containers(pod: dict[str, JSON], summary: PodSummary) -> None:
    has_running = False
    for cstatus in reversed(dicts(as_dict(pod.get("status")).get("containerStatuses"))):
        count = as_int(cstatus.get("restartCount"))
        summary.restarts += count
        summary.last_restart = _later(summary.last_restart, cstatus)
        state = as_dict(cstatus.get("state"))
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if isinstance(waiting, dict) and as_str(waiting.get("reason")):
            summary.reason = as_str(waiting.get("reason"))
        elif isinstance(terminated, dict):
            summary.reason = _terminated_text(terminated, "")
        elif cstatus.get("ready") is True and isinstance(state.get("running"), dict):
            has_running = True
            summary.ready += 1
    if summary.reason == "Completed" and has_running:
        summary.reason = "Running" if _condition_true(pod, "Ready") else "NotReady"


def summarize_pod(obj: JSON) -> PodSummary:
    """``printPod``'s READY counts, STATUS reason and RESTARTS, computed in kube's order."""
    pod = as_dict(obj)
    spec, status, meta = (as_dict(pod.get(k)) for k in ("spec", "status", "metadata"))
    phase = as_str(status.get("phase"))
    summary = PodSummary(reason=as_str(status.get("reason")) or phase)
    for cond in dicts(status.get("conditions")):
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            summary.reason = "SchedulingGated"
    summary.total = len(dicts(spec.get("containers"))) + sum(
        1 for c in dicts(spec.get("initContainers")) if _is_restartable(c))
    sidecar_restarts, sidecar_last = _walk_init(pod, summary)
    if not summary.initializing or _condition_true(pod, "Initialized"):
        summary.restarts, summary.last_restart = sidecar_restarts, sidecar_last
        _walk_containers(pod, summary)
    if meta.get("deletionTimestamp"):
        if status.get("reason") == NODE_LOST_REASON:
            summary.reason = "Unknown"
        elif phase not in _TERMINAL_PHASES:
            summary.reason = "Terminating"
    return summary


def pod_ready(obj: JSON, now: datetime) -> Cell:
    summary = summarize_pod(obj)
    return f"{summary.ready}/{summary.total}"


def pod_status(obj: JSON, now: datetime) -> Cell:
    return summarize_pod(obj).reason


def pod_restarts(obj: JSON, now: datetime) -> Cell:
    """``3`` or ``3 (5m2s ago)`` when the last termination time is known."""
    summary = summarize_pod(obj)
    if summary.restarts and summary.last_restart is not None:
        return f"{summary.restarts} ({human_duration(now - summary.last_restart)} ago)"
    return str(summary.restarts)


def pod_ip(obj: JSON, now: datetime) -> Cell:
    """The first of ``status.podIPs``; ``<none>`` before one is assigned."""
    ips = dicts(as_dict(as_dict(obj).get("status")).get("podIPs"))
    return (as_str(ips[0].get("ip")) if ips else "") or NONE


def pod_readiness_gates(obj: JSON, now: datetime) -> Cell:
    """``true/total`` over ``spec.readinessGates``; ``<none>`` without gates."""
    pod = as_dict(obj)
    gates = dicts(as_dict(pod.get("spec")).get("readinessGates"))
    if not gates:
        return NONE
    passed = sum(1 for g in gates if _condition_true(pod, as_str(g.get("conditionType"))))
    return f"{passed}/{len(gates)}"


def pod_row_conditions(obj: JSON) -> list[dict[str, str]]:
    """``Completed=True`` for terminated pods, which ``kubectl get`` hides by default."""
    phase = as_str(as_dict(as_dict(obj).get("status")).get("phase"))
    return [dict(ROW_COMPLETED[phase])] if phase in ROW_COMPLETED else []
