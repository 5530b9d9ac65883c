"""What a kubelet registers and reports for its Node, and its Lease (§11, §13.4 of the
controllers reference; kube's ``pkg/kubelet/nodestatus/setters.go``, ``kubelet_node_status.go``,
``pkg/kubelet/util/nodelease.go``), plus the fleet's names and addresses.

Node names: ``<prefix><i>`` (``kubewire-node-0``, ...) or kind's style (``kubewire-worker``,
``kubewire-worker2``, ...). Node IPs come from ``node_cidr`` (from ``.2``, as on kind's docker
network); each node's ``spec.podCIDR`` is the i-th ``/node_cidr_mask`` block of ``pod_cidr``
(the node IPAM controller's allocation). Pure: no I/O.
"""

from __future__ import annotations

import copy
import hashlib
import ipaddress
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubewire.names import is_qualified_name, is_valid_label_value
from kubewire.quantity import quantity_error

Obj = dict[str, Any]
KUBELET_VERSION = "v1.32.0"
LEASE_DURATION_S = 40  # kubelet nodeLeaseDurationSeconds
LEASE_NAMESPACE = "kube-node-lease"
MAX_NODES = 10_000


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """``kubewire serve --nodes N`` and friends: how many nodes, their names, size and labels.

    ``naming``: ``"index"`` (``<name_prefix><i>``) or ``"kind"`` (``<name_prefix>``,
    ``<name_prefix>2``, ...; with ``name_prefix="kubewire-worker"``). ``stages_file``: a YAML
    file of kwok ``Stage`` documents for Pods, used instead of the built-in stages."""

    count: int = 1
    name_prefix: str = "kubewire-node-"
    naming: str = "index"
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    ephemeral_storage: str = "100Gi"
    labels: Mapping[str, str] = field(default_factory=dict)
    pod_cidr: str = "10.224.0.0/12"
    node_cidr_mask: int = 24
    node_cidr: str = "172.18.0.0/16"
    stages_file: str | None = None
    lease_interval_s: float = 10.0  # renew every ¼ of the 40 s lease
    status_report_s: float = 300.0  # nodeStatusReportFrequency
    kubelet_version: str = KUBELET_VERSION

    def check(self) -> None:
        """``ValueError`` for options that cannot make a fleet."""
        if not 0 <= self.count <= MAX_NODES:
            raise ValueError(f"--nodes must be between 0 and {MAX_NODES}")
        if self.naming not in ("index", "kind"):
            raise ValueError("node naming must be 'index' or 'kind'")
        pods = ipaddress.ip_network(self.pod_cidr)
        if self.node_cidr_mask < pods.prefixlen or self.node_cidr_mask > pods.max_prefixlen - 2:
            raise ValueError(f"node CIDR mask /{self.node_cidr_mask} does not fit {pods}")
        blocks = 2 ** (self.node_cidr_mask - pods.prefixlen)
        if blocks < self.count:
            raise ValueError(f"pod CIDR {pods} holds {blocks} /{self.node_cidr_mask} node CIDRs;"
                             f" {self.count} nodes need a wider one")
        hosts = ipaddress.ip_network(self.node_cidr)
        if hosts.num_addresses - 3 < self.count:
            raise ValueError(f"node CIDR {hosts} is too small for {self.count} nodes")
        for name, value in (("cpu", self.cpu), ("memory", self.memory), ("pods", self.pods),
                            ("ephemeral-storage", self.ephemeral_storage)):
            problem = quantity_error(value)
            if problem:
                raise ValueError(f"node {name} {value!r}: {problem}")
        for key, value in self.labels.items():
            problems = is_qualified_name(key) + is_valid_label_value(value)
            if problems:
                raise ValueError(f"node label {key}={value}: {'; '.join(problems)}")


def parse_labels(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` (kubectl's ``--labels`` form) as a dict; ``ValueError`` when malformed."""
    labels = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"node label {item!r}: want key=value")
        labels[key] = value
    return labels


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One simulated node: its name, IP and pod CIDR."""

    name: str
    ip: str
    pod_cidr: str


def node_names(options: FleetOptions) -> list[str]:
    if options.naming == "kind":
        return [options.name_prefix if i == 0 else f"{options.name_prefix}{i + 1}"
                for i in range(options.count)]
    return [f"{options.name_prefix}{i}" for i in range(options.count)]


def fleet(options: FleetOptions) -> list[NodeSpec]:
    options.check()
    pods = ipaddress.ip_network(options.pod_cidr)
    hosts = ipaddress.ip_network(options.node_cidr)
    step = 2 ** (pods.max_prefixlen - options.node_cidr_mask)
    out = []
    for i, name in enumerate(node_names(options)):
        block = ipaddress.ip_network((int(pods.network_address) + i * step,
                                      options.node_cidr_mask))
        out.append(NodeSpec(name, str(hosts.network_address + 2 + i), str(block)))
    return out


def _stable_hex(name: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}/{name}".encode()).hexdigest()


def node_labels(node: NodeSpec, options: FleetOptions) -> dict[str, str]:
    return {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux", **options.labels}  # the user's labels win


def node_conditions(now: str, since: str) -> list[Obj]:
    """The four kubelet conditions, healthy, in setter order."""
    def cond(type_: str, status: str, reason: str, message: str) -> Obj:
        return {"type": type_, "status": status, "lastHeartbeatTime": now,
                "lastTransitionTime": since, "reason": reason, "message": message}

    return [cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                 "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure",
                 "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID",
                 "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")]


def node_status(node: NodeSpec, options: FleetOptions, now: str, since: str) -> Obj:
    resources = {"cpu": options.cpu, "ephemeral-storage": options.ephemeral_storage,
                 "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": options.memory,
                 "pods": options.pods}
    machine = _stable_hex(node.name, "machine")[:32]
    return {
        "capacity": dict(resources), "allocatable": dict(resources),
        "conditions": node_conditions(now, since),
        "addresses": [{"type": "InternalIP", "address": node.ip},
                      {"type": "Hostname", "address": node.name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": machine, "systemUUID": str(uuid.UUID(machine)),
            "bootID": str(uuid.UUID(_stable_hex(node.name, "boot")[:32])),
            "kernelVersion": "6.8.0-kubewire", "osImage": "Debian GNU/Linux 12 (bookworm)",
            "containerRuntimeVersion": "containerd://1.7.24",
            "kubeletVersion": options.kubelet_version,
            "kubeProxyVersion": options.kubelet_version,
            "operatingSystem": "linux", "architecture": "amd64"},
        "images": [],
        "runtimeHandlers": [{"name": "", "features": {"recursiveReadOnlyMounts": True,
                                                      "userNamespaces": True}},
                            {"name": "runc", "features": {"recursiveReadOnlyMounts": True,
                                                          "userNamespaces": True}}],
        "features": {"supplementalGroupsPolicy": True},
    }


def node_object(node: NodeSpec, options: FleetOptions, now: str) -> Obj:
    """The Node a kubelet registers (spec.podCIDR(s) as node IPAM assigns them)."""
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node.name, "labels": node_labels(node, options),
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                     "volumes.kubernetes.io/controller-managed-attach-detach":
                                         "true"}},
        "spec": {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr],
                 "providerID": f"kubewire://{node.name}"},
        "status": node_status(node, options, now, now),
    }


def lease_object(node_name: str, node_uid: str, now_micro: str) -> Obj:
    """``kube-node-lease/<node>``, owned by the Node (no controller flag)."""
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node_name, "namespace": LEASE_NAMESPACE,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                          "name": node_name, "uid": node_uid}]},
        "spec": {"holderIdentity": node_name, "leaseDurationSeconds": LEASE_DURATION_S,
                 "renewTime": now_micro},
    }


def renewed_lease(base: Mapping[str, Any], node_name: str, node_uid: str,
                  now_micro: str) -> Obj:
    """The body of a kubelet's Lease renewal (component-helpers ``lease.newLease(base)`` and
    the kubelet's ``SetNodeOwnerFunc``): a copy of the Lease as last returned (its
    resourceVersion the precondition of the PUT, its other fields as they are) with a new
    ``renewTime``, and the owner reference to the Node added when it has none."""
    lease = copy.deepcopy(dict(base))
    lease["spec"] = {**(lease.get("spec") or {}), "renewTime": now_micro}
    meta = lease["metadata"] = dict(lease.get("metadata") or {})
    if not meta.get("ownerReferences") and node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                    "uid": node_uid}]
    return lease


class IPPool:
    """Pod IPs of one node's CIDR, handed out in order from ``.2`` (``.1`` is the bridge),
    released ones reused first (kwok's ``ipPool``)."""

    def __init__(self, cidr: str) -> None:
        self.network = ipaddress.ip_network(cidr)
        self.next = int(self.network.network_address) + 2
        self.free: list[str] = []
        self.used: set[str] = set()

    def mark(self, ip: str) -> None:
        self.used.add(ip)

    def get(self) -> str:
        while self.free:
            ip = self.free.pop()
            if ip not in self.used:
                self.used.add(ip)
                return ip
        last = int(self.network.broadcast_address)
        while self.next < last:
            ip = str(ipaddress.ip_address(self.next))
            self.next += 1
            if ip not in self.used:
                self.used.add(ip)
                return ip
        raise ValueError(f"pod CIDR {self.network} is exhausted")

    def put(self, ip: str) -> None:
        if ip in self.used:
            self.used.discard(ip)
            self.free.append(ip)
