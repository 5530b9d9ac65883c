"""What the workload-controller tests share: a client and a ClusterContext against the test
server, controllers run in the test's loop, and the kubelet's part done by hand (pods marked
Ready by a status patch, as a kubelet would send it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from kubewire.client import Api
from kubewire.client.client import create_client
from kubewire.cluster.controllers.deployment import make_deployment_controller
from kubewire.cluster.controllers.replicaset import make_replicaset_controller
from kubewire.cluster.runtime import ClusterContext, Component
from tests.integration.harness import ServerThread

Obj = dict[str, Any]


@contextlib.asynccontextmanager
async def running(server: ServerThread, *, deployments: bool = True,
                  ) -> AsyncIterator[ClusterContext]:
    """A ClusterContext with the ReplicaSet (and Deployment) controllers running."""
    async with await create_client(server.kubeconfig) as client:
        ctx = ClusterContext(client)
        components: list[Component] = [make_replicaset_controller(ctx, {})]
        if deployments:
            components.append(make_deployment_controller(ctx, {}))
        async with run_components(ctx, components):
            yield ctx


@contextlib.asynccontextmanager
async def run_components(ctx: ClusterContext,
                         components: list[Component]) -> AsyncIterator[ClusterContext]:
    """``components`` running in the test's loop; on exit they are cancelled, awaited, and
    ``ctx`` closed."""
    tasks = [asyncio.create_task(c.run()) for c in components]
    try:
        yield ctx
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await ctx.close()


async def eventually(probe: Callable[[], Any], timeout: float = 15.0,
                     what: str = "condition") -> Any:
    """Poll an async ``probe`` until it returns something truthy."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while asyncio.get_running_loop().time() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


def stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def mark_ready(pods: Api[Obj], pod: Obj) -> Obj:
    """Report the pod Running and Ready, as a kubelet would."""
    meta = pod["metadata"]
    now = stamp()
    conditions = [{"type": t, "status": "True", "lastTransitionTime": now}
                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
    return await pods.patch_status(meta["name"], {"status": {
        "phase": "Running", "conditions": conditions, "startTime": now}},
        namespace=meta["namespace"])


async def owned_pods(pods: Api[Obj], namespace: str, uid: str) -> list[Obj]:
    listed = await pods.list(namespace=namespace)
    return [p for p in listed.items
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
            and not p["metadata"].get("deletionTimestamp")]


@contextlib.asynccontextmanager
async def kubelet(pods: Api[Obj], namespace: str = "default") -> AsyncIterator[None]:
    """Stand-in for the simulated kubelet: every live pod of ``namespace`` is reported Ready
    soon after it appears."""

    async def loop() -> None:
        while True:
            listed = await pods.list(namespace=namespace)
            for pod in listed.items:
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                conds = (pod.get("status") or {}).get("conditions") or []
                if not any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in conds):
                    with contextlib.suppress(Exception):
                        await mark_ready(pods, pod)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def kubectl(server: ServerThread, *args: str) -> str:
    """kubectl off the event loop (the controllers keep running); asserts success."""
    from tests.integration import kubectl as cli

    done = await asyncio.to_thread(cli.run, server, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout
