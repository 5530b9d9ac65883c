"""Lease validation (kube ``ValidateLeaseSpec``, pkg/apis/coordination/validation).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import int_at
from kubewire.status import FieldError, forbidden, invalid


def validate_lease(resource: Resource, obj: Mapping[str, JSON],
                   old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    duration = int_at(spec, "leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errors.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = int_at(spec, "leaseTransitions")
    if transitions is not None and transitions < 0:
        errors.append(invalid("spec.leaseTransitions", transitions,
                              "must be greater than or equal to 0"))
    if spec.get("preferredHolder") and not spec.get("strategy"):
        errors.append(forbidden("spec.preferredHolder",
                                "may only be specified if `strategy` is defined"))
    return errors
