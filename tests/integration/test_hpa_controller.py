"""The HorizontalPodAutoscaler controller against a real server, run in the test's loop with
the Deployment and ReplicaSet controllers and a stand-in kubelet: simulated CPU usage (the
pods' ``kubewire.io/cpu-usage`` annotation) above the target scales the Deployment up through
``/scale`` with kube's event and status; usage below it scales down to minReplicas once the
stabilization window passes; a missing target reports FailedGetScale."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubewire.client import Api
from kubewire.client.client import create_client
from kubewire.cluster.controllers.hpa import HorizontalPodAutoscalerController
from kubewire.cluster.runtime import ClusterContext
from tests.integration.controller_helpers import (
    components_running,
    eventually,
    kubectl,
    kubelet,
    running,
)
from tests.integration.harness import ServerThread

Obj = dict[str, Any]
NS = "default"
REASON = "cpu resource utilization (percentage of request) above target"


def deployment(name: str, replicas: int, usage: str) -> Obj:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels,
                                               "annotations": {"kubewire.io/cpu-usage": usage}},
                                  "spec": {"containers": [{
                                      "name": "c", "image": "nginx",
                                      "resources": {"requests": {"cpu": "100m"}}}]}}}}


def autoscaler(name: str, target: str, low: int, high: int, percent: int) -> Obj:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                        "name": target},
                     "minReplicas": low, "maxReplicas": high,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": percent}}}]}}


@contextlib.asynccontextmanager
async def autoscaling(ctx: ClusterContext, stabilization_s: float = 300.0,
                      ) -> AsyncIterator[None]:
    controller = HorizontalPodAutoscalerController(
        ctx, sync_period_s=0.2, downscale_stabilization_s=stabilization_s)
    async with components_running([controller]):
        yield


@pytest.fixture
def server(make_server: Any) -> ServerThread:
    """A server that serves ``metrics.k8s.io`` (as kind with metrics-server), where the
    controller reads the pods' usage, without the cluster's own components."""
    return make_server(metrics_api=True)


def condition(hpa: Obj, kind: str) -> Obj:
    return next((c for c in (hpa.get("status") or {}).get("conditions") or []
                 if c["type"] == kind), {})


async def test_scales_up_on_usage_and_down_after_stabilization(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        deploys = Api(dict, client=client, api_version="apps/v1", kind="Deployment")
        hpas = Api(dict, client=client, api_version="autoscaling/v2",
                   kind="HorizontalPodAutoscaler")
        pods = Api(dict, client=client, api_version="v1", kind="Pod")
        events = Api(dict, client=client, api_version="v1", kind="Event")
        async with running(server) as ctx, kubelet(pods), autoscaling(ctx, 1.0):
            await deploys.create(deployment("web", 2, "90m"), namespace=NS)
            # maxReplicas 4: 2 pods at 90% of a 50% target ask for 4 (3.6), and 4 pods still at
            # 90% would ask for 8; capped at 4 no fifth pod can join while the usage is lowered
            hpa = await hpas.create(autoscaler("web", "web", 2, 4, 50), namespace=NS)

            async def scaled_up() -> Obj | None:
                got = await hpas.get("web", namespace=NS)
                return got if (got.get("status") or {}).get("desiredReplicas") == 4 else None

            got = await eventually(scaled_up, timeout=20, what="scale to 4")
            assert (await deploys.get("web", namespace=NS))["spec"]["replicas"] == 4
            assert got["status"]["currentReplicas"] == 2
            assert got["status"]["currentMetrics"] == [{"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageValue": "90m", "averageUtilization": 90}}}]
            assert got["status"]["lastScaleTime"]
            assert condition(got, "AbleToScale")["reason"] == "SucceededRescale"
            assert condition(got, "ScalingActive") | {"lastTransitionTime": ""} == {
                "type": "ScalingActive", "status": "True", "lastTransitionTime": "",
                "reason": "ValidMetricFound",
                "message": "the HPA was able to successfully calculate a replica count from "
                           "cpu resource utilization (percentage of request)"}
            # kubectl reads the same through autoscaling/v1 and the Table
            table = await kubectl(server, "get", "hpa", "web")
            assert "cpu: 90%/50%" in table.splitlines()[1]
            # usage falls (on all four pods): after the (1 s) stabilization window, down to
            # minReplicas

            async def four_ready() -> bool:
                got = await deploys.get("web", namespace=NS)
                return (got.get("status") or {}).get("readyReplicas") == 4

            await eventually(four_ready, timeout=20, what="four ready pods")
            await kubectl(server, "annotate", "pods", "-l", "app=web", "--overwrite",
                          "kubewire.io/cpu-usage=10m")

            async def scaled_down() -> Obj | None:
                got = await hpas.get("web", namespace=NS)
                status = got.get("status") or {}
                return got if status.get("desiredReplicas") == 2 else None

            got = await eventually(scaled_down, timeout=20, what="scale down to 2")
            assert (await deploys.get("web", namespace=NS))["spec"]["replicas"] == 2
            assert condition(got, "ScalingLimited")["reason"] == "TooFewReplicas"
        listed = await events.list(namespace=NS)
        mine = [(e["reason"], e["message"], e["source"]) for e in listed.items
                if e["involvedObject"].get("uid") == hpa["metadata"]["uid"]]
        assert ("SuccessfulRescale", f"New size: 4; reason: {REASON}",
                {"component": "horizontal-pod-autoscaler"}) in mine
        assert ("SuccessfulRescale", "New size: 2; reason: All metrics below target",
                {"component": "horizontal-pod-autoscaler"}) in mine


async def test_missing_target_reports_failed_get_scale(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        hpas = Api(dict, client=client, api_version="autoscaling/v2",
                   kind="HorizontalPodAutoscaler")
        ctx = ClusterContext(client)
        try:
            async with autoscaling(ctx):
                await hpas.create(autoscaler("lost", "nope", 1, 3, 50), namespace=NS)

                async def failed() -> Obj | None:
                    got = await hpas.get("lost", namespace=NS)
                    return got if condition(got, "AbleToScale").get("status") == "False" \
                        else None

                got = await eventually(failed, timeout=20, what="FailedGetScale")
        finally:
            await ctx.close()
        able = condition(got, "AbleToScale")
        assert able["reason"] == "FailedGetScale"
        assert able["message"] == ("the HPA controller was unable to get the target's current "
                                   'scale: deployments.apps "nope" not found')


async def test_without_the_metrics_api_scaling_is_inactive(make_server: Any) -> None:
    """A server without metrics.k8s.io (kube without metrics-server): the metrics client's
    error in kube's words, no rescale."""
    server = make_server()
    async with await create_client(server.kubeconfig) as client:
        deploys = Api(dict, client=client, api_version="apps/v1", kind="Deployment")
        hpas = Api(dict, client=client, api_version="autoscaling/v2",
                   kind="HorizontalPodAutoscaler")
        pods = Api(dict, client=client, api_version="v1", kind="Pod")
        async with running(server) as ctx, kubelet(pods), autoscaling(ctx):
            await deploys.create(deployment("web", 2, "190m"), namespace=NS)
            await hpas.create(autoscaler("web", "web", 1, 5, 50), namespace=NS)

            async def inactive() -> Obj | None:
                got = await hpas.get("web", namespace=NS)
                return got if condition(got, "ScalingActive").get("status") == "False" \
                    else None

            got = await eventually(inactive, timeout=20, what="ScalingActive False")
        active = condition(got, "ScalingActive")
        assert active["reason"] == "FailedGetResourceMetric"
        assert active["message"].startswith(
            "the HPA was unable to compute the replica count: failed to get cpu utilization: "
            "unable to get metrics for resource cpu: unable to fetch metrics from resource "
            "metrics API: ")
        assert (await deploys.get("web", namespace=NS))["spec"]["replicas"] == 2


def test_kubectl_autoscale_on_a_cluster_under_rbac(make_server: Any) -> None:
    """``kubewire serve``'s components under RBAC: the controller, as its service account
    (kube's system:controller:horizontal-pod-autoscaler role), scales a Deployment whose pods
    use half their CPU request against a 20% target (kube's 15 s sync period: one turn)."""
    from tests.integration import kubectl as cli

    server = make_server(cluster=True, insecure_http=False, authorization_mode="RBAC")
    cli.ok(server, "create", "deployment", "web", "--image=nginx", "--replicas=1")
    cli.ok(server, "set", "resources", "deployment/web", "--requests=cpu=100m")
    cli.ok(server, "rollout", "status", "deploy/web", "--timeout=60s")
    cli.ok(server, "autoscale", "deploy/web", "--min=1", "--max=4", "--cpu-percent=20")
    # 50% / 20% = 2.5: ceil(2.5 x 1) = 3, within max(2 x 1, 4)
    cli.ok(server, "wait", "--for=jsonpath={.spec.replicas}=3", "deploy/web", "--timeout=60s")
    cli.ok(server, "rollout", "status", "deploy/web", "--timeout=60s")
    described = cli.ok(server, "describe", "hpa", "web")
    assert "SuccessfulRescale" in described and f"New size: 3; reason: {REASON}" in described


def test_the_controller_managers_flags_reach_the_controller(make_server: Any) -> None:
    """``--horizontal-pod-autoscaler-sync-period`` 300ms: a turn well before kube's 15 s;
    ``--horizontal-pod-autoscaler-tolerance`` 0.5: a ratio of 1.4 leaves the target alone,
    1.9 scales it; ``--horizontal-pod-autoscaler-downscale-stabilization`` 0s."""
    import json

    from tests.integration import kubectl as cli

    server = make_server(cluster=True, hpa_sync_period_s=0.3, hpa_tolerance=0.5,
                         hpa_downscale_stabilization_s=0.0)
    names = {"calm": ("140m", 2), "hot": ("190m", 2), "cool": ("10m", 4)}
    for name, (usage, replicas) in names.items():
        cli.ok(server, "apply", "-f", "-", stdin=json.dumps(deployment(name, replicas, usage)))
    for name in names:
        cli.ok(server, "rollout", "status", f"deploy/{name}", "--timeout=60s")
    for name in names:  # each HPA's first turn: one sync period after it is added
        cli.ok(server, "apply", "-f", "-", stdin=json.dumps(autoscaler(name, name, 1, 8, 100)))
    # ceil(1.9 x 2) = 4 within seconds (a 15 s period would not have had its first turn)
    cli.ok(server, "wait", "--for=jsonpath={.status.desiredReplicas}=4", "hpa/hot",
           "--timeout=10s")
    cli.ok(server, "wait", "--for=jsonpath={.status.currentMetrics[0].resource.current"
           ".averageUtilization}=140", "hpa/calm", "--timeout=10s")
    # --horizontal-pod-autoscaler-downscale-stabilization 0s: down at once (5m0s would keep
    # the first turn's recommendation, the current 4, for five minutes)
    cli.ok(server, "wait", "--for=jsonpath={.spec.replicas}=1", "deploy/cool", "--timeout=10s")
    calm = json.loads(cli.ok(server, "get", "hpa/calm", "-o", "json"))
    assert calm["status"]["desiredReplicas"] == 2
    assert cli.ok(server, "get", "deploy/calm", "-o", "jsonpath={.spec.replicas}") == "2"


def test_controller_manager_process_takes_the_flags(make_server: Any) -> None:
    """``kubewire controller-manager --horizontal-pod-autoscaler-sync-period 300ms`` runs the
    HPA controller against a server that runs every other component: it rescales within
    seconds, not kube's 15 s."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from tests.integration import kubectl as cli

    server = make_server(cluster=True,
                         controllers=("*", "-horizontal-pod-autoscaler-controller"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen(
        [sys.executable, "-m", "kubewire.cli", "controller-manager", "--kubeconfig",
         str(server.kubeconfig), "--controllers", "horizontal-pod-autoscaler-controller",
         "--nodes", "0", "--horizontal-pod-autoscaler-sync-period", "300ms",
         "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        cli.ok(server, "apply", "-f", "-", stdin=json.dumps(deployment("hot", 2, "190m")))
        cli.ok(server, "rollout", "status", "deploy/hot", "--timeout=60s")
        cli.ok(server, "apply", "-f", "-", stdin=json.dumps(autoscaler("hot", "hot", 1, 8, 100)))
        cli.ok(server, "wait", "--for=jsonpath={.spec.replicas}=4", "deploy/hot",
               "--timeout=10s")
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
