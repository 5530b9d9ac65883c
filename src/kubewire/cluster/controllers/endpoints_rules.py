"""What the Endpoints controller decides, apart from I/O (kube's
``pkg/controller/endpoint/endpoints_controller.go`` ``syncService`` and
``pkg/api/v1/endpoints`` ``RepackSubsets``, v1.32).

- **Which pods**: ``ShouldPodBeInEndpoints`` (not Succeeded or Failed, with an IP), and not
  terminating unless the Service publishes not-ready addresses; each gives one address: its
  IP of the Service's first family, ``nodeName``, ``targetRef`` (and ``hostname`` when its
  subdomain is the Service).
- **Subsets**: per Service port that resolves on the pod (``FindPort``), the address under
  ``addresses`` when the pod is Ready (or the Service publishes not-ready addresses), else
  under ``notReadyAddresses``; a headless Service without ports lists addresses without
  ports. Then repacked (``RepackSubsets``): addresses that offer the same ports with the same
  readiness share one subset; an address ready on a port stays ready there.
- **Capacity**: more than 1000 addresses are truncated (``truncateEndpoints``: ready ones
  first, each subset keeping its proportion) and annotated
  ``endpoints.kubernetes.io/over-capacity: truncated``.
- **The object**: named like the Service, the Service's labels (plus
  ``service.kubernetes.io/headless`` for a headless Service), the trigger-time annotation when
  the sync has one; written only when subsets, labels or the capacity annotation differ.

kube sorts ports and subsets by a hash of Go's object dump, which no client relies on;
kubewire sorts addresses by IP and pod UID as kube does, and ports and subsets by their
fields, so the order is stable.
"""

from __future__ import annotations

import copy
import ipaddress
import math
from collections.abc import Mapping, Sequence
from typing import Any

from kubewire.cluster.controllers.endpointslice_rules import (
    HEADLESS_LABEL,
    TRIGGER_TIME_ANNOTATION,
    find_port,
    is_pod_ready,
    meta,
    pod_ips,
    should_pod_be_in_endpoints,
    should_set_hostname,
    spec,
)
from kubewire.endpoints_subsets import repack

Obj = dict[str, Any]

MAX_CAPACITY = 1000
OVER_CAPACITY_ANNOTATION = "endpoints.kubernetes.io/over-capacity"
TRUNCATED = "truncated"


def _is_ipv6(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 6
    except ValueError:
        return False


def address_for_service(service: Mapping[str, Any], pod: Mapping[str, Any]) -> Obj | None:
    """``podToEndpointAddressForService``: the pod's IP of the Service's family, or None."""
    families = spec(service).get("ipFamilies") or []
    if families:
        want_v6 = families[0] == "IPv6"
    else:
        cluster_ip = spec(service).get("clusterIP") or ""
        if cluster_ip and cluster_ip != "None":
            want_v6 = _is_ipv6(cluster_ip)
        else:
            want_v6 = _is_ipv6(str((pod.get("status") or {}).get("podIP") or ""))
    ip = next((ip for ip in pod_ips(pod) if _is_ipv6(ip) == want_v6), None)
    if ip is None:
        return None
    address: Obj = {"ip": ip}
    if spec(pod).get("nodeName"):
        address["nodeName"] = spec(pod)["nodeName"]
    address["targetRef"] = {"kind": "Pod", "namespace": meta(pod).get("namespace", ""),
                            "name": meta(pod).get("name", ""), "uid": meta(pod).get("uid", "")}
    return address


def raw_subsets(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """One subset per (pod, port), before repacking (``syncService``'s loop)."""
    publish = bool(spec(service).get("publishNotReadyAddresses"))
    ports = [p for p in spec(service).get("ports") or [] if isinstance(p, Mapping)]
    headless = spec(service).get("clusterIP") == "None"
    subsets: list[Obj] = []
    for pod in pods:
        if not should_pod_be_in_endpoints(pod, publish):
            continue
        address = address_for_service(service, pod)
        if address is None:
            continue
        if should_set_hostname(pod, service):
            address["hostname"] = spec(pod)["hostname"]
        field = "addresses" if publish or is_pod_ready(pod) else "notReadyAddresses"
        if not ports:
            if headless:
                subsets.append({field: [address], "ports": []})
            continue
        for service_port in ports:
            number = find_port(pod, service_port)
            if number is None:
                continue
            port: Obj = {"name": service_port.get("name") or "", "port": number,
                         "protocol": service_port.get("protocol") or "TCP"}
            if service_port.get("appProtocol") is not None:
                port["appProtocol"] = service_port["appProtocol"]
            subsets.append({field: [copy.deepcopy(address)], "ports": [port]})
    return subsets


def _count(subsets: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    ready = sum(len(s.get("addresses") or []) for s in subsets)
    return ready, sum(len(s.get("notReadyAddresses") or []) for s in subsets)


def truncate(subsets: list[Obj], capacity: int = MAX_CAPACITY) -> bool:
    """``truncateEndpoints``: cut to ``capacity`` addresses, ready ones first, each subset
    keeping its share (rounded up); True when it cut."""
    total_ready, total_not_ready = _count(subsets)
    if total_ready + total_not_ready <= capacity:
        return False
    truncate_ready = total_ready > capacity
    allowed = capacity if truncate_ready else capacity - total_ready
    total = total_ready if truncate_ready else total_not_ready
    room = allowed
    for subset in subsets:
        field = "addresses" if truncate_ready else "notReadyAddresses"
        in_subset = len(subset.get(field) or [])
        share = min(math.ceil(in_subset / total * allowed), room)
        subset[field] = (subset.get(field) or [])[:share]
        if truncate_ready:
            subset.pop("notReadyAddresses", None)
        room -= len(subset[field])
        if not subset[field]:
            del subset[field]
    return True


def _comparable(subsets: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Subsets as ``endpointSubsetsEqualIgnoreResourceVersion`` compares them."""
    out: list[Any] = []
    for subset in subsets:
        item: dict[str, Any] = {}
        for field in ("addresses", "notReadyAddresses"):
            found = []
            for address in subset.get(field) or []:
                address = dict(address)
                ref = dict(address.get("targetRef") or {})
                ref.pop("resourceVersion", None)
                if ref:
                    address["targetRef"] = ref
                found.append(address)
            if found:
                item[field] = found
        if subset.get("ports"):
            item["ports"] = [dict(p) for p in subset["ports"]]
        out.append(item)
    return out


def desired(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
            current: Mapping[str, Any] | None, trigger_time: str) -> Obj | None:
    """The Endpoints to write for ``service`` (a copy of ``current`` changed, or a new one),
    or None when ``current`` is already right."""
    subsets = repack(raw_subsets(service, pods))
    labels = {str(k): str(v) for k, v in (meta(service).get("labels") or {}).items()}
    if current is not None:
        current_labels = dict(meta(current).get("labels") or {})
        current_labels.pop(HEADLESS_LABEL, None)
        annotations = meta(current).get("annotations") or {}
        capacity_ok = sum(_count(current.get("subsets") or [])) <= MAX_CAPACITY and \
            OVER_CAPACITY_ANNOTATION not in annotations
        if _comparable(current.get("subsets") or []) == _comparable(subsets) and \
                current_labels == labels and capacity_ok:
            return None
        obj: Obj = {"apiVersion": "v1", "kind": "Endpoints", **copy.deepcopy(dict(current))}
    else:
        obj = {"apiVersion": "v1", "kind": "Endpoints",
               "metadata": {"name": meta(service).get("name", ""),
                            "namespace": meta(service).get("namespace", "")}}
    obj_meta = obj.setdefault("metadata", {})
    annotations = dict(obj_meta.get("annotations") or {})
    if trigger_time:
        annotations[TRIGGER_TIME_ANNOTATION] = trigger_time
    else:
        annotations.pop(TRIGGER_TIME_ANNOTATION, None)
    if truncate(subsets):
        annotations[OVER_CAPACITY_ANNOTATION] = TRUNCATED
    else:
        annotations.pop(OVER_CAPACITY_ANNOTATION, None)
    obj["subsets"] = subsets
    cluster_ip = spec(service).get("clusterIP") or ""
    if cluster_ip in ("", "None"):
        labels[HEADLESS_LABEL] = ""
    obj_meta["labels"] = labels
    obj_meta["annotations"] = annotations
    return obj
