"""The taint-eviction controller's pure decisions (kube 1.32
``pkg/controller/tainteviction/taint_eviction.go``, ``v1.Toleration.ToleratesTaint``).

Written by hand: ``eviction_delay`` answers, for a pod's tolerations and its node's NoExecute
taints, when the pod must go: ``0`` now (a taint no toleration matches, or a
``tolerationSeconds`` ≤ 0), ``None`` never (no taints, or every matching toleration without
``tolerationSeconds``), else the shortest ``tolerationSeconds`` among the first toleration
matching each taint (``getMatchingTolerations`` + ``getMinTolerationTime``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Obj = dict[str, Any]

DISRUPTION_TARGET = {"type": "DisruptionTarget", "status": "True",
                     "reason": "DeletionByTaintManager",
                     "message": "Taint manager: deleting due to NoExecute taint"}


def no_execute_taints(node: Mapping[str, Any] | None) -> list[Obj]:
    """The node's taints with effect NoExecute."""
    if node is None:
        return []
    return [t for t in (node.get("spec") or {}).get("taints") or []
            if isinstance(t, dict) and t.get("effect") == "NoExecute"]


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """``Toleration.ToleratesTaint``."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def eviction_delay(tolerations: Sequence[Mapping[str, Any]],
                   taints: Sequence[Mapping[str, Any]]) -> float | None:
    """Seconds until the pod is deleted, or None when it never is."""
    if not taints:
        return None
    used: list[Mapping[str, Any]] = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates(t, taint)), None)
        if match is None:
            return 0.0
        used.append(match)
    shortest: float | None = None
    for toleration in used:
        limit = toleration.get("tolerationSeconds")
        if limit is None:
            continue
        if limit <= 0:
            return 0.0
        shortest = float(limit) if shortest is None else min(shortest, float(limit))
    return shortest
