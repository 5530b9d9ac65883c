"""What the workload-controller tests share: a client and a ClusterContext against the test
server, controllers run in the test's loop, and the kubelet's part done by hand (pods marked
Ready by a status patch, as a kubelet would send it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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
async def run_components(ctx: ClusterContext, components: Sequence[Component], *,
                         ready: Callable[[], Awaitable[Any]] | None = None,
                         ) -> AsyncIterator[ClusterContext]:
    """``components`` running in the test's loop (see ``components_running``); on exit they
    are cancelled, awaited, and ``ctx`` closed."""
    try:
        async with components_running(components, ready=ready):
            yield ctx
    finally:
        await ctx.close()


@contextlib.asynccontextmanager
async def components_running(components: Sequence[Component], *,
                             ready: Callable[[], Awaitable[Any]] | None = None,
                             ) -> AsyncIterator[None]:
    """``components`` running in the test's loop, their ClusterContext left open (for one
    started later beside others, or a context closed by its owner).

    ``ready`` (e.g. ``fleet.registered.wait``) is awaited before the body, for at most
    ``READY_S``; a component that ends first raises its error then rather than at the
    timeout. On exit each is cancelled and must end by that cancellation within ``STOP_S``
    (a component works until cancelled: one that swallowed its cancellation once ran on)."""
    tasks = [asyncio.create_task(c.run(), name=c.name) for c in components]
    try:
        if ready is not None:
            await _ready(ready, tasks)
        yield
    finally:
        for task in tasks:
            task.cancel()
        failures: list[BaseException] = []
        for task in tasks:  # every one awaited, the first failure raised
            try:
                await _stopped(task)
            except Exception as failure:  # raised below, after the others
                failures.append(failure)
        if failures:
            raise failures[0]


READY_S = 60.0
STOP_S = 10.0


async def _ready(ready: Callable[[], Awaitable[Any]], tasks: list[asyncio.Task[None]]) -> None:
    waiting = asyncio.ensure_future(ready())
    try:
        done, _ = await asyncio.wait({waiting, *tasks}, timeout=READY_S,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    for task in tasks:
        if task in done:
            task.result()
            raise AssertionError(f"{task.get_name()} ended before it was ready")
    assert waiting in done, f"not ready within {READY_S} s"
    waiting.result()


async def _stopped(task: asyncio.Task[None]) -> None:
    # asyncio.wait: a timeout cancels no one (an awaited task would take this one's
    # cancellation, and a component that swallows it would hang the test)
    await asyncio.wait({task}, timeout=STOP_S)
    if not task.done():
        raise AssertionError(f"{task.get_name()} still runs {STOP_S} s after its cancellation")
    if not task.cancelled():
        task.result()
        raise AssertionError(f"{task.get_name()} returned instead of ending by cancellation")


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
