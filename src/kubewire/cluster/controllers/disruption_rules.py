"""What the disruption controller decides (pure): a PodDisruptionBudget's status from its pods
and their controllers' scale, as kube 1.32's ``pkg/controller/disruption/disruption.go`` and
``component-helpers/apps/poddisruptionbudget`` compute it.

``desired_healthy``: ``maxUnavailable`` (int or percent, rounded up, of the controllers' scale)
gives ``expected - maxUnavailable`` (at least 0); an integer ``minAvailable`` is itself, with
the number of selected pods as ``expectedPods``; a percent ``minAvailable`` is that share of
the controllers' scale, rounded up. ``disrupted_pods``: kube's ``buildDisruptedPodMap`` (an
entry lives two minutes, ``DeletionTimeout``, unless its pod is being deleted or gone; an
expired entry whose pod lives is a ``NotDeleted`` warning). ``current_healthy``: Ready pods
not being deleted and not recently disrupted. ``budget_status``: ``updatePdbStatus`` (no
disruption while nothing is expected) with the ``DisruptionAllowed`` condition set as
``apimeta.SetStatusCondition`` does; ``fail_safe``: ``failSafe``'s status (no disruption,
``SyncFailed``). ``stale_disruption_wait``: when a live pod's ``DisruptionTarget`` condition
(not the kubelet's) goes stale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubewire.cluster.controllers.replica_rules import is_ready, meta, parse_time

Obj = dict[str, Any]
DELETION_TIMEOUT_S = 120.0  # disruption.DeletionTimeout
STALE_DISRUPTION_TIMEOUT_S = 120.0  # stalePodDisruptionTimeout
CONDITION = "DisruptionAllowed"  # policy.DisruptionAllowedCondition
SUFFICIENT = "SufficientPods"
INSUFFICIENT = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
TERMINATION_BY_KUBELET = "TerminationByKubelet"  # v1.PodReasonTerminationByKubelet


class ScaleError(ValueError):
    """A budget's expected count cannot be computed (kube's ``getExpectedScale`` error)."""


def rfc3339(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``."""
    if isinstance(value, bool):
        raise ScaleError(f"invalid value for IntOrString: invalid type: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%"):
        raise ScaleError("invalid value for IntOrString: invalid type: string is not a "
                         "percentage")
    try:
        percent = int(text[:-1])
    except ValueError:
        raise ScaleError(f'invalid value "{text}": strconv.Atoi: parsing "{text[:-1]}": '
                         'invalid syntax') from None
    return math.ceil(percent * total / 100)


def uses_scale(budget: Mapping[str, Any]) -> bool:
    """Whether the expected count comes from the controllers' scale (not a plain integer
    ``minAvailable``)."""
    spec = budget.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        return True
    return spec.get("minAvailable") is not None and not isinstance(spec["minAvailable"], int)


def expected_and_desired(budget: Mapping[str, Any], pods: int, scale: int | None,
                         ) -> tuple[int, int]:
    """``getExpectedPodCount``: (expectedCount, desiredHealthy); ``scale`` is the summed scale
    of the pods' controllers (needed when ``uses_scale``)."""
    spec = budget.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected = scale or 0
        return expected, max(expected - scaled(spec["maxUnavailable"], expected), 0)
    minimum = spec.get("minAvailable")
    if minimum is None:
        return 0, 0
    if isinstance(minimum, int) and not isinstance(minimum, bool):
        return pods, minimum
    expected = scale or 0
    return expected, scaled(minimum, expected)


def disrupted_pods(budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: float,
                   ) -> tuple[dict[str, str], float | None, list[Obj]]:
    """``buildDisruptedPodMap``: (the entries kept, when to look again, the pods that were
    expected to go but did not)."""
    recorded = ((budget.get("status") or {}).get("disruptedPods")) or {}
    kept: dict[str, str] = {}
    recheck: float | None = None
    overdue: list[Obj] = []
    if not recorded:
        return kept, None, overdue
    for pod in pods:
        if meta(pod).get("deletionTimestamp"):
            continue
        name = meta(pod).get("name", "")
        if name not in recorded:
            continue
        when = parse_time(recorded[name])
        if when is None:
            continue
        expected = when + DELETION_TIMEOUT_S
        if expected < now:
            overdue.append(dict(pod))
        else:
            recheck = expected if recheck is None else min(recheck, expected)
            kept[name] = recorded[name]
    return kept, recheck, overdue


def current_healthy(pods: Iterable[Mapping[str, Any]], disrupted: Mapping[str, str],
                    now: float) -> int:
    """``countHealthyPods``."""
    count = 0
    for pod in pods:
        if meta(pod).get("deletionTimestamp"):
            continue
        when = parse_time(disrupted.get(meta(pod).get("name", "")))
        if when is not None and when + DELETION_TIMEOUT_S > now:
            continue
        if is_ready(pod):
            count += 1
    return count


def set_condition(conditions: Sequence[Mapping[str, Any]], verdict: tuple[str, str, str],
                  observed: int, now: float) -> list[Obj]:
    """``apimeta.SetStatusCondition`` for ``DisruptionAllowed``: the transition time moves only
    when the status does."""
    status, reason, message = verdict
    result = [dict(c) for c in conditions]
    wanted: Obj = {"type": CONDITION, "status": status}
    if observed:
        wanted["observedGeneration"] = observed
    wanted |= {"lastTransitionTime": rfc3339(now), "reason": reason, "message": message}
    for i, found in enumerate(result):
        if found.get("type") == CONDITION:
            if found.get("status") == status and found.get("lastTransitionTime"):
                wanted["lastTransitionTime"] = found["lastTransitionTime"]
            result[i] = wanted
            return result
    return [*result, wanted]


def conditions_up_to_date(budget: Mapping[str, Any]) -> bool:
    """``ConditionsAreUpToDate``."""
    status = budget.get("status") or {}
    found = next((c for c in status.get("conditions") or [] if c.get("type") == CONDITION),
                 None)
    if found is None or int(status.get("observedGeneration") or 0) != \
            int(meta(budget).get("generation") or 0):
        return False
    if int(status.get("disruptionsAllowed") or 0) > 0:
        return bool(found.get("status") == "True" and found.get("reason") == SUFFICIENT)
    return bool(found.get("status") == "False" and found.get("reason") == INSUFFICIENT)


@dataclass(frozen=True, slots=True)
class Counts:
    """A budget's numbers: currentHealthy, desiredHealthy, expectedPods."""

    healthy: int
    desired: int
    expected: int


def budget_status(budget: Mapping[str, Any], counts: Counts, disrupted: Mapping[str, str],
                  now: float) -> Obj | None:
    """``updatePdbStatus``: the new status, or None when the current one already says it."""
    healthy, desired, expected = counts.healthy, counts.desired, counts.expected
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status = budget.get("status") or {}
    generation = int(meta(budget).get("generation") or 0)
    if (int(status.get("currentHealthy") or 0) == healthy
            and int(status.get("desiredHealthy") or 0) == desired
            and int(status.get("expectedPods") or 0) == expected
            and int(status.get("disruptionsAllowed") or 0) == allowed
            and dict(status.get("disruptedPods") or {}) == dict(disrupted)
            and int(status.get("observedGeneration") or 0) == generation
            and conditions_up_to_date(budget)):
        return None
    new: Obj = {"observedGeneration": generation}
    if disrupted:
        new["disruptedPods"] = dict(disrupted)
    new |= {"disruptionsAllowed": allowed, "currentHealthy": healthy,
            "desiredHealthy": desired, "expectedPods": expected}
    if allowed > 0:
        new["conditions"] = set_condition(status.get("conditions") or [],
                                          ("True", SUFFICIENT, ""), generation, now)
    else:
        new["conditions"] = set_condition(status.get("conditions") or [],
                                          ("False", INSUFFICIENT, ""), generation, now)
    return new


def fail_safe(budget: Mapping[str, Any], message: str, now: float) -> Obj:
    """``failSafe``: the status with no disruption allowed and the ``SyncFailed`` reason."""
    status = dict(budget.get("status") or {})
    status["disruptionsAllowed"] = 0
    status["conditions"] = set_condition(status.get("conditions") or [],
                                         ("False", SYNC_FAILED, message),
                                         int(status.get("observedGeneration") or 0), now)
    return status


def stale_disruption_wait(pod: Mapping[str, Any], now: float,
                          timeout: float = STALE_DISRUPTION_TIMEOUT_S) -> float | None:
    """``nonTerminatingPodHasStaleDisruptionCondition``: None when the pod has no stale
    ``DisruptionTarget`` to clear; else the seconds until it is stale (0: now)."""
    if meta(pod).get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    found = next((c for c in status.get("conditions") or []
                  if c.get("type") == "DisruptionTarget"), None)
    if found is None or found.get("status") != "True" \
            or found.get("reason") == TERMINATION_BY_KUBELET \
            or status.get("phase") in ("Succeeded", "Failed"):
        return None
    since = parse_time(found.get("lastTransitionTime")) or 0.0
    return max(timeout - (now - since), 0.0)


def cleared_disruption(pod: Mapping[str, Any], now: float) -> list[Obj] | None:
    """``UpdatePodCondition`` to ``DisruptionTarget=False``: the pod's new conditions (reason
    and message cleared, the transition time now), or None when nothing changes."""
    conditions = [dict(c) for c in (pod.get("status") or {}).get("conditions") or []]
    for i, found in enumerate(conditions):
        if found.get("type") == "DisruptionTarget":
            if found.get("status") == "False" and not found.get("reason") \
                    and not found.get("message"):
                return None
            conditions[i] = {"type": "DisruptionTarget", "status": "False",
                             "lastTransitionTime": rfc3339(now)}
            return conditions
    return None
