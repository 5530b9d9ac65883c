"""Ingress and NetworkPolicy validation, in kube's order (pkg/apis/networking/validation:
``ValidateIngressSpec``, ``validateIngressBackend``, ``validateHTTPIngressPath``,
``ValidateNetworkPolicySpec``, ``ValidateNetworkPolicyPort``, ``ValidateNetworkPolicyPeer``).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from kubewire.go_text import GoLiteral
from kubewire.json_types import JSON
from kubewire.names import is_dns1035_label, is_dns1123_subdomain
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import dict_at, text_at
from kubewire.server.writes.validation.pods.spec import port_name_problems, port_number_errors
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")  # sorted set
INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
INVALID_PATH_SUFFIXES = ("/..", "/.")
POLICY_PROTOCOLS = ("TCP", "UDP", "SCTP")  # kube's literal order here
POLICY_TYPES = ("Ingress", "Egress")


def _dict(parent: Mapping[str, JSON], key: str) -> dict[str, JSON] | None:
    value = parent.get(key)
    return value if isinstance(value, dict) else None


def _list(parent: Mapping[str, JSON], key: str) -> list[JSON]:
    value = parent.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _backend_errors(backend: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateIngressBackend``."""
    resource, service = _dict(backend, "resource"), _dict(backend, "service")
    if resource is not None and service is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        return []  # a typed local object reference: kind and name are schema-required
    if service is None:
        return [invalid(path, "", "resource or service backend is required")]
    errors: list[FieldError] = []
    name = text_at(service, "name")
    if not name:
        errors.append(required(f"{path}.service.name"))
    else:
        errors += [invalid(f"{path}.service.name", name, m) for m in is_dns1035_label(name)]
    port = dict_at(service, "port")
    port_name = text_at(port, "name")
    number = port.get("number") if isinstance(port.get("number"), int) else 0
    if port_name and number:
        errors.append(invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        errors += [invalid(f"{path}.service.port.name", port_name, m)
                   for m in port_name_problems(port_name)]
    elif number:
        errors += port_number_errors(f"{path}.service.port.number", number)
    else:
        errors.append(required(path, "port name or number is required"))
    return errors


def _http_path_errors(item: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateHTTPIngressPath`` (a missing pathType is the schema's Required error)."""
    errors: list[FieldError] = []
    path_type, text = item.get("pathType"), item.get("path")
    text = text if isinstance(text, str) else ""
    if not isinstance(path_type, str):
        return errors
    if path_type in ("Exact", "Prefix"):
        if not text.startswith("/"):
            errors.append(invalid(f"{path}.path", text, "must be an absolute path"))
        if text:
            errors += [invalid(f"{path}.path", text, f"must not contain '{seq}'")
                       for seq in INVALID_PATH_SEQUENCES if seq in text]
            errors += [invalid(f"{path}.path", text, f"cannot end with '{suffix}'")
                       for suffix in INVALID_PATH_SUFFIXES if text.endswith(suffix)]
    elif path_type == "ImplementationSpecific":
        if text and not text.startswith("/"):
            errors.append(invalid(f"{path}.path", text, "must be an absolute path"))
    else:
        errors.append(not_supported(f"{path}.pathType", path_type, PATH_TYPES))
    errors += _backend_errors(dict_at(item, "backend"), f"{path}.backend")
    return errors


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _host_errors(host: str, path: str) -> list[FieldError]:
    errors = [invalid(path, host, "must be a DNS name, not an IP address")] if _is_ip(host) \
        else []
    if "*" in host:
        rest = host[2:] if host.startswith("*.") else host
        if not host.startswith("*.") or "*" in rest or is_dns1123_subdomain(rest):
            errors.append(invalid(path, host, _WILDCARD_ERROR))
    else:
        errors += [invalid(path, host, m) for m in is_dns1123_subdomain(host)]
    return errors


_WILDCARD_ERROR = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, "
    "which must consist of lower case alphanumeric characters, '-' or '.' and end with an "
    "alphanumeric character (e.g. '*.example.com', regex used for validation is "
    "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def validate_ingress(resource: Resource, obj: Mapping[str, JSON],
                     old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = dict_at(obj, "spec")
    rules = _list(spec, "rules")
    backend = _dict(spec, "defaultBackend")
    errors: list[FieldError] = []
    if not rules and backend is None:
        errors.append(invalid("spec", GoLiteral("[]networking.IngressRule(nil)"),
                              "either `defaultBackend` or `rules` must be specified"))
    if backend is not None:
        errors += _backend_errors(backend, "spec.defaultBackend")
    for i, rule in enumerate(rules):
        item = f"spec.rules[{i}]"
        host = rule.get("host")
        if isinstance(host, str) and host:
            errors += _host_errors(host, f"{item}.host")
        http = _dict(rule, "http")
        if http is not None:
            paths = _list(http, "paths")
            if not paths:
                errors.append(required(f"{item}.http.paths"))
            for j, entry in enumerate(paths):
                errors += _http_path_errors(entry, f"{item}.http.paths[{j}]")
    return errors


# --- NetworkPolicy ----------------------------------------------------------------------------

def _policy_port_errors(port: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateNetworkPolicyPort``."""
    errors: list[FieldError] = []
    protocol = port.get("protocol")
    if isinstance(protocol, str) and protocol not in POLICY_PROTOCOLS:
        errors.append(not_supported(f"{path}.protocol", protocol, POLICY_PROTOCOLS))
    number, end = port.get("port"), port.get("endPort")
    end = end if isinstance(end, int) and not isinstance(end, bool) else None
    if isinstance(number, int) and not isinstance(number, bool):
        errors += port_number_errors(f"{path}.port", number)
        if end is not None:
            if end < number:
                errors.append(invalid(f"{path}.endPort", number,
                                      "must be greater than or equal to `port`"))
            errors += port_number_errors(f"{path}.endPort", end)
    elif isinstance(number, str):
        if end is not None:
            errors.append(invalid(f"{path}.endPort", end,
                                  "may not be specified when `port` is non-numeric"))
        errors += [invalid(f"{path}.port", number, m) for m in port_name_problems(number)]
    elif end is not None:
        errors.append(invalid(f"{path}.endPort", end,
                              "may not be specified when `port` is not specified"))
    return errors


def _peer_errors(peer: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateNetworkPolicyPeer``: exactly one kind of peer (ipBlock alone)."""
    kinds = [key for key in ("podSelector", "namespaceSelector", "ipBlock")
             if peer.get(key) is not None]
    block = peer.get("ipBlock")
    if isinstance(block, dict) and not block.get("cidr"):  # ValidateIPBlock
        return [required(f"{path}.ipBlock.cidr"), *(
            [forbidden(path, "may not specify both ipBlock and another peer")]
            if len(kinds) > 1 else [])]
    if not kinds:
        return [required(path, "must specify a peer")]
    if len(kinds) > 1 and "ipBlock" in kinds:
        return [forbidden(path, "may not specify both ipBlock and another peer")]
    return []


def validate_network_policy(resource: Resource, obj: Mapping[str, JSON],
                            old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    spec = dict_at(obj, "spec")
    errors: list[FieldError] = []
    for direction, peers in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(_list(spec, direction)):
            item = f"spec.{direction}[{i}]"
            for j, port in enumerate(_list(rule, "ports")):
                errors += _policy_port_errors(port, f"{item}.ports[{j}]")
            for j, peer in enumerate(_list(rule, peers)):
                errors += _peer_errors(peer, f"{item}.{peers}[{j}]")
    types = spec.get("policyTypes")
    if isinstance(types, list):
        if len(types) > len(POLICY_TYPES):
            shown = GoLiteral("&[]networking.PolicyType{" + ", ".join(
                f'"{t}"' for t in types) + "}")
            return [*errors, invalid("spec.policyTypes", shown,
                                     "may not specify more than two policyTypes")]
        for i, kind in enumerate(types):
            if kind not in POLICY_TYPES:
                errors.append(not_supported(f"spec.policyTypes[{i}]", kind, POLICY_TYPES))
    return errors
