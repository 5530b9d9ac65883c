"""The HorizontalPodAutoscaler controller against a real server, run in the test's loop with
the Deployment and ReplicaSet controllers and a stand-in kubelet: simulated CPU usage (the
pods' ``kubewire.io/cpu-usage`` annotation) above the target scales the Deployment up through
``/scale`` with kube's event and status; usage below it scales down to minReplicas once the
stabilization window passes; a missing target reports FailedGetScale."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kubewire.client import Api
from kubewire.client.client import create_client
from kubewire.cluster.controllers.hpa import HorizontalPodAutoscalerController
from kubewire.cluster.runtime import ClusterContext
from tests.integration.controller_helpers import eventually, kubectl, kubelet, running
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
    task = asyncio.create_task(controller.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


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
            hpa = await hpas.create(autoscaler("web", "web", 2, 5, 50), namespace=NS)

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
