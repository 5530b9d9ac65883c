"""PriorityClasses as kube-apiserver treats them beyond their own validation (pure).

- kube's two system classes (``scheduling/v1`` ``SystemPriorityClasses()``), which every
  kube-apiserver creates at start (``scheduling/bootstrap-system-priority-classes``) and whose
  DELETE its storage refuses (403 ``this is a system priority class and cannot be deleted``);
- the Priority admission plugin's check of a PriorityClass write (at most one
  ``globalDefault``: 403 ``PriorityClass <x> is already marked as default. Only one default
  can exist``) and its resolution of a new pod's ``priorityClassName`` (``priority_for_pod``:
  the class's value and preemption policy; without a name the global default's, else 0 and
  ``PreemptLowerPriority``) — ``plugin/pkg/admission/priority/admission.go``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.status import Forbidden, forbidden_resource

__all__ = ["HIGHEST_USER_DEFINABLE_PRIORITY", "SYSTEM_CLASSES", "SYSTEM_PREFIX",
           "PodPriority", "default_class", "global_default_conflict",
           "known_system_class_error", "priority_for_pod", "system_class_delete_forbidden",
           "system_classes"]

SYSTEM_PREFIX = "system-"
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
GROUP = "scheduling.k8s.io"
# name -> (value, description), in SystemPriorityClasses() order
SYSTEM_CLASSES: Mapping[str, tuple[int, str]] = {
    "system-node-critical": (SYSTEM_CRITICAL_PRIORITY + 1000, "Used for system critical pods "
                             "that must not be moved from their current node."),
    "system-cluster-critical": (SYSTEM_CRITICAL_PRIORITY, "Used for system critical pods that "
                                "must run in the cluster, but can be moved to another node if "
                                "necessary."),
}


def system_classes() -> list[dict[str, Any]]:
    """The bodies kube-apiserver creates at start (defaults fill in the preemption policy)."""
    return [{"apiVersion": f"{GROUP}/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "description": description}
            for name, (value, description) in SYSTEM_CLASSES.items()]


def known_system_class_error(name: str, value: int, global_default: bool) -> str:
    """``IsKnownSystemPriorityClass``'s error text ("" for a known class as kube makes it)."""
    known = SYSTEM_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if known[0] != value:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return ""


def system_class_delete_forbidden(name: str) -> Forbidden | None:
    """priorityclass/storage REST.Delete's refusal for a system class; None otherwise."""
    if name not in SYSTEM_CLASSES:
        return None
    return forbidden_resource(GROUP, "priorityclasses", name,
                              "this is a system priority class and cannot be deleted")


def default_class(classes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """``getDefaultPriorityClass``: of the global defaults, the one with the lowest value."""
    found: Mapping[str, Any] | None = None
    for candidate in classes:
        if candidate.get("globalDefault") is True and (
                found is None or int(found.get("value") or 0) > int(candidate.get("value") or 0)):
            found = candidate
    return found


def global_default_conflict(obj: Mapping[str, Any], classes: Iterable[Mapping[str, Any]],
                            *, creating: bool) -> Forbidden | None:
    """``validatePriorityClass``: a second global default is refused."""
    if obj.get("globalDefault") is not True:
        return None
    current = default_class(classes)
    if current is None:
        return None
    current_name = str((current.get("metadata") or {}).get("name") or "")
    name = str((obj.get("metadata") or {}).get("name") or "")
    if creating or current_name != name:
        return forbidden_resource(GROUP, "priorityclasses", name,
                                  f"PriorityClass {current_name} is already marked as default. "
                                  "Only one default can exist")
    return None


@dataclass(frozen=True, slots=True)
class PodPriority:
    """What the Priority plugin writes into a new pod: the class name, priority and policy."""

    class_name: str
    priority: int
    preemption_policy: str | None


def priority_for_pod(class_name: str, classes: Mapping[str, Mapping[str, Any]],
                     ) -> PodPriority | str:
    """The pod's priority, or the text of the plugin's 403 for an unknown class name."""
    if not class_name:
        found = default_class(classes.values())
        if found is None:
            return PodPriority("", 0, PREEMPT_LOWER_PRIORITY)
        return PodPriority(str(found["metadata"]["name"]), int(found.get("value") or 0),
                           found.get("preemptionPolicy"))
    chosen = classes.get(class_name)
    if chosen is None:
        return f"no PriorityClass with name {class_name} was found"
    return PodPriority(class_name, int(chosen.get("value") or 0), chosen.get("preemptionPolicy"))
