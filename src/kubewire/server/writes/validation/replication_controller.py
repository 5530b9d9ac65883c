"""core/v1 ReplicationController validation, kube's rules in kube's order.

Source: kubernetes pkg/apis/core/validation/validation.go (``ValidateReplicationController``,
``ValidateReplicationControllerUpdate``, ``ValidateReplicationControllerSpec``,
``ValidateNonEmptySelector``, ``ValidatePodTemplateSpecForRC``,
``ValidateReplicationControllerStatusUpdate``). Unlike a ReplicaSet's, the selector is a plain
label map and it may change on update (replicationcontroller/strategy.go ``ValidateUpdate``
adds no immutability rule). The template is required whatever the replicas, and its pod
spec gets the Pod rules under ``spec.template.spec`` with the workloads' restartPolicy and
activeDeadlineSeconds rules (``pod_template_errors``). The status rules are the ReplicaSet's
(``ValidateReplicationControllerStatus`` checks the same counters with the same texts).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.writes.validation.apps import (
    NEGATIVE,
    go_string_map,
    pod_template_errors,
    validate_replica_set_status,
)
from kubewire.server.writes.validation.meta import dict_at, int_at
from kubewire.status import FieldError, invalid, required

KIND = "ReplicationController"  # the activeDeadlineSeconds message names it

__all__ = ["validate_replication_controller", "validate_replication_controller_status"]


def _nonnegative(path: str, value: int | None) -> list[FieldError]:
    """``ValidateNonnegativeField`` (an absent int32 is Go's 0)."""
    return [invalid(path, value, NEGATIVE)] if value is not None and value < 0 else []


def _label_map(value: JSON) -> dict[str, str] | None:
    """A ``map[string]string`` as decoded JSON (None when absent or not an object)."""
    if not isinstance(value, dict):
        return None
    return {str(k): str(v) for k, v in value.items()}


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """``labels.Set(selector).AsSelector().Matches(labels)``: every pair present."""
    return all(labels.get(key) == value for key, value in selector.items())


def _template_errors(template: JSON, selector: Mapping[str, str],
                     path: str) -> list[FieldError]:
    """``ValidatePodTemplateSpecForRC``."""
    if not isinstance(template, dict):
        return [required(path)]
    labels = _label_map(dict_at(template, "metadata").get("labels"))
    errors: list[FieldError] = []
    if selector and not selector_matches(selector, labels or {}):
        errors.append(invalid(f"{path}.metadata.labels", go_string_map(labels),
                              "`selector` does not match template `labels`"))
    return errors + pod_template_errors(template, path, KIND)


def validate_replication_controller(resource: Resource, obj: Mapping[str, JSON],
                                    old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateReplicationControllerSpec`` for a create (``old`` None) or an update."""
    spec = dict_at(obj, "spec")
    errors = _nonnegative("spec.minReadySeconds", int_at(spec, "minReadySeconds"))
    selector = _label_map(spec.get("selector")) or {}
    if not selector:
        errors.append(required("spec.selector"))
    errors += _nonnegative("spec.replicas", int_at(spec, "replicas"))
    errors += _template_errors(spec.get("template"), selector, "spec.template")
    return errors


def validate_replication_controller_status(resource: Resource, obj: Mapping[str, JSON],
                                           old: Mapping[str, JSON] | None = None,
                                           ) -> list[FieldError]:
    """``ValidateReplicationControllerStatusUpdate``: counters non-negative and none above
    ``status.replicas`` (available not above ready)."""
    return validate_replica_set_status(resource, obj, old)
