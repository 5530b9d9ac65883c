"""kube-scheduler against a real server: Nodes created by the test (allocatable, taints,
labels), the scheduler run in the test's loop, pods bound as kube's default profile binds
them, unschedulable pods given kube's ``PodScheduled`` condition and ``FailedScheduling``
text, and retried when a node is added."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client.client import create_client
from kubewire.cluster.runtime import ClusterContext
from kubewire.cluster.scheduler import Scheduler, make_scheduler
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, get, ok

CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def node(name: str, cpu: str = "2", memory: str = "4Gi", pods: str = "110",
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name,
                         "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": {"capacity": alloc, "allocatable": alloc}}


def pod(name: str, cpu: str | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "nginx"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    labels = spec.pop("labels", None)
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "spec": {"containers": [container], **spec}}


def add_node(server: ServerThread, obj: dict[str, Any]) -> None:
    created = create(server, "/api/v1/nodes", obj)
    if not (created.get("status") or {}).get("allocatable"):
        ok(call(server, "PATCH", f"/api/v1/nodes/{obj['metadata']['name']}/status",
                {"status": obj["status"]}), 200)


def add_pod(server: ServerThread, obj: dict[str, Any]) -> dict[str, Any]:
    return create(server, "/api/v1/namespaces/default/pods", obj)


def read_pod(server: ServerThread, name: str) -> dict[str, Any]:
    return get(server, f"/api/v1/namespaces/default/pods/{name}")


async def until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Poll without blocking the loop the scheduler runs in."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def node_of(server: ServerThread, name: str) -> str:
    return str(read_pod(server, name)["spec"].get("nodeName") or "")


def scheduled_condition(server: ServerThread, name: str) -> dict[str, Any] | None:
    for cond in read_pod(server, name).get("status", {}).get("conditions") or ():
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return None


def new_events(server: ServerThread, name: str, reason: str) -> list[dict[str, Any]]:
    body = get(server, "/apis/events.k8s.io/v1/namespaces/default/events")
    return [e for e in body["items"]
            if e["regarding"].get("name") == name and e["reason"] == reason]


@pytest.fixture
async def scheduler(server: ServerThread) -> AsyncIterator[Scheduler]:
    async with await create_client(server.kubeconfig) as client:
        ctx = ClusterContext(client)
        sched = make_scheduler(ctx, None)
        # run_components checks that the scheduler stops when cancelled (it once swallowed
        # a cancellation and ran on)
        async with run_components(ctx, [sched]):
            yield sched


def three_nodes(server: ServerThread) -> None:
    add_node(server, node("control-plane", cpu="4", taints=[CP_TAINT],
                          labels={"node-role.kubernetes.io/control-plane": ""}))
    add_node(server, node("node-1", labels={"zone": "a", "disk": "ssd"}))
    add_node(server, node("node-2", labels={"zone": "b"}))


async def test_binds_pods_respecting_taints_selectors_and_resources(
        server: ServerThread, scheduler: Scheduler) -> None:
    three_nodes(server)
    add_pod(server, pod("plain", cpu="500m"))
    add_pod(server, pod("ssd", nodeSelector={"disk": "ssd"}))
    add_pod(server, pod("on-cp", tolerations=[{"key": "node-role.kubernetes.io/control-plane",
                                               "operator": "Exists"}],
                        nodeSelector={"node-role.kubernetes.io/control-plane": ""}))
    add_pod(server, pod("by-affinity", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}))
    add_pod(server, pod("other-scheduler", schedulerName="my-scheduler"))
    await until(lambda: all(node_of(server, n) for n in ("plain", "ssd", "on-cp",
                                                            "by-affinity")), what="binding")
    assert node_of(server, "plain") in ("node-1", "node-2")
    assert node_of(server, "ssd") == "node-1"
    assert node_of(server, "on-cp") == "control-plane"
    assert node_of(server, "by-affinity") == "node-2"
    cond = scheduled_condition(server, "plain")
    assert cond is not None and cond["status"] == "True"
    events = await until(lambda: new_events(server, "ssd", "Scheduled"), what="event")
    assert events[0]["note"] == "Successfully assigned default/ssd to node-1"
    assert events[0]["action"] == "Binding" and events[0]["type"] == "Normal"
    assert events[0]["reportingController"] == "default-scheduler"
    await asyncio.sleep(0.3)
    assert node_of(server, "other-scheduler") == ""  # another scheduler's pod is left alone
    assert scheduled_condition(server, "other-scheduler") is None


async def test_requests_fill_nodes_and_pod_count_limits(server: ServerThread,
                                                        scheduler: Scheduler) -> None:
    add_node(server, node("small", cpu="1", pods="3"))
    for i in range(3):
        add_pod(server, pod(f"quarter-{i}", cpu="250m"))
    await until(lambda: all(node_of(server, f"quarter-{i}") for i in range(3)), what="bound")
    add_pod(server, pod("one-too-many"))
    add_pod(server, pod("too-big", cpu="500m"))
    await until(lambda: scheduled_condition(server, "too-big"), what="condition")
    cond = await until(lambda: scheduled_condition(server, "one-too-many"), what="condition")
    assert cond["message"] == ("0/1 nodes are available: 1 Too many pods. preemption: 0/1 "
                               "nodes are available: 1 No preemption victims found for "
                               "incoming pod.")
    too_big = scheduled_condition(server, "too-big")
    assert too_big is not None
    assert too_big["message"].startswith("0/1 nodes are available: 1 Insufficient cpu, 1 Too "
                                         "many pods.")


async def test_unschedulable_pod_gets_condition_event_and_retries_on_new_node(
        server: ServerThread, scheduler: Scheduler) -> None:
    three_nodes(server)
    add_pod(server, pod("hungry", cpu="3"))
    message = ("0/3 nodes are available: 1 node(s) had untolerated taint "
               "{node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: "
               "0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
               "2 No preemption victims found for incoming pod.")
    cond = await until(lambda: scheduled_condition(server, "hungry"), what="condition")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == message
    assert cond.get("lastTransitionTime")
    events = await until(lambda: new_events(server, "hungry", "FailedScheduling"),
                         what="FailedScheduling")
    assert events[0]["note"] == message
    assert events[0]["type"] == "Warning" and events[0]["action"] == "Scheduling"
    core = get(server, "/api/v1/namespaces/default/events")["items"]
    assert any(e["involvedObject"]["name"] == "hungry" and e["reason"] == "FailedScheduling"
               and e["message"] == message for e in core)
    # kubectl shows it as kube's does
    out = await asyncio.to_thread(
        subprocess.run, ["kubectl", "--kubeconfig", str(server.kubeconfig), "describe", "pod",
                         "hungry"], capture_output=True, text=True, timeout=30)
    assert "FailedScheduling" in out.stdout and "2 Insufficient cpu" in out.stdout
    # pinned to one node by name, as the DaemonSet controller pins its pods
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}}
    add_pod(server, pod("pinned", cpu="3", affinity=pinned))
    cond = await until(lambda: scheduled_condition(server, "pinned"), what="pinned condition")
    assert cond["message"] == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) "
        "[NodeAffinity]. preemption: 0/3 nodes are available: 1 No preemption victims found "
        "for incoming pod, 2 Preemption is not helpful for scheduling.")
    add_node(server, node("big", cpu="8"))
    await until(lambda: node_of(server, "hungry") == "big", what="retry on the new node")
    assert node_of(server, "pinned") == ""
    cond = scheduled_condition(server, "hungry")
    assert cond is not None and cond["status"] == "True"


async def test_no_nodes_and_cordon_and_untaint(server: ServerThread,
                                               scheduler: Scheduler) -> None:
    add_pod(server, pod("early"))
    cond = await until(lambda: scheduled_condition(server, "early"), what="condition")
    assert cond["message"] == "no nodes available to schedule pods"
    add_node(server, node("cordoned", unschedulable=True))
    add_node(server, node("tainted", taints=[{"key": "k", "value": "v",
                                              "effect": "NoSchedule"}]))
    await until(lambda: (scheduled_condition(server, "early") or {}).get("message", "")
                .startswith("0/2"), what="new message")
    cond = scheduled_condition(server, "early")
    assert cond is not None
    assert cond["message"] == ("0/2 nodes are available: 1 node(s) had untolerated taint "
                               "{k: v}, 1 node(s) were unschedulable. preemption: 0/2 nodes "
                               "are available: 2 Preemption is not helpful for scheduling.")
    ok(call(server, "PATCH", "/api/v1/nodes/tainted", {"spec": {"taints": []}},
            headers={"Content-Type": "application/merge-patch+json"}), 200)
    await until(lambda: node_of(server, "early") == "tainted", what="bound after untaint")


async def test_pod_anti_affinity_and_topology_spread(server: ServerThread,
                                                     scheduler: Scheduler) -> None:
    for name, zone in (("n-a1", "a"), ("n-a2", "a"), ("n-b1", "b")):
        add_node(server, node(name, labels={"zone": zone}))
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}},
         "topologyKey": "kubernetes.io/hostname"}]}}
    for i in range(3):
        add_pod(server, pod(f"db-{i}", labels={"app": "db"}, affinity=anti))
    await until(lambda: all(node_of(server, f"db-{i}") for i in range(3)), what="db pods")
    assert len({node_of(server, f"db-{i}") for i in range(3)}) == 3
    add_pod(server, pod("db-3", labels={"app": "db"}, affinity=anti))
    cond = await until(lambda: scheduled_condition(server, "db-3"), what="condition")
    assert cond["message"].startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules.")
    spread = [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    for i in range(4):
        add_pod(server, pod(f"web-{i}", labels={"app": "web"},
                            topologySpreadConstraints=spread))
        await until(lambda i=i: node_of(server, f"web-{i}"), what="web pod")
    zones = [{"n-a1": "a", "n-a2": "a", "n-b1": "b"}[node_of(server, f"web-{i}")]
             for i in range(4)]
    assert sorted(zones) == ["a", "a", "b", "b"]
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}
    add_pod(server, pod("near-db", affinity=affinity))
    await until(lambda: node_of(server, "near-db"), what="near-db")
    lonely = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "nothing"}}, "topologyKey": "zone"}]}}
    add_pod(server, pod("lonely", affinity=lonely))
    cond = await until(lambda: scheduled_condition(server, "lonely"), what="condition")
    assert cond["message"].startswith(
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules.")


async def test_priority_orders_the_queue(server: ServerThread, scheduler: Scheduler) -> None:
    add_pod(server, pod("low", cpu="1500m"))  # priority 0, created first
    add_pod(server, pod("high", cpu="1500m", priorityClassName="system-cluster-critical"))
    await until(lambda: scheduled_condition(server, "low") and scheduled_condition(
        server, "high"), what="both unschedulable")
    add_node(server, node("only", cpu="2"))
    await until(lambda: node_of(server, "high") == "only", what="high first")
    await asyncio.sleep(0.3)
    assert node_of(server, "low") == ""
    low = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
           "1 No preemption victims found for incoming pod.")  # only a higher-priority pod
    await until(lambda: (scheduled_condition(server, "low") or {}).get("message") == low,
                what="low's message")
    # a pod that outranks "high" but would not fit even without it keeps the filter's reason
    add_pod(server, pod("huge", cpu="3", priorityClassName="system-node-critical"))
    cond = await until(lambda: scheduled_condition(server, "huge"), what="huge's condition")
    assert cond["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 "
                               "nodes are available: 1 Insufficient cpu.")


async def test_finished_or_deleted_pods_free_their_node(server: ServerThread,
                                                        scheduler: Scheduler) -> None:
    add_node(server, node("one", cpu="1"))
    add_pod(server, pod("first", cpu="1"))
    await until(lambda: node_of(server, "first") == "one", what="first bound")
    add_pod(server, pod("second", cpu="1"))
    add_pod(server, pod("third", cpu="1"))
    await until(lambda: scheduled_condition(server, "second")
                and scheduled_condition(server, "third"), what="both unschedulable")
    # a terminal pod leaves the scheduler's informer (status.phase!=Succeeded) and its node
    ok(call(server, "PATCH", "/api/v1/namespaces/default/pods/first/status",
            {"status": {"phase": "Succeeded"}},
            headers={"Content-Type": "application/merge-patch+json"}), 200)
    await until(lambda: node_of(server, "second") or node_of(server, "third"), what="one more")
    waiting = "third" if node_of(server, "second") else "second"
    bound = "second" if waiting == "third" else "third"
    ok(call(server, "DELETE", f"/api/v1/namespaces/default/pods/{bound}?gracePeriodSeconds=0"),
       200)
    await until(lambda: node_of(server, waiting) == "one", what="the last one after a delete")


async def test_scheduling_gates_hold_a_pod(server: ServerThread,
                                          scheduler: Scheduler) -> None:
    add_node(server, node("n"))
    add_pod(server, pod("gated", schedulingGates=[{"name": "example.com/wait"}]))
    add_pod(server, pod("later"))
    await until(lambda: node_of(server, "later") == "n", what="the later pod bound")
    assert node_of(server, "gated") == ""
    cond = scheduled_condition(server, "gated")  # the API server's, not the scheduler's
    assert cond is not None and cond["reason"] == "SchedulingGated"
    assert not new_events(server, "gated", "FailedScheduling")
