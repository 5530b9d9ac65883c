"""Issue 20's stories as a user on kind would type them, on one server run as ``kubewire serve
--nodes 3`` runs (every cluster component, three simulated nodes), shared by the module: each
case works on objects of its own names.

What test_cluster_story.py does not already show: a rolling update's ``ScalingReplicaSet``
events in the order kube's arithmetic gives (3 replicas, maxSurge 25% → 1, maxUnavailable 25%
→ 0), there and back with ``rollout undo``, then ``scale``; ``kubectl delete`` of a Deployment
with each ``--cascade``; a StatefulSet coming up one ordinal at a time behind its headless
Service, whose EndpointSlice carries the Ready Pods' IPs; a DaemonSet's Pod on each node; a
CronJob firing on its schedule; and the ``kubernetes`` and ``kubernetes_asyncio`` packages'
watches of a Deployment's Pods as they are scheduled, run and become Ready.
"""

from __future__ import annotations

import asyncio
import calendar
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import kubernetes_asyncio
import pytest

from kubewire.server.context import ServerConfig
from tests.integration import kubectl
from tests.integration.harness import ServerThread
from tests.integration.wire import get, list_rv, watch

NODES = ["kubewire-node-0", "kubewire-node-1", "kubewire-node-2"]
WAIT = "60s"
STEP_TIMEOUT_S = 60.0
# EventAggregatorByReasonMessageFunc
COMBINED = "(combined from similar events): "
NS = "default"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    data_dir: Path = tmp_path_factory.mktemp("kind-sessions")
    server = ServerThread(ServerConfig(data_dir=data_dir, host="127.0.0.1", port=0,
                                       insecure_http=True, cluster=True, nodes=3)).start()
    yield server
    server.stop()


def until(check: Callable[[], Any], what: str, timeout: float = STEP_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def items(server: ServerThread, *args: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(
        kubectl.ok(server, "get", *args, "-o", "json"))["items"]
    return found


def names(server: ServerThread, *args: str) -> list[str]:
    return sorted(i["metadata"]["name"] for i in items(server, *args))


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def events_about(server: ServerThread, uid: str, reason: str) -> list[str]:
    """The messages of ``reason`` events about the object ``uid``, in the order recorded
    (kube names an event ``<object>.<UnixNano in hex>``)."""
    found = [e for e in items(server, "events", "-n", NS)
             if e["involvedObject"].get("uid") == uid and e["reason"] == reason]
    return [e["message"] for e in sorted(found, key=lambda e: e["metadata"]["name"])]


def replica_sets_by_revision(server: ServerThread, app: str) -> dict[str, str]:
    return {rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]:
            rs["metadata"]["name"] for rs in items(server, "rs", "-n", NS, "-l", f"app={app}")}


# --- Deployments ----------------------------------------------------------------------------------

def rolling(old: str, new: str) -> list[str]:
    """kube's rolling update of 3 replicas at 25%/25% (surge 1, unavailable 0): the new set
    grows by one, then the old one shrinks by one once the new Pod is available, in turn."""
    steps = [("up", new, 0, 1), ("down", old, 3, 2), ("up", new, 1, 2), ("down", old, 2, 1),
             ("up", new, 2, 3), ("down", old, 1, 0)]
    return [f"Scaled {way} replica set {rs} from {a} to {b}" for way, rs, a, b in steps]


def test_rollout_events_follow_kubes_rolling_arithmetic(cluster: ServerThread) -> None:
    kubectl.ok(cluster, "create", "deployment", "roll", "--image=nginx", "--replicas=3")
    kubectl.ok(cluster, "rollout", "status", "deploy/roll", f"--timeout={WAIT}")
    uid = get(cluster, f"/apis/apps/v1/namespaces/{NS}/deployments/roll")["metadata"]["uid"]
    strategy = json.loads(kubectl.ok(cluster, "get", "deploy/roll", "-o",
                                     "jsonpath={.spec.strategy}"))
    assert strategy == {"type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    [first] = replica_sets_by_revision(cluster, "roll").values()

    kubectl.ok(cluster, "set", "image", "deploy/roll", "nginx=nginx:1.27")
    kubectl.ok(cluster, "rollout", "status", "deploy/roll", f"--timeout={WAIT}")
    second = replica_sets_by_revision(cluster, "roll")["2"]
    expected = [f"Scaled up replica set {first} from 0 to 3", *rolling(first, second)]
    assert until(lambda: events_about(cluster, uid, "ScalingReplicaSet") == expected
                 or None, "the rollout's events", 10.0)

    kubectl.ok(cluster, "rollout", "undo", "deploy/roll")
    kubectl.ok(cluster, "rollout", "status", "deploy/roll", f"--timeout={WAIT}")
    assert replica_sets_by_revision(cluster, "roll") == {"3": first, "2": second}
    expected += rolling(second, first)
    kubectl.ok(cluster, "scale", "deploy/roll", "--replicas=5")
    kubectl.ok(cluster, "rollout", "status", "deploy/roll", f"--timeout={WAIT}")
    expected.append(f"Scaled up replica set {first} from 3 to 5")
    # client-go's EventCorrelator (as on kind): from the tenth distinct message about one object
    # and reason within ten minutes, the events are one, counted up, saying the latest message
    combined = [*expected[:9], COMBINED + expected[-1]]
    until(lambda: events_about(cluster, uid, "ScalingReplicaSet") == combined,
          "the undo's and the scale's events", 10.0)
    kubectl.ok(cluster, "wait", "--for=condition=Ready", "pod", "-l", "app=roll",
               f"--timeout={WAIT}")
    pods = items(cluster, "pods", "-l", "app=roll")
    assert len(pods) == 5 and all(p["metadata"]["ownerReferences"][0]["name"] == first
                                  for p in pods)
    kubectl.ok(cluster, "delete", "deploy/roll")


def deployment_up(server: ServerThread, name: str) -> str:
    kubectl.ok(server, "create", "deployment", name, "--image=nginx", "--replicas=2")
    kubectl.ok(server, "rollout", "status", f"deploy/{name}", f"--timeout={WAIT}")
    [rs] = names(server, "rs", "-l", f"app={name}")
    return rs


def test_delete_cascade_background(cluster: ServerThread) -> None:
    deployment_up(cluster, "gc-bg")
    kubectl.ok(cluster, "delete", "deploy/gc-bg", "--cascade=background")
    until(lambda: not names(cluster, "rs", "-l", "app=gc-bg")
          and not names(cluster, "pods", "-l", "app=gc-bg"), "the dependents' collection")


def test_delete_cascade_orphan_keeps_the_replica_set_and_its_pods(cluster: ServerThread) -> None:
    rs = deployment_up(cluster, "gc-orphan")
    pods = names(cluster, "pods", "-l", "app=gc-orphan")
    kubectl.ok(cluster, "delete", "deploy/gc-orphan", "--cascade=orphan")
    assert names(cluster, "deploy", "-l", "app=gc-orphan") == []
    time.sleep(1.0)  # a collector that would delete them has had the time to
    [kept] = items(cluster, "rs", "-l", "app=gc-orphan")
    assert kept["metadata"]["name"] == rs
    assert "ownerReferences" not in kept["metadata"]
    assert kept["status"]["readyReplicas"] == 2
    left = items(cluster, "pods", "-l", "app=gc-orphan")
    assert sorted(p["metadata"]["name"] for p in left) == pods
    assert all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in left)
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in left} == {rs}
    kubectl.ok(cluster, "delete", "rs", rs)


def test_delete_cascade_foreground_shows_its_finalizer(cluster: ServerThread) -> None:
    rs = deployment_up(cluster, "gc-fg")
    path = f"/apis/apps/v1/namespaces/{NS}/deployments"
    start = list_rv(cluster, path)
    with watch(cluster, path, resourceVersion=start,
               fieldSelector="metadata.name=gc-fg") as stream:
        kubectl.ok(cluster, "delete", "deploy/gc-fg", "--cascade=foreground")
        # kubectl waited for the Deployment to go: its dependents went first.
        assert names(cluster, "rs", "-l", "app=gc-fg") == []
        assert names(cluster, "pods", "-l", "app=gc-fg") == []
        events = stream.events_until(lambda e: e["type"] == "DELETED", STEP_TIMEOUT_S)
    # Marked with the finalizer (status writes go on while it waits), then gone: the DELETED
    # object is the last one stored, the finalizer still in it (the collector's write that
    # empties the finalizers deletes it).
    marked = [e for e in events if e["object"]["metadata"].get("deletionTimestamp")]
    assert [e["type"] for e in events[-len(marked):]] == [
        *["MODIFIED"] * (len(marked) - 1), "DELETED"]
    assert len(marked) >= 2
    assert all(e["object"]["metadata"].get("finalizers") == ["foregroundDeletion"]
               for e in marked)
    assert rs not in names(cluster, "rs")


# --- StatefulSet, DaemonSet, CronJob --------------------------------------------------------------

STATEFUL = """
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 5432, name: pg}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: pg, image: "postgres:17"}]}
"""


def test_statefulset_comes_up_in_order_behind_its_service(cluster: ServerThread) -> None:
    path = f"/api/v1/namespaces/{NS}/pods"
    with watch(cluster, path, resourceVersion=list_rv(cluster, path),
               labelSelector="app=db") as stream:
        kubectl.ok(cluster, "apply", "-f", "-", stdin=STATEFUL)
        kubectl.ok(cluster, "rollout", "status", "sts/db", f"--timeout={WAIT}")
        events = stream.events_until(
            lambda e: e["object"]["metadata"]["name"] == "db-2" and ready(e["object"]),
            STEP_TIMEOUT_S)
    steps = [(e["type"], e["object"]["metadata"]["name"], ready(e["object"])) for e in events]
    created = [name for kind, name, _ in steps if kind == "ADDED"]
    assert created == ["db-0", "db-1", "db-2"]
    for ordinal in (1, 2):  # each Pod is made once the one before it is Ready
        made = steps.index(("ADDED", f"db-{ordinal}", False))
        became_ready = steps.index(next(s for s in steps if s[1] == f"db-{ordinal - 1}"
                                        and s[2]))
        assert became_ready < made, steps

    pods = {p["metadata"]["name"]: p for p in items(cluster, "pods", "-l", "app=db")}
    assert {p["spec"]["hostname"] for p in pods.values()} == set(pods)
    assert {p["spec"]["subdomain"] for p in pods.values()} == {"db"}

    def serving() -> dict[str, Any] | None:
        [slice_] = items(cluster, "endpointslices", "-l", "kubernetes.io/service-name=db")
        found: list[dict[str, Any]] = slice_.get("endpoints") or []
        return slice_ if len(found) == 3 and all(
            e["conditions"].get("ready") for e in found) else None

    slice_ = until(serving, "three ready endpoints")
    assert "service.kubernetes.io/headless" in slice_["metadata"]["labels"]
    assert slice_["addressType"] == "IPv4"
    endpoints = slice_["endpoints"]
    assert {e["targetRef"]["name"]: e["addresses"] for e in endpoints} == {
        name: [p["status"]["podIP"]] for name, p in pods.items()}
    assert {e["hostname"] for e in endpoints} == set(pods)
    kubectl.ok(cluster, "delete", "-f", "-", stdin=STATEFUL)


DAEMON = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "agent:1"}]}
"""


def test_daemonset_runs_one_pod_per_node(cluster: ServerThread) -> None:
    assert names(cluster, "nodes") == NODES
    kubectl.ok(cluster, "apply", "-f", "-", stdin=DAEMON)
    out = kubectl.ok(cluster, "rollout", "status", "ds/agent", f"--timeout={WAIT}")
    assert 'daemon set "agent" successfully rolled out' in out
    kubectl.ok(cluster, "wait", "--for=condition=Ready", "pod", "-l", "app=agent",
               f"--timeout={WAIT}")
    pods = items(cluster, "pods", "-l", "app=agent")
    assert sorted(p["spec"]["nodeName"] for p in pods) == NODES
    ds = json.loads(kubectl.ok(cluster, "get", "ds/agent", "-o", "json"))["status"]
    assert (ds["desiredNumberScheduled"], ds["currentNumberScheduled"], ds["numberReady"]) == (
        3, 3, 3)
    kubectl.ok(cluster, "delete", "ds/agent")


@pytest.mark.slow
def test_cronjob_fires_on_its_schedule(cluster: ServerThread) -> None:
    """Every minute: the first Job comes at the next whole minute (within 60 s), named for
    its scheduled minute, and completes; the CronJob records both."""
    kubectl.ok(cluster, "create", "cronjob", "tick", "--image=busybox",
               "--schedule=*/1 * * * *")
    uid = get(cluster, f"/apis/batch/v1/namespaces/{NS}/cronjobs/tick")["metadata"]["uid"]

    def completed() -> dict[str, Any] | None:
        cronjob = get(cluster, f"/apis/batch/v1/namespaces/{NS}/cronjobs/tick")
        return cronjob if cronjob.get("status", {}).get("lastSuccessfulTime") else None

    cronjob = until(completed, "the first scheduled Job to complete", 90.0)
    [job] = items(cluster, "jobs", "-n", NS)
    scheduled = cronjob["status"]["lastScheduleTime"]
    minute = calendar.timegm(time.strptime(scheduled, "%Y-%m-%dT%H:%M:%SZ")) // 60
    assert job["metadata"]["name"] == f"tick-{minute}"
    assert job["metadata"]["annotations"][
        "batch.kubernetes.io/cronjob-scheduled-timestamp"] == scheduled
    assert job["metadata"]["ownerReferences"][0]["uid"] == uid
    assert scheduled.endswith(":00Z")
    assert any(c["type"] == "Complete" and c["status"] == "True"
               for c in job["status"]["conditions"])
    assert f"Created job tick-{minute}" in until(
        lambda: events_about(cluster, uid, "SuccessfulCreate"), "the CronJob's event", 10.0)
    kubectl.ok(cluster, "delete", "cronjob/tick")


# --- the Python clients' watches ------------------------------------------------------------------

def stage(pod: dict[str, Any]) -> tuple[str, bool, bool]:
    """(phase, scheduled on a node, Ready) of a Pod as the wire has it (camelCase)."""
    return (pod["status"].get("phase", ""), bool(pod["spec"].get("nodeName")), ready(pod))


def assert_pods_went_running_then_ready(events: list[tuple[str, dict[str, Any]]],
                                        count: int) -> None:
    """Each Pod: ADDED Pending and unscheduled, then MODIFIED only, its stages in order —
    scheduled, Running, Ready (the kubelet writes Running and, with no readiness probe, Ready
    in one status update, as a kubelet does) — never back."""
    by_pod: dict[str, list[tuple[str, tuple[str, bool, bool]]]] = {}
    for kind, pod in events:
        by_pod.setdefault(pod["metadata"]["name"], []).append((kind, stage(pod)))
    assert len(by_pod) == count
    order = [("Pending", False, False), ("Pending", True, False), ("Running", True, True)]
    for name, seen in by_pod.items():
        assert seen[0] == ("ADDED", ("Pending", False, False)), (name, seen)
        assert {kind for kind, _ in seen[1:]} == {"MODIFIED"}, (name, seen)
        stages = [s for _, s in seen]
        ranks = [order.index(s) for s in stages]
        assert ranks == sorted(ranks) and ranks[-1] == 2, (name, seen)
        assert ("Running", True, True) in stages


def all_ready(events: list[tuple[str, dict[str, Any]]], count: int) -> bool:
    latest = {pod["metadata"]["name"]: pod for _, pod in events}
    return len(latest) == count and all(ready(p) for p in latest.values())


def test_kubernetes_package_watch_sees_pods_run_and_become_ready(cluster: ServerThread) -> None:
    configuration = kubernetes.client.Configuration(host=cluster.url)
    with kubernetes.client.ApiClient(configuration) as api:
        core = kubernetes.client.CoreV1Api(api)
        rv = core.list_namespaced_pod(NS, label_selector="app=watched").metadata.resource_version
        w = kubernetes.watch.Watch()
        stream = w.stream(core.list_namespaced_pod, NS, label_selector="app=watched",
                          resource_version=rv, timeout_seconds=int(STEP_TIMEOUT_S))
        kubectl.ok(cluster, "create", "deployment", "watched", "--image=nginx", "--replicas=2")
        events: list[tuple[str, dict[str, Any]]] = []
        try:
            for event in stream:
                events.append((event["type"], event["raw_object"]))
                assert isinstance(event["object"], kubernetes.client.V1Pod)
                if all_ready(events, 2):
                    break
        finally:
            w.stop()
            stream.close()
    assert_pods_went_running_then_ready(events, 2)
    kubectl.ok(cluster, "delete", "deploy/watched")


async def test_kubernetes_asyncio_watch_sees_pods_run_and_become_ready(
        cluster: ServerThread) -> None:
    configuration = kubernetes_asyncio.client.Configuration()
    await kubernetes_asyncio.config.load_kube_config(config_file=str(cluster.kubeconfig),
                                                     client_configuration=configuration)
    async with kubernetes_asyncio.client.ApiClient(configuration) as api:
        core = kubernetes_asyncio.client.CoreV1Api(api)
        listed = await core.list_namespaced_pod(NS, label_selector="app=awatched")
        w = kubernetes_asyncio.watch.Watch()
        events: list[tuple[str, dict[str, Any]]] = []
        created = asyncio.create_task(asyncio.to_thread(
            kubectl.ok, cluster, "create", "deployment", "awatched", "--image=nginx",
            "--replicas=2"))
        try:
            async with asyncio.timeout(STEP_TIMEOUT_S):
                async for event in w.stream(core.list_namespaced_pod, NS,
                                            label_selector="app=awatched",
                                            resource_version=listed.metadata.resource_version):
                    events.append((event["type"], event["raw_object"]))
                    assert isinstance(event["object"], kubernetes_asyncio.client.V1Pod)
                    if all_ready(events, 2):
                        break
        finally:
            w.stop()
            await w.close()
            await created
    assert_pods_went_running_then_ready(events, 2)
    await asyncio.to_thread(kubectl.ok, cluster, "delete", "deploy/awatched")

