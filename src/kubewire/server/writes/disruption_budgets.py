"""What an eviction makes of the PodDisruptionBudgets selecting its pod (pure).

kube's ``pkg/registry/core/pod/storage/eviction.go`` v1.32: ``getPodDisruptionBudgets`` (the
budgets of the pod's namespace whose selector is valid, not empty and matches the pod's labels),
the unready-pod rules of ``unhealthyPodEvictionPolicy``, and ``checkAndDecrement`` (a budget
whose status is behind its generation, or with no disruption left, refuses with 429 and a
``DisruptionBudget`` cause; a negative allowance or an oversized ``disruptedPods`` map is 403;
otherwise the allowance drops by one and the pod is recorded in ``disruptedPods``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import label_selector_from_match
from kubewire.status import Forbidden, StatusError, TooManyRequests
from kubewire.times import format_time

__all__ = ["MAX_DISRUPTED_PODS", "MULTIPLE_BUDGETS", "BudgetPlan", "decremented",
           "matching_budgets", "plan_for", "too_many_requests"]

MAX_DISRUPTED_PODS = 2000  # eviction.go MaxDisruptedPodSize
MULTIPLE_BUDGETS = ("This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.")
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"  # policyv1.DisruptionBudgetCause


def matching_budgets(pod: dict[str, Any], budgets: Iterable[dict[str, Any]],
                     ) -> list[dict[str, Any]]:
    """``getPodDisruptionBudgets``: a nil, empty or invalid selector matches nothing."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    found = []
    for budget in budgets:
        if (budget.get("metadata") or {}).get("namespace") != meta.get("namespace"):
            continue
        selector = (budget.get("spec") or {}).get("selector")
        if not isinstance(selector, dict):
            continue
        try:
            parsed = label_selector_from_match(selector)
        except SelectorError:
            continue
        if not parsed.is_empty and parsed.matches(labels):
            found.append(budget)
    return found


def pod_is_ready(pod: dict[str, Any]) -> bool:
    """``podutil.IsPodReady``: a Ready condition with status True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in conditions)


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """What to do with one budget: ``decrement`` it first, or evict the unready pod only if it
    is unchanged (``pin_pod_version``: kube sets the pod's resourceVersion as precondition)."""

    decrement: bool
    pin_pod_version: bool


def _status(budget: dict[str, Any]) -> dict[str, Any]:
    status = budget.get("status")
    return status if isinstance(status, dict) else {}


def plan_for(pod: dict[str, Any], budget: dict[str, Any]) -> BudgetPlan:
    """The unready-pod rules: an unready pod goes without touching the budget when the policy
    is AlwaysAllow, or when the budget is satisfied (currentHealthy >= desiredHealthy > 0)."""
    if not pod_is_ready(pod):
        policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        if policy == "AlwaysAllow":
            return BudgetPlan(decrement=False, pin_pod_version=True)
        status = _status(budget)
        desired = int(status.get("desiredHealthy") or 0)
        if int(status.get("currentHealthy") or 0) >= desired > 0:
            return BudgetPlan(decrement=False, pin_pod_version=True)
    return BudgetPlan(decrement=True, pin_pod_version=False)


def too_many_requests(cause: str, retry_after_s: int) -> TooManyRequests:
    """``errors.NewTooManyRequests`` with the DisruptionBudget cause."""
    details: dict[str, Any] = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after_s:  # StatusDetails order: causes, then retryAfterSeconds (omitempty)
        details["retryAfterSeconds"] = retry_after_s
    return TooManyRequests(VIOLATION, details)


def _forbidden(name: str, why: str) -> StatusError:
    # errors.NewForbidden(policy.Resource("poddisruptionbudget"), ...): kube's singular
    return Forbidden(f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
                     {"name": name, "group": "policy", "kind": "poddisruptionbudget"})


def decremented(budget: dict[str, Any], pod_name: str, now: datetime) -> dict[str, Any]:
    """``checkAndDecrement``: the budget with one disruption fewer and the pod recorded, or a
    raised StatusError. The result is a new object (``budget`` is not changed)."""
    meta = budget.get("metadata") or {}
    name = str(meta.get("name") or "")
    status = dict(_status(budget))
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise too_many_requests(f"The disruption budget {name} is still being processed by "
                                "the server.", 10)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    disrupted = status.get("disruptedPods")
    disrupted = dict(disrupted) if isinstance(disrupted, dict) else {}
    if len(disrupted) > MAX_DISRUPTED_PODS:
        raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed "
                               "by PDB controller")
    if allowed == 0:
        raise too_many_requests(
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} "
            f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently", 0)
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        status["conditions"] = _disruption_allowed_false(status, now)
    disrupted[pod_name] = format_time(now)
    status["disruptedPods"] = disrupted
    return {**budget, "status": status}


def _disruption_allowed_false(status: dict[str, Any], now: datetime) -> list[Any]:
    """``UpdateDisruptionAllowedCondition`` with no disruption left (``SetStatusCondition``:
    the transition time moves only when the status changes)."""
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    wanted: dict[str, Any] = {"type": "DisruptionAllowed", "status": "False"}
    if status.get("observedGeneration"):  # omitempty
        wanted["observedGeneration"] = int(status["observedGeneration"])
    wanted |= {"lastTransitionTime": format_time(now), "reason": "InsufficientPods",
               "message": ""}
    for i, condition in enumerate(conditions):
        if condition.get("type") == "DisruptionAllowed":
            if condition.get("status") == "False":
                wanted["lastTransitionTime"] = condition.get("lastTransitionTime")
            conditions[i] = wanted
            return conditions
    return [*conditions, wanted]
