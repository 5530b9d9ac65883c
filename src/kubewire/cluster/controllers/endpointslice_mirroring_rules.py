"""What the EndpointSlice mirroring controller decides, apart from I/O (kube's
``pkg/controller/endpointslicemirroring`` ``reconciler.go``, ``reconciler_helpers.go``,
``utils.go``, v1.32).

Endpoints written by hand for a Service without a selector are mirrored into EndpointSlices:

- **Mirrored when** the Endpoints is not labelled ``endpointslice.kubernetes.io/skip-mirror:
  "true"``, carries no leader-election annotation, and a Service of its name exists without a
  selector; otherwise its mirrored slices are deleted.
- **Desired**: per subset, its ports and each address family form a key; at most
  ``max_per_subset`` (1000) addresses of the subset are mirrored, ready ones first, each an
  endpoint with the address, ``conditions.ready`` (true for ``addresses``, false for
  ``notReadyAddresses``), ``targetRef``, ``nodeName``, ``hostname``. Addresses that are not
  IPs are skipped (and counted for kube's ``InvalidIPAddress`` event).
- **Slices**: one per key: the first existing slice of the key is rewritten when its
  endpoints, labels or annotations differ, the others deleted; slices to create take the names
  of slices to delete of the same address type (``recycleSlices``). A slice carries the
  Endpoints' labels plus ``kubernetes.io/service-name`` and ``endpointslice.kubernetes.io/
  managed-by: endpointslicemirroring-controller.k8s.io``, its annotations but the trigger time
  and ``kubectl.kubernetes.io/last-applied-configuration``, and a controller ownerReference to
  the Endpoints.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubewire.cluster.controllers.endpointslice_rules import (
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    TRIGGER_TIME_ANNOTATION,
    Plan,
    endpoint_identity,
    meta,
    ports_key,
    selector_of,
    slice_prefix,
)

Obj = dict[str, Any]

CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
LEADER_ELECTION_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_ENDPOINTS_PER_SUBSET = 1000  # --mirroring-max-endpoints-per-subset


def should_mirror(endpoints: Mapping[str, Any], service: Mapping[str, Any] | None) -> bool:
    """``shouldMirror`` and the Service checks of ``syncEndpoints``."""
    if (meta(endpoints).get("labels") or {}).get(SKIP_MIRROR_LABEL) == "true":
        return False
    if LEADER_ELECTION_ANNOTATION in (meta(endpoints).get("annotations") or {}):
        return False
    return service is not None and selector_of(service) is None


def address_to_endpoint(address: Mapping[str, Any], ready: bool) -> tuple[Obj, str] | None:
    """``addressToEndpoint``: the endpoint and its address type, None for a non-IP."""
    try:
        ip = ipaddress.ip_address(str(address.get("ip", "")))
    except ValueError:
        return None
    endpoint: Obj = {"addresses": [str(ip)], "conditions": {"ready": ready}}
    if address.get("hostname"):
        endpoint["hostname"] = address["hostname"]
    if address.get("targetRef") is not None:
        endpoint["targetRef"] = dict(address["targetRef"])
    if address.get("nodeName") is not None:
        endpoint["nodeName"] = address["nodeName"]
    return endpoint, f"IPv{ip.version}"


def slice_ports(ports: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """``epPortsToEpsPorts``."""
    out: list[Obj] = []
    for port in ports:
        item: Obj = {"name": port.get("name") or "", "port": port.get("port", 0),
                     "protocol": port.get("protocol") or ""}
        if port.get("appProtocol") is not None:
            item["appProtocol"] = port["appProtocol"]
        out.append(item)
    return out


def new_slice(endpoints: Mapping[str, Any], ports: list[Obj], address_type: str,
              name: str = "") -> Obj:
    """``newEndpointSlice`` of the mirroring controller."""
    ep_meta = meta(endpoints)
    labels = {**(ep_meta.get("labels") or {}), SERVICE_NAME_LABEL: ep_meta.get("name", ""),
              MANAGED_BY_LABEL: CONTROLLER_NAME}
    annotations = {k: v for k, v in (ep_meta.get("annotations") or {}).items()
                   if k not in (TRIGGER_TIME_ANNOTATION, LAST_APPLIED)}
    slice_meta: Obj = {
        "namespace": ep_meta.get("namespace", ""), "labels": labels,
        "ownerReferences": [{"apiVersion": "v1", "kind": "Endpoints",
                             "name": ep_meta.get("name", ""), "uid": ep_meta.get("uid", ""),
                             "controller": True, "blockOwnerDeletion": True}]}
    if annotations:
        slice_meta["annotations"] = annotations
    if name:
        slice_meta["name"] = name
    else:
        slice_meta["generateName"] = slice_prefix(str(ep_meta.get("name", "")))
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": slice_meta, "addressType": address_type, "endpoints": [],
            "ports": ports}


Key = tuple[str, tuple[Any, ...]]


@dataclass
class Desired:
    """``desiredCalc``: endpoints and ports by (address type, port set)."""

    endpoints: dict[Key, dict[tuple[Any, ...], Obj]] = field(default_factory=dict)
    ports: dict[Key, list[Obj]] = field(default_factory=dict)
    invalid: int = 0
    skipped: int = 0


def desired(endpoints: Mapping[str, Any], max_per_subset: int) -> Desired:
    calc = Desired()
    for subset in endpoints.get("subsets") or []:
        ports = slice_ports([p for p in subset.get("ports") or [] if isinstance(p, Mapping)])
        for address_type in ("IPv4", "IPv6"):
            key = (address_type, ports_key(ports))
            calc.endpoints.setdefault(key, {})
            calc.ports[key] = ports
        total = len(subset.get("addresses") or []) + len(subset.get("notReadyAddresses") or [])
        added = 0
        for field_name, ready in (("addresses", True), ("notReadyAddresses", False)):
            for address in subset.get(field_name) or []:
                if added >= max_per_subset:
                    break
                made = address_to_endpoint(address, ready)
                if made is None:
                    calc.invalid += 1
                    continue
                endpoint, address_type = made
                key = (address_type, ports_key(ports))
                calc.endpoints[key][endpoint_identity(endpoint)] = endpoint
                added += 1
        calc.skipped += total - added
    return calc


def _same(existing: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    def endpoints_of(s: Mapping[str, Any]) -> list[Any]:
        return sorted(repr(sorted((k, repr(v)) for k, v in e.items()))
                      for e in s.get("endpoints") or [])
    return (endpoints_of(existing) == endpoints_of(wanted)
            and (meta(existing).get("labels") or {}) == (meta(wanted).get("labels") or {})
            and (meta(existing).get("annotations") or {})
            == (meta(wanted).get("annotations") or {}))


def plan(endpoints: Mapping[str, Any], existing: Sequence[Obj],
         max_per_subset: int = MAX_ENDPOINTS_PER_SUBSET) -> tuple[Plan, Desired]:
    """The mirrored slices' writes (``reconcile``, ``reconcileByPortMapping``,
    ``recycleSlices``)."""
    calc = desired(endpoints, max_per_subset)
    result = Plan()
    existing_by_key: dict[Key, list[Obj]] = {}
    for slice_ in existing:
        key = (str(slice_.get("addressType")), ports_key(slice_.get("ports") or []))
        existing_by_key.setdefault(key, []).append(slice_)
    for key, wanted in calc.endpoints.items():
        old = existing_by_key.get(key, [])
        if not wanted:
            result.delete += old
            continue
        result.delete += old[1:]
        name = str(meta(old[0]).get("name", "")) if old else ""
        fresh = new_slice(endpoints, calc.ports[key], key[0], name)
        fresh["endpoints"] = list(wanted.values())[:max_per_subset]
        if old and _same(old[0], fresh):
            continue
        if old:  # an update of the read version
            fresh["metadata"]["resourceVersion"] = meta(old[0]).get("resourceVersion", "")
        (result.update if name else result.create).append(fresh)
    for key, old in existing_by_key.items():
        if key not in calc.endpoints:
            result.delete += old
    _recycle(result)
    return result, calc


def _recycle(result: Plan) -> None:
    """``recycleSlices``: creates take the names of deletes of their address type."""
    for fresh in list(result.create):
        doomed = next((d for d in result.delete
                       if d.get("addressType") == fresh.get("addressType")), None)
        if doomed is None:
            continue
        result.create.remove(fresh)
        result.delete.remove(doomed)
        fresh["metadata"].pop("generateName", None)
        fresh["metadata"]["name"] = meta(doomed).get("name", "")
        fresh["metadata"]["resourceVersion"] = meta(doomed).get("resourceVersion", "")
        result.update.append(fresh)
