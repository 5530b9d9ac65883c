"""A container env var's ``valueFrom``: kube's ``validateEnvVarValueFrom`` and its selectors.

Source: kubernetes pkg/apis/core/validation/validation.go (``validateEnvVarValueFrom``,
``validateObjectFieldSelector``, ``validateContainerResourceFieldSelector``,
``validateConfigMapKeySelector``, ``validateSecretKeySelector``, the env downward-API and
resource field path sets) and pkg/apis/core/pods/helpers.go (``ConvertDownwardAPIFieldLabel``).
Objects arrive defaulted (``fieldRef.apiVersion`` is ``v1``), as kube validates them. A
``resourceFieldRef.divisor`` is not checked here.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain, is_qualified_name
from kubewire.server.writes.validation.config import config_key_problems
from kubewire.server.writes.validation.meta import dict_at, text_at
from kubewire.status import FieldError, invalid, not_supported, required

# validEnvDownwardAPIFieldPathExpressions, as sets.List sorts it
ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                   "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP",
                   "status.podIPs")
# validContainerResourceFieldPathExpressions, sorted; hugepages go by prefix
RESOURCE_FIELD_PATHS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory",
                        "requests.cpu", "requests.ephemeral-storage", "requests.memory")
_HUGEPAGES_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
# ConvertDownwardAPIFieldLabel's labels for v1 pods (spec.host is the old spec.nodeName)
_DOWNWARD_LABELS = frozenset({
    "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
    "metadata.uid", "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName",
    "spec.schedulerName", "status.phase", "status.hostIP", "status.hostIPs", "status.podIP",
    "status.podIPs"})
_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")


def split_subscripted_path(field_path: str) -> tuple[str, str] | None:
    """``fieldpath.SplitMaybeSubscriptedPath``: ``metadata.labels['k']`` -> (path, subscript)."""
    if not field_path.endswith("']"):
        return None
    parts = field_path[:-2].split("['", 1)
    if len(parts) < 2 or not parts[0]:
        return None
    return parts[0], parts[1]


def _convert_label(version: str, label: str) -> tuple[str | None, str]:
    """``ConvertDownwardAPIFieldLabel``: the internal label, or None and the error text."""
    if version != "v1":
        return None, f"unsupported pod version: {version}"
    split = split_subscripted_path(label)
    if split is not None:
        if split[0] in ("metadata.annotations", "metadata.labels"):
            return label, ""
        return None, f"field label does not support subscript: {label}"
    if label == "spec.host":
        return "spec.nodeName", ""
    if label in _DOWNWARD_LABELS:
        return label, ""
    return None, f"field label not supported: {label}"


def field_ref_errors(ref: Mapping[str, JSON], paths: tuple[str, ...],
                     path: str) -> list[FieldError]:
    """``validateObjectFieldSelector`` against the allowed ``paths``."""
    version, field_path = text_at(ref, "apiVersion"), text_at(ref, "fieldPath")
    if not version:
        return [required(f"{path}.apiVersion")]
    if not field_path:
        return [required(f"{path}.fieldPath")]
    internal, problem = _convert_label(version, field_path)
    if internal is None:
        return [invalid(f"{path}.fieldPath", field_path, f"error converting fieldPath: {problem}")]
    split = split_subscripted_path(internal)
    if split is not None:
        name, subscript = split
        if name == "metadata.annotations":
            return [invalid(path, subscript.lower(), m)
                    for m in is_qualified_name(subscript.lower())]
        if name == "metadata.labels":
            return [invalid(path, subscript, m) for m in is_qualified_name(subscript)]
        return [invalid(path, name, "does not support subscript")]
    if internal not in paths:
        return [not_supported(f"{path}.fieldPath", internal, paths)]
    return []


def _resource_field_ref_errors(ref: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateContainerResourceFieldSelector`` for an env var (no containerName needed)."""
    resource = text_at(ref, "resource")
    if not resource:
        return [required(f"{path}.resource")]
    if resource in RESOURCE_FIELD_PATHS or resource.startswith(_HUGEPAGES_PREFIXES):
        return []
    return [not_supported(f"{path}.resource", resource, RESOURCE_FIELD_PATHS)]


def _key_selector_errors(ref: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateConfigMapKeySelector``/``validateSecretKeySelector``: the name is a DNS
    subdomain (so "" is Invalid, not Required), the key is required and a config key."""
    name, key = text_at(ref, "name"), text_at(ref, "key")
    errors = [invalid(f"{path}.name", name, m) for m in is_dns1123_subdomain(name)]
    if not key:
        errors.append(required(f"{path}.key"))
    else:
        errors += [invalid(f"{path}.key", key, m) for m in config_key_problems(key)]
    return errors


def value_from_errors(var: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateEnvVarValueFrom`` for the env var whose ``valueFrom`` is at ``path``."""
    holder = var.get("valueFrom")
    if not isinstance(holder, dict):
        return []
    errors: list[FieldError] = []
    present = [key for key in _SOURCES if holder.get(key) is not None]
    for key in present:
        ref = dict_at(holder, key)
        if key == "fieldRef":
            errors += field_ref_errors(ref, ENV_FIELD_PATHS, f"{path}.fieldRef")
        elif key == "resourceFieldRef":
            errors += _resource_field_ref_errors(ref, f"{path}.resourceFieldRef")
        else:
            errors += _key_selector_errors(ref, f"{path}.{key}")
    if not present:
        errors.append(invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                              "`configMapKeyRef` or `secretKeyRef`"))
    elif text_at(var, "value"):
        errors.append(invalid(path, "", "may not be specified when `value` is not empty"))
    elif len(present) > 1:
        errors.append(invalid(path, "", "may not have more than one field specified at a time"))
    return errors
