"""The ``scale`` subresource: autoscaling/v1 ``Scale`` to and from a Deployment, ReplicaSet,
StatefulSet, ReplicationController or custom resource.

Pure functions on JSON dicts (objects-and-clients.md §2.4), after kube's
``pkg/registry/apps/deployment/storage/storage.go`` (``scaleFromDeployment`` and
``scaleUpdatedObjectInfo.UpdatedObject``; ``replicaset`` and ``statefulset`` have the same
``ScaleREST`` with their own names; ``pkg/registry/core/replicationcontroller/storage``
``scaleFromRC`` renders the RC's label map with ``labels.SelectorFromSet(...).String()``) and
``pkg/apis/autoscaling/validation`` (``ValidateScale``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubewire.json_types import JSON
from kubewire.selectors import SelectorError, format_label_selector
from kubewire.status import (
    BadRequest,
    FieldError,
    conflict,
    invalid,
    invalid_object,
    required,
)

SCALE_API_VERSION = "autoscaling/v1"
SCALE_KIND = "Scale"
_SCALE_GROUP = "autoscaling"
_PARENT_GROUP = "apps"
_PARENT_RESOURCE = "deployments"
_INT32_MAX = 2**31 - 1
# etcd.go invalidSpecReplicas: the Scale an update of a custom resource without spec replicas
# starts from carries this, so an update that leaves it is told the field cannot be empty.
_UNSET_REPLICAS = -2147483648


@dataclass(frozen=True, slots=True)
class ScaleShape:
    """Where a parent kind keeps what a Scale shows: a Deployment's replicas and its
    ``spec.selector`` (a LabelSelector; a ReplicationController's is a label map), or a
    custom resource's ``specReplicasPath``, ``statusReplicasPath`` and ``labelSelectorPath``
    (a selector string) from its CRD."""

    spec_replicas: tuple[str, ...] = ("spec", "replicas")
    status_replicas: tuple[str, ...] = ("status", "replicas")
    selector_string: tuple[str, ...] | None = None  # None: the Deployment's spec.selector
    group: str = _PARENT_GROUP
    resource: str = _PARENT_RESOURCE
    selector_is_map: bool = False  # spec.selector is a label map (a ReplicationController)


    @property
    def custom(self) -> bool:
        """A custom resource's Scale: its CRD's paths, not validated as a built-in Scale."""
        return self.selector_string is not None


DEPLOYMENT_SCALE = ScaleShape()
# built-in parents by ``Resource.id``
_BUILTIN_SHAPES = {
    **{f"apps/{plural}": ScaleShape(resource=plural)
       for plural in ("deployments", "replicasets", "statefulsets")},
    "core/replicationcontrollers": ScaleShape(group="", resource="replicationcontrollers",
                                              selector_is_map=True),
}


def builtin_scale_shape(group: str, plural: str) -> ScaleShape:
    """The shape of a built-in kind with a scale subresource (``spec.replicas``,
    ``status.replicas``, ``spec.selector``: a LabelSelector, a ReplicationController's a
    label map)."""
    return (_BUILTIN_SHAPES.get(f"{group or 'core'}/{plural}")
            or ScaleShape(group=group, resource=plural))


def custom_scale_shape(group: str, plural: str, scale: Mapping[str, Any]) -> ScaleShape:
    """A CRD version's ``subresources.scale`` (paths like ``.spec.replicas``)."""
    def path(text: object) -> tuple[str, ...]:
        return tuple(str(text or "").lstrip(".").split(".")) if text else ()

    return ScaleShape(path(scale.get("specReplicasPath")), path(scale.get("statusReplicasPath")),
                      path(scale.get("labelSelectorPath")), group, plural)


def _at(obj: JSON, path: tuple[str, ...]) -> JSON:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def scale_from_deployment(deployment: dict[str, JSON],
                          shape: ScaleShape = DEPLOYMENT_SCALE) -> dict[str, JSON]:
    """The ``Scale`` a GET of ``<parent>/<name>/scale`` answers (kube's
    ``scaleFromDeployment``, ``scaleFromCustomResource``).

    ``spec.replicas`` is omitted when 0 (``omitempty``), ``status.replicas`` always present,
    ``status.selector`` is the selector as a string (omitted when empty).
    Raises BadRequest (kube's text) when a Deployment's stored selector cannot be converted.
    """
    meta = _mapping(deployment.get("metadata"))
    scale_meta: dict[str, JSON] = {}
    for key in ("name", "namespace", "uid", "resourceVersion"):
        if meta.get(key):
            scale_meta[key] = meta[key]
    scale_meta["creationTimestamp"] = meta.get("creationTimestamp")
    spec: dict[str, JSON] = {}
    replicas = _at(deployment, shape.spec_replicas) if shape.spec_replicas else None
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas:
        spec["replicas"] = replicas
    found = _at(deployment, shape.status_replicas) if shape.status_replicas else None
    status_replicas = found if isinstance(found, int) and not isinstance(found, bool) else 0
    status: dict[str, JSON] = {"replicas": status_replicas}
    if shape.selector_string is None:
        found_selector = _mapping(deployment.get("spec")).get("selector")
        if shape.selector_is_map:  # labels.SelectorFromSet: the map's pairs as matchLabels
            found_selector = {"matchLabels": found_selector}
        selector = _selector_string(found_selector)
    else:
        text = _at(deployment, shape.selector_string) if shape.selector_string else None
        selector = text if isinstance(text, str) else ""
    if selector:
        status["selector"] = selector
    return {"kind": SCALE_KIND, "apiVersion": SCALE_API_VERSION, "metadata": scale_meta,
            "spec": spec, "status": status}


def scale_for_update(parent: dict[str, JSON], shape: ScaleShape = DEPLOYMENT_SCALE,
                     ) -> dict[str, JSON]:
    """The Scale an update applies to: ``scale_from_deployment``, with kube's marker for a
    custom resource that has no spec replicas (``scaleUpdatedObjectInfo.UpdatedObject``)."""
    scale = scale_from_deployment(parent, shape)
    if shape.custom and _at(parent, shape.spec_replicas) is None:
        spec = scale["spec"]
        assert isinstance(spec, dict)
        spec["replicas"] = _UNSET_REPLICAS
    return scale


def apply_scale(deployment: dict[str, JSON], scale: dict[str, JSON],
                shape: ScaleShape = DEPLOYMENT_SCALE) -> dict[str, JSON]:
    """A copy of the parent with its spec replicas (and the resourceVersion) from ``scale``.

    ``scale`` is the updated Scale (a PUT body, or a patch applied to ``scale_from_deployment``).
    Rules: ``spec.replicas`` must be an int32 (BadRequest otherwise) and, for a Deployment,
    ≥ 0 (422 ``Scale.autoscaling "<n>" is invalid``: a custom resource's Scale is not validated,
    its new replicas go through the CR's own validation, crds.md §5.2); a missing value means
    0 (for a custom resource that had none, 400 ``cannot be empty``); a non-empty
    ``metadata.uid`` must equal the parent's (409 precondition failure); a non-empty
    ``metadata.resourceVersion`` must equal the parent's (409 optimistic-lock Conflict). The
    returned object carries the Scale's resourceVersion (absent when the Scale had none), so the
    ordinary update path keeps enforcing optimistic concurrency.
    """
    meta = _mapping(deployment.get("metadata"))
    name = str(meta.get("name") or "")
    scale_meta = _mapping(scale.get("metadata"))
    replicas = _replicas_of(scale)
    custom = shape.custom
    if custom and replicas == _UNSET_REPLICAS:
        path = "." + ".".join(shape.spec_replicas)
        raise BadRequest(f'the spec replicas field "{path}" cannot be empty')
    errors = [] if custom else _validate_scale(scale_meta, replicas)
    if errors:
        raise invalid_object(_SCALE_GROUP, SCALE_KIND, name, errors)
    uid = scale_meta.get("uid")
    if uid and uid != meta.get("uid"):
        raise conflict(shape.group, f"{shape.resource}/scale", name,
                       f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                       f"{meta.get('uid') or ''}")
    resource_version = scale_meta.get("resourceVersion")
    if resource_version and resource_version != meta.get("resourceVersion"):
        raise conflict(shape.group, shape.resource, name)
    updated = copy.deepcopy(deployment)
    target: dict[str, JSON] = updated
    for part in shape.spec_replicas[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[shape.spec_replicas[-1]] = replicas
    updated_meta = updated.setdefault("metadata", {})
    if resource_version:
        updated_meta["resourceVersion"] = resource_version
    else:
        updated_meta.pop("resourceVersion", None)
    return updated


def _validate_scale(scale_meta: dict[str, JSON], replicas: int) -> list[FieldError]:
    """autoscaling validation ``ValidateScale`` (a Deployment's Scale)."""
    errors = []
    if not scale_meta.get("name"):
        errors.append(required("metadata.name", "name or generateName is required"))
    if not scale_meta.get("namespace"):
        errors.append(required("metadata.namespace"))
    if replicas < 0:
        errors.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    return errors


def _replicas_of(scale: dict[str, JSON]) -> int:
    """``spec.replicas`` as Go's JSON decoder into ``int32`` accepts it (absent: 0)."""
    value = _mapping(scale.get("spec")).get("replicas", 0)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        if -_INT32_MAX - 1 <= value <= _INT32_MAX:
            return value
        go_type = f"number {value}"
    elif isinstance(value, float):
        go_type = f"number {value!r}"
    else:
        go_type = {bool: "bool", str: "string", list: "array", dict: "object"}.get(
            type(value), "value")
    raise BadRequest(f"json: cannot unmarshal {go_type} into Go struct field "
                     "ScaleSpec.spec.replicas of type int32")


def _selector_string(selector: JSON) -> str:
    if not isinstance(selector, dict):
        return ""
    try:
        return format_label_selector(selector)
    except SelectorError as exc:
        raise BadRequest(exc.message) from None


def _mapping(value: JSON) -> dict[str, JSON]:
    return value if isinstance(value, dict) else {}
