"""The pod-spec rules kept apart from pod.py, and where ``ValidatePodSpec`` runs them.

Source: kubernetes pkg/apis/core/validation/validation.go (``ValidatePodSpec``'s order,
``ValidateHostAliases``, ``validateOS``) and apimachinery pkg/util/validation ``IsValidIP``
(``netutils.ParseIPSloppy``: IPv4 parts may have leading zeros). ``pod.validate_pod_spec``
calls ``after_dns_policy`` where kube checks the security context, affinity and topology
spread (after ``dnsPolicy``), and ``after_hostname`` for the host aliases and ``os`` (kube's
tolerations, priority class, runtime class and overhead between them are not checked). The
``os`` rules that depend on the named OS (Linux or Windows only fields) are not checked either.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1123_subdomain
from kubewire.server.writes.validation.meta import text_at
from kubewire.server.writes.validation.pods.scheduling import (
    affinity_errors,
    topology_spread_errors,
)
from kubewire.server.writes.validation.pods.security import pod_security_context_errors
from kubewire.status import FieldError, invalid, not_supported, required

IP_ERROR = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
OS_NAMES = ("linux", "windows")  # sets.List(validOS)
_IPV4_SLOPPY = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")


def is_ip_sloppy(text: str) -> bool:
    """``netutils.ParseIPSloppy`` succeeds: Go's old ``net.ParseIP``, leading zeros allowed."""
    if _IPV4_SLOPPY.fullmatch(text):
        return all(int(part) <= 255 for part in text.split("."))
    if ":" not in text or "%" in text:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def host_aliases_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``ValidateHostAliases``: each ip an IP, each hostname a DNS subdomain."""
    aliases = spec.get("hostAliases")
    errors: list[FieldError] = []
    for i, alias in enumerate(aliases if isinstance(aliases, list) else []):
        if not isinstance(alias, dict):
            continue
        ip = text_at(alias, "ip")
        if not is_ip_sloppy(ip):
            errors.append(invalid(f"{path}[{i}].ip", ip, IP_ERROR))
        hostnames = alias.get("hostnames")
        for j, name in enumerate(hostnames if isinstance(hostnames, list) else []):
            text = name if isinstance(name, str) else ""
            errors += [invalid(f"{path}[{i}].hostnames[{j}]", text, m)
                       for m in is_dns1123_subdomain(text)]
    return errors


def os_errors(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """``validateOS``: a set ``os`` names linux or windows (kube reports the value on ``os``)."""
    os = spec.get("os")
    if not isinstance(os, dict):
        return []
    name = text_at(os, "name")
    if not name:
        return [required(f"{path}.name", "cannot be empty")]
    return [] if name in OS_NAMES else [not_supported(path, name, OS_NAMES)]


def after_dns_policy(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """The security context, affinity and topology spread rules, in ``ValidatePodSpec``'s
    order, for the spec at ``path``."""
    return (pod_security_context_errors(spec, f"{path}.securityContext")
            + affinity_errors(spec, f"{path}.affinity")
            + topology_spread_errors(spec, f"{path}.topologySpreadConstraints"))


def after_hostname(spec: Mapping[str, JSON], path: str) -> list[FieldError]:
    """The host aliases and ``os`` rules, in ``ValidatePodSpec``'s order."""
    return (host_aliases_errors(spec, f"{path}.hostAliases")
            + os_errors(spec, f"{path}.os"))
