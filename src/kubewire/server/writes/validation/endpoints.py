"""core/v1 Endpoints validation (kube ``ValidateEndpointsCreate``/``ValidateEndpointsUpdate``,
pkg/apis/core/validation/validation.go): every subset has addresses or not-ready addresses;
each address a valid IP that is not special (``ValidateNonSpecialIP`` but its loopback rule),
its hostname a DNS label and its nodeName a DNS subdomain; each port named (when a subset has
more than one) with a DNS label, numbered 1-65535, a supported protocol and a qualified-name
appProtocol. kube's ``ValidateEndpointsSpecificAnnotations`` checks nothing. The subsets are
repacked after validation (``writes/canonicalize``), so error paths name the body's subsets.

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import is_dns1123_label, is_dns1123_subdomain, is_qualified_name
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import text_at
from kubewire.server.writes.validation.pods.spec import PROTOCOLS, port_number_errors
from kubewire.status import FieldError, invalid, not_supported, required

IP_ERROR = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


def _dicts(value: JSON) -> list[dict[str, JSON]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def non_special_ip_errors(text: str, path: str) -> list[FieldError]:
    """``ValidateNonSpecialIP``: no unspecified or link-local address. kube also refuses
    loopback addresses; kubewire leaves that rule out (as its EndpointSlice validation does),
    because a server on loopback advertises ``127.0.0.1`` in ``default/kubernetes``."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return [invalid(path, text, "must be a valid IP address")]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # Go's net.IP holds a mapped address as the IPv4 one
    errors: list[FieldError] = []
    if ip.is_unspecified:
        errors.append(invalid(path, text, f"may not be unspecified ({text})"))
    if ip.is_link_local and not ip.is_multicast:
        errors.append(invalid(path, text,
                              "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
    packed = ip.packed
    if (ip.version == 4 and packed[:3] == b"\xe0\x00\x00") or \
            (ip.version == 6 and packed[0] == 0xFF and packed[1] & 0x0F == 0x02):
        errors.append(invalid(path, text, "may not be in the link-local multicast range "
                                          "(224.0.0.0/24, ff02::/10)"))
    return errors


def _address_errors(address: Mapping[str, JSON], path: str) -> list[FieldError]:
    ip = text_at(address, "ip")
    errors: list[FieldError] = []
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        errors.append(invalid(f"{path}.ip", ip, IP_ERROR))
    hostname = text_at(address, "hostname")
    if hostname:
        errors += [invalid(f"{path}.hostname", hostname, m) for m in is_dns1123_label(hostname)]
    node_name = address.get("nodeName")
    if isinstance(node_name, str):
        errors += [invalid(f"{path}.nodeName", node_name, m)
                   for m in is_dns1123_subdomain(node_name)]
    return errors + non_special_ip_errors(ip, f"{path}.ip")


def _port_errors(port: Mapping[str, JSON], require_name: bool, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    name = text_at(port, "name")
    if require_name and not name:
        errors.append(required(f"{path}.name"))
    elif name:
        errors += [invalid(f"{path}.name", name, m) for m in is_dns1123_label(name)]
    number = port.get("port")
    errors += port_number_errors(f"{path}.port", number if isinstance(number, int) else 0)
    protocol = text_at(port, "protocol")
    if not protocol:
        errors.append(required(f"{path}.protocol"))
    elif protocol not in PROTOCOLS:
        errors.append(not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    app_protocol = port.get("appProtocol")
    if isinstance(app_protocol, str):
        errors += [invalid(f"{path}.appProtocol", app_protocol, m)
                   for m in is_qualified_name(app_protocol)]
    return errors


def validate_endpoints(resource: Resource, obj: Mapping[str, JSON],
                       old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    """``validateEndpointSubsets`` (metadata is checked for every kind elsewhere)."""
    errors: list[FieldError] = []
    for i, subset in enumerate(_dicts(obj.get("subsets"))):
        path = f"subsets[{i}]"
        addresses = _dicts(subset.get("addresses"))
        not_ready = _dicts(subset.get("notReadyAddresses"))
        if not addresses and not not_ready:
            errors.append(required(path, "must specify `addresses` or `notReadyAddresses`"))
        for j, address in enumerate(addresses):
            errors += _address_errors(address, f"{path}.addresses[{j}]")
        for j, address in enumerate(not_ready):
            errors += _address_errors(address, f"{path}.notReadyAddresses[{j}]")
        ports = _dicts(subset.get("ports"))
        for j, port in enumerate(ports):
            errors += _port_errors(port, len(ports) > 1, f"{path}.ports[{j}]")
    return errors
