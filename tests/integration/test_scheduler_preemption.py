"""kube-scheduler's DefaultPreemption on a server running the cluster (one simulated node of
8 CPUs), driven by kubectl: a node full of low-priority pods, a high-priority pod arrives, one
victim gets ``DisruptionTarget``/``PreemptionByScheduler``, the ``Preempted`` event and is
deleted, the preemptor is nominated and runs there; a pod with ``preemptionPolicy: Never``
waits with kube's message, and does not take the space nominated for the preemptor."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kubewire.client.client import create_client
from kubewire.cluster.runtime import ClusterContext
from kubewire.cluster.scheduler import make_scheduler
from tests.integration import kubectl
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.test_scheduler import (
    add_node,
    add_pod,
    node,
    node_of,
    pod,
    read_pod,
    scheduled_condition,
    until,
)
from tests.integration.wire import call, create, ok

WAIT = "60s"
NODE = "kubewire-node-0"

CLASSES = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: mid-never}
value: 500
preemptionPolicy: Never
"""


def a_pod(name: str, cpu: str, priority_class: str, grace: int = 30) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"tier": priority_class}},
        "spec": {"priorityClassName": priority_class, "terminationGracePeriodSeconds": grace,
                 "containers": [{"name": "c", "image": "nginx",
                                 "resources": {"requests": {"cpu": cpu}}}]}})


def _until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _pod(server: ServerThread, name: str) -> dict[str, Any]:
    done = kubectl.run(server, "get", "pod", name, "-o", "json")
    return json.loads(done.stdout) if done.returncode == 0 else {}


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond["type"] == kind:
            return dict(cond)
    return {}


def _watched(out: str) -> list[tuple[str, dict[str, Any]]]:
    """``kubectl get -w --output-watch-events -o json``'s stream: (type, object) pairs."""
    decoder = json.JSONDecoder()
    seen: list[tuple[str, dict[str, Any]]] = []
    at = 0
    while True:
        while at < len(out) and out[at].isspace():
            at += 1
        if at >= len(out):
            return seen
        event, at = decoder.raw_decode(out, at)
        seen.append((event["type"], event["object"]))


def _events(server: ServerThread, reason: str) -> list[dict[str, Any]]:
    out = kubectl.ok(server, "get", "events.v1.events.k8s.io", "-o", "json")
    return [e for e in json.loads(out)["items"] if e["reason"] == reason]


def test_a_high_priority_pod_preempts_and_a_never_pod_waits(
        make_server: Callable[..., ServerThread]) -> None:
    server = make_server(cluster=True)
    kubectl.ok(server, "apply", "-f", "-", stdin=CLASSES)
    lows = ["low-0", "low-1", "low-2"]
    for name in lows:  # 7.5 of the node's 8 CPUs
        kubectl.ok(server, "create", "-f", "-", stdin=a_pod(name, "2500m", "low", grace=3))
    kubectl.ok(server, "wait", "--for=condition=Ready", "pod", "-l", "tier=low",
               f"--timeout={WAIT}")
    assert {_pod(server, n)["spec"]["nodeName"] for n in lows} == {NODE}
    # kube's victim among equals is the latest started; start times have whole seconds, and
    # two pods started within one are a tie kube's sort leaves open
    started = {n: _pod(server, n)["status"]["startTime"] for n in lows}
    latest = [n for n in lows if started[n] == max(started.values())]

    # preemptionPolicy Never: no victims, kube's message, it waits
    kubectl.ok(server, "create", "-f", "-", stdin=a_pod("never", "2", "mid-never"))
    never = _until(lambda: _condition(_pod(server, "never"), "PodScheduled"), "never's condition")
    assert never["status"] == "False" and never["reason"] == "Unschedulable"
    assert never["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: not "
                                "eligible due to preemptionPolicy=Never.")

    # the victims' updates, as a watch sees them (the kubelet deletes a victim at once)
    watch = kubectl.background(server, "get", "pods", "-l", "tier=low", "--watch-only",
                               "--output-watch-events", "-o", "json")
    time.sleep(1)  # the watch is established
    kubectl.ok(server, "create", "-f", "-", stdin=a_pod("high", "2", "high"))
    high_uid = _pod(server, "high")["metadata"]["uid"]
    kubectl.ok(server, "wait", "--for=condition=Ready", "pod/high", f"--timeout={WAIT}")
    high = _pod(server, "high")
    assert high["spec"]["nodeName"] == NODE
    assert high["status"].get("nominatedNodeName") == NODE
    # preemption nominated a node: FailedScheduling has no preemption part
    failed = [e for e in _events(server, "FailedScheduling") if e["regarding"]["name"] == "high"]
    assert [e["note"] for e in failed] == ["0/1 nodes are available: 1 Insufficient cpu."]

    # exactly one victim, the least important (same priority: the latest started)
    gone = _until(lambda: [n for n in lows if not _pod(server, n)], "the victim's deletion")
    assert len(gone) == 1 and gone[0] in latest, (gone, started)
    victim = gone[0]
    out, _ = kubectl.stop(watch)
    seen = _watched(out)
    marked = [obj for kind, obj in seen if obj["metadata"]["name"] == victim
              and kind == "MODIFIED" and _condition(obj, "DisruptionTarget")]
    assert marked, seen
    target = _condition(marked[0], "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == (
        "True", "PreemptionByScheduler",
        "default-scheduler: preempting to accommodate a higher priority pod")
    assert ("DELETED", victim) in [(k, o["metadata"]["name"]) for k, o in seen]
    assert all(o["metadata"]["name"] == victim for k, o in seen)  # the others untouched
    preempted = [e for e in _events(server, "Preempted") if e["regarding"]["name"] == victim]
    assert len(preempted) == 1
    assert preempted[0]["note"] == f"Preempted by pod {high_uid} on node {NODE}"
    assert preempted[0]["action"] == "Preempting"
    assert preempted[0]["reportingController"] == "default-scheduler"
    assert (preempted[0]["related"]["kind"], preempted[0]["related"]["name"],
            preempted[0]["related"]["uid"]) == ("Pod", "high", high_uid)
    # the survivors stay; the Never pod still waits (4.5 + 2 of 8 CPUs: no room for it)
    assert all(_pod(server, n) for n in lows if n != victim)
    assert not _pod(server, "never")["spec"].get("nodeName")


class Clock:
    """A clock the test moves: the scheduler's backoff ends only when the test says."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_the_nominated_node_is_kept_for_the_preemptor(server: ServerThread) -> None:
    """A victim without a kubelet stays terminating: the preemptor waits ("not eligible due
    to a terminating pod on the nominated node"); once the victim is gone, a lower-priority
    pod arriving while the preemptor backs off must not take the space nominated for it."""
    for name, value in (("high", 1000), ("mid", 500)):
        create(server, "/apis/scheduling.k8s.io/v1/priorityclasses",
               {"metadata": {"name": name}, "value": value, "preemptionPolicy":
                "Never" if name == "mid" else "PreemptLowerPriority"})
    add_node(server, node("n", cpu="2"))
    clock = Clock()
    async with await create_client(server.kubeconfig) as client:
        ctx = ClusterContext(client, clock=clock)
        sched = make_scheduler(ctx, None)
        async with run_components(ctx, [sched]):
            add_pod(server, pod("low", cpu="2"))
            await until(lambda: node_of(server, "low") == "n", what="low bound")
            add_pod(server, pod("high", cpu="2", priorityClassName="high"))
            await until(lambda: read_pod(server, "high")["status"].get("nominatedNodeName")
                        == "n", what="high nominated")
            low = read_pod(server, "low")
            assert low["metadata"].get("deletionTimestamp")  # graceful: no kubelet here
            assert [c["reason"] for c in low["status"]["conditions"]
                    if c["type"] == "DisruptionTarget"] == ["PreemptionByScheduler"]
            # retried while the victim terminates (a node update moves it)
            clock.now += 2
            ok(call(server, "PATCH", "/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}}),
               200)
            waiting = ("0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible "
                       "due to a terminating pod on the nominated node.")
            await until(lambda: (scheduled_condition(server, "high") or {}).get("message")
                        == waiting, what="high waits for its victim")
            ok(call(server, "DELETE", "/api/v1/namespaces/default/pods/low",
                    {"gracePeriodSeconds": 0}), 200)
            await until(lambda: "default/low" not in sched.assigned, what="low gone")
            # high backs off (the clock stands still); mid comes first
            add_pod(server, pod("mid", cpu="1", priorityClassName="mid"))
            cond = await until(lambda: scheduled_condition(server, "mid"), what="mid's turn")
            assert cond.get("message") == ("0/1 nodes are available: 1 Insufficient cpu. "
                                           "preemption: not eligible due to "
                                           "preemptionPolicy=Never.")
            assert node_of(server, "high") == ""
            clock.now += 30  # high's backoff ends: it takes its nominated node
            await until(lambda: node_of(server, "high") == "n", what="high bound")
            assert node_of(server, "mid") == ""


async def test_a_budget_steers_the_choice_of_victim(server: ServerThread) -> None:
    """Two full nodes: without budgets the node whose victim has the lower priority would be
    chosen; a PodDisruptionBudget (no disruption allowed) on that victim makes the scheduler
    preempt on the other node instead (fewest budget violations comes first)."""
    for name, value in (("ten", 10), ("high", 1000)):
        create(server, "/apis/scheduling.k8s.io/v1/priorityclasses",
               {"metadata": {"name": name}, "value": value})
    create(server, "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
           {"metadata": {"name": "db"}, "spec": {"minAvailable": 1,
                                                "selector": {"matchLabels": {"app": "db"}}}})
    add_node(server, node("a", cpu="1"))
    add_node(server, node("b", cpu="1"))
    async with await create_client(server.kubeconfig) as client:
        ctx = ClusterContext(client)
        sched = make_scheduler(ctx, None)
        async with run_components(ctx, [sched]):
            add_pod(server, pod("guarded", cpu="1", labels={"app": "db"}))  # priority 0
            add_pod(server, pod("plain", cpu="1", priorityClassName="ten", labels={"app": "x"}))
            await until(lambda: node_of(server, "guarded") and node_of(server, "plain"),
                        what="both bound")
            add_pod(server, pod("high", cpu="1", priorityClassName="high"))
            await until(lambda: read_pod(server, "high")["status"].get("nominatedNodeName"),
                        what="high nominated")
            assert read_pod(server, "plain")["metadata"].get("deletionTimestamp")
            assert not read_pod(server, "guarded")["metadata"].get("deletionTimestamp")
            assert read_pod(server, "high")["status"]["nominatedNodeName"] == node_of(
                server, "plain")
