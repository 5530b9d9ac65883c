"""DefaultPreemption's pure decisions: victims on a node (fewest, lowest priority first, budgets
respected), the choice of node by kube's criteria, eligibility, budgets' accounting."""

from __future__ import annotations

from typing import Any

from kubewire.cluster.scheduler.plugins.filters import CycleState, filter_node
from kubewire.cluster.scheduler.plugins.fit_error import NOT_ELIGIBLE
from kubewire.cluster.scheduler.plugins.infos import NodeInfo, PodInfo, node_info, pod_info
from kubewire.cluster.scheduler.plugins.preemption import (
    NOT_ELIGIBLE_TERMINATING,
    Budget,
    Candidate,
    budget,
    eligible,
    num_candidates,
    pick_node,
    select_victims,
    split_by_budget,
)

NOW = 2_000_000_000.0


def a_pod(name: str, cpu: str = "1", priority: int = 0, node: str = "",
          labels: dict[str, str] | None = None, started: str | None = None,
          status: dict[str, Any] | None = None, **meta: Any) -> PodInfo:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"cpu": cpu}}}], "priority": priority}
    if node:
        spec["nodeName"] = node
    full_status = dict(status or {})
    if started:
        full_status["startTime"] = started
    return pod_info({"metadata": {"name": name, "namespace": "default", "uid": f"u-{name}",
                                  "labels": labels or {}, **meta},
                     "spec": spec, "status": full_status})


def a_node(name: str, cpu: str, *pods: PodInfo) -> NodeInfo:
    info = node_info({"metadata": {"name": name},
                      "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}})
    for p in pods:
        info.add_pod(p)
    return info


def fits_for(pod: PodInfo) -> Any:
    def fits(trial: NodeInfo) -> tuple[str, ...] | None:
        status = filter_node(pod, trial, CycleState())
        return None if status is None else status.reasons
    return fits


def test_fewest_victims_lowest_priority_first() -> None:
    low = a_pod("low", "1", priority=1, node="n")
    lower = a_pod("lower", "1", priority=0, node="n")
    mid = a_pod("mid", "1", priority=5, node="n")
    node = a_node("n", "3", low, lower, mid)
    pod = a_pod("hi", "1", priority=10)
    outcome = select_victims(pod, node, fits_for(pod), [], NOW)
    assert isinstance(outcome, Candidate)
    # the most important are reprieved first: only the least important pod goes
    assert [p.name for p in outcome.victims] == ["lower"]
    assert outcome.pdb_violations == 0
    # the node itself is untouched
    assert set(node.pods) == {"default/low", "default/lower", "default/mid"}
    two = a_pod("two", "2", priority=10)
    outcome = select_victims(two, node, fits_for(two), [], NOW)
    assert isinstance(outcome, Candidate)
    assert [p.name for p in outcome.victims] == ["low", "lower"]


def test_no_victims_or_no_fit_even_without_them() -> None:
    same = a_pod("same", "2", priority=10, node="n")
    node = a_node("n", "2", same)
    pod = a_pod("p", "1", priority=10)
    assert select_victims(pod, node, fits_for(pod), [], NOW) is None
    low = a_pod("low", "1", priority=0, node="m")
    small = a_node("m", "2", low, a_pod("keep", "1", priority=20, node="m"))
    big = a_pod("big", "2", priority=10)
    assert select_victims(big, small, fits_for(big), [], NOW) == ("Insufficient cpu",)


def test_budgets_keep_protected_pods_when_others_suffice() -> None:
    guarded = a_pod("guarded", "1", priority=0, node="n", labels={"app": "db"})
    free = a_pod("free", "1", priority=1, node="n", labels={"app": "web"})
    node = a_node("n", "2", guarded, free)
    pdb = budget({"metadata": {"namespace": "default"},
                  "spec": {"selector": {"matchLabels": {"app": "db"}}},
                  "status": {"disruptionsAllowed": 0}})
    pod = a_pod("hi", "1", priority=10)
    outcome = select_victims(pod, node, fits_for(pod), [pdb], NOW)
    assert isinstance(outcome, Candidate)
    # without the budget the lower-priority "guarded" would go; with it "free" goes instead
    assert [p.name for p in outcome.victims] == ["free"]
    assert outcome.pdb_violations == 0
    both = a_pod("both", "2", priority=10)
    outcome = select_victims(both, node, fits_for(both), [pdb], NOW)
    assert isinstance(outcome, Candidate)
    assert outcome.pdb_violations == 1


def test_split_by_budget_uses_up_allowance_and_skips_disrupted() -> None:
    pods = [a_pod(f"p{i}", labels={"app": "db"}) for i in range(3)]
    pdb = Budget("default", budget({"metadata": {"namespace": "default"}, "spec": {
        "selector": {"matchLabels": {"app": "db"}}}}).selector, 1, frozenset({"p0"}))
    violating, fine = split_by_budget(pods, [pdb])
    assert [p.name for p in fine] == ["p0", "p1"]  # p0 already disrupted, p1 uses the 1
    assert [p.name for p in violating] == ["p2"]
    # an empty selector and another namespace match nothing
    empty = budget({"metadata": {"namespace": "default"}, "spec": {"selector": {}}})
    other = Budget("other", pdb.selector, 0, frozenset())
    assert split_by_budget(pods, [empty, other]) == ([], pods)
    unlabeled = [a_pod("bare")]
    assert split_by_budget(unlabeled, [pdb]) == ([], unlabeled)


def cand(node: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    return Candidate(node, victims, violations)


def picked(*candidates: Candidate) -> str:
    chosen = pick_node(candidates, NOW)
    assert chosen is not None
    return chosen.node


def test_pick_node_criteria_in_order() -> None:
    p = a_pod
    # 1. fewest budget violations
    assert picked(cand("a", p("x", priority=1), violations=1), cand("b", p("y", priority=9))) \
        == "b"
    # 2. lowest highest-victim priority
    assert picked(cand("a", p("x", priority=5)),
                  cand("b", p("y", priority=3), p("z", priority=3))) == "b"
    # 3. smallest sum of priorities (each shifted by MaxInt32 + 1 as kube does)
    assert picked(cand("a", p("x", priority=3), p("y", priority=2)),
                  cand("b", p("z", priority=3), p("w", priority=1))) == "b"
    # with the shift, more victims weigh more than fewer (criterion 4 rarely decides)
    assert picked(cand("a", p("x", priority=0), p("y", priority=0)),
                  cand("b", p("z", priority=0))) == "b"
    # 5. the latest start among the highest-priority victims
    early = p("e", started="2024-01-01T00:00:00Z")
    late = p("l", started="2025-01-01T00:00:00Z")
    assert picked(cand("a", early), cand("b", late)) == "b"
    # 6. otherwise the first
    assert picked(cand("a", p("x")), cand("b", p("y"))) == "a"
    assert pick_node([], NOW) is None


def test_eligibility() -> None:
    never = pod_info({"metadata": {"name": "n", "namespace": "default"},
                      "spec": {"containers": [], "priority": 5, "preemptionPolicy": "Never"}})
    assert eligible(never, None, False) == NOT_ELIGIBLE
    pod = a_pod("hi", priority=10)
    assert eligible(pod, None, False) is None
    victim = a_pod("v", priority=0, node="n", deletionTimestamp="2026-01-01T00:00:00Z",
                   status={"conditions": [{"type": "DisruptionTarget", "status": "True",
                                           "reason": "PreemptionByScheduler"}]})
    node = a_node("n", "4", victim)
    assert eligible(pod, node, False) == NOT_ELIGIBLE_TERMINATING
    assert eligible(pod, node, True) is None  # the nominated node cannot help: try again
    # a pod deleted for another reason does not hold the preemptor back
    other = a_node("n", "4", a_pod("v", priority=0, node="n",
                                   deletionTimestamp="2026-01-01T00:00:00Z"))
    assert eligible(pod, other, False) is None


def test_num_candidates() -> None:
    assert num_candidates(3) == 3
    assert num_candidates(500) == 100
    assert num_candidates(5000) == 500
