"""DefaultPreemption's decisions, pure (kube v1.32 ``framework/preemption/preemption.go`` and
``plugins/defaultpreemption/default_preemption.go``).

For a pod no node fits, on each node whose filter status was ``Unschedulable`` (not
``UnschedulableAndUnresolvable``), ``select_victims`` (``SelectVictimsOnNode``) removes every
lower-priority pod, re-runs the filters (the caller's ``fits``), and when the pod then fits
reprieves as many as it can: first the victims whose eviction would violate a
PodDisruptionBudget, then the others, each group from the most important down (higher
priority, then earlier start), keeping a pod only if the preemptor still fits. ``pick_node``
(``pickOneNodeForPreemption``) chooses among the candidate nodes by kube's criteria in order:
fewest PDB violations, lowest highest-victim priority, smallest sum of victim priorities,
fewest victims, latest start of the highest-priority victims, then the first candidate.
``eligible`` is ``PodEligibleToPreemptOthers``. No I/O: the scheduler applies the outcome
(``DisruptionTarget`` condition, deletion, ``Preempted`` event, ``nominatedNodeName``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubewire.cluster.scheduler.plugins.fit_error import NOT_ELIGIBLE
from kubewire.cluster.scheduler.plugins.infos import NodeInfo, PodInfo
from kubewire.selectors.errors import SelectorError
from kubewire.selectors.labels import LabelSelector, label_selector_from_match
from kubewire.times import parse_time_or_none

MAX_INT32 = 2**31 - 1
MIN_CANDIDATE_NODES_PERCENTAGE = 10  # DefaultPreemptionArgs defaults
MIN_CANDIDATE_NODES_ABSOLUTE = 100
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PREEMPTION_REASON = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as preemption reads it."""

    namespace: str
    selector: LabelSelector | None  # None: nil, empty or invalid (matches nothing here)
    allowed: int  # status.disruptionsAllowed
    disrupted: frozenset[str]  # status.disruptedPods names


def budget(obj: Mapping[str, Any]) -> Budget:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    selector: LabelSelector | None = None
    raw = spec.get("selector")
    if isinstance(raw, Mapping):
        try:
            parsed = label_selector_from_match(raw)
        except SelectorError:
            parsed = LabelSelector()
        selector = parsed if parsed.requirements else None  # selector.Empty(): skipped
    return Budget(str(meta.get("namespace") or ""), selector,
                  int(status.get("disruptionsAllowed") or 0),
                  frozenset(str(k) for k in (status.get("disruptedPods") or {})))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node where preemption makes the pod fit, and its victims (most important first)."""

    node: str
    victims: tuple[PodInfo, ...]
    pdb_violations: int


def start_time(pod: PodInfo, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime``, or now for a pod not started."""
    moment = parse_time_or_none((pod.obj.get("status") or {}).get("startTime"))
    return moment.timestamp() if moment is not None else now


def importance_order(pods: Iterable[PodInfo], now: float) -> list[PodInfo]:
    """``MoreImportantPod`` order: higher priority first, then the earlier started."""
    return sorted(pods, key=lambda p: (-p.priority, start_time(p, now)))


def split_by_budget(pods: Sequence[PodInfo], budgets: Sequence[Budget]
                    ) -> tuple[list[PodInfo], list[PodInfo]]:
    """``filterPodsWithPDBViolation``: (violating, non-violating), order kept; each matching
    budget's allowance is used up by the pods in turn."""
    allowed = [b.allowed for b in budgets]
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i, b in enumerate(budgets):
                if b.namespace != pod.namespace or b.selector is None \
                        or not b.selector.matches(pod.labels) or pod.name in b.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else fine).append(pod)
    return violating, fine


def trial_node(node: NodeInfo) -> NodeInfo:
    """A copy of ``node`` with the same pods, to remove victims from."""
    copy = NodeInfo(node.name, node.labels, node.unschedulable, node.hard_taints,
                    node.soft_taints, node.allocatable)
    for pod in node.pods.values():
        copy.add_pod(pod)
    return copy


Fits = Callable[[NodeInfo], "tuple[str, ...] | None"]  # None: fits; else the filter reasons


def select_victims(pod: PodInfo, node: NodeInfo, fits: Fits, budgets: Sequence[Budget],
                   now: float) -> Candidate | tuple[str, ...] | None:
    """``SelectVictimsOnNode``: the candidate, the filter reasons when the pod does not fit
    even with every lower-priority pod gone, or None when there is no lower-priority pod
    ("No preemption victims found for incoming pod")."""
    potential = [p for p in node.pods.values() if p.priority < pod.priority]
    if not potential:
        return None  # before the copy: the common case on a cluster of equal priorities
    trial = trial_node(node)
    for victim in potential:
        trial.remove_pod(victim.key)
    reasons = fits(trial)
    if reasons is not None:
        return reasons
    violating, fine = split_by_budget(importance_order(potential, now), budgets)
    victims: list[PodInfo] = []
    violations = 0

    def reprieve(victim: PodInfo) -> bool:
        trial.add_pod(victim)
        if fits(trial) is None:
            return True
        trial.remove_pod(victim.key)
        victims.append(victim)
        return False

    for victim in violating:
        if not reprieve(victim):
            violations += 1
    for victim in fine:
        reprieve(victim)
    return Candidate(node.name, tuple(victims), violations)


def num_candidates(num_nodes: int) -> int:
    """``GetOffsetAndNumCandidates``'s count: 10% of the nodes, at least 100, at most all."""
    return min(max(num_nodes * MIN_CANDIDATE_NODES_PERCENTAGE // 100,
                   MIN_CANDIDATE_NODES_ABSOLUTE), num_nodes)


def _earliest_top_start(candidate: Candidate, now: float) -> float:
    """``GetEarliestPodStartTime``: the earliest start among the highest-priority victims."""
    top = max(p.priority for p in candidate.victims)
    return min(start_time(p, now) for p in candidate.victims if p.priority == top)


def pick_node(candidates: Sequence[Candidate], now: float) -> Candidate | None:
    """``pickOneNodeForPreemption`` with the default score functions, each keeping only the
    candidates with the best score; the first remaining wins."""
    if not candidates:
        return None
    for c in candidates:
        if not c.victims:
            return c  # a node needing no preemption (kube returns it at once)
    scores: tuple[Callable[[Candidate], float], ...] = (
        lambda c: -c.pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(p.priority + MAX_INT32 + 1 for p in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_top_start(c, now),
    )
    remaining = list(candidates)
    for score in scores:
        values = [score(c) for c in remaining]
        best = max(values)
        remaining = [c for c, v in zip(remaining, values, strict=True) if v == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def terminating_by_preemption(pod: PodInfo) -> bool:
    """``podTerminatingByPreemption``: being deleted, with the scheduler's DisruptionTarget."""
    if not pod.terminating:
        return False
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               and c.get("reason") == PREEMPTION_REASON
               for c in (pod.obj.get("status") or {}).get("conditions") or ()
               if isinstance(c, Mapping))


def eligible(pod: PodInfo, nominated: NodeInfo | None, nominated_unresolvable: bool
             ) -> str | None:
    """``PodEligibleToPreemptOthers``: None when the pod may preempt, else kube's reason.
    ``nominated``: the node of the pod's ``status.nominatedNodeName`` (None: none or gone)."""
    if pod.preempt_never:
        return NOT_ELIGIBLE
    if nominated is None or nominated_unresolvable:
        return None
    for other in nominated.pods.values():
        if other.priority < pod.priority and terminating_by_preemption(other):
            return NOT_ELIGIBLE_TERMINATING
    return None


def disruption_condition(scheduler_name: str, now: str) -> dict[str, Any]:
    """The condition a victim gets before its deletion."""
    return {"type": "DisruptionTarget", "status": "True", "reason": PREEMPTION_REASON,
            "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
            "lastProbeTime": None, "lastTransitionTime": now}
