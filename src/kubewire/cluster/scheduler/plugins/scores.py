"""The score plugins of kube v1.32's default profile, with its weights and normalizations.

``score_nodes(pod, nodes, all_nodes)`` answers each feasible node's total: Σ weight * the
plugin's normalized score (0..100), as ``prioritizeNodes`` sums them. Plugins (weight):
TaintToleration (3: fewer untolerated ``PreferNoSchedule`` taints is better, reversed),
NodeAffinity (2: Σ weights of matched preferred terms, scaled to the best), NodeResourcesFit
(1: ``LeastAllocated`` over cpu and memory with the non-zero requests),
NodeResourcesBalancedAllocation (1: 1 - the standard deviation of cpu and memory fractions),
PodTopologySpread (2: ``ScheduleAnyway`` constraints, fewer matching pods in the domain is
better), InterPodAffinity (2: the pod's preferred terms against existing pods, scaled between
the worst and best). ImageLocality (1) is not run: simulated nodes hold no images, so kube
would give every node the same score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kubewire.cluster.scheduler.plugins.infos import (
    NamespaceLabels,
    NodeInfo,
    PodInfo,
    tolerated,
)

MAX_NODE_SCORE = 100
WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
           "NodeResourcesBalancedAllocation": 1, "PodTopologySpread": 2, "InterPodAffinity": 2}


def least_allocated(pod: PodInfo, node: NodeInfo) -> int:
    """``leastResourceScorer`` over cpu and memory (weight 1 each), non-zero requests."""
    total = weights = 0
    for capacity, requested in ((node.alloc_cpu, node.nz_cpu + pod.nz_cpu),
                                (node.alloc_memory, node.nz_memory + pod.nz_memory)):
        if capacity == 0:
            continue
        total += 0 if requested > capacity else (capacity - requested) * MAX_NODE_SCORE // capacity
        weights += 1
    return total // weights if weights else 0


def balanced_allocation(pod: PodInfo, node: NodeInfo) -> int:
    """``balancedResourceScorer``: (1 - std of the requested fractions) * 100, over cpu and
    memory (the std of two fractions is half their difference)."""
    if node.alloc_cpu == 0 or node.alloc_memory == 0:
        return MAX_NODE_SCORE  # one fraction or none: no deviation
    cpu = min((node.cpu + pod.cpu) / node.alloc_cpu, 1.0)
    memory = min((node.memory + pod.memory) / node.alloc_memory, 1.0)
    return int((1 - abs(cpu - memory) / 2) * MAX_NODE_SCORE)


def resource_scores(pod: PodInfo, nodes: Sequence[NodeInfo]) -> list[int]:
    """NodeResourcesFit (LeastAllocated) + NodeResourcesBalancedAllocation (weights 1 and 1)
    for every node: ``least_allocated`` and ``balanced_allocation`` fused into one loop (this
    runs for hundreds of nodes per pod)."""
    assert WEIGHTS["NodeResourcesFit"] == WEIGHTS["NodeResourcesBalancedAllocation"] == 1
    out = []
    p_nz_cpu, p_nz_mem, p_cpu, p_mem = pod.nz_cpu, pod.nz_memory, pod.cpu, pod.memory
    for n in nodes:
        a_cpu, a_mem = n.alloc_cpu, n.alloc_memory
        if a_cpu == 0 or a_mem == 0:
            out.append(least_allocated(pod, n) + balanced_allocation(pod, n))
            continue
        r_cpu, r_mem = n.nz_cpu + p_nz_cpu, n.nz_memory + p_nz_mem
        least = ((0 if r_cpu > a_cpu else (a_cpu - r_cpu) * MAX_NODE_SCORE // a_cpu)
                 + (0 if r_mem > a_mem else (a_mem - r_mem) * MAX_NODE_SCORE // a_mem)) // 2
        f_cpu, f_mem = (n.cpu + p_cpu) / a_cpu, (n.memory + p_mem) / a_mem
        f_cpu = 1.0 if f_cpu > 1.0 else f_cpu
        f_mem = 1.0 if f_mem > 1.0 else f_mem
        out.append(least + int((1 - abs(f_cpu - f_mem) / 2) * MAX_NODE_SCORE))
    return out


def _normalize(scores: list[int], reverse: bool = False) -> list[int]:
    """``helper.DefaultNormalizeScore``."""
    top = max(scores, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0 for _ in scores]
    out = [s * MAX_NODE_SCORE // top for s in scores]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out


def _inter_pod_raw(pod: PodInfo, node: NodeInfo, all_nodes: Sequence[NodeInfo],
                   ns_labels: NamespaceLabels) -> int:
    score = 0
    for sign, terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
        for term in terms:
            value = node.labels.get(term.topology_key)
            if value is None:
                continue
            for other in all_nodes:
                if other.labels.get(term.topology_key) != value:
                    continue
                score += sign * term.weight * sum(1 for p in other.pods.values()
                                                  if term.matches(p, ns_labels))
    return score


def _spread_raw(pod: PodInfo, node: NodeInfo, all_nodes: Sequence[NodeInfo]) -> int | None:
    """PodTopologySpread's Score for ``ScheduleAnyway`` constraints (None: node lacks a key)."""
    soft = [c for c in pod.spread if not c.hard]
    total = 0.0
    for c in soft:
        value = node.labels.get(c.topology_key)
        if value is None:
            return None
        domains = {n.labels[c.topology_key] for n in all_nodes if c.topology_key in n.labels}
        count = sum(1 for n in all_nodes if n.labels.get(c.topology_key) == value
                    for p in n.pods.values()
                    if p.namespace == pod.namespace and not p.terminating
                    and c.selector.matches(p.labels))
        weight = math.log(len(domains) + 2)
        total += count * weight + (c.max_skew - 1)
    return round(total)


def score_nodes(pod: PodInfo, nodes: Sequence[NodeInfo], all_nodes: Sequence[NodeInfo],
                ns_labels: NamespaceLabels | None = None) -> list[int]:
    """Each of ``nodes``' weighted total score for ``pod`` (``all_nodes`` for pod counts,
    ``ns_labels`` for terms with a ``namespaceSelector``)."""
    totals = resource_scores(pod, nodes)
    soft_tolerations = tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))
    if any(n.soft_taints for n in nodes):
        taint = _normalize([sum(1 for t in n.soft_taints if not tolerated(t, soft_tolerations))
                            for n in nodes], reverse=True)
    else:
        taint = [MAX_NODE_SCORE] * len(nodes)
    totals = [t + WEIGHTS["TaintToleration"] * s for t, s in zip(totals, taint, strict=True)]
    if pod.preferred_terms:
        affinity = _normalize([sum(w for w, term in pod.preferred_terms
                                   if term.matches(n.labels, n.name)) for n in nodes])
        totals = [t + WEIGHTS["NodeAffinity"] * s
                  for t, s in zip(totals, affinity, strict=True)]
    if pod.preferred_affinity or pod.preferred_anti_affinity:
        raw = [_inter_pod_raw(pod, n, all_nodes, ns_labels or {}) for n in nodes]
        low, high = min(raw), max(raw)
        spread = high - low
        totals = [t + WEIGHTS["InterPodAffinity"] * (
            (r - low) * MAX_NODE_SCORE // spread if spread else 0)
            for t, r in zip(totals, raw, strict=True)]
    if any(not c.hard for c in pod.spread):
        raws = [_spread_raw(pod, n, all_nodes) for n in nodes]
        present = [r for r in raws if r is not None]
        low, high = min(present, default=0), max(present, default=0)
        totals = [t + WEIGHTS["PodTopologySpread"] * (
            0 if r is None else MAX_NODE_SCORE if high == 0
            else MAX_NODE_SCORE * (high + low - r) // high)
            for t, r in zip(totals, raws, strict=True)]
    return totals
