"""EndpointSlice validation (kube ``ValidateEndpointSlice``, pkg/apis/discovery/validation):
the address type, each endpoint's addresses, and port names and protocols.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1123_label, is_dns1123_subdomain
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import text_at
from kubewire.server.writes.validation.pods.spec import PROTOCOLS
from kubewire.status import FieldError, invalid, not_supported, required

ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")  # sorted set


def _address_errors(address: str, address_type: str, path: str) -> list[FieldError]:
    if address_type == "FQDN":
        return [invalid(path, address, m) for m in is_dns1123_subdomain(address)]
    if address_type not in ("IPv4", "IPv6"):
        return []  # unknown types fall through in kube too
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        parsed = None
    if parsed is None or f"IPv{parsed.version}" != address_type:
        return [invalid(path, address, f"must be a valid {address_type} address")]
    return []


def validate_endpoint_slice(resource: Resource, obj: Mapping[str, JSON],
                            old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    errors: list[FieldError] = []
    address_type = text_at(obj, "addressType")
    if not address_type:
        errors.append(required("addressType"))
    elif address_type not in ADDRESS_TYPES:
        errors.append(not_supported("addressType", address_type, ADDRESS_TYPES))
    endpoints = obj.get("endpoints")
    for i, endpoint in enumerate(endpoints if isinstance(endpoints, list) else []):
        if not isinstance(endpoint, dict):
            continue
        path = f"endpoints[{i}].addresses"
        addresses = endpoint.get("addresses")
        addresses = addresses if isinstance(addresses, list) else []
        if not addresses:
            errors.append(required(path, "must contain at least 1 address"))
        for j, address in enumerate(addresses):
            if isinstance(address, str):
                errors += _address_errors(address, address_type, f"{path}[{j}]")
    ports = obj.get("ports")
    return errors + _port_errors(ports if isinstance(ports, list) else [])


def _port_errors(ports: list[JSON]) -> list[FieldError]:
    errors: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        name = text_at(port, "name")
        if name:
            errors += [invalid(f"ports[{i}].name", name, m) for m in is_dns1123_label(name)]
        if name in names:
            errors.append(FieldError("FieldValueDuplicate", f"ports[{i}].name", name))
        else:
            names.add(name)
        protocol = port.get("protocol")
        if not isinstance(protocol, str):
            errors.append(required(f"ports[{i}].protocol"))
        elif protocol not in PROTOCOLS:
            errors.append(not_supported(f"ports[{i}].protocol", protocol, PROTOCOLS))
    return errors
