"""The node-lifecycle and taint-eviction controllers against a real server: a node whose Lease
and Ready heartbeat the test renews stays Ready; when the test stops renewing, after the grace
period its conditions turn Unknown (kube's reasons), it gets the unreachable taints, its pods
Ready False with NodeNotReady events, and a pod tolerating the taint for 2 s is marked
DisruptionTarget and deleted with the TaintManagerEviction event while one with the admission's
300 s stays; renewing again removes the taints and cancels the pending deletion. Cordoning and
condition taints (memory pressure) follow the node's spec and status."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.client.resource import PatchType
from kubewire.cluster.controllers.node_lifecycle import make_node_lifecycle_controller
from kubewire.cluster.controllers.taint_eviction import REASON, make_taint_eviction_controller
from kubewire.cluster.nodes import FleetOptions, make_fleet
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok

pytestmark = kubectl.needs_kubectl

GRACE_S = 1.5
Obj = dict[str, Any]


def micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def second_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


class Kubelet:
    """What a kubelet does for the controller to see: renew the Lease, post Ready True."""

    def __init__(self, ctx: ClusterContext, name: str) -> None:
        self.nodes = ctx.api("v1", "Node")
        self.leases = ctx.api("coordination.k8s.io/v1", "Lease", "kube-node-lease")
        self.name = name
        self.task: asyncio.Task[None] | None = None
        self.extra: list[Obj] = []

    async def post(self) -> None:
        now = second_now()
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                 "lastTransitionTime": now}
        await self.nodes.patch_status(self.name, {"status": {"conditions": [ready, *self.extra]}},
                                      type=PatchType.STRATEGIC)
        await self.leases.patch(self.name, {"spec": {"renewTime": micro_now()}},
                                type=PatchType.MERGE)

    async def _beat(self) -> None:
        while True:
            await self.post()
            await asyncio.sleep(0.3)

    def start(self) -> None:
        self.task = asyncio.create_task(self._beat())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    @contextlib.asynccontextmanager
    async def stopped_at_exit(self) -> AsyncIterator[None]:
        """The body, then the kubelet stops (before controllers entered ahead of this)."""
        try:
            yield
        finally:
            await self.stop()


async def until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """Poll ``predicate`` (a blocking call, run in a thread) until it is truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await asyncio.to_thread(predicate)
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def run_kubectl(server: ServerThread, *args: str) -> str:
    return await asyncio.to_thread(kubectl.ok, server, *args)


def node(server: ServerThread, name: str) -> Obj:
    return ok(call(server, "GET", f"/api/v1/nodes/{name}"), 200)


def taints(server: ServerThread, name: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in node(server, name).get("spec", {}).get("taints") or []}


def condition(obj: Obj, type_: str) -> Obj:
    return next(c for c in obj["status"].get("conditions") or [] if c["type"] == type_)


def pod_ready(server: ServerThread, name: str) -> str | None:
    """The pod's Ready condition status, None without one."""
    pod = ok(call(server, "GET", f"/api/v1/namespaces/default/pods/{name}"), 200)
    found = [c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == "Ready"]
    return found[0]["status"] if found else None


def events_about(server: ServerThread, name: str) -> list[tuple[str, str, str]]:
    items = ok(call(server, "GET", "/api/v1/namespaces/default/events"), 200)["items"]
    return [(e["reason"], e["message"], e["source"].get("component", ""))
            for e in items if e["involvedObject"].get("name") == name]


async def recorded(ctx: ClusterContext, server: ServerThread, name: str,
                   event: tuple[str, str, str], timeout: float = 10.0) -> None:
    """Wait until ``event`` (reason, message, component) about ``name`` was recorded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        await ctx.events.drain()
        if event in await asyncio.to_thread(events_about, server, name):
            return
        assert asyncio.get_running_loop().time() < deadline, f"no event {event} about {name}"
        await asyncio.sleep(0.1)


def bound_pod(server: ServerThread, name: str, node_name: str,
              tolerations: list[Obj] | None = None) -> Obj:
    spec: Obj = {"nodeName": node_name, "containers": [{"name": "c", "image": "nginx"}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    pod = create(server, "/api/v1/namespaces/default/pods",
                 {"metadata": {"name": name}, "spec": spec})
    now = second_now()
    ok(call(server, "PATCH", f"/api/v1/namespaces/default/pods/{name}/status", {"status": {
        "phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}}), 200)
    return pod


async def test_silent_node_is_tainted_its_pods_evicted_and_recovers(
        server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    options = {"node_monitor_grace_period": GRACE_S, "node_monitor_period": 0.2}
    lifecycle = make_node_lifecycle_controller(ctx, options)
    eviction = make_taint_eviction_controller(ctx, options)
    created = create(server, "/api/v1/nodes", {"metadata": {"name": "n1"}})
    create(server, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
        "metadata": {"name": "n1", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "n1",
             "uid": created["metadata"]["uid"]}]},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                 "renewTime": micro_now()}})
    kubelet = Kubelet(ctx, "n1")
    await kubelet.post()
    kubelet.start()
    short = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
              "effect": "NoExecute", "tolerationSeconds": 2}]
    bound_pod(server, "short", "n1", short)
    stays = bound_pod(server, "stays", "n1")
    # kubewire's DefaultTolerationSeconds admission gave the plain pod kube's 300 s
    assert {(t["key"], t.get("tolerationSeconds")) for t in stays["spec"]["tolerations"]} == {
        ("node.kubernetes.io/not-ready", 300), ("node.kubernetes.io/unreachable", 300)}
    async with run_components(ctx, [lifecycle, eviction]), kubelet.stopped_at_exit():
        # alive: Ready, no taints; cordon adds the unschedulable taint, uncordon removes it
        await asyncio.sleep(GRACE_S + 0.5)
        assert taints(server, "n1") == set()
        await run_kubectl(server, "cordon", "n1")
        await until(lambda: taints(server, "n1") == {
            ("node.kubernetes.io/unschedulable", "NoSchedule")}, what="cordon taint")
        await run_kubectl(server, "uncordon", "n1")
        await until(lambda: taints(server, "n1") == set(), what="uncordon")
        # a condition taint: memory pressure
        kubelet.extra = [{"type": "MemoryPressure", "status": "True",
                          "reason": "KubeletHasInsufficientMemory",
                          "message": "kubelet has insufficient memory available"}]
        await until(lambda: taints(server, "n1") == {
            ("node.kubernetes.io/memory-pressure", "NoSchedule")}, what="memory-pressure taint")
        kubelet.extra = [{"type": "MemoryPressure", "status": "False",
                          "reason": "KubeletHasSufficientMemory",
                          "message": "kubelet has sufficient memory available"}]
        await until(lambda: taints(server, "n1") == set(), what="memory-pressure gone")

        # the kubelet goes silent
        await kubelet.stop()
        unreachable = {("node.kubernetes.io/unreachable", "NoSchedule"),
                       ("node.kubernetes.io/unreachable", "NoExecute")}
        await until(lambda: taints(server, "n1") == unreachable, what="unreachable taints")
        ready = condition(node(server, "n1"), "Ready")
        assert (ready["status"], ready["reason"], ready["message"]) == (
            "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
        assert condition(node(server, "n1"), "MemoryPressure")["status"] == "Unknown"
        no_execute = [t for t in node(server, "n1")["spec"]["taints"]
                      if t["effect"] == "NoExecute"]
        assert no_execute[0].get("timeAdded")
        shown = await run_kubectl(server, "get", "node", "n1", "--no-headers")
        assert shown.split()[1] == "NotReady", shown
        described = await run_kubectl(server, "describe", "node", "n1")
        assert "node.kubernetes.io/unreachable:NoExecute" in described, described
        # pods marked not ready (after the taints, in the same pass), with kube's events
        await until(lambda: pod_ready(server, "stays") == "False", what="pod not ready")
        await recorded(ctx, server, "stays",
                       ("NodeNotReady", "Node is not ready", "node-lifecycle-controller"))
        await recorded(ctx, server, "n1", ("NodeNotReady", "Node n1 status is now: NodeNotReady",
                                           "node-lifecycle-controller"))

        # the 2 s pod is evicted: DisruptionTarget, then deleted; the 300 s pod stays
        def short_gone_or_going() -> Obj | bool:
            reply = call(server, "GET", "/api/v1/namespaces/default/pods/short")
            if reply.status == 404:
                return True
            body = json.loads(reply.body)
            return body if body["metadata"].get("deletionTimestamp") else False

        evicted = await until(short_gone_or_going, timeout=10, what="eviction")
        # not before its 2 s toleration (both stamps in whole seconds)
        deleted = datetime.fromisoformat(evicted["metadata"]["deletionTimestamp"])
        added = datetime.fromisoformat(no_execute[0]["timeAdded"])
        assert (deleted - added).total_seconds() - 30 >= 2, (deleted, added)
        # no kubelet confirms the deletion: the bound pod stays terminating for its 30 s
        assert isinstance(evicted, dict)
        target = condition(evicted, "DisruptionTarget")
        assert (target["status"], target["reason"], target["message"]) == (
            "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
        assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30
        await ctx.events.drain()
        assert ("TaintManagerEviction", "Marking for deletion Pod default/short",
                "taint-eviction-controller") in events_about(server, "short")
        still = ok(call(server, "GET", "/api/v1/namespaces/default/pods/stays"), 200)
        assert "deletionTimestamp" not in still["metadata"]

        # the kubelet is back: taints removed, the pending deletion cancelled
        kubelet.extra = []
        kubelet.start()
        await until(lambda: taints(server, "n1") == set(), what="recovery")
        shown = await run_kubectl(server, "get", "node", "n1", "--no-headers")
        assert shown.split()[1] == "Ready", shown
        await recorded(ctx, server, "stays", ("TaintManagerEviction",
                                              "Cancelling deletion of Pod default/stays",
                                              "taint-eviction-controller"))
        assert "deletionTimestamp" not in ok(
            call(server, "GET", "/api/v1/namespaces/default/pods/stays"), 200)["metadata"]


async def test_node_that_never_posted_status(server: ServerThread, client: Client) -> None:
    """A node whose kubelet never posted Ready turns Unknown after the startup grace period
    (NodeStatusNeverUpdated), unless its Lease is being renewed; nodes are registered and, when
deleted, removed (events)."""
    ctx = ClusterContext(client)
    lifecycle = make_node_lifecycle_controller(ctx, {"node_startup_grace_period": 1.0,
                                                     "node_monitor_period": 0.2})
    create(server, "/api/v1/nodes", {"metadata": {"name": "silent"}})
    create(server, "/api/v1/nodes", {"metadata": {"name": "leased"}})
    leases = ctx.api("coordination.k8s.io/v1", "Lease", "kube-node-lease")
    await leases.create({"metadata": {"name": "leased"}, "spec": {
        "holderIdentity": "leased", "renewTime": micro_now()}})

    async def renew() -> None:
        while True:
            await asyncio.sleep(0.3)
            await leases.patch("leased", {"spec": {"renewTime": micro_now()}},
                               type=PatchType.MERGE)

    tasks = [asyncio.create_task(lifecycle.run()), asyncio.create_task(renew())]
    try:
        unreachable = {("node.kubernetes.io/unreachable", "NoSchedule"),
                       ("node.kubernetes.io/unreachable", "NoExecute")}
        await until(lambda: taints(server, "silent") == unreachable, what="silent unreachable")
        ready = condition(node(server, "silent"), "Ready")
        assert (ready["status"], ready["reason"], ready["message"]) == (
            "Unknown", "NodeStatusNeverUpdated", "Kubelet never posted node status.")
        assert {c["type"] for c in node(server, "silent")["status"]["conditions"]} == {
            "Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}
        # the renewed Lease keeps the other node alive past the startup grace period
        await asyncio.sleep(0.6)
        assert "conditions" not in node(server, "leased").get("status", {})
        assert taints(server, "leased") == set()
        await ctx.events.drain()
        assert ("RegisteredNode", "Node silent event: Registered Node silent in Controller",
                "node-lifecycle-controller") in events_about(server, "silent")
        ok(call(server, "DELETE", "/api/v1/nodes/silent"), 200)
        removed = ("RemovingNode", "Node silent event: Removing Node silent from Controller",
                   "node-lifecycle-controller")

        await recorded(ctx, server, "silent", removed)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await ctx.close()


async def test_taint_eviction_on_a_tainted_node(server: ServerThread, client: Client) -> None:
    """``kubectl taint ... :NoExecute``: an untolerated pod goes at once, a pod tolerating it
    for 60 s waits (its deletion cancelled, with the event, when someone else deletes it), a
    pod tolerating it without tolerationSeconds and a pod on another node stay."""
    ctx = ClusterContext(client)
    eviction = make_taint_eviction_controller(ctx, None)
    for name in ("t1", "t2"):
        create(server, "/api/v1/nodes", {"metadata": {"name": name}})
    taint = {"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}
    bound_pod(server, "untolerated", "t1")
    bound_pod(server, "waits", "t1", [{**taint, "tolerationSeconds": 60}])
    bound_pod(server, "forever", "t1", [taint])
    bound_pod(server, "elsewhere", "t2")
    async with run_components(ctx, [eviction]):
        await run_kubectl(server, "taint", "node", "t1", "example.com/maintenance=now:NoExecute")

        def terminating(name: str) -> bool:
            pod = ok(call(server, "GET", f"/api/v1/namespaces/default/pods/{name}"), 200)
            return "deletionTimestamp" in pod["metadata"]

        await until(lambda: terminating("untolerated"), timeout=5, what="untolerated evicted")
        await asyncio.sleep(0.5)
        assert not any(map(terminating, ("waits", "forever", "elsewhere")))
        assert set(eviction.scheduled) == {"default/waits"}
        ok(call(server, "DELETE", "/api/v1/namespaces/default/pods/waits",
                {"gracePeriodSeconds": 0}), 200)
        await until(lambda: "default/waits" not in eviction.scheduled, what="cancelled")
        await ctx.events.drain()
        assert ("TaintManagerEviction", "Marking for deletion Pod default/untolerated",
                "taint-eviction-controller") in events_about(server, "untolerated")
        assert ("TaintManagerEviction", "Cancelling deletion of Pod default/waits",
                "taint-eviction-controller") in events_about(server, "waits")
        assert not [e for e in events_about(server, "forever") if e[0] == REASON]


async def test_simulated_kubelets_keep_their_nodes_ready(server: ServerThread,
                                                         client: Client) -> None:
    """The simulated kubelets' Leases and status keep their nodes healthy; when they stop, the
    nodes go NotReady with the unreachable taints and a pod on them is marked not ready."""
    ctx = ClusterContext(client)
    fleet = make_fleet(ctx, FleetOptions(count=2, lease_interval_s=0.3))
    lifecycle = make_node_lifecycle_controller(ctx, {"node_monitor_grace_period": GRACE_S,
                                                     "node_monitor_period": 0.2})
    kubelets = asyncio.create_task(fleet.run())
    controller = asyncio.create_task(lifecycle.run())
    try:
        await asyncio.wait_for(fleet.registered.wait(), 30)
        names = sorted(fleet.nodes)
        assert len(names) == 2
        create(server, "/api/v1/namespaces/default/pods", {
            "metadata": {"name": "on-sim"},
            "spec": {"nodeName": names[0], "containers": [{"name": "c", "image": "nginx"}]}})
        await until(lambda: pod_ready(server, "on-sim") == "True",
                    what="pod ready on a simulated node")
        await asyncio.sleep(GRACE_S * 2)
        assert all(taints(server, name) == set() for name in names)
        shown = await run_kubectl(server, "get", "nodes", "--no-headers")
        assert [line.split()[1] for line in shown.splitlines()] == ["Ready", "Ready"], shown
        kubelets.cancel()
        await asyncio.gather(kubelets, return_exceptions=True)
        unreachable = {("node.kubernetes.io/unreachable", "NoSchedule"),
                       ("node.kubernetes.io/unreachable", "NoExecute")}
        for name in names:
            await until(lambda n=name: taints(server, n) == unreachable, what=f"{name} tainted")
        await until(lambda: pod_ready(server, "on-sim") == "False", what="pod not ready")
        shown = await run_kubectl(server, "get", "nodes", "--no-headers")
        assert [line.split()[1] for line in shown.splitlines()] == ["NotReady", "NotReady"], shown
    finally:
        for task in (kubelets, controller):
            task.cancel()
        await asyncio.gather(kubelets, controller, return_exceptions=True)
        await ctx.close()

