"""Cells that read several fields of one object: services, nodes, ingresses, endpoint slices,
events, config maps. Each is a named formatter ``(value, now) -> Cell`` used by the column
tables.

Source: ``kubernetes/kubernetes:pkg/printers/internalversion/printers.go`` (the server always
prints with ``Wide: true``, so load-balancer addresses are never clipped).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from kubewire.json_types import JSON
from kubewire.server.tables.cells import (
    LIST_LIMIT,
    NONE,
    UNKNOWN,
    Cell,
    as_dict,
    as_int,
    as_str,
    dicts,
    human_duration,
    list_with_more,
    since,
)
from kubewire.times import parse_time_or_none

NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
NODE_ROLE_LABEL = "kubernetes.io/role"


# -- services --------------------------------------------------------------------------------

def service_cluster_ip(obj: JSON, now: datetime) -> Cell:
    spec = as_dict(as_dict(obj).get("spec"))
    ips = [ip for ip in spec.get("clusterIPs") or [] if isinstance(ip, str)]
    first = ips[0] if ips else as_str(spec.get("clusterIP"))
    return first or NONE


def _load_balancer_addresses(status: JSON) -> str:
    """``loadBalancerStatusStringer``: sorted, de-duplicated IPs (else hostnames)."""
    found = {as_str(i.get("ip")) or as_str(i.get("hostname"))
             for i in dicts(as_dict(status).get("ingress"))}
    return ",".join(sorted(found - {""}))


def service_external_ip(obj: JSON, now: datetime) -> Cell:
    """``getServiceExternalIP``: ``<none>``, ``<pending>``, the addresses or the external name."""
    svc = as_dict(obj)
    spec = as_dict(svc.get("spec"))
    external = [ip for ip in spec.get("externalIPs") or [] if isinstance(ip, str)]
    kind = spec.get("type")
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if kind == "LoadBalancer":
        balancer = _load_balancer_addresses(as_dict(svc.get("status")).get("loadBalancer"))
        if external:
            return ",".join(([*balancer.split(",")] if balancer else []) + external)
        return balancer or "<pending>"
    if kind == "ExternalName":
        return as_str(spec.get("externalName"))
    return UNKNOWN


def service_ports(obj: JSON, now: datetime) -> Cell:
    """``makePortString``: ``80/TCP,443:30443/TCP``; ``<none>`` without ports."""
    pieces = []
    for port in dicts(as_dict(as_dict(obj).get("spec")).get("ports")):
        number, protocol = as_int(port.get("port")), as_str(port.get("protocol"))
        node_port = as_int(port.get("nodePort"))
        pieces.append(f"{number}:{node_port}/{protocol}" if node_port > 0
                      else f"{number}/{protocol}")
    return ",".join(pieces) or NONE


# -- nodes -----------------------------------------------------------------------------------

def node_status(obj: JSON, now: datetime) -> Cell:
    """``Ready``/``NotReady``/``Unknown``, plus ``SchedulingDisabled`` when cordoned."""
    node = as_dict(obj)
    status = [
        "Ready" if c.get("status") == "True" else "NotReady"
        for c in dicts(as_dict(node.get("status")).get("conditions"))
        if c.get("type") == "Ready"
    ][-1:] or ["Unknown"]
    if as_dict(node.get("spec")).get("unschedulable") is True:
        status.append("SchedulingDisabled")
    return ",".join(status)


def node_roles(obj: JSON, now: datetime) -> Cell:
    """``findNodeRoles``: ``node-role.kubernetes.io/<role>`` keys and ``kubernetes.io/role``."""
    roles = set()
    for key, value in as_dict(as_dict(as_dict(obj).get("metadata")).get("labels")).items():
        if key.startswith(NODE_ROLE_PREFIX) and key[len(NODE_ROLE_PREFIX):]:
            roles.add(key[len(NODE_ROLE_PREFIX):])
        elif key == NODE_ROLE_LABEL and value:
            roles.add(value)
    return ",".join(sorted(roles)) or NONE


def _node_address(obj: JSON, kind: str) -> str:
    for address in dicts(as_dict(as_dict(obj).get("status")).get("addresses")):
        if address.get("type") == kind:
            return as_str(address.get("address"))
    return NONE


def node_internal_ip(obj: JSON, now: datetime) -> Cell:
    return _node_address(obj, "InternalIP")


def node_external_ip(obj: JSON, now: datetime) -> Cell:
    return _node_address(obj, "ExternalIP")


# -- ingresses and endpoint slices -----------------------------------------------------------

def ingress_hosts(value: JSON, now: datetime) -> Cell:
    """``formatHosts`` of ``spec.rules``: the first three hosts set, ``*`` when none is."""
    rules = dicts(value)
    hosts: list[str] = []
    more = False
    for rule in rules:
        more = more or len(hosts) == LIST_LIMIT
        if not more and as_str(rule.get("host")):
            hosts.append(as_str(rule.get("host")))
    if not hosts:
        return "*"
    joined = ",".join(hosts)
    return f"{joined} + {len(rules) - LIST_LIMIT} more..." if more else joined


def ingress_address(value: JSON, now: datetime) -> Cell:
    """``status.loadBalancer`` addresses, sorted; ``""`` before a controller sets them."""
    return _load_balancer_addresses(value)


def ingress_ports(value: JSON, now: datetime) -> Cell:
    """``formatPorts`` of ``spec.tls``."""
    return "80, 443" if isinstance(value, list) and value else "80"


def slice_ports(value: JSON, now: datetime) -> Cell:
    """``formatDiscoveryPorts``: port numbers, else names, else ``*``."""
    ports = dicts(value)
    shown = []
    for port in ports[:LIST_LIMIT]:
        number = port.get("port")
        name = port.get("name")
        shown.append(str(number) if isinstance(number, int) else
                     name if isinstance(name, str) else "*")
    return list_with_more(shown, len(ports))


def slice_endpoints(value: JSON, now: datetime) -> Cell:
    """``formatDiscoveryEndpoints``: every address of every endpoint."""
    addresses = [a for e in dicts(value) for a in e.get("addresses") or []
                 if isinstance(a, str)]
    return list_with_more(addresses, len(addresses))


def endpoints_endpoints(value: JSON, now: datetime) -> Cell:
    """``formatEndpoints`` (no port filter): ``ip:port`` per address and port (a subset
    without ports lists bare addresses), the first three, then `` + N more...``; ``<none>``."""
    listed: list[str] = []
    count = 0
    for subset in dicts(value):
        addresses = [as_str(a.get("ip")) for a in dicts(subset.get("addresses"))]
        ports: list[dict[str, JSON] | None] = list(dicts(subset.get("ports")))
        for port in ports or [None]:
            count += len(addresses)
            for ip in addresses:
                if len(listed) == LIST_LIMIT:
                    break
                if port is None:
                    listed.append(ip)
                else:
                    host = f"[{ip}]" if ":" in ip else ip
                    listed.append(f"{host}:{as_int(port.get('port'))}")
    joined = ",".join(listed)
    if count > LIST_LIMIT:
        return f"{joined} + {count - LIST_LIMIT} more..."
    return joined or NONE


# -- events ----------------------------------------------------------------------------------
# The printer works on the internal Event; events.k8s.io/v1 names its fields differently
# (regarding, note, deprecated*), so each cell reads either spelling.

def _event_field(event: dict[str, JSON], v1_name: str, core_name: str) -> JSON:
    value = event.get(v1_name)
    return value if value is not None else event.get(core_name)


def event_first_seen(obj: JSON, now: datetime) -> Cell:
    event = as_dict(obj)
    first = _event_field(event, "deprecatedFirstTimestamp", "firstTimestamp")
    if parse_time_or_none(first) is None:
        return since(event.get("eventTime"), now)
    return since(first, now)


def event_last_seen(obj: JSON, now: datetime) -> Cell:
    event = as_dict(obj)
    series = event.get("series")
    if isinstance(series, dict):
        return since(series.get("lastObservedTime"), now)
    last = _event_field(event, "deprecatedLastTimestamp", "lastTimestamp")
    return since(last, now) if parse_time_or_none(last) is not None else event_first_seen(obj, now)


def event_count(obj: JSON, now: datetime) -> Cell:
    """``series.count`` for a series, else the legacy count, and 1 for a singleton."""
    event = as_dict(obj)
    series = event.get("series")
    if isinstance(series, dict):
        return as_int(series.get("count"))
    return as_int(_event_field(event, "deprecatedCount", "count")) or 1


def _regarding(event: JSON) -> dict[str, JSON]:
    return as_dict(_event_field(as_dict(event), "regarding", "involvedObject"))


def event_object(obj: JSON, now: datetime) -> Cell:
    """``pod/web-1``: the lower-cased kind and the name of the object the event is about."""
    regarding = _regarding(obj)
    kind, name = as_str(regarding.get("kind")).lower(), as_str(regarding.get("name"))
    return f"{kind}/{name}" if name else kind


def event_subobject(obj: JSON, now: datetime) -> Cell:
    return as_str(_regarding(obj).get("fieldPath"))


def event_source(obj: JSON, now: datetime) -> Cell:
    """``formatEventSource``: ``component[, host]``, falling back to the reporting fields."""
    event = as_dict(obj)
    source = as_dict(_event_field(event, "deprecatedSource", "source"))
    component = as_str(source.get("component")) or as_str(
        _event_field(event, "reportingController", "reportingComponent"))
    host = as_str(source.get("host")) or as_str(event.get("reportingInstance"))
    return f"{component}, {host}" if host else component


def event_message(obj: JSON, now: datetime) -> Cell:
    return as_str(_event_field(as_dict(obj), "note", "message")).strip()


def configmap_data(obj: JSON, now: datetime) -> Cell:
    """ConfigMaps' DATA: keys of ``data`` plus keys of ``binaryData``."""
    cm = as_dict(obj)
    return len(as_dict(cm.get("data"))) + len(as_dict(cm.get("binaryData")))


def _subjects(value: JSON, kind: str) -> Cell:
    """One kind's part of ``rbac.SubjectsStrings``, joined with ", " as ``printRoleBinding``
    does: users and groups by name, service accounts as ``namespace/name``."""
    names = []
    for subject in value if isinstance(value, list) else []:
        if isinstance(subject, dict) and subject.get("kind") == kind:
            name = str(subject.get("name") or "")
            if kind == "ServiceAccount":
                name = f"{subject.get('namespace') or ''}/{name}"
            names.append(name)
    return ", ".join(names)


def binding_role(value: JSON, now: datetime) -> Cell:
    """``printRoleBinding``'s ROLE: ``<roleRef.kind>/<roleRef.name>``."""
    ref = value if isinstance(value, dict) else {}
    return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"


def binding_users(value: JSON, now: datetime) -> Cell:
    return _subjects(value, "User")


def binding_groups(value: JSON, now: datetime) -> Cell:
    return _subjects(value, "Group")


def binding_service_accounts(value: JSON, now: datetime) -> Cell:
    return _subjects(value, "ServiceAccount")


def csr_duration(value: JSON, now: datetime) -> Cell:
    """``printCertificateSigningRequest``'s REQUESTEDDURATION: ``spec.expirationSeconds`` as a
    human duration, ``<none>`` when unset."""
    if not isinstance(value, int) or isinstance(value, bool):
        return NONE
    return human_duration(timedelta(seconds=value))


def csr_condition(value: JSON, now: datetime) -> Cell:
    """``extractCSRStatus``: Denied, else Approved, else Pending; then ``,Failed`` and
    ``,Issued`` (a certificate is there)."""
    status = as_dict(value)
    types = {c.get("type") for c in status.get("conditions") or [] if isinstance(c, dict)}
    text = "Denied" if "Denied" in types else "Approved" if "Approved" in types else "Pending"
    if "Failed" in types:
        text += ",Failed"
    if status.get("certificate"):
        text += ",Issued"
    return text


def controller_of(value: JSON, now: datetime) -> Cell:
    """ControllerRevisions' CONTROLLER: ``metav1.GetControllerOf`` as ``formatResourceName``
    prints it (``statefulset.apps/web``: the kind lower-cased, dotted with the group),
    ``<none>`` without a controller reference."""
    meta = as_dict(as_dict(value).get("metadata"))
    for owner in dicts(meta.get("ownerReferences")):
        if owner.get("controller") is not True:
            continue
        parts = as_str(owner.get("apiVersion")).split("/")
        group = parts[0] if len(parts) == 2 else ""  # schema.ParseGroupVersion
        kind, name = as_str(owner.get("kind")), as_str(owner.get("name"))
        if not group and not kind:
            return name
        return (f"{kind}.{group}" if group else kind).lower() + "/" + name
    return NONE
