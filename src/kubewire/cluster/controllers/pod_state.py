"""What the workload controllers read from a pod's status (kube's ``podutil.IsPodReady``,
``IsPodAvailable``): Ready, and available once Ready for ``minReadySeconds`` (counted from the
Ready condition's ``lastTransitionTime``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any


def ready_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return dict(cond)
    return None


def ready(pod: Mapping[str, Any]) -> bool:
    """``IsPodReady``: the Ready condition is True."""
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def _stamp(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def wait_until_available(pod: Mapping[str, Any], min_ready_s: int, now: float) -> float | None:
    """Seconds until the pod counts as available: 0 when it does, None when it is not Ready
    (``IsPodAvailable``: Ready, and ``minReadySeconds`` passed since the condition turned
    True; a condition without a time counts as long ago)."""
    if not ready(pod):
        return None
    if min_ready_s <= 0:
        return 0.0
    since = _stamp((ready_condition(pod) or {}).get("lastTransitionTime"))
    if since is None:
        return 0.0
    return max(0.0, since + min_ready_s - now)


def available(pod: Mapping[str, Any], min_ready_s: int, now: float) -> bool:
    return wait_until_available(pod, min_ready_s, now) == 0.0


def min_ready_seconds(owner: Mapping[str, Any]) -> int:
    return int((owner.get("spec") or {}).get("minReadySeconds") or 0)
