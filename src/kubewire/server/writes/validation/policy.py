"""policy/v1 PodDisruptionBudget validation, after kube v1.32 ``pkg/apis/policy/validation``
(``ValidatePodDisruptionBudget``, ``ValidatePodDisruptionBudgetStatusUpdate``) and
apimachinery's ``ValidateConditions`` for its status conditions.

The spec stays mutable (kube dropped the immutability in 1.15); a selector's invalid label
values are tolerated on update when the stored budget has them, as the strategy's options do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubewire.go_text import GoLiteral
from kubewire.json_types import JSON
from kubewire.names import regex_error
from kubewire.resources import Resource
from kubewire.server.writes.validation.apps import PERCENT_ERROR, go_int_or_string
from kubewire.server.writes.validation.meta import dict_at
from kubewire.server.writes.validation.pods.scheduling import (
    label_name_errors,
    label_selector_errors,
)
from kubewire.status import FieldError, invalid, not_supported, required

NEGATIVE = "must be greater than or equal to 0"
_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")  # sets.List: sorted
_CONDITION_STATUSES = ("False", "True", "Unknown")
_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
REASON_ERROR = regex_error(
    "a condition reason must start with alphabetic character, optionally followed by a string "
    "of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
    "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", "my_name", "MY_NAME", "MyName", "ReasonA,ReasonB",
    "ReasonA:ReasonB")
MAX_REASON = 1024
MAX_MESSAGE = 32 * 1024


def _int_or_percent_errors(value: JSON, path: str) -> list[FieldError]:
    """apps validation ``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if isinstance(value, str):
        match = re.fullmatch(r"([0-9]+)%", value)
        if match is None:
            return [invalid(path, go_int_or_string(value), PERCENT_ERROR)]
        if int(match.group(1)) > 100:
            return [invalid(path, go_int_or_string(value), "must not be greater than 100%")]
        return []
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [invalid(path, value, NEGATIVE)]
    return []


def validate_pod_disruption_budget(resource: Resource, obj: Mapping[str, JSON],
                                   old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidatePodDisruptionBudgetSpec`` (create and update alike)."""
    spec = dict_at(obj, "spec")
    errors: list[FieldError] = []
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    if low is not None and high is not None:
        errors.append(invalid("spec", GoLiteral("policy.PodDisruptionBudgetSpec{...}"),
                              "minAvailable and maxUnavailable cannot be both set"))
    if low is not None:
        errors += _int_or_percent_errors(low, "spec.minAvailable")
    if high is not None:
        errors += _int_or_percent_errors(high, "spec.maxUnavailable")
    errors += label_selector_errors(spec.get("selector"), "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if isinstance(policy, str) and policy not in _EVICTION_POLICIES:
        errors.append(not_supported("spec.unhealthyPodEvictionPolicy", policy,
                                    _EVICTION_POLICIES))
    return errors


def condition_errors(conditions: JSON, path: str) -> list[FieldError]:
    """apimachinery ``ValidateConditions``."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    items = conditions if isinstance(conditions, list) else []
    for i, condition in enumerate(c for c in items if isinstance(c, dict)):
        item = f"{path}[{i}]"
        kind = str(condition.get("type") or "")
        errors += label_name_errors(kind, f"{item}.type")
        if kind in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{item}.type", kind))
        seen.add(kind)
        status = condition.get("status") or ""
        if status not in _CONDITION_STATUSES:
            errors.append(not_supported(f"{item}.status", status, _CONDITION_STATUSES))
        generation = condition.get("observedGeneration")
        if isinstance(generation, int) and generation < 0:
            errors.append(invalid(f"{item}.observedGeneration", generation,
                                  "must be greater than or equal to zero"))
        if not condition.get("lastTransitionTime"):
            errors.append(required(f"{item}.lastTransitionTime", "must be set"))
        errors += _reason_errors(str(condition.get("reason") or ""), f"{item}.reason")
        if len(str(condition.get("message") or "")) > MAX_MESSAGE:
            errors.append(FieldError("FieldValueTooLong", f"{item}.message",
                                     detail=f"may not be more than {MAX_MESSAGE} bytes"))
    return errors


def _reason_errors(reason: str, path: str) -> list[FieldError]:
    if not reason:
        return [required(path, "must be set")]
    errors = [] if _REASON.fullmatch(reason) else [invalid(path, reason, REASON_ERROR)]
    if len(reason) > MAX_REASON:
        errors.append(FieldError("FieldValueTooLong", path,
                                 detail=f"may not be more than {MAX_REASON} bytes"))
    return errors


def validate_pod_disruption_budget_status(resource: Resource, obj: Mapping[str, JSON],
                                          old: Mapping[str, JSON] | None = None,
                                          ) -> list[FieldError]:
    """``ValidatePodDisruptionBudgetStatusUpdate`` (policy/v1: the counters too)."""
    status = dict_at(obj, "status")
    errors = condition_errors(status.get("conditions"), "status.conditions")
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        value = status.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            errors.append(invalid(f"status.{key}", value, NEGATIVE))
    return errors
