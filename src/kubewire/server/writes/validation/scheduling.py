"""scheduling.k8s.io/v1 PriorityClass validation, after kube v1.32
``pkg/apis/scheduling/validation`` (``ValidatePriorityClass``, ``ValidatePriorityClassUpdate``):
``system-`` names only for kube's own classes with their values, user values up to one billion,
the preemption policy, and value and preemption policy immutable."""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.writes.priority_classes import (
    HIGHEST_USER_DEFINABLE_PRIORITY,
    SYSTEM_PREFIX,
    known_system_class_error,
)
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

_POLICIES = ("PreemptLowerPriority", "Never")


def validate_priority_class(resource: Resource, obj: Mapping[str, JSON],
                            old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidatePriorityClass``; on update also ``ValidatePriorityClassUpdate``."""
    name = str((obj.get("metadata") or {}).get("name") or "") \
        if isinstance(obj.get("metadata"), dict) else ""
    value = obj.get("value")
    number = value if isinstance(value, int) and not isinstance(value, bool) else 0
    errors: list[FieldError] = []
    if name.startswith(SYSTEM_PREFIX):
        problem = known_system_class_error(name, number, obj.get("globalDefault") is True)
        if problem:
            errors.append(forbidden("metadata.name", f"priority class names with "
                                    f"'{SYSTEM_PREFIX}' prefix are reserved for system use "
                                    f"only. error: {problem}"))
    elif number > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(forbidden("value", "maximum allowed value of a user defined priority is "
                                         f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    policy = obj.get("preemptionPolicy")
    if policy is not None:
        if policy == "":
            errors.append(required("preemptionPolicy"))
        elif policy not in _POLICIES:
            errors.append(not_supported("preemptionPolicy", policy, _POLICIES))
    if old is None:
        return errors
    old_value = old.get("value")
    if (old_value if isinstance(old_value, int) else 0) != number:
        errors.append(forbidden("value", "may not be changed in an update."))
    if old.get("preemptionPolicy") != policy:
        errors.append(invalid("preemptionPolicy", "null" if policy is None else policy,
                              "field is immutable"))
    return errors
