"""The disruption controller against a real server: a budget's status from its Deployment's
scale and its pods, in step with the eviction subresource (which spends the allowance and
records ``disruptedPods``); ``kubectl drain`` held by the budget until a replacement is Ready,
as on kind; the fail-safe status for pods no controller owns."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubewire.client import Api
from kubewire.client.client import create_client
from kubewire.cluster.controllers.disruption import make_disruption_controller
from kubewire.cluster.runtime import ClusterContext
from tests.integration import kubectl as cli
from tests.integration.controller_helpers import (
    components_running,
    eventually,
    kubelet,
    running,
)
from tests.integration.harness import ServerThread
from tests.integration.wire import call

Obj = dict[str, Any]


def _until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@contextlib.asynccontextmanager
async def disruption(ctx: ClusterContext) -> AsyncIterator[None]:
    async with components_running([make_disruption_controller(ctx)]):
        yield


def deployment(name: str, replicas: int, node: str | None = None) -> Obj:
    labels = {"app": name}
    spec: Obj = {"containers": [{"name": "c", "image": "nginx"}],
                 "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}


def budget(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}}, **spec}}


def status_is(pdbs: Api[Obj], name: str, **want: Any) -> Any:
    async def probe() -> Obj | None:
        got = await pdbs.get(name, namespace="default")
        status = got.get("status") or {}
        return got if all(status.get(k) == v for k, v in want.items()) else None
    return probe


async def test_budget_status_follows_the_deployment_and_evictions(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        pdbs = Api(dict, client=client, api_version="policy/v1", kind="PodDisruptionBudget")
        pods = Api(dict, client=client, api_version="v1", kind="Pod")
        deps = Api(dict, client=client, api_version="apps/v1", kind="Deployment")
        async with running(server) as ctx, kubelet(pods), disruption(ctx):
            await pdbs.create(budget("web", maxUnavailable="33%"), namespace="default")
            got = await eventually(status_is(pdbs, "web", expectedPods=0), what="no pods")
            assert got["status"]["disruptionsAllowed"] == 0
            await deps.create(deployment("web", 3), namespace="default")
            got = await eventually(status_is(pdbs, "web", currentHealthy=3,
                                             disruptionsAllowed=1), what="three healthy", timeout=5)
            assert got["status"]["expectedPods"] == 3
            assert got["status"]["desiredHealthy"] == 2  # 3 - ceil(0.99)
            assert got["status"]["observedGeneration"] == 1
            [cond] = got["status"]["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == (
                "DisruptionAllowed", "True", "SufficientPods")
            # the eviction subresource spends the allowance the controller computed
            victim = (await pods.list(namespace="default", label_selector="app=web")).items[0]
            name = victim["metadata"]["name"]
            await _evict(server, name)
            # the replacement comes up Ready; the disrupted entry goes with its pod
            got = await eventually(status_is(pdbs, "web", currentHealthy=3,
                                             disruptionsAllowed=1), what="healed")
            assert name not in (got["status"].get("disruptedPods") or {})
            # scaling the Deployment moves the expected count
            await deps.patch("web", {"spec": {"replicas": 5}}, namespace="default")
            got = await eventually(status_is(pdbs, "web", expectedPods=5, currentHealthy=5),
                                   what="five expected")
            assert got["status"]["desiredHealthy"] == 3  # 5 - ceil(1.65)
            assert got["status"]["disruptionsAllowed"] == 2
            # a spec change: observedGeneration follows
            await pdbs.patch("web", {"spec": {"maxUnavailable": 0}}, namespace="default")
            got = await eventually(status_is(pdbs, "web", observedGeneration=2,
                                             disruptionsAllowed=0), what="generation 2")
            assert got["status"]["conditions"][0]["reason"] == "InsufficientPods"


async def _evict(server: ServerThread, name: str) -> None:
    done = await asyncio.to_thread(
        call, server, "POST", f"/api/v1/namespaces/default/pods/{name}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction",
         "metadata": {"name": name, "namespace": "default"}})
    assert done.status == 201, done


async def test_unmanaged_pods_with_a_percentage_fail_safe(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        pdbs = Api(dict, client=client, api_version="policy/v1", kind="PodDisruptionBudget")
        pods = Api(dict, client=client, api_version="v1", kind="Pod")
        events = Api(dict, client=client, api_version="v1", kind="Event")
        await pods.create({"metadata": {"name": "lone", "labels": {"app": "lone"}},
                           "spec": {"containers": [{"name": "c", "image": "x"}]}},
                          namespace="default")
        async with running(server) as ctx, kubelet(pods), disruption(ctx):
            await pdbs.create(budget("lone", minAvailable=1), namespace="default")
            await eventually(status_is(pdbs, "lone", expectedPods=1, currentHealthy=1,
                                       disruptionsAllowed=0, desiredHealthy=1),
                             what="integer minAvailable counts pods")
            # an owner that does not exist: kube's fail-safe
            await pods.patch("lone", {"metadata": {"ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "ghost",
                "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]}},
                namespace="default")
            await pdbs.patch("lone", {"spec": {"minAvailable": "50%"}}, namespace="default")

            async def failed() -> Obj | None:
                got = await pdbs.get("lone", namespace="default")
                conds = (got.get("status") or {}).get("conditions") or []
                return got if conds and conds[0].get("reason") == "SyncFailed" else None

            got = await eventually(failed, what="SyncFailed")
            cond = got["status"]["conditions"][0]
            assert cond["status"] == "False"
            assert cond["message"] == 'found no controllers for pod "lone"'
            assert got["status"]["disruptionsAllowed"] == 0

            async def warned() -> list[Obj]:
                listed = await events.list(namespace="default")
                return [e for e in listed.items
                        if e["reason"] == "CalculateExpectedPodCountFailed"]

            [event] = await eventually(warned, what="event")
            assert event["message"] == ('Failed to calculate the number of expected pods: '
                                        'found no controllers for pod "lone"')
            assert event["source"] == {"component": "controllermanager"}
            assert event["involvedObject"]["kind"] == "PodDisruptionBudget"


async def test_kubectl_drain_waits_for_the_budget(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        pdbs = Api(dict, client=client, api_version="policy/v1", kind="PodDisruptionBudget")
        pods = Api(dict, client=client, api_version="v1", kind="Pod")
        nodes = Api(dict, client=client, api_version="v1", kind="Node")
        deps = Api(dict, client=client, api_version="apps/v1", kind="Deployment")
        await nodes.create({"metadata": {"name": "n1"}})
        async with running(server) as ctx, kubelet(pods), disruption(ctx):
            await deps.create(deployment("web", 2, node="n1"), namespace="default")
            await pdbs.create(budget("web", minAvailable=2), namespace="default")
            await eventually(status_is(pdbs, "web", currentHealthy=2, desiredHealthy=2),
                             what="budget counted")
            held = await asyncio.to_thread(cli.run, server, "drain", "n1", "--force",
                                           "--timeout=3s")
            assert held.returncode != 0
            assert "Cannot evict pod as it would violate the pod's disruption budget." \
                in held.stderr, held.stderr
            assert "node/n1 cordoned" in held.stdout
            await pdbs.patch("web", {"spec": {"minAvailable": 1}}, namespace="default")
            drained = await asyncio.to_thread(cli.run, server, "drain", "n1", "--force",
                                              "--timeout=60s")
            assert drained.returncode == 0, drained.stderr
            assert drained.stdout.count("evicted") == 2, drained.stdout
            assert "node/n1 drained" in drained.stdout


@pytest.mark.parametrize("mode", ["AlwaysAllow", "RBAC"])
def test_drain_on_a_running_cluster_waits_for_replacements(
        make_server: Callable[..., ServerThread], mode: str) -> None:
    """As on a two-node kind cluster: the Deployment's pods on the drained node are evicted
    one at a time, each after the budget allows it (a replacement Ready on the other node)."""
    server = make_server(cluster=True, nodes=2, insecure_http=False, authorization_mode=mode)
    cli.ok(server, "create", "deployment", "web", "--image=nginx", "--replicas=4")
    cli.ok(server, "rollout", "status", "deploy/web", "--timeout=60s")
    cli.ok(server, "create", "pdb", "web", "--selector=app=web", "--max-unavailable=1")

    def allowed() -> bool:
        pdb = json.loads(cli.ok(server, "get", "pdb", "web", "-o", "json"))
        status = pdb.get("status") or {}
        return status.get("disruptionsAllowed") == 1 and status.get("expectedPods") == 4

    _until(allowed, "the budget computed")
    table = cli.ok(server, "get", "pdb", "web")
    assert table.split("\n")[1].split()[:4] == ["web", "N/A", "1", "1"], table
    pods = json.loads(cli.ok(server, "get", "pods", "-l", "app=web", "-o", "json"))["items"]
    node = pods[0]["spec"]["nodeName"]
    on_node = [p for p in pods if p["spec"]["nodeName"] == node]
    done = cli.run(server, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
                   "--timeout=90s")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(" evicted") == len(on_node), done.stdout
    assert f"node/{node} drained" in done.stdout
    cli.ok(server, "rollout", "status", "deploy/web", "--timeout=60s")
    after = json.loads(cli.ok(server, "get", "pods", "-l", "app=web", "-o", "json"))["items"]
    assert all(p["spec"]["nodeName"] != node for p in after)
