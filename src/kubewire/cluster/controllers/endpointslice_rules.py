"""What the EndpointSlice controller decides, apart from I/O (kube's ``k8s.io/endpointslice``
``reconciler.go`` and ``utils.go``, v1.32).

Given a Service, the pods its selector matches, the nodes they run on and the slices the
controller already manages for it, ``plan`` says which slices to create, update and delete:

- **Which pods** (``ShouldPodBeInEndpoints`` with terminating pods included): not Succeeded or
  Failed, with a pod IP. A pod whose node is unknown is left out (and reported, so the Service
  is synced again) unless the Service publishes not-ready addresses.
- **The endpoint of a pod** (``podToEndpoint``): its IPs of the slice's family; ``serving`` the
  pod's Ready condition, ``terminating`` its deletionTimestamp, ``ready`` serving and not
  terminating (always, with ``publishNotReadyAddresses``); ``targetRef``, ``nodeName``, the
  node's ``topology.kubernetes.io/zone``; ``hostname`` when the pod's subdomain is the Service.
- **Its ports** (``getEndpointPorts``): one per Service port that resolves on the pod: a
  numeric targetPort as is, a named one as the container port of that name and protocol
  (sidecar init containers too); ports that do not resolve are left out, so pods group into
  slices by the port set they resolve to.
- **Slices** (``reconcileByPortMapping``): per port set, keep the endpoints existing slices
  already hold (an endpoint is the same one when its addresses, hostname and pod are),
  refresh those that changed, drop the unwanted, fill the slices being updated, then an
  unchanged slice the rest fit in best, then new slices; at most ``max_per_slice`` endpoints
  each. A slice no port set wants is deleted; a Service with no endpoints keeps one
  placeholder slice with no endpoints and no ports. Creates that meet deletes become updates
  of those slices (``finalize``).
- **Labels**: the Service's (but the reserved keys), ``kubernetes.io/service-name``,
  ``endpointslice.kubernetes.io/managed-by``, ``service.kubernetes.io/headless`` for a
  headless Service; a controller ownerReference to the Service; ``generateName <svc>-``.

Topology hints and traffic distribution are not computed (kube computes them only when a
Service asks for them).
"""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubewire.names import is_dns1123_subdomain

Obj = dict[str, Any]

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
HEADLESS_LABEL = "service.kubernetes.io/headless"
ZONE_LABEL = "topology.kubernetes.io/zone"
TRIGGER_TIME_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time"
MAX_ENDPOINTS_PER_SLICE = 100  # --max-endpoints-per-slice's default
_RESERVED = frozenset({SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL})


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, Mapping) else {}


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("status")
    return value if isinstance(value, Mapping) else {}


def selector_of(service: Mapping[str, Any]) -> dict[str, str] | None:
    """The Service's selector, None when it has none (an empty map decodes to nil in Go)."""
    selector = spec(service).get("selector")
    if not isinstance(selector, Mapping) or not selector:
        return None
    return {str(k): str(v) for k, v in selector.items()}


def selects(selector: Mapping[str, str], pod: Mapping[str, Any]) -> bool:
    labels = meta(pod).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """``podutil.IsPodReady``: the Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in status(pod).get("conditions") or [] if isinstance(c, Mapping))


def pod_ips(pod: Mapping[str, Any]) -> list[str]:
    """``status.podIPs`` (a status with only ``podIP``, as some writers leave it, counts it)."""
    found = [str(p.get("ip")) for p in status(pod).get("podIPs") or []
             if isinstance(p, Mapping) and p.get("ip")]
    if not found and status(pod).get("podIP"):
        found = [str(status(pod)["podIP"])]
    return found


def should_pod_be_in_endpoints(pod: Mapping[str, Any], include_terminating: bool) -> bool:
    """``ShouldPodBeInEndpoints``: not terminal, has an IP, and (unless terminating pods are
    included) not being deleted."""
    if status(pod).get("phase") in ("Succeeded", "Failed"):
        return False
    if not pod_ips(pod):
        return False
    return include_terminating or not meta(pod).get("deletionTimestamp")


def should_set_hostname(pod: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    """``ShouldSetHostname``: the pod has a hostname and its subdomain is the Service."""
    return bool(spec(pod).get("hostname")) and \
        spec(pod).get("subdomain") == meta(service).get("name") and \
        meta(pod).get("namespace") == meta(service).get("namespace")


def find_port(pod: Mapping[str, Any], service_port: Mapping[str, Any]) -> int | None:
    """``FindPort``: a numeric targetPort as is; a named one in the containers' ports (and
    sidecar init containers') with that name and the Service port's protocol."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int) and not isinstance(target, bool):
        return target
    if not isinstance(target, str):
        return None
    protocol = service_port.get("protocol") or "TCP"
    containers = list(spec(pod).get("containers") or [])
    containers += [c for c in spec(pod).get("initContainers") or []
                   if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"]
    for container in containers:
        for port in (container.get("ports") or []) if isinstance(container, Mapping) else []:
            if port.get("name") == target and (port.get("protocol") or "TCP") == protocol:
                number = port.get("containerPort")
                return number if isinstance(number, int) else None
    return None


def endpoint_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[Obj]:
    """``getEndpointPorts``."""
    ports = [p for p in spec(service).get("ports") or [] if isinstance(p, Mapping)]
    out: list[Obj] = []
    for service_port in ports:
        number = find_port(pod, service_port)
        if number is None:
            continue
        port: Obj = {"name": service_port.get("name") or "", "port": number,
                     "protocol": service_port.get("protocol") or "TCP"}
        if service_port.get("appProtocol") is not None:
            port["appProtocol"] = service_port["appProtocol"]
        out.append(port)
    return out


def ports_key(ports: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, int, str, str], ...]:
    """``NewPortMapKey``: the port set, order-free."""
    return tuple(sorted((str(p.get("name") or ""), int(p.get("port") or 0),
                         str(p.get("protocol") or ""), str(p.get("appProtocol") or ""))
                        for p in ports))


def address_types(service: Mapping[str, Any]) -> list[str]:
    """``getAddressTypesForService``: from ``ipFamilies``, else the cluster IP's family, else
    both (a headless Service of an older server)."""
    families = [f for f in spec(service).get("ipFamilies") or [] if f in ("IPv4", "IPv6")]
    if families:
        return sorted(set(families))
    cluster_ip = spec(service).get("clusterIP") or ""
    if cluster_ip and cluster_ip != "None":
        return ["IPv6" if ":" in cluster_ip else "IPv4"]
    return ["IPv4", "IPv6"]


def _family_addresses(pod: Mapping[str, Any], address_type: str) -> list[str]:
    out: list[str] = []
    for text in pod_ips(pod):
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        if (ip.version == 6) == (address_type == "IPv6"):
            out.append(str(ip))
    return out


def pod_to_endpoint(pod: Mapping[str, Any], node: Mapping[str, Any] | None,
                    service: Mapping[str, Any], address_type: str) -> Obj:
    """``podToEndpoint``."""
    publish = bool(spec(service).get("publishNotReadyAddresses"))
    serving = is_pod_ready(pod)
    terminating = bool(meta(pod).get("deletionTimestamp"))
    endpoint: Obj = {
        "addresses": _family_addresses(pod, address_type),
        "conditions": {"ready": publish or (serving and not terminating), "serving": serving,
                       "terminating": terminating},
    }
    if should_set_hostname(pod, service):
        endpoint["hostname"] = spec(pod)["hostname"]
    endpoint["targetRef"] = {"kind": "Pod", "namespace": meta(pod).get("namespace", ""),
                             "name": meta(pod).get("name", ""), "uid": meta(pod).get("uid", "")}
    if spec(pod).get("nodeName"):
        endpoint["nodeName"] = spec(pod)["nodeName"]
    zone = (meta(node).get("labels") or {}).get(ZONE_LABEL) if node is not None else None
    if zone:
        endpoint["zone"] = zone
    return endpoint


def endpoint_identity(endpoint: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two endpoints the same one (kube's endpoint hash): addresses, hostname and
    the pod's namespace and name."""
    ref = endpoint.get("targetRef") or {}
    return (tuple(endpoint.get("addresses") or ()), endpoint.get("hostname") or "",
            ref.get("namespace") or "", ref.get("name") or "")


def _beyond_hash(endpoint: Mapping[str, Any]) -> tuple[Any, ...]:
    """``EndpointsEqualBeyondHash``'s fields: zone, node, conditions, the pod's uid, hints."""
    conditions = endpoint.get("conditions") or {}
    return (endpoint.get("zone"), endpoint.get("nodeName"), conditions.get("ready"),
            conditions.get("serving"), conditions.get("terminating"),
            (endpoint.get("targetRef") or {}).get("uid"), repr(endpoint.get("hints")))


def slice_labels(existing: Mapping[str, str], service: Mapping[str, Any]
                 ) -> tuple[dict[str, str], bool]:
    """``setEndpointSliceLabels``: the labels a slice should carry and whether the Service's
    own labels differ from the slice's."""
    slice_own = {k: v for k, v in existing.items() if k not in _RESERVED}
    labels = {str(k): str(v) for k, v in (meta(service).get("labels") or {}).items()
              if k not in _RESERVED}
    changed = slice_own != labels
    cluster_ip = spec(service).get("clusterIP") or ""
    if cluster_ip in ("", "None"):
        labels[HEADLESS_LABEL] = ""
    labels[SERVICE_NAME_LABEL] = str(meta(service).get("name", ""))
    labels[MANAGED_BY_LABEL] = CONTROLLER_NAME
    return labels, changed


def slice_prefix(service_name: str) -> str:
    """``getEndpointSlicePrefix``: ``<svc>-`` unless that is no valid name prefix."""
    prefix = f"{service_name}-"
    return prefix if not is_dns1123_subdomain(prefix[:-1] + "a") and len(prefix) <= 253 \
        else service_name


def owned_by(slice_: Mapping[str, Any], service: Mapping[str, Any]) -> bool:
    return any(ref.get("uid") == meta(service).get("uid") and ref.get("kind") == "Service"
               and ref.get("apiVersion") == "v1"
               for ref in meta(slice_).get("ownerReferences") or [])


def new_slice(service: Mapping[str, Any], ports: list[Obj], address_type: str) -> Obj:
    """``newEndpointSlice``: no name yet (``generateName``), owned by the Service."""
    labels, _ = slice_labels({}, service)
    svc_meta = meta(service)
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "generateName": slice_prefix(str(svc_meta.get("name", ""))),
            "namespace": svc_meta.get("namespace", ""), "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service",
                                 "name": svc_meta.get("name", ""), "uid": svc_meta.get("uid", ""),
                                 "controller": True, "blockOwnerDeletion": True}]},
        "addressType": address_type, "endpoints": [], "ports": copy.deepcopy(ports),
    }


def _name(slice_: Mapping[str, Any]) -> str:
    return str(meta(slice_).get("name") or "")


@dataclass
class Plan:
    """The writes one sync makes; ``errors`` are reasons to sync again later."""

    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


@dataclass
class _PortMapping:
    """``reconcileByPortMapping`` for one port set of one address type."""

    service: Mapping[str, Any]
    ports: list[Obj]
    address_type: str
    max_per_slice: int
    by_name: dict[str, Obj] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    to_update: list[str] = field(default_factory=list)
    to_delete: list[str] = field(default_factory=list)

    def run(self, existing: list[Obj], desired: dict[tuple[Any, ...], Obj]
            ) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """(create, update, delete)."""
        for slice_ in existing:
            self._keep_wanted(slice_, desired)
        remaining = list(desired.values())
        if remaining and self.to_update:  # fill the slices written anyway, fullest first
            for name in sorted(self.to_update, key=lambda n: -len(self.by_name[n]["endpoints"])):
                remaining = self._fill(self.by_name[name], remaining)
        create: list[Obj] = []
        while remaining:
            target = self._slice_to_fill(len(remaining))
            remaining = self._fill(target, remaining)
            if _name(target):
                self.to_update.append(_name(target))
                self.unchanged.remove(_name(target))
            else:
                create.append(target)
        return (create, [self.by_name[n] for n in dict.fromkeys(self.to_update)],
                [self.by_name[n] for n in self.to_delete])

    def _keep_wanted(self, slice_: Obj, desired: dict[tuple[Any, ...], Obj]) -> None:
        """Step 1: keep the endpoints still desired (refreshed), drop the others."""
        name = _name(slice_)
        self.by_name[name] = slice_
        old = slice_.get("endpoints") or []
        kept: list[Obj] = []
        updated = False
        for endpoint in old:
            wanted = desired.pop(endpoint_identity(endpoint), None)
            if wanted is not None:
                kept.append(wanted)
                updated = updated or _beyond_hash(wanted) != _beyond_hash(endpoint)
        labels, labels_changed = slice_labels(meta(slice_).get("labels") or {}, self.service)
        if (updated or len(old) != len(kept)) and not kept:
            self.to_delete.append(name)
        elif updated or len(old) != len(kept) or labels_changed:
            changed = copy.deepcopy(slice_)
            if updated or len(old) != len(kept):
                changed["endpoints"] = kept
            changed["metadata"]["labels"] = labels
            self.by_name[name] = changed
            self.to_update.append(name)
        else:
            self.unchanged.append(name)

    def _slice_to_fill(self, count: int) -> Obj:
        """``getSliceToFill`` among the unchanged slices, or a new one."""
        if count < self.max_per_slice:
            closest, target = self.max_per_slice, None
            for name in self.unchanged:
                diff = self.max_per_slice - (count + len(self.by_name[name].get("endpoints")
                                                         or []))
                if 0 <= diff < closest:
                    closest, target = diff, self.by_name[name]
            if target is not None:
                target = copy.deepcopy(target)
                self.by_name[_name(target)] = target
                return target
        return new_slice(self.service, self.ports, self.address_type)

    def _fill(self, target: Obj, remaining: list[Obj]) -> list[Obj]:
        target["endpoints"] = list(target.get("endpoints") or [])
        room = max(0, self.max_per_slice - len(target["endpoints"]))
        target["endpoints"] += remaining[:room]
        return remaining[room:]


def _desired(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
             nodes: Mapping[str, Mapping[str, Any]], address_type: str, errors: list[str]
             ) -> tuple[dict[tuple[Any, ...], dict[tuple[Any, ...], Obj]],
                        dict[tuple[Any, ...], list[Obj]]]:
    """The wanted endpoints by port set, and each port set's ports."""
    publish = bool(spec(service).get("publishNotReadyAddresses"))
    desired: dict[tuple[Any, ...], dict[tuple[Any, ...], Obj]] = {}
    desired_ports: dict[tuple[Any, ...], list[Obj]] = {}
    for pod in pods:
        if not should_pod_be_in_endpoints(pod, True):
            continue
        ports = endpoint_ports(service, pod)
        key = ports_key(ports)
        desired.setdefault(key, {})
        desired_ports.setdefault(key, ports)
        node_name = str(spec(pod).get("nodeName") or "")
        node = nodes.get(node_name)
        if node is None and not publish:
            errors.append(f"skipping Pod {meta(pod).get('name')} for Service "
                          f"{meta(service).get('namespace')}/{meta(service).get('name')}: "
                          f"Node {node_name} Not Found")
            continue
        endpoint = pod_to_endpoint(pod, node, service, address_type)
        if endpoint["addresses"]:
            desired[key][endpoint_identity(endpoint)] = endpoint
    return desired, desired_ports


@dataclass(frozen=True)
class _Inputs:
    service: Mapping[str, Any]
    pods: Sequence[Mapping[str, Any]]
    nodes: Mapping[str, Mapping[str, Any]]
    max_per_slice: int
    errors: list[str]


def _by_address_type(inputs: _Inputs, slices: list[Obj], address_type: str
                     ) -> tuple[list[Obj], list[Obj], list[Obj]]:
    """``reconcileByAddressType``: (create, update, delete)."""
    service, max_per_slice = inputs.service, inputs.max_per_slice
    create: list[Obj] = []
    update: list[Obj] = []
    delete: list[Obj] = []
    existing_by_ports: dict[tuple[Any, ...], list[Obj]] = {}
    for slice_ in slices:
        if owned_by(slice_, service):
            existing_by_ports.setdefault(ports_key(slice_.get("ports") or []), []).append(slice_)
        else:
            delete.append(slice_)
    desired, desired_ports = _desired(service, inputs.pods, inputs.nodes, address_type,
                                      inputs.errors)
    for key, endpoints in desired.items():
        c, u, d = _PortMapping(service, desired_ports[key], address_type, max_per_slice).run(
            existing_by_ports.get(key, []), endpoints)
        create += c
        update += u
        delete += d
    for key, old in existing_by_ports.items():
        if key not in desired:
            delete += old
    if len(slices) == len(delete) and not create:  # the placeholder
        placeholder = new_slice(service, [], address_type)
        if len(delete) == 1 and _is_placeholder_like(delete[0], placeholder):
            delete = []
        else:
            create.append(placeholder)
    _creates_become_updates(service, create, update, delete)
    return create, update, delete


def plan(service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
         nodes: Mapping[str, Mapping[str, Any]], existing: Sequence[Obj], *,
         max_per_slice: int = MAX_ENDPOINTS_PER_SLICE) -> Plan:
    """The slices' writes for one Service (``reconcile``): slices of an address type the
    Service no longer has are deleted, the others reconciled per address type."""
    result = Plan()
    types = address_types(service)
    by_type: dict[str, list[Obj]] = {t: [] for t in types}
    for slice_ in existing:
        if slice_.get("addressType") in by_type:
            by_type[str(slice_["addressType"])].append(slice_)
        else:
            result.delete.append(slice_)
    inputs = _Inputs(service, pods, nodes, max_per_slice, result.errors)
    for address_type in types:
        c, u, d = _by_address_type(inputs, by_type[address_type], address_type)
        result.create += c
        result.update += u
        result.delete += d
    return result


def _is_placeholder_like(slice_: Mapping[str, Any], placeholder: Mapping[str, Any]) -> bool:
    """``placeholderSliceCompare``: same namespace, labels, owners, no endpoints, no ports."""
    a, b = meta(slice_), meta(placeholder)
    refs = [(r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid"),
             bool(r.get("controller")), bool(r.get("blockOwnerDeletion")))
            for m in (a, b) for r in m.get("ownerReferences") or []]
    half = len(refs) // 2
    return (a.get("namespace") == b.get("namespace")
            and (a.get("labels") or {}) == (b.get("labels") or {})
            and refs[:half] == refs[half:] and len(refs) % 2 == 0
            and not slice_.get("endpoints") and not slice_.get("ports")
            and slice_.get("addressType") == placeholder.get("addressType"))


def _creates_become_updates(service: Mapping[str, Any], create: list[Obj], update: list[Obj],
                            delete: list[Obj]) -> None:
    """``finalize``: a slice to create takes the name of an owned slice of its address type
    that was to be deleted, and is an update of it instead."""
    i = 0
    while i < len(delete) and create:
        doomed = delete[i]
        fresh = create[-1]
        if doomed.get("addressType") == fresh.get("addressType") and owned_by(doomed, service):
            fresh["metadata"] = {**copy.deepcopy(dict(meta(doomed))),
                                 "labels": fresh["metadata"]["labels"]}
            create.pop()
            update.append(fresh)
            delete.pop(i)
        else:
            i += 1


def with_trigger_time(slice_: Obj, trigger_time: str | None) -> Obj:
    """``addTriggerTimeAnnotation``: set it, or drop it when the sync has no trigger time."""
    annotations = dict(meta(slice_).get("annotations") or {})
    if trigger_time:
        annotations[TRIGGER_TIME_ANNOTATION] = trigger_time
    else:
        annotations.pop(TRIGGER_TIME_ANNOTATION, None)
    slice_.setdefault("metadata", {})["annotations"] = annotations
    return slice_


def pod_trigger_time(pod: Mapping[str, Any]) -> str:
    """``getPodTriggerTime``: the Ready condition's lastTransitionTime ("" when none)."""
    for condition in status(pod).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return str(condition.get("lastTransitionTime") or "")
    return ""


@dataclass
class TriggerTimes:
    """``TriggerTimeTracker`` (``pkg/controller/util/endpoint``): for one sync of a Service, the
    earliest trigger time among what changed since its last sync (a pod whose Ready transition
    time moved, or the Service when new), "" when nothing did. Times are RFC 3339 texts in
    UTC as the server writes them, which order as text."""

    _states: dict[tuple[str, str], tuple[str, dict[str, str]]] = field(default_factory=dict)

    def compute(self, service: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str:
        key = (str(meta(service).get("namespace", "")), str(meta(service).get("name", "")))
        last_service, last_pods = self._states.get(key, ("", {}))
        changed: list[str] = []
        now_pods: dict[str, str] = {}
        for pod in pods:
            when = pod_trigger_time(pod)
            if not when:
                continue
            name = str(meta(pod).get("name", ""))
            now_pods[name] = when
            if last_pods.get(name) != when:
                changed.append(when)
        service_time = str(meta(service).get("creationTimestamp") or "")
        if service_time and service_time != last_service:
            changed.append(service_time)
        self._states[key] = (service_time, now_pods)
        return min(changed) if changed else ""

    def forget(self, namespace: str, name: str) -> None:
        self._states.pop((namespace, name), None)
