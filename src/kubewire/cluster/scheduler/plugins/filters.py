"""The filter plugins of kube v1.32's default profile, in its order, with its reasons.

``prefilter(pod, nodes)`` computes once per scheduling attempt what the pod-to-pod plugins
need (``InterPodAffinity``'s topology counts, ``PodTopologySpread``'s per-domain counts), as
kube's PreFilter does; ``filter_node(pod, node, state)`` then runs the plugins on one node and
answers the first failing plugin's ``Status`` (kube stops at the first), or None when the node
fits. A status is ``UNRESOLVABLE`` (``UnschedulableAndUnresolvable``: removing pods cannot
help, so preemption skips the node) or ``UNSCHEDULABLE``.

Reasons and codes are kube's (``pkg/scheduler/framework/plugins/*``): NodeUnschedulable,
NodeName, TaintToleration, NodeAffinity (with ``nodeSelector``), NodePorts, NodeResourcesFit
(``Too many pods`` first, then cpu, memory, ephemeral-storage, then extended resources, every
insufficient one a reason), PodTopologySpread (``DoNotSchedule``), InterPodAffinity. The volume
plugins (VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone) and
DynamicResources are not run: kubewire's nodes have no volumes to bind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubewire.cluster.scheduler.plugins.infos import (
    CPU,
    EPHEMERAL,
    MEMORY,
    PODS,
    NamespaceLabels,
    NodeInfo,
    PodInfo,
    SpreadConstraint,
    Taint,
    has_pod_affinity,
    tolerated,
)

UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"

REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = ("node(s) didn't match pod topology spread constraints "
                       "(missing required label)")
REASON_PREFILTER_AFFINITY = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
REASON_POD_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_POD_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer for one node: code, reasons, the plugin's name."""

    code: str
    reasons: tuple[str, ...]
    plugin: str


TopologyPair = tuple[str, str]


@dataclass(slots=True)
class CycleState:
    """What PreFilter computed for one pod (kube's ``preFilterState`` of two plugins)."""

    existing_anti: dict[TopologyPair, int] = field(default_factory=dict)
    affinity_counts: dict[TopologyPair, int] = field(default_factory=dict)
    anti_counts: dict[TopologyPair, int] = field(default_factory=dict)
    spread_counts: list[dict[str, int]] = field(default_factory=list)  # per hard constraint
    spread_min: list[int] = field(default_factory=list)
    ns_labels: NamespaceLabels = field(default_factory=dict)


def prefilter(pod: PodInfo, nodes: Iterable[NodeInfo],
              ns_labels: NamespaceLabels | None = None) -> CycleState:
    """InterPodAffinity and PodTopologySpread PreFilter, over every node and its pods
    (``ns_labels``: the namespaces' labels, for terms with a ``namespaceSelector``)."""
    state = CycleState(ns_labels=ns_labels or {})
    hard = [c for c in pod.spread if c.hard]
    want_terms = bool(pod.affinity or pod.anti_affinity)
    if not hard and not want_terms:
        for node in nodes:
            if node.with_affinity:
                _existing_anti(pod, node, state)
        return state
    state.spread_counts = [{} for _ in hard]
    for node in nodes:
        if node.with_affinity:
            _existing_anti(pod, node, state)
        if want_terms:
            _incoming_terms(pod, node, state)
        if hard and _spread_eligible(pod, node, hard):
            for i, c in enumerate(hard):
                value = node.labels[c.topology_key]
                count = sum(1 for p in node.pods.values()
                            if p.namespace == pod.namespace and not p.terminating
                            and c.selector.matches(p.labels))
                counts = state.spread_counts[i]
                counts[value] = counts.get(value, 0) + count
    for i, c in enumerate(hard):
        counts = state.spread_counts[i]
        low = min(counts.values()) if counts else 0
        state.spread_min.append(0 if len(counts) < c.min_domains else low)
    return state


def _spread_eligible(pod: PodInfo, node: NodeInfo, hard: list[SpreadConstraint]) -> bool:
    if any(c.topology_key not in node.labels for c in hard):
        return False
    if any(c.honor_affinity for c in hard) and not pod.matches_node_affinity(node.labels,
                                                                            node.name):
        return False
    if any(c.honor_taints for c in hard):
        return all(tolerated(t, pod.tolerations) for t in node.hard_taints)
    return True


def _existing_anti(pod: PodInfo, node: NodeInfo, state: CycleState) -> None:
    for existing in node.pods.values():
        for term in existing.anti_affinity:
            if term.topology_key in node.labels and term.matches(pod, state.ns_labels):
                pair = (term.topology_key, node.labels[term.topology_key])
                state.existing_anti[pair] = state.existing_anti.get(pair, 0) + 1


def _incoming_terms(pod: PodInfo, node: NodeInfo, state: CycleState) -> None:
    for existing in node.pods.values():
        for terms, counts in ((pod.affinity, state.affinity_counts),
                              (pod.anti_affinity, state.anti_counts)):
            for term in terms:
                if term.topology_key in node.labels and term.matches(existing,
                                                                     state.ns_labels):
                    pair = (term.topology_key, node.labels[term.topology_key])
                    counts[pair] = counts.get(pair, 0) + 1


def _node_filters(pod: PodInfo, node: NodeInfo) -> Status | None:
    """NodeUnschedulable, NodeName, TaintToleration."""
    if node.unschedulable and not tolerated(UNSCHEDULABLE_TAINT, pod.tolerations):
        return Status(UNRESOLVABLE, (REASON_UNSCHEDULABLE,), "NodeUnschedulable")
    if pod.node_name and pod.node_name != node.name:
        return Status(UNRESOLVABLE, (REASON_NODE_NAME,), "NodeName")
    for taint in node.hard_taints:
        if not tolerated(taint, pod.tolerations):
            return Status(UNRESOLVABLE,
                          (f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}",),
                          "TaintToleration")
    return None


def filter_node(pod: PodInfo, node: NodeInfo, state: CycleState) -> Status | None:
    """Run the filters on ``node``; the first failing plugin's status, or None."""
    if node.unschedulable or node.hard_taints or pod.node_name:
        status = _node_filters(pod, node)
        if status is not None:
            return status
    if (pod.node_selector or pod.required_terms is not None) \
            and not pod.matches_node_affinity(node.labels, node.name):
        return Status(UNRESOLVABLE, (REASON_AFFINITY,), "NodeAffinity")
    if pod.host_ports and node.ports and any(
            mine.conflicts(used) for mine in pod.host_ports for used in node.ports):
        return Status(UNSCHEDULABLE, (REASON_PORTS,), "NodePorts")
    insufficient = fit_reasons(pod, node)
    if insufficient:
        return Status(UNSCHEDULABLE, insufficient, "NodeResourcesFit")
    if state.spread_counts:
        status = _spread(pod, node, state)
        if status is not None:
            return status
    if pod.affinity or pod.anti_affinity or state.existing_anti:
        return _inter_pod(pod, node, state)
    return None


def fit_reasons(pod: PodInfo, node: NodeInfo) -> tuple[str, ...]:
    """NodeResourcesFit's ``fitsRequest``: every resource the node lacks for the pod."""
    if len(node.pods) < node.alloc_pods and (pod.cpu == 0 or pod.cpu <= node.alloc_cpu - node.cpu) \
            and (pod.memory == 0 or pod.memory <= node.alloc_memory - node.memory) \
            and (pod.ephemeral == 0 or pod.ephemeral <= node.alloc_ephemeral - node.ephemeral) \
            and not pod.scalars:
        return ()  # the common case, from the attributes alone
    reasons = []
    if len(node.pods) + 1 > node.alloc_pods:
        reasons.append(REASON_TOO_MANY_PODS)
    requests = pod.requests
    if not requests:
        return tuple(reasons)
    allocatable, requested = node.allocatable, node.requested
    for name in (CPU, MEMORY, EPHEMERAL):
        want = requests.get(name, 0)
        if want > 0 and want > allocatable.get(name, 0) - requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    for name, want in requests.items():
        if name in (CPU, MEMORY, EPHEMERAL, PODS) or want == 0:
            continue
        if want > allocatable.get(name, 0) - requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return tuple(reasons)


def _spread(pod: PodInfo, node: NodeInfo, state: CycleState) -> Status | None:
    hard = [c for c in pod.spread if c.hard]
    for i, c in enumerate(hard):
        value = node.labels.get(c.topology_key)
        if value is None:
            return Status(UNRESOLVABLE, (REASON_SPREAD_LABEL,), "PodTopologySpread")
        self_match = 1 if c.selector.matches(pod.labels) else 0
        skew = state.spread_counts[i].get(value, 0) + self_match - state.spread_min[i]
        if skew > c.max_skew:
            return Status(UNSCHEDULABLE, (REASON_SPREAD,), "PodTopologySpread")
    return None


def _inter_pod(pod: PodInfo, node: NodeInfo, state: CycleState) -> Status | None:
    """InterPodAffinity's Filter, in kube's order: the pod's affinity (a pod matching its own
    terms may start a group when no pod matches), the pod's anti-affinity, existing pods'
    anti-affinity."""
    if not _satisfies_affinity(pod, node, state):
        return Status(UNRESOLVABLE, (REASON_POD_AFFINITY,), "InterPodAffinity")
    for term in pod.anti_affinity:
        here = node.labels.get(term.topology_key)
        if here is not None and state.anti_counts.get((term.topology_key, here), 0) > 0:
            return Status(UNSCHEDULABLE, (REASON_POD_ANTI_AFFINITY,), "InterPodAffinity")
    for (key, taken), count in state.existing_anti.items():
        if count > 0 and node.labels.get(key) == taken:
            return Status(UNSCHEDULABLE, (REASON_EXISTING_ANTI_AFFINITY,), "InterPodAffinity")
    return None


def _satisfies_affinity(pod: PodInfo, node: NodeInfo, state: CycleState) -> bool:
    """``satisfyPodAffinity``."""
    pods_exist = True
    for term in pod.affinity:
        value = node.labels.get(term.topology_key)
        if value is None:
            return False  # every topology label must exist on the node
        if state.affinity_counts.get((term.topology_key, value), 0) <= 0:
            pods_exist = False
    return pods_exist or (not state.affinity_counts
                          and all(term.matches(pod, state.ns_labels) for term in pod.affinity))


__all__ = ["UNRESOLVABLE", "UNSCHEDULABLE", "CycleState", "Status", "filter_node",
           "fit_reasons", "has_pod_affinity", "prefilter"]
