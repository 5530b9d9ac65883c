"""The StatefulSet and DaemonSet controllers with the scheduler and simulated nodes in the
loop, driven by kubectl: a StatefulSet and a DaemonSet roll out onto the fleet, roll to a new
image, and ``kubectl rollout status`` follows them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubewire.client.client import Client, create_client
from kubewire.cluster.controllers.daemonset import make_daemonset_controller
from kubewire.cluster.controllers.statefulset import make_statefulset_controller
from kubewire.cluster.nodes import FleetOptions, make_fleet
from kubewire.cluster.runtime import ClusterContext
from kubewire.cluster.scheduler.scheduler import make_scheduler
from tests.integration import kubectl
from tests.integration.controller_helpers import components_running, run_components
from tests.integration.harness import ServerThread
from tests.integration.wire import call, ok

MANIFEST = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 3
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "agent:1"}]}
"""


@pytest.fixture
async def client(server: ServerThread) -> AsyncIterator[Client]:
    async with await create_client(server.kubeconfig) as c:
        yield c


async def kubectl_ok(server: ServerThread, *args: str, stdin: str | None = None) -> str:
    done = await asyncio.to_thread(kubectl.run, server, *args, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


async def test_statefulset_and_daemonset_roll_out_on_simulated_nodes(
        server: ServerThread, client: Client) -> None:
    ctx = ClusterContext(client)
    fleet = make_fleet(ctx, FleetOptions(count=3))
    async with run_components(ctx, [fleet], ready=fleet.registered.wait), components_running(
            [make(ctx, None) for make in (
                make_scheduler, make_statefulset_controller, make_daemonset_controller)]):
        await kubectl_ok(server, "apply", "-f", "-", stdin=MANIFEST)
        out = await kubectl_ok(server, "rollout", "status", "sts/web", "--timeout=60s")
        assert "3 pods at revision web-" in out or "roll out complete" in out, out
        out = await kubectl_ok(server, "rollout", "status", "ds/agent", "--timeout=60s")
        assert 'daemon set "agent" successfully rolled out' in out
        await kubectl_ok(server, "wait", "--for=condition=Ready", "pod", "-l", "app=web",
                         "--timeout=60s")
        pods = ok(await asyncio.to_thread(call, server, "GET",
                                          "/api/v1/namespaces/default/pods"), 200)["items"]
        web = sorted(p["metadata"]["name"] for p in pods if p["metadata"]["labels"].get(
            "app") == "web")
        assert web == ["web-0", "web-1", "web-2"]
        agents = [p for p in pods if p["metadata"]["labels"].get("app") == "agent"]
        assert len({p["spec"]["nodeName"] for p in agents}) == 3 == len(agents)

        await kubectl_ok(server, "set", "image", "sts/web", "web=nginx:1.28")
        await kubectl_ok(server, "set", "image", "ds/agent", "agent=agent:2")
        await kubectl_ok(server, "rollout", "status", "sts/web", "--timeout=60s")
        await kubectl_ok(server, "rollout", "status", "ds/agent", "--timeout=60s")
        pods = ok(await asyncio.to_thread(call, server, "GET",
                                          "/api/v1/namespaces/default/pods"), 200)["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        assert {p["spec"]["containers"][0]["image"] for p in live} == {"nginx:1.28", "agent:2"}
        assert len(live) == 6
