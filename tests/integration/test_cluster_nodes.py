"""Simulated nodes and kubelets (``kubewire.cluster.nodes``) against a real server: nodes
register with a kubelet's status and keep Leases fresh; pods bound to them go Pending → Running
→ Ready with kube's status shapes, kubelet events, pod IPs from the node's CIDR; graceful
deletion ends with the kubelet's grace-0 delete; kwok Stage files drive pods as kwok's do;
with the scheduler and the workload controllers, a Deployment rolls out onto the nodes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.deployment import make_deployment_controller
from kubewire.cluster.controllers.replicaset import make_replicaset_controller
from kubewire.cluster.nodes import FleetOptions, NodeFleet, make_fleet
from kubewire.cluster.nodes.stages import load_stages
from kubewire.cluster.runtime import ClusterContext
from kubewire.cluster.scheduler.scheduler import make_scheduler
from tests.integration import kubectl
from tests.integration.controller_helpers import components_running, run_components
from tests.integration.harness import ServerThread
from tests.integration.kubectl import needs_kubectl
from tests.integration.wire import call, create, ok

Obj = dict[str, Any]


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


def fleet_running(ctx: ClusterContext, fleet: NodeFleet,
                  ) -> contextlib.AbstractAsyncContextManager[ClusterContext]:
    """``fleet`` running once its nodes registered (at most 60 s); on exit it is stopped and
    ``ctx`` closed."""
    return run_components(ctx, [fleet], ready=fleet.registered.wait)


async def until(server: ServerThread, path: str, check: Callable[[Obj], bool],
                timeout: float = 20.0) -> Obj:
    deadline = time.monotonic() + timeout
    while True:
        response = await asyncio.to_thread(call, server, "GET", path)
        body = response.json if response.status == 200 else {}
        if response.status == 200 and check(body):
            return body
        assert time.monotonic() < deadline, (path, response.status, body)
        await asyncio.sleep(0.05)


async def until_gone(server: ServerThread, path: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (await asyncio.to_thread(call, server, "GET", path)).status != 404:
        assert time.monotonic() < deadline, path
        await asyncio.sleep(0.05)


def pod(name: str, node: str, **spec: Any) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx:1.27"}],
                     **spec}}


def conditions(obj: Obj) -> list[tuple[str, str]]:
    return [(c["type"], c["status"]) for c in obj["status"].get("conditions", ())]


async def test_nodes_register_as_kubelets_do(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    fleet = make_fleet(ctx, FleetOptions(count=2, labels={"tier": "sim"},
                                         lease_interval_s=0.5))
    async with fleet_running(ctx, fleet):
        nodes = ok(await asyncio.to_thread(call, server, "GET", "/api/v1/nodes"), 200)["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["kubewire-node-0", "kubewire-node-1"]
        node = nodes[1]
        labels = node["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == "kubewire-node-1"
        assert labels["kubernetes.io/os"] == "linux" and labels["tier"] == "sim"
        assert node["spec"]["podCIDR"] == "10.224.1.0/24"
        assert node["spec"]["podCIDRs"] == ["10.224.1.0/24"]
        status = node["status"]
        assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID"),
            ("Ready", "True", "KubeletReady")]
        assert status["addresses"] == [{"type": "InternalIP", "address": "172.18.0.3"},
                                       {"type": "Hostname", "address": "kubewire-node-1"}]
        assert status["capacity"]["pods"] == "110" and status["allocatable"]["cpu"] == "8"
        assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
        assert status["nodeInfo"]["kubeletVersion"] == "v1.32.0"
        assert status["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
        lease = ok(await asyncio.to_thread(call, server, "GET", lease_path + "kubewire-node-0"),
                   200)
        assert lease["spec"]["holderIdentity"] == "kubewire-node-0"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        owner = lease["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Node", "kubewire-node-0")
        assert owner["uid"] == nodes[0]["metadata"]["uid"]
        first = lease["spec"]["renewTime"]
        await until(server, lease_path + "kubewire-node-0",
                    lambda b: b["spec"]["renewTime"] != first, timeout=5)
        # another writer marks the node Unknown: the kubelet reports Ready again
        ok(await asyncio.to_thread(call, server, "PATCH", "/api/v1/nodes/kubewire-node-0/status",
                                   {"status": {"conditions": [{
                                       "type": "Ready", "status": "Unknown",
                                       "reason": "NodeStatusUnknown"}]}}), 200)
        await until(server, "/api/v1/nodes/kubewire-node-0",
                    lambda b: ("Ready", "True") in conditions(b), timeout=5)
        await ctx.events.drain()
        events = ok(await asyncio.to_thread(call, server, "GET",
                                            "/api/v1/namespaces/default/events"), 200)["items"]
        starting = [e for e in events if e["reason"] == "Starting"
                    and e["involvedObject"]["name"] == "kubewire-node-0"]
        assert starting and starting[0]["source"] == {"component": "kubelet",
                                                      "host": "kubewire-node-0"}
        assert starting[0]["involvedObject"]["kind"] == "Node"
        # a deleted Node stays deleted (a kubelet registers only when it starts) and its Lease
        # is no longer renewed
        ok(await asyncio.to_thread(call, server, "DELETE", "/api/v1/nodes/kubewire-node-1"), 200)
        await until(server, "/api/v1/nodes", lambda b: len(b["items"]) == 1)
        await asyncio.sleep(0.6)
        last = ok(await asyncio.to_thread(call, server, "GET", lease_path + "kubewire-node-1"),
                  200)["spec"]["renewTime"]
        await asyncio.sleep(1.5)
        assert (await asyncio.to_thread(call, server, "GET",
                                        "/api/v1/nodes/kubewire-node-1")).status == 404
        assert ok(await asyncio.to_thread(call, server, "GET", lease_path + "kubewire-node-1"),
                  200)["spec"]["renewTime"] == last


async def lease_requests(server: ServerThread) -> list[tuple[str, int]]:
    """(verb, code) of every request on Leases so far, oldest first (the request record)."""
    reply = await asyncio.to_thread(call, server, "GET", "/kubewire/requests",
                                    params={"resource": "leases"})
    return [(e["verb"], e["code"]) for e in ok(reply, 200)["items"]]


async def until_requests(server: ServerThread, check: Callable[[list[tuple[str, int]]], bool],
                         timeout: float = 10.0) -> list[tuple[str, int]]:
    deadline = time.monotonic() + timeout
    while not check(seen := await lease_requests(server)):
        assert time.monotonic() < deadline, seen
        await asyncio.sleep(0.05)
    return seen


async def test_leases_are_renewed_with_updates(server: ServerThread, client: Client) -> None:
    """kube's node lease controller: the first beat GETs (404) and creates the Lease; every
    later one PUTs the Lease it last wrote with a new renewTime, never a patch. When another
    writer changed the Lease meanwhile, the PUT answers 409 and the kubelet GETs the Lease
    and PUTs that (keeping what the other writer set)."""
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1, lease_interval_s=0.2))):
        seen = await until_requests(server, lambda s: len(s) >= 5)
        assert seen[:2] == [("get", 404), ("create", 201)]
        assert set(seen[2:]) == {("update", 200)}
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kubewire-node-0"
        bumped = ok(await asyncio.to_thread(call, server, "PATCH", path, {
            "metadata": {"labels": {"bumped": "yes"}}}), 200)
        seen = await until_requests(server, lambda s: s[-1] == ("update", 200)
                                    and ("patch", 200) in s and s.index(("patch", 200)) < len(s)
                                    - 3)
        after = seen[seen.index(("patch", 200)) + 1:]
        # (a renewal in flight when the patch landed may have gone through first)
        while after[0] == ("update", 200):
            after = after[1:]
        assert after[:3] == [("update", 409), ("get", 200), ("update", 200)], seen
        assert {v for v, _ in seen} == {"get", "create", "update", "patch"}
        lease = ok(await asyncio.to_thread(call, server, "GET", path), 200)
        assert lease["metadata"]["labels"] == {"bumped": "yes"}
        assert lease["spec"]["renewTime"] > bumped["spec"]["renewTime"]
        assert lease["spec"]["holderIdentity"] == "kubewire-node-0"
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"][0]["kind"] == "Node"


@needs_kubectl
async def test_pod_goes_pending_running_ready(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=2))):
        create(server, "/api/v1/namespaces/default/pods",
               pod("web", "kubewire-node-1", initContainers=[
                   {"name": "init", "image": "busybox"}]))
        done = await asyncio.to_thread(kubectl.run, server, "wait", "--for=condition=Ready",
                                       "pod/web", "--timeout=30s")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "pod/web condition met"
        body = ok(await asyncio.to_thread(call, server, "GET",
                                          "/api/v1/namespaces/default/pods/web"), 200)
        status = body["status"]
        assert status["phase"] == "Running"
        assert conditions(body) == [("PodReadyToStartContainers", "True"),
                                    ("Initialized", "True"), ("Ready", "True"),
                                    ("ContainersReady", "True"), ("PodScheduled", "True")]
        # Pending's reason and message were removed when Ready turned True (a two-way diff)
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert "reason" not in ready and "message" not in ready, ready
        assert status["hostIP"] == "172.18.0.3" and status["hostIPs"] == [{"ip": "172.18.0.3"}]
        assert status["podIP"] == "10.224.1.2" and status["podIPs"] == [{"ip": "10.224.1.2"}]
        assert status["startTime"] and status["qosClass"] == "BestEffort"
        (web,) = status["containerStatuses"]
        assert web["name"] == "web" and web["ready"] and web["started"]
        assert web["restartCount"] == 0 and web["lastState"] == {}
        assert web["image"] == "docker.io/library/nginx:1.27"
        assert web["imageID"].startswith("docker.io/library/nginx@sha256:")
        assert web["containerID"].startswith("containerd://")
        assert set(web["state"]) == {"running"} and web["state"]["running"]["startedAt"]
        (init,) = status["initContainerStatuses"]
        assert init["state"]["terminated"]["reason"] == "Completed"
        assert init["state"]["terminated"]["exitCode"] == 0
        await ctx.events.drain()
        events = ok(await asyncio.to_thread(call, server, "GET",
                                            "/api/v1/namespaces/default/events"), 200)["items"]
        mine = [(e["reason"], e["message"]) for e in events
                if e["involvedObject"]["name"] == "web"]
        assert ("Pulled", 'Container image "nginx:1.27" already present on machine') in mine
        assert ("Created", "Created container: web") in mine
        assert ("Started", "Started container web") in mine
        assert ("Pulling", 'Pulling image "busybox"') in mine
        source = next(e["source"] for e in events if e["reason"] == "Started")
        assert source == {"component": "kubelet", "host": "kubewire-node-1"}
        # a second pod on the node gets the next address; a pod elsewhere is left alone
        create(server, "/api/v1/namespaces/default/pods", pod("web2", "kubewire-node-1"))
        create(server, "/api/v1/namespaces/default/pods", pod("far", "elsewhere"))
        web2 = await until(server, "/api/v1/namespaces/default/pods/web2",
                           lambda b: b["status"].get("phase") == "Running")
        assert web2["status"]["podIP"] == "10.224.1.3"
        far = ok(await asyncio.to_thread(call, server, "GET",
                                         "/api/v1/namespaces/default/pods/far"), 200)
        assert far["status"]["phase"] == "Pending" and "hostIP" not in far["status"]


@needs_kubectl
async def test_graceful_delete_ends_with_the_kubelet(server: ServerThread,
                                                      client: Client) -> None:
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        create(server, "/api/v1/namespaces/default/pods", pod("doomed", "kubewire-node-0"))
        await until(server, "/api/v1/namespaces/default/pods/doomed",
                    lambda b: b["status"].get("phase") == "Running")
        watcher = kubectl.background(server, "get", "pod", "doomed", "-w", "-o",
                                     "jsonpath={.status.phase}{\"\\n\"}")
        began = time.monotonic()
        # grace 30 s: the server alone would wait it out; the kubelet ends it at once
        done = await asyncio.to_thread(kubectl.run, server, "delete", "pod", "doomed")
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - began < 10
        await asyncio.sleep(0.3)
        out, _ = kubectl.stop(watcher)
        assert "Succeeded" in out.split()
        gone = await asyncio.to_thread(call, server, "GET",
                                       "/api/v1/namespaces/default/pods/doomed")
        assert gone.status == 404
        await ctx.events.drain()
        events = ok(await asyncio.to_thread(call, server, "GET",
                                            "/api/v1/namespaces/default/events"), 200)["items"]
        assert ("Killing", "Stopping container web") in [
            (e["reason"], e["message"]) for e in events
            if e["involvedObject"]["name"] == "doomed"]


async def test_the_kubelet_deletes_a_pod_once(server: ServerThread, client: Client) -> None:
    """kube's status manager sends one grace-0 DELETE per terminated pod and then forgets it:
    not again for the MODIFIED event that grace-0 delete causes before the DELETED one, nor
    for later changes of a pod its finalizers hold."""
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        pods = "/api/v1/namespaces/default/pods/"
        create(server, pods, pod("a", "kubewire-node-0"))
        create(server, pods, pod("b", "kubewire-node-0"))
        held = pod("held", "kubewire-node-0")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        create(server, pods, held)
        for name in ("a", "b", "held"):
            await until(server, pods + name, lambda b: ("Ready", "True") in conditions(b))
            ok(await asyncio.to_thread(call, server, "DELETE", pods + name), 200)
        for name in ("a", "b"):
            await until_gone(server, pods + name)
        await until(server, pods + "held",
                    lambda b: b["metadata"].get("deletionGracePeriodSeconds") == 0)
        # changes of the held pod after the kubelet's delete: no second delete
        for i in range(3):
            ok(await asyncio.to_thread(call, server, "PATCH", pods + "held", {
                "metadata": {"labels": {"change": str(i)}}}), 200)
            await asyncio.sleep(0.2)
        ok(await asyncio.to_thread(call, server, "PATCH", pods + "held", {
            "metadata": {"finalizers": None}}), 200)
        reply = await asyncio.to_thread(call, server, "GET", "/kubewire/requests",
                                        params={"resource": "pods", "verb": "delete"})
        # the kubelet's deletes carry DeleteOptions; the test's have no body
        kubelets = [(e["name"], e["code"]) for e in ok(reply, 200)["items"]
                    if e["body_sha256"]]
        assert sorted(kubelets) == [("a", 200), ("b", 200), ("held", 200)]


async def test_a_force_deleted_pod_is_not_written(server: ServerThread,
                                                  client: Client) -> None:
    """A force delete (grace 0) removes the pod in one request, whose MODIFIED event
    (``deletionGracePeriodSeconds: 0``) comes before the DELETED one: the kubelet kills the
    containers but writes no terminal status (kube's status manager GETs first and finds
    nothing), and sends no delete of its own."""
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        pods = "/api/v1/namespaces/default/pods/"
        names = [f"f{i}" for i in range(4)]
        for name in names:
            create(server, pods, pod(name, "kubewire-node-0"))
        for name in names:
            await until(server, pods + name, lambda b: ("Ready", "True") in conditions(b))
        await asyncio.to_thread(call, server, "DELETE", "/kubewire/requests")
        for name in names:
            ok(await asyncio.to_thread(call, server, "DELETE", pods + name,
                                       {"gracePeriodSeconds": 0}), 200)
        for name in names:
            await until_gone(server, pods + name)
        await asyncio.sleep(0.5)
        reply = await asyncio.to_thread(call, server, "GET", "/kubewire/requests",
                                        params={"resource": "pods"})
        writes = [(e["verb"], e["subresource"], e["name"], e["code"])
                  for e in ok(reply, 200)["items"] if e["verb"] not in ("get", "list", "watch")]
        assert writes == [("delete", "", name, 200) for name in names]


async def test_run_once_pods_complete_or_fail(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        for name, code in (("ok", "0"), ("bad", "3")):
            body = pod(name, "kubewire-node-0", restartPolicy="Never")
            body["metadata"]["annotations"] = {"kubewire.io/run-duration": "200ms",
                                               "kubewire.io/exit-code": code}
            create(server, "/api/v1/namespaces/default/pods", body)
        done = await until(server, "/api/v1/namespaces/default/pods/ok",
                           lambda b: b["status"].get("phase") == "Succeeded")
        terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert ("Ready", "False") in conditions(done)
        ready = next(c for c in done["status"]["conditions"] if c["type"] == "Ready")
        assert ready["reason"] == "PodCompleted"
        failed = await until(server, "/api/v1/namespaces/default/pods/bad",
                             lambda b: b["status"].get("phase") == "Failed")
        terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
        # readiness failing by annotation: Running but not Ready
        body = pod("unready", "kubewire-node-0")
        body["metadata"]["annotations"] = {"kubewire.io/not-ready": "true"}
        create(server, "/api/v1/namespaces/default/pods", body)
        unready = await until(server, "/api/v1/namespaces/default/pods/unready",
                              lambda b: b["status"].get("phase") == "Running")
        assert ("Ready", "False") in conditions(unready)
        assert ("ContainersReady", "False") in conditions(unready)


# Stages in kwok's own format (kwok.x-k8s.io/v1alpha1): a Go-template status, a selector on a
# label and a jq key, a delay with jitter, an event, finalizers emptied and a grace-0 delete.
STAGES = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-up
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      sim: "yes"
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.podIP'
      operator: 'DoesNotExist'
  delay:
    durationMilliseconds: 50
    jitterDurationMilliseconds: 150
  next:
    event:
      type: Normal
      reason: Simulated
      message: up by stage
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) | Quote }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-gone
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    finalizers:
      empty: true
    delete: true
"""


async def test_stage_files_drive_pods(server: ServerThread, client: Client,
                                      tmp_path: Path) -> None:
    path = tmp_path / "stages.yaml"
    path.write_text(STAGES)
    assert [s.name for s in load_stages(STAGES)] == ["pod-up", "pod-gone"]
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1, stages_file=str(path)))):
        body = pod("staged", "kubewire-node-0")
        body["metadata"]["labels"] = {"sim": "yes"}
        body["metadata"]["finalizers"] = ["example.com/hold"]
        create(server, "/api/v1/namespaces/default/pods", body)
        create(server, "/api/v1/namespaces/default/pods", pod("unlabelled", "kubewire-node-0"))
        up = await until(server, "/api/v1/namespaces/default/pods/staged",
                         lambda b: b["status"].get("phase") == "Running")
        assert up["status"]["podIP"] == "10.224.0.2"
        assert up["status"]["hostIP"] == "172.18.0.2"
        assert up["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        other = ok(await asyncio.to_thread(call, server, "GET",
                                           "/api/v1/namespaces/default/pods/unlabelled"), 200)
        assert other["status"]["phase"] == "Pending"
        ok(await asyncio.to_thread(call, server, "DELETE",
                                   "/api/v1/namespaces/default/pods/staged"), 200)
        await until(server, "/api/v1/namespaces/default/pods", lambda b: all(
            p["metadata"]["name"] != "staged" for p in b["items"]))
        await ctx.events.drain()
        events = ok(await asyncio.to_thread(call, server, "GET",
                                            "/api/v1/namespaces/default/events"), 200)["items"]
        assert ("Simulated", "up by stage") in [(e["reason"], e["message"]) for e in events]


async def test_a_hundred_nodes_are_cheap(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    began = time.monotonic()
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=100, name_prefix="sim-"))):
        registered = time.monotonic() - began
        nodes = ok(await asyncio.to_thread(call, server, "GET", "/api/v1/nodes"), 200)["items"]
        assert len(nodes) == 100
        assert all(("Ready", "True") in conditions(n) for n in nodes)
        for i in range(0, 100, 10):
            create(server, "/api/v1/namespaces/default/pods", pod(f"p{i}", f"sim-{i}"))
        pods = await until(server, "/api/v1/namespaces/default/pods", lambda b: len(b["items"])
                           == 10 and all(("Ready", "True") in conditions(p) for p in b["items"]))
        assert {p["status"]["podIP"] for p in pods["items"]} == {
            f"10.224.{i}.2" for i in range(0, 100, 10)}
        assert registered < 30, registered


@needs_kubectl
async def test_logs_of_a_simulated_pod(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        create(server, "/api/v1/namespaces/default/pods", pod("talker", "kubewire-node-0"))
        await until(server, "/api/v1/namespaces/default/pods/talker",
                    lambda b: b["status"].get("phase") == "Running")
        done = await asyncio.to_thread(kubectl.run, server, "logs", "talker")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == ('kubewire: simulated container "web" of pod default/talker on node '
                            "kubewire-node-0")
        assert lines[1].startswith("image docker.io/library/nginx:1.27 (docker.io/library/")
        assert lines[2] == "started"
        done = await asyncio.to_thread(kubectl.run, server, "logs", "talker", "--tail=1",
                                       "--timestamps")
        (line,) = done.stdout.splitlines()
        stamp, text = line.split(" ", 1)
        assert text == "started" and stamp.endswith("Z") and len(stamp) == 30
        reply = await asyncio.to_thread(call, server, "GET",
                                        "/api/v1/namespaces/default/pods/talker/log?limitBytes=8")
        assert (reply.status, reply.body) == (200, b"kubewire")


async def test_probe_failures_by_annotation(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        path = "/api/v1/namespaces/default/pods/probed"
        create(server, "/api/v1/namespaces/default/pods", pod("probed", "kubewire-node-0"))
        await until(server, path, lambda b: ("Ready", "True") in conditions(b))
        annotate = {"metadata": {"annotations": {"kubewire.io/not-ready": "true"}}}
        ok(await asyncio.to_thread(call, server, "PATCH", path, annotate), 200)
        unready = await until(server, path, lambda b: ("Ready", "False") in conditions(b))
        assert unready["status"]["phase"] == "Running"
        (web,) = unready["status"]["containerStatuses"]
        assert web["ready"] is False and "running" in web["state"] and web["containerID"]
        clear = {"metadata": {"annotations": {"kubewire.io/not-ready": None}}}
        ok(await asyncio.to_thread(call, server, "PATCH", path, clear), 200)
        again = await until(server, path, lambda b: ("Ready", "True") in conditions(b))
        assert "reason" not in next(c for c in again["status"]["conditions"]
                                    if c["type"] == "Ready")
        failing = {"metadata": {"annotations": {"kubewire.io/liveness-fail": "true"}}}
        ok(await asyncio.to_thread(call, server, "PATCH", path, failing), 200)
        restarted = await until(server, path, lambda b: b["status"]["containerStatuses"][0][
            "restartCount"] >= 1)
        (web,) = restarted["status"]["containerStatuses"]
        assert web["lastState"]["terminated"]["exitCode"] == 137
        assert web["containerID"] != web["lastState"]["terminated"]["containerID"]
        await ctx.events.drain()
        events = ok(await asyncio.to_thread(call, server, "GET",
                                            "/api/v1/namespaces/default/events"), 200)["items"]
        seen = {(e["type"], e["reason"], e["message"]) for e in events
                if e["involvedObject"]["name"] == "probed"}
        assert ("Warning", "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 503") in seen
        assert ("Normal", "Killing", "Container web failed liveness probe, will be restarted") \
            in seen


async def test_a_failed_status_write_is_retried(server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    async with fleet_running(ctx, make_fleet(ctx, FleetOptions(count=1))):
        fault = ok(await asyncio.to_thread(call, server, "POST", "/kubewire/faults", {
            "type": "error", "verb": "patch", "resource": "pods", "namespace": "default",
            "code": 503, "count": 2}), 201)
        create(server, "/api/v1/namespaces/default/pods", pod("flaky", "kubewire-node-0"))
        running_ = await until(server, "/api/v1/namespaces/default/pods/flaky",
                               lambda b: ("Ready", "True") in conditions(b))
        assert running_["status"]["phase"] == "Running"
        faults = ok(await asyncio.to_thread(call, server, "GET", "/kubewire/faults"), 200)
        assert fault["id"] not in [f["id"] for f in faults["items"]]  # both were injected


@needs_kubectl
async def test_a_deployment_rolls_out_onto_simulated_nodes(server: ServerThread,
                                                           client: Client) -> None:
    """The issue's story with the scheduler and the workload controllers beside the fleet:
    kubectl create deployment, rollout status, wait for Ready pods, delete one."""
    ctx = ClusterContext(client)
    fleet = make_fleet(ctx, FleetOptions(count=3))
    async with fleet_running(ctx, fleet), components_running([make(ctx, None) for make in (
            make_scheduler, make_deployment_controller, make_replicaset_controller)]):
        for args in (("create", "deployment", "web", "--image=nginx", "--replicas=3"),
                     ("rollout", "status", "deploy/web", "--timeout=60s"),
                     ("wait", "--for=condition=Ready", "pod", "-l", "app=web",
                      "--timeout=60s")):
            done = await asyncio.to_thread(kubectl.run, server, *args)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        pods = ok(await asyncio.to_thread(call, server, "GET",
                                          "/api/v1/namespaces/default/pods"), 200)["items"]
        assert len(pods) == 3
        assert all(p["spec"]["nodeName"].startswith("kubewire-node-") for p in pods)
        assert all(p["status"]["podIP"].startswith("10.224.") for p in pods)
        victim = pods[0]["metadata"]["name"]
        done = await asyncio.to_thread(kubectl.run, server, "delete", "pod", victim)
        assert done.returncode == 0, done.stderr
        done = await asyncio.to_thread(kubectl.run, server, "rollout", "status", "deploy/web",
                                       "--timeout=60s")
        assert done.returncode == 0, done.stderr
