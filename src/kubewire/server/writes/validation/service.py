"""Service validation: kube's most-hit ``ValidateService`` rules, in kube's order.

Source: kubernetes pkg/apis/core/validation/validation.go (``ValidateService``,
``validateServicePort``, ``ValidatePortNumOrName``). Objects arrive defaulted (type,
sessionAffinity, port protocols, targetPorts). Cluster IPs, node ports and their interplay with
the type are ``server.allocation``'s (kube's registry REST), not repeated here.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import dict_at, text_at, validate_labels
from kubewire.server.writes.validation.pods.spec import (
    PROTOCOLS,
    dns_label_errors,
    enum_errors,
    port_name_problems,
    port_number_errors,
)
from kubewire.status import FieldError, invalid, not_supported, required

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")  # sorted set
SESSION_AFFINITIES = ("ClientIP", "None")
KUBELET_PORT = 10250  # pkg/cluster/ports KubeletPort


def _is_headless(spec: Mapping[str, JSON]) -> bool:
    return spec.get("clusterIP") == "None"


def target_port_errors(path: str, value: JSON) -> list[FieldError]:
    """``ValidatePortNumOrName`` for an IntOrString."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return port_number_errors(path, value)
    if isinstance(value, str):
        return [invalid(path, value, m) for m in port_name_problems(value)]
    return []


def _port_errors(port: Mapping[str, JSON], require_name: bool, names: set[str],
                 path: str) -> list[FieldError]:
    """``validateServicePort``."""
    errors: list[FieldError] = []
    name = text_at(port, "name")
    if require_name and not name:
        errors.append(required(f"{path}.name"))
    elif name:
        errors += dns_label_errors(f"{path}.name", name)
        if name in names:
            errors.append(FieldError("FieldValueDuplicate", f"{path}.name", name))
        else:
            names.add(name)
    number = port.get("port")
    errors += port_number_errors(f"{path}.port", number if isinstance(number, int) else 0)
    errors += enum_errors(f"{path}.protocol", text_at(port, "protocol"), PROTOCOLS)
    errors += target_port_errors(f"{path}.targetPort", port.get("targetPort"))
    return errors


def validate_service(resource: Resource, obj: Mapping[str, JSON],
                     old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """Errors for creating or updating a Service (the same spec rules for both)."""
    spec = dict_at(obj, "spec")
    # kube defaults a missing spec too (kubewire's defaulting needs one to exist)
    service_type = spec.get("type") or "ClusterIP"
    ports = [p for p in spec["ports"] if isinstance(p, dict)] \
        if isinstance(spec.get("ports"), list) else []
    errors: list[FieldError] = []
    if not ports and not _is_headless(spec) and service_type != "ExternalName":
        errors.append(required("spec.ports"))
    if service_type == "LoadBalancer":
        for i, port in enumerate(ports):
            if port.get("port") == KUBELET_PORT:
                errors.append(invalid(f"spec.ports[{i}]", KUBELET_PORT,
                                      f"may not expose port {KUBELET_PORT} externally since "
                                      "it is used by kubelet"))
    if service_type == "ExternalName":
        external = spec.get("externalName")
        cname = external.removesuffix(".") if isinstance(external, str) else ""
        if cname:
            errors += [invalid("spec.externalName", cname, m) for m in is_dns1123_subdomain(cname)]
        else:
            errors.append(required("spec.externalName"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        errors += _port_errors(port, len(ports) > 1, names, f"spec.ports[{i}]")
    selector = spec.get("selector")
    if isinstance(selector, dict):
        errors += validate_labels(selector, "spec.selector")
    affinity = spec.get("sessionAffinity") or "None"
    errors += enum_errors("spec.sessionAffinity", str(affinity), SESSION_AFFINITIES)
    if service_type not in SERVICE_TYPES:
        errors.append(not_supported("spec.type", service_type, SERVICE_TYPES))
    return errors
