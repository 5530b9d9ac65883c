"""The status conditions the namespace controller writes on a Terminating namespace.

Kube's ``pkg/controller/namespace/deletion/status_condition_utils.go``: after each pass over
the namespace's content the controller holds five condition types, in this order, each True
with what went wrong or False with its "ok" reason and message; a condition's
``lastTransitionTime`` changes only when its status does, and the namespace's status is written
only when something changed. Pure: counts in, conditions out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GROUP_VERSION_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"

CONDITION_TYPES = (DISCOVERY_FAILURE, GROUP_VERSION_PARSING_FAILURE, CONTENT_FAILURE,
                   CONTENT_REMAINING, FINALIZERS_REMAINING)
OK_REASONS = {
    DISCOVERY_FAILURE: "ResourcesDiscovered",
    GROUP_VERSION_PARSING_FAILURE: "ParsedGroupVersions",
    CONTENT_FAILURE: "ContentDeleted",
    CONTENT_REMAINING: "ContentRemoved",
    FINALIZERS_REMAINING: "ContentHasNoFinalizers",
}
OK_MESSAGES = {
    DISCOVERY_FAILURE: "All resources successfully discovered",
    GROUP_VERSION_PARSING_FAILURE: "All legacy kube types successfully parsed",
    CONTENT_FAILURE: "All content successfully deleted, may be waiting on finalization",
    CONTENT_REMAINING: "All content successfully removed",
    FINALIZERS_REMAINING: "All content-preserving finalizers finished",
}


@dataclass(slots=True)
class ContentTotals:
    """What one pass left in the namespace: instances per (resource, group), instances per
    finalizer, and the delete errors (kube's ``allGVRDeletionMetadata`` and ``errs``).

    kubewire serves every kind itself, so discovery and group-version parsing never fail: those
    two conditions are always their "ok" variant, as on a healthy cluster.
    """

    remaining: dict[tuple[str, str], int] = field(default_factory=dict)
    finalizers: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not any(self.remaining.values())


def failing_conditions(totals: ContentTotals, now: str) -> list[dict[str, Any]]:
    """The True conditions of one pass (``ProcessContentTotals``,
    ``makeDeleteContentCondition``)."""
    found: list[dict[str, Any]] = []
    if totals.errors:
        messages = sorted(totals.errors)
        found.append(_condition(CONTENT_FAILURE, "True", now, "ContentDeletionFailed",
                                f"Failed to delete all resource types, {len(messages)} "
                                f"remaining: {', '.join(messages)}"))
    if totals.remaining:
        items = sorted(f"{plural}.{group} has {count} resource instances"
                       for (plural, group), count in totals.remaining.items() if count)
        found.append(_condition(CONTENT_REMAINING, "True", now, "SomeResourcesRemain",
                                f"Some resources are remaining: {', '.join(items)}"))
    if totals.finalizers:
        items = sorted(f"{finalizer} in {count} resource instances"
                       for finalizer, count in totals.finalizers.items() if count)
        found.append(_condition(FINALIZERS_REMAINING, "True", now, "SomeFinalizersRemain",
                                "Some content in the namespace has finalizers remaining: "
                                f"{', '.join(items)}"))
    return found


def updated_conditions(old: Sequence[Mapping[str, Any]], totals: ContentTotals,
                       now: str) -> list[dict[str, Any]] | None:
    """The namespace's ``status.conditions`` after a pass, or None when nothing changed
    (``updateConditions``: other condition types are kept where they are)."""
    failing = {c["type"]: c for c in failing_conditions(totals, now)}
    conditions = [dict(c) for c in old]
    changed = False
    for kind in CONDITION_TYPES:
        new = failing.get(kind) or _condition(kind, "False", now, OK_REASONS[kind],
                                              OK_MESSAGES[kind])
        current = next((c for c in conditions if c.get("type") == kind), None)
        if current is None:
            conditions.append(new)
            changed = True
        elif any(current.get(k) != new[k] for k in ("status", "message", "reason")):
            if current.get("status") != new["status"]:
                current["lastTransitionTime"] = now
            current["status"], current["reason"] = new["status"], new["reason"]
            current["message"] = new["message"]
            changed = True
    return conditions if changed else None


def _condition(kind: str, status: str, now: str, reason: str, message: str) -> dict[str, Any]:
    # core/v1 NamespaceCondition in its Go field order
    return {"type": kind, "status": status, "lastTransitionTime": now, "reason": reason,
            "message": message}
