"""The DaemonSet controller against a real server: one pod per eligible node (nodeSelector,
taints with the automatic tolerations), pods pinned by node affinity, rolling update within
maxUnavailable and with maxSurge, ControllerRevisions and the status ``kubectl rollout status``
reads. The test plays the scheduler (pods/binding) and the kubelet (Running, Ready, and
finishing graceful deletions) for the nodes it creates."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.daemonset import make_daemonset_controller
from kubewire.cluster.controllers.daemonset_rules import target_node
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl
from tests.integration.controller_helpers import run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, create, ok

Obj = dict[str, Any]
NS = "default"
DS = f"/apis/apps/v1/namespaces/{NS}/daemonsets"
PODS = f"/api/v1/namespaces/{NS}/pods"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


@pytest.fixture
async def cluster(server: ServerThread, client: Client) -> AsyncIterator[ClusterContext]:
    ctx = ClusterContext(client)
    async with run_components(ctx, [make_daemonset_controller(ctx, {})]):
        stop = asyncio.Event()
        fake = asyncio.ensure_future(scheduler_and_kubelet(server, stop))
        try:
            yield ctx
        finally:  # the fake kubelet stops before the controller
            stop.set()
            await fake


def node(name: str, labels: dict[str, str] | None = None,
         taints: list[Obj] | None = None) -> Obj:
    spec: Obj = {"taints": taints} if taints else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                   **(labels or {})}},
            "spec": spec}


def agent(image: str = "agent:1", **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}},
                                  "spec": {"containers": [{"name": "c", "image": image}],
                                           **spec.pop("pod", {})}},
                     **spec}}


def pods(server: ServerThread) -> dict[str, Obj]:
    body = ok(call(server, "GET", PODS), 200)
    return {p["metadata"]["name"]: p for p in body["items"]}


def tick(server: ServerThread) -> None:
    """One round of a scheduler and kubelets: bind, report Running+Ready, finish deletes."""
    for name, pod in pods(server).items():
        if pod["metadata"].get("deletionTimestamp"):
            call(server, "DELETE", f"{PODS}/{name}", {"gracePeriodSeconds": 0})
            continue
        if not pod["spec"].get("nodeName"):
            call(server, "POST", f"{PODS}/{name}/binding", {
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                "target": {"kind": "Node", "name": target_node(pod)}})
        elif pod.get("status", {}).get("phase") != "Running":
            call(server, "PATCH", f"{PODS}/{name}/status", {"status": {
                "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                 headers=MERGE)


async def scheduler_and_kubelet(server: ServerThread, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await asyncio.to_thread(tick, server)
        await asyncio.sleep(0.05)


async def until(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    for _ in range(int(timeout / 0.05)):
        value = await asyncio.to_thread(check)
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def status(server: ServerThread) -> Obj:
    return dict(ok(call(server, "GET", f"{DS}/agent"), 200).get("status") or {})


def by_node(server: ServerThread) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for pod in pods(server).values():
        out.setdefault(pod["spec"].get("nodeName") or target_node(pod), []).append(pod)
    return out


async def test_one_pod_per_eligible_node(server: ServerThread, cluster: ClusterContext) -> None:
    create(server, "/api/v1/nodes", node("n1", {"role": "edge"}))
    create(server, "/api/v1/nodes", node("n2", {"role": "edge"}, taints=[
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]))
    create(server, "/api/v1/nodes", node("n3", {"role": "edge"}, taints=[
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"}]))
    create(server, "/api/v1/nodes", node("n4", {"role": "core"}))
    ds = create(server, DS, agent(pod={"nodeSelector": {"role": "edge"}}))
    await until(lambda: status(server).get("numberAvailable") == 2, "2 available")
    placed = await asyncio.to_thread(by_node, server)
    assert sorted(placed) == ["n1", "n2"]  # n3's taint is not tolerated, n4 is not selected
    pod = placed["n1"][0]
    assert pod["metadata"]["generateName"] == "agent-"
    assert pod["metadata"]["labels"]["pod-template-generation"] == "1"
    hash_ = pod["metadata"]["labels"]["controller-revision-hash"]
    assert pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"] == {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    keys = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
    assert ("node.kubernetes.io/not-ready", "NoExecute") in keys
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") not in keys
    ref = pod["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("DaemonSet", ds["metadata"]["uid"],
                                                           True)
    st = status(server)
    assert st == {"currentNumberScheduled": 2, "numberMisscheduled": 0,
                  "desiredNumberScheduled": 2, "numberReady": 2, "observedGeneration": 1,
                  "updatedNumberScheduled": 2, "numberAvailable": 2}
    revs = ok(call(server, "GET", f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"),
              200)["items"]
    assert [(r["metadata"]["name"], r["revision"]) for r in revs] == [(f"agent-{hash_}", 1)]
    assert revs[0]["metadata"]["labels"] == {"app": "agent", "controller-revision-hash": hash_}
    done = await asyncio.to_thread(kubectl.run, server, "rollout", "status", "ds/agent",
                                   "--timeout=10s")
    assert done.returncode == 0, done.stderr
    assert 'daemon set "agent" successfully rolled out' in done.stdout

    # a new eligible node gets a pod; a relabelled one loses its pod
    create(server, "/api/v1/nodes", node("n5", {"role": "edge"}))
    ok(call(server, "PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"role": "core"}}},
            headers=MERGE), 200)
    await until(lambda: sorted(by_node(server)) == ["n2", "n5"], "n5 in, n1 out")
    await until(lambda: status(server).get("numberAvailable") == 2, "2 available again")
    await cluster.events.drain()
    events = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/events"), 200)["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == "agent"}
    assert {"SuccessfulCreate", "SuccessfulDelete"} <= reasons


async def test_rolling_update_respects_max_unavailable(server: ServerThread,
                                                      cluster: ClusterContext) -> None:
    for name in ("n1", "n2", "n3"):
        create(server, "/api/v1/nodes", node(name))
    create(server, DS, agent())
    await until(lambda: status(server).get("numberAvailable") == 3, "3 available")
    worst = [3]

    def rolled() -> bool:
        st = status(server)
        live = [p for p in pods(server).values() if not p["metadata"].get("deletionTimestamp")
                and p.get("status", {}).get("phase") == "Running"]
        worst[0] = min(worst[0], len(live))
        return bool(st.get("observedGeneration") == 2 and st.get("updatedNumberScheduled") == 3
                    and st.get("numberAvailable") == 3)

    ok(call(server, "PATCH", f"{DS}/agent", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "agent:2"}]}}}},
            headers={"Content-Type": "application/strategic-merge-patch+json"}), 200)
    await until(rolled, "rolled to agent:2")
    assert worst[0] >= 2  # maxUnavailable 1
    assert {p["spec"]["containers"][0]["image"] for p in pods(server).values()} == {"agent:2"}
    revs = ok(call(server, "GET", f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"),
              200)["items"]
    assert sorted(r["revision"] for r in revs) == [1, 2]
    done = await asyncio.to_thread(kubectl.run, server, "rollout", "status", "ds/agent",
                                   "--timeout=10s")
    assert done.returncode == 0, done.stderr

    # maxSurge: the new pod starts beside the old one, which goes once the new one is Ready
    ok(call(server, "PATCH", f"{DS}/agent", {"spec": {
        "updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"spec": {"containers": [{"name": "c", "image": "agent:3"}]}}}},
            headers={"Content-Type": "application/strategic-merge-patch+json"}), 200)

    def surged() -> bool:
        live = [p for p in pods(server).values() if not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in live if p.get("status", {}).get("phase") == "Running"]
        worst[0] = min(worst[0], len(ready))
        st = status(server)
        return bool(st.get("observedGeneration") == 3 and st.get("updatedNumberScheduled") == 3
                    and st.get("numberAvailable") == 3 and len(live) == 3
                    and {p["spec"]["containers"][0]["image"] for p in live} == {"agent:3"})

    worst[0] = 3
    await until(surged, "surged to agent:3")
    assert worst[0] >= 3  # maxUnavailable 0: never fewer than 3 running

    # kubectl rollout history lists the revisions; undo re-applies revision 1, renumbered
    done = await asyncio.to_thread(kubectl.run, server, "rollout", "history", "ds/agent")
    assert done.returncode == 0, done.stderr
    assert [line.split()[0] for line in done.stdout.splitlines()[2:] if line.strip()] == [
        "1", "2", "3"]
    done = await asyncio.to_thread(kubectl.run, server, "rollout", "undo", "ds/agent",
                                   "--to-revision=1")
    assert done.returncode == 0, done.stderr

    def undone() -> bool:
        live = [p for p in pods(server).values() if not p["metadata"].get("deletionTimestamp")]
        st = status(server)
        return bool(st.get("observedGeneration") == 4 and st.get("numberAvailable") == 3
                    and st.get("updatedNumberScheduled") == 3 and len(live) == 3
                    and {p["spec"]["containers"][0]["image"] for p in live} == {"agent:1"})

    await until(undone, "undone to agent:1")
    revs = ok(call(server, "GET", f"/apis/apps/v1/namespaces/{NS}/controllerrevisions"),
              200)["items"]
    assert sorted(r["revision"] for r in revs) == [2, 3, 4]


async def test_orphans_are_adopted_and_unmatched_pods_released(
        server: ServerThread, cluster: ClusterContext) -> None:
    create(server, "/api/v1/nodes", node("n1"))
    # pod-template-generation 1 makes it current for generation 1 (else the rolling update
    # would replace the adopted pod, as kube's would)
    orphan = create(server, PODS, {"metadata": {"name": "stray", "labels": {
        "app": "agent", "pod-template-generation": "1"}},
                                   "spec": {"nodeName": "n1",
                                            "containers": [{"name": "c", "image": "agent:1"}]}})
    ds = create(server, DS, agent())

    def adopted() -> bool:
        pod = pods(server).get("stray") or {}
        return bool((pod.get("metadata") or {}).get("ownerReferences"))

    await until(adopted, "stray adopted")
    await until(lambda: status(server).get("currentNumberScheduled") == 1, "1 scheduled")
    await asyncio.sleep(0.3)
    assert set(pods(server)) == {"stray"}  # n1 already has the adopted pod
    assert pods(server)["stray"]["metadata"]["ownerReferences"][0]["uid"] == \
        ds["metadata"]["uid"]
    assert orphan["metadata"]["uid"] == pods(server)["stray"]["metadata"]["uid"]

    # relabelled: released, and n1 gets a daemon pod of its own
    ok(call(server, "PATCH", f"{PODS}/stray", {"metadata": {"labels": {"app": "other"}}},
            headers=MERGE), 200)
    await until(lambda: len(pods(server)) == 2, "a new daemon pod")
    # kube drops the emptied list (omitempty); kubewire's server keeps "[]" after the SMP
    assert not pods(server)["stray"]["metadata"].get("ownerReferences")


async def test_failed_daemon_pods_are_replaced_with_backoff(server: ServerThread,
                                                           cluster: ClusterContext) -> None:
    create(server, "/api/v1/nodes", node("n1"))
    create(server, DS, agent())
    await until(lambda: status(server).get("numberAvailable") == 1, "1 available")
    first = next(iter(pods(server)))
    ok(call(server, "PATCH", f"{PODS}/{first}/status", {"status": {"phase": "Failed"}},
            headers=MERGE), 200)
    await until(lambda: first not in pods(server) and len(pods(server)) == 1, "replaced")
    await until(lambda: status(server).get("numberAvailable") == 1, "available again")
    await cluster.events.drain()
    events = ok(call(server, "GET", f"/api/v1/namespaces/{NS}/events"), 200)["items"]
    assert f"Found failed daemon pod default/{first} on node n1, will try to kill it" in {
        e["message"] for e in events if e["reason"] == "FailedDaemonPod"}
