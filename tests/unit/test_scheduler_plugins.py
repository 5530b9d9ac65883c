"""The scheduler's pure parts: requests as kube sums them, the filters' order and reasons,
FitError's text, the scores, the feasible-node count and the scheduling queue."""

from __future__ import annotations

import random
from typing import Any

from kubewire.cluster.scheduler.plugins.filters import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    CycleState,
    filter_node,
    prefilter,
)
from kubewire.cluster.scheduler.plugins.fit_error import (
    NO_VICTIMS,
    NOT_ELIGIBLE,
    NOT_HELPFUL,
    fit_error,
    truncate,
    unschedulable_message,
)
from kubewire.cluster.scheduler.plugins.infos import (
    NodeInfo,
    PodInfo,
    node_info,
    pod_info,
    pod_requests,
)
from kubewire.cluster.scheduler.plugins.scores import (
    balanced_allocation,
    least_allocated,
    resource_scores,
    score_nodes,
)
from kubewire.cluster.scheduler.queue import (
    MAX_UNSCHEDULABLE_S,
    NODE_ADD,
    POD_ASSIGNED,
    POD_DELETED,
    SchedulingQueue,
)
from kubewire.cluster.scheduler.scheduler import (
    num_feasible_nodes_to_find,
    pod_updated,
    scheduled_condition,
)


def a_pod(name: str = "p", labels: dict[str, str] | None = None, namespace: str = "default",
          node: str = "", **spec: Any) -> PodInfo:
    spec.setdefault("containers", [{"name": "c", "image": "x"}])
    if node:
        spec["nodeName"] = node
    return pod_info({"metadata": {"name": name, "namespace": namespace, "uid": name,
                                  "labels": labels or {}}, "spec": spec})


def with_cpu(cpu: str, **spec: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}


def a_node(name: str, cpu: str = "2", memory: str = "4Gi", pods: str = "110",
           labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
           unschedulable: bool = False, **extra: str) -> NodeInfo:
    return node_info({"metadata": {"name": name, "labels": labels or {}},
                      "spec": {"taints": taints or [], "unschedulable": unschedulable},
                      "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods,
                                                 **extra}}})


def test_requests_sum_containers_against_init_containers_and_add_overhead() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}},
                           {"resources": {"requests": {"cpu": "200m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "1", "memory": "10Mi"}}},
                               {"restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "50m"}}}],
            "overhead": {"cpu": "10m"}}
    # containers 300m + sidecar 50m = 350m < the first init container's 1 -> 1 + 10m
    assert pod_requests(spec) == {"cpu": 1010, "memory": 1024 ** 3}
    nonzero = pod_requests({"containers": [{}, {"resources": {"requests": {"cpu": "1"}}}]},
                           nonzero=True)
    assert nonzero == {"cpu": 1100, "memory": 2 * 200 * 1024 * 1024}


def test_filters_in_kube_order_with_its_reasons_and_codes() -> None:
    state = CycleState()
    tainted = a_node("t", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                     cpu="100m")
    status = filter_node(a_pod(**with_cpu("1")), tainted, state)
    assert status is not None
    assert status.reasons == ("node(s) had untolerated taint {k: v}",)
    assert status.code == UNRESOLVABLE
    tolerating = with_cpu("1", tolerations=[{"key": "k", "operator": "Exists"}])
    status = filter_node(a_pod(**tolerating), tainted, state)
    assert status is not None and status.reasons == ("Insufficient cpu",)
    assert status.code == UNSCHEDULABLE
    soft = a_node("s", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    assert filter_node(a_pod(), soft, state) is None
    cordoned = a_node("c", unschedulable=True)
    status = filter_node(a_pod(), cordoned, state)
    assert status is not None and status.reasons == ("node(s) were unschedulable",)
    full = a_node("f", cpu="1", memory="1Ki", pods="0", **{"example.com/gpu": "1"})
    status = filter_node(a_pod(containers=[{"resources": {"requests": {
        "cpu": "2", "memory": "1Mi", "example.com/gpu": "2"}}}]), full, state)
    assert status is not None
    assert status.reasons == ("Too many pods", "Insufficient cpu", "Insufficient memory",
                              "Insufficient example.com/gpu")


def test_node_affinity_operators() -> None:
    node = a_node("n1", labels={"zone": "a", "size": "8"})

    def fits(*expressions: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> bool:
        term: dict[str, Any] = {"matchExpressions": list(expressions)}
        if fields:
            term["matchFields"] = fields
        pod = a_pod(affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
        return filter_node(pod, node, CycleState()) is None

    assert fits({"key": "zone", "operator": "In", "values": ["a", "b"]})
    assert not fits({"key": "zone", "operator": "NotIn", "values": ["a"]})
    assert fits({"key": "gpu", "operator": "NotIn", "values": ["x"]})  # absent key matches
    assert fits({"key": "size", "operator": "Gt", "values": ["4"]})
    assert not fits({"key": "size", "operator": "Lt", "values": ["4"]})
    assert fits({"key": "gpu", "operator": "DoesNotExist"})
    assert fits(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}])
    assert not fits(fields=[{"key": "metadata.name", "operator": "In", "values": ["n2"]}])
    assert not fits()  # an empty term matches nothing
    selector = a_pod(nodeSelector={"zone": "b"})
    status = filter_node(selector, node, CycleState())
    assert status is not None and status.reasons == (
        "node(s) didn't match Pod's node affinity/selector",)


def test_node_names_from_required_match_fields() -> None:
    def names(*terms: dict[str, Any]) -> frozenset[str] | None:
        return a_pod(affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": list(terms)}}}).node_names

    def by_name(*values: str) -> dict[str, Any]:
        return {"key": "metadata.name", "operator": "In", "values": list(values)}

    assert names({"matchFields": [by_name("a", "b"), by_name("b", "c")]}) == {"b"}
    assert names({"matchFields": [by_name("a")]}, {"matchFields": [by_name("z")]}) == {"a", "z"}
    assert names({"matchFields": [by_name("a")]},
                 {"matchExpressions": [{"key": "k", "operator": "Exists"}]}) is None
    assert a_pod().node_names is None


def test_topology_spread_skew_and_min_domains() -> None:
    nodes = [a_node("a1", labels={"zone": "a"}), a_node("b1", labels={"zone": "b"}),
             a_node("x", labels={})]
    nodes[0].add_pod(a_pod("w0", {"app": "web"}, node="a1"))
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    pod = a_pod("w1", {"app": "web"}, topologySpreadConstraints=spread)
    state = prefilter(pod, nodes)
    assert state.spread_counts == [{"a": 1, "b": 0}]
    status = filter_node(pod, nodes[0], state)
    assert status is not None and status.reasons == (
        "node(s) didn't match pod topology spread constraints",)
    assert filter_node(pod, nodes[1], state) is None
    missing = filter_node(pod, nodes[2], state)
    assert missing is not None and missing.code == UNRESOLVABLE
    # minDomains 3 with two domains: the global minimum counts as 0
    spread[0]["minDomains"] = 3
    nodes[1].add_pod(a_pod("w2", {"app": "web"}, node="b1"))
    pod = a_pod("w3", {"app": "web"}, topologySpreadConstraints=spread)
    state = prefilter(pod, nodes)
    assert state.spread_min == [0]
    assert filter_node(pod, nodes[1], state) is not None


def test_inter_pod_affinity_order_and_first_pod_of_a_group() -> None:
    nodes = [a_node("n1", labels={"h": "n1"}), a_node("n2", labels={"h": "n2"})]
    term = [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "h"}]
    first = a_pod("db-0", {"app": "db"}, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": term}})
    state = prefilter(first, nodes)
    assert filter_node(first, nodes[0], state) is None  # matches its own terms
    nodes[0].add_pod(a_pod("db-0", {"app": "db"}, node="n1",
                           affinity={"podAntiAffinity": {
                               "requiredDuringSchedulingIgnoredDuringExecution": term}}))
    follower = a_pod("f", {"app": "db"}, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": term}})
    state = prefilter(follower, nodes)
    status = filter_node(follower, nodes[1], state)
    assert status is not None and status.reasons == ("node(s) didn't match pod affinity rules",)
    status = filter_node(follower, nodes[0], state)  # db-0's anti-affinity rejects it there
    assert status is not None and status.reasons == (
        "node(s) didn't satisfy existing pods anti-affinity rules",)


def test_fit_error_text_sorted_as_strings_with_preemption() -> None:
    reasons = [("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }",),
               ("Insufficient cpu",), ("Insufficient cpu",)]
    preemption = fit_error(3, [(NOT_HELPFUL,), (NO_VICTIMS,), (NO_VICTIMS,)])
    assert unschedulable_message(3, reasons, preemption) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 nodes "
        "are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims "
        "found for incoming pod.")
    assert unschedulable_message(1, [("Insufficient cpu",)], NOT_ELIGIBLE) == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never.")
    # "10 ..." sorts before "2 ...": kube sorts the strings, not the counts
    assert fit_error(12, [("b",)] * 2 + [("a",)] * 10) == "0/12 nodes are available: 10 a, 2 b."
    long = truncate("x" * 2000)
    assert len(long) == 1024 and long.endswith(" ...")


def test_scores_prefer_emptier_balanced_and_untainted_nodes() -> None:
    rng = random.Random(7)
    nodes = [a_node(f"n{i}", cpu=str(rng.randint(1, 64)), memory=f"{rng.randint(1, 64)}Gi")
             for i in range(50)]
    for i, node in enumerate(nodes):
        for j in range(rng.randint(0, 5)):
            node.add_pod(a_pod(f"p{i}-{j}", node=node.name, **with_cpu(f"{rng.randint(0, 900)}m")))
    pod = a_pod(**with_cpu("250m"))
    assert resource_scores(pod, nodes) == [least_allocated(pod, n) + balanced_allocation(pod, n)
                                           for n in nodes]
    empty, busy = a_node("empty"), a_node("busy")
    busy.add_pod(a_pod("hog", node="busy", **with_cpu("1500m")))
    soft = a_node("soft", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    scores = score_nodes(a_pod(), [empty, busy, soft], [empty, busy, soft])
    assert scores[0] > scores[1] and scores[0] > scores[2]
    preferring = a_pod(affinity={"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}})
    ssd = a_node("ssd", labels={"disk": "ssd"})
    scores = score_nodes(preferring, [empty, ssd], [empty, ssd])
    assert scores[1] - scores[0] == 2 * 100  # NodeAffinity weight 2, normalized to 100


def test_feasible_nodes_to_find() -> None:
    assert [num_feasible_nodes_to_find(n) for n in (3, 99, 100, 1000, 5000, 10000)] == [
        3, 99, 100, 420, 500, 500]


def test_scheduled_condition_written_only_when_it_changes() -> None:
    pod: dict[str, Any] = {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m",
         "lastTransitionTime": "2020-01-01T00:00:00Z"}]}}
    assert scheduled_condition(pod, "Unschedulable", "m", "now") is None
    changed = scheduled_condition(pod, "Unschedulable", "m2", "now")
    assert changed is not None and changed["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    fresh = scheduled_condition({}, "Unschedulable", "m", "now")
    assert fresh is not None and fresh["lastTransitionTime"] == "now"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_queue_orders_by_priority_then_age_and_backs_off() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(a_pod("old"))
    clock.now += 1
    queue.add(a_pod("urgent", priority=10))
    clock.now += 1
    queue.add(a_pod("young"))
    first = queue.pop()
    assert first is not None and first.info.name == "urgent"
    second = queue.pop()
    assert second is not None and second.info.name == "old"
    queue.error(second)  # 1 s backoff after the first attempt
    third = queue.pop()
    assert third is not None and third.info.name == "young"
    assert queue.pop() is None
    assert queue.next_wakeup() == 1.0
    clock.now += 1
    again = queue.pop()
    assert again is not None and again.info.name == "old" and again.attempts == 2
    assert SchedulingQueue.backoff_s(2) == 2.0 and SchedulingQueue.backoff_s(9) == 10.0


def test_unschedulable_pods_move_on_events_that_may_help() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    for name in ("tainted", "crowded"):
        queue.add(a_pod(name))
    tainted, crowded = queue.pop(), queue.pop()
    assert tainted is not None and crowded is not None
    queue.unschedulable(tainted, frozenset({"TaintToleration"}))
    queue.unschedulable(crowded, frozenset({"NodeResourcesFit"}))
    clock.now += 20  # past their backoff
    assert queue.move_all(POD_ASSIGNED) == 0  # a new pod helps neither
    queue.move_all(POD_DELETED)  # freed resources may help the crowded one
    moved = queue.pop()
    assert moved is not None and moved.info.name == "crowded"
    assert queue.pop() is None
    queue.move_all(NODE_ADD)
    moved = queue.pop()
    assert moved is not None and moved.info.name == "tainted"
    queue.unschedulable(moved, frozenset({"TaintToleration"}))
    clock.now += MAX_UNSCHEDULABLE_S + 31
    leftover = queue.pop()  # flushed after five minutes without any event
    assert leftover is not None and leftover.info.name == "tainted"
    queue.delete("default/tainted")
    assert len(queue) == 0


def test_only_spec_or_metadata_changes_requeue_an_unschedulable_pod() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    old = {"metadata": {"name": "p", "namespace": "default", "resourceVersion": "1"},
           "spec": {"containers": [{"name": "c"}]}, "status": {}}
    queue.add(pod_info(old))
    popped = queue.pop()
    assert popped is not None
    queue.unschedulable(popped, frozenset({"NodeResourcesFit"}))
    clock.now += 20
    status_only = {**old, "metadata": {**old["metadata"], "resourceVersion": "2"},
                   "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    assert not pod_updated(old, status_only)
    queue.add(pod_info(status_only), changed=pod_updated(old, status_only))
    assert queue.pop() is None  # its own condition does not make it schedulable
    relabelled = {**status_only, "metadata": {**status_only["metadata"], "labels": {"a": "b"}}}
    assert pod_updated(status_only, relabelled)
    queue.add(pod_info(relabelled), changed=True)
    assert queue.pop() is not None


def test_namespace_selector_in_affinity_terms() -> None:
    nodes = [a_node("n1", labels={"h": "n1"})]
    nodes[0].add_pod(a_pod("db", {"app": "db"}, namespace="prod", node="n1"))
    term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "h"}

    def blocked(term: dict[str, Any], ns_labels: dict[str, dict[str, str]]) -> bool:
        pod = a_pod("p", affinity={"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term]}})
        return filter_node(pod, nodes[0], prefilter(pod, nodes, ns_labels)) is not None

    labels = {"prod": {"env": "prod"}, "default": {}}
    assert not blocked(term, labels)  # the pod's own namespace only: no db there
    assert blocked({**term, "namespaces": ["prod"]}, labels)
    assert blocked({**term, "namespaceSelector": {}}, labels)  # every namespace
    assert blocked({**term, "namespaceSelector": {"matchLabels": {"env": "prod"}}}, labels)
    assert not blocked({**term, "namespaceSelector": {"matchLabels": {"env": "dev"}}}, labels)
