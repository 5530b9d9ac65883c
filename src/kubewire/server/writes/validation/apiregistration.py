"""apiregistration.k8s.io/v1 APIService validation, after kube-aggregator v0.32
``pkg/apis/apiregistration/validation`` (``ValidateAPIService``, ``ValidateAPIServiceUpdate``,
``ValidateAPIServiceStatus``): the name is ``<version>.<group>`` (checked after the path-segment
rule the registry's name rule applies), only ``v1`` may have the empty group, the group is a
DNS subdomain and the version a DNS-1035 label, both priorities are bounded, a local
APIService (no ``spec.service``) carries no TLS settings, and a service reference names its
namespace, name and a valid port."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1035_label, is_dns1123_subdomain, is_path_segment_name
from kubewire.resources import Resource
from kubewire.status import FieldError, invalid, not_supported, required

_CONDITION_STATUSES = ("True", "False", "Unknown")


def _int(value: JSON) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: JSON) -> str:
    return value if isinstance(value, str) else ""


def _bundle_bytes(value: JSON) -> int:
    """``len(CABundle)``: the bytes the base64 text holds."""
    text = _str(value)
    try:
        return len(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return len(text)


def _name_errors(meta: Mapping[str, JSON], required_name: str) -> list[FieldError]:
    """The name function ``ValidateObjectMeta`` is given: after ``IsValidPathSegmentName``
    (reported by the registry's name rule), the name must be ``version.group``."""
    detail = f'must be `spec.version+"."+spec.group`: "{required_name}"'
    errors = []
    for field in ("generateName", "name"):
        value = _str(meta.get(field))
        if value and not is_path_segment_name(value, field == "generateName") \
                and value != required_name:
            errors.append(invalid(f"metadata.{field}", value, detail))
    return errors


def validate_api_service(resource: Resource, obj: Mapping[str, JSON],
                         old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateAPIService`` (an update's ``ValidateObjectMetaUpdate`` is the framework's)."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    group, version = _str(spec.get("group")), _str(spec.get("version"))
    meta = obj.get("metadata")
    errors = _name_errors(meta if isinstance(meta, dict) else {}, f"{version}.{group}")
    if not group and version != "v1":
        errors.append(required("spec.group",
                               "only v1 may have an empty group and it better be legacy kube"))
    if group:
        errors += [invalid("spec.group", group, e) for e in is_dns1123_subdomain(group)]
    errors += [invalid("spec.version", version, e) for e in is_dns1035_label(version)]
    group_priority = _int(spec.get("groupPriorityMinimum"))
    if group_priority <= 0 or group_priority > 20000:
        errors.append(invalid("spec.groupPriorityMinimum", group_priority,
                              "must be positive and less than 20000"))
    version_priority = _int(spec.get("versionPriority"))
    if version_priority <= 0 or version_priority > 1000:
        errors.append(invalid("spec.versionPriority", version_priority,
                              "must be positive and less than 1000"))
    return errors + _service_errors(spec)


def _service_errors(spec: Mapping[str, JSON]) -> list[FieldError]:
    """The TLS settings and the service reference."""
    errors: list[FieldError] = []
    bundle = _bundle_bytes(spec.get("caBundle"))
    skip_verify = spec.get("insecureSkipTLSVerify") is True
    service = spec.get("service")
    if not isinstance(service, dict):
        if bundle:
            errors.append(invalid("spec.caBundle", f"{bundle} bytes",
                                  "local APIServices may not have a caBundle"))
        if skip_verify:
            errors.append(invalid("spec.insecureSkipTLSVerify", True,
                                  "local APIServices may not have insecureSkipTLSVerify"))
        return errors
    if not _str(service.get("namespace")):
        errors.append(required("spec.service.namespace"))
    if not _str(service.get("name")):
        errors.append(required("spec.service.name"))
    port = _int(service.get("port"))
    if not 1 <= port <= 65535:
        errors.append(invalid("spec.service.port", port,
                              "port is not valid: must be between 1 and 65535, inclusive"))
    if skip_verify and bundle:
        errors.append(invalid("spec.insecureSkipTLSVerify", True,
                              "may not be true if caBundle is present"))
    return errors


def validate_api_service_status(resource: Resource, obj: Mapping[str, JSON],
                                old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``ValidateAPIServiceStatus``: each condition's status is True, False or Unknown."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    errors = []
    for i, cond in enumerate(conditions if isinstance(conditions, list) else ()):
        value = cond.get("status") if isinstance(cond, dict) else None
        if value not in _CONDITION_STATUSES:
            errors.append(not_supported(f"status.conditions[{i}].status",
                                        _str(value), _CONDITION_STATUSES))
    return errors
